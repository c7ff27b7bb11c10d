"""Sliding-window helpers shared by the NN lowerings (conv, pooling, resize, quantized conv).

ONNX's Conv, ConvTranspose and the pooling ops describe a window by `kernel_shape`, `strides`,
`dilations`, `pads` (all begins, then all ends) or `auto_pad`. `window_geometry` resolves those
to explicit per-axis numbers once, checked against the result type that shape inference gave
the op, so every lowering builds from the same numbers and a disagreement is a clear refusal
rather than a wrong result. The builders here (`generic`, `pad`, `numpy_constant`,
`expand_dim`, `collapse_dims`) are the few MLIR constructions those lowerings share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from niro.ir import ScalarType, op_name

from ..bindings import arith, ir, linalg, tensor
from ..context import LoweringRuleContext
from ..types import index_type, lower_scalar_type
from . import structured
from .common import attribute

__all__ = [
    "WindowGeometry",
    "window_geometry",
    "static_shape",
    "batch_shape",
    "tensor_type",
    "empty_like",
    "generic",
    "pad",
    "numpy_constant",
    "scalar_constant",
    "expand_dim",
    "collapse_dims",
    "dim",
    "PARALLEL",
    "REDUCTION",
]

PARALLEL = "parallel"
REDUCTION = "reduction"


@dataclass(frozen=True)
class WindowGeometry:
    """Explicit per-spatial-axis window numbers: `pads_begin`/`pads_end` as ONNX means them,
    `extra_end` the additional end padding ceil_mode needs so every window lies inside the
    padded input, `output` the spatial output sizes. On a dynamic spatial axis `output` (and
    SAME pads) are None until `at_run_time` makes them index values."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int | ir.Value | None, ...]
    pads_end: tuple[int | ir.Value | None, ...]
    extra_end: tuple[int, ...]
    output: tuple[int | ir.Value | None, ...]


def static_shape(ctx: LoweringRuleContext, value, what: str) -> tuple[int, ...]:
    """The shape of a Niro tensor value when fully static, else a clear refusal."""
    shape = ctx.ranked(value, what).shape
    if any(size is None for size in shape):
        raise ctx.error(f"needs a static shape for {what}, got {shape}")
    return tuple(shape)


def batch_shape(ctx: LoweringRuleContext, value, what: str) -> tuple[int | None, ...]:
    """The shape of a Niro tensor value whose dims are static except perhaps dim 0 (the batch,
    None when dynamic), else a clear refusal: the window lowerings compute their geometry,
    padding and AveragePool divisors at compile time from the channel and spatial sizes, but
    loop over the batch, so only its size comes from `tensor.dim` at run time."""
    shape = ctx.ranked(value, what).shape
    if any(size is None for size in shape[1:]):
        raise ctx.error(
            f"needs a static shape for {what} (only the batch dim 0 may be dynamic), got {shape}"
        )
    return tuple(shape)


def spatial_shape(ctx: LoweringRuleContext, value, what: str) -> tuple[int | None, ...]:
    """The shape of a Niro tensor value whose channel dim 1 is static, else a clear refusal:
    the batch and spatial dims may be dynamic (None). Channels fix the filter and the
    grouping at compile time; the batch only passes through, and the spatial window sizes,
    pads and output sizes of a dynamic spatial dim are computed at run time (`at_run_time`)."""
    shape = ctx.ranked(value, what).shape
    if len(shape) >= 2 and shape[1] is None:
        raise ctx.error(
            f"needs a static channel dim 1 for {what} (batch and spatial dims may be dynamic), "
            f"got {shape}"
        )
    return tuple(shape)


