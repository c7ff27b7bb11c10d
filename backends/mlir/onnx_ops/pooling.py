"""MaxPool, AveragePool, LpPool and their Global forms as window `linalg.generic`s.

A window pool reads the padded input at (n, c, o*s + k*d) for every kernel position k: of a
static input and unit strides, one element-wise generic combines the shifted slices of its
`window_taps` (IREE vectorizes that form); else one generic reduces over the window, whose loops get their bounds
from an uninitialised "window" operand of the kernel's shape, as linalg's named pooling ops do.
Padding uses the reduction's neutral value (-inf or the type's minimum for max, 0 for sums), so
padded positions never win or add. The one thing that depends
on where a window lies is AveragePool's divisor: it is computed at compile time (static shapes)
as the count of window positions inside the input (count_include_pad=0) or inside the
explicitly padded input (count_include_pad=1), and divides the window sums as a small constant.
The batch dim N may be dynamic: its size comes from `tensor.dim` of the input at run time.
Spatial dims may be dynamic too: the output sizes are then computed at run time, and
AveragePool's divisor, when windows differ, is computed in closed form from each output's index
in the division's own loop (`_divide_at_run_time`). MaxPool's Indices output still needs static spatial dims.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from niro.ir import ScalarType

from ..bindings import arith, linalg, math, mlir_ir, tensor
from ..builders import (
    as_i64,
    constant,
    dense_constant,
    dim,
    empty_like,
    expand_dim,
    filled,
    generic,
    index_value,
    tensor_size,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type
from .windows import (
    WindowGeometry,
    at_run_time,
    pad_for_window,
    spatial_shape,
    window_geometry,
    window_taps,
)

__all__: list[str] = []

FLOATS = (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64)
SIGNED = (ScalarType.I8, ScalarType.I16, ScalarType.I32, ScalarType.I64)
UNSIGNED = (ScalarType.U8, ScalarType.U16, ScalarType.U32, ScalarType.U64)


def _input(ctx: LoweringRuleContext, allowed: Sequence[ScalarType]):
    x, x_niro = ctx.operands[0], ctx.niro_operands[0]
    scalar = element_type(x_niro)
    if scalar not in allowed:
        raise ctx.error(f"does not support element type {scalar.spelling}")
    shape = spatial_shape(ctx, x_niro, "input X")
    if len(shape) < 3:
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got {shape}")
    return x, shape, scalar


def _check_output(ctx: LoweringRuleContext, expected: Sequence[int | None]) -> None:
    result = spatial_shape(ctx, ctx.niro_results[0], "the result")
    if tuple(result) != tuple(expected):
        raise ctx.error(
            f"computed output shape {tuple(expected)} but the result type says {result}"
        )


def _window_reduce(
    ctx, x, shape, geometry: WindowGeometry, padding, init_value, combine
) -> mlir_ir.Value:
    """out[n, c, o] = combine over k of padded[n, c, o*s + k*d] (starting from init_value):
    one element-wise generic over the `window_taps` when there are, else one reducing over
    the window. `combine(accumulated, value)` is called with the accumulator first, as
    linalg's named pooling ops read it.

    NOTE: IREE 3.13 compiles the reducing generic with its convolution pipeline
    (ConvTileAndDecomposeExpert, as for the named pooling ops, whose bodies read
    `max(out, in)`) only when the accumulator is the combining op's first operand; as
    `maximumf(in, out)` it took the generic DoubleTilingExpert pipeline with a 16-wide vector
    over the 3-tap window axis, and a 3x3 stride-2 MaxPool of 64x111x111 ran 950 against
    200 us per call (AveragePool 3x3 stride 2 of 24x56x56: 75 against 25 us)."""
    element = mlir_ir.RankedTensorType(x.type).element_type
    padded = pad_for_window(ctx, x, geometry, padding)
    rank = len(geometry.kernel)
    out_shape = [tensor_size(x, 0), shape[1], *geometry.output]
    taps = window_taps(
        padded, geometry.kernel, geometry.strides, geometry.dilations, geometry.output
    )
    if taps is not None:

        def fold(args):
            total = init_value
            for value in args[: len(taps)]:
                total = combine(total, value)
            return [total]

        loops = list(range(2 + rank))
        return generic(
            [(tap, loops) for tap in taps], [(empty_like(taps[0]), loops)], 2 + rank, (), fold
        )[0]
    init = filled(out_shape, element, init_value)
    window = tensor.EmptyOp(list(geometry.kernel), element).result
    outs = [dim(2 + a) for a in range(rank)]
    ks = [dim(2 + rank + a) for a in range(rank)]
    x_map = [dim(0), dim(1)] + [
        outs[a] * geometry.strides[a] + ks[a] * geometry.dilations[a] for a in range(rank)
    ]
    return generic(
        [(padded, x_map), (window, ks)],
        [(init, [dim(0), dim(1), *outs])],
        2 + 2 * rank,
        range(2 + rank, 2 + 2 * rank),
        lambda args: [combine(args[2], args[0])],
    )[0]


def _geometry(ctx: LoweringRuleContext, x: mlir_ir.Value, shape) -> WindowGeometry:
    """The window of a MaxPool/AveragePool/LpPool, checked against its result type, with the
    sizes of dynamic spatial axes computed at run time."""
    ceil_mode = bool(attribute(ctx, "ceil_mode", 0))
    geometry = window_geometry(ctx, shape[2:], ceil_mode=ceil_mode)
    _check_output(ctx, (shape[0], shape[1], *geometry.output))
    return at_run_time(ctx, x, geometry, ceil_mode=ceil_mode)


def _max_parts(scalar: ScalarType, element: mlir_ir.Type):
    """(lowest value, max combiner) for a float, signed or unsigned element type."""
    if scalar in FLOATS:
        return constant(element, float("-inf")), lambda a, b: arith.MaximumFOp(a, b).result
    width = element.width
    if scalar in UNSIGNED:
        return constant(element, 0), lambda a, b: arith.MaxUIOp(a, b).result
    return constant(element, -(1 << (width - 1))), lambda a, b: arith.MaxSIOp(a, b).result


def _map_elements(y: mlir_ir.Value, body) -> mlir_ir.Value:
    """An element-wise linalg.generic over one tensor (any dim may be dynamic)."""
    y_type = mlir_ir.RankedTensorType(y.type)
    loops = [dim(a) for a in range(len(y_type.shape))]
    init = empty_like(y)
    return generic([(y, loops)], [(init, loops)], len(loops), (), lambda a: [body(a[0])])[0]


@register_lowering("onnx.MaxPool")
def _lower_max_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, shape, scalar = _input(ctx, (*FLOATS, *SIGNED, *UNSIGNED))
    geometry = _geometry(ctx, x, shape)
    element = lower_scalar_type(scalar)
    lowest, combine = _max_parts(scalar, element)
    if len(ctx.niro_results) > 1:
        if scalar not in FLOATS:
            raise ctx.error("supports the Indices output on float inputs only")
        if None in shape[2:]:
            raise ctx.error(
                f"supports the Indices output with static spatial dims only, got input X {shape}"
            )
        return _max_pool_with_indices(ctx, x, shape, geometry, lowest)
    return [_window_reduce(ctx, x, shape, geometry, lowest, lowest, combine)]


def _max_pool_with_indices(ctx, x, shape, geometry: WindowGeometry, lowest) -> list[mlir_ir.Value]:
    """MaxPool's values and Indices: the first maximum in window order (row-major over the
    kernel), as a flat index into X (storage_order 0: row-major, 1: column-major spatial dims).

    One `linalg.generic` with two outputs carries (value, row-major index); a position wins
    when it lies inside X (not padding) and is larger, or equal with a smaller index, so the
    result does not depend on the order linalg visits the window."""
    storage_order = int(attribute(ctx, "storage_order", 0))
    if storage_order not in (0, 1):
        raise ctx.error(f"has an invalid storage_order {storage_order}")
    element = mlir_ir.RankedTensorType(x.type).element_type
    i64 = mlir_ir.IntegerType.get_signless(64)
    padded = pad_for_window(ctx, x, geometry, lowest)
    rank = len(geometry.kernel)
    spatial = shape[2:]
    pads_begin, _ = geometry.static_pads()
    out_shape = [tensor_size(x, 0), shape[1], *geometry.output]
    values_init = filled(out_shape, element, lowest)
    sentinel = constant(i64, 2**63 - 1)
    indices_init = filled(out_shape, i64, sentinel)
    window = tensor.EmptyOp(list(geometry.kernel), element).result
    outs = [dim(2 + a) for a in range(rank)]
    ks = [dim(2 + rank + a) for a in range(rank)]
    x_map = [dim(0), dim(1)] + [
        outs[a] * geometry.strides[a] + ks[a] * geometry.dilations[a] for a in range(rank)
    ]
    loops = 2 + 2 * rank
    out_map = [dim(0), dim(1), *outs]

    def body(arguments: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        value, _, best, best_index = arguments
        index = [linalg.IndexOp(a).result for a in range(loops)]
        flat = arith.AddIOp(
            arith.MulIOp(as_i64(index[0]), constant(i64, shape[1])).result, as_i64(index[1])
        ).result
        inside = None
        for a in range(rank):
            position = arith.AddIOp(
                arith.MulIOp(as_i64(index[2 + a]), constant(i64, geometry.strides[a])).result,
                arith.MulIOp(
                    as_i64(index[2 + rank + a]), constant(i64, geometry.dilations[a])
                ).result,
            ).result
            position = arith.SubIOp(position, constant(i64, pads_begin[a])).result
            valid = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.sge, position, constant(i64, 0)).result,
                arith.CmpIOp(arith.CmpIPredicate.slt, position, constant(i64, spatial[a])).result,
            ).result
            inside = valid if inside is None else arith.AndIOp(inside, valid).result
            flat = arith.AddIOp(
                arith.MulIOp(flat, constant(i64, spatial[a])).result, position
            ).result
        larger = arith.CmpFOp(arith.CmpFPredicate.OGT, value, best).result
        tie = arith.AndIOp(
            arith.CmpFOp(arith.CmpFPredicate.OEQ, value, best).result,
            arith.CmpIOp(arith.CmpIPredicate.slt, flat, best_index).result,
        ).result
        wins = arith.AndIOp(inside, arith.OrIOp(larger, tie).result).result
        return [
            arith.SelectOp(wins, value, best).result,
            arith.SelectOp(wins, flat, best_index).result,
        ]

    values, indices = generic(
        [(padded, x_map), (window, ks)],
        [(values_init, out_map), (indices_init, out_map)],
        loops,
        range(2 + rank, loops),
        body,
    )
    if storage_order == 1:
        indices = _column_major(indices, shape)
    return [values, indices]


def _column_major(indices: mlir_ir.Value, shape: Sequence[int]) -> mlir_ir.Value:
    """Row-major flat indices into X rewritten with the spatial dims in column-major order."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    spatial = list(shape[2:])
    plane = int(np.prod(spatial))

    def body(value):
        c = lambda v: constant(i64, v)  # noqa: E731
        channel = arith.DivSIOp(value, c(plane)).result
        rest = arith.RemSIOp(value, c(plane)).result
        coordinates = []
        for size in reversed(spatial):
            coordinates.append(arith.RemSIOp(rest, c(size)).result)
            rest = arith.DivSIOp(rest, c(size)).result
        coordinates.reverse()
        result, stride = arith.MulIOp(channel, c(plane)).result, 1
        for coordinate, size in zip(coordinates, spatial, strict=True):
            result = arith.AddIOp(result, arith.MulIOp(coordinate, c(stride)).result).result
            stride *= size
        return result

    return _map_elements(indices, body)


