"""Cast, CastLike and BitCast, and `convert_element`: one element from one Niro scalar type to
another.

Conversions follow ONNX's Cast rules: float -> float rounds to nearest (inf when out of range);
float -> integer truncates toward zero; integer -> integer wraps (keeps the low bits), widening
by the *source's* signedness; bool is 0/1 both ways; x -> bool is x != 0 (NaN is true).

NOTE: ONNX leaves float -> integer undefined for NaN and out-of-range values; here they saturate
(NaN -> 0, too large -> the type's max, too small -> its min) instead of being LLVM poison, so a
NaN can never become an arbitrary number. Strings have no Niro type: the frontend refuses them.

The narrow types follow ONNX's reference, which converts with ml_dtypes:
- FP8 targets (E4M3FN, E5M2 and the FNUZ pair) round to nearest even from f32 (`arith.truncf`;
  f16/bf16/f64 go through f32, exactly except for f64's double rounding); with `saturate` (the
  default) the value is first clamped to the type's finite range, so an overflow or infinity
  gives the largest finite value; without it an overflow gives inf (E5M2) or NaN (the others).
- E8M0 (MX scales, a power of two) is built from the f32 exponent bits, rounded as `round_mode`
  says (up, nearest or down), saturating at 2^127 or not, as `onnx.numpy_helper.to_float8e8m0`.
- FP4 (E2M1) rounds to nearest even and saturates at +-6, NaN giving a zero: computed by
  comparisons with the midpoints, as IREE's own (3.13) `truncf` to f4E2M1FN rounds 0.75 to 0.
- INT4/UINT4/INT2/UINT2 targets from a float truncate toward zero to a 32-bit integer and keep
  its low bits (wrap), NaN and values beyond 32 bits giving 0; from an integer they keep the low
  bits too. ONNX leaves out-of-range values undefined; this is what onnxruntime's CPU Cast and
  the reference with ml_dtypes 0.6 (the pinned version) give: INT4 of -9 is 7, of 8 is -8, of
  100 is 4. (ml_dtypes 0.7 gives 0 for any value out of range.)
- A sub-byte element lives in an i8 (backends/mlir/types.py); reading it sign-extends (I4/I2) or
  masks (U4/U2/FP4) its low bits first, so a caller's array may hold either form.

BitCast (opset 26) keeps the bits: `arith.bitcast` per element between types of one width (ONNX
allows no other); BOOL, one byte in ONNX, reads as 0/1 in U8/I8 and is true for any non-zero byte.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, math, mlir_ir
from ..builders import constant, convert, elementwise
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type

__all__ = ["convert_element"]

def _bits(scalar: ScalarType) -> int:
    return 1 if scalar.is_bool else scalar.bit_width


def convert_element(
    value: mlir_ir.Value,
    source: ScalarType,
    target: ScalarType,
    *,
    saturate: bool = True,
    round_mode: str = "up",
) -> mlir_ir.Value:
    """`value` (one element of Niro type `source`) as an element of type `target`.

    `saturate` and `round_mode` are Cast's attributes: they concern FP8 and E8M0 targets only."""
    if source is target:
        return value
    if source.is_sub_byte or source.is_narrow_float:
        value, source = _widen_narrow(value, source)
        if source is target:
            return value
    if target.is_sub_byte or target.is_narrow_float:
        return _narrow(value, source, target, saturate=saturate, round_mode=round_mode)
    target_type = lower_scalar_type(target)
    if target.is_bool:
        zero = constant(lower_scalar_type(source), 0)
        if source.is_float:
            return arith.CmpFOp(arith.CmpFPredicate.UNE, value, zero).result
        return arith.CmpIOp(arith.CmpIPredicate.ne, value, zero).result
    if source.is_bool:
        return arith.SelectOp(
            value, constant(lower_scalar_type(target), 1), constant(lower_scalar_type(target), 0)
        ).result
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


_F32 = ScalarType.F32
_I8 = ScalarType.I8
_I32 = ScalarType.I32
_F8_FINITE_MAX = {
    ScalarType.F8E4M3FN: 448.0,
    ScalarType.F8E5M2: 57344.0,
    ScalarType.F8E4M3FNUZ: 240.0,
    ScalarType.F8E5M2FNUZ: 57344.0,
}


def _i8_constant(number: int) -> mlir_ir.Value:
    return constant(lower_scalar_type(_I8), number)


