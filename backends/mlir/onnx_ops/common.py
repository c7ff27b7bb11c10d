"""Helpers shared by the ONNX operator lowerings (one place for each idea; add here, don't copy).

Every family module (`elementwise.py`, `shape_ops.py`, ...) registers its rules with
`@register_lowering("onnx.<Op>", since=...)` and reads the op through these, as the frontend
wrote it (`niro.ir.ImportedOp`: inputs and outputs by ONNX position, absent ones None, the
op-set version, the node's attributes by ONNX name, regions by graph attribute name).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import (
    ImportedOp,
    ImportedOpError,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    read_imported_op,
)

from ..bindings import mlir_ir
from ..builders import ranked_result
from ..context import LoweringRuleContext

__all__ = [
    "attribute",
    "imported_op",
    "opset",
    "input_value",
    "required_input",
    "input_index",
    "normalize_axis",
    "element_type",
]


def imported_op(ctx: LoweringRuleContext) -> ImportedOp:
    """The op being lowered, read by ONNX positions (its bookkeeping broken: a LoweringError)."""
    op = ctx.op
    assert isinstance(op, UnknownOp), op
    try:
        return read_imported_op(op)
    except ImportedOpError as error:
        raise ctx.error(str(error)) from None


def attribute(ctx: LoweringRuleContext, name: str, default=None):
    """The ONNX attribute `name` of the op (as the frontend converted it), or `default`."""
    op = ctx.op
    assert isinstance(op, UnknownOp), op
    return op.attributes.get(name, default)


def opset(ctx: LoweringRuleContext) -> int:
    """The op-set version the op was imported at (1 when unknown)."""
    return imported_op(ctx).opset or 1


def input_index(ctx: LoweringRuleContext, position: int) -> int | None:
    """Index into the operand tuple of ONNX input `position`, or None when that input is absent
    (an empty name in the model, or past the end of the node's inputs)."""
    return imported_op(ctx).operand_index(position)


def input_value(ctx: LoweringRuleContext, position: int) -> tuple[mlir_ir.Value, Value] | None:
    """(MLIR value, Niro value) of ONNX input `position`, or None when absent."""
    index = input_index(ctx, position)
    if index is None:
        return None
    return ctx.operands[index], ctx.niro_operands[index]


def required_input(
    ctx: LoweringRuleContext, position: int, what: str
) -> tuple[mlir_ir.Value, Value]:
    """`input_value` of an input the op cannot do without, refused clearly when absent. The
    importer checks required inputs against the op's ONNX schema; an op without one there
    (a com.microsoft op) reaches the lowering as the model wrote it."""
    found = input_value(ctx, position)
    if found is None:
        raise ctx.error(f"needs input {what}")
    return found


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


def output_positions(ctx: LoweringRuleContext) -> tuple[int, ...]:
    """The ONNX output positions the op has results for, in result order."""
    return imported_op(ctx).output_positions


__all__.append("output_positions")


def static_shape(ctx: LoweringRuleContext, value: Value, what: str) -> tuple[int, ...]:
    """The shape of a Niro tensor value when fully static, else a clear refusal."""
    type_ = ctx.ranked(value, what)
    shape = type_.static_shape
    if shape is None:
        raise ctx.error(f"needs a static shape for {what}, got {type_.shape}")
    return shape


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


__all__ += ["ranked_result", "static_shape", "ints_attribute"]  # ranked_result: builders'
