"""A bitonic sort along one axis, built from plain `linalg.generic`s: what TopK uses for axes too
long (or dynamic) for its quadratic rank count.

What is sorted is the tensor of the elements' indices along the axis (i64), padded to the next
power of two P (padding indices sort after every real element, among themselves by index);
elements are read from the source by index wherever an order is needed. Each of the
log2(P) * (log2(P) + 1) / 2 passes is one parallel generic in which position i compares its
element with that of position i XOR j and keeps the one that belongs there (the bitonic merge
of blocks of k); an `scf.while` runs the passes, (k, j) carried with the indices. O(P log^2 P)
work, in parallel; the order is the caller's strict total order (TopK's: value, then index).

NOTE: a first version carried a `tensor.pad`ded copy of the values next to the indices; IREE
(3.13) returned wrong indices from it (float bits) and crashed at some sizes, not investigated
further: only the indices are carried now, and the source is never padded.
"""

from __future__ import annotations

from collections.abc import Callable

from ..bindings import arith, linalg, math, mlir_ir, scf, tensor
from ..builders import (
    as_i64,
    as_index,
    constant,
    empty,
    generic,
    index_constant,
    index_value,
    tensor_sizes,
)
from ..types import index_type

__all__ = ["bitonic_sort"]

Before = Callable[[mlir_ir.Value, mlir_ir.Value, mlir_ir.Value, mlir_ir.Value], mlir_ir.Value]
"""before(a, a_index, b, b_index) -> i1: element a (originally at a_index, i64) sorts before
b; a strict total order (equal elements told apart by their indices)."""

ElementAt = Callable[[list[mlir_ir.Value], mlir_ir.Value], mlir_ir.Value]
"""element_at(position, index): the element at `position` (index values, one per dim) with
the i64 `index` along the sorted axis."""


def _power_of_two_at_least(length: int | mlir_ir.Value) -> int | mlir_ir.Value:
    """The smallest power of two >= length (1 for 0 and 1), static when length is."""
    if isinstance(length, int):
        return 1 << max(length - 1, 0).bit_length()
    i64 = mlir_ir.IntegerType.get_signless(64)
    below = as_i64(arith.SubIOp(arith.MaxSIOp(length, index_constant(1)).result, index_constant(1)).result)
    bits = arith.SubIOp(constant(i64, 64), math.CountLeadingZerosOp(below).result).result
    return as_index(arith.ShLIOp(constant(i64, 1), bits).result)


def bitonic_sort(source: mlir_ir.Value, axis: int, before: Before) -> tuple[mlir_ir.Value, ElementAt]:
    """(order, element_at): `order` holds, along `axis` padded to a power of two, the i64
    indices of `source`'s elements in sorted order (the first `length` positions; padding
    indices, >= length, after them); `element_at(position, index)` reads the element of
    `source` at `position` with `index` along the axis, inside a generic body."""
    source_type = mlir_ir.RankedTensorType(source.type)
    rank = source_type.rank
    i64 = mlir_ir.IntegerType.get_signless(64)
    sizes = tensor_sizes(source)
    length = sizes[axis]
    extent = index_value(length)
    padded_length = _power_of_two_at_least(length)
    padded_sizes = list(sizes)
    padded_sizes[axis] = padded_length
    every = list(range(rank))
    indices = generic(
        [],
        [(empty(padded_sizes, i64), every)],
        rank,
        (),
        lambda _: [as_i64(linalg.IndexOp(axis).result)],
    )[0]
    length64 = as_i64(extent)
    total = index_value(padded_length)

    def ordered(a, a_index, b, b_index) -> mlir_ir.Value:
        """a before b, the padding (index >= length) last, in index order among itself."""
        a_real = arith.CmpIOp(arith.CmpIPredicate.slt, a_index, length64).result
        b_real = arith.CmpIOp(arith.CmpIPredicate.slt, b_index, length64).result
        both = arith.AndIOp(a_real, b_real).result
        neither = arith.CmpIOp(
            arith.CmpIPredicate.eq, arith.OrIOp(a_real, b_real).result, constant(a_real.type, 0)
        ).result
        only_a = arith.AndIOp(a_real, arith.XOrIOp(b_real, constant(b_real.type, 1)).result).result
        by_order = arith.AndIOp(both, before(a, a_index, b, b_index)).result
        by_index = arith.AndIOp(
            neither, arith.CmpIOp(arith.CmpIPredicate.slt, a_index, b_index).result
        ).result
        return arith.OrIOp(only_a, arith.OrIOp(by_order, by_index).result).result

    last_real = arith.MaxSIOp(
        arith.SubIOp(extent, index_constant(1)).result, index_constant(0)
    ).result

    def element_at(position, index):
        """The element of `source` at `index` along the axis (a padding index reads the last
        real element: the order never looks at it)."""
        where = list(position)
        where[axis] = arith.MinSIOp(as_index(index), last_real).result
        return tensor.ExtractOp(source, where).result

    def merge_pass(current, block, distance):
        """One pass of the bitonic merge of blocks of `block` at `distance`."""

        def merge(arguments):
            own_index = arguments[0]
            position = [linalg.IndexOp(dim).result for dim in range(rank)]
            here = position[axis]
            partner = list(position)
            partner[axis] = arith.XOrIOp(here, distance).result
            other_index = tensor.ExtractOp(current, partner).result
            other_first = ordered(
                element_at(position, other_index),
                other_index,
                element_at(position, own_index),
                own_index,
            )
            # Ascending block (here & block == 0): the lower position of a pair takes the
            # element that sorts first; descending: the higher one does.
            ascending = arith.CmpIOp(
                arith.CmpIPredicate.eq, arith.AndIOp(here, block).result, index_constant(0)
            ).result
            lower = arith.CmpIOp(arith.CmpIPredicate.ult, here, partner[axis]).result
            wants_first = arith.CmpIOp(arith.CmpIPredicate.eq, ascending, lower).result
            take = arith.CmpIOp(arith.CmpIPredicate.eq, wants_first, other_first).result
            return [arith.SelectOp(take, other_index, own_index).result]

        return generic([(current, every)], [(empty(padded_sizes, i64), every)], rank, (), merge)[0]

    carried = [index_type(), index_type(), indices.type]
    loop = scf.WhileOp(carried, [index_constant(2), index_constant(1), indices])
    check = loop.before.blocks.append(*carried)
    with mlir_ir.InsertionPoint(check):
        going = arith.CmpIOp(arith.CmpIPredicate.sle, check.arguments[0], total).result
        scf.ConditionOp(going, list(check.arguments))
    step = loop.after.blocks.append(*carried)
    with mlir_ir.InsertionPoint(step):
        block, distance, current = step.arguments
        merged = merge_pass(current, block, distance)
        # The next (k, j): j halves down to 1, then k doubles and j restarts at k / 2.
        last = arith.CmpIOp(arith.CmpIPredicate.eq, distance, index_constant(1)).result
        next_block = arith.SelectOp(last, arith.AddIOp(block, block).result, block).result
        next_distance = arith.SelectOp(
            last, block, arith.DivUIOp(distance, index_constant(2)).result
        ).result
        scf.YieldOp([next_block, next_distance, merged])
    return loop.results[2], element_at
