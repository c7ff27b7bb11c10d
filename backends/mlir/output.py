"""LoweredModule: a verified MLIR module and the ways to write it out.

Text (`.mlir`) is MLIR's own printer for the module body, with debug locations (so downstream
tools point at ONNX nodes), followed by the `{-# dialect_resources: ... #-}` section, which we
write ourselves: MLIR's printer builds each blob's whole hex string in memory (2x the weights,
plus a copy on the way to Python), while we stream it from the Niro buffers in 1 MiB chunks.
The bytes are those MLIR would print (uppercase hex, 4-byte little-endian alignment first).

Bytecode (`.mlirbc`) is MLIR's writer for everything but the blobs, which are streamed from the
Niro buffers as well (`bytecode.py`): the bindings would hand each blob to Python as a copy.
Modules with few blob bytes (under `SPLICE_MIN_BYTES`) go through MLIR's writer alone.

Memory stays bounded by the chunk size, not the weights: weights mapped from the
model's files (read-only `mmap`s, see the ONNX frontend) would otherwise stay resident once
written, so every `_RELEASE_EVERY` bytes the writers tell the kernel (`MADV_DONTNEED`) that this
process no longer needs those pages. A read-only shared file mapping loses nothing by it: the
pages stay in the page cache and a later read maps them again. Writable or private mappings
(whose pages may hold changes) and ordinary memory are never touched.
"""

from __future__ import annotations

import io
import re
from typing import BinaryIO

import numpy as np

from .bindings import mlir_ir
from .bytecode import BlobSplicingWriter
from .literals import RELEASE_EVERY_BYTES, ResourceTable
from .parameters import ParameterTable

__all__ = ["LoweredModule"]

_HEX_CHUNK = 1 << 20
_HEX_PAIRS = np.frombuffer(b"".join(b"%02X" % byte for byte in range(256)), dtype=np.uint16)
"""The two uppercase hex digits of each byte value, as one 2-byte element (byte order kept)."""
_RELEASE_EVERY = RELEASE_EVERY_BYTES
_WRITE_CHUNK = 1 << 20
_EMPTY_RESOURCE_SECTION = re.compile(rb"\n*\{-#\s*#-\}\s*\Z")


