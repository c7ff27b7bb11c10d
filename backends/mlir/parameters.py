"""Weights as IREE parameters: the globals' initial values name entries of an IREE parameter
archive (`.irpa`) instead of carrying the data, and the archive is written here.

The one place niroc's MLIR leaves upstream dialects, by the user's choice (`--params`): a
global's value is `#stream.parameter.named<"model"::"NAME"> : tensor<...>`, the attribute
iree-import-onnx's `--externalize-params` emits (iree-compile 3.13 also takes the older
`#flow.parameter.named` spelling), on the same `ml_program.global` as without parameters; IREE
reads it at load time (`iree-run-module --parameters=model=FILE.irpa`).

The archive is IREE's parameter archive format, version 0 (`iree/schemas/parameter_archive.h`):
a header, a table of data entries, the names, then each entry's bytes at a 64-byte aligned
offset, the file padded to 4 KiB. It is written by us, streaming, because IREE's Python
`save_archive_file` takes every array in memory at once: here the layout is computed from the
sizes first and the weights are copied from their (mapped) Niro buffers in 1 MiB pieces,
releasing the pages of read-only mappings as the MLIR writers do (literals.py).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from niro.ir import Global, TensorType, as_memoryview, buffer_nbytes, is_buffer

from .bindings import mlir_ir
from .literals import RELEASE_EVERY_BYTES, read_only_mappings, release_pages
from .types import lower_type

__all__ = ["DEFAULT_PARAMETER_THRESHOLD", "ParameterPlan", "ParameterTable"]

DEFAULT_PARAMETER_THRESHOLD = 100
"""Globals of at least this many elements become parameters: iree-import-onnx's default
(`--num-elements-threshold`)."""

_MAGIC = b"IRPA"
# The header: magic, version, header size, next header, flags; entry count; three segments.
_HEADER = struct.Struct("<4sHHQQQ" + "Q" + "QQ" * 3)
# A data entry: size, type, flags; name and metadata ranges; alignment; storage range.
_DATA_ENTRY = struct.Struct("<QIQ" + "QQ" * 2 + "Q" + "QQ")
_ENTRY_TYPE_DATA = 2
_HEADER_ALIGNMENT = 16
_ENTRY_ALIGNMENT = 16
_DATA_ALIGNMENT = 64
_FILE_ALIGNMENT = 4096
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ParameterPlan:
    """Which globals become parameters (`threshold` elements or more), in which scope."""

    scope: str = "model"
    threshold: int = DEFAULT_PARAMETER_THRESHOLD

    def takes(self, global_: Global) -> bool:
        """A static tensor global with a buffer initializer of at least `threshold` elements.

        BOOL tensors stay in the module: IREE stores i1 tensors in a layout of its own."""
        type_ = global_.type
        if not isinstance(type_, TensorType) or type_.element_type.is_bool:
            return False
        shape = type_.static_shape
        if shape is None or not is_buffer(global_.initializer):
            return False
        count = 1
        for dim in shape:
            count *= dim
        return count >= self.threshold and count > 0


@dataclass
class ParameterTable:
    """The parameters of one lowered module, in module order, with the buffers they read."""

    plan: ParameterPlan
    entries: list[tuple[str, memoryview]] = field(default_factory=list)

    def add(self, global_: Global, stored: TensorType) -> mlir_ir.Attribute:
        """Records `global_`'s data under its name; returns the attribute that names it, of the
        type the module stores it as (`stored`: a sub-byte tensor is its packed i8 bytes). Only
        for a global the plan `takes`: a static tensor with a buffer initializer."""
        type_ = stored
        shape, initializer = type_.static_shape, global_.initializer
        assert shape is not None and is_buffer(initializer), f"no parameter for @{global_.name}"
        count = 1
        for dim in shape:
            count *= dim
        needed = count * type_.element_type.byte_width
        if buffer_nbytes(initializer) != needed:
            raise ValueError(
                f"{type_} needs {needed} bytes of data, got {buffer_nbytes(initializer)}"
            )
        self.entries.append((global_.name, as_memoryview(initializer).cast("B")))
        return mlir_ir.Attribute.parse(
            f"#stream.parameter.named<{_mlir_string(self.plan.scope)}::"
            f"{_mlir_string(global_.name)}> : {lower_type(type_)}"
        )

    @property
    def total_bytes(self) -> int:
        return sum(data.nbytes for _, data in self.entries)

    def write_archive(self, stream: BinaryIO) -> None:
        """The archive, streamed into `stream` (written front to back, never seeked)."""
        names = [name.encode("utf-8") for name, _ in self.entries]
        entry_offset = _align(_HEADER.size, _HEADER_ALIGNMENT)
        entry_stride = _align(_DATA_ENTRY.size, _ENTRY_ALIGNMENT)
        # NOTE: no padding after the last entry, as IREE's own writer lays it out
        entries_length = entry_stride * len(names) - (entry_stride - _DATA_ENTRY.size) * bool(names)
        metadata_offset = entry_offset + entries_length
        metadata_length = sum(len(name) for name in names)
        storage_offset = _align(metadata_offset + metadata_length, _DATA_ALIGNMENT)
        positions, position = [], 0
        for _, data in self.entries:
            position = _align(position, _DATA_ALIGNMENT)
            positions.append(position)
            position += data.nbytes
        storage_length = position
        end = _align(storage_offset + storage_length, _FILE_ALIGNMENT)
        writer = _PagedWriter(stream, [data for _, data in self.entries])
        writer.write(
            _HEADER.pack(
                _MAGIC,
                0,
                0,
                _HEADER.size,
                0,
                0,
                len(names),
                entry_offset,
                entries_length,
                metadata_offset,
                metadata_length,
                storage_offset,
                storage_length,
            )
        )
        writer.pad_to(entry_offset)
        name_offset = 0
        last = len(names) - 1
        for index, (name, (_, data), start) in enumerate(
            zip(names, self.entries, positions, strict=True)
        ):
            writer.write(
                _DATA_ENTRY.pack(
                    _DATA_ENTRY.size,
                    _ENTRY_TYPE_DATA,
                    0,
                    name_offset,
                    len(name),
                    0,
                    0,
                    _DATA_ALIGNMENT,
                    start,
                    data.nbytes,
                )
            )
            name_offset += len(name)
            if index != last:
                writer.pad_to(writer.position + entry_stride - _DATA_ENTRY.size)
        for name in names:
            writer.write(name)
        for (_, data), start in zip(self.entries, positions, strict=True):
            writer.pad_to(storage_offset + start)
            writer.write_large(data)
        writer.pad_to(end)


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def _mlir_string(text: str) -> str:
    """`text` as an MLIR string literal (quotes, backslashes and control characters escaped)."""
    escaped = []
    for character in text:
        code = ord(character)
        if character in '"\\' or code < 0x20 or code == 0x7F:
            escaped.append(f"\\{code:02X}")
        else:
            escaped.append(character)
    return '"' + "".join(escaped) + '"'


class _PagedWriter:
    """Writes in order, counting the position; large data in 1 MiB pieces, dropping the pages of
    the buffers' read-only file mappings every RELEASE_EVERY_BYTES (see literals.py)."""

    def __init__(self, stream: BinaryIO, buffers: list[memoryview]):
        self.stream = stream
        self.position = 0
        self.mappings: list[mmap.mmap] = read_only_mappings(buffers)
        self.pending = 0

    def write(self, data) -> None:
        self.stream.write(data)
        self.position += len(data)

    def pad_to(self, position: int) -> None:
        if position < self.position:
            raise AssertionError(f"archive layout overlaps at {self.position} > {position}")
        for piece in _zeros(position - self.position):
            self.write(piece)

    def write_large(self, data: memoryview) -> None:
        for start in range(0, data.nbytes, _CHUNK):
            piece = data[start : start + _CHUNK]
            self.stream.write(piece)
            self.position += piece.nbytes
            self.pending += piece.nbytes
            if self.mappings and self.pending >= RELEASE_EVERY_BYTES:
                release_pages(self.mappings)
                self.pending = 0
        if self.mappings:
            release_pages(self.mappings)
            self.pending = 0


def _zeros(count: int) -> Iterator[bytes]:
    while count > 0:
        size = min(count, _CHUNK)
        yield bytes(size)
        count -= size
