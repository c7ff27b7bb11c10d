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

from niro.ir import Diagnostic, Module, NirocError, verify, walk_ops, write_module

from .inputs import load_module, name_file
from .progress import Progress
from .render import make_console, print_diagnostics
from .session import Session

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


def load(path: Path, progress: Progress) -> Module:
    """Load `path`; on a terminal and in --timing the finished step says how big the module is."""
    with progress.step(f"loading {path}") as step:
        module = load_module(path)
        if progress.enabled or progress.step_times is not None:
            op_count = sum(1 for _ in walk_ops(module))
            step.rename(f"loading {path}: {op_count} ops, {len(module.globals)} globals")
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
