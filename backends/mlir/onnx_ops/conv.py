"""Conv, ConvTranspose and (with quantization.py) ConvInteger / QLinearConv: N-d NCHW
convolution.

Every convolution here is the same computation after its inputs are prepared: the input padded
(`tensor.pad`, cut to exactly what the windows read) and a sum of input[n, g, c, o*s + k*d] *
filter[g, m, c, k] over (c, k), built once by `grouped_conv`. It is a matrix product per image
and group (im2col: the windows gathered into columns by one copy, then a contraction
`linalg.generic` that IREE compiles as a matmul; of many outputs, in tiles, `linalg.mmt4d`),
because IREE 3.13 runs its direct convolutions several times slower; a depthwise convolution
(one input channel per output) is a sum over the kernel taps of shifted input slices times a
filter column (one element-wise `linalg.generic`; a strided one's slices cut from its input's
stride phases), except past `TAPS_LIMIT` taps and where IREE would copy each slice
(`window_taps`): there one direct `linalg.generic`. f16/bf16 accumulate
in f32. ConvTranspose is the classic rewrite: zeros inserted between input elements (stride),
padded by the dilated kernel extent minus the pads (negative amounts crop), then a stride-1
convolution with the filter flipped and its channel axes swapped; one whose strides equal its
kernel (no pads) is a product over the input channels whose result a reshape interleaves.

The batch dim N may be dynamic (a model exported with a dynamic batch): N only passes through
(`tensor.dim` of the input sizes the `tensor.empty`s; `tensor.pad`, the slices and the reshapes
keep it dynamic). The spatial dims may be dynamic too (segmentation models exported with a
dynamic image size): their output sizes, and SAME pads, are computed at run time from
`tensor.dim` (`windows.at_run_time`). The channels shape the filter: a dynamic channel dim of
X (lost by shape inference, e.g. after a Pad with run-time pads) is taken from W and checked at
run time (`windows.channels_from_filter`).
ConvTranspose with a dynamic spatial dim needs explicit pads (no output_shape or SAME).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from niro.ir import ScalarType

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    DYNAMIC,
    accumulator_type,
    collapse_dims,
    constant,
    convert,
    dim,
    empty,
    empty_like,
    expand_dim,
    expand_shape,
    extract_slice,
    filled,
    generic,
    i64_elements,
    index_constant,
    named_op,
    pad,
    reassociation,
    rows_by_tiled_columns,
    tensor_size,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from ..weight_layout import conv_tiles_pay
from .common import attribute, element_type, input_value, required_input, static_shape
from .windows import (
    at_run_time,
    channels_from_filter,
    pad_for_window,
    phase_taps,
    spatial_shape,
    window_geometry,
    window_taps,
)

__all__ = ["ConvSpec", "grouped_conv", "add_channel_bias", "float_mul_add", "integer_mul_add"]

FLOATS = (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64)

MulAdd = Callable[[mlir_ir.Value, mlir_ir.Value, mlir_ir.Value], mlir_ir.Value]


def float_mul_add(x: mlir_ir.Value, w: mlir_ir.Value, acc: mlir_ir.Value) -> mlir_ir.Value:
    """acc + x * w; f16/bf16 elements are widened to the (f32) accumulator first."""
    if x.type != acc.type:
        x = arith.ExtFOp(acc.type, x).result
    if w.type != acc.type:
        w = arith.ExtFOp(acc.type, w).result
    return arith.AddFOp(acc, arith.MulFOp(x, w).result).result


def integer_mul_add(x: mlir_ir.Value, w: mlir_ir.Value, acc: mlir_ir.Value) -> mlir_ir.Value:
    """acc + x * w on i32 operands (zero points already subtracted)."""
    return arith.AddIOp(acc, arith.MulIOp(x, w).result).result


def _finish(ctx: LoweringRuleContext, y: mlir_ir.Value, scalar: ScalarType) -> mlir_ir.Value:
    """Bias added (in the accumulator type), then the result narrowed to the element type."""
    bias = input_value(ctx, 2)
    accumulator = mlir_ir.RankedTensorType(y.type).element_type
    if bias is not None:

        def add(a, b):
            if b.type != a.type:
                b = arith.ExtFOp(a.type, b).result
            return arith.AddFOp(a, b).result

        y = add_channel_bias(y, bias[0], add)
    element = lower_scalar_type(scalar)
    if accumulator == element:
        return y
    y_type = mlir_ir.RankedTensorType(y.type)
    loops = [dim(axis) for axis in range(len(y_type.shape))]
    init = empty_like(y, element)
    return generic(
        [(y, loops)],
        [(init, loops)],
        len(loops),
        (),
        lambda args: [convert(args[0], element)],
    )[0]


IM2COL_LIMIT = 1 << 26
"""The most elements (per image, static dims) the gathered windows of one convolution may take
before it is computed in place instead (256 MiB of f32): the matrix-product form copies every
input element once per kernel tap it meets."""

GROUPED_ROWS_POSITIONS = 1024
"""The most output positions (per image, static) a grouped convolution may have to be computed
with its output rows as a batch dim (`_grouped_product`)."""

SPATIAL_PRODUCT_WEIGHTS = 4096
"""The most filter elements a 1x1 convolution of stride 1 and dynamic spatial dims may have to
be computed over its output's spatial dims as they are (`_im2col_conv`: the product's result
(N, M, O...) with no reshape of its positions).

