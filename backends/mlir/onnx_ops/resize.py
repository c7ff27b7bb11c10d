"""Resize (opset 11+) and Upsample (nearest): a gather `linalg.generic` over the output.

The output shape is usually static (ONNX shape inference gives it), but the scales, sizes and
roi are often graph inputs, so the coordinate transform is computed at run time, per output element,
in the model's precision as onnxruntime does (f32, or f64 for an f64 X: an f32 model gets no f64
arithmetic, which many GPUs lack and CPUs run slowly): for each resized axis the output index y maps to a source
coordinate x (`coordinate_transformation_mode`), the taps around x and their coefficients
follow from `mode` (nearest: a choice of two taps by `nearest_mode`; linear: 2 taps; cubic: 4,
optionally `exclude_outside`), tap indices are clamped to the input (edge padding), and the
interpolated value is the coefficient-weighted sum of the input elements read with
`tensor.extract` — the separable 1-D rules of the spec applied jointly over the resized axes.
`tf_crop_and_resize` positions outside the roi get `extrapolation_value`. Antialiasing needs
the tap count, which depends on the scale, so it is supported only when the scale is known at
compile time (constant scales, or sizes with the default 'stretch' policy).

Resize (not Upsample) also takes dynamic input and result dims, as `F.interpolate(y,
size=x.shape[-2:])` exports: the input size is `tensor.dim` as a float, a dynamic result size the
run-time `sizes` entry (or floor(in * scale)); NOTE: `sizes` for every axis resamples a dynamic
batch axis too, since its scale is unknown until run time (correct, but more taps).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import math as pymath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from niro.ir import ScalarType

from ..bindings import arith, linalg, math, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    constant,
    convert,
    dim,
    dim_size,
    generic,
    i64_constant,
    index_constant,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import (
    attribute,
    element_type,
    input_index,
    normalize_axes,
    opset,
    required_input,
    static_shape,
)

__all__: list[str] = []

FLOATS = (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64)
COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")

Scalar: TypeAlias = float | mlir_ir.Value  # a compile-time float, or a run-time value of the coordinate type


@dataclass(frozen=True)
class Settings:
    mode: str
    coordinates: str
    nearest_mode: str
    cubic_a: float
    exclude_outside: bool
    extrapolation_value: float
    antialias: bool


@dataclass(frozen=True)
class AxisPlan:
    """One resized axis: sizes, its scale and (tf_crop_and_resize) its roi start/end."""

    axis: int
    in_size: int | mlir_ir.Value  # a run-time size (a dynamic dim) is a coordinate-type value
    out_size: int | mlir_ir.Value
    scale: Scalar
    roi: tuple[Scalar, Scalar] | None


# -- coordinate arithmetic on run-time values ----------------------------------------------------

_COORDINATE_TYPE: contextvars.ContextVar[ScalarType] = contextvars.ContextVar(
    "resize_coordinate_type", default=ScalarType.F32
)
"""The float type of the op being lowered's coordinates and interpolation sums: f64 for an f64
X, else f32 (onnxruntime computes them in float; f16/bf16 would lose whole pixels)."""


def _coordinate_type() -> mlir_ir.Type:
    """The coordinate type (see `_COORDINATE_TYPE`)."""
    return lower_scalar_type(_COORDINATE_TYPE.get())


def _in_coordinates_of_x(lowering):
    """`lowering` run with `_COORDINATE_TYPE` set from its op's input X."""

    @functools.wraps(lowering)
    def lower(ctx: LoweringRuleContext):
        wide = element_type(ctx.niro_operands[0]) == ScalarType.F64
        token = _COORDINATE_TYPE.set(ScalarType.F64 if wide else ScalarType.F32)
        try:
            return lowering(ctx)
        finally:
            _COORDINATE_TYPE.reset(token)

    return lower


def _c(value: float) -> mlir_ir.Value:
    return constant(_coordinate_type(), value)


def _v(value: Scalar) -> mlir_ir.Value:
    return _c(value) if isinstance(value, (int, float)) else value


def _add(a, b):
    return arith.AddFOp(_v(a), _v(b)).result


