"""The installed `niroc` console script, run the way a user runs it.

A subprocess of the venv's `niroc` in a fresh working directory (no repo files around, no
PYTHONPATH games): --version, a compile whose MLIR iree-compile then compiles, and failures that
must be one line with the right exit code and no traceback.
"""

import os
import shutil
import subprocess
from importlib import metadata

import onnx
import pytest

from .niroc_runner import ROOT, VENV_BIN, assert_clean_failure, run_niroc

MODEL = ROOT / "testdata" / "cli" / "mlp.onnxtxt"


def run(*arguments: str, cwd) -> subprocess.CompletedProcess:
    return run_niroc(*arguments, cwd=cwd)


def test_version_names_the_libraries_in_use(tmp_path):
    """niroc's version, then the installed onnx, onnx-ir and iree-base-compiler (whose MLIR
    bindings a compile uses: no upstream `mlir` package is installed here)."""
    completed = run("--version", cwd=tmp_path)
    assert completed.returncode == 0
    assert completed.stderr == ""
    assert completed.stdout.splitlines() == [
        "niroc 0.1.0",
        f"onnx {metadata.version('onnx')}",
        f"onnx-ir {metadata.version('onnx-ir')}",
        f"MLIR bindings: iree-base-compiler {metadata.version('iree-base-compiler')} (iree.compiler.ir)",
    ]
    assert f"onnx {onnx.__version__}\n" in completed.stdout  # the module a compile imports


def test_version_after_a_session_flag(tmp_path):
    completed = run("--quiet", "--version", cwd=tmp_path)
    assert completed.returncode == 0
    assert completed.stdout.startswith("niroc 0.1.0\nonnx ")


@pytest.mark.parametrize("output", ["model.mlir", "model.mlirbc"])
def test_compile_then_iree_compile_and_run(tmp_path, output):
    """The README's commands: niroc, iree-compile for the CPU, iree-run-module; the numbers
    are x @ weight + bias for x = [[1 2 3] [4 5 6]]."""
    shutil.copy(MODEL, tmp_path / "mlp.onnxtxt")
    completed = run("mlp.onnxtxt", "-o", output, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
    assert completed.stderr == ""
    if output.endswith(".mlir"):
        assert "func.func @mlp(" in (tmp_path / output).read_text()
    compiled = subprocess.run(
        [
            str(VENV_BIN / "iree-compile"),
            output,
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=host",
            "-o",
            "mlp.vmfb",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compiled.returncode == 0, compiled.stderr
    ran = subprocess.run(
        [
            str(VENV_BIN / "iree-run-module"),
            "--module=mlp.vmfb",
            "--function=mlp",
            "--input=2x3xf32=1 2 3 4 5 6",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == "2x4xf32=[4.8 6.4 8 9.6][9.3 11.8 14.3 16.8]"


def test_a_broken_model_is_one_line_and_exit_1(tmp_path):
    (tmp_path / "broken.onnx").write_bytes(b"\x08\x07this is not a protobuf model")
    (tmp_path / "out.mlir").write_text("old output\n")
    completed = run("broken.onnx", "-o", "out.mlir", cwd=tmp_path)
    assert_clean_failure(completed, "broken.onnx")
    assert len(completed.stderr.splitlines()) == 1, completed.stderr
    assert (tmp_path / "out.mlir").read_text() == "old output\n"
    assert sorted(os.listdir(tmp_path)) == ["broken.onnx", "out.mlir"]


def test_a_missing_file_is_a_usage_error(tmp_path):
    completed = run("missing.onnx", cwd=tmp_path)
    assert completed.returncode == 2
    assert "Error: Invalid value for 'INPUT': File 'missing.onnx' does not exist." in (
        completed.stderr
    )
    assert "Traceback" not in completed.stderr


def test_debug_shows_the_traceback(tmp_path):
    (tmp_path / "broken.onnx").write_bytes(b"\x08\x07this is not a protobuf model")
    completed = run("--debug", "broken.onnx", cwd=tmp_path)
    assert completed.returncode == 1
    assert "Traceback (most recent call last)" in completed.stderr
    assert completed.stderr.splitlines()[-1].startswith("error: broken.onnx: ")


@pytest.mark.parametrize("command", [["dump"], ["compile"], ["verify", "--format", "json"]])
def test_stdout_is_complete_although_the_process_skips_its_teardown(tmp_path, command):
    # The console script ends with os._exit after flushing (niroc.cli.run): whatever sits in
    # stdout's buffer must still come out, byte for byte what -o writes (or, for verify, a
    # whole JSON line).
    shutil.copy(MODEL, tmp_path / "mlp.onnxtxt")
    piped = run(*command, "mlp.onnxtxt", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    if command[0] == "verify":
        assert piped.stdout.endswith("}\n") and piped.stdout.count("\n") == 1
        return
    suffix = ".niro" if command == ["dump"] else ".mlir"
    written = run(*command, "mlp.onnxtxt", "-o", f"out{suffix}", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert piped.stdout == (tmp_path / f"out{suffix}").read_text()


def test_python_dash_m_niroc_is_the_same_command(tmp_path):
    completed = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "niroc", "verify", str(MODEL)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    broken = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "niroc", "no-such-file.onnx"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert broken.returncode == 2
    assert "no-such-file.onnx" in broken.stderr