NOTE: IREE 3.13 sinks a `tensor.expand_shape` of dynamic dims below the element-wise ops that
read it (SinkReshapes), collapsing their dims and every other operand's. A 'same' depthwise
convolution's centre tap (`window_taps`) is its unpadded input itself: when that was the
product's (N, M, P) expanded to (N, M, H, W), IREE collapsed the tap sum and copied each of its
25 other taps in a dispatch of its own (MobileNet's 5x5 depthwise convolution at a dynamic
112x112: 2.4 ms a call in place, 25 copies of 110 us and 1.9 ms as taps; 0.25 ms as taps of
the unreshaped product). `window_taps` takes dynamic inputs only when no expand_shape is
upstream. IREE merges the spatial dims of a small such product itself (16 -> 32 channels at
112x112, 64 -> 64 at 56x56: the same time as the reshaped one), but ran larger ones in a
ResNet-50 of dynamic image size up to 3.5x slower (1024 -> 256 channels at 14x14: 13.6 against
3.8 ms a call), hence the limit."""

NAMED_FEATURES = 32
"""The most output channels a 2-D convolution (stride 1, a kernel of more than one tap) may have
to stay IREE's named NCHW convolution (`_named_conv`): with few outputs per window the im2col
copy costs as much as the product it feeds."""


@dataclass(frozen=True)
class ConvSpec:
    """What every form of `grouped_conv` needs besides its operands: the group count, the
    window's strides and dilations, the spatial output sizes (an index value on a dynamic
    axis), the accumulator element type and the body's multiply-add."""

    group: int
    strides: Sequence[int]
    dilations: Sequence[int]
    output: Sequence[int | mlir_ir.Value]
    accumulator: mlir_ir.Type
    mul_add: MulAdd = float_mul_add


def grouped_conv(ctx: LoweringRuleContext, x: mlir_ir.Value, w: mlir_ir.Value, spec: ConvSpec) -> mlir_ir.Value:
    """Convolution of an already padded `x` (N, C, S...; C static) with `w` (M, C/G, K...):
    (N, M, output...) of element `spec.accumulator`, `spec.mul_add(w, x, acc)` the body (the
    factors commute; the filter's comes first).

    As a matrix product per group (`_im2col_conv`) unless each output reads one input channel
    (depthwise: a product with a reduction of only the kernel taps gains nothing; then a sum
    over its `window_taps` or `phase_taps` when there are, `_tap_conv`) or the gathered
    windows would be too large (`IM2COL_LIMIT`); else in place (`_direct_conv`). An
    f32 2-D convolution of one group, stride 1, a kernel of more than one tap and at most
    `NAMED_FEATURES` outputs is IREE's named `linalg.conv_2d_nchw_fchw` (`_named_conv`)."""
    x_shape = mlir_ir.RankedTensorType(x.type).shape
    w_shape = mlir_ir.RankedTensorType(w.type).shape
    channels = x_shape[1]
    features, group_channels = w_shape[0], w_shape[1]
    if channels != spec.group * group_channels or features % spec.group:
        raise ctx.error(
            f"has {channels} input channels and a filter of shape {tuple(w_shape)}, "
            f"which do not agree with group={spec.group}"
        )
    if _named_fits(x, w, spec):
        return _named_conv(x, w, spec)
    window = channels * math.prod(w_shape[2:])
    columns = math.prod(size for size in spec.output if isinstance(size, int))
    if group_channels > 1 and window * columns <= IM2COL_LIMIT:
        return _im2col_conv(x, w, spec)
    if group_channels == 1:  # the taps are built only for a depthwise convolution that uses them
        taps = window_taps(x, w_shape[2:], spec.strides, spec.dilations, spec.output)
        if taps is None:
            taps = phase_taps(x, w_shape[2:], spec.strides, spec.dilations, spec.output)
        if taps is not None:
            return _tap_conv(taps, w, spec)
    return _direct_conv(x, w, spec)


def _named_fits(x: mlir_ir.Value, w: mlir_ir.Value, spec: ConvSpec) -> bool:
    """Whether `linalg.conv_2d_nchw_fchw` computes `grouped_conv` and is the faster form."""
    w_shape = mlir_ir.RankedTensorType(w.type).shape
    return (
        len(w_shape) == 4
        and spec.group == 1
        and w_shape[0] <= NAMED_FEATURES
        and math.prod(w_shape[2:]) > 1
        and all(s == 1 for s in spec.strides)
        and _plain_f32(x, w, spec)
    )


def _plain_f32(x: mlir_ir.Value, w: mlir_ir.Value, spec: ConvSpec) -> bool:
    """An f32 convolution summed in f32 by the plain multiply-add (not a quantized one): what
    IREE's named convolution and the product in tiles compute."""
    f32 = mlir_ir.F32Type.get()
    return (
        spec.mul_add is float_mul_add
        and spec.accumulator == f32
        and mlir_ir.RankedTensorType(x.type).element_type == f32
        and mlir_ir.RankedTensorType(w.type).element_type == f32
    )


