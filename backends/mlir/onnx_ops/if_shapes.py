"""`onnx.If` whose branches yield values of different shapes: its ONNX form checked, then
lowered by the one If lowering (`rules.lower_if`), whose arms cast.

The frontend turns an If whose branches yield the same types into Niro's own If; ONNX also
lets the branches' shapes differ (torchvision's `batched_nms` yields an empty `tensor<0xi64>`
in one arm and `tensor<?xi64>` in the other), and such an If stays an UnknownOp whose result
types are ONNX's (dynamic where the arms differ). Each arm's yields are `tensor.cast` to those
result types; arms whose ranks differ from the result's are refused (no cast joins them).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ImportedOp, TensorType, Yield, format_type

from ..bindings import mlir_ir
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..rules import lower_if
from .common import imported_op

__all__: list[str] = []


def _yielded_ranks(region) -> tuple[int | None, ...] | None:
    terminator = (
        region.blocks[0].operations[-1]
        if len(region.blocks) == 1 and region.blocks[0].operations
        else None
    )
    if not isinstance(terminator, Yield):
        return None
    return tuple(
        len(value.type.shape)
        if isinstance(value.type, TensorType) and value.type.shape is not None
        else None
        for value in terminator.operands
    )


def _refuse_rank_changes(ctx: LoweringRuleContext, op: ImportedOp, branches) -> None:
    """Branches whose yields differ in rank (the If's result of unknown rank, as ONNX leaves
    it) have no MLIR type in common: the If compiles only once its condition folds. The
    frontend's reason names what the condition reads and the way out; the refusal repeats it
    rather than a bare "needs a ranked result"."""
    if all(
        isinstance(result.type, TensorType) and result.type.shape is not None
        for result in ctx.niro_results
    ):
        return  # a declared rank: the arms are checked against it below
    then_ranks, else_ranks = (_yielded_ranks(region) for region in branches)
    if then_ranks is None or else_ranks is None or then_ranks == else_ranks:
        return
    detail = op.generic_reason or "its branches yield values of different ranks"
    raise ctx.error(
        "cannot be compiled while its condition is only known at run time: the branches yield "
        f"values of different ranks, which no tensor type can hold ({detail})"
    )


@register_lowering("onnx.If", since=1)
def _lower_if(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = imported_op(ctx)
    if len(ctx.operands) != 1 or sorted(op.regions) != ["else_branch", "then_branch"]:
        raise ctx.error("expects a condition and two branches")
    branches = [op.regions[name] for name in ("then_branch", "else_branch")]
    _refuse_rank_changes(ctx, op, branches)
    results = [
        ctx.ranked(value, f"result #{index}") for index, value in enumerate(ctx.niro_results)
    ]
    for name, region in zip(("then_branch", "else_branch"), branches, strict=True):
        if len(region.blocks) != 1:
            raise ctx.error(f"expects {name} to hold one block")
        terminator = region.blocks[0].operations[-1]
        if not isinstance(terminator, Yield) or len(terminator.operands) != len(results):
            raise ctx.error(f"expects {name} to yield its {len(results)} results")
        for index, (value, result) in enumerate(zip(terminator.operands, results, strict=True)):
            yielded = value.type
            if (
                not isinstance(yielded, TensorType)
                or yielded.shape is None
                or len(yielded.shape) != len(result.shape)
            ):
                raise ctx.error(
                    f"{name} yields {format_type(yielded)} for result #{index} of type {format_type(result)}: "
                    "only shapes of the same rank can be joined"
                )
    return lower_if(ctx, ctx.operands[0], (branches[0], branches[1]))
