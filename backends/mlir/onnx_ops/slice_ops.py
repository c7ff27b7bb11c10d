"""MLIR lowerings of the ONNX ops that cut and join tensors: Concat, Split, Slice, Pad.

Concat is `tensor.concat` (operands empty along the axis left out); Split and positive-step Slice
are `tensor.extract_slice`; negative steps, and Pad in edge/reflect/wrap mode, are gather-form
`linalg.generic`s; Pad in constant mode is `tensor.pad` (after a crop for negative pads).

Slice starts/ends and Split sizes may be computed at run time when the result's shape is known
statically (the offsets are then `index` values); axes and steps must be compile-time constants,
as the structure of the lowering depends on them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeAlias

import numpy as np
from niro.ir import TensorType, format_type, op_name

from ..bindings import arith, mlir_ir, tensor
from ..builders import (
    DYNAMIC,
    assert_true,
    cast_to,
    dim_size,
    empty,
    empty_tensor,
    filled,
    index_constant,
    index_value,
    small_elements,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..literals import scalar_attr
from ..registry import register_lowering
from ..types import RankedTensorType, index_type, lower_scalar_type, lower_type
from .common import (
    attribute,
    element_type,
    imported_op,
    input_value,
    normalize_axes,
    normalize_axis,
    opset,
    required_input,
)
from .indexing import (
    HOST_SCALARS,
    add,
    clamp,
    cmp,
    constant_input,
    data_size,
    floordiv,
    gather_generic,
    mod,
    mul,
    required_constant,
    scalar_reader,
    select,
    sub,
    to_index,
)

__all__: list[str] = []

Mixed: TypeAlias = int | mlir_ir.Value
INT64_MAX = np.iinfo(np.int64).max


def _mixed(values: list[Mixed]) -> tuple[list[mlir_ir.Value], list[int]]:
    """Split offsets/sizes into MLIR's dynamic operands and static array (kDynamic marks)."""
    dynamic = [value for value in values if not isinstance(value, int)]
    static = [value if isinstance(value, int) else DYNAMIC for value in values]
    return dynamic, static


def _offset_mark(values: list[Mixed]) -> tuple[list[mlir_ir.Value], list[int]]:
    """Like `_mixed` for offsets (MLIR uses the same kDynamic sentinel)."""
    return _mixed(values)


def extract_slice(
    source: mlir_ir.Value, element: mlir_ir.Type, offsets: list[Mixed], sizes: list[Mixed], strides: list[int]
) -> mlir_ir.Value:
    """`tensor.extract_slice`; the result type has a static dim wherever the size is an int.
    An empty slice is a `tensor.empty` (MLIR rejects even offset 0 into an empty dim)."""
    if any(isinstance(size, int) and size == 0 for size in sizes):
        return tensor.EmptyOp(list(sizes), element).result
    shape = [size if isinstance(size, int) else DYNAMIC for size in sizes]
    result = mlir_ir.RankedTensorType.get(shape, element)
    dyn_offsets, static_offsets = _offset_mark(offsets)
    dyn_sizes, static_sizes = _mixed(sizes)
    return tensor.ExtractSliceOp(
        result, source, dyn_offsets, dyn_sizes, [], static_offsets, static_sizes, strides
    ).result


def _dim(ctx: LoweringRuleContext, value: mlir_ir.Value, type_: RankedTensorType, axis: int) -> Mixed:
    dim = type_.shape[axis]
    return dim if dim is not None else dim_size(value, axis)



# -- Concat ---------------------------------------------------------------------------------------


