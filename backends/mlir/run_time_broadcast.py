"""ONNX's broadcast of a dynamic dim that is 1 at run time, against another dynamic dim.

Two dynamic dims of one broadcast axis (`x: [?, 4] + y: [?, 4]`, MatMul batch dims
`[?, ?, 3, 4] x [?, ?, 4, 2]`) are each 1 or the axis's size N at run time; ONNX broadcasts the
1. The types cannot say which dim that is, so the size is chosen at run time (`broadcast_size`)
and each such operand is read at index min(i, dim - 1) there, 0 for a 1 and i otherwise: by
the element-wise ops' clamped `tensor.extract` (context.py), or through a copy made at N
(`broadcast_ones`) for a contraction. Static shapes never come here (their broadcasts are
indexing maps), nor does an axis whose size the types fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .bindings import arith, ir, linalg, tensor
from .types import index_type

__all__ = ["broadcast_ones", "broadcast_size", "is_one_or"]


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(index_type(), ir.IntegerAttr.get(index_type(), value)).result


def _equal(lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    return arith.CmpIOp(arith.CmpIPredicate.eq, lhs, rhs).result


def broadcast_size(sizes: Sequence[ir.Value]) -> ir.Value:
    """The size ONNX gives an axis whose dims are `sizes` (index values, each 1 or the size):
    the last that is not 1, else 1. A 0 against a 1 gives 0, as ONNX's broadcast does."""
    size = sizes[0]
    for each in sizes[1:]:
        size = arith.SelectOp(_equal(each, _index(1)), size, each).result
    return size


def is_one_or(dim: ir.Value, size: ir.Value) -> ir.Value:
    """The i1 `dim == 1 or dim == size`: a dim ONNX can broadcast to `size`."""
    return arith.OrIOp(_equal(dim, _index(1)), _equal(dim, size)).result


def broadcast_ones(value: ir.Value, sizes: Mapping[int, ir.Value]) -> ir.Value:
    """`value` with each dynamic dim `axis` of `sizes` (1 or `sizes[axis]` at run time, checked
    by the caller) made `sizes[axis]`: a copy that repeats its size-1 dims (element index
    min(i, dim - 1), the identity where the dim already is the size). Same type as `value`.

    NOTE: always a copy, not an `scf.if` that copies only when a dim is 1: IREE 3.13 cannot
    resolve the dims of such an `scf.if` result in the dispatches that read it ("'tensor.dim'
    op unexpected during shape cleanup; dynamic dimensions must have been resolved prior to
    leaving the flow dialect"). The copy is an element-wise producer, which IREE fuses into
    its consumer's dispatch."""
    type_ = ir.RankedTensorType(value.type)
    rank = type_.rank
    lasts = {
        axis: arith.SubIOp(tensor.DimOp(value, _index(axis)).result, _index(1)).result
        for axis in sizes
    }
    extents = [
        sizes[axis]
        if axis in sizes
        else (tensor.DimOp(value, _index(axis)).result if type_.is_dynamic_dim(axis) else type_.shape[axis])
        for axis in range(rank)
    ]
    init = tensor.EmptyOp(extents, type_.element_type).result
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    copy = linalg.GenericOp(
        [init.type],
        [],
        [init],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
        ir.ArrayAttr.get([parallel] * rank),
    )
    block = copy.regions[0].blocks.append(type_.element_type)
    with ir.InsertionPoint(block):
        indices = []
        for axis in range(rank):
            position = linalg.IndexOp(axis).result
            if axis in sizes:
                position = arith.MinUIOp(position, lasts[axis]).result
            indices.append(position)
        linalg.YieldOp([tensor.ExtractOp(value, indices).result])
    return copy.result
