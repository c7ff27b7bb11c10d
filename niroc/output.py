"""Writing results: atomically to a file, or straight to stdout.

A file is written to a temporary file in the destination's folder, flushed and fsynced, then
renamed over the destination. So a failure at any point (an exception, Ctrl-C, a full disk)
leaves no partial file and never truncates an existing one; readers see the old file or the
whole new one. This module must not decide *what* is written, only how it lands.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from niro.ir import NirocError

__all__ = [
    "OutputError",
    "STDOUT",
    "check_output_path",
    "open_output",
    "is_stdout",
]

STDOUT = "-"


class OutputError(NirocError):
    """The output cannot be written where the user asked (a folder, a missing folder, ...)."""


def is_stdout(path: str | None) -> bool:
    return path is None or path == STDOUT


def check_output_path(path: str) -> None:
    """Fail before any work is done when `path` can never be written.

    NOTE: checked up front so a long compile does not end in an error about the output path;
    the atomic write still copes with anything that changes in between.
    """
    if is_stdout(path):
        return
    target = Path(path)
    if target.is_dir():
        raise OutputError("output path is a folder", location=path)
    folder = target.parent
    if not folder.exists():
        raise OutputError(f"output folder '{folder}' does not exist", location=path)
    if not folder.is_dir():
        raise OutputError(f"'{folder}' is not a folder", location=path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"output folder '{folder}' is not writable", location=path)
    if target.exists() and not target.is_file():
        raise OutputError("output path exists and is not a regular file", location=path)


@contextlib.contextmanager
def open_output(path: str | None) -> Iterator[BinaryIO]:
    """A binary stream for `path` (or stdout for None / '-'); committed only if the block succeeds."""
    if is_stdout(path):
        stream = sys.stdout.buffer
        yield stream
        stream.flush()
        return
    check_output_path(path)
    with _atomic_file(Path(path)) as stream:
        yield stream


@contextlib.contextmanager
def _atomic_file(target: Path) -> Iterator[BinaryIO]:
    mode = _mode_for(target)
    try:
        descriptor, temp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
        )
    except OSError as error:
        raise OutputError(
            f"cannot create a file: {error.strerror}", location=str(target)
        ) from error
    committed = False
    try:
        with os.fdopen(descriptor, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
        committed = True
        _fsync_folder(target.parent)
    except OSError as error:
        raise OutputError(
            f"cannot write: {error.strerror or error}", location=str(target)
        ) from error
    finally:
        if not committed:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)


def _mode_for(target: Path) -> int:
    """Keep an existing file's permissions; give a new file the usual umask-based ones.

    NOTE: mkstemp creates 0600 files; without this every output would be private.
    """
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every platform can open a folder)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
