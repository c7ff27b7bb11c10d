"""Sliding-window helpers shared by the NN lowerings (conv, pooling, resize, quantized conv).

ONNX's Conv, ConvTranspose and the pooling ops describe a window by `kernel_shape`, `strides`,
`dilations`, `pads` (all begins, then all ends) or `auto_pad`. `window_geometry` resolves those
to explicit per-axis numbers once, checked against the result type that shape inference gave
the op, so every lowering builds from the same numbers and a disagreement is a clear refusal
rather than a wrong result; `at_run_time` computes what a dynamic spatial axis leaves to the
run time, `pad_for_window` pads and cuts an input to what its windows read, `window_taps`
cuts a padded input into one shifted slice per kernel tap, and `phase_taps` cuts a strided
window's taps from the input's stride phases.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from niro.ir import op_name

from ..bindings import arith, mlir_ir, tensor
from ..builders import (
    DYNAMIC,
    MapSpec,
    assert_true,
    collapse_dims,
    constant,
    crop,
    dim,
    empty,
    expand_dim,
    extract_slice,
    generic,
    index_constant,
    pad,
    producer,
    tensor_size,
)
from ..context import LoweringRuleContext
from .common import attribute, ints_attribute

__all__ = ["WindowGeometry", "window_geometry"]


@dataclass(frozen=True)
class WindowGeometry:
    """Explicit per-spatial-axis window numbers: `pads_begin`/`pads_end` as ONNX means them,
    `extra_end` the additional end padding ceil_mode needs so every window lies inside the
    padded input, `output` the spatial output sizes. On a dynamic spatial axis `output` (and
    SAME pads) are None until `at_run_time` makes them index values."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int | mlir_ir.Value | None, ...]
    pads_end: tuple[int | mlir_ir.Value | None, ...]
    extra_end: tuple[int, ...]
    output: tuple[int | mlir_ir.Value | None, ...]

    def resolved_pads(self) -> tuple[list[int | mlir_ir.Value], list[int | mlir_ir.Value]]:
        """(pads_begin, pads_end) once every pad is known: an int, or an index value that
        `at_run_time` made for a SAME pad of a dynamic axis."""
        begin = [pad for pad in self.pads_begin if pad is not None]
        end = [pad for pad in self.pads_end if pad is not None]
        assert len(begin) == len(end) == len(self.kernel), f"unresolved pads in {self}"
        return begin, end

    def static_pads(self) -> tuple[list[int], list[int]]:
        """(pads_begin, pads_end) of a geometry whose spatial sizes are all static."""
        begin = [pad for pad in self.pads_begin if isinstance(pad, int)]
        end = [pad for pad in self.pads_end if isinstance(pad, int)]
        assert len(begin) == len(end) == len(self.kernel), f"pads not all static in {self}"
        return begin, end

    def static_output(self) -> list[int]:
        """The output sizes of a geometry whose spatial sizes are all static."""
        output = [size for size in self.output if isinstance(size, int)]
        assert len(output) == len(self.kernel), f"output sizes not all static in {self}"
        return output


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
    ctx: LoweringRuleContext, x: mlir_ir.Value, x_niro, channels: int, what: str
) -> tuple[mlir_ir.Value, tuple[int | None, ...]]:
    """`x` (MLIR) and its Niro shape with a dynamic channel dim 1 fixed to `channels`, the
    count the (static) filter implies; `x` and its shape as they are when dim 1 is static.

    A Pad with run-time pads upstream (torchvision's detection models) leaves shape inference
    no dim at all, although the filter fixes the channels: `x` is `tensor.cast` to the type
    with that static channel and a `cf.assert` stops the program with the reason when the
    run-time count differs (the cast alone would make that undefined behaviour)."""
    shape = ctx.ranked(x_niro, what).shape
    if len(shape) < 2 or shape[1] is not None:
        return x, tuple(shape)
    actual = tensor_size(x, 1)
    equal = arith.CmpIOp(arith.CmpIPredicate.eq, actual, index_constant(channels)).result
    assert_true(
        equal,
        f"{ctx.niro_location}: '{op_name(ctx.op)}' op: {what} has a run-time channel count "
        f"(dim 1) other than the {channels} its filter W needs",
    )
    x_type = mlir_ir.RankedTensorType(x.type)
    fixed = [channels if axis == 1 else size for axis, size in enumerate(x_type.shape)]
    cast = tensor.CastOp(mlir_ir.RankedTensorType.get(fixed, x_type.element_type), x).result
    return cast, (shape[0], channels, *shape[2:])


