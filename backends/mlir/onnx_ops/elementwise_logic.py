"""Element-wise ONNX comparisons, logic, bit operations, Where, IsNaN and IsInf.

Comparisons are ordered for floats (a NaN operand compares false, as in NumPy) and pick signed
or unsigned integer predicates from the Niro element type. Results of comparisons, logic ops,
IsNaN and IsInf are BOOL (i1).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, mlir_ir
from ..builders import elementwise
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .common import attribute, element_type
from .elementwise import (
    FLOATS,
    NUMBERS,
    ElementMath,
    elementwise_rule,
    is_float_type,
    is_number_type,
    require_element,
)

__all__: list[str] = []


def _is_bool(scalar: ScalarType) -> bool:
    return scalar.is_bool


def _is_integer(scalar: ScalarType) -> bool:
    return scalar.is_integer


def _is_number_or_bool(scalar: ScalarType) -> bool:
    return scalar.is_bool or scalar.is_float or scalar.is_integer


BOOLS = "bool"
INTEGERS = "an integer type"


# -- comparisons ----------------------------------------------------------------------------------


@elementwise_rule("Equal", since=1, allowed=_is_number_or_bool, what="a number or bool", operands=2)
def _equal(ctx, kit: ElementMath, lhs, rhs):
    return kit.eq(lhs, rhs)


@elementwise_rule("Less", since=1, allowed=is_number_type, what=NUMBERS, operands=2)
def _less(ctx, kit: ElementMath, lhs, rhs):
    return kit.lt(lhs, rhs)


@elementwise_rule("LessOrEqual", since=12, allowed=is_number_type, what=NUMBERS, operands=2)
def _less_or_equal(ctx, kit: ElementMath, lhs, rhs):
    return kit.le(lhs, rhs)


@elementwise_rule("Greater", since=1, allowed=is_number_type, what=NUMBERS, operands=2)
def _greater(ctx, kit: ElementMath, lhs, rhs):
    return kit.gt(lhs, rhs)


@elementwise_rule("GreaterOrEqual", since=12, allowed=is_number_type, what=NUMBERS, operands=2)
def _greater_or_equal(ctx, kit: ElementMath, lhs, rhs):
    return kit.ge(lhs, rhs)


# -- logic on BOOL ----------------------------------------------------------------------------------


@elementwise_rule("Not", since=1, allowed=_is_bool, what=BOOLS, operands=1)
def _not(ctx, kit: ElementMath, x):
    return arith.XOrIOp(x, kit.const(True)).result


@elementwise_rule("And", since=1, allowed=_is_bool, what=BOOLS, operands=2)
def _and(ctx, kit: ElementMath, lhs, rhs):
    return arith.AndIOp(lhs, rhs).result


@elementwise_rule("Or", since=1, allowed=_is_bool, what=BOOLS, operands=2)
def _or(ctx, kit: ElementMath, lhs, rhs):
    return arith.OrIOp(lhs, rhs).result


@elementwise_rule("Xor", since=1, allowed=_is_bool, what=BOOLS, operands=2)
def _xor(ctx, kit: ElementMath, lhs, rhs):
    return arith.XOrIOp(lhs, rhs).result


# -- bit operations on integers ----------------------------------------------------------------------


@elementwise_rule("BitwiseNot", since=18, allowed=_is_integer, what=INTEGERS, operands=1)
def _bitwise_not(ctx, kit: ElementMath, x):
    return arith.XOrIOp(x, kit.const(-1)).result


@elementwise_rule("BitwiseAnd", since=18, allowed=_is_integer, what=INTEGERS, operands=2)
def _bitwise_and(ctx, kit: ElementMath, lhs, rhs):
    return arith.AndIOp(lhs, rhs).result


@elementwise_rule("BitwiseOr", since=18, allowed=_is_integer, what=INTEGERS, operands=2)
def _bitwise_or(ctx, kit: ElementMath, lhs, rhs):
    return arith.OrIOp(lhs, rhs).result


@elementwise_rule("BitwiseXor", since=18, allowed=_is_integer, what=INTEGERS, operands=2)
def _bitwise_xor(ctx, kit: ElementMath, lhs, rhs):
    return arith.XOrIOp(lhs, rhs).result


@elementwise_rule("BitShift", since=11, allowed=_is_integer, what=INTEGERS, operands=2)
def _bit_shift(ctx, kit: ElementMath, x, amount):
    """Opset 28's rules (earlier opsets only had unsigned types and left big shifts undefined):
    a shift by a negative amount or by the bit width or more gives the sign fill alone (-1 for a
    right shift of a negative signed x, else 0); right shifts of signed types are arithmetic."""
    direction = attribute(ctx, "direction")
    bits = mlir_ir.IntegerType(kit.type).width
    # An unsigned compare also catches negative amounts (they read as huge unsigned numbers).
    in_range = arith.CmpIOp(arith.CmpIPredicate.ult, amount, kit.const(bits)).result
    zero = kit.zero()
    if direction == "LEFT":
        return kit.select(in_range, arith.ShLIOp(x, amount).result, zero)
    if direction == "RIGHT":
        if kit.is_unsigned:
            return kit.select(in_range, arith.ShRUIOp(x, amount).result, zero)
        fill = kit.select(kit.lt(x, zero), kit.const(-1), zero)
        return kit.select(in_range, arith.ShRSIOp(x, amount).result, fill)
    raise ctx.error(f"attribute 'direction' must be 'LEFT' or 'RIGHT', got {direction!r}")


# -- float classification -----------------------------------------------------------------------------


@elementwise_rule("IsNaN", since=9, allowed=is_float_type, what=FLOATS, operands=1)
def _is_nan(ctx, kit: ElementMath, x):
    return arith.CmpFOp(arith.CmpFPredicate.UNO, x, x).result


@elementwise_rule("IsInf", since=10, allowed=is_float_type, what=FLOATS, operands=1)
def _is_inf(ctx, kit: ElementMath, x):
    detect_positive = attribute(ctx, "detect_positive", 1)
    detect_negative = attribute(ctx, "detect_negative", 1)
    result = ElementMath(ScalarType.BOOL).const(False)
    if detect_positive:
        result = arith.OrIOp(result, kit.eq(x, kit.const(float("inf")))).result
    if detect_negative:
        result = arith.OrIOp(result, kit.eq(x, kit.const(float("-inf")))).result
    return result


# -- Where -----------------------------------------------------------------------------------------------


@register_lowering("onnx.Where", since=9)
def _lower_where(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """select(condition, x, y) with all three operands broadcast together."""
    if len(ctx.operands) != 3:
        raise ctx.error(f"expected 3 operands, got {len(ctx.operands)}")
    require_element(ctx, ctx.niro_operands[0], _is_bool, BOOLS)
    if element_type(ctx.niro_operands[1]) is not element_type(ctx.niro_operands[2]):
        raise ctx.error("operands 'X' and 'Y' must have the same element type")
    return [elementwise(ctx, lambda elements: arith.SelectOp(*elements).result)]