def _sub(a, b):
    return arith.SubFOp(_v(a), _v(b)).result


def _mul(a, b):
    return arith.MulFOp(_v(a), _v(b)).result


def _div(a, b):
    return arith.DivFOp(_v(a), _v(b)).result


def _cmp(predicate, a, b):
    return arith.CmpFOp(predicate, _v(a), _v(b)).result


def _select(condition, a, b):
    return arith.SelectOp(condition, a, b).result


def _floor(a):
    return math.FloorOp(_v(a)).result


def _to_i64(a: mlir_ir.Value) -> mlir_ir.Value:
    return arith.FPToSIOp(mlir_ir.IntegerType.get_signless(64), a).result


def _minus(size: int | mlir_ir.Value, amount: float):
    """size - amount: a Python number for a static size (builds nothing), else a coordinate-type value."""
    return size - amount if isinstance(size, int) else _sub(size, amount)


def _size_i64(size: int | mlir_ir.Value) -> mlir_ir.Value:
    return i64_constant(size) if isinstance(size, int) else _to_i64(size)


def _as_coordinate(value: mlir_ir.Value) -> mlir_ir.Value:
    """A float value in the coordinate type (widened, or an f64 roi narrowed in an f32 op)."""
    target = _coordinate_type()
    if value.type == target:
        return value
    if mlir_ir.FloatType(value.type).width > mlir_ir.FloatType(target).width:
        return arith.TruncFOp(target, value).result
    return arith.ExtFOp(target, value).result


def _index_to_coordinate(index: mlir_ir.Value) -> mlir_ir.Value:
    as_int = as_i64(index)
    return arith.SIToFPOp(_coordinate_type(), as_int).result


# -- reading the op ------------------------------------------------------------------------------