__all__ += ["spatial_shape", "channels_from_filter", "at_run_time", "static_or_none"]


def window_geometry(
    ctx: LoweringRuleContext,
    spatial: Sequence[int | None],
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
    declared = (
        ints_attribute(ctx, "kernel_shape", (), rank) if attribute(ctx, "kernel_shape") else None
    )
    if kernel is not None and declared is not None and tuple(declared) != tuple(kernel):
        raise ctx.error(f"kernel_shape {declared} disagrees with the filter's {tuple(kernel)}")
    kernel = tuple(kernel) if kernel is not None else declared or ()
    if len(kernel) != rank:
        raise ctx.error(f"needs kernel_shape with {rank} values, got {tuple(kernel)}")
    strides = ints_attribute(ctx, "strides", (1,) * rank, rank)
    dilations = ints_attribute(ctx, "dilations", (1,) * rank, rank)
    if not allow_dilations and any(d != 1 for d in dilations):
        raise ctx.error(f"does not support dilations {dilations}")
    if any(value < 1 for value in (*strides, *dilations, *kernel)):
        raise ctx.error("needs positive kernel_shape, strides and dilations")
    auto_pad = attribute(ctx, "auto_pad", "NOTSET")
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    begin: list[int | None]
    end: list[int | None]
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
        pads = ints_attribute(ctx, "pads", (0,) * (2 * rank), 2 * rank)
        begin, end = list(pads[:rank]), list(pads[rank:])
    else:
        raise ctx.error(f"has an unknown auto_pad '{auto_pad}'")
    if any(value is not None and value < 0 for value in (*begin, *end)):
        raise ctx.error(f"does not support negative pads {(*begin, *end)}")
    output: list[int | None] = []
    extra: list[int] = []
    for axis, size in enumerate(spatial):
        if size is None:
            # NOTE: ceil_mode pads the end by stride - 1 more, at least the extra a last
            # window may need; linalg reads only what the windows cover.
            output.append(None)
            extra.append(strides[axis] - 1 if ceil_mode and begin[axis] is not None else 0)
            continue
        low, high = begin[axis], end[axis]
        assert low is not None and high is not None, "a static axis gets static pads"
        padded = size + low + high
        if padded < extent[axis]:
            raise ctx.error(
                f"window of extent {extent[axis]} does not fit the padded input size {padded} "
                f"on spatial axis {axis}"
            )
        steps = (padded - extent[axis]) / strides[axis]
        out = (math.ceil(steps) if ceil_mode else math.floor(steps)) + 1
        if ceil_mode and (out - 1) * strides[axis] >= size + low:
            out -= 1
        output.append(out)
        extra.append(max(0, (out - 1) * strides[axis] + extent[axis] - padded))
    return WindowGeometry(
        tuple(kernel), strides, dilations, tuple(begin), tuple(end), tuple(extra), tuple(output)
    )


def at_run_time(
    ctx: LoweringRuleContext, x: mlir_ir.Value, geometry: WindowGeometry, *, ceil_mode: bool = False
) -> WindowGeometry:
    """`geometry` with the output sizes (and SAME pads) of dynamic spatial axes computed from
    `tensor.dim` of `x` (N, C, S...) as index values; `geometry` itself when all are static.

    floor((in + begin + end - extent) / stride) + 1 (ceil_mode: rounded up, less one when the
    last window would start in the end padding); SAME: ceil(in / stride), the total padding
    max(0, (out - 1) * stride + extent - in) split as `window_geometry` splits it."""
    if all(out is not None for out in geometry.output):
        return geometry
    c = index_constant
    begin, end, output = list(geometry.pads_begin), list(geometry.pads_end), list(geometry.output)
    upper = attribute(ctx, "auto_pad", "NOTSET") == "SAME_UPPER"
    for axis, out in enumerate(geometry.output):
        if out is not None:
            continue
        size = tensor_size(x, 2 + axis)
        stride = geometry.strides[axis]
        extent = (geometry.kernel[axis] - 1) * geometry.dilations[axis] + 1
        low, high = begin[axis], end[axis]
        if low is None:
            out = arith.CeilDivSIOp(size, c(stride)).result
            reach = arith.AddIOp(arith.MulIOp(out, c(stride)).result, c(extent - stride)).result
            total = arith.MaxSIOp(arith.SubIOp(reach, size).result, c(0)).result
            small = arith.FloorDivSIOp(total, c(2)).result
            large = arith.SubIOp(total, small).result
            begin[axis], end[axis] = (small, large) if upper else (large, small)
        else:
            assert high is not None, "a static begin pad has a static end pad"
            room = arith.AddIOp(size, c(low + high - extent)).result
            divide = arith.CeilDivSIOp if ceil_mode else arith.FloorDivSIOp
            out = arith.AddIOp(divide(room, c(stride)).result, c(1)).result
            if ceil_mode:
                last = arith.MulIOp(arith.SubIOp(out, c(1)).result, c(stride)).result
                starts_in_pad = arith.CmpIOp(
                    arith.CmpIPredicate.sge, last, arith.AddIOp(size, c(low)).result
                ).result
                out = arith.SelectOp(starts_in_pad, arith.SubIOp(out, c(1)).result, out).result
            # NOTE: a static axis this small is refused at compile time; at run time the same
            # input would make a negative size, so the program stops with the reason instead.
            fits = arith.CmpIOp(arith.CmpIPredicate.sge, out, c(1)).result
            assert_true(
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


def static_or_none(sizes: Sequence[int | mlir_ir.Value | None]) -> tuple[int | None, ...]:
    """Mixed sizes as a Niro shape: an index value (a run-time size) is None."""
    return tuple(size if isinstance(size, int) else None for size in sizes)


def pad_for_window(
    ctx: LoweringRuleContext, x: mlir_ir.Value, geometry: WindowGeometry, padding: mlir_ir.Value
) -> mlir_ir.Value:
    """`x` (N, C, S...) padded as `geometry` says and cut to exactly the extent the windows
    read, (O-1)*s + (K-1)*d + 1 per axis: linalg's static shape inference rejects an input
    larger than its windows read (trailing rows a stride skips)."""
    begin, ends = geometry.resolved_pads()
    high = [
        end if not extra else end + extra
        for end, extra in zip(ends, geometry.extra_end, strict=True)
    ]
    padded = pad(x, [0, 0, *begin], [0, 0, *high], padding)
    shape = list(mlir_ir.RankedTensorType(padded.type).shape)
    # NOTE: a dynamic axis with a stride is cut too, to a size computed at run time: linalg
    # itself takes the loop bounds from the output and the window, but IREE (3.13) miscompiles
    # a strided window op whose input is longer than its windows read when that input also
    # feeds another op (torchvision's FPN: LastLevelMaxPool (kernel 1, stride 2) and the RPN
    # head's conv both read the last FPN level; the conv computed wrong numbers). With a stride
    # of 1 the windows read the whole padded axis, so it is kept as it is.
    needed: list[int | mlir_ir.Value] = shape[:2]
    for out, s, k, d in zip(
        geometry.output, geometry.strides, geometry.kernel, geometry.dilations, strict=True
    ):
        if isinstance(out, int):
            needed.append((out - 1) * s + (k - 1) * d + 1)
        elif isinstance(out, mlir_ir.Value) and s > 1:
            start = arith.SubIOp(out, index_constant(1)).result
            last = arith.MulIOp(start, index_constant(s)).result
            needed.append(arith.AddIOp(last, index_constant((k - 1) * d + 1)).result)
        else:
            needed.append(DYNAMIC)
    return crop(padded, needed)


__all__ += ["pad_for_window"]


TAPS_LIMIT = 64
"""The most kernel taps a window op may have to be computed tap by tap (`window_taps`: one
operand per tap) instead of by one generic reducing over the window."""


DYNAMIC_TAPS_LIMIT = 25
"""The most kernel taps a window op of a dynamic input may have to be computed tap by tap.

NOTE: IREE 3.13 may give each tap slice of a dynamic input a binding of its own in the
dispatch that sums them, with its size and offset as push constants, and a CPU executable takes
at most 64: ConvNeXt's 7x7 depthwise convolution of a dynamic batch, exported by PyTorch's
dynamo exporter (its result transposed and normalised over channels), compiled to a dispatch of
102 constants that iree.runtime refused to load ("dispatch requiring 102 constants exceeds limit
of 64"). 5x5 (25 taps) stays under the limit."""


def window_taps(
    padded: mlir_ir.Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    output: Sequence[int | mlir_ir.Value],
) -> list[mlir_ir.Value] | None:
    """The windows of a padded (N, C, S...) input by kernel tap, taps in row-major order: slice
    k is (N, C, O...) with element [n, c, o] = padded[n, c, o + k*d], a
    `tensor.extract_slice`. One element-wise `linalg.generic` over them then computes the
    window op. None (the caller reduces over the window in place) for a stride other than 1,
    more than `TAPS_LIMIT` taps, or a dynamic input computed from a `tensor.expand_shape`.

    NOTE: IREE 3.13 vectorizes such an element-wise generic along the output row, and runs it
    7-28x faster on CPU than a generic reducing over the window or its named depthwise
    convolutions (32 channels, 5x5 at 112x112: 1.1 against 8 ms CPU per call); the taps must be
    slices: read through shifted indexing maps of one operand instead, the generic ran 10x
    slower. Of a dynamic input, not when it is computed from an expand_shape
    (`_reshaped_upstream`; a convolution's (N, M, P) product reshaped to (N, M, H, W) is one):
    IREE sinks that expand into the tap generic when it is the centre tap, collapsing the
    generic and copying every other slice in a dispatch of its own (MobileNet's 5x5 depthwise
    convolution at a dynamic 112x112: 25 copies of 110 us and a 1.9 ms sum, against 2.4 ms
    reducing); a small 1x1 convolution of dynamic spatial dims emits none
    (`conv.SPATIAL_PRODUCT_WEIGHTS`). Else the taps are fast there too (that 5x5 convolution and
    a 3x3 MaxPool of a dynamic batch of 32x112x112: 0.46 against 2.2-2.7 ms reducing). Only
    for unit strides: IREE reads a strided slice element by element, and a 3x3 stride-2 window
    op over strided taps ran 1.6-5x slower than reducing (MaxPool of 64x111x111: 1,080 against
    200 us per call; depthwise convolution of 48x112x112: 780 against 480 us; of 112x56x56: 390
    against 230 us); `phase_taps` cuts a strided window's taps from its stride phases."""
    shape = mlir_ir.RankedTensorType(padded.type).shape
    if any(s != 1 for s in strides) or math.prod(kernel) > TAPS_LIMIT:
        return None
    if DYNAMIC in shape and (math.prod(kernel) > DYNAMIC_TAPS_LIMIT or _reshaped_upstream(padded)):
        return None
    lead = [tensor_size(padded, 0), tensor_size(padded, 1)]
    return [
        extract_slice(
            padded,
            [0, 0, *(k * d for k, d in zip(tap, dilations, strict=True))],
            [*lead, *output],
        )
        for tap in itertools.product(*(range(k) for k in kernel))
    ]


def _reshaped_upstream(value: mlir_ir.Value, depth: int = 8) -> bool:
    """Whether `value` is a `tensor.expand_shape`'s result, or computed from one through at
    most `depth` pads, slices, collapses and element-wise generics: IREE 3.13 may sink such an
    expand into a tap generic reading `value` (`window_taps`)."""
    owner = value.owner
    if depth < 0 or isinstance(owner, mlir_ir.Block):
        return False
    name = owner.name
    if name == "tensor.expand_shape":
        return True
    if name == "linalg.generic" and "reduction" in str(owner.attributes["iterator_types"]):
        return False
    if name not in ("tensor.pad", "tensor.extract_slice", "tensor.collapse_shape", "linalg.generic"):
        return False
    return any(
        isinstance(operand.type, mlir_ir.RankedTensorType) and _reshaped_upstream(operand, depth - 1)
        for operand in owner.operands
    )


__all__ += ["TAPS_LIMIT", "window_taps"]


def phase_taps(
    padded: mlir_ir.Value,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    output: Sequence[int | mlir_ir.Value],
) -> list[mlir_ir.Value] | None:
    """`window_taps` of a window whose strides are not all 1, as unit-stride slices: the
    input (padded up to a multiple of each stride, `_whole_phases`) copied once into its stride
    phases (N, C, s..., S/s...), phase[n, c, p..., q...] = padded[n, c, q*s + p]; tap k is then
    the slice of phase (k*d mod s) at offset (k*d div s); dynamic sizes are computed at run
    time. None for unit strides or more than `TAPS_LIMIT` taps.

    The copy reads a grid of exactly the phases' size as a reshape of it, a longer one (a
    run-time size, or one cut) through strided maps. NOTE: IREE 3.13 copies a cut of a grid
    before reshaping it; MobileNet's 3x3 stride-2 depthwise convolution of 48x112x112, dynamic:
    cut and reshaped 129 + 226 us, read through strided maps 194 us; static and exact: reshaped
    126 us, through strided maps 263 us.

    NOTE: IREE 3.13 runs a strided depthwise convolution as a generic reducing over its window
    at about 4 GFLOP/s (MobileNet's 3x3 stride-2 one of 48x112x112: 450-480 us a call, the
    slowest op of its run), as strided taps slower still (`window_taps`); as this phase copy
    and one element-wise sum of unit-stride taps 170-370 us. Not for pools: IREE compiles their
    reducing form as a pooling op (`pooling._window_reduce`), faster than the copy alone."""
    source = mlir_ir.RankedTensorType(padded.type)
    rank = len(kernel)
    if all(s == 1 for s in strides) or math.prod(kernel) > TAPS_LIMIT:
        return None
    element = source.element_type
    grid, rows, exact = _whole_phases(padded, strides)
    lead = [tensor_size(grid, 0), tensor_size(grid, 1)]
    # loops: n, c, p_0..p_{r-1}, q_0..q_{r-1}
    read: MapSpec
    if exact:  # (N, C, q_0, p_0, q_1, p_1, ...), a view of the grid
        for axis in range(rank):
            grid = expand_dim(grid, 2 + 2 * axis, (rows[axis], strides[axis]))
        read = [0, 1, *(index for axis in range(rank) for index in (2 + rank + axis, 2 + axis))]
    else:
        read = [0, 1, *(dim(2 + rank + axis) * s + dim(2 + axis) for axis, s in enumerate(strides))]
    phases = generic(
        [(grid, read)],
        [(empty([*lead, *strides, *rows], element), list(range(2 + 2 * rank)))],
        2 + 2 * rank,
        (),
        lambda args: [args[0]],
    )[0]
    taps = []
    for tap in itertools.product(*(range(k) for k in kernel)):
        reach = [k * d for k, d in zip(tap, dilations, strict=True)]
        offsets = [r % s for r, s in zip(reach, strides, strict=True)]
        offsets += [r // s for r, s in zip(reach, strides, strict=True)]
        window = extract_slice(phases, [0, 0, *offsets], [*lead, *([1] * rank), *output])
        taps.append(collapse_dims(window, 2, rank + 1))
    return taps


def _whole_phases(
    value: mlir_ir.Value, strides: Sequence[int]
) -> tuple[mlir_ir.Value, list[int | mlir_ir.Value], bool]:
    """(a grid holding `value`'s whole stride phases from its start, the rows of each phase,
    whether the grid's spatial axes are exactly rows * stride long).

    When `value` is a `tensor.pad`, or `pad_for_window`'s cut of one, the grid is that pad,
    grown where the phases need more rows than it has (its padding serves: the rows past
    `value` the phases take in are read by no tap); else `value` padded to whole phases.
    NOTE: IREE 3.13 makes each `tensor.pad` a copy dispatch of its own, so padding `value`
    itself copies the padded input a second time (MobileNet's 3x3 stride-2 depthwise
    convolution of 48x112x112: 150 us of a 2 ms call)."""
    regrown = _regrown_pad(value, strides)
    if regrown is not None:
        return regrown
    rank = len(strides)
    phased = [_phase_rows(tensor_size(value, 2 + axis), strides[axis]) for axis in range(rank)]
    element = mlir_ir.RankedTensorType(value.type).element_type
    grows = [grow for _, grow in phased]
    grown = pad(value, [0] * (2 + rank), [0, 0, *grows], constant(element, 0))
    return grown, [rows for rows, _ in phased], True


def _regrown_pad(
    value: mlir_ir.Value, strides: Sequence[int]
) -> tuple[mlir_ir.Value, list[int | mlir_ir.Value], bool] | None:
    """`_whole_phases` of a `tensor.pad` or a cut of one from the start of its axes (its
    leading axes whole): the pad, grown where the phases need more rows than it has (a
    run-time size by stride - 1, as many as they can lack); the cut, and the old pad once
    unread, erased. None for any other `value`, or a run-time size the cut does not compute
    itself."""
    cut_op, padded = _uncut(value)
    pad_op = producer(padded)
    if pad_op is None or pad_op.name != "tensor.pad":
        return None
    pad_op = pad_op.opview
    padding = _padding(pad_op)
    if padding is None:
        return None
    shape = mlir_ir.RankedTensorType(padded.type).shape
    sizes: list[int | mlir_ir.Value] = (
        _mixed(cut_op.static_sizes, cut_op.sizes) if cut_op is not None else list(shape)
    )
    whole = [size == DYNAMIC or _dim_of(size, padded, axis) for axis, size in enumerate(sizes)]
    if not all(whole[:2]):
        return None
    old_high = _mixed(pad_op.static_high, pad_op.high)
    high = list(old_high)
    rows: list[int | mlir_ir.Value | None] = []
    exact = True
    for axis, stride in enumerate(strides, start=2):
        size = sizes[axis]
        if stride == 1:  # no phases along it: the axis as the cut left it
            rows.append(None if whole[axis] else size)
            exact = exact and whole[axis]
            continue
        if whole[axis] and not (isinstance(size, int) and size != DYNAMIC):
            return None  # a run-time size read off the pad: the pad would stay, read by it
        count, _ = _phase_rows(size, stride)
        rows.append(count)
        if isinstance(count, int) and shape[axis] != DYNAMIC:
            extra = max(0, count * stride - shape[axis])
            exact = exact and count * stride == shape[axis] + extra
        else:  # `value` ends at the pad's end or before: its phases at most stride - 1 rows past
            extra, exact = stride - 1, False
        end = high[axis]
        if extra and isinstance(end, int):
            high[axis] = end + extra
        elif extra:
            high[axis] = arith.AddIOp(end, index_constant(extra)).result
    if high != old_high:
        padded = pad(pad_op.source, _mixed(pad_op.static_low, pad_op.low), high, padding)
    if cut_op is not None and not list(cut_op.result.uses):
        cut_op.operation.erase()
    if high != old_high:
        _erase_unread(pad_op)
    phase_rows = [
        tensor_size(padded, axis) if count is None else count
        for axis, count in enumerate(rows, start=2)
    ]
    return padded, phase_rows, exact


def _erase_unread(op: mlir_ir.OpView) -> None:
    """Erase `op` if nothing reads its result but `tensor.dim`s nothing reads (a cut's sizes)."""
    users = [use.owner for use in op.result.uses]
    if all(user.name == "tensor.dim" and not list(user.result.uses) for user in users):
        for user in users:
            user.erase()
        op.operation.erase()


def _uncut(value: mlir_ir.Value) -> tuple[mlir_ir.OpView | None, mlir_ir.Value]:
    """(the `tensor.extract_slice` that cut `value` from the start of each axis of its source,
    that source), or (None, `value`) when nothing did."""
    op = producer(value)
    if op is None or op.name != "tensor.extract_slice":
        return None, value
    op = op.opview
    if list(op.offsets) or any(op.static_offsets) or any(s != 1 for s in op.static_strides):
        return None, value
    return op, op.source


def _dim_of(size: int | mlir_ir.Value, tensor_value: mlir_ir.Value, axis: int) -> bool:
    """Whether `size` is the whole of `axis` of `tensor_value`: equal to its static size, or
    its `tensor.dim` at that axis."""
    if isinstance(size, int):
        return size == mlir_ir.RankedTensorType(tensor_value.type).shape[axis]
    op = producer(size)
    if op is None or op.name != "tensor.dim" or op.operands[0] != tensor_value:
        return False
    index = producer(op.operands[1])
    return (
        index is not None
        and index.name == "arith.constant"
        and mlir_ir.IntegerAttr(index.attributes["value"]).value == axis
    )


def _padding(pad_op: mlir_ir.OpView) -> mlir_ir.Value | None:
    """The value a `tensor.pad` yields when it is defined outside the pad (`builders.pad`'s),
    else None (a padding computed in its region, as ONNX Pad's lowering may write it)."""
    block = pad_op.regions[0].blocks[0]
    padding = list(block.operations)[-1].operands[0]
    owner = padding.owner
    if isinstance(owner, mlir_ir.Block) or owner.operation.parent == pad_op.operation:
        return None
    return padding


def _mixed(
    static: Sequence[int], dynamic: Sequence[mlir_ir.Value]
) -> list[int | mlir_ir.Value]:
    """An op's mixed sizes or amounts (a `tensor.pad`'s low or high, a slice's sizes), each an
    int or, where the static form holds DYNAMIC, the next index operand."""
    values = iter(dynamic)
    return [next(values) if amount == DYNAMIC else amount for amount in static]


def _phase_rows(size: int | mlir_ir.Value, stride: int) -> tuple[int | mlir_ir.Value, int | mlir_ir.Value]:
    """(rows of each stride phase of an axis of `size`, the padding that grows it to rows *
    stride), computed at run time for a dynamic size."""
    if isinstance(size, int):
        rows = -(-size // stride)
        return rows, rows * stride - size
    rows = arith.CeilDivSIOp(size, index_constant(stride)).result
    grown = arith.MulIOp(rows, index_constant(stride)).result
    return rows, arith.SubIOp(grown, size).result


__all__ += ["phase_taps"]
