"""The README's console examples are real: each `$ command` runs (in a copy of testdata/cli,
with the venv's tools on PATH) and prints exactly what the README shows below it. A
`$ echo $?` line checks the exit code of the command before it.
"""

import os
import re
import shutil
import subprocess

from .niroc_runner import ROOT, VENV_BIN

CONSOLE_BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def readme_blocks() -> list[list[tuple[str, str]]]:
    """Per console block, its (shell command, expected output) pairs, in order."""
    blocks = []
    for block in CONSOLE_BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8")):
        raw_lines = block.rstrip().split("\n")
        indent = " " * (len(raw_lines[0]) - len(raw_lines[0].lstrip()))  # a block in a list
        lines = [line.removeprefix(indent) for line in raw_lines]
        starts = [index for index, line in enumerate(lines) if line.startswith("$ ")]
        examples: list[tuple[str, list[str]]] = []
        for position, start in enumerate(starts):
            end = starts[position + 1] if position + 1 < len(starts) else len(lines)
            command, output = lines[start][2:], lines[start + 1 : end]
            if command == "echo $?":
                previous_command, previous_output = examples.pop()
                examples.append((f"{previous_command}; echo $?", previous_output + output))
            else:
                examples.append((command, output))
        blocks.append([(command, "\n".join(output)) for command, output in examples])
    return blocks


BLOCKS = readme_blocks()


def test_the_readme_has_examples():
    assert sum(len(block) for block in BLOCKS) >= 10


def test_readme_examples_print_what_the_readme_shows(tmp_path):
    """All blocks in order in one folder: later commands use earlier outputs (mlp.mlir)."""
    for path in (ROOT / "testdata" / "cli").iterdir():
        shutil.copy(path, tmp_path / path.name)
    environment = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("FORCE_COLOR", "NIROC_PROGRESS_DELAY"):
        environment.pop(name, None)
    has_mlir_opt = shutil.which("mlir-opt", path=environment["PATH"]) is not None
    for block in BLOCKS:
        for command, expected in block:
            if "--mlir-opt mlir-opt" in command and not has_mlir_opt:
                continue  # NOTE: the README says this line needs an upstream mlir-opt on PATH
            completed = subprocess.run(
                command,
                shell=True,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=environment,
                timeout=300,
            )
            assert (command, completed.stdout.rstrip("\n")) == (command, expected)