def channels_from_filter(
    ctx: LoweringRuleContext, x: ir.Value, x_niro, channels: int, what: str
) -> tuple[ir.Value, tuple[int | None, ...]]:
    """`x` (MLIR) and its Niro shape with a dynamic channel dim 1 fixed to `channels`, the
    count the (static) filter implies; `x` and its shape as they are when dim 1 is static.

    A Pad with run-time pads upstream (torchvision's detection models) leaves shape inference
    no dim at all, although the filter fixes the channels: `x` is `tensor.cast` to the type
    with that static channel and a `cf.assert` stops the program with the reason when the
    run-time count differs (the cast alone would make that undefined behaviour)."""
    shape = ctx.ranked(x_niro, what).shape
    if len(shape) < 2 or shape[1] is not None:
        return x, tuple(shape)
    actual = structured.tensor_size(x, 1)
    equal = arith.CmpIOp(arith.CmpIPredicate.eq, actual, ctx.index_constant(channels)).result
    structured.assert_true(
        equal,
        f"{ctx.niro_location}: '{op_name(ctx.op)}' op: {what} has a run-time channel count "
        f"(dim 1) other than the {channels} its filter W needs",
    )
    x_type = ir.RankedTensorType(x.type)
    fixed = [channels if axis == 1 else size for axis, size in enumerate(x_type.shape)]
    cast = tensor.CastOp(ir.RankedTensorType.get(fixed, x_type.element_type), x).result
    return cast, (shape[0], channels, *shape[2:])


__all__ += ["spatial_shape", "channels_from_filter", "at_run_time", "static_or_none"]


def _ints(
    ctx: LoweringRuleContext, name: str, default: Sequence[int], count: int
) -> tuple[int, ...]:
    value = attribute(ctx, name)
    if value is None:
        return tuple(default)
    value = tuple(int(item) for item in value)
    if len(value) != count:
        raise ctx.error(f"attribute '{name}' has {len(value)} values, expected {count}")
    return value


ints_attribute = _ints
"""An INTS attribute (kernel_shape, strides, pads) of `count` values, or `default`."""

__all__ += ["ints_attribute"]


