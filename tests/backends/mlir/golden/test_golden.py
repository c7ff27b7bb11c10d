"""Runs the golden tests of the lowering families (lit + FileCheck over this folder) as one
pytest test, so `make test` covers them; a failure carries lit's report."""

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_BIN = HERE.parents[3] / ".venv" / "bin"


def test_lowering_families_emit_the_golden_mlir(tmp_path) -> None:
    lit = VENV_BIN / "lit"
    command = [str(lit)] if lit.exists() else [sys.executable, "-m", "lit.main"]
    environment = dict(
        os.environ,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        NIROC_LIT_EXEC_ROOT=str(tmp_path),
    )
    completed = subprocess.run(
        [*command, "-v", "--workers", "2", str(HERE)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    report = completed.stdout[-20000:] + completed.stderr[-5000:]
    assert completed.returncode == 0, report
    assert "Passed" in completed.stdout, report
