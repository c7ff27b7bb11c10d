"""Helpers shared by the ONNX operator lowerings (one place for each idea; add here, don't copy).

Every family module (`elementwise.py`, `shape_ops.py`, ...) registers its rules with
`@register_lowering("onnx.<Op>", since=...)` and uses these to read attributes and operands the
way the ONNX frontend encodes them (see frontends/onnx/importer.py `_convert_generic`): generic
attributes by ONNX name, `absent_inputs` listing the positions of empty optional inputs (the
operand tuple skips them), `niro.opset` the op-set version.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import OPSET_ATTRIBUTE, ScalarType, TensorType, UnknownOp, Value

from ..bindings import ir
from ..context import LoweringRuleContext

__all__ = [
    "attribute",
    "opset",
    "input_value",
    "input_index",
    "normalize_axis",
    "element_type",
]


def attribute(ctx: LoweringRuleContext, name: str, default=None):
    """The ONNX attribute `name` of the op (as the frontend converted it), or `default`."""
    op: UnknownOp = ctx.op  # type: ignore[assignment]
    return op.attributes.get(name, default)


def opset(ctx: LoweringRuleContext) -> int:
    """The op-set version the op was imported at (1 when unknown)."""
    version = attribute(ctx, OPSET_ATTRIBUTE, 1)
    return version if isinstance(version, int) else 1


def input_index(ctx: LoweringRuleContext, position: int) -> int | None:
    """Index into the operand tuple of ONNX input `position`, or None when that input is absent
    (an empty name in the model, or past the end of the node's inputs)."""
    absent = attribute(ctx, "absent_inputs", ())
    if position in absent:
        return None
    index = position - sum(1 for missing in absent if missing < position)
    return index if index < len(ctx.operands) else None


def input_value(ctx: LoweringRuleContext, position: int) -> tuple[object, Value] | None:
    """(MLIR value, Niro value) of ONNX input `position`, or None when absent."""
    index = input_index(ctx, position)
    if index is None:
        return None
    return ctx.operands[index], ctx.niro_operands[index]


def normalize_axis(ctx: LoweringRuleContext, axis: int, rank: int) -> int:
    """An ONNX axis (negative counts from the end) checked against `rank`."""
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def element_type(value: Value) -> ScalarType:
    type_ = value.type
    return type_.element_type if isinstance(type_, TensorType) else type_


def normalize_axes(ctx: LoweringRuleContext, axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Several axes, normalized, refusing duplicates."""
    normalized = tuple(normalize_axis(ctx, int(axis), rank) for axis in axes)
    if len(set(normalized)) != len(normalized):
        raise ctx.error(f"repeated axis in {tuple(axes)}")
    return normalized


__all__.append("normalize_axes")


def output_positions(ctx: LoweringRuleContext) -> list[int]:
    """The ONNX output positions the op has results for, in result order: absent outputs (in
    `absent_outputs`) have no result, and trailing omitted outputs none either."""
    absent = attribute(ctx, "absent_outputs", ())
    positions, position = [], 0
    while len(positions) < len(ctx.niro_results):
        if position not in absent:
            positions.append(position)
        position += 1
    return positions


__all__.append("output_positions")


def ranked_result(ctx: LoweringRuleContext, index: int = 0) -> ir.RankedTensorType:
    """The MLIR type of result `index`, refused clearly when it is not a ranked tensor (e.g.
    ONNX shape inference could not find its rank)."""
    ctx.ranked(ctx.niro_results[index], f"result #{index}")
    return ir.RankedTensorType(ctx.result_types[index])


def static_shape(ctx: LoweringRuleContext, value: Value, what: str) -> tuple[int, ...]:
    """The shape of a Niro tensor value when fully static, else a clear refusal."""
    shape = ctx.ranked(value, what).shape
    if any(size is None for size in shape):
        raise ctx.error(f"needs a static shape for {what}, got {shape}")
    return tuple(shape)  # type: ignore[arg-type]


def ints_attribute(
    ctx: LoweringRuleContext, name: str, default: Sequence[int], count: int
) -> tuple[int, ...]:
    """An INTS attribute (kernel_shape, strides, pads) of `count` values, or `default`."""
    value = attribute(ctx, name)
    if value is None:
        return tuple(default)
    value = tuple(int(item) for item in value)
    if len(value) != count:
        raise ctx.error(f"attribute '{name}' has {len(value)} values, expected {count}")
    return value


__all__ += ["ranked_result", "static_shape", "ints_attribute"]