def window_geometry(
    ctx: LoweringRuleContext,
    spatial: Sequence[int],
    kernel: Sequence[int] | None = None,
    *,
    ceil_mode: bool = False,
    allow_dilations: bool = True,
) -> WindowGeometry:
    """Resolve kernel/strides/dilations/pads/auto_pad for an input of spatial sizes `spatial`.

    `kernel` is the filter's spatial shape (convolutions); pools take `kernel_shape`.

    SAME_UPPER/SAME_LOWER pad so the output is ceil(input / stride), the odd unit at the end
    (UPPER) or beginning (LOWER); VALID pads nothing. ceil_mode rounds the output size up, but
    (as ONNX and PyTorch do) drops a last window that would start in the end padding.
    """
    rank = len(spatial)  # NOTE: a None size (dynamic) gets None output and (SAME) pads
    declared = _ints(ctx, "kernel_shape", (), rank) if attribute(ctx, "kernel_shape") else None
    if kernel is not None and declared is not None and tuple(declared) != tuple(kernel):
        raise ctx.error(f"kernel_shape {declared} disagrees with the filter's {tuple(kernel)}")
    kernel = tuple(kernel) if kernel is not None else declared or ()
    if len(kernel) != rank:
        raise ctx.error(f"needs kernel_shape with {rank} values, got {tuple(kernel)}")
    strides = _ints(ctx, "strides", (1,) * rank, rank)
    dilations = _ints(ctx, "dilations", (1,) * rank, rank)
    if not allow_dilations and any(d != 1 for d in dilations):
        raise ctx.error(f"does not support dilations {dilations}")
    if any(value < 1 for value in (*strides, *dilations, *kernel)):
        raise ctx.error("needs positive kernel_shape, strides and dilations")
    auto_pad = attribute(ctx, "auto_pad", "NOTSET")
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, stride, span in zip(spatial, strides, extent, strict=True):
            if size is None:  # the pads depend on the run-time size
                begin.append(None)
                end.append(None)
                continue
            out = -(-size // stride)
            total = max(0, (out - 1) * stride + span - size)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
    elif auto_pad == "VALID":
        begin, end = [0] * rank, [0] * rank
    elif auto_pad == "NOTSET":
        pads = _ints(ctx, "pads", (0,) * (2 * rank), 2 * rank)
        begin, end = list(pads[:rank]), list(pads[rank:])
    else:
        raise ctx.error(f"has an unknown auto_pad '{auto_pad}'")
    if any(value is not None and value < 0 for value in (*begin, *end)):
        raise ctx.error(f"does not support negative pads {(*begin, *end)}")
    output, extra = [], []
    for axis in range(rank):
        if spatial[axis] is None:
            # NOTE: ceil_mode pads the end by stride - 1 more, at least the extra a last
            # window may need; linalg reads only what the windows cover.
            output.append(None)
            extra.append(strides[axis] - 1 if ceil_mode and begin[axis] is not None else 0)
            continue
        padded = spatial[axis] + begin[axis] + end[axis]
        if padded < extent[axis]:
            raise ctx.error(
                f"window of extent {extent[axis]} does not fit the padded input size {padded} "
                f"on spatial axis {axis}"
            )
        steps = (padded - extent[axis]) / strides[axis]
        out = (math.ceil(steps) if ceil_mode else math.floor(steps)) + 1
        if ceil_mode and (out - 1) * strides[axis] >= spatial[axis] + begin[axis]:
            out -= 1
        output.append(out)
        extra.append(max(0, (out - 1) * strides[axis] + extent[axis] - padded))
    return WindowGeometry(
        tuple(kernel), strides, dilations, tuple(begin), tuple(end), tuple(extra), tuple(output)
    )


def at_run_time(
    ctx: LoweringRuleContext, x: ir.Value, geometry: WindowGeometry, *, ceil_mode: bool = False
) -> WindowGeometry:
    """`geometry` with the output sizes (and SAME pads) of dynamic spatial axes computed from
    `tensor.dim` of `x` (N, C, S...) as index values; `geometry` itself when all are static.

    floor((in + begin + end - extent) / stride) + 1 (ceil_mode: rounded up, less one when the
    last window would start in the end padding); SAME: ceil(in / stride), the total padding
    max(0, (out - 1) * stride + extent - in) split as `window_geometry` splits it."""
    if all(out is not None for out in geometry.output):
        return geometry
    c = ctx.index_constant
    begin, end, output = list(geometry.pads_begin), list(geometry.pads_end), list(geometry.output)
    upper = attribute(ctx, "auto_pad", "NOTSET") == "SAME_UPPER"
    for axis, out in enumerate(geometry.output):
        if out is not None:
            continue
        size = structured.tensor_size(x, 2 + axis)
        stride = geometry.strides[axis]
        extent = (geometry.kernel[axis] - 1) * geometry.dilations[axis] + 1
        if begin[axis] is None:
            out = arith.CeilDivSIOp(size, c(stride)).result
            reach = arith.AddIOp(arith.MulIOp(out, c(stride)).result, c(extent - stride)).result
            total = arith.MaxSIOp(arith.SubIOp(reach, size).result, c(0)).result
            small = arith.FloorDivSIOp(total, c(2)).result
            large = arith.SubIOp(total, small).result
            begin[axis], end[axis] = (small, large) if upper else (large, small)
        else:
            room = arith.AddIOp(size, c(begin[axis] + end[axis] - extent)).result
            divide = arith.CeilDivSIOp if ceil_mode else arith.FloorDivSIOp
            out = arith.AddIOp(divide(room, c(stride)).result, c(1)).result
            if ceil_mode:
                last = arith.MulIOp(arith.SubIOp(out, c(1)).result, c(stride)).result
                starts_in_pad = arith.CmpIOp(
                    arith.CmpIPredicate.sge, last, arith.AddIOp(size, c(begin[axis])).result
                ).result
                out = arith.SelectOp(starts_in_pad, arith.SubIOp(out, c(1)).result, out).result
            # NOTE: a static axis this small is refused at compile time; at run time the same
            # input would make a negative size, so the program stops with the reason instead.
            fits = arith.CmpIOp(arith.CmpIPredicate.sge, out, c(1)).result
            structured.assert_true(
                fits,
                f"{ctx.niro_location}: '{op_name(ctx.op)}' op: spatial axis {axis} of input X is "
                f"smaller at run time than the window with its padding (no output position)",
            )
        output[axis] = out
    return WindowGeometry(
        geometry.kernel,
        geometry.strides,
        geometry.dilations,
        tuple(begin),
        tuple(end),
        geometry.extra_end,
        tuple(output),
    )


def static_or_none(sizes: Sequence[int | ir.Value | None]) -> tuple[int | None, ...]:
    """Mixed sizes as a Niro shape: an index value (a run-time size) is None."""
    return tuple(size if isinstance(size, int) else None for size in sizes)


# -- builders -------------------------------------------------------------------------------------


def dim(position: int) -> ir.AffineExpr:
    return ir.AffineDimExpr.get(position)


DYNAMIC = ir.ShapedType.get_dynamic_size()
"""MLIR's marker of a dynamic size in a shape (`?`)."""


def tensor_type(sizes: Sequence[int | ir.Value], element: ir.Type) -> ir.RankedTensorType:
    """The ranked tensor type of mixed `sizes` (an index value is a dynamic `?` dim)."""
    shape = [size if isinstance(size, int) else DYNAMIC for size in sizes]
    return ir.RankedTensorType.get(shape, element)


def empty_like(value: ir.Value, element: ir.Type | None = None) -> ir.Value:
    """`tensor.empty` of `value`'s shape (its dynamic dims from `tensor.dim`), of `element` or
    `value`'s own element type."""
    element = ir.RankedTensorType(value.type).element_type if element is None else element
    return structured.empty(structured.tensor_sizes(value), element)


def generic(
    result: ir.Type,
    inputs: Sequence[ir.Value],
    init: ir.Value,
    maps: Sequence[Sequence[ir.AffineExpr]],
    iterators: Sequence[str],
    body: Callable[[Sequence[ir.Value]], ir.Value],
) -> ir.Value:
    """One `linalg.generic` with one output: `maps` gives the affine results of each input's
    and then the output's indexing map over `len(iterators)` loops; `body(args)` gets the input
    elements followed by the output element and returns the element to yield."""
    loops = len(iterators)
    generic_op = linalg.GenericOp(
        [result],
        list(inputs),
        [init],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(loops, 0, list(m))) for m in maps]),
        ir.ArrayAttr.get(
            [ir.Attribute.parse(f"#linalg.iterator_type<{kind}>") for kind in iterators]
        ),
    )
    element_types = [ir.RankedTensorType(value.type).element_type for value in (*inputs, init)]
    block = generic_op.regions[0].blocks.append(*element_types)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(list(block.arguments))])
    return generic_op.result


