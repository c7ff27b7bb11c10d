"""Progress on a terminal, silence elsewhere: niroc run with stderr on a pseudo-terminal.

NIROC_PROGRESS_DELAY=0 shows every step at once (the default waits half a second, longer than
these small models take).
"""

import os
import pty
import re
import subprocess
from pathlib import Path

from .niroc_runner import ROOT, VENV_BIN

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MODEL = ROOT / "testdata" / "cli" / "mlp.onnxtxt"


def run_with_terminal_stderr(*arguments: str, cwd: Path, delay: str = "0") -> tuple[bytes, str]:
    """(stdout bytes, what the terminal on stderr showed)."""
    master, slave = pty.openpty()
    environment = dict(os.environ, NIROC_PROGRESS_DELAY=delay, TERM="xterm-256color")
    environment["PATH"] = f"{VENV_BIN}{os.pathsep}{environment.get('PATH', '')}"
    process = subprocess.Popen(
        [str(VENV_BIN / "niroc"), *arguments],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=cwd,
        env=environment,
    )
    os.close(slave)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    stdout = process.stdout.read()
    process.wait(timeout=120)
    os.close(master)
    assert process.returncode == 0, shown.decode(errors="replace")
    return stdout, ANSI_ESCAPE.sub("", shown.decode("utf-8", errors="replace"))


def test_each_step_is_shown_on_a_terminal(tmp_path):
    _, shown = run_with_terminal_stderr(str(MODEL), "-o", "out.mlir", cwd=tmp_path)
    steps = (
        f"loading {MODEL}: 5 ops, 2 globals",
        f"verifying {MODEL}",
        f"lowering {MODEL} to MLIR",
    )
    for step in steps:
        assert f"✓ {step} (" in shown, shown
    assert "✓ writing out.mlir: " in shown, shown
    assert "func.func @mlp(" in (tmp_path / "out.mlir").read_text()


def test_quiet_shows_nothing(tmp_path):
    _, shown = run_with_terminal_stderr("--quiet", str(MODEL), "-o", "out.mlir", cwd=tmp_path)
    assert shown == ""


def test_fast_steps_show_nothing_with_the_default_delay(tmp_path):
    stdout, shown = run_with_terminal_stderr(str(MODEL), cwd=tmp_path, delay="30")
    assert shown == ""
    assert b"func.func @mlp(" in stdout


def test_the_opt_tool_step_is_shown(tmp_path):
    stdout, shown = run_with_terminal_stderr(
        str(MODEL), "--pass-pipeline", "builtin.module(cse)", cwd=tmp_path
    )
    assert "✓ running iree-opt (" in shown, shown
    assert re.search(r"✓ writing stdout: \d+\.\d KiB \(\d+\.\d s\)", shown), shown
    assert b"func.func @mlp(" in stdout
