"""Running the real `niroc` console script from tests, and checking its failure contract.

The contract every error path keeps (and tests of hostile input build on):

- exit code 1 for bad input, failed verification or lowering, an unwritable output; 2 for usage;
- stderr starts with ONE line naming the file: `error: FILE: what is wrong`, or for a syntax
  error in Niro assembly `FILE:LINE:COL: error: what` followed by the source line and a caret;
  `note: ...` lines may follow;
- never a Python traceback (unless --debug), and never `error: internal error: ...`, which is
  what an exception niroc did not expect turns into (a bug, not a diagnosis);
- stdout stays empty, and no output file is created or changed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.prefix) / "bin" if sys.prefix != sys.base_prefix else ROOT / ".venv" / "bin"
"""The tools of the venv running the tests (.venv, or .venv-latest under `make test-latest`)."""
NIROC = VENV_BIN / "niroc"

__all__ = ["NIROC", "ROOT", "VENV_BIN", "run_niroc", "assert_clean_failure"]


def run_niroc(
    *arguments: str, cwd: Path, timeout: float = 120, environment: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run `niroc ARGUMENTS...` in `cwd` as a user would (venv tools on PATH, text output)."""
    env = dict(os.environ if environment is None else environment)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("NIROC_PROGRESS_DELAY", None)
    return subprocess.run(
        [str(NIROC), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        errors="replace",
        env=env,
        timeout=timeout,
    )


def assert_clean_failure(
    completed: subprocess.CompletedProcess, filename: str, *, exit_code: int = 1
) -> str:
    """Assert the failure contract above for a run on `filename`; return the error line."""
    assert completed.returncode == exit_code, completed.stderr
    assert completed.stdout == "", completed.stdout
    assert "Traceback" not in completed.stderr, completed.stderr
    assert "internal error" not in completed.stderr, completed.stderr
    lines = completed.stderr.splitlines()
    assert lines, "no error message"
    first = lines[0]
    named = first.startswith(f"error: {filename}: ") or re.match(
        rf"{re.escape(filename)}:\d+:\d+: error: ", first
    )
    assert named, first
    for line in lines[1:]:
        assert line.startswith("note: ") or not line.startswith("error"), completed.stderr
    return first


def assert_lit_passes(folder: Path, exec_root: Path) -> None:
    """Runs lit over `folder` (its lit.cfg.py) with this venv's tools on PATH and %t files under
    `exec_root`; fails with lit's report of every failing test."""
    lit = VENV_BIN / "lit"
    command = [str(lit)] if lit.exists() else [sys.executable, "-m", "lit.main"]
    environment = dict(
        os.environ,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        NIROC_LIT_EXEC_ROOT=str(exec_root),
    )
    completed = subprocess.run(
        [*command, "-v", "--workers", "2", str(folder)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=3600,  # a hang guard only: on a loaded 2-core machine the suites take over 10 minutes
    )
    report = completed.stdout[-20000:] + completed.stderr[-5000:]
    assert completed.returncode == 0, report
    assert "Passed" in completed.stdout, report