def scalar_constant(element: ir.Type, value: float | int) -> ir.Value:
    """An arith.constant scalar of an MLIR integer or float type."""
    if isinstance(element, ir.IntegerType):
        width = element.width
        value = int(value)
        if value >= 1 << (width - 1):  # signless: store the two's-complement bit pattern
            value -= 1 << width
        return arith.ConstantOp(element, ir.IntegerAttr.get(element, value)).result
    return arith.ConstantOp(element, ir.FloatAttr.get(element, float(value))).result


def numpy_constant(array: np.ndarray, scalar: ScalarType) -> ir.Value:
    """A small constant tensor (tables computed at compile time) as `arith.constant dense<>`."""
    element = lower_scalar_type(scalar)
    type_ = ir.RankedTensorType.get(list(array.shape), element)
    if scalar.is_float:
        values = [ir.FloatAttr.get(element, float(item)) for item in array.reshape(-1)]
    else:
        values = [
            ir.IntegerAttr.get(
                element, int(item) - (1 << element.width) * (int(item) >= 1 << (element.width - 1))
            )
            for item in array.reshape(-1)
        ]
    return arith.ConstantOp(type_, ir.DenseElementsAttr.get(values, type=type_)).result


def pad(
    ctx: LoweringRuleContext,
    value: ir.Value,
    low: Sequence[int],
    high: Sequence[int],
    padding: ir.Value,
) -> ir.Value:
    """`tensor.pad` of a tensor with a scalar `padding` (no-op when all 0); a dynamic dim stays
    dynamic (it may be padded too: the result size is then computed by MLIR). A `low`/`high`
    amount may be an index value (a pad computed at run time); its dim becomes dynamic."""
    dynamic_low = [amount for amount in low if not isinstance(amount, int)]
    dynamic_high = [amount for amount in high if not isinstance(amount, int)]
    if not dynamic_low and not dynamic_high and not any(low) and not any(high):
        return value
    source = ir.RankedTensorType(value.type)
    shape = [
        DYNAMIC
        if size == DYNAMIC or not isinstance(lo, int) or not isinstance(hi, int)
        else size + lo + hi
        for size, lo, hi in zip(source.shape, low, high, strict=True)
    ]
    result = ir.RankedTensorType.get(shape, source.element_type)
    static = lambda amounts: [a if isinstance(a, int) else DYNAMIC for a in amounts]  # noqa: E731
    pad_op = tensor.PadOp(result, value, dynamic_low, dynamic_high, static(low), static(high))
    block = pad_op.regions[0].blocks.append(*([index_type()] * len(shape)))
    with ir.InsertionPoint(block):
        tensor.YieldOp(padding)
    return pad_op.result


