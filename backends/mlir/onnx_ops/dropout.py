"""Dropout at inference.

Dropout at inference is the identity, and its optional mask is all true. Training-mode dropout
draws random numbers, which a compiled model cannot reproduce, so it is refused unless the
ratio is a constant 0 (then it is the identity too).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..bindings import mlir_ir, tensor
from ..builders import constant, filled, tensor_sizes
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type, lower_type
from .common import attribute, element_type, imported_op, input_index, opset

__all__: list[str] = []


def _constant_scalar(ctx: LoweringRuleContext, position: int, what: str):
    """ONNX input `position` as a Python scalar when a compile-time constant; None when absent."""
    index = input_index(ctx, position)
    if index is None:
        return None
    value = ctx.constant_operand(index)
    if value is None:
        raise ctx.error(
            f"needs {what} to be a compile-time constant (training-mode dropout is random)"
        )
    return value.reshape(-1)[0].item()


@register_lowering("onnx.Dropout")
def _lower_dropout(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    if opset(ctx) < 7 and not attribute(ctx, "is_test", 0):
        raise ctx.error(
            "in training mode (is_test=0) draws random numbers; only inference is supported"
        )
    training = _constant_scalar(ctx, 2, "training_mode") if opset(ctx) >= 12 else False
    if training:
        ratio = _constant_scalar(ctx, 1, "ratio") if opset(ctx) >= 12 else None
        if ratio is None:
            ratio = 0.5
        if ratio != 0:
            raise ctx.error(
                f"in training mode with ratio {ratio} draws random numbers; only inference "
                "(or ratio 0) is supported"
            )
    results = [ctx.operands[0]]
    if len(ctx.niro_results) > 1 and 1 not in imported_op(ctx).absent_outputs:
        # NOTE: shape inference may leave the mask unranked (old opsets); it has X's shape.
        mask_type = ctx.niro_results[1].type
        ctx.ranked(ctx.niro_operands[0], "input X")
        element = lower_scalar_type(element_type(ctx.niro_results[1]))
        one = constant(element, 1 if isinstance(element, mlir_ir.IntegerType) else 1.0)
        mask = filled(tensor_sizes(ctx.operands[0]), element, one)
        target = lower_type(mask_type)
        if mask.type != target:
            mask = tensor.CastOp(target, mask).result
        results.append(mask)
    return results