def _widen_narrow(value: mlir_ir.Value, source: ScalarType) -> tuple[mlir_ir.Value, ScalarType]:
    """A narrow element as the smallest ordinary type that holds every value exactly: I8 (the
    signed sub-byte integers), U8 (the unsigned ones) or F32 (FP8, FP4, E8M0)."""
    if source.is_sub_byte and not source.is_float:
        spare = 8 - source.bit_width
        if source.is_signed_integer:
            shifted = arith.ShLIOp(value, _i8_constant(spare)).result
            return arith.ShRSIOp(shifted, _i8_constant(spare)).result, ScalarType.I8
        return arith.AndIOp(value, _i8_constant((1 << source.bit_width) - 1)).result, ScalarType.U8
    if source is ScalarType.F4E2M1FN:
        code = arith.TruncIOp(mlir_ir.IntegerType.get_signless(4), value).result
        as_f4 = arith.BitcastOp(mlir_ir.Float4E2M1FNType.get(), code).result
        return arith.ExtFOp(mlir_ir.F32Type.get(), as_f4).result, _F32
    if source is ScalarType.F8E8M0FNU:
        return _e8m0_to_f32(value), _F32
    return arith.ExtFOp(mlir_ir.F32Type.get(), value).result, _F32


def _e8m0_to_f32(value: mlir_ir.Value) -> mlir_ir.Value:
    """2^(e - 127) from the exponent byte e: the f32 exponent field, except e = 0 (2^-127, an
    f32 subnormal) and e = 255 (NaN)."""
    i32 = mlir_ir.IntegerType.get_signless(32)
    byte = arith.BitcastOp(mlir_ir.IntegerType.get_signless(8), value).result
    exponent = arith.ExtUIOp(i32, byte).result
    bits = arith.ShLIOp(exponent, constant(lower_scalar_type(_I32), 23)).result
    is_zero = arith.CmpIOp(
        arith.CmpIPredicate.eq, exponent, constant(lower_scalar_type(_I32), 0)
    ).result
    is_nan = arith.CmpIOp(
        arith.CmpIPredicate.eq, exponent, constant(lower_scalar_type(_I32), 255)
    ).result
    bits = arith.SelectOp(is_zero, constant(lower_scalar_type(_I32), 0x00400000), bits).result
    bits = arith.SelectOp(is_nan, constant(lower_scalar_type(_I32), 0x7FC00000), bits).result
    return arith.BitcastOp(mlir_ir.F32Type.get(), bits).result


def _narrow(
    value: mlir_ir.Value, source: ScalarType, target: ScalarType, *, saturate: bool, round_mode: str
) -> mlir_ir.Value:
    """An element of an ordinary type converted to a narrow one (the module docstring's rules)."""
    if not target.is_float:  # a sub-byte integer, kept in an i8
        if source.is_float:
            as_f32 = convert_element(value, source, _F32)
            f32 = lower_scalar_type(_F32)
            inside = arith.AndIOp(  # an i32 (false for NaN)
                arith.CmpFOp(arith.CmpFPredicate.OGE, as_f32, constant(f32, -(2.0**31))).result,
                arith.CmpFOp(arith.CmpFPredicate.OLT, as_f32, constant(f32, 2.0**31)).result,
            ).result
            whole = arith.FPToSIOp(mlir_ir.IntegerType.get_signless(32), as_f32).result
            byte = arith.TruncIOp(mlir_ir.IntegerType.get_signless(8), whole).result
            wrapped = _widen_narrow(byte, target)[0]  # the low bits, re-extended
            return arith.SelectOp(inside, wrapped, _i8_constant(0)).result
        byte = convert_element(value, source, _I8)
        return _widen_narrow(byte, target)[0]  # the low bits, re-extended
    as_f32 = convert_element(value, source, _F32)
    if target is ScalarType.F4E2M1FN:
        return _f32_to_f4(as_f32)
    if target is ScalarType.F8E8M0FNU:
        return _f32_to_e8m0(as_f32, saturate=saturate, round_mode=round_mode)
    if saturate:
        limit = _F8_FINITE_MAX[target]
        as_f32 = arith.MinimumFOp(as_f32, constant(lower_scalar_type(_F32), limit)).result
        as_f32 = arith.MaximumFOp(as_f32, constant(lower_scalar_type(_F32), -limit)).result
    return arith.TruncFOp(lower_scalar_type(target), as_f32).result


