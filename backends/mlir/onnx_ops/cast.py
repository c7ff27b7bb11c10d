"""Cast, CastLike and BitCast, and `convert_element`: one element from one Niro scalar type to
another.

Conversions follow ONNX's Cast rules: float -> float rounds to nearest (inf when out of range);
float -> integer truncates toward zero; integer -> integer wraps (keeps the low bits), widening
by the *source's* signedness; bool is 0/1 both ways; x -> bool is x != 0 (NaN is true).

NOTE: ONNX leaves float -> integer undefined for NaN and out-of-range values; here they saturate
(NaN -> 0, too large -> the type's max, too small -> its min) instead of being LLVM poison, so a
NaN can never become an arbitrary number. String, float8, int4 and friends have no Niro type:
the frontend refuses them at import.

BitCast (opset 26) keeps the bits: `arith.bitcast` per element between types of one width (ONNX
allows no other); BOOL, one byte in ONNX, reads as 0/1 in U8/I8 and is true for any non-zero byte.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, ir
from ..context import LoweringRuleContext, register_lowering
from ..types import lower_scalar_type
from .common import element_type

__all__ = ["convert_element"]

_FLOAT_BITS = {ScalarType.F16: 16, ScalarType.BF16: 16, ScalarType.F32: 32, ScalarType.F64: 64}


def _bits(scalar: ScalarType) -> int:
    return 1 if scalar.is_bool else 8 * scalar.byte_width


def convert_element(value: ir.Value, source: ScalarType, target: ScalarType) -> ir.Value:
    """`value` (one element of Niro type `source`) as an element of type `target`."""
    if source is target:
        return value
    target_type = lower_scalar_type(target)
    if target.is_bool:
        zero = _constant(source, 0)
        if source.is_float:
            return arith.CmpFOp(arith.CmpFPredicate.UNE, value, zero).result
        return arith.CmpIOp(arith.CmpIPredicate.ne, value, zero).result
    if source.is_bool:
        return arith.SelectOp(value, _constant(target, 1), _constant(target, 0)).result
    if source.is_float and target.is_float:
        return _float_to_float(value, source, target)
    if source.is_float:
        return _float_to_integer(value, source, target)
    if target.is_float:
        op_class = arith.UIToFPOp if source.is_unsigned_integer else arith.SIToFPOp
        return op_class(target_type, value).result
    source_bits, target_bits = _bits(source), _bits(target)
    if source_bits == target_bits:
        return value  # same bits, another reading
    if source_bits > target_bits:
        return arith.TruncIOp(target_type, value).result
    op_class = arith.ExtUIOp if source.is_unsigned_integer else arith.ExtSIOp
    return op_class(target_type, value).result


def _constant(scalar: ScalarType, number: float) -> ir.Value:
    type_ = lower_scalar_type(scalar)
    if scalar.is_float:
        return arith.ConstantOp(type_, ir.FloatAttr.get(type_, float(number))).result
    return arith.ConstantOp(type_, ir.IntegerAttr.get(type_, int(number))).result


def _float_to_float(value: ir.Value, source: ScalarType, target: ScalarType) -> ir.Value:
    if {source, target} == {ScalarType.F16, ScalarType.BF16}:
        value = arith.ExtFOp(lower_scalar_type(ScalarType.F32), value).result
        source = ScalarType.F32
    op_class = arith.ExtFOp if _FLOAT_BITS[target] > _FLOAT_BITS[source] else arith.TruncFOp
    return op_class(lower_scalar_type(target), value).result


def _float_to_integer(value: ir.Value, source: ScalarType, target: ScalarType) -> ir.Value:
    """Truncation toward zero, saturating (see the module note)."""
    if source in (ScalarType.F16, ScalarType.BF16):
        value = arith.ExtFOp(lower_scalar_type(ScalarType.F32), value).result
        source = ScalarType.F32
    bits = _bits(target)
    low, high = target.integer_range
    if target.is_unsigned_integer:
        converted = arith.FPToUIOp(lower_scalar_type(target), value).result
        too_low_bound = 0.0
    else:
        converted = arith.FPToSIOp(lower_scalar_type(target), value).result
        too_low_bound = float(low)
    # 2**(bits - 1) and 2**bits are exact in every float type (or inf, which is fine).
    too_high_bound = float(2 ** (bits if target.is_unsigned_integer else bits - 1))
    too_high = arith.CmpFOp(arith.CmpFPredicate.OGE, value, _constant(source, too_high_bound)).result
    too_low = arith.CmpFOp(arith.CmpFPredicate.OLT, value, _constant(source, too_low_bound)).result
    is_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
    result = arith.SelectOp(too_high, _integer_constant(target, high), converted).result
    result = arith.SelectOp(too_low, _integer_constant(target, low), result).result
    return arith.SelectOp(is_nan, _integer_constant(target, 0), result).result


def _integer_constant(scalar: ScalarType, number: int) -> ir.Value:
    """An integer constant given by its mathematical value (unsigned values above the signed
    max are stored as their two's-complement bits, as signless MLIR integers are)."""
    bits = _bits(scalar)
    if number >= 1 << (bits - 1):
        number -= 1 << bits
    return _constant(scalar, number)


def _lower_conversion(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    source = element_type(ctx.niro_operands[0])
    target = element_type(ctx.niro_results[0])
    inputs = [(ctx.operands[0], ctx.niro_operands[0])]
    return [ctx.elementwise(lambda elements: convert_element(elements[0], source, target), inputs=inputs)]


@register_lowering("onnx.Cast", since=1)
def _lower_cast(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    """The target type is the result's (shape inference derived it from `to`); `saturate` and
    `round_mode` only concern float8 targets, which never get here."""
    if len(ctx.operands) != 1:
        raise ctx.error(f"expected 1 operand, got {len(ctx.operands)}")
    return _lower_conversion(ctx)


@register_lowering("onnx.CastLike", since=15)
def _lower_cast_like(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    if len(ctx.operands) != 2:
        raise ctx.error(f"expected 2 operands, got {len(ctx.operands)}")
    if element_type(ctx.niro_operands[1]) is not element_type(ctx.niro_results[0]):
        raise ctx.error("result element type must be the element type of 'target_type'")
    return _lower_conversion(ctx)


@register_lowering("onnx.BitCast", since=26)
def _lower_bitcast(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    """The target type is the result's (shape inference derived it from `to`)."""
    if len(ctx.operands) != 1:
        raise ctx.error(f"expected 1 operand, got {len(ctx.operands)}")
    source = element_type(ctx.niro_operands[0])
    target = element_type(ctx.niro_results[0])
    if source.byte_width != target.byte_width:
        raise ctx.error(
            f"cannot reinterpret {source.spelling} ({8 * source.byte_width} bits) as "
            f"{target.spelling} ({8 * target.byte_width} bits): BitCast needs one bit width"
        )
    inputs = [(ctx.operands[0], ctx.niro_operands[0])]
    return [ctx.elementwise(lambda elements: _reinterpret(elements[0], source, target), inputs=inputs)]


def _reinterpret(value: ir.Value, source: ScalarType, target: ScalarType) -> ir.Value:
    """One element's bits read as `target` (same width; a BOOL is the byte 0 or 1)."""
    if source.is_bool or target.is_bool:
        return convert_element(value, source, target)  # i1 <-> the byte: 0/1, non-zero is true
    target_type = lower_scalar_type(target)
    if value.type == target_type:
        return value  # signed <-> unsigned: the same signless MLIR integer
    return arith.BitcastOp(target_type, value).result
