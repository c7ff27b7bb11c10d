"""Hand-off to an external mlir-opt compatible tool (`iree-opt`, `mlir-opt-NN`, ...).

The module is written to a temporary `.mlir` file (streamed, blobs included) and the tool runs
on it with the user's pass pipeline. A tool that is missing or exits non-zero becomes a
LoweringError quoting the tool's first error lines and its exit code, so the user reads one
clear message rather than a wall of stderr.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

from .errors import LoweringError
from .output import LoweredModule

__all__ = ["find_tool", "run_opt_tool"]

_QUOTED_ERROR_LINES = 6


def find_tool(tool: str) -> str | None:
    """The tool's path: as given when it is a path, else on PATH, else next to this Python
    (a virtualenv's `bin/`, where the iree-base-compiler wheel puts `iree-opt`). A bare
    `mlir-opt` that is not installed falls back to the newest Debian-style `mlir-opt-NN`."""
    if os.sep in tool:
        return tool if os.access(tool, os.X_OK) else None
    found = shutil.which(tool)
    if found:
        return found
    beside = Path(sys.executable).parent / tool
    if os.access(beside, os.X_OK):
        return str(beside)
    if tool == "mlir-opt":
        return _newest_versioned(tool)
    return None


def _newest_versioned(tool: str) -> str | None:
    """The `tool-NN` on PATH with the highest NN (Debian installs `mlir-opt-18`, ...)."""
    best: tuple[int, str] | None = None
    pattern = re.compile(rf"{re.escape(tool)}-(\d+)")
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        try:
            entries = os.listdir(directory or ".")
        except OSError:
            continue
        for entry in entries:
            match = pattern.fullmatch(entry)
            path = os.path.join(directory, entry)
            if match and os.access(path, os.X_OK) and (best is None or int(match[1]) > best[0]):
                best = (int(match[1]), path)
    return None if best is None else best[1]


def _error_excerpt(stderr: str) -> list[str]:
    """The first `error:` line and what follows it (the source line, notes), a few lines."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if "error:" in line:
            return lines[index : index + _QUOTED_ERROR_LINES]
    return lines[:_QUOTED_ERROR_LINES]


def run_opt_tool(
    source: LoweredModule | str | bytes | os.PathLike,
    *,
    tool: str = "iree-opt",
    pass_pipeline: str | None = None,
    output_stream: BinaryIO | None = None,
    allow_unregistered: bool | None = None,
    extra_args: tuple[str, ...] = (),
) -> bytes:
    """Runs `tool` on `source` and returns its stdout (also written to `output_stream`).

    `source` is a LoweredModule, MLIR text (`str` or `bytes`), or a path (`os.PathLike`, e.g. a
    `pathlib.Path`; a plain `str` is always text). `pass_pipeline` goes to the tool as
    `--pass-pipeline=...`. `allow_unregistered` adds `--allow-unregistered-dialect`; by default it
    is on exactly when a LoweredModule kept generic ops.
    """
    executable = find_tool(tool)
    if executable is None:
        raise LoweringError(
            f"cannot run '{tool}': it is not on PATH nor next to {sys.executable}",
            notes=["install iree-base-compiler (iree-opt) or an LLVM package with mlir-opt"],
        )
    if allow_unregistered is None:
        allow_unregistered = isinstance(source, LoweredModule) and source.has_generic_ops
    command = [executable]
    if pass_pipeline is not None:
        command.append(f"--pass-pipeline={pass_pipeline}")
    if allow_unregistered:
        command.append("--allow-unregistered-dialect")
    command.extend(extra_args)
    with tempfile.TemporaryDirectory(prefix="niroc-opt-") as scratch:
        if isinstance(source, os.PathLike):
            input_path = os.fspath(source)
        else:
            input_path = os.path.join(scratch, "input.mlir")
            with open(input_path, "wb") as handle:
                if isinstance(source, LoweredModule):
                    source.write_text(handle)
                elif isinstance(source, str):
                    handle.write(source.encode())
                else:
                    handle.write(source)
        completed = subprocess.run([*command, input_path], capture_output=True, check=False)
    if completed.returncode != 0:
        stderr = completed.stderr.decode(errors="replace")
        excerpt = _error_excerpt(stderr)
        first = excerpt[0] if excerpt else "(no output on stderr)"
        raise LoweringError(
            f"{tool} failed with exit code {completed.returncode}: {first}",
            notes=excerpt[1:],
        )
    if output_stream is not None:
        output_stream.write(completed.stdout)
    return completed.stdout
