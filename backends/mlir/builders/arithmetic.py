"""Element-wise binary arithmetic (add, multiply): the one lowering of Niro's Add/Mul and of
`onnx.Add`/`onnx.Mul`.

The two differ only in where an f16/bf16 element is computed (`halves_in_f32`): Niro's ops
compute in the element type, `onnx.Add`/`onnx.Mul` (the legacy-broadcast forms the frontend
leaves generic) widen to f32 and round the result once, as every kernel of
`onnx_ops.elementwise.elementwise_rule` does. The numbers are the same: f32 holds the exact
product of two halves and rounds their sum so that one more rounding to the half type is the
correctly rounded half result (24 >= 2 * 11 + 2 significand bits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from niro.ir import ScalarType

from ..bindings import mlir_ir
from .broadcast import elementwise
from .elements import accumulator_type, convert

if TYPE_CHECKING:
    from ..context import LoweringRuleContext

__all__ = ["Arithmetic", "binary_arithmetic"]

Arithmetic = Literal["add", "mul"]

_OPERATIONS: dict[str, tuple[str, str]] = {
    "add": ("arith.addf", "arith.addi"),
    "mul": ("arith.mulf", "arith.muli"),
}
"""(float op, integer op) of each operation."""


def binary_arithmetic(
    ctx: LoweringRuleContext, operation: Arithmetic, *, halves_in_f32: bool
) -> mlir_ir.Value:
    """`operation` of the op's two operands into its one result: an arith op on scalars, a
    broadcasting `linalg.generic` (`elementwise`) on tensors. The caller has checked that the
    element type is a number (not BOOL) shared by both operands.

    NOTE: the arith op is built with the generic builder (both operands and the result have the
    compute type): the generated `arith.addf` wrapper costs 2.5x as much, once per element op."""
    result_type = ctx.niro_results[0].type
    element = result_type if isinstance(result_type, ScalarType) else result_type.element_type
    float_op, integer_op = _OPERATIONS[operation]
    name = float_op if element.is_float else integer_op
    storage = ctx.mlir_type(element)
    compute = accumulator_type(element) if halves_in_f32 else storage

    def build(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        operands = [convert(lhs, compute), convert(rhs, compute)]
        result = mlir_ir.Operation.create(name, results=[compute], operands=operands).result
        return convert(result, storage)

    if isinstance(result_type, ScalarType):
        return build(ctx.operands[0], ctx.operands[1])
    return elementwise(ctx, lambda elements: build(elements[0], elements[1]))