class LoweredModule:
    """An MLIR module that verified, with the context and resource buffers it depends on.

    Keep this object alive while using `module`: MLIR's blobs point into the Niro buffers held
    by `resources`, and the module belongs to `context`.
    """

    def __init__(
        self,
        module: mlir_ir.Module,
        context: mlir_ir.Context,
        resources: ResourceTable,
        *,
        has_generic_ops: bool = False,
        parameters: ParameterTable | None = None,
    ):
        self.module = module
        self.parameters = parameters
        """The weights that went to IREE parameters (lowered with a ParameterPlan), else None."""
        self.context = context
        self.resources = resources
        self.has_generic_ops = has_generic_ops
        """True when UnknownOps were kept as generic ops (tools need --allow-unregistered-dialect)."""
        self._bytecode_writer = BlobSplicingWriter(module, resources)

    @property
    def operation(self) -> mlir_ir.Operation:
        return self.module.operation

    def write_text(self, stream: BinaryIO, *, elide_weights: bool = False) -> None:
        """Writes `.mlir` text; with `elide_weights` the blobs are left out of the resource
        section (the `dense_resource<...>` references stay, so the text still parses)."""
        body = io.BytesIO()
        with self.context:
            # large_resource_limit=1 elides every blob from MLIR's own section; we write them.
            self.module.operation.print(
                file=body,
                binary=True,
                enable_debug_info=True,
                assume_verified=True,
                large_resource_limit=1,
            )
        text = body.getbuffer()
        # NOTE: only the tail can hold the empty section; matching the whole text (MBs for a
        # big graph) would scan it all.
        tail_start = max(0, len(text) - 256)
        tail = _EMPTY_RESOURCE_SECTION.sub(b"\n", bytes(text[tail_start:]))
        stream.write(text[:tail_start])
        stream.write(tail)
        del text
        if elide_weights or not self.resources.blobs:
            return
        stream.write(b"\n{-#\n  dialect_resources: {\n    builtin: {\n")
        last = len(self.resources.blobs) - 1
        releasing = _ReleasingWriter(stream, self.resources)
        for index, blob in enumerate(self.resources.blobs):
            stream.write(f'      {blob.name}: "0x'.encode())
            stream.write(blob.alignment.to_bytes(4, "little").hex().upper().encode())
            data = blob.data
            for start in range(0, data.nbytes, _HEX_CHUNK):
                releasing.write(_uppercase_hex(data[start : start + _HEX_CHUNK]))
            stream.write(b'"\n' if index == last else b'",\n')
        stream.write(b"    }\n  }\n#-}\n")
        releasing.release()

    def write_parameters(self, stream: BinaryIO) -> None:
        """Writes the IREE parameter archive (`.irpa`) of the weights lowered as parameters."""
        if self.parameters is None:
            raise ValueError("the module was lowered without parameters")
        self.parameters.write_archive(stream)

    def write_bytecode(self, stream: BinaryIO) -> None:
        """Writes `.mlirbc` bytecode (blobs included): the bytes MLIR's writer makes of the
        module, with the blobs streamed from the Niro buffers (`bytecode.py`); MLIR's writer
        alone for small blobs or when its output is not laid out as expected."""
        releasing = _ReleasingWriter(stream, self.resources)
        with self.context:
            if not self._bytecode_writer.write(releasing.write, nested=self.has_generic_ops):
                self.module.operation.write_bytecode(releasing)
        releasing.release()

    def to_text(self, elide_weights: bool = False) -> str:
        """The `.mlir` text as a string (convenient for small modules and tests)."""
        buffer = io.BytesIO()
        self.write_text(buffer, elide_weights=elide_weights)
        return buffer.getvalue().decode()

    def __str__(self) -> str:
        return self.to_text(elide_weights=True)


def _uppercase_hex(chunk: memoryview) -> np.ndarray:
    """`chunk.hex().upper()` as ASCII bytes, in one table lookup per byte.

    NOTE: 3-4x faster than `.hex().upper().encode()`, which makes three copies of every chunk
    (str, upper str, bytes), and ~1.5x faster than `binascii.hexlify(...).translate(...)`:
    about the cost of lowercase `hexlify` alone, the hex-streaming floor.
    """
    return np.take(_HEX_PAIRS, np.frombuffer(chunk, dtype=np.uint8))


class _ReleasingWriter:
    """Forwards writes to `stream`; every `_RELEASE_EVERY` bytes, drops this process's
    resident pages of the blobs' read-only file mappings (see the module docstring)."""

    def __init__(self, stream: BinaryIO, resources: ResourceTable):
        self.stream = stream
        self.resources = resources
        self.mappings = resources.mapped_read_only()
        self.release()  # what the lowering read (the splat checks) need not stay either

    def write(self, data) -> int | None:
        view = memoryview(data).cast("B")
        if view.nbytes <= _WRITE_CHUNK:
            self._write(view)
            return view.nbytes
        # NOTE: a whole blob comes as one piece (its Niro buffer from bytecode.py, or a bytes
        # copy from MLIR's writer); passing it to write() in one piece measured 3x slower
        # than in 1 MiB pieces (a 64 MiB write of freshly faulted memory into the page
        # cache: 4.5 s vs 1.4 s for 1 GB)
        if self.mappings:
            self.release()  # earlier blobs' pages (or those a copy was made from) can go
        for start in range(0, view.nbytes, _WRITE_CHUNK):
            self._write(view[start : start + _WRITE_CHUNK])
        return view.nbytes

    def _write(self, view: memoryview) -> None:
        self.stream.write(view)
        if self.mappings:
            self.pending += view.nbytes
            if self.pending >= _RELEASE_EVERY:
                self.release()

    def release(self) -> None:
        self.pending = 0
        if self.mappings:
            self.resources.release_mapped_pages(self.mappings)
