"""MLIR lowering of ONNX Det: the determinant of each square matrix in a batch, by Gaussian
elimination with partial pivoting (an LU factorization, as LAPACK's getrf under numpy's det).

The matrix size N must be static (one of the two matrix dims may be dynamic: it is checked
to equal the other at run time): the elimination is N - 1 steps, each two `linalg.generic`s
over the whole batch (the pivot row: the first largest |a[i, k]| for i >= k; then one step of
elimination, the pivot row swapped into row k). A swap would flip the determinant's sign; the
swapped-in row is negated instead, so every step keeps the determinant and the result is the
product of the final diagonal, with no sign bookkeeping. A zero pivot (a singular matrix)
eliminates nothing rather than dividing by zero, so the product is an exact 0, not NaN.

Work is O(batch x N^3) and the IR O(N) ops; batch dims may be dynamic. f16/bf16 compute in f32.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import format_type

from ..bindings import arith, linalg, math, mlir_ir, tensor
from ..builders import (
    accumulator_type,
    as_i64,
    as_index,
    cast_to,
    checked_cast,
    constant,
    convert,
    empty,
    fill,
    generic,
    index_constant,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .common import ranked_result

__all__: list[str] = []


def _pivot_rows(matrices: mlir_ir.Value, batch: int, step: int) -> mlir_ir.Value:
    """Per matrix, the i64 row of the first largest |a[i, step]| over i >= step."""
    compute = mlir_ir.RankedTensorType(matrices.type).element_type
    i64 = mlir_ir.IntegerType.get_signless(64)
    batch_sizes = tensor_sizes(matrices)[:batch]
    loops = batch + 1
    batch_dims = list(range(batch))
    column = [*batch_dims, batch, mlir_ir.AffineConstantExpr.get(step)]
    best_init = fill(empty(batch_sizes, compute), constant(compute, -1.0))
    row_init = fill(empty(batch_sizes, i64), constant(i64, step))

    def body(arguments):
        value, best, row = arguments
        here = as_i64(linalg.IndexOp(batch).result)
        magnitude = math.AbsFOp(value).result
        # Ties keep the lower row whatever order the loop runs in.
        larger = arith.CmpFOp(arith.CmpFPredicate.OGT, magnitude, best).result
        tie = arith.AndIOp(
            arith.CmpFOp(arith.CmpFPredicate.OEQ, magnitude, best).result,
            arith.CmpIOp(arith.CmpIPredicate.slt, here, row).result,
        ).result
        eligible = arith.CmpIOp(arith.CmpIPredicate.sge, here, constant(i64, step)).result
        take = arith.AndIOp(eligible, arith.OrIOp(larger, tie).result).result
        return [
            arith.SelectOp(take, magnitude, best).result,
            arith.SelectOp(take, here, row).result,
        ]

    _, rows = generic(
        [(matrices, column)],
        [(best_init, batch_dims), (row_init, batch_dims)],
        loops,
        (batch,),
        body,
    )
    return rows


def _eliminate(matrices: mlir_ir.Value, pivots: mlir_ir.Value, batch: int, step: int) -> mlir_ir.Value:
    """One elimination step: row `step` becomes the pivot row (negated when it was swapped in),
    rows below lose their multiple of it; rows above are final and kept."""
    shaped = mlir_ir.RankedTensorType(matrices.type)
    compute = shaped.element_type
    loops = batch + 2
    identity = list(range(loops))
    zero = constant(compute, 0.0)

    def body(arguments):
        pivot_row = as_index(arguments[0])
        positions = [linalg.IndexOp(loop).result for loop in range(loops)]
        batch_position, row, column = positions[:batch], positions[batch], positions[batch + 1]
        k = index_constant(step)

        def read(at_row: mlir_ir.Value, at_column: mlir_ir.Value) -> mlir_ir.Value:
            return tensor.ExtractOp(matrices, [*batch_position, at_row, at_column]).result

        is_pivot_step_row = arith.CmpIOp(arith.CmpIPredicate.eq, row, k).result
        # After the swap, row `pivot_row` holds the old row k.
        is_swapped_row = arith.CmpIOp(arith.CmpIPredicate.eq, row, pivot_row).result
        source_row = arith.SelectOp(
            is_pivot_step_row, pivot_row, arith.SelectOp(is_swapped_row, k, row).result
        ).result
        value = read(source_row, column)
        pivot_value = read(pivot_row, k)
        pivot_row_value = read(pivot_row, column)
        factor = arith.DivFOp(read(source_row, k), pivot_value).result
        singular = arith.CmpFOp(arith.CmpFPredicate.OEQ, pivot_value, zero).result
        factor = arith.SelectOp(singular, zero, factor).result
        eliminated = arith.SubFOp(value, arith.MulFOp(factor, pivot_row_value).result).result
        swapped = arith.CmpIOp(arith.CmpIPredicate.ne, pivot_row, k).result
        pivot_out = arith.SelectOp(swapped, arith.NegFOp(value).result, value).result
        below = arith.CmpIOp(arith.CmpIPredicate.ugt, row, k).result
        above = arith.CmpIOp(arith.CmpIPredicate.ult, row, k).result
        result = arith.SelectOp(below, eliminated, pivot_out).result
        return [arith.SelectOp(above, read(row, column), result).result]

    init = empty(tensor_sizes(matrices), compute)
    return generic([(pivots, list(range(batch)))], [(init, identity)], loops, (), body)[0]


def _diagonal_product(matrices: mlir_ir.Value, batch: int) -> mlir_ir.Value:
    compute = mlir_ir.RankedTensorType(matrices.type).element_type
    batch_dims = list(range(batch))
    init = fill(empty(tensor_sizes(matrices)[:batch], compute), constant(compute, 1.0))
    return generic(
        [(matrices, [*batch_dims, batch, batch])],
        [(init, batch_dims)],
        batch + 1,
        (batch,),
        lambda arguments: [arith.MulFOp(arguments[1], arguments[0]).result],
    )[0]


def _map(value: mlir_ir.Value, element: mlir_ir.Type, convert_one) -> mlir_ir.Value:
    """An element-wise generic converting every element of `value` to `element`."""
    loops = mlir_ir.RankedTensorType(value.type).rank
    identity = list(range(loops))
    init = empty(tensor_sizes(value), element)
    return generic(
        [(value, identity)], [(init, identity)], loops, (), lambda args: [convert_one(args[0])]
    )[0]


def _square(ctx: LoweringRuleContext, matrices: mlir_ir.Value, batch: int, size: int) -> mlir_ir.Value:
    """`matrices` typed size x size: a matrix dim that is dynamic must equal the other, static
    one (square matrices), checked at run time."""
    shaped = mlir_ir.RankedTensorType(matrices.type)
    square = mlir_ir.RankedTensorType.get([*shaped.shape[:batch], size, size], shaped.element_type)
    return checked_cast(matrices, square, f"{ctx.niro_location}: 'onnx.Det' op", "the input (square matrices)")


@register_lowering("onnx.Det", since=11)
def _lower_det(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    data = ctx.ranked(ctx.niro_operands[0], "input")
    scalar = data.element_type
    if not scalar.is_float:
        raise ctx.error(f"does not support element type {scalar.spelling} (expected a float type)")
    rank = len(data.shape)
    if rank < 2:
        raise ctx.error(f"expects an input of rank >= 2, got {format_type(data)}")
    rows, columns = data.shape[-2:]
    if None not in (rows, columns) and rows != columns:
        raise ctx.error(f"expects square matrices, got {format_type(data)}")
    size = rows if rows is not None else columns
    if size is None:
        raise ctx.error(
            f"needs a static matrix size (the elimination is unrolled), got {format_type(data)}"
        )
    batch = rank - 2
    matrices = _square(ctx, ctx.operands[0], batch, size)
    result = ctx.ranked(ctx.niro_results[0], "result")
    if len(result.shape) != batch or any(
        None not in (got, want) and got != want
        for got, want in zip(result.shape, data.shape[:batch], strict=True)
    ):
        raise ctx.error(
            f"result {format_type(result)} is not the batch shape of {format_type(data)}"
        )
    result_element = ranked_result(ctx, 0).element_type
    compute = accumulator_type(scalar)
    if compute != result_element:
        matrices = _map(matrices, compute, lambda value: convert(value, compute))
    for step in range(size - 1):
        pivots = _pivot_rows(matrices, batch, step)
        matrices = _eliminate(matrices, pivots, batch, step)
    determinant = _diagonal_product(matrices, batch)
    if compute != result_element:
        determinant = _map(
            determinant, result_element, lambda value: convert(value, result_element)
        )
    return [cast_to(determinant, ctx.result_types[0])]