def _divisor(shape: Sequence[int], geometry: WindowGeometry, include_pad: bool) -> np.ndarray:
    """How many window positions of each output count towards the average."""
    counts = []
    pads_begin, pads_end = geometry.static_pads()
    output = geometry.static_output()
    for axis, size in enumerate(shape):
        begin, end = pads_begin[axis], pads_end[axis]
        low, high = (-begin, size + end) if include_pad else (0, size)
        starts = np.arange(output[axis]) * geometry.strides[axis] - begin
        taps = (
            starts[:, None] + np.arange(geometry.kernel[axis])[None, :] * geometry.dilations[axis]
        )
        counts.append(((taps >= low) & (taps < high)).sum(axis=1))
    divisor = counts[0]
    for count in counts[1:]:
        divisor = np.multiply.outer(divisor, count)
    return divisor


@register_lowering("onnx.AveragePool")
def _lower_average_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, shape, scalar = _input(ctx, FLOATS)
    geometry = _geometry(ctx, x, shape)
    element = lower_scalar_type(scalar)
    zero = constant(element, 0)
    add = lambda a, b: arith.AddFOp(a, b).result  # noqa: E731
    sums = _window_reduce(ctx, x, shape, geometry, zero, zero, add)
    include_pad = bool(attribute(ctx, "count_include_pad", 0))
    if None in shape[2:]:
        return [_divide_at_run_time(ctx, x, sums, geometry, include_pad, element)]
    divisor = _divisor(shape[2:], geometry, include_pad)
    if (divisor == 0).any():
        raise ctx.error("has a window that lies entirely in the padding (its average is undefined)")
    return [_divide(sums, divisor, scalar, element)]


