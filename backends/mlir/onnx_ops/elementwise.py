"""Element-wise ONNX ops of one operand: activations (Relu, Sigmoid, Gelu, ...) and unary math
(Abs, Exp, Sin, Round, ...), plus the element kit the other element-wise families build on.

The kit: `ElementMath` builds arithmetic on one element of a Niro scalar type and picks the
signed, unsigned or float MLIR op from the *Niro* type (MLIR integers are signless);
`FloatMath` computes f16/bf16 in f32 (IREE's math-dialect expansions are written for f32, and
one rounding at the end is closer to ONNX's reference) and narrows the result once.
`elementwise_rule` registers a rule from a per-element kernel over the broadcast operands.

Every rule refuses element types its ONNX schema does not allow instead of guessing.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence

from niro.ir import ScalarType, Value

from ..bindings import arith, math, mlir_ir
from ..builders import convert, elementwise
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .cast import convert_element
from .common import attribute, element_type

__all__ = [
    "ElementMath",
    "FloatMath",
    "element_math",
    "elementwise_rule",
    "require_element",
    "legacy_broadcast_check",
    "shared_element",
]

_F32 = ScalarType.F32

_F64_VIA_F32 = frozenset(
    {math.TanhOp, math.ErfOp, math.SinOp, math.CosOp, math.TanOp, math.AsinOp, math.AcosOp, math.AtanOp}
)
"""Math ops IREE's CPU backend cannot compile for f64 (see `FloatMath.apply`)."""


