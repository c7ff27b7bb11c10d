"""The steps every command shares: load a file and verify it, with progress and diagnostics.

Kept apart from the commands so compile, verify and dump load and report files the same way.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import click
from niro.ir import Diagnostic, Module, NirocError, verify, walk_ops, write_module

from .inputs import InputShapeRequest, detect_format, load_module, name_file
from .progress import Progress
from .render import make_console, print_diagnostics, print_notes
from .session import Session, current_session
from .shape_options import usage_error_for

__all__ = [
    "VerificationFailed",
    "load",
    "check",
    "errors_in",
    "progress_for",
    "write_niro_text",
    "attributed_to",
]


class VerificationFailed(NirocError):
    """The module has verifier errors; they were printed already, this is the summary line."""


def progress_for(session: Session) -> Progress:
    """Progress on stderr when it is a terminal. Otherwise (-q, a pipe, a build system) no
    console is made: rich loads only when something is shown (~25 ms of start-up).
    Step times go to the session for --timing."""
    step_times = session.step_times if session.timing else None
    if session.quiet or not sys.stderr.isatty():
        return Progress.off(step_times)
    return Progress(make_console(stderr=True), enabled=True, step_times=step_times)


def load(path: Path, progress: Progress, shapes: InputShapeRequest | None = None) -> Module:
    """Load `path` (with --dim/--input-shape's `shapes`); on a terminal and in --timing the
    finished step says how big the module is. The loader's notes go to stderr unless --quiet;
    a shape request the model refuses is a usage error of its option."""
    if shapes and detect_format(path) == "niro":
        raise click.UsageError("--dim and --input-shape apply to ONNX models, not Niro assembly")
    with progress.step(f"loading {path}") as step:
        try:
            loaded = load_module(path, shapes)
        except NirocError as error:
            option = getattr(error, "option", None)
            if option is None:
                raise
            raise usage_error_for(option, str(error)) from error
        module = loaded.module
        if progress.enabled or progress.step_times is not None:
            op_count = sum(1 for _ in walk_ops(module))
            step.rename(f"loading {path}: {op_count} ops, {len(module.globals)} globals")
    if loaded.notes and not current_session().quiet:
        print_notes(make_console(stderr=True), str(path), loaded.notes)
    return module


def errors_in(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return [diagnostic for diagnostic in diagnostics if diagnostic.severity == "error"]


def check(module: Module, path: Path, progress: Progress) -> None:
    """Verify `module`; print every diagnostic on stderr; raise when any is an error."""
    with progress.step(f"verifying {path}"):
        diagnostics = verify(module)
    if diagnostics:
        print_diagnostics(make_console(stderr=True), str(path), diagnostics)
    errors = errors_in(diagnostics)
    if errors:
        count = f"{len(errors)} error" + ("" if len(errors) == 1 else "s")
        raise VerificationFailed(f"verification failed ({count})", location=str(path))


def write_niro_text(module: Module, stream: BinaryIO, *, elide_data: bool) -> None:
    """Stream Niro assembly (UTF-8) into a binary stream, without building the whole string."""
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="\n", write_through=True)
    try:
        write_module(module, text, elide_data=elide_data)
        text.flush()
    finally:
        text.detach()


@contextlib.contextmanager
def attributed_to(path: Path) -> Iterator[None]:
    """Any NirocError raised inside names `path` (the CLI's one line starts with the file)."""
    try:
        yield
    except NirocError as error:
        name_file(error, str(path))
        raise
