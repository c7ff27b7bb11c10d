"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv and
ConvInteger: linear (de)quantization of 8/16-bit integers, as ONNX's reference computes it.

Quantize: round_half_even(x / scale) + zero_point, saturated to the integer type's range.
Dequantize: (x - zero_point) * scale, in f32, cast to the scale's type. Scales and zero points
are per tensor (0-d or one element), per axis (1-D along `axis`) or blocked (same rank as x,
`block_size` elements of `axis` per entry): each layout is just an indexing map of the scale
operand (`d_axis`, `d_axis floordiv block`), so one element-wise `linalg.generic` covers them.
The QLinear ops subtract the zero points in i32 first (so padding with 0 is padding with the
zero point), accumulate in i32, then requantize: the multiplier x_scale * w_scale / y_scale is
formed in the scales' own type, the i32 sum scaled in f64, rounded half to even, plus the
output zero point, saturated (the reference's numpy promotion, reproduced so results are
bit-exact). Unsigned 8/16-bit types use unsigned conversions (uitofp, extui, fptoui).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, math, mlir_ir, tensor
from ..builders import constant, convert, dim, filled, generic, index_constant, tensor_size
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .cast import convert_element
from .common import (
    attribute,
    element_type,
    input_value,
    normalize_axis,
    required_input,
    static_shape,
)
from .conv import ConvSpec, add_channel_bias, grouped_conv, integer_mul_add
from .linalg_ops import integer_matmul, matmul_row_column_dims
from .windows import at_run_time, pad_for_window, spatial_shape, window_geometry

__all__ = [
    "dequantize_element",
    "per_tensor_parameter",
    "quantize_element",
    "requantize",
    "saturate",
    "to_float",
]

QUANTIZED = (ScalarType.I8, ScalarType.U8, ScalarType.I16, ScalarType.U16)
SUB_BYTE_QUANTIZED = (ScalarType.I4, ScalarType.U4, ScalarType.I2, ScalarType.U2)
FLOAT_QUANTIZED = (
    ScalarType.F8E4M3FN,
    ScalarType.F8E5M2,
    ScalarType.F8E4M3FNUZ,
    ScalarType.F8E5M2FNUZ,
    ScalarType.F4E2M1FN,
)
"""FP8 and FP4: quantized by a float conversion of x / scale (FP8 ignores the zero point, ONNX
requires it to be 0; FP4 adds it), dequantized as x * scale (the zero point ignored), as ONNX's
reference computes them."""
FLOATS = (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64)
_PRECISIONS = {1: ScalarType.F32, 10: ScalarType.F16, 16: ScalarType.BF16}
"""QuantizeLinear's `precision` (an ONNX element type code): the type x and the scale are
converted to before the division; 0 = the scale's type."""
_RANGES = {
    ScalarType.I4: (-8, 7),
    ScalarType.U4: (0, 15),
    ScalarType.I2: (-2, 1),
    ScalarType.U2: (0, 3),
    ScalarType.I8: (-128, 127),
    ScalarType.U8: (0, 255),
    ScalarType.I16: (-32768, 32767),
    ScalarType.U16: (0, 65535),
    ScalarType.I32: (-(2**31), 2**31 - 1),
}


def to_float(value: mlir_ir.Value, scalar: ScalarType, target: mlir_ir.Type) -> mlir_ir.Value:
    """An element of Niro type `scalar` converted to the float type `target` (exact for ints
    up to 32 bits into f32/f64; FP8, FP4 and sub-byte values go through f32, exactly)."""
    if scalar.is_narrow_float or scalar.is_sub_byte:
        return to_float(convert_element(value, scalar, ScalarType.F32), ScalarType.F32, target)
    if scalar.is_float:
        return convert(value, target)
    if scalar.is_unsigned_integer:
        return arith.UIToFPOp(target, value).result
    return arith.SIToFPOp(target, value).result


