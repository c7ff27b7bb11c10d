"""Run-time checks: `cf.assert`, which stops the program with a message when a condition the
compiler could not prove (a dynamic size, an index read from data) is false."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..bindings import arith, cf, mlir_ir, tensor
from .constants import constant, index_constant
from .shapes import dim_size, empty
from .structured import MapSpec, fill, generic

__all__ = ["assert_true", "assert_all", "checked_cast"]


def assert_true(condition: mlir_ir.Value, message: str) -> None:
    """A run-time check (`cf.assert`): the program fails with `message` when it is false."""
    cf.AssertOp(condition, message)


def checked_cast(value: mlir_ir.Value, target: mlir_ir.Type, where: str, what: str) -> mlir_ir.Value:
    """`value` as the compatible tensor type `target` (`tensor.cast`). Each dim that the cast
    makes static is checked at run time ("`where`: dim 1 of `what` is not 4"), so a wrong
    size stops the program instead of reading out of bounds."""
    if value.type == target:
        return value
    if isinstance(value.type, mlir_ir.RankedTensorType) and isinstance(target, mlir_ir.RankedTensorType):
        source = mlir_ir.RankedTensorType(value.type)
        for axis in range(source.rank):
            if source.is_dynamic_dim(axis) and not target.is_dynamic_dim(axis):
                want = target.shape[axis]
                equal = arith.CmpIOp(arith.CmpIPredicate.eq, dim_size(value, axis), index_constant(want))
                assert_true(equal.result, f"{where}: dim {axis} of {what} is not {want}")
    return tensor.CastOp(target, value).result


def assert_all(
    inputs: Sequence[tuple[mlir_ir.Value, MapSpec]],
    loops: int,
    holds: Callable[[list[mlir_ir.Value]], mlir_ir.Value],
    message: str,
) -> None:
    """A run-time check over every element: `holds(elements)` (an i1) must be true for all of
    them (counted by one reduction over all `loops`), else the program fails with `message`."""
    i64 = mlir_ir.IntegerType.get_signless(64)

    def count(arguments: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        *elements, failures = arguments
        more = arith.AddIOp(failures, constant(i64, 1)).result
        return [arith.SelectOp(holds(elements), failures, more).result]

    init = fill(empty([], i64), constant(i64, 0))
    failures = generic(inputs, [(init, [])], loops, tuple(range(loops)), count)[0]
    none = arith.CmpIOp(
        arith.CmpIPredicate.eq, tensor.ExtractOp(failures, []).result, constant(i64, 0)
    )
    assert_true(none.result, message)