def _divide(sums: mlir_ir.Value, divisor: np.ndarray, scalar: ScalarType, element: mlir_ir.Type) -> mlir_ir.Value:
    """sums (N, C, O...) / divisor (O...), a scalar divide when every window counts the same."""
    if (divisor == divisor.flat[0]).all():
        count = constant(element, float(divisor.flat[0]))
        return _map_elements(sums, lambda value: arith.DivFOp(value, count).result)
    table = dense_constant(divisor.astype(np.float64), scalar)
    y_type = mlir_ir.RankedTensorType(sums.type)
    rank = len(y_type.shape)
    loops = [dim(a) for a in range(rank)]
    init = empty_like(sums, element)
    return generic(
        [(sums, loops), (table, loops[2:])],
        [(init, loops)],
        rank,
        (),
        lambda args: [arith.DivFOp(args[0], args[1]).result],
    )[0]


def _divide_at_run_time(
    ctx, x, sums, geometry: WindowGeometry, include_pad: bool, element: mlir_ir.Type
) -> mlir_ir.Value:
    """sums / the count of window positions that count, for dynamic spatial dims.

    Without ceil_mode every window lies inside the explicitly padded input, so with
    count_include_pad=1 (or with no padding at all) the count is the kernel size. Otherwise
    each output position's count is computed in closed form from its index, in the division's
    own loop: per spatial axis, the taps k in [0, K) with lo <= o*s - begin + k*d < hi, where
    [lo, hi) is the input (count_include_pad=0) or the explicitly padded input (1); the count
    is the product over the axes. NOTE: a window entirely in the padding divides by 0 here
    (the static path refuses it; its average is undefined).

    NOTE: iree-compile 3.13 miscompiles the earlier form of this divisor, window sums of a
    `linalg.fill` of ones (cut or padded as the input): with count_include_pad=0 and no
    padding every count came out 1, so the result was the window's sum (a 2x2 window gave 24
    for 6). test_conv_pool_dynamic_spatial.py's average pool cases fail with it."""
    ceil_mode = bool(attribute(ctx, "ceil_mode", 0))
    unpadded = all(
        isinstance(pad_size, int) and pad_size == 0
        for pad_size in (*geometry.pads_begin, *geometry.pads_end)
    )
    if not ceil_mode and (include_pad or unpadded):
        count = constant(element, float(np.prod(geometry.kernel)))
        return _map_elements(sums, lambda value: arith.DivFOp(value, count).result)
    rank = len(geometry.kernel)
    sizes = tensor_sizes(x)[2:]

    def divide(args):
        count = None
        for axis in range(rank):
            begin, end = index_value(geometry.pads_begin[axis]), index_value(geometry.pads_end[axis])
            low = arith.SubIOp(index_value(0), begin).result if include_pad else index_value(0)
            high = arith.AddIOp(index_value(sizes[axis]), end).result if include_pad else sizes[axis]
            stride = index_value(geometry.strides[axis])
            start = arith.SubIOp(
                arith.MulIOp(linalg.IndexOp(2 + axis).result, stride).result, begin
            ).result
            dilation = index_value(geometry.dilations[axis])
            first = arith.CeilDivSIOp(arith.SubIOp(low, start).result, dilation).result
            first = arith.MaxSIOp(first, index_value(0)).result
            stop = arith.CeilDivSIOp(arith.SubIOp(index_value(high), start).result, dilation).result
            stop = arith.MinSIOp(stop, index_value(geometry.kernel[axis])).result
            taps = arith.MaxSIOp(arith.SubIOp(stop, first).result, index_value(0)).result
            count = taps if count is None else arith.MulIOp(count, taps).result
        divisor = arith.SIToFPOp(element, as_i64(count)).result
        return arith.DivFOp(args[0], divisor).result

    loops = [dim(a) for a in range(2 + rank)]
    return generic(
        [(sums, loops)], [(empty_like(sums), loops)], 2 + rank, (), lambda args: [divide(args)]
    )[0]