def to_i32(value: mlir_ir.Value, scalar: ScalarType) -> mlir_ir.Value:
    """An 8/16/32-bit integer element widened to i32 (zero-extended when unsigned)."""
    if value.type == lower_scalar_type(ScalarType.I32):
        return value
    if scalar.is_unsigned_integer:
        return arith.ExtUIOp(lower_scalar_type(ScalarType.I32), value).result
    return arith.ExtSIOp(lower_scalar_type(ScalarType.I32), value).result


def saturate(ctx: LoweringRuleContext, value: mlir_ir.Value, scalar: ScalarType) -> mlir_ir.Value:
    """A float already rounded to an integer, clamped to `scalar`'s range and converted.

    NaN becomes the range's low end, as onnx.reference (NaN -> INT_MIN, then clipped) and
    onnxruntime's vectorised quantizer give it: `maxnumf` takes the bound where `maximumf`
    would keep the NaN, whose conversion to an integer is undefined (IREE may then give any
    value, differently from one compilation to the next). A NaN reaches here whenever a model
    quantizes an infinity with an infinite scale (onnxruntime's calibration of an attention
    mask of -inf does exactly that)."""
    low, high = _RANGES[scalar]
    float_type = value.type
    value = arith.MaxNumFOp(value, constant(float_type, low)).result
    value = arith.MinNumFOp(value, constant(float_type, high)).result
    target = lower_scalar_type(scalar)
    if scalar.is_unsigned_integer:
        return arith.FPToUIOp(target, value).result
    return arith.FPToSIOp(target, value).result


def quantize_element(
    ctx: LoweringRuleContext,
    value: mlir_ir.Value,
    scale: tuple[mlir_ir.Value, ScalarType],
    zero: tuple[mlir_ir.Value, ScalarType] | None,
    out_scalar: ScalarType,
) -> mlir_ir.Value:
    """saturate(round_half_even(value / scale) + zero_point): one float element (f32 or f64,
    the type it is computed in) quantized to `out_scalar`, as QuantizeLinear defines it."""
    quotient = arith.DivFOp(value, to_float(*scale, value.type)).result
    return quantize_quotient(ctx, quotient, zero, out_scalar)


def quantize_quotient(
    ctx: LoweringRuleContext,
    quotient: mlir_ir.Value,
    zero: tuple[mlir_ir.Value, ScalarType] | None,
    out_scalar: ScalarType,
) -> mlir_ir.Value:
    """saturate(round_half_even(quotient) + zero_point), for x / scale already divided."""
    rounded = math.RoundEvenOp(quotient).result
    if zero is not None:
        rounded = arith.AddFOp(rounded, to_float(*zero, quotient.type)).result
    return saturate(ctx, rounded, out_scalar)


def dequantize_element(
    value: mlir_ir.Value,
    scalar: ScalarType,
    scale: tuple[mlir_ir.Value, ScalarType],
    zero: tuple[mlir_ir.Value, ScalarType] | None,
    compute: mlir_ir.Type,
) -> mlir_ir.Value:
    """(value - zero_point) * scale in the float type `compute`, as DequantizeLinear defines it."""
    result = to_float(value, scalar, compute)
    if zero is not None:
        result = arith.SubFOp(result, to_float(*zero, compute)).result
    return arith.MulFOp(result, to_float(*scale, compute)).result


def _with_parameters(ctx, x, x_shape, scale, zero, axis: int, block: int, *, prefix: str):
    """The generic's operands and indexing maps for x, its scale and its optional zero point
    (`<prefix>_scale`, `<prefix>_zero_point`), and the zero point's element type (None if absent)."""
    operands = [x, scale[0]]
    maps = [
        [dim(i) for i in range(len(x_shape))],
        _parameter_map(
            ctx,
            f"{prefix}_scale",
            static_shape(ctx, scale[1], f"{prefix}_scale"),
            x_shape,
            axis,
            block,
        ),
    ]
    if zero is None:
        return operands, maps, None
    name = f"{prefix}_zero_point"
    operands.append(zero[0])
    maps.append(_parameter_map(ctx, name, static_shape(ctx, zero[1], name), x_shape, axis, block))
    return operands, maps, element_type(zero[1])