@register_lowering("onnx.Concat", since=4)
def _lower_concat(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    result = ctx.ranked(ctx.niro_results[0], "result")
    rank = len(result.shape)
    axis = normalize_axis(ctx, attribute(ctx, "axis", 0), rank)
    inputs = []
    for index, (value, niro) in enumerate(zip(ctx.operands, ctx.niro_operands, strict=True)):
        type_ = ctx.ranked(niro, f"input #{index}")
        if len(type_.shape) != rank:
            raise ctx.error(f"input #{index} {format_type(type_)} does not have the rank of {format_type(result)}")
        inputs.append((value, type_))
    parts = [value for value, type_ in inputs if type_.shape[axis] != 0]
    small = [
        small_elements(value, ctx.constant_operand(index))
        for index, (value, type_) in enumerate(inputs)
        if type_.shape[axis] != 0
    ]
    if rank == 1 and parts and all(elements is not None for elements in small) and result.is_static:
        # A shape vector joined on the host (`small_elements` says why), not a device concat.
        joined = [element for elements in small for element in elements or ()]
        return [tensor.FromElementsOp(ctx.result_types[0], joined).result]
    if not parts:
        sizes = [
            None if dim is not None else dim_size(inputs[0][0], dim_axis)
            for dim_axis, dim in enumerate(result.shape)
        ]
        return [empty_tensor(ctx, result, sizes)]
    # NOTE: `tensor.concat`, not insert_slices into a `tensor.empty`: IREE (3.13) failed to
    # compile the latter for a DYNAMIC 1-D Concat in one of several Loops' results ("streamable
    # op expected to be in an execution region", PyTorch dynamo's EmbeddingBag). Each operand
    # is first cast to the result's dims off the axis, so the concat's type is the one MLIR
    # infers from its operands up to the axis length: IREE's rewrites of a concat typed more
    # statically than its operands (`tensor<?x?xf32>` operands, a `tensor<?x17xf32>` result)
    # broke a Loop's carried type in iree-compile.
    result_type = mlir_ir.RankedTensorType(ctx.result_types[0])
    aligned = []
    for part in parts:
        shape = list(result_type.shape)
        shape[axis] = mlir_ir.RankedTensorType(part.type).shape[axis]
        aligned.append(cast_to(part, mlir_ir.RankedTensorType.get(shape, result_type.element_type)))
    if any(result_type.is_dynamic_dim(other) for other in range(rank) if other != axis):
        return [cast_to(_inserted(aligned, axis, result_type.element_type), result_type)]
    lengths = [mlir_ir.RankedTensorType(part.type).shape[axis] for part in aligned]
    sizes = list(result_type.shape)
    sizes[axis] = DYNAMIC if DYNAMIC in lengths else sum(lengths)
    joined = tensor.ConcatOp(
        mlir_ir.RankedTensorType.get(sizes, result_type.element_type), axis, aligned
    ).result
    return [cast_to(joined, result_type)]


def _inserted(parts: list[mlir_ir.Value], axis: int, element: mlir_ir.Type) -> mlir_ir.Value:
    """`parts` (of equal dims off `axis`) written one after another along `axis` into a
    `tensor.empty`: Concat when a dim off the axis is dynamic.

    NOTE: IREE (3.13) cannot compile a `tensor.concat` with dynamic dims off the axis in a Loop
    body once it learns them from the loop's first value (torchvision Mask R-CNN's pasted masks,
    0x320x320 before the loop, and Keypoint R-CNN's keypoints, 0x3x17): its flow-level
    canonicalization types the concat statically and leaves a `tensor.cast` back to the carried
    type that its stream conversion refuses ("failed to legalize operation 'tensor.cast'").
    Insert slices into a `tensor.empty` compile there."""
    first = tensor_sizes(parts[0])
    offset: int | mlir_ir.Value = 0
    starts = []
    for part in parts:
        starts.append(offset)
        length = tensor_sizes(part)[axis]
        both_static = isinstance(offset, int) and isinstance(length, int)
        offset = offset + length if both_static else add(offset, length)
    sizes = [offset if index == axis else size for index, size in enumerate(first)]
    joined = empty(sizes, element)
    for part, start in zip(parts, starts, strict=True):
        sizes = tensor_sizes(part)
        offsets = [start if index == axis else 0 for index in range(len(sizes))]
        joined = tensor.InsertSliceOp(
            part,
            joined,
            [value for value in offsets if isinstance(value, mlir_ir.Value)],
            [value for value in sizes if isinstance(value, mlir_ir.Value)],
            [],
            [DYNAMIC if isinstance(value, mlir_ir.Value) else value for value in offsets],
            [DYNAMIC if isinstance(value, mlir_ir.Value) else value for value in sizes],
            [1] * len(sizes),
        ).result
    return joined


# -- Split ----------------------------------------------------------------------------------------


def _split_sizes(ctx: LoweringRuleContext, source: RankedTensorType, axis: int, count: int) -> list[Mixed]:
    results = [ctx.ranked(value, f"result #{index}") for index, value in enumerate(ctx.niro_results)]
    if all(result.shape[axis] is not None for result in results):
        return [result.shape[axis] for result in results]
    split = None
    dim = source.shape[axis]

    def whole() -> mlir_ir.Value:
        return index_constant(dim) if dim is not None else dim_size(ctx.operands[0], axis)

    if opset(ctx) < 13:
        split = attribute(ctx, "split")
    elif input_value(ctx, 1) is not None:
        if constant_input(ctx, 1) is None:
            return _run_time_split(ctx, whole(), count)
        split = required_constant(ctx, 1, "split").reshape(-1).tolist()
    if split is not None:
        if len(split) != count:
            raise ctx.error(f"has {len(split)} split sizes for {count} outputs")
        return [int(size) for size in split]
    # Equal parts: ceil(dim / count) each, the last one what is left (opset 18's num_outputs).
    total = whole()
    chunk = floordiv(add(total, count - 1), count)
    return [chunk] * (count - 1) + [sub(total, mul(chunk, count - 1))]


def _run_time_split(ctx: LoweringRuleContext, whole: mlir_ir.Value, count: int) -> list[Mixed]:
    """Split sizes read at run time from a `split` input of static length (RotaryEmbedding's
    halves of a dynamic head size), checked at run time to be non-negative and to add up to
    the split dim."""
    type_ = ctx.ranked(ctx.niro_operands[1], "split")
    if len(type_.shape) != 1 or type_.shape[0] != count:
        raise ctx.error(
            f"needs a 'split' input of static length {count} (one size per output), got {format_type(type_)}"
        )
    sizes = _int_list(ctx, 1)
    valid = cmp("eq", functools.reduce(add, sizes), whole)
    for size in sizes:
        valid = arith.AndIOp(valid, cmp("sge", size, 0)).result
    assert_true(
        valid,
        f"{ctx.niro_location}: 'onnx.Split' op: the split sizes must be non-negative and add up to the split dim",
    )
    # NOTE: each size through `indexing.data_size` (a no-op `max(size, 0)`, the check above
    # holds): IREE 3.13 clones a bare `index_cast(tensor.extract)` size into the dispatch that
    # concatenates the split parts back (RotaryEmbedding's rotated half beside the rest, head
    # size dynamic) and fails there with "'iree_codegen.workgroup_count_hint' op failed to
    # resolve workgroup count hint in terms of workload ordinals".
    return [data_size(size) for size in sizes]


@register_lowering("onnx.Split", since=2)
def _lower_split(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source = ctx.ranked(ctx.niro_operands[0], "input")
    rank = len(source.shape)
    axis = normalize_axis(ctx, attribute(ctx, "axis", 0), rank)
    if imported_op(ctx).absent_outputs:
        raise ctx.error("does not support unnamed outputs")
    count = len(ctx.niro_results)
    sizes = _split_sizes(ctx, source, axis, count)
    data = ctx.operands[0]
    element = lower_scalar_type(source.element_type)
    outputs: list[mlir_ir.Value] = []
    offset: Mixed = 0
    for size, expected in zip(sizes, ctx.result_types, strict=True):
        extent = [_dim(ctx, data, source, dim_axis) for dim_axis in range(rank)]
        extent[axis] = size
        offsets: list[Mixed] = [0] * rank
        offsets[axis] = offset
        strides: list[Mixed] = [1] * rank
        if _read_with_a_stride(source, extent, strides):
            piece = ctx.ranked(ctx.niro_results[len(outputs)], "output")
            outputs.append(_gathered_slice(ctx, data, piece, offsets, extent, strides))
        else:
            outputs.append(cast_to(extract_slice(data, element, offsets, extent, strides), expected))
        offset = offset + size if isinstance(offset, int) and isinstance(size, int) else add(index_value(offset), index_value(size))
    return outputs


# -- Slice ----------------------------------------------------------------------------------------


def _slice_parameters(ctx: LoweringRuleContext, rank: int):
    """(axes, starts, ends, steps) as lists of Python ints (compile-time constants, axes
    normalized) or `index` values (computed at run time)."""
    if opset(ctx) < 10:
        starts, ends = attribute(ctx, "starts"), attribute(ctx, "ends")
        axes = attribute(ctx, "axes", tuple(range(len(starts))))
        return list(normalize_axes(ctx, axes, rank)), list(starts), list(ends), [1] * len(starts)
    if _run_time_length(ctx, 1) and input_value(ctx, 3) is None and input_value(ctx, 4) is None:
        return _run_time_length_parameters(ctx, rank)
    starts = _int_list(ctx, 1)
    ends = _int_list(ctx, 2)
    count = len(starts)
    axes = list(range(count)) if input_value(ctx, 3) is None else _int_list(ctx, 3)
    steps = [1] * count if input_value(ctx, 4) is None else _int_list(ctx, 4)
    if not len(axes) == len(steps) == count == len(ends):
        raise ctx.error("has starts, ends, axes and steps of different lengths")
    if all(isinstance(axis, int) for axis in axes):
        axes = list(normalize_axes(ctx, axes, rank))
    return axes, starts, ends, steps


def _run_time_length(ctx: LoweringRuleContext, position: int) -> bool:
    """Whether input `position` is a 1-D tensor whose length is known only at run time."""
    if constant_input(ctx, position) is not None:
        return False
    type_ = ctx.niro_operands[position].type
    return isinstance(type_, TensorType) and type_.shape == (None,)


def _run_time_length_parameters(ctx: LoweringRuleContext, rank: int):
    """Slice parameters from starts and ends of run-time length k, without axes or steps: they
    cut axes 0..k-1 (PyTorch's dynamo exporter slices rows with `offsets[i:i+1]`). One entry
    per axis, which keeps the whole axis past k; 1 <= k <= rank and ends' length are checked at
    run time."""
    starts_value, starts_niro = required_input(ctx, 1, "starts")
    ends_value, ends_niro = required_input(ctx, 2, "ends")
    length = dim_size(starts_value, 0)
    valid = arith.AndIOp(cmp("sge", length, 1), cmp("sle", length, rank)).result
    valid = arith.AndIOp(valid, cmp("eq", dim_size(ends_value, 0), length)).result
    assert_true(
        valid,
        f"{ctx.niro_location}: 'onnx.Slice' op: starts and ends must have one length, from 1 to "
        f"the data's rank {rank}",
    )
    data = ctx.operands[0]
    last = sub(length, 1)
    starts: list[Mixed] = []
    ends: list[Mixed] = []
    for axis in range(rank):
        present = cmp("slt", axis, length)
        position = (
            index_constant(0) if axis == 0 else arith.MinSIOp(index_constant(axis), last).result
        )
        start, end = (
            to_index(tensor.ExtractOp(value, [position]).result, element_type(niro))
            for value, niro in ((starts_value, starts_niro), (ends_value, ends_niro))
        )
        starts.append(select(present, start, 0))
        ends.append(select(present, end, dim_size(data, axis)))
    return list(range(rank)), starts, ends, [1] * rank


def _int_list(ctx: LoweringRuleContext, position: int) -> list[Mixed]:
    """A 1-D integer input as Python ints when constant, else as `index` values read with
    `tensor.extract` (its length must be static)."""
    constant = constant_input(ctx, position)
    if constant is not None:
        return [int(item) for item in constant.reshape(-1).tolist()]
    value, niro = required_input(ctx, position, f"#{position}")
    type_ = ctx.ranked(niro, f"input #{position}")
    if type_.shape is None or len(type_.shape) != 1 or type_.shape[0] is None:
        raise ctx.error(f"needs a static 1-D input #{position}, got {format_type(type_)}")
    return [
        to_index(tensor.ExtractOp(value, [index_constant(index)]).result, type_.element_type)
        for index in range(type_.shape[0])
    ]


def _static_bounds(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX's clamping of (start, end) for a static dim: returns (first index, element count)."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        count = max(0, -(-(end - start) // step))
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        count = max(0, -(-(start - end) // -step))
    return start, count


def _runtime_bounds(start: Mixed, end: Mixed, step: Mixed, dim: mlir_ir.Value) -> tuple[mlir_ir.Value, mlir_ir.Value]:
    """The same clamping as `_static_bounds` in `arith` (start, end or step known at run time;
    a run-time step's sign is selected on)."""
    start_v, end_v, step_v = index_value(start), index_value(end), index_value(step)
    start_v = select(cmp("slt", start_v, 0), add(start_v, dim), start_v)
    end_v = select(cmp("slt", end_v, 0), add(end_v, dim), end_v)
    last = sub(dim, 1)
    forward = cmp("sgt", step_v, 0)
    start_v = select(forward, clamp(start_v, 0, dim), clamp(start_v, 0, last))
    end_v = select(forward, clamp(end_v, 0, dim), clamp(end_v, -1, last))
    span = select(forward, sub(end_v, start_v), sub(start_v, end_v))
    magnitude = select(forward, step_v, sub(0, step_v))
    count = floordiv(add(span, sub(magnitude, 1)), magnitude)
    return start_v, arith.MaxSIOp(count, index_constant(0)).result


def _whole_axis(start: Mixed, end: Mixed, step: Mixed) -> bool:
    """Whether (start, end, step), known at lowering, keep an axis whole whatever its size:
    start 0, step 1 and an end of INT64_MAX or more (PyTorch's `x[:, None]` exports
    `Slice(x, 0, INT64_MAX)`).

    NOTE: such a slice is no `tensor.extract_slice` (whose size would be the clamped
    `max(dim - min(dim, 0), 0)`): IREE 3.13's BubbleUpExpandShapesPass moves a slice up through
    the element-wise generic that makes its input, bounding its size with an integer-set solver
    (Fourier-Motzkin, in `getTiledImplementation`) whose time grows steeply with the count of
    clamped data-dependent sizes summed into it (about tenfold per doubling). torchvision's
    batched_nms slices `offsets[:, None]` of the concatenated top-k of every class: SSDlite's
    90 classes made iree-compile take 45 minutes, 94% of it in that pass
    (tests/backends/mlir/onnx_ops/test_batched_nms.py)."""
    return (
        isinstance(start, int)
        and start == 0
        and isinstance(end, int)
        and end >= INT64_MAX
        and isinstance(step, int)
        and step == 1
    )


@register_lowering("onnx.Slice", since=1)
def _lower_slice(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source = ctx.ranked(ctx.niro_operands[0], "data")
    result = ctx.ranked(ctx.niro_results[0], "result")
    rank = len(source.shape)
    axes, starts, ends, steps = _slice_parameters(ctx, rank)
    data = ctx.operands[0]
    offsets: list[Mixed] = [0] * rank
    counts: list[Mixed] = [_dim(ctx, data, source, axis) for axis in range(rank)]
    strides: list[Mixed] = [1] * rank
    for axis in range(rank):
        entries = [j for j, given in enumerate(axes) if not isinstance(given, int) or given == axis]
        if not entries:
            continue
        dim = source.shape[axis]
        if len(entries) == 1 and isinstance(axes[entries[0]], int):
            start, end, step = starts[entries[0]], ends[entries[0]], steps[entries[0]]
        else:  # axes known at run time: pick this axis' entry with selects
            start, end, step = index_constant(0), index_value(counts[axis]), index_constant(1)
            for j in entries:
                given = index_value(axes[j])
                given = select(cmp("slt", given, 0), add(given, rank), given)
                hit = cmp("eq", given, axis)
                start = select(hit, index_value(starts[j]), start)
                end = select(hit, index_value(ends[j]), end)
                step = select(hit, index_value(steps[j]), step)
        if isinstance(step, int) and step == 0:
            raise ctx.error("has a zero step")
        if _whole_axis(start, end, step):
            continue  # offset 0, the axis' own size (`tensor.dim`), stride 1
        strides[axis] = step
        if dim is not None and isinstance(start, int) and isinstance(end, int) and isinstance(step, int):
            offsets[axis], counts[axis] = _static_bounds(start, min(end, INT64_MAX), step, dim)
        else:
            offsets[axis], counts[axis] = _runtime_bounds(start, end, step, index_value(_dim(ctx, data, source, axis)))
    for axis, dim in enumerate(result.shape):
        if dim is not None:
            if isinstance(counts[axis], int) and counts[axis] != dim:
                raise ctx.error(f"computes {counts[axis]} elements on axis {axis}, but its result is {format_type(result)}")
            if not isinstance(counts[axis], int):
                # NOTE: the import may type a fixed-length cut of a dynamic axis (`x[:, -1:]`)
                # as static, taking the axis to be long enough (symbolic_dims): checked here.
                assert_true(
                    cmp("eq", index_value(counts[axis]), dim),
                    f"{ctx.niro_location}: '{op_name(ctx.op)}' op: axis {axis} of the input is shorter"
                    f" at run time than the {dim} elements its result type takes",
                )
            counts[axis] = dim
    if 0 in result.shape:
        return [
            empty_tensor(
                ctx,
                result,
                [
                    None if dim is not None else index_value(counts[axis])
                    for axis, dim in enumerate(result.shape)
                ],
            )
        ]
    if all(isinstance(offset, int) and offset == 0 for offset in offsets) and all(
        isinstance(stride, int) and stride == 1 for stride in strides
    ) and all(count == dim for count, dim in zip(counts, source.shape, strict=True) if dim is not None):
        # every axis whole (dynamic ones by `_whole_axis`, so their counts are the input's)
        return [cast_to(data, ctx.result_types[0])]
    if all(isinstance(step, int) and step > 0 for step in strides) and not _read_with_a_stride(
        source, counts, strides
    ):
        element = lower_scalar_type(source.element_type)
        return [cast_to(extract_slice(data, element, offsets, counts, strides), ctx.result_types[0])]
    return [_gathered_slice(ctx, data, result, offsets, counts, strides)]


def _read_with_a_stride(source: RankedTensorType, counts: list[Mixed], strides: list[Mixed]) -> bool:
    """Whether a slice of `source` (with dynamic dims) is a view IREE reads with a stride on
    its innermost dim: a step > 1, or one element of a longer last axis (which IREE drops as
    a unit dim, leaving the axis before it strided).

    NOTE: such a slice is built as a gather (`_gathered_slice`): IREE 3.13 fuses the
    `tensor.extract_slice` into a consumer that reads it with `tensor.extract` (an element-wise
    op broadcasting a dynamic dim, or operands along different dims) and then fails in
    iree-compile with "LLVM Translation failed for operation: builtin.unrealized_conversion_cast"
    (its `vector.gather` of a memref whose last stride is not 1): RotaryEmbedding's interleaved
    halves `x[..., 0::2]`, and Funnel Transformer's `torch.split(scores, 1, dim=-1)` of its
    [batch, heads, seq, 2] token-type scores, at a dynamic sequence length (onnx_ops/
    test_shape_ops.py, test_contrib_transformer.py). Static shapes keep the view."""
    if None not in source.shape:
        return False
    if any(isinstance(step, int) and step > 1 for step in strides):
        return True
    last = len(source.shape) - 1
    return last >= 0 and counts[last] == 1 and source.shape[last] != 1


def _gathered_slice(
    ctx: LoweringRuleContext,
    data: mlir_ir.Value,
    result: RankedTensorType,
    offsets: list[Mixed],
    counts: list[Mixed],
    strides: list[Mixed],
) -> mlir_ir.Value:
    """The slice of `data` at `offsets`, `counts`, `strides` as a gather-form generic (each
    element read by `tensor.extract`), for `_read_with_a_stride`."""
    sizes = [None if dim is not None else index_value(counts[axis]) for axis, dim in enumerate(result.shape)]

    def body(indices, _):
        position = [
            index if isinstance(strides[axis], int) and strides[axis] == 1 and isinstance(offsets[axis], int) and offsets[axis] == 0
            else add(index_value(offsets[axis]), mul(index, strides[axis]))
            for axis, index in enumerate(indices)
        ]
        return tensor.ExtractOp(data, position).result

    return gather_generic(ctx, result, sizes, body)


# -- Pad ------------------------------------------------------------------------------------------


def _pad_parameters(ctx: LoweringRuleContext, rank: int) -> tuple[list[Mixed], list[Mixed], str]:
    """(begin, end) pads per data axis, as ints when constant, else `index` values."""
    mode = attribute(ctx, "mode", "constant")
    if opset(ctx) < 11:
        pads: list[Mixed] = list(attribute(ctx, "pads" if opset(ctx) >= 2 else "paddings") or ())
        axes: list[Mixed] = list(range(rank))
    else:
        pads = _int_list(ctx, 1)
        axes = list(range(rank)) if input_value(ctx, 3) is None else _int_list(ctx, 3)
        if all(isinstance(axis, int) for axis in axes):
            axes = list(normalize_axes(ctx, axes, rank))
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"needs {2 * len(axes)} pads, got {len(pads)}")
    begin: list[Mixed] = [0] * rank
    end: list[Mixed] = [0] * rank
    for index, axis in enumerate(axes):
        low, high = pads[index], pads[index + len(axes)]
        if isinstance(axis, int):
            begin[axis], end[axis] = low, high
            continue
        given = select(cmp("slt", axis, 0), add(axis, rank), axis)
        for target in range(rank):  # axes known at run time: select this axis' pads
            hit = cmp("eq", given, target)
            begin[target] = select(hit, index_value(low), index_value(begin[target]))
            end[target] = select(hit, index_value(high), index_value(end[target]))
    return begin, end, mode


def _pad_value(ctx: LoweringRuleContext, element: mlir_ir.Type) -> Callable[[], mlir_ir.Value] | None:
    """A builder of the constant-mode pad value (called where it is used), or None when it is
    computed at run time and so must be read inside the dispatch (`scalar_reader`, in `_lower_pad`)."""
    if opset(ctx) < 11:
        literal = float(attribute(ctx, "value", 0.0))
    elif input_value(ctx, 2) is None:
        literal = 0.0
    else:
        constant = constant_input(ctx, 2)
        if constant is None or constant.size != 1:
            return None
        literal = constant.reshape(-1)[0].item()
    scalar = element_type(ctx.niro_operands[0])
    attr = scalar_attr(scalar, int(literal) if scalar.is_integer else literal)
    return lambda: arith.ConstantOp(element, attr).result


@register_lowering("onnx.Pad", since=1)
def _lower_pad(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source = ctx.ranked(ctx.niro_operands[0], "data")
    result = ctx.ranked(ctx.niro_results[0], "result")
    rank = len(source.shape)
    begin, end, mode = _pad_parameters(ctx, rank)
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise ctx.error(f"does not support mode '{mode}'")
    data = ctx.operands[0]
    element = lower_scalar_type(source.element_type)
    pads = begin + end
    constant_value = _pad_value(ctx, element) if mode == "constant" else None
    if constant_value is not None and all(isinstance(pad, int) and pad >= 0 for pad in pads):
        padded = tensor.PadOp(lower_type(_padded_type(source, begin, end)), data, [], [], begin, end)
        block = padded.regions[0].blocks.append(*([index_type()] * rank))
        with mlir_ir.InsertionPoint(block):
            tensor.YieldOp(constant_value())
        return [cast_to(padded.result, ctx.result_types[0])]
    if mode == "constant" and constant_value is None and source.element_type in HOST_SCALARS:
        constant_value = scalar_reader(ctx, *required_input(ctx, 2, "constant_value"))
    if constant_value is not None:
        padded = _cropped_and_padded(ctx, data, source, begin, end, constant_value)
        return [cast_to(padded, ctx.result_types[0])]
    # The general form: negative pads crop first (as onnxruntime does), then each result index
    # maps into the cropped input by the mode; pads may be known only at run time. A run-time
    # padding value of a type IREE's VM has no scalar for is read in the dispatch.
    value = None
    if mode == "constant":
        value = scalar_reader(ctx, *required_input(ctx, 2, "constant_value"))
    axes: list[tuple[mlir_ir.Value, mlir_ir.Value, mlir_ir.Value] | None] = []
    for axis in range(rank):
        low, high = begin[axis], end[axis]
        if isinstance(low, int) and isinstance(high, int) and low == high == 0:
            axes.append(None)
            continue
        dim = index_value(_dim(ctx, data, source, axis))
        crop_low = arith.MaxSIOp(sub(0, index_value(low)), index_constant(0)).result
        crop_high = arith.MaxSIOp(sub(0, index_value(high)), index_constant(0)).result
        kept = sub(sub(dim, crop_low), crop_high)
        shift = arith.MaxSIOp(index_value(low), index_constant(0)).result
        axes.append((crop_low, kept, shift))
    sizes: list[mlir_ir.Value | None] = []
    for axis, (dim, cropped) in enumerate(zip(result.shape, axes, strict=True)):
        if dim is not None:
            sizes.append(None)
        elif cropped is None:
            sizes.append(dim_size(data, axis))
        else:
            _, kept, shift = cropped
            sizes.append(
                add(add(kept, shift), arith.MaxSIOp(index_value(end[axis]), index_constant(0)).result)
            )

    def body(indices, _):
        position = []
        inside = None
        for index, cropped in zip(indices, axes, strict=True):
            if cropped is None:
                position.append(index)
                continue
            crop_low, kept, shift = cropped
            local = sub(index, shift)
            if mode == "constant":
                within = arith.AndIOp(cmp("sge", local, 0), cmp("slt", local, kept)).result
                inside = within if inside is None else arith.AndIOp(inside, within).result
                local = clamp(local, 0, sub(kept, 1))
            elif mode == "edge":
                local = clamp(local, 0, sub(kept, 1))
            elif mode == "wrap":
                local = mod(local, kept)
            else:  # reflect: period 2(d-1), mirrored in its second half; d == 1 repeats
                period = arith.MaxSIOp(mul(sub(kept, 1), 2), index_constant(1)).result
                folded = mod(local, period)
                local = select(cmp("slt", folded, kept), folded, sub(period, folded))
            position.append(add(local, crop_low))
        element_value = tensor.ExtractOp(data, position).result
        if inside is None:
            return element_value
        assert value is not None, "mode constant reads its padding value"
        return arith.SelectOp(inside, element_value, value()).result

    return [gather_generic(ctx, result, sizes, body)]


def _cropped_and_padded(
    ctx: LoweringRuleContext,
    data: mlir_ir.Value,
    source: RankedTensorType,
    begin: list[Mixed],
    end: list[Mixed],
    value: Callable[[], mlir_ir.Value],
) -> mlir_ir.Value:
    """Constant-mode Pad by pads that are negative or known only at run time: the negative
    part of each pad crops (`tensor.extract_slice`, as onnxruntime crops first), and the
    cropped data is inserted at the positive part into a tensor filled with the constant.

    NOTE: not the element-wise gather of the other modes: IREE 3.13 fuses that gather (its
    `linalg.index` reads) into a consumer's dispatch, and a softmax over a dynamic dim there
    fails in iree-compile ("exceeded stack allocation limit of 32768 bytes for function";
    ONNX's expanded Attention pads its mask at run time, then adds it to the scores). Nor
    `tensor.pad`: by run-time pads it fails there ("'tensor.pad' op failed to tile
    operation"). A fill and an insert are IREE's own splat and update. The padding value is
    read on the host, so the caller takes this form for a run-time one only where IREE's VM
    holds that scalar type."""
    element = lower_scalar_type(source.element_type)
    rank = len(source.shape)
    offsets: list[Mixed] = []
    kept: list[Mixed] = []
    crops_anything = False
    for axis in range(rank):
        dim = _dim(ctx, data, source, axis)
        crops = [_negative_part(begin[axis]), _negative_part(end[axis])]
        crops_anything = crops_anything or any(not isinstance(crop, int) or crop for crop in crops)
        offsets.append(crops[0])
        if isinstance(dim, int) and all(isinstance(crop, int) for crop in crops):
            if dim - crops[0] - crops[1] < 0:
                raise ctx.error(f"pads crop {crops[0] + crops[1]} from axis {axis} of size {dim}")
            kept.append(dim - crops[0] - crops[1])
            continue
        size = sub(sub(index_value(dim), index_value(crops[0])), index_value(crops[1]))
        assert_true(
            cmp("sge", size, 0),
            f"{ctx.niro_location}: 'onnx.Pad' op: the pads crop more than axis {axis} holds",
        )
        kept.append(size)
    if crops_anything:
        data = extract_slice(data, element, offsets, kept, [1] * rank)
    low = [_positive_part(pad) for pad in begin]
    high = [_positive_part(pad) for pad in end]
    sizes = [
        size + before + after
        if all(isinstance(part, int) for part in (size, before, after))
        else add(add(size, before), after)
        for size, before, after in zip(kept, low, high, strict=True)
    ]
    dynamic_offsets, static_offsets = _offset_mark(low)
    dynamic_sizes, static_sizes = _mixed(kept)
    return tensor.InsertSliceOp(
        data,
        filled(sizes, element, value()),
        dynamic_offsets,
        dynamic_sizes,
        [],
        static_offsets,
        static_sizes,
        [1] * rank,
    ).result


def _negative_part(pad: Mixed) -> Mixed:
    """How much a pad crops: max(-pad, 0)."""
    if isinstance(pad, int):
        return max(-pad, 0)
    return arith.MaxSIOp(sub(0, pad), index_constant(0)).result


def _positive_part(pad: Mixed) -> Mixed:
    """How much a pad adds: max(pad, 0)."""
    if isinstance(pad, int):
        return max(pad, 0)
    return arith.MaxSIOp(index_value(pad), index_constant(0)).result


def _padded_type(source: RankedTensorType, begin: list, end: list) -> RankedTensorType:
    shape = tuple(
        None if dim is None else dim + low + high
        for dim, low, high in zip(source.shape, begin, end, strict=True)
    )
    return RankedTensorType(source.element_type, shape)
