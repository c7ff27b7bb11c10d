"""MLIR lowerings of the `ai.onnx.preview.training` optimizers: Adagrad, Momentum and Adam.

Each updates a variadic list of tensors with one element-wise formula: the inputs are the
learning rate R, the update count T (both scalars), then n tensors X, n gradients G and n
(Adagrad, Momentum) or 2n (Adam) accumulators; the outputs are the n new X, then the new
accumulators, in the input order. The scalar parts of the formulas (the decayed or
bias-corrected learning rate, the first-step switches on T) are computed once outside the
element-wise `linalg.generic`s; each output is its own generic (the shared terms are recomputed
per output and fused again by the compiler).

The formulas are the ones of ONNX's operator documentation and `onnx.reference`; f16/bf16 do
not occur (the schemas allow float and double only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from niro.ir import ScalarType, format_type

from ..bindings import arith, math, mlir_ir, tensor
from ..builders import elementwise, index_constant
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .cast import convert_element
from .common import attribute, element_type
from .elementwise import ElementMath, element_math

__all__: list[str] = []

_FLOATS = (ScalarType.F32, ScalarType.F64)

Body = Callable[[ElementMath, Sequence[mlir_ir.Value]], mlir_ir.Value]
"""Computes one output element from the group's elements (X, G, then the accumulators)."""


def _scalar(ctx: LoweringRuleContext, index: int, what: str, target: ScalarType) -> mlir_ir.Value:
    """Operand `index` (a one-element tensor, usually rank 0) as a scalar of type `target`."""
    value = ctx.niro_operands[index]
    type_ = ctx.ranked(value, what)
    if any(dim != 1 for dim in type_.shape):
        raise ctx.error(f"expects a scalar {what}, got {format_type(type_)}")
    zero = index_constant(0)
    element = tensor.ExtractOp(ctx.operands[index], [zero] * len(type_.shape)).result
    return convert_element(element, type_.element_type, target)


def _float_attribute(ctx: LoweringRuleContext, name: str, default: float | None) -> float:
    value = attribute(ctx, name, default)
    if value is None:
        raise ctx.error(f"needs the attribute '{name}'")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ctx.error(f"expects a number for attribute '{name}', got {value!r}")
    return float(value)


def _groups(ctx: LoweringRuleContext, per_tensor: int) -> tuple[int, ScalarType]:
    """n, the number of optimized tensors, and their element type, after checking the operand
    and result counts and types against the schema."""
    operands, results = len(ctx.operands), len(ctx.niro_results)
    tensors = operands - 2
    if tensors <= 0 or tensors % per_tensor:
        raise ctx.error(
            f"expects R, T and {per_tensor} tensors per optimized tensor, got {operands} inputs"
        )
    count = tensors // per_tensor
    if results != tensors - count:
        raise ctx.error(f"expects {tensors - count} outputs for {count} tensors, got {results}")
    for index, what in ((0, "learning rate R"), (1, "update count T")):
        ctx.ranked(ctx.niro_operands[index], what)
    if element_type(ctx.niro_operands[0]) not in _FLOATS:
        raise ctx.error(
            f"expects a float or double R, got {format_type(ctx.niro_operands[0].type)}"
        )
    if element_type(ctx.niro_operands[1]) is not ScalarType.I64:
        raise ctx.error(f"expects an int64 T, got {format_type(ctx.niro_operands[1].type)}")
    scalar = element_type(ctx.niro_operands[2])
    if scalar not in _FLOATS:
        raise ctx.error(
            f"expects float or double tensors, got {format_type(ctx.niro_operands[2].type)}"
        )
    for value in (*ctx.niro_operands[2:], *ctx.niro_results):
        if element_type(value) is not scalar:
            raise ctx.error(
                f"expects every tensor and output of one element type, got {format_type(value.type)} "
                f"with {scalar.name.lower()}"
            )
    return count, scalar


def _update(
    ctx: LoweringRuleContext, count: int, per_tensor: int, bodies: Sequence[Body]
) -> list[mlir_ir.Value]:
    """The outputs: for each body (one per output kind: new X, then new accumulators), one
    element-wise generic per optimized tensor over that tensor's group of inputs."""
    outputs = []
    for kind, body in enumerate(bodies):
        for tensor_index in range(count):
            positions = [2 + tensor_index + count * offset for offset in range(per_tensor)]
            inputs = [(ctx.operands[p], ctx.niro_operands[p]) for p in positions]
            result = ctx.niro_results[kind * count + tensor_index]
            scalar = element_type(result)

            def apply(elements, body=body, scalar=scalar):
                return body(element_math(scalar), elements)

            outputs.append(elementwise(ctx, apply, inputs, result))
    return outputs


def _t_positive(ctx: LoweringRuleContext) -> mlir_ir.Value:
    """i1: T > 0 (after the first update)."""
    steps = _scalar(ctx, 1, "update count T", ScalarType.I64)
    zero = arith.ConstantOp(steps.type, mlir_ir.IntegerAttr.get(steps.type, 0)).result
    return arith.CmpIOp(arith.CmpIPredicate.sgt, steps, zero).result


# -- Adagrad ------------------------------------------------------------------------------------


