"""lit configuration for niroc's golden CLI tests (tests/cli/).

Each test file carries its own RUN lines: `.onnxtxt` files (ONNX text; `#` comments) and `.niro`
files (Niro assembly; `//` comments) are the input and the test at once; `.test` files run niroc
on shared inputs in testdata/cli/. Run `lit -v tests/cli` (or `make test`, via test_lit.py).

Substitutions:
  %niroc         the niroc console script of this checkout's venv
  FileCheck      the `filecheck` from PyPI (filecheck also works)
  not            lit's builtin: succeed when the command fails (any non-zero exit)
  %exit N        tools/expect_exit.py: succeed only when the command exits with exactly N
  %onnx          tools/onnxtxt_to_onnx.py SRC DST: write the binary .onnx of an ONNX text file
  %roundtrip     dump %s -> parse -> dump; the two dumps must be identical
  %testdata      testdata/cli/
  %python        the venv's python
"""

# ruff: noqa: F821 - lit provides `config` and `lit_config`
import os
import shutil
import sys

import lit.formats

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the venv lit runs in (.venv, or .venv-latest under `make test-latest`)
VENV_BIN = os.path.join(sys.prefix, "bin") if sys.prefix != sys.base_prefix else os.path.join(ROOT, ".venv", "bin")
TOOLS = os.path.join(ROOT, "tests", "cli", "tools")


def _tool(name: str) -> str:
    candidate = os.path.join(VENV_BIN, name)
    if os.path.exists(candidate):
        return candidate
    found = shutil.which(name)
    if found is None:
        lit_config.fatal(f"cannot find '{name}' in {VENV_BIN} or on PATH; run `make install`")
    return found


config.name = "niroc-cli"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".onnxtxt", ".niro", ".test"]
config.excludes = ["tools", "__pycache__", "lit.cfg.py", "test_lit.py"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
# NOTE: %t files go under build/ (git-ignored), never next to the tests; test_lit.py gives each
# run its own folder (NIROC_LIT_EXEC_ROOT) so simultaneous runs in one checkout do not collide.
config.test_exec_root = os.environ.get("NIROC_LIT_EXEC_ROOT") or os.path.join(
    ROOT, "build", "lit", "cli"
)

python = os.path.join(VENV_BIN, "python") if os.path.exists(VENV_BIN) else sys.executable
niroc = _tool("niroc")
filecheck = _tool("filecheck")

config.substitutions.append(("%niroc", niroc))
config.substitutions.append(("%exit", f"{python} {os.path.join(TOOLS, 'expect_exit.py')}"))
config.substitutions.append(("%onnx", f"{python} {os.path.join(TOOLS, 'onnxtxt_to_onnx.py')}"))
config.substitutions.append(
    (
        "%roundtrip",
        f"{niroc} dump %s -o %t.first.niro && {niroc} dump %t.first.niro -o %t.second.niro"
        " && diff %t.first.niro %t.second.niro",
    )
)
config.substitutions.append(("%testdata", os.path.join(ROOT, "testdata", "cli")))
config.substitutions.append(("%python", python))
config.substitutions.append(("FileCheck", filecheck))

# The tools niroc may run (iree-opt, iree-compile) live next to it in the venv. Terminal
# detection must see pipes, so no FORCE_COLOR; a fixed width keeps rich tables stable.
config.environment["PATH"] = os.pathsep.join([VENV_BIN, os.environ.get("PATH", "")])
config.environment["COLUMNS"] = "100"
config.environment["PYTHONIOENCODING"] = "utf-8"
for name in ("FORCE_COLOR", "NO_COLOR", "NIROC_PROGRESS_DELAY"):
    config.environment.pop(name, None)