class ElementMath:
    """Arithmetic on one element of Niro scalar type `scalar`, built at the current insertion
    point. Sign-sensitive ops (division, comparison, min/max, widening) follow `scalar`."""

    def __init__(self, scalar: ScalarType):
        self.scalar = scalar
        self.type = lower_scalar_type(scalar)

    @property
    def is_float(self) -> bool:
        return self.scalar.is_float

    def widen(self, value: mlir_ir.Value) -> mlir_ir.Value:
        """Into the compute type (see FloatMath); integers compute in their own type."""
        return value

    def narrow(self, value: mlir_ir.Value) -> mlir_ir.Value:
        """Back from the compute type."""
        return value

    @property
    def is_unsigned(self) -> bool:
        return self.scalar.is_unsigned_integer or self.scalar.is_bool

    # -- constants ------------------------------------------------------------------------------

    def const(self, value: float | int | bool) -> mlir_ir.Value:
        if self.is_float:
            return arith.ConstantOp(self.type, mlir_ir.FloatAttr.get(self.type, float(value))).result
        bits = mlir_ir.IntegerType(self.type).width
        integer = int(value) & ((1 << bits) - 1)
        if integer >= 1 << (bits - 1) and bits > 1:
            integer -= 1 << bits  # IntegerAttr takes the signed reading of the bits
        if bits == 1:
            integer = -integer  # i1 true is -1 in the signed reading
        return arith.ConstantOp(self.type, mlir_ir.IntegerAttr.get(self.type, integer)).result

    def zero(self) -> mlir_ir.Value:
        return self.const(0)

    def one(self) -> mlir_ir.Value:
        return self.const(1)

    # -- arithmetic -----------------------------------------------------------------------------

    def add(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return (arith.AddFOp if self.is_float else arith.AddIOp)(lhs, rhs).result

    def sub(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return (arith.SubFOp if self.is_float else arith.SubIOp)(lhs, rhs).result

    def mul(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return (arith.MulFOp if self.is_float else arith.MulIOp)(lhs, rhs).result

    def neg(self, value: mlir_ir.Value) -> mlir_ir.Value:
        if self.is_float:
            return arith.NegFOp(value).result
        return arith.SubIOp(self.zero(), value).result

    def div(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        """Float division; integer division truncating toward zero (signed) or unsigned.

        NOTE: an integer divisor of 0 gives 0 (as NumPy does) and INT_MIN / -1 wraps, rather than
        trapping the process as the hardware division would."""
        if self.is_float:
            return arith.DivFOp(lhs, rhs).result
        return self._guarded_division(lhs, rhs, arith.DivUIOp if self.is_unsigned else arith.DivSIOp)

    def rem(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        """C-style remainder (sign of the dividend); an integer divisor of 0 gives 0."""
        if self.is_float:
            return arith.RemFOp(lhs, rhs).result
        return self._guarded_division(lhs, rhs, arith.RemUIOp if self.is_unsigned else arith.RemSIOp)

    def _guarded_division(self, lhs, rhs, op_class) -> mlir_ir.Value:
        divisor_is_zero = self.eq(rhs, self.zero())
        safe = self.select(divisor_is_zero, self.one(), rhs)
        if not self.is_unsigned:
            # INT_MIN / -1 overflows (a trap on x86): divide by 1 instead and fix the sign after.
            minus_one = self.eq(rhs, self.const(-1))
            safe = self.select(minus_one, self.one(), safe)
            quotient = op_class(lhs, safe).result
            if op_class is arith.DivSIOp:
                quotient = self.select(minus_one, self.neg(lhs), quotient)
            else:
                quotient = self.select(minus_one, self.zero(), quotient)
        else:
            quotient = op_class(lhs, safe).result
        return self.select(divisor_is_zero, self.zero(), quotient)

    def minimum(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        """NaN-propagating for floats (NumPy's minimum)."""
        if self.is_float:
            return arith.MinimumFOp(lhs, rhs).result
        return (arith.MinUIOp if self.is_unsigned else arith.MinSIOp)(lhs, rhs).result

    def maximum(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        if self.is_float:
            return arith.MaximumFOp(lhs, rhs).result
        return (arith.MaxUIOp if self.is_unsigned else arith.MaxSIOp)(lhs, rhs).result

    def select(self, condition: mlir_ir.Value, if_true: mlir_ir.Value, if_false: mlir_ir.Value) -> mlir_ir.Value:
        return arith.SelectOp(condition, if_true, if_false).result

    # -- comparisons (ordered for floats: any NaN compares false, except `ne`) -------------------

    def _compare(self, float_predicate: str, signed: str, unsigned: str, lhs, rhs) -> mlir_ir.Value:
        if self.is_float:
            predicate = getattr(arith.CmpFPredicate, float_predicate)
            return arith.CmpFOp(predicate, lhs, rhs).result
        predicate = getattr(arith.CmpIPredicate, unsigned if self.is_unsigned else signed)
        return arith.CmpIOp(predicate, lhs, rhs).result

    def eq(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return self._compare("OEQ", "eq", "eq", lhs, rhs)

    def ne(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        """Unordered for floats: NaN != anything."""
        return self._compare("UNE", "ne", "ne", lhs, rhs)

    def lt(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return self._compare("OLT", "slt", "ult", lhs, rhs)

    def le(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return self._compare("OLE", "sle", "ule", lhs, rhs)

    def gt(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return self._compare("OGT", "sgt", "ugt", lhs, rhs)

    def ge(self, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
        return self._compare("OGE", "sge", "uge", lhs, rhs)


class FloatMath(ElementMath):
    """`ElementMath` in the compute type of float `scalar`: f32 for f16/bf16, else itself.

    Kernels take `widen(x)` of their operands, compute with the methods here (all in the compute
    type), and return `narrow(result)`. Transcendental functions are math-dialect ops."""

    def __init__(self, scalar: ScalarType):
        if not scalar.is_float:
            raise ValueError(f"FloatMath needs a float type, got {scalar.name}")
        self.storage = scalar
        self.storage_type = lower_scalar_type(scalar)
        super().__init__(_F32 if scalar in (ScalarType.F16, ScalarType.BF16) else scalar)

    def widen(self, value: mlir_ir.Value) -> mlir_ir.Value:
        if self.storage is self.scalar:
            return value
        return arith.ExtFOp(self.type, value).result

    def narrow(self, value: mlir_ir.Value) -> mlir_ir.Value:
        if self.storage is self.scalar:
            return value
        return convert(value, self.storage_type)

    def apply(self, op_class, value: mlir_ir.Value) -> mlir_ir.Value:
        """The one-operand math-dialect op `op_class` on `value`.

        NOTE: IREE's CPU backend has no f64 version of some functions (it emits libm calls it
        cannot link, or refuses to legalize); those compute f64 operands in f32, as IREE itself
        does by default (--iree-input-demote-f64-to-f32): ~7 significant digits, not 16."""
        if self.scalar is ScalarType.F64 and op_class in _F64_VIA_F32:
            f32 = lower_scalar_type(_F32)
            narrowed = op_class(arith.TruncFOp(f32, value).result).result
            return arith.ExtFOp(self.type, narrowed).result
        return op_class(value).result

    def exp(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return self.apply(math.ExpOp, value)

    def log(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return self.apply(math.LogOp, value)

    def log1p(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return self.apply(math.Log1pOp, value)

    def tanh(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return self.apply(math.TanhOp, value)

    def erf(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return self.apply(math.ErfOp, value)

    def sqrt(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return self.apply(math.SqrtOp, value)

    def asinh(self, value: mlir_ir.Value) -> mlir_ir.Value:
        """sign(x) * log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), and log(|x|) + ln 2 once x^2 would
        lose the 1 (math.asinh's own expansion gives NaN at -inf and loses digits for x < 0)."""
        magnitude = self.abs(value)
        square = self.mul(magnitude, magnitude)
        root = self.sqrt(self.add(self.one(), square))
        moderate = self.log1p(self.add(magnitude, self.div(square, self.add(self.one(), root))))
        large = self.add(self.log(magnitude), self.const(pymath.log(2.0)))
        result = self.select(self.gt(magnitude, self.const(2.0**28)), large, moderate)
        return math.CopySignOp(result, value).result

    def abs(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return math.AbsFOp(value).result

    def recip(self, value: mlir_ir.Value) -> mlir_ir.Value:
        return self.div(self.one(), value)

    def sigmoid(self, value: mlir_ir.Value) -> mlir_ir.Value:
        """1 / (1 + exp(-x)): exp overflows to inf for very negative x, giving the right 0."""
        return self.recip(self.add(self.one(), self.exp(self.neg(value))))

    def softplus(self, value: mlir_ir.Value) -> mlir_ir.Value:
        """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): no overflow for large x."""
        positive = arith.MaximumFOp(value, self.zero()).result
        return self.add(positive, self.log1p(self.exp(self.neg(self.abs(value)))))

    def clamp(self, value: mlir_ir.Value, low: float, high: float) -> mlir_ir.Value:
        return self.minimum(self.maximum(value, self.const(low)), self.const(high))


def element_math(scalar: ScalarType) -> ElementMath:
    """The kit for `scalar`: a FloatMath for float types, else an ElementMath."""
    return FloatMath(scalar) if scalar.is_float else ElementMath(scalar)


# -- registration -----------------------------------------------------------------------------

Kernel = Callable[..., mlir_ir.Value]


def require_element(ctx: LoweringRuleContext, value: Value, allowed: Callable[[ScalarType], bool], what: str) -> ScalarType:
    """`value`'s element type when `allowed(it)`, else a refusal naming the op and the type."""
    scalar = element_type(value)
    if not allowed(scalar):
        raise ctx.error(f"does not support element type {scalar.spelling} (expected {what})")
    return scalar


def legacy_broadcast_check(ctx: LoweringRuleContext) -> None:
    """Before opset 7, binary ops broadcast only with `broadcast=1`, B aligned at `axis` of A;
    NumPy's right alignment is the same thing when `axis` is absent or rank(A) - rank(B)."""
    axis = attribute(ctx, "axis")
    if axis is None or not attribute(ctx, "broadcast", 0):
        return
    lhs, rhs = (ctx.ranked(value, f"operand #{i}") for i, value in enumerate(ctx.niro_operands[:2]))
    if axis % max(1, len(lhs.shape)) != len(lhs.shape) - len(rhs.shape):
        raise ctx.error(
            f"legacy broadcasting with axis={axis} (B aligned at a leading axis of A) is not "
            "supported; re-export the model with opset 7 or later"
        )


def shared_element(
    ctx: LoweringRuleContext, allowed: Callable[[ScalarType], bool], what: str, operands: int | None
) -> ScalarType:
    """Operand 0's element type, which must satisfy `allowed` and which every operand must
    share; `operands` checks the operand count when given. A binary op's legacy broadcast
    (`legacy_broadcast_check`) is checked too."""
    if operands is not None and len(ctx.operands) != operands:
        raise ctx.error(f"expected {operands} operands, got {len(ctx.operands)}")
    scalar = require_element(ctx, ctx.niro_operands[0], allowed, what)
    for index, value in enumerate(ctx.niro_operands[1:], 1):
        if element_type(value) is not scalar:
            raise ctx.error(
                f"operand #{index} has element type {element_type(value).spelling}, "
                f"operand #0 {scalar.spelling}; they must be the same"
            )
    if len(ctx.operands) == 2:
        legacy_broadcast_check(ctx)
    return scalar


def elementwise_rule(
    name: str,
    *,
    since: int,
    until: int | None = None,
    allowed: Callable[[ScalarType], bool],
    what: str,
    operands: int | None = None,
) -> Callable[[Kernel], Kernel]:
    """Registers `onnx.<name>` as a broadcasting linalg.generic of `kernel(ctx, kit, *elements)`.

    `kit` is an `ElementMath` (a `FloatMath` for float operands, so the kernel may call
    transcendental functions; it widens/narrows f16 and bf16 around the kernel) of operand 0's
    element type, checked by `shared_element` (`allowed`, `operands`).
    """

    def register(kernel: Kernel) -> Kernel:
        @register_lowering(f"onnx.{name}", since=since, until=until)
        def rule(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
            scalar = shared_element(ctx, allowed, what, operands)

            # Kernels of comparisons and classifications return BOOL, which is not narrowed.
            narrows = element_type(ctx.niro_results[0]) is scalar

            def body(elements: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
                kit = element_math(scalar)
                result = kernel(ctx, kit, *(kit.widen(x) for x in elements))
                return kit.narrow(result) if narrows else result

            return [elementwise(ctx, body)]

        rule.__name__ = rule.__qualname__ = f"lower_{name}"
        return kernel

    return register


def is_float_type(scalar: ScalarType) -> bool:
    return scalar.is_float


def is_number_type(scalar: ScalarType) -> bool:
    return scalar.is_float or scalar.is_integer


def is_signed_number_type(scalar: ScalarType) -> bool:
    return scalar.is_float or scalar.is_signed_integer


FLOATS = "a float type"
NUMBERS = "a float or integer type"
SIGNED_NUMBERS = "a float or signed integer type"


def _float_attribute(ctx: LoweringRuleContext, name: str, default: float) -> float:
    value = attribute(ctx, name, default)
    if not isinstance(value, (int, float)):
        raise ctx.error(f"attribute '{name}' must be a float, got {value!r}")
    return float(value)


# -- activations --------------------------------------------------------------------------------


@elementwise_rule("Relu", since=1, allowed=is_signed_number_type, what=SIGNED_NUMBERS, operands=1)
def _relu(ctx, kit: ElementMath, x):
    return kit.maximum(x, kit.zero())


@elementwise_rule("LeakyRelu", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _leaky_relu(ctx, kit: FloatMath, x):
    alpha = kit.const(_float_attribute(ctx, "alpha", 0.01))
    return kit.select(kit.lt(x, kit.zero()), kit.mul(alpha, x), x)


@elementwise_rule("PRelu", since=1, allowed=is_number_type, what=NUMBERS, operands=2)
def _prelu(ctx, kit: ElementMath, x, slope):
    if kit.is_unsigned:  # never negative
        return x
    return kit.select(kit.lt(x, kit.zero()), kit.mul(slope, x), x)


@elementwise_rule("Elu", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _elu(ctx, kit: FloatMath, x):
    alpha = kit.const(_float_attribute(ctx, "alpha", 1.0))
    negative = kit.mul(alpha, kit.sub(kit.exp(x), kit.one()))
    return kit.select(kit.lt(x, kit.zero()), negative, x)


@elementwise_rule("Selu", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _selu(ctx, kit: FloatMath, x):
    alpha = kit.const(_float_attribute(ctx, "alpha", 1.67326319217681884765625))
    gamma = kit.const(_float_attribute(ctx, "gamma", 1.05070102214813232421875))
    negative = kit.sub(kit.mul(alpha, kit.exp(x)), alpha)
    return kit.mul(gamma, kit.select(kit.gt(x, kit.zero()), x, negative))


@elementwise_rule("Celu", since=12, allowed=is_float_type, what=FLOATS, operands=1)
def _celu(ctx, kit: FloatMath, x):
    alpha_value = _float_attribute(ctx, "alpha", 1.0)
    if alpha_value == 0:
        raise ctx.error("attribute 'alpha' must not be 0")
    alpha = kit.const(alpha_value)
    negative = kit.mul(alpha, kit.sub(kit.exp(kit.div(x, alpha)), kit.one()))
    return kit.add(kit.maximum(x, kit.zero()), kit.minimum(negative, kit.zero()))


@elementwise_rule("ThresholdedRelu", since=10, allowed=is_float_type, what=FLOATS, operands=1)
def _thresholded_relu(ctx, kit: FloatMath, x):
    alpha = kit.const(_float_attribute(ctx, "alpha", 1.0))
    return kit.select(kit.gt(x, alpha), x, kit.zero())


@register_lowering("onnx.Shrink", since=9)
def _lower_shrink(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """x + bias below -lambd, x - bias above lambd, else 0, computed exactly as ONNX's reference
    (and onnxruntime) do: in f32 for inputs of up to 16 bits and f32, in f64 for wider ones,
    then cast back (integers truncate toward zero, saturating). NOTE: the function body ONNX
    added in opset 18 casts lambd and bias to the input type first, which differs for integer
    inputs with a fractional bias and for f16 inputs near the threshold; we follow the
    reference, which the function body's own node tests match for f32."""
    if len(ctx.operands) != 1:
        raise ctx.error(f"expected 1 operand, got {len(ctx.operands)}")
    scalar = require_element(ctx, ctx.niro_operands[0], is_number_type, NUMBERS)
    wide = scalar.byte_width > 2 and scalar is not ScalarType.F32
    compute = ScalarType.F64 if wide else ScalarType.F32
    kit = FloatMath(compute)
    lambd = kit.const(_float_attribute(ctx, "lambd", 0.5))
    bias = kit.const(_float_attribute(ctx, "bias", 0.0))

    def body(elements: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
        x = convert_element(elements[0], scalar, compute)
        above = kit.select(kit.gt(x, lambd), kit.sub(x, bias), kit.zero())
        shrunk = kit.select(kit.lt(x, kit.neg(lambd)), kit.add(x, bias), above)
        return convert_element(shrunk, compute, scalar)

    return [elementwise(ctx, body)]


@elementwise_rule("Sigmoid", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _sigmoid(ctx, kit: FloatMath, x):
    return kit.sigmoid(x)


@elementwise_rule("HardSigmoid", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _hard_sigmoid(ctx, kit: FloatMath, x):
    alpha = kit.const(_float_attribute(ctx, "alpha", 0.2))
    beta = kit.const(_float_attribute(ctx, "beta", 0.5))
    return kit.clamp(kit.add(kit.mul(alpha, x), beta), 0.0, 1.0)


@elementwise_rule("HardSwish", since=14, allowed=is_float_type, what=FLOATS, operands=1)
def _hard_swish(ctx, kit: FloatMath, x):
    gate = kit.clamp(kit.add(kit.mul(kit.const(1.0 / 6.0), x), kit.const(0.5)), 0.0, 1.0)
    return kit.mul(x, gate)


@elementwise_rule("Softplus", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _softplus(ctx, kit: FloatMath, x):
    return kit.softplus(x)


@elementwise_rule("Softsign", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _softsign(ctx, kit: FloatMath, x):
    return kit.div(x, kit.add(kit.one(), kit.abs(x)))


@elementwise_rule("Tanh", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _tanh(ctx, kit: FloatMath, x):
    return kit.tanh(x)


@elementwise_rule("Gelu", since=20, allowed=is_float_type, what=FLOATS, operands=1)
def _gelu(ctx, kit: FloatMath, x):
    approximate = attribute(ctx, "approximate", "none")
    half_x = kit.mul(kit.const(0.5), x)
    if approximate == "none":
        return kit.mul(half_x, kit.add(kit.one(), kit.erf(kit.mul(x, kit.const(pymath.sqrt(0.5))))))
    if approximate == "tanh":
        cube = kit.mul(kit.mul(x, x), x)
        inner = kit.mul(kit.const(pymath.sqrt(2.0 / pymath.pi)), kit.add(x, kit.mul(kit.const(0.044715), cube)))
        return kit.mul(half_x, kit.add(kit.one(), kit.tanh(inner)))
    raise ctx.error(f"attribute 'approximate' must be 'none' or 'tanh', got {approximate!r}")


@elementwise_rule("Mish", since=18, allowed=is_float_type, what=FLOATS, operands=1)
def _mish(ctx, kit: FloatMath, x):
    return kit.mul(x, kit.tanh(kit.softplus(x)))


@elementwise_rule("Swish", since=24, allowed=is_float_type, what=FLOATS, operands=1)
def _swish(ctx, kit: FloatMath, x):
    alpha = kit.const(_float_attribute(ctx, "alpha", 1.0))
    return kit.mul(x, kit.sigmoid(kit.mul(alpha, x)))


@elementwise_rule("Asinh", since=9, allowed=is_float_type, what=FLOATS, operands=1)
def _asinh(ctx, kit: FloatMath, x):
    return kit.asinh(x)


# -- unary math ---------------------------------------------------------------------------------


@elementwise_rule("Abs", since=1, allowed=is_number_type, what=NUMBERS, operands=1)
def _abs(ctx, kit: ElementMath, x):
    if kit.is_float:
        return math.AbsFOp(x).result
    if kit.is_unsigned:
        return x
    return math.AbsIOp(x).result


@elementwise_rule("Neg", since=1, allowed=is_signed_number_type, what=SIGNED_NUMBERS, operands=1)
def _neg(ctx, kit: ElementMath, x):
    return kit.neg(x)


@elementwise_rule("Sign", since=9, allowed=is_number_type, what=NUMBERS, operands=1)
def _sign(ctx, kit: ElementMath, x):
    zero, one = kit.zero(), kit.one()
    positive = kit.gt(x, zero)
    if kit.is_unsigned:
        return kit.select(positive, one, zero)
    # 0, -0 and NaN are their own sign.
    rest = x if kit.is_float else zero
    return kit.select(positive, one, kit.select(kit.lt(x, zero), kit.const(-1), rest))


@elementwise_rule("Reciprocal", since=1, allowed=is_float_type, what=FLOATS, operands=1)
def _reciprocal(ctx, kit: FloatMath, x):
    return kit.recip(x)


def _math_unary(name: str, since: int, op_class) -> None:
    """A float op that is exactly one math-dialect op."""

    def kernel(ctx, kit: FloatMath, x):
        return kit.apply(op_class, x)

    kernel.__name__ = f"_{name.lower()}"
    elementwise_rule(name, since=since, allowed=is_float_type, what=FLOATS, operands=1)(kernel)


for _name, _since, _op_class in (
    ("Floor", 1, math.FloorOp),
    ("Ceil", 1, math.CeilOp),
    ("Round", 11, math.RoundEvenOp),
    ("Sqrt", 1, math.SqrtOp),
    ("Exp", 1, math.ExpOp),
    ("Log", 1, math.LogOp),
    ("Erf", 9, math.ErfOp),
    ("Sin", 7, math.SinOp),
    ("Cos", 7, math.CosOp),
    ("Tan", 7, math.TanOp),
    ("Asin", 7, math.AsinOp),
    ("Acos", 7, math.AcosOp),
    ("Atan", 7, math.AtanOp),
    ("Sinh", 9, math.SinhOp),
    ("Cosh", 9, math.CoshOp),
    ("Acosh", 9, math.AcoshOp),
    ("Atanh", 9, math.AtanhOp),
):
    _math_unary(_name, _since, _op_class)
