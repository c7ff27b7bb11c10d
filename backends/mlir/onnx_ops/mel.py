"""MLIR lowering of ONNX MelWeightMatrix (opset 17).

The op's five inputs are scalars. When all of them are compile-time constants the matrix is
computed here with NumPy, step by step as onnx.reference computes it (the same dtypes at every
step), and emitted as a constant. Otherwise it is computed at run time by one `linalg.generic`
over the [dft_length // 2 + 1, num_mel_bins] result, which must then have a static shape (the
output shape depends on input values); `cf.assert`s check at run time that the inputs agree
with it and that sample_rate is positive.

The reference's steps, which the generic body repeats per element (j, i):
  mel(hz)  = f64(2595 * log1p(hz / 700)) / ln 10    (the first three steps in the inputs' type)
  bin(k)   = int(((dft_length + 1) * 700 * expm1((k * step + mel(low)) / 2595 * ln 10))
                 // sample_rate)                      with step = (mel(high) - mel(low)) / (n + 2)
  weight   = the triangle of column i from bin(i) through bin(i + 1) to bin(i + 2) at row j:
             rising (j - left) / (center - left) on [left, center] (1 at center when left ==
             center), then falling (right - j) / (right - center) on [center, right).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from niro.ir import ScalarType, TensorType, format_type

from ..bindings import arith, math, mlir_ir
from ..builders import as_i64, assert_true, cast_to, dense_constant
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import RankedTensorType, lower_scalar_type
from .common import element_type
from .indexing import gather_generic, scalar_input, scalar_reader

__all__ = ["mel_weight_matrix"]

_INTEGERS = (ScalarType.I32, ScalarType.I64)
_HERTZ = (ScalarType.F16, ScalarType.F32, ScalarType.F64)
_LN10 = float(np.log(10))


def mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz) -> np.ndarray:
    """The matrix in float64, from NumPy scalars, exactly as onnx.reference computes it."""
    num_spectrogram_bins = dft_length // 2 + 1
    frequency_bins = np.arange(0, num_mel_bins + 2)
    low_frequency_mel = 2595 * np.log1p(lower_edge_hertz / 700) / np.log(10)
    high_frequency_mel = 2595 * np.log1p(upper_edge_hertz / 700) / np.log(10)
    mel_step = (high_frequency_mel - low_frequency_mel) / frequency_bins.shape[0]
    frequency_bins = frequency_bins * mel_step + low_frequency_mel
    frequency_bins = 700 * np.expm1(frequency_bins / 2595 * np.log(10))
    frequency_bins = (((dft_length + 1) * frequency_bins) // sample_rate).astype(int)
    output = np.zeros((int(num_spectrogram_bins), int(num_mel_bins)))
    for column in range(int(num_mel_bins)):
        left, center, right = (int(item) for item in frequency_bins[column : column + 3])
        if center == left:
            output[center, column] = 1
        else:
            for row in range(left, center + 1):
                output[row, column] = float(row - left) / float(center - left)
        if right > center:
            for row in range(center, right):
                output[row, column] = float(right - row) / float(right - center)
    return output


@register_lowering("onnx.MelWeightMatrix", since=17)
def _lower_mel_weight_matrix(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    if len(ctx.operands) != 5:
        raise ctx.error(f"expects 5 inputs, got {len(ctx.operands)}")
    result = ctx.ranked(ctx.niro_results[0], "result")
    scalars = [element_type(value) for value in ctx.niro_operands]
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    for position, (name, scalar) in enumerate(zip(names, scalars, strict=True)):
        allowed = _INTEGERS if position < 3 else _HERTZ
        if scalar not in allowed:
            raise ctx.error(
                f"expects {'an int32 or int64' if position < 3 else 'a float16, float or double'} "
                f"'{name}', got {format_type(ctx.niro_operands[position].type)}"
            )
        type_ = ctx.niro_operands[position].type
        if isinstance(type_, TensorType) and (type_.shape is None or any(dim != 1 for dim in type_.shape)):
            raise ctx.error(f"expects a scalar '{name}', got {format_type(type_)}")
    if len(result.shape) != 2:
        raise ctx.error(f"expects a 2-D result, got {format_type(result)}")
    out = result.element_type
    if out is ScalarType.BOOL or not (out.is_float or out.is_integer):
        raise ctx.error(f"cannot produce a {format_type(result)} result")
    constants = [ctx.constant_operand(index) for index in range(5)]
    if all(value is not None for value in constants):
        return [_constant_matrix(ctx, constants, result)]
    if any(dim is None for dim in result.shape):
        raise ctx.error(
            f"needs a static result shape when its inputs are computed at run time (the shape "
            f"depends on num_mel_bins and dft_length), got {format_type(result)}"
        )
    return [_runtime_matrix(ctx, result, scalars)]


def _constant_matrix(ctx: LoweringRuleContext, constants, result: RankedTensorType) -> mlir_ir.Value:
    scalars = [np.asarray(value).reshape(()) for value in constants]
    scalars = [value[()] for value in scalars]  # NumPy scalars keep the reference's promotions
    if scalars[2] <= 0:
        raise ctx.error(f"expects a positive sample_rate, got {scalars[2]}")
    try:
        matrix = mel_weight_matrix(*scalars)
    except IndexError as error:
        raise ctx.error(
            f"has a mel bin outside the {int(scalars[1]) // 2 + 1} spectrogram bins ({error})"
        ) from None
    if any(
        want is not None and want != got
        for want, got in zip(result.shape, matrix.shape, strict=True)
    ):
        raise ctx.error(
            f"result {format_type(result)} differs from the computed shape {matrix.shape[0]}x{matrix.shape[1]}"
        )
    value = dense_constant(
        matrix.astype(np.dtype(result.element_type.numpy_name)), result.element_type
    )
    return cast_to(value, ctx.result_types[0])


def _runtime_matrix(ctx: LoweringRuleContext, result: RankedTensorType, scalars) -> mlir_ir.Value:
    """The generic computing each weight from the run-time inputs (see the module docstring)."""
    shape = result.static_shape
    assert shape is not None, "a run-time matrix needs a static result (checked by the caller)"
    rows, columns = shape
    f64 = mlir_ir.F64Type.get()
    i64 = mlir_ir.IntegerType.get_signless(64)
    host = [scalar_input(ctx, ctx.operands[index], ctx.niro_operands[index]) for index in range(3)]
    where = f"{ctx.niro_location}: 'onnx.MelWeightMatrix' op"
    assert_true(_icmp("eq", _widen(host[0], i64), _int(i64, columns)), f"{where}: num_mel_bins differs from the {columns} result columns")
    half = arith.FloorDivSIOp(_widen(host[1], i64), _int(i64, 2)).result
    assert_true(_icmp("eq", half, _int(i64, rows - 1)), f"{where}: dft_length // 2 + 1 differs from the {rows} result rows")
    assert_true(_icmp("sgt", _widen(host[2], i64), _int(i64, 0)), f"{where}: sample_rate is not positive")
    readers = [scalar_reader(ctx, ctx.operands[index], ctx.niro_operands[index]) for index in range(5)]
    out = lower_scalar_type(result.element_type)

    def body(position, _elements):
        row, column = (as_i64(index) for index in position)
        count, dft_length, sample_rate, low, high = (read() for read in readers)
        low_mel, high_mel = _mel(low, scalars[3]), _mel(high, scalars[4])
        count_f = arith.SIToFPOp(f64, count).result
        step = _div(_sub(high_mel, low_mel), _add(count_f, _float(f64, 2.0)))
        scale = arith.SIToFPOp(f64, arith.AddIOp(dft_length, _int(dft_length.type, 1)).result).result
        rate = arith.SIToFPOp(f64, sample_rate).result

        def mel_bin(offset: int) -> mlir_ir.Value:
            k = arith.SIToFPOp(f64, arith.AddIOp(column, _int(i64, offset)).result).result
            frequency = _add(_mul(k, step), low_mel)
            exponent = _mul(_div(frequency, _float(f64, 2595.0)), _float(f64, _LN10))
            hertz = _mul(_float(f64, 700.0), math.ExpM1Op(exponent).result)
            return arith.FPToSIOp(i64, _floor_divide(_mul(scale, hertz), rate)).result

        left, center, right = mel_bin(0), mel_bin(1), mel_bin(2)

        def ratio(numerator, denominator):
            return _div(arith.SIToFPOp(f64, numerator).result, arith.SIToFPOp(f64, denominator).result)

        rise = ratio(arith.SubIOp(row, left).result, arith.SubIOp(center, left).result)
        fall = ratio(arith.SubIOp(right, row).result, arith.SubIOp(right, center).result)
        flat = _icmp("eq", left, center)
        rising = _and(_not(flat), _and(_icmp("sle", left, row), _icmp("sle", row, center)))
        peak = _and(flat, _icmp("eq", row, center))
        falling = _and(_icmp("sgt", right, center), _and(_icmp("sle", center, row), _icmp("slt", row, right)))
        value = arith.SelectOp(peak, _float(f64, 1.0), _float(f64, 0.0)).result
        value = arith.SelectOp(rising, rise, value).result
        value = arith.SelectOp(falling, fall, value).result
        return _convert(value, out, result.element_type)

    return gather_generic(ctx, result, [None, None], body)


def _mel(hertz: mlir_ir.Value, scalar: ScalarType) -> mlir_ir.Value:
    """f64(2595 * log1p(hertz / 700)) / ln 10, the first three steps in `hertz`'s type (NumPy
    computes a float16 log1p in float32 and rounds it back)."""
    element = hertz.type
    scaled = _div(hertz, _float(element, 700.0))
    if scalar is ScalarType.F16:
        f32 = mlir_ir.F32Type.get()
        logged = arith.TruncFOp(element, math.Log1pOp(arith.ExtFOp(f32, scaled).result).result).result
    else:
        logged = math.Log1pOp(scaled).result
    mel = _mul(_float(element, 2595.0), logged)
    if scalar is not ScalarType.F64:
        mel = arith.ExtFOp(mlir_ir.F64Type.get(), mel).result
    return _div(mel, _float(mlir_ir.F64Type.get(), _LN10))


def _floor_divide(numerator: mlir_ir.Value, denominator: mlir_ir.Value) -> mlir_ir.Value:
    """NumPy's float `//` for a positive integral denominator: the exact floor of the quotient
    (the rounded quotient's floor, moved by one where it is off; the products are exact)."""
    f64 = numerator.type
    quotient = math.FloorOp(_div(numerator, denominator)).result
    one = _float(f64, 1.0)
    above = arith.CmpFOp(arith.CmpFPredicate.OGT, _mul(quotient, denominator), numerator).result
    below = arith.CmpFOp(arith.CmpFPredicate.OLE, _mul(_add(quotient, one), denominator), numerator).result
    quotient = arith.SelectOp(above, _sub(quotient, one), quotient).result
    return arith.SelectOp(below, _add(quotient, one), quotient).result


def _convert(value: mlir_ir.Value, out: mlir_ir.Type, scalar: ScalarType) -> mlir_ir.Value:
    """An f64 weight as the output type (`astype`: floats round, integers truncate)."""
    if scalar is ScalarType.F64:
        return value
    if scalar.is_float:
        return arith.TruncFOp(out, value).result
    if scalar.is_unsigned_integer:
        return arith.FPToUIOp(out, value).result
    return arith.FPToSIOp(out, value).result


def _widen(value: mlir_ir.Value, i64: mlir_ir.Type) -> mlir_ir.Value:
    return value if value.type == i64 else arith.ExtSIOp(i64, value).result


def _int(type_: mlir_ir.Type, value: int) -> mlir_ir.Value:
    return arith.ConstantOp(type_, mlir_ir.IntegerAttr.get(type_, value)).result


def _float(type_: mlir_ir.Type, value: float) -> mlir_ir.Value:
    return arith.ConstantOp(type_, mlir_ir.FloatAttr.get(type_, value)).result


def _icmp(predicate: str, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.CmpIOp(getattr(arith.CmpIPredicate, predicate), lhs, rhs).result


def _and(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.AndIOp(lhs, rhs).result


def _not(value: mlir_ir.Value) -> mlir_ir.Value:
    true = arith.ConstantOp(value.type, mlir_ir.IntegerAttr.get(value.type, 1)).result
    return arith.XOrIOp(value, true).result


def _add(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.AddFOp(lhs, rhs).result


def _sub(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.SubFOp(lhs, rhs).result


def _mul(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.MulFOp(lhs, rhs).result


def _div(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.DivFOp(lhs, rhs).result
