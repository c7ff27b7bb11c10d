"""OptionalHasElement and OptionalGetElement on plain tensors.

Niro has no optional type: a value typed `optional(...)` is refused at import, so what reaches
the backend is either a tensor (an optional that always holds one) or an absent input (an empty
optional). Whether an element is there is then known at compile time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..bindings import mlir_ir, tensor
from ..builders import constant
from ..context import LoweringRuleContext
from ..registry import register_lowering

__all__: list[str] = []


@register_lowering("onnx.OptionalHasElement", since=15)
def _lower_has_element(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """True for a tensor operand, false for an absent one: a 0-d BOOL tensor."""
    present = constant(mlir_ir.IntegerType.get_signless(1), 1 if ctx.operands else 0)
    return [tensor.FromElementsOp(ctx.result_types[0], [present]).result]


@register_lowering("onnx.OptionalGetElement", since=15)
def _lower_get_element(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """The tensor itself; an empty optional has no element to get."""
    if not ctx.operands:
        raise ctx.error("gets the element of an empty optional (the input is absent)")
    if ctx.operands[0].type != ctx.result_types[0]:
        raise ctx.error(f"takes {ctx.operands[0].type} but declares the result {ctx.result_types[0]}")
    return [ctx.operands[0]]