def _settings(ctx: LoweringRuleContext) -> Settings:
    mode = attribute(ctx, "mode", "nearest")
    coordinates = attribute(ctx, "coordinate_transformation_mode", "half_pixel")
    nearest_mode = attribute(ctx, "nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"does not support mode '{mode}'")
    if coordinates not in COORDINATE_MODES:
        raise ctx.error(f"does not support coordinate_transformation_mode '{coordinates}'")
    if nearest_mode not in NEAREST_MODES:
        raise ctx.error(f"does not support nearest_mode '{nearest_mode}'")
    antialias = bool(attribute(ctx, "antialias", 0))
    if antialias and mode == "nearest":
        raise ctx.error("antialias is not defined for mode 'nearest'")
    return Settings(
        mode,
        coordinates,
        nearest_mode,
        float(attribute(ctx, "cubic_coeff_a", -0.75)),
        bool(attribute(ctx, "exclude_outside", 0)),
        float(attribute(ctx, "extrapolation_value", 0.0)),
        antialias,
    )


def _operand_entries(ctx: LoweringRuleContext, position: int, count: int, what: str):
    """ONNX input `position` as `count` Python numbers (a constant) or run-time coordinate-type values."""
    index = input_index(ctx, position)
    if index is None:
        return None
    niro_value = ctx.niro_operands[index]
    shape = static_shape(ctx, niro_value, what)
    if shape != (count,):
        if shape == (0,):
            return None
        raise ctx.error(f"needs {what} of shape ({count},), got {shape}")
    constant = ctx.constant_operand(index)
    if constant is not None:
        return [float(item) for item in constant.reshape(-1)]
    scalar = element_type(niro_value)
    entries = []
    for position_ in range(count):
        item = tensor.ExtractOp(ctx.operands[index], [index_constant(position_)]).result
        if scalar.is_float:
            entries.append(_as_coordinate(item))
        else:
            entries.append(arith.SIToFPOp(_coordinate_type(), item).result)
    return entries


def _plans(
    ctx: LoweringRuleContext,
    in_shape,
    out_shape,
    settings: Settings,
    upsample_scales: list[Scalar] | None = None,
) -> tuple[list[AxisPlan], list[int | mlir_ir.Value]]:
    """The resized axes' plans and the result sizes, from Resize's scales or sizes inputs, or
    from `upsample_scales` (Upsample's, one per axis)."""
    rank = len(in_shape)
    axes_attribute = attribute(ctx, "axes")
    axes = (
        normalize_axes(ctx, axes_attribute, rank)
        if axes_attribute is not None
        else tuple(range(rank))
    )
    count = len(axes)
    if upsample_scales is not None:
        scales, sizes = upsample_scales, None
    else:
        scales = _operand_entries(ctx, 2, count, "scales")
        sizes = _operand_entries(ctx, 3, count, "sizes")
    if (scales is None) == (sizes is None):
        raise ctx.error("needs exactly one of 'scales' and 'sizes'")
    roi = None
    if settings.coordinates == "tf_crop_and_resize":
        roi = _operand_entries(ctx, 1, 2 * count, "roi")
        if roi is None:
            raise ctx.error(
                "needs an roi input for coordinate_transformation_mode 'tf_crop_and_resize'"
            )
    for axis in range(rank):
        if axis not in axes and out_shape[axis] is not None and in_shape[axis] != out_shape[axis]:
            raise ctx.error(f"result dim {axis} differs from the input but the axis is not resized")
    in_sizes = [_run_time_size(ctx, size, axis) for axis, size in enumerate(in_shape)]
    axis_scales: list[Scalar]
    if scales is not None:
        axis_scales = list(scales)
        for position, axis in enumerate(axes):
            scale = scales[position]
            if (
                isinstance(scale, float)
                and None not in (in_shape[axis], out_shape[axis])
                and int(pymath.floor(in_shape[axis] * scale)) != out_shape[axis]
            ):
                raise ctx.error(
                    f"scale {scale} of axis {axis} does not give the result size {out_shape[axis]}"
                )
    else:
        policy = attribute(ctx, "keep_aspect_ratio_policy", "stretch")
        ratios: list[Scalar] = []
        for position, axis in enumerate(axes):
            size = sizes[position]
            in_size = in_sizes[axis]
            ratios.append(
                size / in_size
                if isinstance(size, float) and isinstance(in_size, int)
                else _div(size, float(in_size) if isinstance(in_size, int) else in_size)
            )
        if policy == "stretch":
            for position, axis in enumerate(axes):
                if (
                    isinstance(sizes[position], float)
                    and out_shape[axis] is not None
                    and int(sizes[position]) != out_shape[axis]
                ):
                    raise ctx.error(f"sizes {sizes} disagree with the result shape {out_shape}")
            # NOTE: with 'stretch' the result dim is the requested size, so out/in is exact.
            axis_scales = [
                out_shape[axis] / in_shape[axis]
                if None not in (in_shape[axis], out_shape[axis])
                else _div(_coordinate_size(sizes[position]), _coordinate_size(in_sizes[axis]))
                for position, axis in enumerate(axes)
            ]
        elif policy in ("not_larger", "not_smaller"):
            if any(out_shape[axis] is None for axis in axes):
                # NOTE: the result size is then round(common scale x input size), not the
                # requested one; it is only computed where the result type gives it.
                raise ctx.error(
                    f"needs a static result shape with keep_aspect_ratio_policy '{policy}', "
                    f"got {tuple(out_shape)}"
                )
            pick = min if policy == "not_larger" else max
            if all(isinstance(ratio, float) for ratio in ratios):
                common = pick(ratios)
            else:
                common = _v(ratios[0])
                for ratio in ratios[1:]:
                    op = arith.MinimumFOp if policy == "not_larger" else arith.MaximumFOp
                    common = op(common, _v(ratio)).result
            axis_scales = [common] * count
        else:
            raise ctx.error(f"does not support keep_aspect_ratio_policy '{policy}'")
    plans = []
    out_sizes: list[int | mlir_ir.Value] = list(out_shape)
    for position, axis in enumerate(axes):
        scale = axis_scales[position]
        axis_roi = (roi[position], roi[count + position]) if roi is not None else None
        trivial_roi = axis_roi is None or (axis_roi[0] == 0.0 and axis_roi[1] == 1.0)
        identity = in_shape[axis] == out_shape[axis] and isinstance(scale, float) and scale == 1.0
        if (identity and trivial_roi) or in_shape[axis] == out_shape[axis] == 1:
            if out_shape[axis] is None:  # NOTE: None == None: a scale of 1 keeps the size
                out_sizes[axis] = _dim_index(ctx, axis)
            continue  # NOTE: the reference skips such axes too; every tap would read index 0/y.
        if settings.antialias and not isinstance(scale, float):
            raise ctx.error("antialias needs the scales to be compile-time constants")
        if settings.antialias and not isinstance(in_sizes[axis], int):
            raise ctx.error(f"antialias needs a static input size on axis {axis}")
        result_size = None
        if out_shape[axis] is None:
            ratio = _exact_ratio(scale) if sizes is None else None
            if ratio is not None and not isinstance(in_sizes[axis], int):
                numerator, denominator = ratio
                result_size = arith.MulIOp(_dim_index(ctx, axis), index_constant(numerator)).result
                if denominator != 1:
                    result_size = arith.DivUIOp(result_size, index_constant(denominator)).result
                out_sizes[axis] = _index_to_coordinate(result_size)
            else:
                out_sizes[axis] = (
                    _coordinate_size(sizes[position])
                    if sizes is not None
                    else _floor(_mul(_coordinate_size(in_sizes[axis]), scale))
                )
        plans.append(AxisPlan(axis, in_sizes[axis], out_sizes[axis], scale, axis_roi))
        if result_size is not None:
            out_sizes[axis] = result_size
    for axis in range(rank):
        if out_sizes[axis] is None:  # an axis not resized keeps its (dynamic) input size
            out_sizes[axis] = _dim_index(ctx, axis)
    return plans, out_sizes


def _dim_index(ctx: LoweringRuleContext, axis: int) -> mlir_ir.Value:
    """Input X's dim `axis` as an index (`tensor.dim`), for a result dim that follows from it.

    NOTE: IREE 3.13 fails to compile a dispatch whose dynamic dims come from float arithmetic
    (`fptosi(floor(sitofp(h) * 2.0))`): "'iree_codegen.workgroup_count_hint' op failed to
    resolve workgroup count hint in terms of workload ordinals", at the Conv that reads a
    nearest x2 upsampling with dynamic height and width (YOLOv8's neck; iree-import-onnx's MLIR
    fails the same way). Result dims kept from the input, or scaled by a constant (`_exact_ratio`),
    are therefore computed in index arithmetic (`tensor.dim`, `arith.muli`, `arith.divui`), which
    IREE traces back to the workload; a run-time scale or `sizes` still goes through f64."""
    return dim_size(ctx.operands[0], axis)


_MAX_RATIO_TERM = 1 << 16
"""Largest numerator or denominator of a scale computed in integers: in * numerator then stays
far below 2**53, where f64's floor(in * scale) is exact too, so both give the same size."""


def _exact_ratio(scale: Scalar) -> tuple[int, int] | None:
    """A positive constant scale as the exact fraction numerator / denominator it is (an f32
    or f64 value is a fraction with a power-of-two denominator), if both terms are small:
    floor(in * scale) is then (in * numerator) floordiv denominator, exactly."""
    if not isinstance(scale, float) or not scale > 0 or not pymath.isfinite(scale):
        return None
    numerator, denominator = scale.as_integer_ratio()
    if numerator > _MAX_RATIO_TERM or denominator > _MAX_RATIO_TERM:
        return None
    return numerator, denominator


def _run_time_size(ctx: LoweringRuleContext, size: int | None, axis: int) -> int | mlir_ir.Value:
    """A static size as it is, a dynamic one (None) as `tensor.dim` of input X in f64."""
    if size is not None:
        return size
    return _index_to_coordinate(dim_size(ctx.operands[0], axis))


def _coordinate_size(size: float | int | mlir_ir.Value) -> mlir_ir.Value:
    return size if isinstance(size, mlir_ir.Value) else _c(float(size))


# -- the per-element computation -------------------------------------------------------------------


def _source_coordinate(settings: Settings, plan: AxisPlan, y: mlir_ir.Value):
    """(x, extrapolated flag or None) for output index y (f64) on one axis."""
    in_size, scale = plan.in_size, plan.scale
    in_size = float(in_size) if isinstance(in_size, int) else in_size
    last = in_size - 1 if isinstance(in_size, float) else _sub(in_size, 1.0)
    output_width = _mul(scale, in_size)
    mode = settings.coordinates
    is_one = _cmp(arith.CmpFPredicate.OEQ, output_width, 1.0)
    if mode == "align_corners":
        x = _select(is_one, _c(0.0), _div(_mul(y, last), _sub(output_width, 1.0)))
        return x, None
    if mode == "asymmetric":
        return _div(y, scale), None
    if mode == "pytorch_half_pixel":
        x = _sub(_div(_add(y, 0.5), scale), 0.5)
        return _select(is_one, _c(-0.5), x), None
    if mode == "half_pixel":
        return _sub(_div(_add(y, 0.5), scale), 0.5), None
    if mode == "half_pixel_symmetric":
        out_size = plan.out_size
        adjustment = _div(float(out_size) if isinstance(out_size, int) else out_size, output_width)
        half = in_size / 2 if isinstance(in_size, float) else _div(in_size, 2.0)
        offset = _mul(half, _sub(1.0, adjustment))
        return _add(offset, _sub(_div(_add(y, 0.5), scale), 0.5)), None
    # tf_crop_and_resize
    assert plan.roi is not None, "_plans refuses tf_crop_and_resize without an roi input"
    start, end = plan.roi
    span = _sub(end, start)
    centre = _div(_mul(span, last), 2.0)
    stretched = _div(_mul(_mul(y, span), last), _sub(output_width, 1.0))
    x = _add(_select(is_one, centre, stretched), _mul(start, last))
    outside = arith.OrIOp(
        _cmp(arith.CmpFPredicate.OLT, x, 0.0), _cmp(arith.CmpFPredicate.OGT, x, last)
    ).result
    return x, outside


def _coefficients(settings: Settings, plan: AxisPlan, ratio: mlir_ir.Value) -> list[mlir_ir.Value]:
    """The tap coefficients (f64) for `ratio` in (0, 1] — the spec's linear/cubic kernels."""
    a = settings.cubic_a
    if settings.mode == "linear" and not settings.antialias:
        return [_sub(1.0, ratio), ratio]
    if settings.mode == "cubic" and not settings.antialias:
        r1 = _add(ratio, 1.0)
        s = _sub(1.0, ratio)
        s1 = _add(s, 1.0)
        return [
            _sub(_mul(_add(_mul(_sub(_mul(a, r1), 5 * a), r1), 8 * a), r1), 4 * a),
            _add(_mul(_mul(_sub(_mul(a + 2, ratio), a + 3), ratio), ratio), 1.0),
            _add(_mul(_mul(_sub(_mul(a + 2, s), a + 3), s), s), 1.0),
            _sub(_mul(_add(_mul(_sub(_mul(a, s1), 5 * a), s1), 8 * a), s1), 4 * a),
        ]
    scale = min(float(plan.scale), 1.0)
    if settings.mode == "linear":
        start = int(pymath.floor(-1 / scale) + 1)
        taps = range(start, start + 2 - 2 * start)
        raw = []
        for tap in taps:
            arg = _mul(_sub(float(tap), ratio), scale)
            magnitude = math.AbsFOp(arg).result
            raw.append(arith.MaximumFOp(_c(0.0), _sub(1.0, magnitude)).result)
    else:
        start = int(pymath.floor(-2 / scale) + 1)
        raw = []
        for tap in range(start, 2 - start):
            x = math.AbsFOp(_mul(_sub(float(tap), ratio), scale)).result
            x2 = _mul(x, x)
            x3 = _mul(x, x2)
            inner = _add(_sub(_mul(a + 2, x3), _mul(a + 3, x2)), 1.0)
            outer = _sub(_add(_sub(_mul(a, x3), _mul(5 * a, x2)), _mul(8 * a, x)), 4 * a)
            value = _select(
                _cmp(arith.CmpFPredicate.OLE, x, 1.0),
                inner,
                _select(_cmp(arith.CmpFPredicate.OLT, x, 2.0), outer, _c(0.0)),
            )
            raw.append(value)
    total = raw[0]
    for value in raw[1:]:
        total = _add(total, value)
    return [_div(value, total) for value in raw]


def _taps(settings: Settings, plan: AxisPlan, x: mlir_ir.Value, count: int) -> list[mlir_ir.Value]:
    """The i64 indices (unclamped) of the `count` taps nearest x, ties to the smaller index.

    The taps start from floor(x), the floor the coefficients' ratio is taken from (`_axis_reads`):
    the spec's reference shifts x by the pad width first, but in f32 floor(x + 1) can round to
    floor(x) + 2 (x = 7.0000005 gives x + 1 = 8.0, a tie to even), and the taps then sat one
    index left of the coefficients (Mask R-CNN's mask paste, 30 -> 78 columns, read column 6
    for 7)."""
    base = _floor(x)
    fraction = _sub(x, base)
    if count % 2 == 0:
        exact = _cmp(arith.CmpFPredicate.OEQ, fraction, 0.0)
        offset = _select(exact, i64_constant(-(count // 2)), i64_constant(-(count // 2) + 1))
    else:
        low = -((count - 1) // 2)
        lower_half = _cmp(arith.CmpFPredicate.OLE, fraction, 0.5)
        offset = _select(lower_half, i64_constant(low), i64_constant(low + 1))
    start = arith.AddIOp(_to_i64(base), offset).result
    return [arith.AddIOp(start, i64_constant(tap)).result for tap in range(count)]


def _clamp_index(index: mlir_ir.Value, size: int | mlir_ir.Value) -> mlir_ir.Value:
    clamped = arith.MaxSIOp(index, i64_constant(0)).result
    last = i64_constant(size - 1) if isinstance(size, int) else _size_i64(_sub(size, 1.0))
    clamped = arith.MinSIOp(clamped, last).result
    return as_index(clamped)


def _axis_reads(settings: Settings, plan: AxisPlan, y_index: mlir_ir.Value):
    """[(clamped index, coefficient or None)] for one axis, and its extrapolation flag."""
    x, outside = _source_coordinate(settings, plan, _index_to_coordinate(y_index))
    floor = _floor(x)
    ratio = _select(_cmp(arith.CmpFPredicate.OEQ, x, floor), _c(1.0), _sub(x, floor))
    if settings.mode == "nearest":
        taps = _taps(settings, plan, x, 2)
        integral = _cmp(arith.CmpFPredicate.OEQ, ratio, 1.0)
        match settings.nearest_mode:
            case "round_prefer_floor":
                upper = _cmp(arith.CmpFPredicate.OGT, ratio, 0.5)
            case "round_prefer_ceil":
                upper = _cmp(arith.CmpFPredicate.OGE, ratio, 0.5)
            case "floor":
                upper = arith.ConstantOp(mlir_ir.IntegerType.get_signless(1), 0).result
            case _:
                upper = arith.ConstantOp(mlir_ir.IntegerType.get_signless(1), 1).result
        upper = arith.OrIOp(upper, integral).result
        chosen = _select(upper, taps[1], taps[0])
        return [(_clamp_index(chosen, plan.in_size), None)], outside
    coefficients = _coefficients(settings, plan, ratio)
    taps = _taps(settings, plan, x, len(coefficients))
    if settings.exclude_outside:
        kept = []
        for tap, coefficient in zip(taps, coefficients, strict=True):
            inside = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.sge, tap, i64_constant(0)).result,
                arith.CmpIOp(arith.CmpIPredicate.slt, tap, _size_i64(plan.in_size)).result,
            ).result
            kept.append(_select(inside, coefficient, _c(0.0)))
        total = kept[0]
        for value in kept[1:]:
            total = _add(total, value)
        total = _select(_cmp(arith.CmpFPredicate.OEQ, total, 0.0), _c(1.0), total)
        coefficients = [_div(value, total) for value in kept]
    return [
        (_clamp_index(tap, plan.in_size), c) for tap, c in zip(taps, coefficients, strict=True)
    ], outside


def _resize(
    ctx: LoweringRuleContext, x: mlir_ir.Value, scalar: ScalarType, out_shape, plans, settings
) -> mlir_ir.Value:
    element = lower_scalar_type(scalar)
    rank = len(out_shape)
    if all(isinstance(size, int) for size in out_shape):
        init = tensor.EmptyOp(list(out_shape), element).result
    else:  # NOTE: a run-time size is a coordinate-type value (a whole number): made an index here
        index = mlir_ir.IndexType.get()
        sizes = [
            size
            if isinstance(size, int) or size.type == index
            else arith.IndexCastOp(index, _to_i64(size)).result
            for size in out_shape
        ]
        init = tensor.EmptyOp(sizes, element).result
    by_axis = {plan.axis: plan for plan in plans}

    def body(args):
        indices = [linalg.IndexOp(axis).result for axis in range(rank)]
        reads, flags = [], []
        for axis in range(rank):
            if axis in by_axis:
                axis_reads, outside = _axis_reads(settings, by_axis[axis], indices[axis])
                reads.append(axis_reads)
                if outside is not None:
                    flags.append(outside)
            else:
                reads.append([(indices[axis], None)])
        if settings.mode == "nearest":
            value = tensor.ExtractOp(x, [read[0][0] for read in reads]).result
        else:
            total = None
            for combination in itertools.product(*reads):
                element_value = tensor.ExtractOp(x, [index for index, _ in combination]).result
                element_value = _as_coordinate(element_value)
                for _, coefficient in combination:
                    if coefficient is not None:
                        element_value = _mul(element_value, coefficient)
                total = element_value if total is None else _add(total, element_value)
            value = total if element == _coordinate_type() else convert(total, element)
        if flags:
            outside = flags[0]
            for flag in flags[1:]:
                outside = arith.OrIOp(outside, flag).result
            fill = constant(element, settings.extrapolation_value)
            value = _select(outside, fill, value)
        return value

    loops = [dim(axis) for axis in range(rank)]
    return generic([], [(init, loops)], rank, (), lambda args: [body(args)])[0]


def _data(ctx: LoweringRuleContext, settings: Settings, *, dynamic: bool = False):
    """X, its element type and the input and result shapes (None dims only when `dynamic`)."""
    x, x_niro = required_input(ctx, 0, "X")
    scalar = element_type(x_niro)
    if settings.mode != "nearest" and scalar not in FLOATS:
        raise ctx.error(
            f"supports mode '{settings.mode}' on float tensors only, got {scalar.spelling}"
        )
    if dynamic:
        in_shape = ctx.ranked(x_niro, "input X").shape
        out_shape = ctx.ranked(ctx.niro_results[0], "the result").shape
    else:
        in_shape = static_shape(ctx, x_niro, "input X")
        out_shape = static_shape(ctx, ctx.niro_results[0], "the result")
    if len(in_shape) != len(out_shape):
        raise ctx.error(f"result rank {len(out_shape)} differs from the input rank {len(in_shape)}")
    return x, scalar, in_shape, out_shape


@register_lowering("onnx.Resize", since=11)
@_in_coordinates_of_x
def _lower_resize(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    settings = _settings(ctx)
    x, scalar, in_shape, out_shape = _data(ctx, settings, dynamic=True)
    plans, out_sizes = _plans(ctx, in_shape, out_shape, settings)
    return [_resize(ctx, x, scalar, out_sizes, plans, settings)]


@register_lowering("onnx.Upsample", since=7)
@_in_coordinates_of_x
def _lower_upsample(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    mode = attribute(ctx, "mode", "nearest")
    if mode != "nearest":
        raise ctx.error(f"supports mode 'nearest' only, got '{mode}'")
    settings = Settings("nearest", "asymmetric", "floor", -0.75, False, 0.0, False)
    x, scalar, in_shape, out_shape = _data(ctx, settings, dynamic=True)
    if opset(ctx) < 9:
        scales = [float(value) for value in attribute(ctx, "scales", ())]
    else:
        scales = _operand_entries(ctx, 1, len(in_shape), "scales")
    if scales is None or len(scales) != len(in_shape):
        raise ctx.error(f"needs {len(in_shape)} scales")
    plans, out_sizes = _plans(ctx, in_shape, out_shape, settings, upsample_scales=list(scales))
    return [_resize(ctx, x, scalar, out_sizes, plans, settings)]
