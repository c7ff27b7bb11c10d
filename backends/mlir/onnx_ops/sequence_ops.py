"""MLIR lowerings of the ONNX ops that move data along a sequence axis by per-batch lengths or
offsets: ReverseSequence and TensorScatter (the KV-cache update of opset 24).

Both are gather-form `linalg.generic`s over the result (see `indexing.gather_generic`): each
result element computes, from its position and its batch's length or write offset, whether and
where it reads the other tensor. No scatter, no loop-carried state, so every element is
independent and the result is exact with upstream dialects only.

ReverseSequence clamps each length into [0, T] (the reference's slicing does the same for longer
lengths). TensorScatter's `linear` mode requires 0 <= write index and write index + sequence
length <= max sequence length (ONNX's reference raises otherwise); a `cf.assert` fails the
program when the run-time indices break that rather than dropping updates silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType, format_type

from ..bindings import arith, mlir_ir, scf, tensor
from ..builders import as_i64, assert_all, assert_true, constant, dim_size, index_constant
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import RankedTensorType, lower_scalar_type
from .common import attribute, input_value, normalize_axis
from .indexing import clamp, cmp, gather_generic, mod, projection, select, sub, to_index

__all__: list[str] = []


def _size(ctx: LoweringRuleContext, value: mlir_ir.Value, type_: RankedTensorType, axis: int) -> mlir_ir.Value:
    dim = type_.shape[axis]
    return index_constant(dim) if dim is not None else dim_size(value, axis)


def _result_sizes(ctx: LoweringRuleContext, value: mlir_ir.Value, type_: RankedTensorType) -> list:
    """The index sizes of the dynamic dims of a result shaped like `value` (None when static)."""
    return [
        None if dim is not None else dim_size(value, axis) for axis, dim in enumerate(type_.shape)
    ]


# -- ReverseSequence ------------------------------------------------------------------------------


@register_lowering("onnx.ReverseSequence", since=10)
def _lower_reverse_sequence(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """out[b, t] = in[b, len[b] - 1 - t] for t < len[b], else in[b, t] (len clamped to [0, T])."""
    data_type = ctx.ranked(ctx.niro_operands[0], "input")
    lens_type = ctx.ranked(ctx.niro_operands[1], "sequence_lens")
    result = ctx.ranked(ctx.niro_results[0], "result")
    data, lens = ctx.operands[0], ctx.operands[1]
    rank = len(data_type.shape)
    if rank < 2:
        raise ctx.error(f"expects an input of rank >= 2, got {format_type(data_type)}")
    batch_axis = attribute(ctx, "batch_axis", 1)
    time_axis = attribute(ctx, "time_axis", 0)
    if {batch_axis, time_axis} != {0, 1}:
        raise ctx.error(
            f"needs batch_axis and time_axis to be 0 and 1 in some order, got "
            f"batch_axis={batch_axis}, time_axis={time_axis}"
        )
    if len(lens_type.shape) != 1:
        raise ctx.error(f"expects a 1-D sequence_lens, got {format_type(lens_type)}")
    batch, lens_count = data_type.shape[batch_axis], lens_type.shape[0]
    if batch is not None and lens_count is not None and batch != lens_count:
        raise ctx.error(
            f"sequence_lens {format_type(lens_type)} does not have one length per batch entry "
            f"of {format_type(data_type)} (batch_axis={batch_axis})"
        )
    steps = _size(ctx, data, data_type, time_axis)

    def body(position, elements):
        length = clamp(to_index(elements[0], lens_type.element_type), 0, steps)
        time = position[time_axis]
        reversed_time = sub(sub(length, 1), time)
        source = list(position)
        source[time_axis] = select(cmp("slt", time, length), reversed_time, time)
        return tensor.ExtractOp(data, source).result

    lens_map = projection(rank, [batch_axis])
    sizes = _result_sizes(ctx, data, result)
    return [gather_generic(ctx, result, sizes, body, [(lens, lens_map, lens_type.element_type)])]


# -- TensorScatter --------------------------------------------------------------------------------


@register_lowering("onnx.TensorScatter", since=24)
def _lower_tensor_scatter(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """present[p, s, ...] = update[p, j, ...] when the sequence position s receives update row j
    of batch p[0] (s = w + j, modulo the max length in circular mode), else past[p, s, ...]."""
    past_type = ctx.ranked(ctx.niro_operands[0], "past_cache")
    update_type = ctx.ranked(ctx.niro_operands[1], "update")
    result = ctx.ranked(ctx.niro_results[0], "result")
    past, update = ctx.operands[0], ctx.operands[1]
    rank = len(past_type.shape)
    if len(update_type.shape) != rank:
        raise ctx.error(
            f"expects update {format_type(update_type)} of the rank of past_cache "
            f"{format_type(past_type)}"
        )
    axis = normalize_axis(ctx, attribute(ctx, "axis", -2), rank)
    if axis == 0:
        raise ctx.error("axis must not be 0 (the batch dimension)")
    mode = attribute(ctx, "mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.error(f"does not support mode '{mode}' (expected 'linear' or 'circular')")
    for dim, (cache_size, update_size) in enumerate(
        zip(past_type.shape, update_type.shape, strict=True)
    ):
        if cache_size is None or update_size is None:
            continue
        if dim != axis and cache_size != update_size:
            raise ctx.error(
                f"update {format_type(update_type)} differs from past_cache "
                f"{format_type(past_type)} at dim {dim}"
            )
        if dim == axis and update_size > cache_size:
            raise ctx.error(
                f"update {format_type(update_type)} is longer than past_cache "
                f"{format_type(past_type)} on the sequence axis {axis}"
            )
    max_length = _size(ctx, past, past_type, axis)
    length = _size(ctx, update, update_type, axis)
    if past_type.shape[axis] is None or update_type.shape[axis] is None:
        assert_true(
            cmp("sle", length, max_length),
            f"{ctx.niro_location}: TensorScatter's update is longer than the cache",
        )
    indices = input_value(ctx, 2)
    if indices is not None:
        _check_write_indices(ctx, indices, mode, max_length, length)
    if update_type.shape[axis] == 0:
        return [past]
    i64 = ScalarType.I64
    inputs = [(past, projection(rank, range(rank)), result.element_type)]
    if indices is not None:
        inputs.append((indices[0], projection(rank, [0]), i64))
    element = lower_scalar_type(result.element_type)

    def body(position, elements):
        offset = to_index(elements[1], i64) if indices is not None else index_constant(0)
        row = sub(position[axis], offset)
        if mode == "circular":
            row = mod(row, arith.MaxSIOp(max_length, index_constant(1)).result)  # 0 only if empty
            hit = cmp("slt", row, length)
        else:
            hit = arith.AndIOp(cmp("sge", row, 0), cmp("slt", row, length)).result
        # NOTE: read the update only on a hit: a dynamic update length may be 0 at run time.
        branch = scf.IfOp(hit, [element], has_else=True)
        with mlir_ir.InsertionPoint(branch.then_block):
            source = list(position)
            source[axis] = row
            scf.YieldOp([tensor.ExtractOp(update, source).result])
        with mlir_ir.InsertionPoint(branch.else_block):
            scf.YieldOp([elements[0]])
        return branch.results[0]

    return [gather_generic(ctx, result, _result_sizes(ctx, past, result), body, inputs)]


def _check_write_indices(ctx, indices, mode: str, max_length: mlir_ir.Value, length: mlir_ir.Value) -> None:
    """What the spec requires of the write indices: one per batch entry, and in linear mode
    0 <= w and w + sequence length <= max sequence length (checked at run time)."""
    value, niro = indices
    indices_type = ctx.ranked(niro, "write_indices")
    batch = ctx.ranked(ctx.niro_operands[0], "past_cache").shape[0]
    count = indices_type.shape[0] if len(indices_type.shape) == 1 else -1
    if count == -1 or (None not in (count, batch) and count != batch):
        raise ctx.error(
            f"expects write_indices of shape [batch_size], got {format_type(indices_type)}"
        )
    if mode == "circular":
        return
    i64 = mlir_ir.IntegerType.get_signless(64)
    room = as_i64(sub(max_length, length))

    def inside(elements):
        (offset,) = elements
        return arith.AndIOp(
            arith.CmpIOp(arith.CmpIPredicate.sge, offset, constant(i64, 0)).result,
            arith.CmpIOp(arith.CmpIPredicate.sle, offset, room).result,
        ).result

    assert_all(
        [(value, [0])],
        1,
        inside,
        f"{ctx.niro_location}: TensorScatter's linear mode needs 0 <= write_indices[b] and "
        "write_indices[b] + sequence_length <= max_sequence_length",
    )