def _lp_parts(ctx: LoweringRuleContext, element: mlir_ir.Type):
    """(|x|^p accumulation, root) for LpPool's integer p."""
    p = int(attribute(ctx, "p", 2))
    if p < 1:
        raise ctx.error(f"needs p >= 1, got {p}")

    def accumulate(acc, value):
        magnitude = math.AbsFOp(value).result
        if p == 1:
            term = magnitude
        elif p == 2:
            term = arith.MulFOp(value, value).result
        else:
            term = math.PowFOp(magnitude, constant(element, float(p))).result
        return arith.AddFOp(acc, term).result

    def root(total):
        if p == 1:
            return total
        if p == 2:
            return math.SqrtOp(total).result
        return math.PowFOp(total, constant(element, 1.0 / p)).result

    return accumulate, root


@register_lowering("onnx.LpPool")
def _lower_lp_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, shape, scalar = _input(ctx, FLOATS)
    geometry = _geometry(ctx, x, shape)
    element = lower_scalar_type(scalar)
    zero = constant(element, 0)
    accumulate, root = _lp_parts(ctx, element)
    sums = _window_reduce(ctx, x, shape, geometry, zero, zero, accumulate)
    return [_map_elements(sums, root)]


# -- Global pools -------------------------------------------------------------------------------