def _named_conv(x: mlir_ir.Value, w: mlir_ir.Value, spec: ConvSpec) -> mlir_ir.Value:
    """`grouped_conv` as IREE's named NCHW convolution.

    NOTE: IREE 3.13 runs a stride-1 `linalg.conv_2d_nchw_fchw` of a 3x3 or 5x5 kernel with at
    most 32 output channels 1.1-4x faster than `_im2col_conv` (CPU time per call: 16 -> 8
    channels at 32x32 0.43 against 0.48 ms, 512 -> 32 at 7x7 1.06 against 2.28 ms), but 1.2x
    slower at 64 outputs and 9x slower at 256 (ResNet-50's 3x3 at 14x14: 108 against 12 ms); a
    1x1 kernel is 2x faster as the product (a plain reshape, no copy); so is a stride-2 one."""
    features = mlir_ir.RankedTensorType(w.type).shape[0]
    init = filled(
        [tensor_size(x, 0), features, *spec.output], spec.accumulator, constant(spec.accumulator, 0)
    )
    window = {
        "strides": i64_elements(spec.strides),
        "dilations": i64_elements(spec.dilations),
    }
    return named_op("linalg.conv_2d_nchw_fchw", [x, w], init, window)


def _im2col_conv(x: mlir_ir.Value, w: mlir_ir.Value, spec: ConvSpec) -> mlir_ir.Value:
    """`grouped_conv` as a matrix product per image and group: the windows of `x` gathered
    into columns (N, G, C/G * prod K, O...) by one copying `linalg.generic` (im2col; a plain
    reshape for a 1x1 kernel of stride 1), the filter reshaped to (G, M/G, C/G * prod K), and
    out[n, g, m, p] = sum over k of w[g, m, k] * columns[n, g, k, p], p the output positions
    (`_grouped_product` for a grouped convolution of few of them; in tiles where `_tiles_pay`,
    the windows then gathered position by position, or a 1x1 kernel's input packed
    transposed).

    NOTE: IREE 3.13 compiles its named NCHW convolutions (and the NHWC ones) to a direct
    convolution that runs 5-10x slower on CPU than this product (ResNet-50's 3x3 convolutions
    at 14x14 and 7x7 took 90% of its run); `--iree-global-opt-use-im2col-for-convs` makes the
    same rewrite inside IREE, but is not on by default. The product is a matmul to IREE only
    with the filter as the first operand and the first factor of the body: with either
    swapped it became a `matmul_like` dispatch that ran ~3x slower."""
    w_shape = mlir_ir.RankedTensorType(w.type).shape
    features, group_channels, kernel = w_shape[0], w_shape[1], list(w_shape[2:])
    rank = len(kernel)
    grouped = expand_dim(x, 1, (spec.group, group_channels))  # (N, G, C/G, S...)
    pointwise = all(k == 1 for k in kernel) and all(s == 1 for s in spec.strides)
    positions = [size for size in spec.output if isinstance(size, int)]
    in_tiles = _tiles_pay(x, w, spec)
    if pointwise:
        windows = grouped  # the padded input is exactly the output: (N, G, C/G, O...)
    else:
        # loops: n, g, c, k_0..k_{r-1}, o_0..o_{r-1}; the columns (N, G, C/G, K..., O...), or
        # for a product in tiles each position's window as a row, (N, G, O..., C/G, K...)
        order = (
            [0, 1, *range(3 + rank, 3 + 2 * rank), 2, *range(3, 3 + rank)]
            if in_tiles
            else list(range(3 + 2 * rank))
        )
        sizes = [tensor_size(x, 0), spec.group, group_channels, *kernel, *spec.output]
        ks = [dim(3 + axis) for axis in range(rank)]
        outs = [dim(3 + rank + axis) for axis in range(rank)]
        x_map = [dim(0), dim(1), dim(2)] + [
            outs[a] * spec.strides[a] + ks[a] * spec.dilations[a] for a in range(rank)
        ]
        element = mlir_ir.RankedTensorType(x.type).element_type
        windows = generic(
            [(grouped, x_map)],
            [(empty([sizes[loop] for loop in order], element), order)],
            3 + 2 * rank,
            (),
            lambda args: [args[0]],
        )[0]
    grouped_rows = spec.group > 1 and 1 < rank == len(positions)
    grouped_rows = grouped_rows and math.prod(positions) <= GROUPED_ROWS_POSITIONS
    spatial = rank > 1 and len(positions) < rank and pointwise
    spatial = spatial and features * group_channels <= SPATIAL_PRODUCT_WEIGHTS
    if grouped_rows or spatial:
        columns = windows if pointwise else collapse_dims(windows, 2, 1 + rank)
        if grouped_rows:
            return _grouped_product(_filter_rows(w, spec), columns, spec)
        return collapse_dims(_product(_filter_rows(w, spec), columns, spec), 1, 2)
    if in_tiles:  # [M, K] filter rows by [P, K] window rows, then (N, G, M, P)
        if pointwise:  # the input is [K, P]: its pack transposes it
            columns = collapse_dims(collapse_dims(windows, 0, 3), 1, rank)
        else:
            columns = collapse_dims(collapse_dims(windows, 0, 2 + rank), 1, 1 + rank)
        filter_rows = collapse_dims(w, 1, 1 + rank)
        product = rows_by_tiled_columns(filter_rows, columns, depth_major=pointwise)
        product = expand_dim(expand_dim(product, 0, (1, features)), 0, (1, 1))
    else:
        if pointwise:
            flat = collapse_dims(windows, 3, rank)
        else:
            flat = collapse_dims(collapse_dims(windows, 3 + rank, rank), 2, 1 + rank)
        product = _product(_filter_rows(w, spec), flat, spec)
    return collapse_dims(expand_dim(product, 3, list(spec.output)), 1, 2)


