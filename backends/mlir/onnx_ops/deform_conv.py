"""DeformConv (2-D): a convolution whose taps are moved by per-output offsets and sampled
bilinearly (taps outside the image read 0), optionally scaled by a mask.

One reduction `linalg.generic` over (n, oc, oh, ow; c, kh, kw): the filter is an ordinary
operand, the input, offsets and mask are read with `tensor.extract` at positions computed in
the body — input channel (oc's group) * C/group + c, offset group of that channel, the
sampling point oh*stride - pad + kh*dilation + offset_h (likewise for w) and its four
neighbours. The bias is added afterwards, as for Conv.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, linalg, math, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    cast_to,
    checked_cast,
    constant,
    dim,
    dim_size,
    filled,
    generic,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type, input_value, required_input, static_shape
from .conv import add_channel_bias

__all__: list[str] = []


@register_lowering("onnx.DeformConv", since=19)
def _lower_deform_conv(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = required_input(ctx, 0, "X")
    w, w_niro = required_input(ctx, 1, "W")
    offset, offset_niro = required_input(ctx, 2, "offset")
    bias = input_value(ctx, 3)
    mask = input_value(ctx, 4)
    scalar = element_type(x_niro)
    if scalar not in (ScalarType.F32, ScalarType.F64):
        raise ctx.error(f"supports f32/f64 inputs only, got {scalar.spelling}")
    x_shape = ctx.ranked(x_niro, "input X").shape
    w_shape = static_shape(ctx, w_niro, "filter W")
    offset_shape = static_shape(ctx, offset_niro, "offset")
    if len(x_shape) != 4:
        raise ctx.error(f"supports 2-D inputs (N, C, H, W) only, got {x_shape}")
    features, group_channels, kernel_h, kernel_w = w_shape
    group = int(attribute(ctx, "group", 1))
    offset_group = int(attribute(ctx, "offset_group", 1))
    batch, channels = offset_shape[0], group_channels * group  # N: the offsets'; C: W's
    if (
        x_shape[0] not in (None, batch)
        or x_shape[1] not in (None, channels)
        or features % group
        or channels % offset_group
    ):
        raise ctx.error(
            f"X {x_shape}, W {w_shape}, offset {offset_shape}, group {group} and offset_group "
            f"{offset_group} disagree"
        )
    strides = tuple(int(v) for v in attribute(ctx, "strides", (1, 1)))
    dilations = tuple(int(v) for v in attribute(ctx, "dilations", (1, 1)))
    pads = tuple(int(v) for v in attribute(ctx, "pads", (0, 0, 0, 0)))
    out_h, out_w = offset_shape[2], offset_shape[3]
    out_shape = (batch, features, out_h, out_w)
    result_shape = ctx.ranked(ctx.niro_results[0], "the result").shape
    if len(result_shape) != 4 or any(
        dim is not None and dim != size for dim, size in zip(result_shape, out_shape, strict=True)
    ):
        raise ctx.error(f"result shape differs from the computed {out_shape}")
    if offset_shape[1] != offset_group * 2 * kernel_h * kernel_w:
        raise ctx.error(f"offset shape {offset_shape} does not fit offset_group {offset_group}")
    element = lower_scalar_type(scalar)
    i64 = mlir_ir.IntegerType.get_signless(64)
    c = lambda value: constant(element, value)  # noqa: E731
    k = lambda value: constant(i64, value)  # noqa: E731
    # X's batch and channels are the offsets' and W's (checked at run time when dynamic); its
    # height and width may stay dynamic: the taps read inside them only.
    x_type = mlir_ir.RankedTensorType(x.type)
    x = checked_cast(
        x,
        mlir_ir.RankedTensorType.get([batch, channels, *x_type.shape[2:]], x_type.element_type),
        f"{ctx.niro_location}: 'onnx.DeformConv' op",
        "input X",
    )
    height, width = (
        as_i64(dim_size(x, axis) if size is None else size)
        for axis, size in ((2, x_shape[2]), (3, x_shape[3]))
    )
    last_row, last_column = (arith.SubIOp(size, k(1)).result for size in (height, width))
    features_per_group = features // group
    channels_per_offset_group = channels // offset_group

    def body(args):
        n, oc, oh, ow, ci, kh, kw = (
            as_i64(linalg.IndexOp(a).result) for a in range(7)
        )
        channel = arith.AddIOp(
            arith.MulIOp(arith.DivSIOp(oc, k(features_per_group)).result, k(group_channels)).result,
            ci,
        ).result
        og = arith.DivSIOp(channel, k(channels_per_offset_group)).result
        tap = arith.AddIOp(
            arith.MulIOp(
                arith.AddIOp(arith.MulIOp(og, k(kernel_h)).result, kh).result, k(kernel_w)
            ).result,
            kw,
        ).result
        oh_i, ow_i = as_index(oh), as_index(ow)
        n_i = as_index(n)

        def read_offset(comp: int) -> mlir_ir.Value:
            row = arith.AddIOp(arith.MulIOp(tap, k(2)).result, k(comp)).result
            return tensor.ExtractOp(offset, [n_i, as_index(row), oh_i, ow_i]).result

        def position(out, kernel, stride, dilation, pad, shift):
            base = arith.AddIOp(
                arith.SubIOp(arith.MulIOp(out, k(stride)).result, k(pad)).result,
                arith.MulIOp(kernel, k(dilation)).result,
            ).result
            return arith.AddFOp(arith.SIToFPOp(element, base).result, shift).result

        h = position(oh, kh, strides[0], dilations[0], pads[0], read_offset(0))
        wpos = position(ow, kw, strides[1], dilations[1], pads[1], read_offset(1))
        h0f, w0f = math.FloorOp(h).result, math.FloorOp(wpos).result
        lh, lw = arith.SubFOp(h, h0f).result, arith.SubFOp(wpos, w0f).result
        h0, w0 = arith.FPToSIOp(i64, h0f).result, arith.FPToSIOp(i64, w0f).result
        channel_i = as_index(channel)
        total = None
        for dh, weight_h in ((0, arith.SubFOp(c(1.0), lh).result), (1, lh)):
            for dw, weight_w in ((0, arith.SubFOp(c(1.0), lw).result), (1, lw)):
                row = arith.AddIOp(h0, k(dh)).result
                col = arith.AddIOp(w0, k(dw)).result
                inside = None
                for value, size in ((row, height), (col, width)):
                    for check in (
                        arith.CmpIOp(arith.CmpIPredicate.sge, value, k(0)).result,
                        arith.CmpIOp(arith.CmpIPredicate.slt, value, size).result,
                    ):
                        inside = check if inside is None else arith.AndIOp(inside, check).result
                clamp = lambda v, last: as_index(  # noqa: E731
                    arith.MinSIOp(arith.MaxSIOp(v, k(0)).result, last).result
                )
                pixel = tensor.ExtractOp(
                    x, [n_i, channel_i, clamp(row, last_row), clamp(col, last_column)]
                ).result
                pixel = arith.SelectOp(inside, pixel, c(0.0)).result
                term = arith.MulFOp(arith.MulFOp(weight_h, weight_w).result, pixel).result
                total = term if total is None else arith.AddFOp(total, term).result
        value = arith.MulFOp(total, args[0]).result
        if mask is not None:
            scale = tensor.ExtractOp(mask[0], [n_i, as_index(tap), oh_i, ow_i]).result
            value = arith.MulFOp(value, scale).result
        return arith.AddFOp(args[1], value).result

    loops = [dim(a) for a in range(4)]
    result = generic(
        [(w, [dim(1), dim(4), dim(5), dim(6)])],
        [(filled(out_shape, element, c(0.0)), loops)],
        7,
        (4, 5, 6),
        lambda args: [body(args)],
    )[0]
    if bias is not None:
        result = add_channel_bias(result, bias[0], lambda a, b: arith.AddFOp(a, b).result)
    return [cast_to(result, ctx.result_types[0])]
