"""Runs the golden CLI tests (lit + FileCheck over tests/cli/) as one pytest test.

So `make test` covers them; on failure the assertion message carries lit's report of every
failing test with its command and output.
"""

import os
import subprocess
import sys

from .niroc_runner import ROOT, VENV_BIN


def test_lit_golden_cli_tests(tmp_path) -> None:
    lit = VENV_BIN / "lit"
    command = [str(lit)] if lit.exists() else [sys.executable, "-m", "lit.main"]
    environment = dict(
        os.environ,
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        NIROC_LIT_EXEC_ROOT=str(tmp_path),
    )
    completed = subprocess.run(
        [*command, "-v", "--workers", "2", str(ROOT / "tests" / "cli")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    report = completed.stdout[-20000:] + completed.stderr[-5000:]
    assert completed.returncode == 0, report
    assert "Passed" in completed.stdout, report
