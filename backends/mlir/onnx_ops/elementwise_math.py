"""Element-wise ONNX arithmetic with NumPy broadcasting: Add/Sub/Mul/Div, Pow, Mod, the variadic
Min/Max/Sum/Mean, and Clip.

Add and Mul are Niro's own ops; `onnx.Add`/`onnx.Mul` only arrive for what the frontend leaves
generic (legacy `axis` broadcasting before opset 7), and both are lowered by one builder
(`builders.binary_arithmetic`). Integer results follow ONNX's reference
(NumPy): division truncates toward zero (unsigned division for U* types), Mod with fmod=0 takes
the divisor's sign, an integer divisor of 0 gives 0 instead of trapping.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, math, mlir_ir
from ..builders import Arithmetic, binary_arithmetic, elementwise
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .cast import convert_element
from .common import attribute, element_type, input_value, opset
from .elementwise import (
    FLOATS,
    NUMBERS,
    ElementMath,
    FloatMath,
    element_math,
    elementwise_rule,
    is_float_type,
    is_number_type,
    legacy_broadcast_check,
    require_element,
    shared_element,
)

__all__: list[str] = []


# -- binary arithmetic ------------------------------------------------------------------------


def _arithmetic_rule(name: str, operation: Arithmetic) -> None:
    """`onnx.<name>` as `binary_arithmetic`, f16/bf16 computed in f32 as the other kernels here."""

    @register_lowering(f"onnx.{name}", since=1)
    def rule(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
        shared_element(ctx, is_number_type, NUMBERS, operands=2)
        return [binary_arithmetic(ctx, operation, halves_in_f32=True)]

    rule.__name__ = rule.__qualname__ = f"lower_{name}"


_arithmetic_rule("Add", "add")
_arithmetic_rule("Mul", "mul")


@elementwise_rule("Sub", since=1, allowed=is_number_type, what=NUMBERS, operands=2)
def _sub(ctx, kit: ElementMath, lhs, rhs):
    return kit.sub(lhs, rhs)


@elementwise_rule("Div", since=1, allowed=is_number_type, what=NUMBERS, operands=2)
def _div(ctx, kit: ElementMath, lhs, rhs):
    return kit.div(lhs, rhs)


@elementwise_rule("Mod", since=10, allowed=is_number_type, what=NUMBERS, operands=2)
def _mod(ctx, kit: ElementMath, lhs, rhs):
    """fmod=1: C's fmod (sign of the dividend). fmod=0: the divisor's sign, as NumPy's mod
    (floats follow the special cases of opset 28, which earlier opsets left undefined)."""
    fmod = attribute(ctx, "fmod", 0)
    if fmod not in (0, 1):
        raise ctx.error(f"attribute 'fmod' must be 0 or 1, got {fmod!r}")
    if kit.scalar is ScalarType.F64:
        # NOTE: arith.remf on f64 becomes a call to libm's fmod, which IREE's CPU runtime lacks;
        # an exact fmod from f64 arithmetic alone needs a loop for quotients >= 2**53.
        raise ctx.error("does not support element type f64 (IREE's CPU backend has no f64 fmod)")
    remainder = kit.rem(lhs, rhs)
    if fmod == 1 or kit.is_unsigned:
        return remainder
    zero = kit.zero()
    signs_differ = arith.XOrIOp(kit.lt(remainder, zero), kit.lt(rhs, zero)).result
    adjust = arith.AndIOp(kit.ne(remainder, zero), signs_differ).result
    adjusted = kit.select(adjust, kit.add(remainder, rhs), remainder)
    if kit.is_float:
        # A zero remainder takes the divisor's sign (NumPy: mod(4., -2.) == -0.).
        signed_zero = math.CopySignOp(zero, rhs).result
        adjusted = kit.select(kit.eq(remainder, zero), signed_zero, adjusted)
    return adjusted


# -- Pow: base and exponent of different types ---------------------------------------------------


@register_lowering("onnx.Pow", since=1)
def _lower_pow(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Float bases: powf in the base's compute type (integer exponents converted). Integer bases
    with integer exponents: exact, wrapping on overflow (see `_integer_pow`). Integer bases with float exponents: computed in f64 and
    truncated toward zero, as NumPy's `power(a, b).astype(a.dtype)`."""
    if len(ctx.operands) != 2:
        raise ctx.error(f"expected 2 operands, got {len(ctx.operands)}")
    legacy_broadcast_check(ctx)
    base = require_element(ctx, ctx.niro_operands[0], is_number_type, NUMBERS)
    exponent = require_element(ctx, ctx.niro_operands[1], is_number_type, NUMBERS)
    known = ctx.constant_operand(1)
    if base.is_float and known is not None and known.size == 1 and float(known.reshape(-1)[0]) == 2.0:
        kit = FloatMath(base)

        def body(elements):
            # x ** 2 (LayerNorm's and RMSNorm's variance as exporters write them) is x * x:
            # the same numbers as powf for every x, without powf's sign and NaN selects.
            x = kit.widen(elements[0])
            return kit.narrow(kit.mul(x, x))

    elif base.is_float:
        kit = FloatMath(base)

        def body(elements):
            x, y = kit.widen(elements[0]), convert_element(elements[1], exponent, kit.scalar)
            return kit.narrow(_float_pow(kit, x, y))

    elif exponent.is_integer:
        if base.is_unsigned_integer:
            raise ctx.error(f"does not support an unsigned base ({base.spelling})")

        def body(elements):
            return _integer_pow(ElementMath(base), elements[0], convert_element(elements[1], exponent, base))

    else:
        wide = FloatMath(ScalarType.F64)

        def body(elements):
            x = convert_element(elements[0], base, ScalarType.F64)
            y = convert_element(elements[1], exponent, ScalarType.F64)
            return convert_element(_float_pow(wide, x, y), ScalarType.F64, base)

    return [elementwise(ctx, body)]