# |x| at or above each threshold adds one to FP4's magnitude code (0, 0.5, 1, 1.5, 2, 3, 4, 6):
# the midpoints, a tie going to the even code (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, ...).
_F4_THRESHOLDS = (
    (0.25, False),
    (0.75, True),
    (1.25, False),
    (1.75, True),
    (2.5, False),
    (3.5, True),
    (5.0, False),
)


def _f32_to_f4(value: mlir_ir.Value) -> mlir_ir.Value:
    """FP4's code of an f32, in an i8: sign bit 8, magnitude code 0-7 (saturating; NaN -> 0)."""
    i8 = mlir_ir.IntegerType.get_signless(8)
    magnitude = math.AbsFOp(value).result
    code = _i8_constant(0)
    for threshold, inclusive in _F4_THRESHOLDS:
        predicate = arith.CmpFPredicate.OGE if inclusive else arith.CmpFPredicate.OGT
        passed = arith.CmpFOp(
            predicate, magnitude, constant(lower_scalar_type(_F32), threshold)
        ).result
        code = arith.AddIOp(code, arith.ExtUIOp(i8, passed).result).result
    bits = arith.BitcastOp(mlir_ir.IntegerType.get_signless(32), value).result
    negative = arith.CmpIOp(
        arith.CmpIPredicate.slt, bits, constant(lower_scalar_type(_I32), 0)
    ).result
    is_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
    negative = arith.AndIOp(negative, arith.XOrIOp(is_nan, _true()).result).result
    return arith.SelectOp(negative, arith.OrIOp(code, _i8_constant(8)).result, code).result


def _true() -> mlir_ir.Value:
    i1 = mlir_ir.IntegerType.get_signless(1)
    return arith.ConstantOp(i1, mlir_ir.IntegerAttr.get(i1, 1)).result


def _f32_to_e8m0(value: mlir_ir.Value, *, saturate: bool, round_mode: str) -> mlir_ir.Value:
    """onnx.numpy_helper.to_float8e8m0: the f32 exponent field, rounded by the mantissa bits
    as `round_mode` says (no increment past 254 when saturating); NaN/inf give 255."""
    i32 = mlir_ir.IntegerType.get_signless(32)
    bits = arith.BitcastOp(i32, value).result

    def const(number: int) -> mlir_ir.Value:
        return constant(lower_scalar_type(_I32), number)

    def nonzero(mask: int) -> mlir_ir.Value:
        return arith.CmpIOp(
            arith.CmpIPredicate.ne, arith.AndIOp(bits, const(mask)).result, const(0)
        ).result

    exponent = arith.AndIOp(arith.ShRUIOp(bits, const(23)).result, const(0xFF)).result
    special = arith.CmpIOp(arith.CmpIPredicate.eq, exponent, const(0xFF)).result
    if round_mode == "up":
        round_up = nonzero(0x7FFFFF)
    elif round_mode == "nearest":
        guard = nonzero(0x400000)
        rest = arith.OrIOp(nonzero(0x200000), nonzero(0x1FFFFF)).result
        lsb = arith.CmpIOp(arith.CmpIPredicate.ugt, exponent, const(0)).result
        round_up = arith.AndIOp(guard, arith.OrIOp(rest, lsb).result).result
    elif round_mode == "down":
        round_up = None
    else:
        raise ValueError(f"round_mode must be 'up', 'nearest' or 'down', got {round_mode!r}")
    if round_up is not None:
        if saturate:
            at_max = arith.CmpIOp(arith.CmpIPredicate.eq, exponent, const(0xFE)).result
            round_up = arith.AndIOp(round_up, arith.XOrIOp(at_max, _true()).result).result
        exponent = arith.AddIOp(exponent, arith.ExtUIOp(i32, round_up).result).result
    exponent = arith.SelectOp(special, const(0xFF), exponent).result
    byte = arith.TruncIOp(mlir_ir.IntegerType.get_signless(8), exponent).result
    return arith.BitcastOp(mlir_ir.Float8E8M0FNUType.get(), byte).result


def _float_to_float(value: mlir_ir.Value, source: ScalarType, target: ScalarType) -> mlir_ir.Value:
    if {source, target} == {ScalarType.F16, ScalarType.BF16}:
        value = arith.ExtFOp(lower_scalar_type(ScalarType.F32), value).result
        source = ScalarType.F32
    return convert(value, lower_scalar_type(target))