def expand_dim(value: ir.Value, axis: int, sizes: Sequence[int | ir.Value]) -> ir.Value:
    """Split dim `axis` of `value` into `sizes` (tensor.expand_shape); a size may be an index
    value (a run-time size: `axis` is then dynamic), and the other dims may be dynamic (their
    sizes are passed on from `tensor.dim`)."""
    source = ir.RankedTensorType(value.type)
    shape = list(source.shape)
    split = [size if isinstance(size, int) else DYNAMIC for size in sizes]
    new_shape = shape[:axis] + split + shape[axis + 1 :]
    groups, position = [], 0
    for index in range(len(shape)):
        width = len(sizes) if index == axis else 1
        groups.append(list(range(position, position + width)))
        position += width
    result = ir.RankedTensorType.get(new_shape, source.element_type)
    dynamic: list[ir.Value] = []
    for index, size in enumerate(shape):
        if index == axis:
            dynamic += [part for part in sizes if not isinstance(part, int)]
        elif size == DYNAMIC:
            dynamic.append(structured.tensor_size(value, index))
    return tensor.ExpandShapeOp(result, value, _reassociation(groups), dynamic, new_shape).result


def collapse_dims(value: ir.Value, first: int, count: int) -> ir.Value:
    """Merge `count` static dims of `value` starting at `first` (tensor.collapse_shape); the
    other dims may be dynamic."""
    source = ir.RankedTensorType(value.type)
    shape = list(source.shape)
    group = shape[first : first + count]
    merged = DYNAMIC if DYNAMIC in group else math.prod(group)
    new_shape = shape[:first] + [merged] + shape[first + count :]
    groups = [[index] for index in range(first)]
    groups.append(list(range(first, first + count)))
    groups += [[index] for index in range(first + count, len(shape))]
    result = ir.RankedTensorType.get(new_shape, source.element_type)
    return tensor.CollapseShapeOp(result, value, _reassociation(groups)).result


