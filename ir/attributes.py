"""Literals and generic attributes.

A literal is data written into the IR (Const, Global initializers): a bool, an int, a float, or a
buffer of packed little-endian row-major bytes for a tensor. Buffers stay buffers (bytes,
bytearray, memoryview, mmap): they are never expanded into Python lists, so a 1 GB weight costs
1 GB once.

A generic attribute is compile-time configuration on an UnknownOp: None (empty), bool, int,
float, str, a buffer, or an aggregate (a tuple of attributes, or a dict from str to attribute).
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from typing_extensions import TypeIs

__all__ = [
    "Buffer",
    "Literal",
    "Attribute",
    "is_buffer",
    "buffer_nbytes",
    "as_memoryview",
    "is_attribute",
    "attribute_problem",
]

Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]
Literal = Union[bool, int, float, Buffer]
Attribute = Union[None, bool, int, float, str, Buffer, tuple, dict]

_BUFFER_TYPES = (bytes, bytearray, memoryview, mmap.mmap)


def is_buffer(value: object) -> TypeIs[Buffer]:
    """Whether `value` is a buffer; the type checker narrows both ways (a Literal that is not
    a buffer is a bool, an int or a float)."""
    return isinstance(value, _BUFFER_TYPES)


def as_memoryview(buffer: Buffer) -> memoryview:
    """A flat byte view of a buffer, without copying it."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def buffer_nbytes(buffer: Buffer) -> int:
    if isinstance(buffer, memoryview):
        return buffer.nbytes
    return len(buffer)


def attribute_problem(value: object) -> str | None:
    """Why `value` is not a generic attribute, or None when it is one."""
    if value is None or isinstance(value, (bool, int, float, str)) or is_buffer(value):
        return None
    if isinstance(value, tuple):
        for item in value:
            problem = attribute_problem(item)
            if problem is not None:
                return problem
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"attribute dict keys must be str, got {key!r}"
            problem = attribute_problem(item)
            if problem is not None:
                return problem
        return None
    return f"{type(value).__name__} is not an attribute kind (None, bool, int, float, str, bytes, tuple, dict)"


def is_attribute(value: object) -> bool:
    return attribute_problem(value) is None
