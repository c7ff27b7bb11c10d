"""`onnx.If` whose branches yield values of different shapes: an `scf.if` whose arms cast.

The frontend turns an If whose branches yield the same types into Niro's own If; ONNX also
lets the branches' shapes differ (torchvision's `batched_nms` yields an empty `tensor<0xi64>`
in one arm and `tensor<?xi64>` in the other), and such an If stays an UnknownOp whose result
types are ONNX's (dynamic where the arms differ). Each arm's yields are `tensor.cast` to those
result types; arms whose ranks differ from the result's are refused (no cast joins them).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import TensorType, UnknownOp, Yield, format_type

from ..bindings import ir, scf, tensor
from ..context import LoweringRuleContext, register_lowering
from ..rules import build_scf_if

__all__: list[str] = []


@register_lowering("onnx.If", since=1)
def _lower_if(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    op: UnknownOp = ctx.op  # type: ignore[assignment]
    names = tuple(op.attributes.get("regions") or ())
    if len(ctx.operands) != 1 or sorted(names) != ["else_branch", "then_branch"]:
        raise ctx.error("expects a condition and two branches")
    branches = [op.regions[names.index(name)] for name in ("then_branch", "else_branch")]
    results = [ctx.ranked(value, f"result #{index}") for index, value in enumerate(ctx.niro_results)]
    for name, region in zip(("then_branch", "else_branch"), branches, strict=True):
        if len(region.blocks) != 1:
            raise ctx.error(f"expects {name} to hold one block")
        terminator = region.blocks[0].operations[-1]
        if not isinstance(terminator, Yield) or len(terminator.operands) != len(results):
            raise ctx.error(f"expects {name} to yield its {len(results)} results")
        for index, (value, result) in enumerate(zip(terminator.operands, results, strict=True)):
            yielded = value.type
            if not isinstance(yielded, TensorType) or yielded.shape is None or len(yielded.shape) != len(result.shape):
                raise ctx.error(
                    f"{name} yields {format_type(yielded)} for result #{index} of type {format_type(result)}: "
                    "only shapes of the same rank can be joined"
                )
    condition = ctx.operands[0]
    if isinstance(condition.type, ir.RankedTensorType):  # a one-element tensor<i1> or tensor<1xi1>
        condition = tensor.ExtractOp(condition, [ctx.index_constant(0)] * condition.type.rank).result
    result_types = list(ctx.result_types)

    def cast_yield(yield_ctx: LoweringRuleContext) -> None:
        values = [
            value if value.type == wanted else tensor.CastOp(wanted, value).result
            for value, wanted in zip(yield_ctx.operands, result_types, strict=True)
        ]
        scf.YieldOp(values)

    return build_scf_if(ctx, condition, (branches[0], branches[1]), cast_yield)
