"""The real `niroc` on every input of the hostile corpus (testdata/hostile/generate.py).

Each broken input: exit 1, one `error: FILE: ...` line on stderr saying what is wrong (the
case's message, matched whole), nothing on stdout, no traceback, under a 2 GiB address-space
ceiling and a hang guard; the output file that existed before is unchanged and no temporary
file is left beside it. Each valid edge case: exit 0 and MLIR that `iree-opt` parses. Then the
things no single case shows: `niroc verify` over all broken files at once, output paths that
cannot be written, and a canary proving that external data never opens a file outside the
model's folder.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .corpus import (
    CANARY,
    CASES,
    IREE_OPT,
    ROOT,
    SLOW_TIMEOUT,
    TIMEOUT,
    generate,
    run_niroc,
    snapshot,
)

SENTINEL = b"// an existing output that a failing run must leave alone\n"
ERROR_CASES = [case for case in CASES if case.expect == "error"]
VALID_CASES = [case for case in CASES if case.expect == "valid"]


def build(case, tmp_path: Path) -> Path:
    return generate.build_case(case, tmp_path)


def assert_no_traceback(completed: subprocess.CompletedProcess) -> None:
    for stream in (completed.stdout, completed.stderr):
        assert "Traceback" not in stream, stream
        assert "internal error" not in stream, stream


def assert_error_output(case, completed: subprocess.CompletedProcess, path: Path) -> None:
    """The stderr forms of the module docstring of generate.py, checked line by line."""
    assert_no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout == ""
    lines = completed.stderr.splitlines()
    assert lines, "no error message"
    if case.form == "line":
        assert re.fullmatch(re.escape(f"error: {path}: ") + case.message, lines[0]), lines[0]
        extra = lines[1:]
    elif case.form == "parse":
        assert re.fullmatch(re.escape(f"{path}:") + case.message, lines[0]), lines[0]
        assert len(lines) == 3 and lines[2].strip() == "^", completed.stderr  # source line, caret
        extra = []
    else:
        assert case.form == "verify"
        *diagnostics, summary = lines
        assert re.fullmatch(re.escape(f"error: {path}: ") + r"verification failed \(\d+ errors?\)", summary), summary
        assert diagnostics and all(line.startswith(f"{path}: error: ") for line in diagnostics), completed.stderr
        assert re.fullmatch(re.escape(f"{path}: error: ") + case.message, diagnostics[0]), diagnostics[0]
        extra = []
    for line in extra:
        assert line.startswith("note: "), completed.stderr
    if "no-notes" in case.tags:  # e.g. no "pass --allow-unknown" hint where it cannot help
        assert extra == [], completed.stderr


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda case: case.name)
def test_broken_input_fails_cleanly(case, tmp_path: Path) -> None:
    path = build(case, tmp_path)
    output = path.parent / "out.mlir"
    output.write_bytes(SENTINEL)
    before = snapshot(tmp_path)
    completed = run_niroc(str(path), "-o", str(output), *case.arguments, cwd=tmp_path,
                          timeout=SLOW_TIMEOUT if case.slow else TIMEOUT)
    assert_error_output(case, completed, path)
    assert snapshot(tmp_path) == before  # output untouched, no temporary file left


@pytest.mark.parametrize("case", VALID_CASES, ids=lambda case: case.name)
def test_valid_edge_case_compiles_to_mlir_that_parses(case, tmp_path: Path) -> None:
    path = build(case, tmp_path)
    output = path.parent / "out.mlir"
    completed = run_niroc(str(path), "-o", str(output), *case.arguments, cwd=tmp_path,
                          timeout=SLOW_TIMEOUT if case.slow else TIMEOUT)
    assert_no_traceback(completed)
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    text = output.read_text(encoding="utf-8")
    for expected in case.mlir_contains:
        assert expected in text
    # Ops of custom domains stay generic ops of unregistered dialects (--allow-unknown).
    flags = ["--allow-unregistered-dialect"] if "--allow-unknown" in case.arguments else []
    parsed = subprocess.run([str(IREE_OPT), *flags, str(output), "-o", str(tmp_path / "parsed.mlir")],
                            capture_output=True, text=True, timeout=SLOW_TIMEOUT)
    assert parsed.returncode == 0, parsed.stderr


def test_custom_domain_keeps_its_domain_in_niro_and_mlir(tmp_path: Path) -> None:
    """`com.acme.Frobnicate` keeps its domain: as the Niro UnknownOp's name and as the MLIR op."""
    case = next(case for case in CASES if case.name == "custom_domain_kept")
    path = build(case, tmp_path)
    completed = run_niroc(str(path), "-o", str(tmp_path / "out.niro"), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    niro = (tmp_path / "out.niro").read_text(encoding="utf-8")
    assert re.search(r'= "com\.acme\.Frobnicate"\(%\d+\) \{level = 3, niro\.opset = 2\}', niro), niro
    completed = run_niroc(str(path), "--allow-unknown", "-o", str(tmp_path / "out.mlir"), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    mlir = (tmp_path / "out.mlir").read_text(encoding="utf-8")
    assert re.search(r'= "com\.acme\.Frobnicate"\(%arg0\) \{level = 3 : i64, niro\.opset = 2 : i64\}', mlir), mlir


def test_verify_reports_every_broken_file(tmp_path: Path) -> None:
    """`niroc verify` over every broken ONNX input at once: one error line per file on stdout,
    in order, each naming its file; one bad file does not stop the others; exit 1."""
    cases = [case for case in ERROR_CASES if case.form == "line" and not case.arguments and not case.slow]
    paths = [build(case, tmp_path) for case in cases]
    completed = run_niroc("verify", *map(str, paths), cwd=tmp_path, timeout=SLOW_TIMEOUT)
    assert_no_traceback(completed)
    assert completed.returncode == 1
    lines = completed.stdout.splitlines()
    # lowering errors happen after verification: `verify` passes those files
    expected_errors = [(case, path) for case, path in zip(cases, paths, strict=True) if "lowering" not in case.tags]
    assert lines[-1] == f"{len(cases)} files, {len(expected_errors)} errors"
    errors = [line for line in lines[:-1] if line.startswith("error: ")]
    assert len(errors) == len(expected_errors), completed.stdout
    for line, (case, path) in zip(errors, expected_errors, strict=True):
        assert re.fullmatch(re.escape(f"error: {path}: ") + case.message, line), (case.name, line)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("folder", "output path is a folder"),
        ("missing/out.mlir", "output folder 'missing' does not exist"),
    ],
)
def test_unwritable_output_path(tmp_path: Path, output: str, message: str) -> None:
    (tmp_path / "folder").mkdir()
    shutil.copy(ROOT / "testdata" / "cli" / "mlp.onnxtxt", tmp_path / "mlp.onnxtxt")
    before = snapshot(tmp_path)
    completed = run_niroc("mlp.onnxtxt", "-o", output, cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 1
    assert completed.stderr == f"error: {output}: {message}\n"
    assert snapshot(tmp_path) == before


def test_usage_error_exits_2(tmp_path: Path) -> None:
    """A file that does not exist is a usage error (click's own message): exit 2, no traceback."""
    completed = run_niroc("missing.onnx", "-o", "out.mlir", cwd=tmp_path)
    assert_no_traceback(completed)
    assert completed.returncode == 2
    assert completed.stderr.splitlines()[-1] == "Error: Invalid value for 'INPUT': File 'missing.onnx' does not exist."
    assert list(tmp_path.iterdir()) == []


# -- the canary: external data never opens a file outside the model's folder -------------------

ESCAPES = [case for case in CASES if case.name in {"external_absolute", "external_dotdot", "external_symlink_out"}]
"""External data aimed at the canary beside the model's folder: by absolute path, `..`, symlink."""


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (the audit-hook test still runs)")
@pytest.mark.parametrize("case", ESCAPES, ids=lambda case: case.name)
def test_canary_is_never_opened_strace(case, tmp_path: Path) -> None:
    """Every open/openat/openat2 of the whole niroc process tree (C++ included), by strace."""
    path = build(case, tmp_path)
    trace = tmp_path / "trace.txt"
    completed = run_niroc(str(path), "-o", str(path.parent / "out.mlir"), cwd=path.parent, timeout=SLOW_TIMEOUT,
                          prefix=("strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(trace)))
    assert completed.returncode == 1, completed.stderr
    assert "external data" in completed.stderr
    opened = trace.read_text(errors="replace")
    assert "model.onnx" in opened  # the trace does see the model being opened
    assert CANARY not in opened, [line for line in opened.splitlines() if CANARY in line]


_AUDIT_SCRIPT = """
import sys
opened = []
def hook(event, arguments):
    if event in ("open", "os.open") and arguments and isinstance(arguments[0], (str, bytes)):
        opened.append(arguments[0] if isinstance(arguments[0], str) else arguments[0].decode("utf-8", "replace"))
sys.addaudithook(hook)
from niroc.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
sys.__stdout__.write("OPENED:" + repr(opened) + "\\n")
sys.__stdout__.write("CODE:" + str(code) + "\\n")
"""


@pytest.mark.parametrize("case", ESCAPES, ids=lambda case: case.name)
def test_canary_is_never_opened_audit_hook(case, tmp_path: Path) -> None:
    """The same with a Python audit hook on 'open' inside the niroc process (no tool needed)."""
    path = build(case, tmp_path)
    completed = subprocess.run(
        [sys.executable, "-c", _AUDIT_SCRIPT, str(path), "-o", str(path.parent / "out.mlir")],
        capture_output=True, text=True, timeout=SLOW_TIMEOUT, cwd=path.parent,
    )
    assert "CODE:1" in completed.stdout, completed.stdout + completed.stderr
    opened = completed.stdout.split("OPENED:", 1)[1]
    assert str(path) in opened  # the hook does see the model being opened
    assert CANARY not in opened, opened
