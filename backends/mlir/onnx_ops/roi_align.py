"""RoiAlign (avg and max): one `linalg.generic` over (roi, channel, bin y, bin x) with the
sampling grid of each bin as reduction loops.

Each sample point of a bin is read by bilinear interpolation of its four neighbours in the
image of the roi's batch index, computed in the input's float type as the spec's reference
does (coordinates clamped at 0, the last row/column repeated, points more than one pixel
outside the image contributing 0). `avg` sums the interpolated samples and divides by the
grid size; `max` takes, per sample, the largest of the four weighted neighbours and the
maximum over samples (ONNX's definition). The grid must be static: `sampling_ratio` 0 (an
adaptive grid sized from each roi at run time) is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, ir, linalg, tensor
from ..context import LoweringRuleContext, register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type, opset
from .windows import PARALLEL, REDUCTION, dim, filled, generic, scalar_constant, static_shape

__all__: list[str] = []


@register_lowering("onnx.RoiAlign", since=10)
def _lower_roi_align(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    x, rois, batch_indices = ctx.operands
    x_niro, rois_niro, _ = ctx.niro_operands
    scalar = element_type(x_niro)
    if scalar not in (ScalarType.F32, ScalarType.F64) or element_type(rois_niro) is not scalar:
        raise ctx.error("supports f32/f64 inputs with rois of the same type only")
    mode = attribute(ctx, "mode", "avg")
    if mode not in ("avg", "max"):
        raise ctx.error(f"does not support mode '{mode}'")
    default_coordinates = "half_pixel" if opset(ctx) >= 16 else "output_half_pixel"
    coordinates = attribute(ctx, "coordinate_transformation_mode", default_coordinates)
    if coordinates not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(f"does not support coordinate_transformation_mode '{coordinates}'")
    half_pixel = coordinates == "half_pixel"
    sampling = int(attribute(ctx, "sampling_ratio", 0))
    if sampling <= 0:
        raise ctx.error(
            "needs sampling_ratio > 0 (an adaptive sampling grid depends on the rois at run time)"
        )
    spatial_scale = float(attribute(ctx, "spatial_scale", 1.0))
    x_shape = static_shape(ctx, x_niro, "input X")
    out_shape = static_shape(ctx, ctx.niro_results[0], "the result")
    if len(x_shape) != 4 or len(out_shape) != 4:
        raise ctx.error(f"needs a 4-D input and result, got {x_shape} and {out_shape}")
    height, width = x_shape[2], x_shape[3]
    pooled_h, pooled_w = out_shape[2], out_shape[3]
    element = lower_scalar_type(scalar)
    c = lambda value: scalar_constant(element, value)  # noqa: E731
    i64 = ir.IntegerType.get_signless(64)
    index_type = ir.IndexType.get()
    add = lambda a, b: arith.AddFOp(a, b).result  # noqa: E731
    sub = lambda a, b: arith.SubFOp(a, b).result  # noqa: E731
    mul = lambda a, b: arith.MulFOp(a, b).result  # noqa: E731
    div = lambda a, b: arith.DivFOp(a, b).result  # noqa: E731
    less = lambda a, b: arith.CmpFOp(arith.CmpFPredicate.OLT, a, b).result  # noqa: E731
    greater = lambda a, b: arith.CmpFOp(arith.CmpFPredicate.OGT, a, b).result  # noqa: E731

    def axis_sample(start, bin_size, bin_index, grid_index, size):
        """(low index, high index, low weight, high weight) on one axis, plus the position."""
        position = add(
            add(start, mul(bin_index, bin_size)),
            div(mul(add(grid_index, c(0.5)), bin_size), c(float(sampling))),
        )
        clamped = arith.MaximumFOp(position, c(0.0)).result
        low = arith.FPToSIOp(i64, clamped).result
        at_edge = arith.CmpIOp(arith.CmpIPredicate.sge, low, scalar_constant(i64, size - 1)).result
        last = scalar_constant(i64, size - 1)
        low = arith.SelectOp(at_edge, last, low).result
        high = arith.SelectOp(
            at_edge, last, arith.AddIOp(low, scalar_constant(i64, 1)).result
        ).result
        clamped = arith.SelectOp(at_edge, arith.SIToFPOp(element, last).result, clamped).result
        fraction = sub(clamped, arith.SIToFPOp(element, low).result)
        low_index = arith.IndexCastOp(index_type, low).result
        high_index = arith.IndexCastOp(index_type, high).result
        return position, low_index, high_index, sub(c(1.0), fraction), fraction

    def body(args):
        index = [linalg.IndexOp(a).result for a in range(6)]
        as_float = lambda v: arith.SIToFPOp(element, arith.IndexCastOp(i64, v).result).result  # noqa: E731
        roi = [tensor.ExtractOp(rois, [index[0], ctx.index_constant(k)]).result for k in range(4)]
        offset = c(0.5 if half_pixel else 0.0)
        scale = c(spatial_scale)
        start_w, start_h, end_w, end_h = (sub(mul(value, scale), offset) for value in roi)
        roi_w, roi_h = sub(end_w, start_w), sub(end_h, start_h)
        if not half_pixel:
            roi_w = arith.MaximumFOp(roi_w, c(1.0)).result
            roi_h = arith.MaximumFOp(roi_h, c(1.0)).result
        bin_h, bin_w = div(roi_h, c(float(pooled_h))), div(roi_w, c(float(pooled_w)))
        y, y_low, y_high, hy, ly = axis_sample(
            start_h, bin_h, as_float(index[2]), as_float(index[4]), height
        )
        xx, x_low, x_high, hx, lx = axis_sample(
            start_w, bin_w, as_float(index[3]), as_float(index[5]), width
        )
        outside = arith.OrIOp(
            arith.OrIOp(less(y, c(-1.0)), greater(y, c(float(height)))).result,
            arith.OrIOp(less(xx, c(-1.0)), greater(xx, c(float(width)))).result,
        ).result
        batch = tensor.ExtractOp(batch_indices, [index[0]]).result
        batch = arith.IndexCastOp(index_type, batch).result
        read = lambda row, col: tensor.ExtractOp(x, [batch, index[1], row, col]).result  # noqa: E731
        terms = [
            mul(mul(hy, hx), read(y_low, x_low)),
            mul(mul(hy, lx), read(y_low, x_high)),
            mul(mul(ly, hx), read(y_high, x_low)),
            mul(mul(ly, lx), read(y_high, x_high)),
        ]
        if mode == "avg":
            sample = add(add(add(terms[0], terms[1]), terms[2]), terms[3])
            sample = arith.SelectOp(outside, c(0.0), sample).result
            return add(args[1], sample)
        sample = terms[0]
        for term in terms[1:]:
            sample = arith.MaximumFOp(sample, term).result
        sample = arith.SelectOp(outside, c(0.0), sample).result
        return arith.MaximumFOp(args[1], sample).result

    initial = c(0.0) if mode == "avg" else c(float("-inf"))
    window = tensor.EmptyOp([sampling, sampling], element).result
    loops = [dim(a) for a in range(4)]
    pooled = generic(
        ir.RankedTensorType.get(list(out_shape), element),
        [window],
        filled(ctx, out_shape, element, initial),
        [[dim(4), dim(5)], loops],
        [PARALLEL] * 4 + [REDUCTION] * 2,
        body,
    )
    if mode == "max":
        return [pooled]
    count = c(float(sampling * sampling))
    init = tensor.EmptyOp(list(out_shape), element).result
    return [
        generic(
            ir.RankedTensorType.get(list(out_shape), element),
            [pooled],
            init,
            [loops, loops],
            [PARALLEL] * 4,
            lambda args: div(args[0], count),
        )
    ]