def _integer_pow(kit: ElementMath, base: mlir_ir.Value, exponent: mlir_ir.Value) -> mlir_ir.Value:
    """base ** exponent by square-and-multiply over every exponent bit, unrolled (IREE cannot
    lower math.ipowi). Products wrap as NumPy's do. A negative exponent (an error in NumPy)
    gives 0, or +-1 for a base of +-1 (the integer part of the real result)."""
    one = kit.one()
    result, square, remaining = one, base, exponent
    for _ in range(mlir_ir.IntegerType(kit.type).width - 1):
        odd = kit.ne(arith.AndIOp(remaining, one).result, kit.zero())
        result = kit.select(odd, kit.mul(result, square), result)
        square = kit.mul(square, square)
        remaining = arith.ShRUIOp(remaining, one).result
    exponent_is_odd = kit.ne(arith.AndIOp(exponent, one).result, kit.zero())
    minus_one = kit.const(-1)
    inverse = kit.select(
        kit.eq(base, one),
        one,
        kit.select(kit.eq(base, minus_one), kit.select(exponent_is_odd, minus_one, one), kit.zero()),
    )
    return kit.select(kit.lt(exponent, kit.zero()), inverse, result)


def _float_pow(kit: FloatMath, x: mlir_ir.Value, y: mlir_ir.Value) -> mlir_ir.Value:
    """x ** y as IEEE pow (NumPy): a negative base is allowed when y is an integer (|x| ** y,
    negated when y is odd) and gives NaN otherwise."""
    magnitude = math.PowFOp(kit.abs(x), y).result
    y_is_integer = kit.eq(math.FloorOp(y).result, y)
    half = kit.mul(y, kit.const(0.5))
    y_is_odd = arith.AndIOp(y_is_integer, kit.ne(math.FloorOp(half).result, half)).result
    negative_base = kit.lt(x, kit.zero())
    signed = kit.select(y_is_odd, kit.neg(magnitude), magnitude)
    nan = kit.const(float("nan"))
    negative_result = kit.select(y_is_integer, signed, nan)
    result = kit.select(negative_base, negative_result, magnitude)
    # IEEE's exact cases that exp(y * log(x)) (IREE's expansion of powf) gets wrong as NaN:
    # x ** 0 == 1 and 1 ** y == 1 for every x and y, NaN included.
    one = kit.one()
    exact_one = arith.OrIOp(kit.eq(y, kit.zero()), kit.eq(x, one)).result
    return kit.select(exact_one, one, result)


# -- variadic -------------------------------------------------------------------------------------


def _variadic(name: str, since: int, allowed, what: str, combine) -> None:
    def kernel(ctx, kit: ElementMath, *elements):
        if not elements:
            raise ctx.error("expected at least one operand")
        result = elements[0]
        for element in elements[1:]:
            result = combine(kit, result, element)
        return result

    kernel.__name__ = f"_{name.lower()}"
    elementwise_rule(name, since=since, allowed=allowed, what=what)(kernel)


_variadic("Min", 1, is_number_type, NUMBERS, ElementMath.minimum)
_variadic("Max", 1, is_number_type, NUMBERS, ElementMath.maximum)
_variadic("Sum", 1, is_number_type, NUMBERS, ElementMath.add)


@elementwise_rule("Mean", since=1, allowed=is_float_type, what=FLOATS)
def _mean(ctx, kit: FloatMath, *elements):
    if not elements:
        raise ctx.error("expected at least one operand")
    total = elements[0]
    for element in elements[1:]:
        total = kit.add(total, element)
    return kit.div(total, kit.const(len(elements)))


# -- Clip -----------------------------------------------------------------------------------------


@register_lowering("onnx.Clip", since=1)
def _lower_clip(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """min(max(x, low), high) (so low > high gives high everywhere, as ONNX says); NaN stays NaN.

    Before opset 11 the bounds are float attributes; from 11 on, optional scalar inputs."""
    scalar = require_element(ctx, ctx.niro_operands[0], is_number_type, NUMBERS)
    inputs = [(ctx.operands[0], ctx.niro_operands[0])]
    bounds: list[str] = []
    attribute_bounds: dict[str, float] = {}
    if opset(ctx) < 11:
        for name in ("min", "max"):
            value = attribute(ctx, name)
            if value is not None:
                attribute_bounds[name] = float(value)
    else:
        for position, name in ((1, "min"), (2, "max")):
            operand = input_value(ctx, position)
            if operand is None:
                continue
            if element_type(operand[1]) is not scalar:
                raise ctx.error(f"input '{name}' must have the element type of the input ({scalar.spelling})")
            inputs.append(operand)
            bounds.append(name)

    def body(elements):
        kit = element_math(scalar)
        value, *given = (kit.widen(element) for element in elements)
        limits = dict(zip(bounds, given, strict=True))
        limits.update((name, kit.const(bound)) for name, bound in attribute_bounds.items())
        if "min" in limits:
            value = kit.maximum(value, limits["min"])
        if "max" in limits:
            value = kit.minimum(value, limits["max"])
        return kit.narrow(value)

    return [elementwise(ctx, body, inputs=inputs)]
