"""Colors on a terminal, plain text on a pipe: `niroc verify` with stdout on a pseudo-terminal."""

import os
import pty
import subprocess

from .niroc_runner import ROOT, VENV_BIN

INVALID = ROOT / "testdata" / "cli" / "invalid.niro"
SCALE = ROOT / "testdata" / "cli" / "scale.niro"
ANSI_RED_BOLD = "\x1b[1;31m"


def _environment() -> dict[str, str]:
    environment = dict(os.environ, TERM="xterm-256color")
    for name in ("NO_COLOR", "FORCE_COLOR"):
        environment.pop(name, None)
    return environment


def run_on_a_terminal(*arguments: str) -> tuple[int, str]:
    """Exit code and what a terminal (stdout and stderr) showed."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [str(VENV_BIN / "niroc"), *arguments],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=_environment(),
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
    process.wait(timeout=60)
    os.close(master)
    return process.returncode, shown.decode("utf-8", errors="replace")


def test_diagnostics_are_colored_on_a_terminal():
    code, text = run_on_a_terminal("verify", str(INVALID))
    assert code == 1
    assert f"{ANSI_RED_BOLD}error:" in text, text
    assert "matmul-contraction" in text


def test_bytecode_is_not_written_to_a_terminal():
    code, text = run_on_a_terminal(str(SCALE), "--emit", "mlirbc")
    assert code == 2
    assert "Error: refusing to write MLIR bytecode to a terminal; use -o FILE or a pipe" in text


def test_diagnostics_are_plain_on_a_pipe():
    completed = subprocess.run(
        [str(VENV_BIN / "niroc"), "verify", str(INVALID)],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=60,
    )
    assert completed.returncode == 1
    assert "\x1b[" not in completed.stdout
    assert completed.stdout.splitlines()[0].startswith(f"{INVALID}: error: @main ^bb0 op#0")