def _tiles_pay(x: mlir_ir.Value, w: mlir_ir.Value, spec: ConvSpec) -> bool:
    """Whether `_im2col_conv`'s product is computed in tiles (`rows_by_tiled_columns`): an f32
    convolution of one image and one group, static positions, at least
    `weight_layout.TILED_FEATURES` outputs, the positions padded to whole tiles by at most a
    tenth (`weight_layout.conv_tiles_pay`, which writes the filters of such convolutions in
    tiles).

    NOTE: IREE 3.13 runs the product in tiles about twice as fast as the matmul (ResNet-50,
    iree-benchmark-module: 256 outputs by 2304 x 196 windows 2.24 -> 1.21 ms; 1024 by 256 x
    196, a 1x1 convolution, 1.11 -> 0.51 ms), but the windows' rows are packed into tiles by a
    copy (a 1x1 convolution of stride 1, whose input is its columns, by a transposing pack of
    that input). The convolutions of a net go into tiles together or not at all: IREE fuses
    the pack of a 1x1 convolution's input into the matmul that makes that input, which then
    runs ~3.5x slower (ResNet-50's 64-output 3x3 at 56x56: 1.6 -> 5.5 ms), and tiles for the
    1x1 convolutions alone made ResNet-50 slower (76-81 -> 82-86 ms); every product of at
    least 64 outputs in tiles: ResNet-50 69-75 -> 66-68 ms, SqueezeNet 10.6-11.4 -> 9.0-9.9,
    DenseNet-121 64 -> 58, Inception v1 32-34 -> 31-31.5, ShuffleNet and MobileNet unchanged
    (interleaved runs). Fewer outputs (16, SqueezeNet's squeezes) change nothing; tiles mostly
    padding do not pay (512 by 4608 x 49, 64 positions in tiles: 1.86 -> 1.85 ms, and with the
    7x7 stage in tiles the net is no faster). iree-compile packs the constant filters at
    compile time unless niroc writes them in tiles (`weight_layout.Layout.FILTER_TILES`,
    filters of whole tiles read by such convolutions only): ResNet-50's iree-compile took
    10.1 s with its filters packed by IREE, 5.8 s with them written in tiles."""
    return _plain_f32(x, w, spec) and conv_tiles_pay(
        mlir_ir.RankedTensorType(x.type).shape[0],
        spec.group,
        mlir_ir.RankedTensorType(w.type).shape[0],
        [size if isinstance(size, int) else None for size in spec.output],
    )