@register_lowering("ai.onnx.preview.training.Adagrad", since=1)
def _lower_adagrad(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """r' = R / (1 + T * decay_factor); g' = norm_coefficient * X + G; H' = H + g'^2;
    X' = X - r' * g' / (sqrt(H') + epsilon). Outputs: X'_1..n, H'_1..n."""
    count, scalar = _groups(ctx, 3)
    decay = _float_attribute(ctx, "decay_factor", 0.0)
    epsilon = _float_attribute(ctx, "epsilon", 1e-6)
    norm = _float_attribute(ctx, "norm_coefficient", 0.0)
    kit = element_math(scalar)
    rate = _scalar(ctx, 0, "learning rate R", scalar)
    steps = _scalar(ctx, 1, "update count T", scalar)
    rate = kit.div(rate, kit.add(kit.one(), kit.mul(steps, kit.const(decay))))

    def accumulated(kit: ElementMath, x, gradient, history):
        regularized = kit.add(kit.mul(kit.const(norm), x), gradient)
        return regularized, kit.add(history, kit.mul(regularized, regularized))

    def new_x(kit: ElementMath, elements):
        x, gradient, history = elements
        regularized, history = accumulated(kit, x, gradient, history)
        scale = kit.add(math.SqrtOp(history).result, kit.const(epsilon))
        return kit.sub(x, kit.div(kit.mul(rate, regularized), scale))

    def new_history(kit: ElementMath, elements):
        return accumulated(kit, *elements)[1]

    return _update(ctx, count, 3, (new_x, new_history))


# -- Momentum -----------------------------------------------------------------------------------


@register_lowering("ai.onnx.preview.training.Momentum", since=1)
def _lower_momentum(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """g' = norm_coefficient * X + G; V' = alpha * V + beta' * g' (beta' = beta when T > 0,
    else 1); X' = X - R * V' ("standard") or X - R * (g' + alpha * V') ("nesterov").
    Outputs: X'_1..n, V'_1..n."""
    count, scalar = _groups(ctx, 3)
    alpha = _float_attribute(ctx, "alpha", None)
    beta = _float_attribute(ctx, "beta", None)
    norm = _float_attribute(ctx, "norm_coefficient", None)
    mode = attribute(ctx, "mode")
    if mode is None:
        raise ctx.error("needs the attribute 'mode'")
    if mode not in ("standard", "nesterov"):
        raise ctx.error(f"expects mode 'standard' or 'nesterov', got {mode!r}")
    kit = element_math(scalar)
    rate = _scalar(ctx, 0, "learning rate R", scalar)
    beta_adjusted = kit.select(_t_positive(ctx), kit.const(beta), kit.one())

    def terms(kit: ElementMath, x, gradient, velocity):
        regularized = kit.add(kit.mul(kit.const(norm), x), gradient)
        velocity = kit.add(kit.mul(kit.const(alpha), velocity), kit.mul(beta_adjusted, regularized))
        return regularized, velocity

    def new_x(kit: ElementMath, elements):
        x = elements[0]
        regularized, velocity = terms(kit, *elements)
        if mode == "standard":
            return kit.sub(x, kit.mul(rate, velocity))
        step = kit.add(regularized, kit.mul(kit.const(alpha), velocity))
        return kit.sub(x, kit.mul(rate, step))

    def new_velocity(kit: ElementMath, elements):
        return terms(kit, *elements)[1]

    return _update(ctx, count, 3, (new_x, new_velocity))


# -- Adam ---------------------------------------------------------------------------------------


@register_lowering("ai.onnx.preview.training.Adam", since=1)
def _lower_adam(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """g' = norm_coefficient * X + G; V' = alpha * V + (1 - alpha) * g';
    H' = beta * H + (1 - beta) * g'^2; r' = R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0,
    else R; X' = (1 - norm_coefficient_post) * (X - r' * V' / (sqrt(H') + epsilon)).
    Outputs: X'_1..n, V'_1..n, H'_1..n."""
    count, scalar = _groups(ctx, 4)
    alpha = _float_attribute(ctx, "alpha", 0.9)
    beta = _float_attribute(ctx, "beta", 0.999)
    epsilon = _float_attribute(ctx, "epsilon", 1e-6)
    norm = _float_attribute(ctx, "norm_coefficient", 0.0)
    norm_post = _float_attribute(ctx, "norm_coefficient_post", 0.0)
    kit = element_math(scalar)
    rate = _scalar(ctx, 0, "learning rate R", scalar)
    steps = _scalar(ctx, 1, "update count T", scalar)
    beta_power = math.PowFOp(kit.const(beta), steps).result
    alpha_power = math.PowFOp(kit.const(alpha), steps).result
    corrected = kit.div(
        kit.mul(rate, math.SqrtOp(kit.sub(kit.one(), beta_power)).result),
        kit.sub(kit.one(), alpha_power),
    )
    rate = kit.select(_t_positive(ctx), corrected, rate)

    def regularized(kit: ElementMath, x, gradient):
        return kit.add(kit.mul(kit.const(norm), x), gradient)

    def velocity(kit: ElementMath, x, gradient, momentum):
        blended = kit.mul(kit.const(1.0 - alpha), regularized(kit, x, gradient))
        return kit.add(kit.mul(kit.const(alpha), momentum), blended)

    def history(kit: ElementMath, x, gradient, squares):
        term = regularized(kit, x, gradient)
        blended = kit.mul(kit.const(1.0 - beta), kit.mul(term, term))
        return kit.add(kit.mul(kit.const(beta), squares), blended)

    def new_x(kit: ElementMath, elements):
        x, gradient, momentum, squares = elements
        scale = kit.add(math.SqrtOp(history(kit, x, gradient, squares)).result, kit.const(epsilon))
        step = kit.div(velocity(kit, x, gradient, momentum), scale)
        return kit.mul(kit.const(1.0 - norm_post), kit.sub(x, kit.mul(rate, step)))

    def new_velocity(kit: ElementMath, elements):
        return velocity(kit, *elements[:3])

    def new_history(kit: ElementMath, elements):
        x, gradient, _, squares = elements
        return history(kit, x, gradient, squares)

    return _update(ctx, count, 4, (new_x, new_velocity, new_history))
