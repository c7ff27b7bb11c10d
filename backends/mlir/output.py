"""LoweredModule: a verified MLIR module and the ways to write it out.

Text (`.mlir`) is MLIR's own printer for the module body, with debug locations (so downstream
tools point at ONNX nodes), followed by the `{-# dialect_resources: ... #-}` section, which we
write ourselves: MLIR's printer builds each blob's whole hex string in memory (2x the weights,
plus a copy on the way to Python), while we stream it from the Niro buffers in 1 MiB chunks.
The bytes are those MLIR would print (uppercase hex, 4-byte little-endian alignment first).

Bytecode (`.mlirbc`) is MLIR's writer; it hands the blobs to Python's stream as they are.
"""

from __future__ import annotations

import io
import re
from typing import BinaryIO

from .bindings import ir
from .literals import ResourceTable

__all__ = ["LoweredModule"]

_HEX_CHUNK = 1 << 20
_EMPTY_RESOURCE_SECTION = re.compile(rb"\n*\{-#\s*#-\}\s*\Z")


class LoweredModule:
    """An MLIR module that verified, with the context and resource buffers it depends on.

    Keep this object alive while using `module`: MLIR's blobs point into the Niro buffers held
    by `resources`, and the module belongs to `context`.
    """

    def __init__(
        self,
        module: ir.Module,
        context: ir.Context,
        resources: ResourceTable,
        *,
        has_generic_ops: bool = False,
    ):
        self.module = module
        self.context = context
        self.resources = resources
        self.has_generic_ops = has_generic_ops
        """True when UnknownOps were kept as generic ops (tools need --allow-unregistered-dialect)."""

    @property
    def operation(self) -> ir.Operation:
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
        text = _EMPTY_RESOURCE_SECTION.sub(b"\n", body.getvalue())
        stream.write(text)
        if elide_weights or not self.resources.blobs:
            return
        stream.write(b"\n{-#\n  dialect_resources: {\n    builtin: {\n")
        last = len(self.resources.blobs) - 1
        for index, blob in enumerate(self.resources.blobs):
            stream.write(f'      {blob.name}: "0x'.encode())
            stream.write(blob.alignment.to_bytes(4, "little").hex().upper().encode())
            data = blob.data
            for start in range(0, data.nbytes, _HEX_CHUNK):
                stream.write(data[start : start + _HEX_CHUNK].hex().upper().encode())
            stream.write(b'"\n' if index == last else b'",\n')
        stream.write(b"    }\n  }\n#-}\n")

    def write_bytecode(self, stream: BinaryIO) -> None:
        """Writes `.mlirbc` bytecode (blobs included)."""
        with self.context:
            self.module.operation.write_bytecode(stream)

    def to_text(self, elide_weights: bool = False) -> str:
        """The `.mlir` text as a string (convenient for small modules and tests)."""
        buffer = io.BytesIO()
        self.write_text(buffer, elide_weights=elide_weights)
        return buffer.getvalue().decode()

    def __str__(self) -> str:
        return self.to_text(elide_weights=True)