def _filter_rows(w: mlir_ir.Value, spec: ConvSpec) -> mlir_ir.Value:
    """The filter (M, C/G, K...) as the product's rows: (G, M/G, C/G * prod K)."""
    w_shape = mlir_ir.RankedTensorType(w.type).shape
    rows = collapse_dims(w, 1, len(w_shape) - 1)
    return expand_dim(rows, 0, (spec.group, w_shape[0] // spec.group))


def _product(
    rows: mlir_ir.Value, columns: mlir_ir.Value, spec: ConvSpec, *, rows_batch: bool = False
) -> mlir_ir.Value:
    """`_im2col_conv`'s product (N, G, M/G, P...): out[n, g, m, p...] = sum over k of
    w[g, m, k] * columns[n, g, k, p...], the filter the first operand and factor (see
    `_im2col_conv`). Loops (n, g, m, p..., k); with `rows_batch`, (n, g, p_0, m, p_1..., k),
    the first position dim a batch dim (`_grouped_product`)."""
    count = mlir_ir.RankedTensorType(columns.type).rank - 3
    reduced = 3 + count
    m = 3 if rows_batch else 2
    ps = [2, *range(4, 3 + count)] if rows_batch else list(range(3, 3 + count))
    features = mlir_ir.RankedTensorType(rows.type).shape[1]
    sizes = [tensor_size(columns, 0), spec.group, features]
    sizes += [tensor_size(columns, 3 + axis) for axis in range(count)]
    init = filled(sizes, spec.accumulator, constant(spec.accumulator, 0))
    return generic(
        [(rows, [1, m, reduced]), (columns, [0, 1, reduced, *ps])],
        [(init, [0, 1, m, *ps])],
        reduced + 1,
        (reduced,),
        lambda args: [spec.mul_add(args[0], args[1], args[2])],
    )[0]


def _grouped_product(rows: mlir_ir.Value, columns: mlir_ir.Value, spec: ConvSpec) -> mlir_ir.Value:
    """`_im2col_conv`'s product of a grouped convolution with the output rows as a batch dim:
    out[n, g, m, r, q] = sum over k of w[g, m, k] * columns[n, g, k, r, q], loops (n, g, r, m,
    q, k), q the positions of a row.

    NOTE: IREE 3.13 picks the product's tiles from the divisors of its dims and ran some
    grouped 1x1 convolutions far below their siblings' speed as one (M x P) product per group:
    ShuffleNet's 4 groups of 68 channels at 14x14 took 310 us a call, 4x slower than its 136
    channels at 7x7 with the same work (its 15 such convolutions were 60% of its run); with
    the rows a batch dim 60 us. Measured the same way (dispatch time, us): 4 groups of 34 at
    28x28 74 -> 48, 32 groups of 8 channels (K 72) at 28x28 340 -> 230, 32 of 16 at 14x14 and
    32 of 32 at 7x7 unchanged; at 56x56 the rows form was 1.2-1.5x slower (4 of 28, 32 of 4),
    and for one group it ranged from 5x faster to 5x slower (68 channels at 14x14 against
    SqueezeNet's 13x13 and 27x27 ones), hence grouped convolutions of at most
    `GROUPED_ROWS_POSITIONS` positions only."""
    rank = mlir_ir.RankedTensorType(columns.type).rank - 3
    if rank > 2:  # one dim for the positions of a row
        columns = collapse_dims(columns, 4, rank - 1)
    product = _product(rows, columns, spec, rows_batch=True)
    if rank > 2:
        product = expand_dim(product, 4, list(spec.output[1:]))
    return collapse_dims(product, 1, 2)


def _tap_conv(taps: list[mlir_ir.Value], w: mlir_ir.Value, spec: ConvSpec) -> mlir_ir.Value:
    """`grouped_conv` of one input channel per group (depthwise) as one element-wise
    `linalg.generic` over the output (N, G, M/G, O...): out[n, g, m, o] = sum over the taps k
    of w[g, m, k] * taps[k][n, g, o], each tap's weight a column of the filter.

    NOTE: IREE 3.13 runs a depthwise convolution as one generic reducing over the taps
    (`_direct_conv`), or as its named `linalg.depthwise_conv_2d_nchw_chw` (or the NHWC one
    between transposes), 7-28x slower on CPU than this element-wise form (32 channels, 5x5 at
    112x112: 8 against 1.1 ms CPU per call; 3x3: 5 against 0.5 ms; MobileNet spent 90% of its
    run in two depthwise convolutions); `window_taps` says when it applies."""
    w_shape = mlir_ir.RankedTensorType(w.type).shape
    features, rank = w_shape[0], len(w_shape) - 2
    group_features = features // spec.group
    rows = collapse_dims(expand_dim(w, 0, (spec.group, group_features)), 2, 1 + rank)
    # loops: n, g, m, o_0..o_{r-1}
    outs = list(range(3, 3 + rank))
    operands: list[tuple[mlir_ir.Value, list]] = []
    for index, window in enumerate(taps):
        column = extract_slice(rows, [0, 0, index], [spec.group, group_features, 1])
        operands += [(window, [0, 1, *outs]), (column, [1, 2, None])]

    def body(args):
        total = constant(spec.accumulator, 0)
        for tap in range(0, len(operands), 2):
            total = spec.mul_add(args[tap + 1], args[tap], total)
        return [total]

    out_shape = [tensor_size(taps[0], 0), spec.group, group_features, *spec.output]
    result = generic(
        operands, [(empty(out_shape, spec.accumulator), [0, 1, 2, *outs])], 3 + rank, (), body
    )[0]
    return collapse_dims(result, 1, 2)


def _direct_conv(x: mlir_ir.Value, w: mlir_ir.Value, spec: ConvSpec) -> mlir_ir.Value:
    """`grouped_conv` in place: the channels split into (N, G, C/G, ...) and (G, M/G, C/G, ...)
    and one `linalg.generic` summing w[g, m, c, k] * x[n, g, c, o*s + k*d] over (c, k)."""
    w_shape = mlir_ir.RankedTensorType(w.type).shape
    features, group_channels, kernel = w_shape[0], w_shape[1], w_shape[2:]
    rank = len(kernel)
    group_features = features // spec.group
    xg = expand_dim(x, 1, (spec.group, group_channels))
    wg = expand_dim(w, 0, (spec.group, group_features))
    out_shape = [tensor_size(x, 0), spec.group, group_features, *spec.output]
    init = filled(out_shape, spec.accumulator, constant(spec.accumulator, 0))
    # loops: n, g, m, o_0..o_{r-1}, c, k_0..k_{r-1}
    n, g, m = dim(0), dim(1), dim(2)
    outs = [dim(3 + axis) for axis in range(rank)]
    c = dim(3 + rank)
    ks = [dim(4 + rank + axis) for axis in range(rank)]
    x_map = [n, g, c] + [outs[a] * spec.strides[a] + ks[a] * spec.dilations[a] for a in range(rank)]
    w_map = [g, m, c, *ks]
    o_map = [n, g, m, *outs]
    result = generic(
        [(xg, x_map), (wg, w_map)],
        [(init, o_map)],
        4 + 2 * rank,
        range(3 + rank, 4 + 2 * rank),
        lambda args: [spec.mul_add(args[1], args[0], args[2])],
    )[0]
    return collapse_dims(result, 1, 2)


def add_channel_bias(
    y: mlir_ir.Value, bias: mlir_ir.Value, add: Callable[[mlir_ir.Value, mlir_ir.Value], mlir_ir.Value]
) -> mlir_ir.Value:
    """y (N, M, S...) + bias (M) broadcast over the other axes."""
    y_type = mlir_ir.RankedTensorType(y.type)
    rank = len(y_type.shape)
    loops = [dim(axis) for axis in range(rank)]
    init = empty_like(y)
    return generic(
        [(y, loops), (bias, [dim(1)])],
        [(init, loops)],
        rank,
        (),
        lambda args: [add(args[0], args[1])],
    )[0]


def _check_output(ctx: LoweringRuleContext, expected: Sequence[int | None]) -> None:
    result = spatial_shape(ctx, ctx.niro_results[0], "the result")
    if tuple(result) != tuple(expected):
        raise ctx.error(
            f"computed output shape {tuple(expected)} but the result type says {result}"
        )


def _float_operands(ctx: LoweringRuleContext, channels_of: Callable[[tuple[int, ...]], int]):
    """X, its shape, W, its shape and the element type; a dynamic channel dim of X is fixed
    to `channels_of(W's shape)` (checked at run time, `channels_from_filter`)."""
    x_mlir, x_niro = required_input(ctx, 0, "X")
    w_mlir, w_niro = required_input(ctx, 1, "W")
    scalar = element_type(x_niro)
    if scalar not in FLOATS:
        raise ctx.error(f"supports float tensors only, got {scalar.spelling}")
    x_shape = ctx.ranked(x_niro, "input X").shape
    w_shape = static_shape(ctx, w_niro, "filter W")
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise ctx.error(f"needs X of rank >= 3 and W of the same rank, got {x_shape} and {w_shape}")
    x_mlir, x_shape = channels_from_filter(ctx, x_mlir, x_niro, channels_of(w_shape), "input X")
    return x_mlir, x_shape, w_mlir, w_shape, scalar


def _group(ctx: LoweringRuleContext) -> int:
    group = int(attribute(ctx, "group", 1))
    if group < 1:
        raise ctx.error(f"has group={group}, expected a positive count")
    return group


@register_lowering("onnx.Conv")
def _lower_conv(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    group = _group(ctx)
    x, x_shape, w, w_shape, scalar = _float_operands(ctx, lambda w_shape: w_shape[1] * group)
    geometry = window_geometry(ctx, x_shape[2:], w_shape[2:])
    element = lower_scalar_type(scalar)
    _check_output(ctx, (x_shape[0], w_shape[0], *geometry.output))
    geometry = at_run_time(ctx, x, geometry)
    padded = pad_for_window(ctx, x, geometry, constant(element, 0))
    spec = ConvSpec(
        group, geometry.strides, geometry.dilations, geometry.output, accumulator_type(scalar)
    )
    y = grouped_conv(ctx, padded, w, spec)
    return [_finish(ctx, y, scalar)]


# -- ConvTranspose ----------------------------------------------------------------------------------


def _transpose_pads(ctx, x_shape, kernel, strides, dilations, output_padding):
    """(pads_begin, pads_end, output sizes) of ConvTranspose, from pads, auto_pad or output_shape;
    an output size is None on a dynamic spatial axis (explicit pads only)."""
    x_spatial = x_shape[2:]
    rank = len(x_spatial)
    full = [
        s * (size - 1) + op + (k - 1) * d + 1 if size is not None else None
        for size, k, s, d, op in zip(
            x_spatial, kernel, strides, dilations, output_padding, strict=True
        )
    ]
    auto_pad = attribute(ctx, "auto_pad", "NOTSET")
    output_shape = attribute(ctx, "output_shape")
    if None in x_spatial and (output_shape is not None or auto_pad not in ("NOTSET", "VALID")):
        # NOTE: the pads would depend on the run-time size; PyTorch exports explicit pads.
        what = "attribute 'output_shape'" if output_shape is not None else f"auto_pad {auto_pad}"
        raise ctx.error(f"needs static spatial dims of input X with {what}, got {x_shape}")
    if output_shape is not None:
        output_shape = tuple(int(v) for v in output_shape)[-rank:]
        if len(output_shape) != rank:
            raise ctx.error(f"attribute 'output_shape' needs {rank} spatial sizes")
        total = _totals(full, output_shape)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = tuple(size * s for size, s in zip(x_spatial, strides, strict=True))
        total = _totals(full, output_shape)
    elif auto_pad in ("NOTSET", "VALID"):
        pads = attribute(ctx, "pads") if auto_pad == "NOTSET" else None
        pads = tuple(int(v) for v in pads) if pads is not None else (0,) * (2 * rank)
        if len(pads) != 2 * rank:
            raise ctx.error(f"attribute 'pads' has {len(pads)} values, expected {2 * rank}")
        begin, end = list(pads[:rank]), list(pads[rank:])
        output = [
            f - b - e if f is not None else None for f, b, e in zip(full, begin, end, strict=True)
        ]
        return begin, end, output
    else:
        raise ctx.error(f"has an unknown auto_pad '{auto_pad}'")
    # NOTE: a negative total (output_shape beyond the full output) pads the end with zeros.
    if auto_pad == "SAME_UPPER":
        begin = [t // 2 for t in total]
    else:
        begin = [t - t // 2 for t in total]
    end = [t - b for t, b in zip(total, begin, strict=True)]
    return begin, end, list(output_shape)


def _totals(full: Sequence[int | None], output_sizes: Sequence[int]) -> list[int]:
    """The padding each spatial axis loses: full output size - requested output size (static
    spatial dims only: `_transpose_pads` refuses output_shape and SAME otherwise)."""
    totals = []
    for size, wanted in zip(full, output_sizes, strict=True):
        assert size is not None, "a static spatial dim has a full output size"
        totals.append(size - wanted)
    return totals


@register_lowering("onnx.ConvTranspose")
def _lower_conv_transpose(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    group = _group(ctx)
    x, x_shape, w, w_shape, scalar = _float_operands(ctx, lambda w_shape: w_shape[0])
    rank = len(x_shape) - 2
    kernel = tuple(int(v) for v in attribute(ctx, "kernel_shape", w_shape[2:]))
    if kernel != tuple(w_shape[2:]):
        raise ctx.error(f"kernel_shape {kernel} disagrees with the filter shape {w_shape}")
    ints = lambda name, default: tuple(int(v) for v in attribute(ctx, name, default))  # noqa: E731
    strides = ints("strides", (1,) * rank)
    dilations = ints("dilations", (1,) * rank)
    output_padding = ints("output_padding", (0,) * rank)
    if not (len(strides) == len(dilations) == len(output_padding) == rank):
        raise ctx.error("strides, dilations and output_padding need one value per spatial axis")
    begin, end, output = _transpose_pads(ctx, x_shape, kernel, strides, dilations, output_padding)
    channels, group_features = w_shape[0], w_shape[1]
    if channels != x_shape[1] or channels % group:
        raise ctx.error(f"filter {w_shape} does not match input {x_shape} with group={group}")
    _check_output(ctx, (x_shape[0], group_features * group, *output))
    if strides == kernel and not any((*begin, *end, *output_padding)) and set(dilations) == {1}:
        y = _patch_conv_transpose(x, w, group, accumulator_type(scalar))
        return [_finish(ctx, y, scalar)]
    if None in output:
        output = _transpose_output_at_run_time(
            ctx, x, output, kernel, strides, dilations, output_padding, begin, end
        )
    element = lower_scalar_type(scalar)
    zero = constant(element, 0)
    # 1. zeros between the input elements: size * stride, the last stride - 1 zeros taken off
    #    the end padding below
    upsampled = _upsample(ctx, x, strides, zero)
    # 2. pad by the dilated kernel extent minus the pads; negative amounts crop
    low = [(k - 1) * d - b for k, d, b in zip(kernel, dilations, begin, strict=True)]
    high = [
        (k - 1) * d - e + op - (s - 1)
        for k, d, e, op, s in zip(kernel, dilations, end, output_padding, strides, strict=True)
    ]
    padded = pad(
        upsampled, [0, 0, *[max(0, v) for v in low]], [0, 0, *[max(0, v) for v in high]], zero
    )
    if any(v < 0 for v in (*low, *high)):
        shape = mlir_ir.RankedTensorType(padded.type).shape
        offsets = [0, 0, *[max(0, -v) for v in low]]
        if DYNAMIC in shape[2:]:
            padded = _crop_dynamic(ctx, padded, offsets, low, high)
        else:
            sizes = [shape[0], shape[1]] + [
                shape[2 + a] - max(0, -low[a]) - max(0, -high[a]) for a in range(rank)
            ]
            padded = extract_slice(padded, offsets, sizes)
    # 3. the filter flipped, (C, M/G, K) -> (M, C/G, K) per group
    group_channels = channels // group
    wg = expand_dim(w, 0, (group, group_channels))  # (G, C/G, M/G, K...)
    flipped_shape = [group, group_features, group_channels, *kernel]
    flipped = _flip_filter(ctx, wg, flipped_shape, element)
    flipped = collapse_dims(flipped, 0, 2)
    spec = ConvSpec(group, (1,) * rank, dilations, output, accumulator_type(scalar))
    y = grouped_conv(ctx, padded, flipped, spec)
    return [_finish(ctx, y, scalar)]


def _patch_conv_transpose(
    x: mlir_ir.Value, w: mlir_ir.Value, group: int, accumulator: mlir_ir.Type
) -> mlir_ir.Value:
    """ConvTranspose whose strides equal its kernel (no pads, dilations or output padding, as
    a UNet's upsampling): each input element fills its own kernel-sized patch of the output,
    y[n, g, m, i*K + a] = sum over c of w[g, c, m, a] * x[n, g, c, i]. One contraction over c
    (filter first) yields (N, G, M/G, I_0, K_0, I_1, K_1, ...), which a reshape interleaves.

    NOTE: IREE 3.13 runs the general form (zeros inserted between the input elements, then a
    stride-1 convolution with the flipped filter that multiplies mostly zeros) about 10x slower
    than this product (a UNet's 2x2 upsampling of 16 to 8 channels to 32x32: 50 against ~5 us)."""
    w_shape = mlir_ir.RankedTensorType(w.type).shape
    channels, group_features, kernel = w_shape[0], w_shape[1], list(w_shape[2:])
    rank = len(kernel)
    group_channels = channels // group
    xg = expand_dim(x, 1, (group, group_channels))  # (N, G, C/G, I...)
    wg = expand_dim(w, 0, (group, group_channels))  # (G, C/G, M/G, K...)
    # loops: n, g, m, (i_a, k_a) for each axis a, c
    c = 3 + 2 * rank
    inputs = [3 + 2 * axis for axis in range(rank)]
    taps = [4 + 2 * axis for axis in range(rank)]
    out_shape: list[int | mlir_ir.Value] = [tensor_size(x, 0), group, group_features]
    for axis in range(rank):
        out_shape += [tensor_size(x, 2 + axis), kernel[axis]]
    init = filled(out_shape, accumulator, constant(accumulator, 0))
    product = generic(
        [(wg, [1, c, 2, *taps]), (xg, [0, 1, c, *inputs])],
        [(init, list(range(c)))],
        c + 1,
        (c,),
        lambda args: [float_mul_add(args[0], args[1], args[2])],
    )[0]
    y = collapse_dims(product, 1, 2)
    for axis in range(rank):
        y = collapse_dims(y, 2 + axis, 2)
    return y


def _transpose_output_at_run_time(
    ctx, x, output, kernel, strides, dilations, output_padding, begin, end
) -> list[int | mlir_ir.Value]:
    """ConvTranspose's output sizes with the dynamic ones (None) computed from `tensor.dim`
    of X: stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pads."""
    sizes: list[int | mlir_ir.Value] = []
    for axis, out in enumerate(output):
        if out is not None:
            sizes.append(out)
            continue
        s, k, d = strides[axis], kernel[axis], dilations[axis]
        rest = output_padding[axis] + (k - 1) * d + 1 - s - begin[axis] - end[axis]
        scaled = arith.MulIOp(tensor_size(x, 2 + axis), index_constant(s)).result
        sizes.append(arith.AddIOp(scaled, index_constant(rest)).result)
    return sizes


def _crop_dynamic(ctx, value: mlir_ir.Value, offsets, low, high) -> mlir_ir.Value:
    """`value` (N, C, S...) with -low[a] elements cut from the start and -high[a] from the end
    of every spatial axis where those are negative; dynamic axes get their sizes at run time."""
    source = mlir_ir.RankedTensorType(value.type)
    shape = list(source.shape)
    sizes, dynamic = (
        list(shape[:2]),
        [tensor_size(value, a) for a in range(2) if shape[a] == DYNAMIC],
    )
    for axis, size in enumerate(shape[2:]):
        cut = max(0, -low[axis]) + max(0, -high[axis])
        if size != DYNAMIC:
            sizes.append(size - cut)
            continue
        sizes.append(DYNAMIC)
        dynamic.append(arith.SubIOp(tensor_size(value, 2 + axis), index_constant(cut)).result)
    result = mlir_ir.RankedTensorType.get(sizes, source.element_type)
    return tensor.ExtractSliceOp(
        result, value, [], dynamic, [], list(offsets), sizes, [1] * len(sizes)
    ).result


def _upsample(
    ctx: LoweringRuleContext, x: mlir_ir.Value, strides: Sequence[int], zero: mlir_ir.Value
) -> mlir_ir.Value:
    """(N, C, S...) -> (N, C, S*stride...) with stride - 1 zeros after every element.

    Each spatial axis is split into (S, 1), padded at the end to (S, stride) and merged back.
    NOTE: not a strided `tensor.insert_slice` into zeros: IREE miscompiles that one when it is
    followed by a `tensor.pad` and N or C is above 1 (the strides are dropped; seen with
    iree-base-compiler here on llvm-cpu, also at -O0)."""
    if all(s == 1 for s in strides):
        return x
    source = mlir_ir.RankedTensorType(x.type)
    shape = list(source.shape)
    split = shape[:2] + [size for n in shape[2:] for size in (n, 1)]
    groups = [[0], [1]] + [[2 + 2 * a, 3 + 2 * a] for a in range(len(strides))]
    dynamic = [tensor_size(x, axis) for axis, size in enumerate(shape) if size == DYNAMIC]
    expanded = expand_shape(x, mlir_ir.RankedTensorType.get(split, source.element_type), groups, dynamic)
    high = [0, 0] + [amount for s in strides for amount in (0, s - 1)]
    padded = pad(expanded, [0] * len(split), high, zero)
    merged = shape[:2] + [
        DYNAMIC if n == DYNAMIC else n * s for n, s in zip(shape[2:], strides, strict=True)
    ]
    return tensor.CollapseShapeOp(
        mlir_ir.RankedTensorType.get(merged, source.element_type), padded, reassociation(groups)
    ).result


def _flip_filter(ctx, wg: mlir_ir.Value, shape: Sequence[int], element: mlir_ir.Type) -> mlir_ir.Value:
    """(G, C/G, M/G, K...) -> (G, M/G, C/G, K...) with every kernel axis reversed.

    Built with `linalg.index` + `tensor.extract` rather than a `K-1-k` indexing map: linalg's
    static shape check mis-infers loop bounds from such maps (seen on 3-D kernels)."""
    rank = len(shape)
    loops = [dim(a) for a in range(rank)]
    init = tensor.EmptyOp(list(shape), element).result

    def body(args):
        index = [linalg.IndexOp(a).result for a in range(rank)]
        read = [index[0], index[2], index[1]]
        for axis in range(3, rank):
            last = index_constant(shape[axis] - 1)
            read.append(arith.SubIOp(last, index[axis]).result)
        return tensor.ExtractOp(wg, read).result

    return generic([], [(init, loops)], rank, (), lambda args: [body(args)])[0]