def _parameter_map(ctx, name: str, shape, x_shape, axis: int, block: int) -> list[mlir_ir.AffineExpr]:
    """The indexing map of a scale / zero point of `shape` against x of `x_shape`."""
    rank = len(x_shape)
    if len(shape) == 0:
        return []
    if shape == (1,) and (block == 0 or rank == 1):
        return [mlir_ir.AffineConstantExpr.get(0)]
    axis = normalize_axis(ctx, axis, rank)
    if block:
        if len(shape) != rank:
            raise ctx.error(f"blocked {name} needs rank {rank}, got shape {shape}")
        exprs = []
        for index in range(rank):
            size = x_shape[index]
            if index == axis:
                if size is not None and shape[index] != -(-size // block):
                    raise ctx.error(
                        f"{name} shape {shape} does not match block_size {block} on axis {axis}"
                    )
                exprs.append(
                    mlir_ir.AffineFloorDivExpr.get(dim(index), mlir_ir.AffineConstantExpr.get(block))
                )
            else:
                if size is not None and shape[index] != size:
                    raise ctx.error(
                        f"{name} shape {shape} does not match the input shape {x_shape}"
                    )
                exprs.append(dim(index))
        return exprs
    # NOTE: a dynamic dim of x (None) takes a per-axis parameter of any length: ONNX requires
    # them equal. The generic's loop range then comes from the parameter's static length, so
    # IREE checks x's dim against it when the function is called (test_quantization_dynamic).
    if len(shape) == 1 and x_shape[axis] in (shape[0], None):
        return [dim(axis)]
    raise ctx.error(
        f"{name} of shape {shape} is neither per-tensor nor per-axis for input {x_shape}"
    )


def _layout(ctx: LoweringRuleContext, x_shape):
    # NOTE: the axis only matters (and is only checked) for per-axis or blocked parameters;
    # a per-tensor scale on a 1-D input keeps the default axis 1.
    axis = int(attribute(ctx, "axis", 1))
    block = int(attribute(ctx, "block_size", 0) or 0)
    if block < 0:
        raise ctx.error(f"needs block_size >= 0, got {block}")
    return axis, block


def _elementwise(out_shape, element, operands, maps, body) -> mlir_ir.Value:
    """A parallel generic of `out_shape`; a dynamic (None) dim (a batch, a sequence length)
    has the size of the same dim of `operands[0]` (which has the result's shape)."""
    rank = len(out_shape)
    loops = [dim(index) for index in range(rank)]
    sizes = [
        tensor_size(operands[0], axis) if size is None else size
        for axis, size in enumerate(out_shape)
    ]
    init = tensor.EmptyOp(sizes, element).result
    return generic(
        list(zip(operands, maps, strict=True)), [(init, loops)], rank, (), lambda args: [body(args)]
    )[0]


def _result_shape(ctx: LoweringRuleContext, index: int = 0) -> tuple[int | None, ...]:
    """The shape of an element-wise op's result: static where the result type knows a size the
    input may leave dynamic, None where only the run knows it (read from the input)."""
    return ctx.ranked(ctx.niro_results[index], "result").shape


def _rounded_to(value: mlir_ir.Value, scalar: ScalarType) -> mlir_ir.Value:
    """An f32 rounded to f16/bf16 and back (exact both ways but the rounding)."""
    narrow = lower_scalar_type(scalar)
    return arith.ExtFOp(lower_scalar_type(ScalarType.F32), convert(value, narrow)).result


@register_lowering("onnx.QuantizeLinear", since=10)
def _lower_quantize(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = required_input(ctx, 0, "x")
    scale, scale_niro = required_input(ctx, 1, "y_scale")
    zero = input_value(ctx, 2)
    x_scalar, scale_scalar = element_type(x_niro), element_type(scale_niro)
    out_scalar = element_type(ctx.niro_results[0])
    if out_scalar not in (*QUANTIZED, *SUB_BYTE_QUANTIZED, *FLOAT_QUANTIZED):
        raise ctx.error(
            f"supports 2/4/8/16-bit integer, FP8 and FP4 outputs only, got {out_scalar.spelling}"
        )
    if x_scalar not in (*FLOATS, ScalarType.I32) or scale_scalar not in FLOATS:
        raise ctx.error(
            f"does not support input {x_scalar.spelling} with scale {scale_scalar.spelling}"
        )
    precision = attribute(ctx, "precision", 0) or 0
    if precision and precision not in _PRECISIONS:
        raise ctx.error(f"supports precision FLOAT, FLOAT16 or BFLOAT16 only, got {precision}")
    narrow = _PRECISIONS.get(precision) if precision else None
    saturate = bool(attribute(ctx, "saturate", 1))
    x_shape = ctx.ranked(x_niro, "input x").shape
    axis, block = _layout(ctx, x_shape)
    # NOTE: numpy divides in the promoted type of x and the scale: f32 unless either is f64
    # (or x is i32, which promotes with f32 to f64).
    wide = ScalarType.F64 in (x_scalar, scale_scalar) or x_scalar is ScalarType.I32
    compute = lower_scalar_type(ScalarType.F64) if wide and narrow is None else lower_scalar_type(ScalarType.F32)
    operands, maps, zero_scalar = _with_parameters(
        ctx, x, x_shape, (scale, scale_niro), zero, axis, block, prefix="y"
    )

    half = narrow if narrow in (ScalarType.F16, ScalarType.BF16) else None

    def body(args):
        zero = None if zero_scalar is None else (args[2], zero_scalar)
        value = to_float(args[0], x_scalar, compute)
        scale = to_float(args[1], scale_scalar, compute)
        if half is not None:  # numpy's division in f16/bf16: the operands and the f32 quotient rounded
            value, scale = _rounded_to(value, half), _rounded_to(scale, half)
        quotient = arith.DivFOp(value, scale).result
        if half is not None:
            quotient = _rounded_to(quotient, half)
        if out_scalar in FLOAT_QUANTIZED:
            if out_scalar is ScalarType.F4E2M1FN and zero is not None:
                quotient = arith.AddFOp(quotient, to_float(*zero, compute)).result
            source = ScalarType.F64 if compute == lower_scalar_type(ScalarType.F64) else ScalarType.F32
            return convert_element(quotient, source, out_scalar, saturate=saturate)
        return quantize_quotient(ctx, quotient, zero, out_scalar)

    return [_elementwise(_result_shape(ctx), lower_scalar_type(out_scalar), operands, maps, body)]


@register_lowering("onnx.DequantizeLinear", since=10)
def _lower_dequantize(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = required_input(ctx, 0, "x")
    scale, scale_niro = required_input(ctx, 1, "x_scale")
    zero = input_value(ctx, 2)
    x_scalar, scale_scalar = element_type(x_niro), element_type(scale_niro)
    out_scalar = element_type(ctx.niro_results[0])
    if x_scalar not in (*QUANTIZED, *SUB_BYTE_QUANTIZED, *FLOAT_QUANTIZED, ScalarType.I32):
        raise ctx.error(
            f"supports 2/4/8/16/32-bit integer, FP8 and FP4 inputs only, got {x_scalar.spelling}"
        )
    if x_scalar in FLOAT_QUANTIZED:
        zero = None  # ignored for FP8 (ONNX requires 0) and FP4, as the reference does
    if scale_scalar not in FLOATS or out_scalar not in FLOATS:
        raise ctx.error(
            f"needs float scale and output, got {scale_scalar.spelling} -> {out_scalar.spelling}"
        )
    x_shape = ctx.ranked(x_niro, "input x").shape
    axis, block = _layout(ctx, x_shape)
    compute = lower_scalar_type(ScalarType.F64) if ScalarType.F64 in (scale_scalar, out_scalar) else lower_scalar_type(ScalarType.F32)
    operands, maps, zero_scalar = _with_parameters(
        ctx, x, x_shape, (scale, scale_niro), zero, axis, block, prefix="x"
    )
    out_element = lower_scalar_type(out_scalar)

    def body(args):
        zero = None if zero_scalar is None else (args[2], zero_scalar)
        value = dequantize_element(args[0], x_scalar, (args[1], scale_scalar), zero, compute)
        return to_float(value, ScalarType.F64 if compute == lower_scalar_type(ScalarType.F64) else ScalarType.F32, out_element)

    return [_elementwise(_result_shape(ctx), out_element, operands, maps, body)]


# -- integer convolution and matmul ------------------------------------------------------------------


def _shifted(
    ctx, value: mlir_ir.Value, scalar: ScalarType, shape, zero, zero_axis: int | None
) -> mlir_ir.Value:
    """value - zero_point as an i32 tensor; `zero` is (mlir, niro) or None; a 1-D zero point
    (per output channel) runs along `zero_axis`."""
    if scalar not in (ScalarType.I8, ScalarType.U8):
        raise ctx.error(f"supports int8/uint8 operands only, got {scalar.spelling}")
    rank = len(shape)
    loops = [dim(index) for index in range(rank)]
    operands, maps = [value], [loops]
    zero_scalar = None
    if zero is not None:
        zero_scalar = element_type(zero[1])
        zero_shape = static_shape(ctx, zero[1], "a zero point")
        if len(zero_shape) == 0 or zero_shape == (1,):
            zero_map = [mlir_ir.AffineConstantExpr.get(0)] * len(zero_shape)
        elif zero_axis is not None and zero_shape == (shape[zero_axis],):
            zero_map = [dim(zero_axis)]
        else:
            raise ctx.error(
                f"a zero point of shape {zero_shape} does not fit an operand of shape {shape}"
            )
        operands.append(zero[0])
        maps.append(zero_map)

    def body(args):
        widened = to_i32(args[0], scalar)
        if zero_scalar is not None:
            widened = arith.SubIOp(widened, to_i32(args[1], zero_scalar)).result
        return widened

    return _elementwise(shape, lower_scalar_type(ScalarType.I32), operands, maps, body)


def _integer_conv(ctx, x, x_niro, x_zero, w, w_niro, w_zero) -> mlir_ir.Value:
    """The i32 convolution of (x - x_zero) and (w - w_zero) with the op's window attributes."""
    x_shape = spatial_shape(ctx, x_niro, "input x")
    w_shape = static_shape(ctx, w_niro, "filter w")
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise ctx.error(f"needs x of rank >= 3 and w of the same rank, got {x_shape} and {w_shape}")
    geometry = window_geometry(ctx, x_shape[2:], w_shape[2:])
    expected = (x_shape[0], w_shape[0], *geometry.output)
    result = spatial_shape(ctx, ctx.niro_results[0], "the result")
    if result != expected:
        raise ctx.error(f"computed output shape {expected} but the result type says {result}")
    xs = _shifted(ctx, x, element_type(x_niro), x_shape, x_zero, None)
    ws = _shifted(ctx, w, element_type(w_niro), w_shape, w_zero, 0)
    geometry = at_run_time(ctx, xs, geometry)  # the sizes of dynamic spatial axes
    padded = pad_for_window(ctx, xs, geometry, constant(lower_scalar_type(ScalarType.I32), 0))
    group = int(attribute(ctx, "group", 1))
    spec = ConvSpec(
        group, geometry.strides, geometry.dilations, geometry.output, lower_scalar_type(ScalarType.I32), integer_mul_add
    )
    return grouped_conv(ctx, padded, ws, spec)


@register_lowering("onnx.ConvInteger", since=10)
def _lower_conv_integer(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = required_input(ctx, 0, "x")
    w, w_niro = required_input(ctx, 1, "w")
    return [_integer_conv(ctx, x, x_niro, input_value(ctx, 2), w, w_niro, input_value(ctx, 3))]


def per_tensor_parameter(ctx, position: int, what: str) -> tuple[mlir_ir.Value, ScalarType]:
    """A per-tensor parameter (0-d or one element) read as a scalar."""
    value, niro_value = required_input(ctx, position, what)
    shape = static_shape(ctx, niro_value, what)
    if len(shape) > 1 or (shape and shape[0] != 1):
        raise ctx.error(f"supports a per-tensor {what} only, got shape {shape}")
    return tensor.ExtractOp(value, [index_constant(0)] * len(shape)).result, element_type(
        niro_value
    )


def requantize(
    ctx,
    acc_i32: mlir_ir.Value,
    multiplier: mlir_ir.Value,
    zero: tuple[mlir_ir.Value, ScalarType] | None,
    out_scalar: ScalarType,
) -> mlir_ir.Value:
    """round_half_even(acc * multiplier + zero) saturated to `out_scalar`, in the multiplier's
    float type (f64 for the ONNX ops, as the reference; f32 for onnxruntime's QGemm)."""
    compute = multiplier.type
    value = arith.MulFOp(arith.SIToFPOp(compute, acc_i32).result, multiplier).result
    if zero is not None:
        value = arith.AddFOp(value, to_float(zero[0], zero[1], compute)).result
    return saturate(ctx, math.RoundEvenOp(value).result, out_scalar)


def _multiplier(
    a_scale, a_type: ScalarType, b_scale, b_type: ScalarType, y_scale, y_type: ScalarType
) -> mlir_ir.Value:
    """a_scale * b_scale / y_scale in the scales' (promoted) type, then as f64."""
    kinds = (a_type, b_type, y_type)
    common = max(
        kinds,
        key=lambda kind: {
            ScalarType.F16: 0,
            ScalarType.BF16: 0,
            ScalarType.F32: 1,
            ScalarType.F64: 2,
        }[kind],
    )
    element = lower_scalar_type(common)
    product = arith.MulFOp(
        to_float(a_scale, a_type, element), to_float(b_scale, b_type, element)
    ).result
    quotient = arith.DivFOp(product, to_float(y_scale, y_type, element)).result
    return to_float(quotient, common, lower_scalar_type(ScalarType.F64))


@register_lowering("onnx.QLinearConv", since=10)
def _lower_qlinear_conv(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = required_input(ctx, 0, "x")
    w, w_niro = required_input(ctx, 3, "w")
    out_scalar = element_type(ctx.niro_results[0])
    if out_scalar not in (ScalarType.I8, ScalarType.U8):
        raise ctx.error(f"supports int8/uint8 outputs only, got {out_scalar.spelling}")
    acc = _integer_conv(ctx, x, x_niro, input_value(ctx, 2), w, w_niro, input_value(ctx, 5))
    bias = input_value(ctx, 8)
    if bias is not None:
        if element_type(bias[1]) is not ScalarType.I32:
            raise ctx.error("needs an int32 bias B")
        acc = add_channel_bias(acc, bias[0], lambda a, b: arith.AddIOp(a, b).result)
    x_scale, x_scale_type = per_tensor_parameter(ctx, 1, "x_scale")
    y_scale, y_scale_type = per_tensor_parameter(ctx, 6, "y_scale")
    y_zero = per_tensor_parameter(ctx, 7, "y_zero_point")
    w_scale, w_scale_niro = required_input(ctx, 4, "w_scale")
    w_scale_type = element_type(w_scale_niro)
    w_scale_shape = static_shape(ctx, w_scale_niro, "w_scale")
    out_shape = spatial_shape(ctx, ctx.niro_results[0], "the result")
    rank = len(out_shape)
    loops = [dim(index) for index in range(rank)]
    if len(w_scale_shape) == 0 or w_scale_shape == (1,):
        w_map = [mlir_ir.AffineConstantExpr.get(0)] * len(w_scale_shape)
    elif w_scale_shape == (out_shape[1],):
        w_map = [dim(1)]
    else:
        raise ctx.error(f"w_scale of shape {w_scale_shape} is neither per-tensor nor per-channel")

    def body(args):
        multiplier = _multiplier(
            x_scale, x_scale_type, args[1], w_scale_type, y_scale, y_scale_type
        )
        return requantize(ctx, args[0], multiplier, y_zero, out_scalar)

    return [
        _elementwise(out_shape, lower_scalar_type(out_scalar), [acc, w_scale], [loops, w_map], body)
    ]


@register_lowering("onnx.QLinearMatMul", since=10)
def _lower_qlinear_matmul(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """The i32 matmul of the shifted operands, requantized by a_scale * b_scale / y_scale; a
    1-D a_scale is per row of A, a 1-D b_scale per column of B (onnxruntime's per-channel
    quantization makes the latter), each read per result element."""
    out_scalar = element_type(ctx.niro_results[0])
    if out_scalar not in (ScalarType.I8, ScalarType.U8):
        raise ctx.error(f"supports int8/uint8 outputs only, got {out_scalar.spelling}")
    row, column = matmul_row_column_dims(
        len(ctx.ranked(ctx.niro_operands[0], "input a").shape),
        len(ctx.ranked(ctx.niro_operands[3], "input b").shape),
    )
    finish_operands: list = []
    scales = []
    for position, what, axis in ((1, "a_scale", row), (4, "b_scale", column)):
        value, niro_value = required_input(ctx, position, what)
        shape = static_shape(ctx, niro_value, what)
        if len(shape) == 1 and shape[0] != 1 and axis is not None:
            scales.append((len(finish_operands), element_type(niro_value)))
            finish_operands.append((value, [axis]))
        else:
            scales.append(per_tensor_parameter(ctx, position, what))
    y_scale, y_type = per_tensor_parameter(ctx, 6, "y_scale")
    y_zero = per_tensor_parameter(ctx, 7, "y_zero_point")

    def finish(acc: mlir_ir.Value, *elements: mlir_ir.Value) -> mlir_ir.Value:
        (a_scale, a_type), (b_scale, b_type) = (
            (elements[scale], kind) if isinstance(scale, int) else (scale, kind)
            for scale, kind in scales
        )
        multiplier = _multiplier(a_scale, a_type, b_scale, b_type, y_scale, y_type)
        return requantize(ctx, acc, multiplier, y_zero, out_scalar)

    return [integer_matmul(ctx, (0, 3, 2, 5), finish, finish_operands)]


@register_lowering("onnx.DynamicQuantizeLinear", since=11)
def _lower_dynamic_quantize(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point = saturate(round(-min /
    y_scale)), y = saturate(round(x / y_scale) + y_zero_point), all uint8, in f32."""
    x, x_niro = ctx.operands[0], ctx.niro_operands[0]
    if element_type(x_niro) is not ScalarType.F32:
        raise ctx.error(f"supports float32 input only, got {element_type(x_niro).spelling}")
    rank = len(ctx.ranked(x_niro, "input x").shape)
    loops = [dim(index) for index in range(rank)]
    f32 = lower_scalar_type(ScalarType.F32)
    zero = constant(f32, 0.0)

    def reduce(combine):
        init = filled([], f32, zero)
        return generic(
            [(x, loops)], [(init, [])], rank, range(rank), lambda args: [combine(args[0], args[1])]
        )[0]

    high = tensor.ExtractOp(reduce(lambda a, b: arith.MaximumFOp(a, b).result), []).result
    low = tensor.ExtractOp(reduce(lambda a, b: arith.MinimumFOp(a, b).result), []).result
    scale = arith.DivFOp(arith.SubFOp(high, low).result, constant(f32, 255.0)).result
    zero_point_f = math.RoundEvenOp(
        arith.DivFOp(arith.SubFOp(zero, low).result, scale).result
    ).result
    zero_point = saturate(ctx, zero_point_f, ScalarType.U8)
    zero_point_f = arith.UIToFPOp(f32, zero_point).result

    def body(args):
        rounded = math.RoundEvenOp(arith.DivFOp(args[0], scale).result).result
        return saturate(ctx, arith.AddFOp(rounded, zero_point_f).result, ScalarType.U8)

    y = _elementwise(_result_shape(ctx), lower_scalar_type(ScalarType.U8), [x], [loops], body)
    scale_tensor = tensor.FromElementsOp(mlir_ir.RankedTensorType.get([], f32), [scale]).result
    zero_tensor = tensor.FromElementsOp(
        mlir_ir.RankedTensorType.get([], lower_scalar_type(ScalarType.U8)), [zero_point]
    ).result
    return [y, scale_tensor, zero_tensor][: len(ctx.niro_results)]
