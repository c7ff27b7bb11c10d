"""External tensor data: mapped from files inside the model's folder, never copied.

ONNX models over 2 GB keep their weights in side files named by each tensor's `location`
(relative to the model's folder), `offset` and `length`. A model is untrusted input, so a
location is refused when it is empty, absolute, contains a NUL byte, climbs out of the folder
(`..`), leads out through a symlink, or names anything but a regular file (a device such as
/dev/zero, a FIFO that would block); the offset and length must lie within the file. Each file
is mapped once (read-only) and every tensor in it becomes a memoryview into that map, so a 1 GB
weight costs address space, not a copy.

This module checks and maps; it knows nothing of Niro ops. Errors are `ExternalDataError` with
a message that names the file; the caller adds the tensor's name.
"""

from __future__ import annotations

import mmap
import os
import stat

__all__ = ["ExternalDataError", "ExternalDataReader", "check_external_fields"]


class ExternalDataError(ValueError):
    """An external data reference the reader refuses (the message names the location)."""


def check_external_fields(entries: dict[str, str]) -> None:
    """Refuse an `offset` or `length` that is not a non-negative integer (onnx's own parser of
    these fields raises without naming the file)."""
    location = entries.get("location", "")
    for key in ("offset", "length"):
        if key not in entries:
            continue
        try:
            number = int(entries[key])
        except ValueError:
            raise ExternalDataError(
                f"external data {key} {entries[key]!r} in '{location}' is not an integer"
            ) from None
        if number < 0:
            raise ExternalDataError(f"external data {key} {number} in '{location}' is negative")


class ExternalDataReader:
    """Maps external data files below `base_dir` (the model's folder), one map per file.

    `base_dir` None means the model came without a folder (a ModelProto without a file name):
    any external reference is then refused. The maps live as long as the memoryviews into them.
    """

    def __init__(self, base_dir: str | None) -> None:
        self._base_dir = base_dir
        self._maps: dict[str, mmap.mmap | bytes] = {}

    def view(self, location: str, offset: int | None, length: int | None, nbytes: int) -> memoryview:
        """`nbytes` bytes of the file at `location`, from `offset`; `length` if the model gives one."""
        path = self._resolve(location)
        if offset is not None and offset < 0:
            raise ExternalDataError(f"external data offset {offset} in '{location}' is negative")
        start = offset or 0
        if length is not None and length != nbytes:
            raise ExternalDataError(
                f"external data length {length} in '{location}' does not match the tensor's "
                f"{nbytes} bytes"
            )
        data = self._map(path, location)
        size = len(data)
        if start > size:
            raise ExternalDataError(
                f"external data offset {start} is beyond the end of '{location}' ({size} bytes)"
            )
        if start + nbytes > size:
            raise ExternalDataError(
                f"external data in '{location}' runs past the end of the file: offset {start} + "
                f"{nbytes} bytes > {size} bytes"
            )
        return memoryview(data)[start : start + nbytes]

    def _resolve(self, location: str) -> str:
        if self._base_dir is None:
            raise ExternalDataError(
                f"external data location '{location}' cannot be resolved: the model has no folder "
                "(pass filename= with a ModelProto)"
            )
        if not location:
            raise ExternalDataError("external data has an empty location")
        if "\0" in location:
            raise ExternalDataError(f"external data location {location!r} contains a NUL byte")
        if os.path.isabs(location) or location.startswith(("/", "\\")):
            raise ExternalDataError(f"external data location '{location}' is an absolute path")
        base = os.path.abspath(self._base_dir)
        joined = os.path.normpath(os.path.join(base, location))
        if os.path.commonpath([base, joined]) != base:
            raise ExternalDataError(f"external data location '{location}' leaves the model's folder")
        real_base = os.path.realpath(base)
        real = os.path.realpath(joined)
        if os.path.commonpath([real_base, real]) != real_base:
            raise ExternalDataError(
                f"external data location '{location}' leads out of the model's folder through a symlink"
            )
        return real

    def _map(self, path: str, location: str) -> mmap.mmap | bytes:
        cached = self._maps.get(path)
        if cached is not None:
            return cached
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise ExternalDataError(f"external data file '{location}' does not exist") from None
        except OSError as error:
            raise ExternalDataError(
                f"cannot read external data file '{location}': {error.strerror}"
            ) from error
        if not stat.S_ISREG(info.st_mode):
            raise ExternalDataError(f"external data file '{location}' is not a regular file")
        try:
            # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open must not hang
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as error:
            raise ExternalDataError(
                f"cannot read external data file '{location}': {error.strerror}"
            ) from error
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                raise ExternalDataError(f"external data file '{location}' is not a regular file")
            if info.st_size == 0:
                data: mmap.mmap | bytes = b""  # mmap cannot map an empty file
            else:
                data = mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(descriptor)
        self._maps[path] = data
        return data