def _reassociation(groups: list[list[int]]) -> ir.ArrayAttr:
    """The `reassociation` attribute of tensor.expand_shape / collapse_shape: which result (or
    source) dims each group of the other side's dims becomes."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get(
        [ir.ArrayAttr.get([ir.IntegerAttr.get(i64, index) for index in group]) for group in groups]
    )


reassociation = _reassociation


def filled(
    ctx: LoweringRuleContext, shape: Sequence[int], element: ir.Type, value: ir.Value
) -> ir.Value:
    """A tensor of `shape` (ints, or index values for dynamic dims) filled with the scalar
    `value` (linalg.fill of tensor.empty)."""
    return structured.fill(tensor.EmptyOp(list(shape), element).result, value)


__all__ += ["filled"]


def pad_for_window(
    ctx: LoweringRuleContext, x: ir.Value, geometry: WindowGeometry, padding: ir.Value
) -> ir.Value:
    """`x` (N, C, S...) padded as `geometry` says and cut to exactly the extent the windows
    read, (O-1)*s + (K-1)*d + 1 per axis: linalg's static shape inference rejects an input
    larger than its windows read (trailing rows a stride skips)."""
    high = [
        end if not extra else end + extra
        for end, extra in zip(geometry.pads_end, geometry.extra_end, strict=True)
    ]
    padded = pad(ctx, x, [0, 0, *geometry.pads_begin], [0, 0, *high], padding)
    shape = list(ir.RankedTensorType(padded.type).shape)
    # NOTE: a dynamic axis with a stride is cut too, to a size computed at run time: linalg
    # itself takes the loop bounds from the output and the window, but IREE (3.13) miscompiles
    # a strided window op whose input is longer than its windows read when that input also
    # feeds another op (torchvision's FPN: LastLevelMaxPool (kernel 1, stride 2) and the RPN
    # head's conv both read the last FPN level; the conv computed wrong numbers). With a stride
    # of 1 the windows read the whole padded axis, so it is kept as it is.
    needed: list[int | ir.Value] = shape[:2]
    for out, s, k, d in zip(
        geometry.output, geometry.strides, geometry.kernel, geometry.dilations, strict=True
    ):
        if isinstance(out, int):
            needed.append((out - 1) * s + (k - 1) * d + 1)
        elif isinstance(out, ir.Value) and s > 1:
            start = arith.SubIOp(out, ctx.index_constant(1)).result
            last = arith.MulIOp(start, ctx.index_constant(s)).result
            needed.append(arith.AddIOp(last, ctx.index_constant((k - 1) * d + 1)).result)
        else:
            needed.append(DYNAMIC)
    return crop(padded, needed)


def crop(value: ir.Value, sizes: Sequence[int | ir.Value]) -> ir.Value:
    """The leading `sizes` of every axis of a tensor (no-op when already that shape); a `sizes`
    entry of DYNAMIC keeps the whole (dynamic) axis, an index value cuts it at run time."""
    source = ir.RankedTensorType(value.type)
    if list(source.shape) == list(sizes):
        return value
    return extract_slice(value, [0] * len(sizes), sizes)


def extract_slice(
    value: ir.Value,
    offsets: Sequence[int],
    sizes: Sequence[int | ir.Value],
    strides: Sequence[int] | None = None,
) -> ir.Value:
    """`tensor.extract_slice` of static `offsets`, `sizes` and `strides` (default unit); a size
    of DYNAMIC takes the whole of a dynamic axis (its offset must be 0, its stride 1), its size
    from `tensor.dim`; an index value is a size computed at run time."""
    source = ir.RankedTensorType(value.type)
    static = [DYNAMIC if isinstance(size, ir.Value) else size for size in sizes]
    result = ir.RankedTensorType.get(static, source.element_type)
    dynamic = [
        size if isinstance(size, ir.Value) else structured.tensor_size(value, axis)
        for axis, size in enumerate(sizes)
        if isinstance(size, ir.Value) or size == DYNAMIC
    ]
    return tensor.ExtractSliceOp(
        result, value, [], dynamic, [], list(offsets), static, list(strides or [1] * len(sizes))
    ).result


__all__ += ["pad_for_window", "crop", "extract_slice", "DYNAMIC", "reassociation"]