def _float_to_integer(value: mlir_ir.Value, source: ScalarType, target: ScalarType) -> mlir_ir.Value:
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
    too_high = arith.CmpFOp(
        arith.CmpFPredicate.OGE, value, constant(lower_scalar_type(source), too_high_bound)
    ).result
    too_low = arith.CmpFOp(
        arith.CmpFPredicate.OLT, value, constant(lower_scalar_type(source), too_low_bound)
    ).result
    is_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
    result = arith.SelectOp(too_high, _integer_constant(target, high), converted).result
    result = arith.SelectOp(too_low, _integer_constant(target, low), result).result
    return arith.SelectOp(is_nan, _integer_constant(target, 0), result).result


def _integer_constant(scalar: ScalarType, number: int) -> mlir_ir.Value:
    """An integer constant given by its mathematical value (unsigned values above the signed
    max are stored as their two's-complement bits, as signless MLIR integers are)."""
    bits = _bits(scalar)
    if number >= 1 << (bits - 1):
        number -= 1 << bits
    return constant(lower_scalar_type(scalar), number)


def _lower_conversion(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    source = element_type(ctx.niro_operands[0])
    target = element_type(ctx.niro_results[0])
    saturate = bool(attribute(ctx, "saturate", 1))
    round_mode = attribute(ctx, "round_mode", "up")
    if round_mode not in ("up", "nearest", "down"):
        raise ctx.error(f"round_mode must be 'up', 'nearest' or 'down', got {round_mode!r}")
    if source is target and ctx.operands[0].type == ctx.result_types[0]:
        return [ctx.operands[0]]  # a cast to its own type: no copy (a device dispatch)
    inputs = [(ctx.operands[0], ctx.niro_operands[0])]
    return [
        elementwise(
            ctx,
            lambda elements: convert_element(
                elements[0], source, target, saturate=saturate, round_mode=round_mode
            ),
            inputs=inputs,
        )
    ]


@register_lowering("onnx.Cast", since=1)
def _lower_cast(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """The target type is the result's (shape inference derived it from `to`); `saturate` and
    `round_mode` concern FP8 and E8M0 targets."""
    if len(ctx.operands) != 1:
        raise ctx.error(f"expected 1 operand, got {len(ctx.operands)}")
    return _lower_conversion(ctx)


@register_lowering("onnx.CastLike", since=15)
def _lower_cast_like(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    if len(ctx.operands) != 2:
        raise ctx.error(f"expected 2 operands, got {len(ctx.operands)}")
    if element_type(ctx.niro_operands[1]) is not element_type(ctx.niro_results[0]):
        raise ctx.error("result element type must be the element type of 'target_type'")
    return _lower_conversion(ctx)


@register_lowering("onnx.BitCast", since=26)
def _lower_bitcast(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """The target type is the result's (shape inference derived it from `to`)."""
    if len(ctx.operands) != 1:
        raise ctx.error(f"expected 1 operand, got {len(ctx.operands)}")
    source = element_type(ctx.niro_operands[0])
    target = element_type(ctx.niro_results[0])
    if source.bit_width != target.bit_width:
        raise ctx.error(
            f"cannot reinterpret {source.spelling} ({source.bit_width} bits) as "
            f"{target.spelling} ({target.bit_width} bits): BitCast needs one bit width"
        )
    if source.is_sub_byte or target.is_sub_byte:
        raise ctx.error(f"BitCast of {source.spelling} to {target.spelling} is not supported")
    inputs = [(ctx.operands[0], ctx.niro_operands[0])]
    return [
        elementwise(ctx, lambda elements: _reinterpret(elements[0], source, target), inputs=inputs)
    ]


def _reinterpret(value: mlir_ir.Value, source: ScalarType, target: ScalarType) -> mlir_ir.Value:
    """One element's bits read as `target` (same width; a BOOL is the byte 0 or 1)."""
    if source.is_bool or target.is_bool:
        return convert_element(value, source, target)  # i1 <-> the byte: 0/1, non-zero is true
    target_type = lower_scalar_type(target)
    if value.type == target_type:
        return value  # signed <-> unsigned: the same signless MLIR integer
    return arith.BitcastOp(target_type, value).result