def _global_reduce(ctx, x, shape, init_value, combine) -> mlir_ir.Value:
    """(N, C, S...) -> (N, C, 1, ...) combining every spatial element."""
    element = mlir_ir.RankedTensorType(x.type).element_type
    rank = len(shape)
    sizes = [tensor_size(x, 0), shape[1]]
    init = filled(sizes, element, init_value)
    loops = [dim(a) for a in range(rank)]
    reduced = generic(
        [(x, loops)],
        [(init, loops[:2])],
        rank,
        range(2, rank),
        lambda args: [combine(args[1], args[0])],
    )[0]
    return expand_dim(reduced, 1, (shape[1],) + (1,) * (rank - 2))


@register_lowering("onnx.GlobalMaxPool")
def _lower_global_max_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, shape, scalar = _input(ctx, (*FLOATS, *SIGNED, *UNSIGNED))
    lowest, combine = _max_parts(scalar, lower_scalar_type(scalar))
    return [_global_reduce(ctx, x, shape, lowest, combine)]


@register_lowering("onnx.GlobalAveragePool")
def _lower_global_average_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, shape, scalar = _input(ctx, FLOATS)
    element = lower_scalar_type(scalar)
    zero = constant(element, 0)
    sums = _global_reduce(ctx, x, shape, zero, lambda a, b: arith.AddFOp(a, b).result)
    if None in shape[2:]:
        count = _element_count(ctx, x, element)
    else:
        count = constant(element, float(np.prod(shape[2:])))
    return [_map_elements(sums, lambda value: arith.DivFOp(value, count).result)]


@register_lowering("onnx.GlobalLpPool")
def _lower_global_lp_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, shape, scalar = _input(ctx, FLOATS)
    element = lower_scalar_type(scalar)
    accumulate, root = _lp_parts(ctx, element)
    sums = _global_reduce(ctx, x, shape, constant(element, 0), accumulate)
    return [_map_elements(sums, root)]


def _element_count(ctx: LoweringRuleContext, x: mlir_ir.Value, element: mlir_ir.Type) -> mlir_ir.Value:
    """The product of the spatial dims of `x` (N, C, S...) at run time, as an `element` float."""
    count = None
    for size in tensor_sizes(x)[2:]:
        size = index_value(size)
        count = size if count is None else arith.MulIOp(count, size).result
    return arith.SIToFPOp(element, as_i64(count)).result
