"""Structural equality: do two pieces of IR have the same content?

Ops, blocks and regions compare by identity (`eq=False`), so `==` says "the same object". Here
two nodes are equal when they have the same shape and the same fields: the same op kinds with
equal values (ids and types), literals and attributes of the same kind and value, equal `loc`,
and regions of blocks that match by position. A successor (a Branch target) is compared by its
index in the region being compared, so two copies of a CFG are equal though their Blocks are
different objects. Buffers compare by bytes (a bytes and a memoryview of the same bytes are
equal); floats compare by bits, so a NaN equals the same NaN and 0.0 differs from -0.0; True
differs from 1 and 1 from 1.0.

The walk uses an explicit worklist, never recursion over nesting, so 500-deep Ifs compare fine.
It checks nothing else (use `verify`).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping

from .attributes import as_memoryview, buffer_nbytes, is_buffer
from .ops import OP_KINDS
from .structure import Block, Function, FunctionType, Global, Module, Region
from .types import ScalarType, TensorType
from .values import Value, ValueId

__all__ = ["structurally_equal"]

_Labels = tuple[dict[int, int], dict[int, int]]
"""For the innermost regions being compared: id(block) -> position, left and right."""

_NO_LABELS: _Labels = ({}, {})
_COMPARE_CHUNK = 1 << 20


def structurally_equal(a: object, b: object) -> bool:
    """True when `a` and `b` (Modules, Functions, Globals, Regions, Blocks, Ops, types, values
    or attributes) have the same structure and content (see the module docstring)."""
    work: list[tuple[object, object, _Labels]] = [(a, b, _NO_LABELS)]
    while work:
        left, right, labels = work.pop()
        if not _node_equal(left, right, labels, work):
            return False
    return True


def _node_equal(left, right, labels: _Labels, work: list) -> bool:
    if type(left) is not type(right):
        return _field_equal(left, right, labels, work)
    if isinstance(left, Module):
        if len(left.globals) != len(right.globals) or len(left.functions) != len(right.functions):
            return False
        work.extend((a, b, labels) for a, b in zip(left.globals, right.globals, strict=True))
        work.extend((a, b, labels) for a, b in zip(left.functions, right.functions, strict=True))
        return True
    if isinstance(left, Function):
        if (
            left.name != right.name
            or not _field_equal(left.type, right.type, labels, work)
            or not _field_equal(left.input_names, right.input_names, labels, work)
            or not _field_equal(left.output_names, right.output_names, labels, work)
            or (left.body is None) != (right.body is None)
        ):
            return False
        if left.body is not None:
            work.append((left.body, right.body, labels))
        return True
    if isinstance(left, Global):
        return (
            _field_equal(left.name, right.name, labels, work)
            and _field_equal(left.type, right.type, labels, work)
            and _field_equal(left.initializer, right.initializer, labels, work)
        )
    if isinstance(left, Region):
        if len(left.blocks) != len(right.blocks):
            return False
        inner = (
            {id(block): index for index, block in enumerate(left.blocks)},
            {id(block): index for index, block in enumerate(right.blocks)},
        )
        work.extend((a, b, inner) for a, b in zip(left.blocks, right.blocks, strict=True))
        return True
    if isinstance(left, Block):
        if labels is _NO_LABELS:  # a lone block: branches back to itself are position 0
            labels = ({id(left): 0}, {id(right): 0})
        if not _field_equal(left.arguments, right.arguments, labels, work):
            return False
        if len(left.operations) != len(right.operations):
            return False
        work.extend((a, b, labels) for a, b in zip(left.operations, right.operations, strict=True))
        return True
    if isinstance(left, OP_KINDS):
        return all(
            _field_equal(getattr(left, field.name), getattr(right, field.name), labels, work)
            for field in dataclasses.fields(left)  # type: ignore[arg-type]  # OP_KINDS are dataclasses
        )
    return _field_equal(left, right, labels, work)


def _field_equal(left, right, labels: _Labels, work: list) -> bool:
    """One field of a node: regions are queued, successors compared by position."""
    if is_buffer(left) or is_buffer(right):
        return is_buffer(left) and is_buffer(right) and _buffers_equal(left, right)
    if type(left) is not type(right):
        return False
    if isinstance(left, Region):
        work.append((left, right, labels))
        return True
    if isinstance(left, Block):
        left_index = labels[0].get(id(left))
        right_index = labels[1].get(id(right))
        if left_index is None or right_index is None:
            return left is right  # not in the region compared (ill-formed): same object or not
        return left_index == right_index
    if isinstance(left, float):
        return struct.pack("<d", left) == struct.pack("<d", right)
    if isinstance(left, tuple):
        return len(left) == len(right) and all(
            _field_equal(a, b, labels, work) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, Mapping):
        return left.keys() == right.keys() and all(
            _field_equal(left[key], right[key], labels, work) for key in left
        )
    if isinstance(left, (Module, Function, Global)) or isinstance(left, OP_KINDS):
        work.append((left, right, labels))
        return True
    if isinstance(left, (Value, ValueId, ScalarType, TensorType, FunctionType)):
        return left == right
    # None, bool, int, str: exact types already match.
    return left == right


def _buffers_equal(left, right) -> bool:
    if buffer_nbytes(left) != buffer_nbytes(right):
        return False
    left_view, right_view = as_memoryview(left), as_memoryview(right)
    for start in range(0, left_view.nbytes, _COMPARE_CHUNK):
        end = start + _COMPARE_CHUNK
        if left_view[start:end].tobytes() != right_view[start:end].tobytes():
            return False
    return True
