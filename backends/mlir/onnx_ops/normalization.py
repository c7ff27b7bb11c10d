"""MLIR lowerings of the softmax family and the normalizations.

Softmax/LogSoftmax/Hardmax: before opset 13 the input is treated as 2-D at `axis` (every dim
from `axis` on is reduced), from 13 on only `axis` is. Softmax is computed stably: the row max is
subtracted before `exp`. A softmax over one axis of f32/f64 is the named `linalg.softmax` (the
form IREE fuses best); over several axes, or of f16/bf16 (computed in f32), it is generics. LayerNormalization, RMSNormalization, InstanceNormalization,
GroupNormalization, MeanVarianceNormalization, LpNormalization and BatchNormalization (inference
only) are statistics reductions (`reductions.reduce_into`) followed by one element-wise generic.
f16/bf16 inputs are computed in f32 and narrowed at the end.

Scale/bias operands broadcast NumPy-style (right-aligned) against the input; per-channel operands
(BatchNormalization, InstanceNormalization) are read along dim 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from niro.ir import format_type

from ..bindings import arith, linalg, math, mlir_ir, tensor
from ..builders import (
    DYNAMIC,
    accumulator_type,
    as_i64,
    cast_to,
    constant,
    convert,
    empty,
    expand_dim,
    generic,
    reassociation,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import RankedTensorType
from .common import (
    attribute,
    element_type,
    input_value,
    normalize_axes,
    normalize_axis,
    opset,
    output_positions,
    ranked_result,
)
from .reductions import arg_extreme, linear_index, reduce_into

__all__: list[str] = []


# -- helpers ------------------------------------------------------------------------------------


def _float_input(ctx: LoweringRuleContext) -> tuple[mlir_ir.Value, RankedTensorType, mlir_ir.Type]:
    """Operand 0, its Niro type, and the type to compute in (f32 for f16/bf16)."""
    data = ctx.ranked(ctx.niro_operands[0], "operand #0")
    if not data.element_type.is_float:
        raise ctx.error(f"is only supported on float tensors, got {format_type(data)}")
    return ctx.operands[0], data, accumulator_type(data.element_type)


def _kept(rank: int, axes: Sequence[int]) -> list[int]:
    return [axis for axis in range(rank) if axis not in axes]


def _sum(source: mlir_ir.Value, axes, compute: mlir_ir.Type, prepare=None, extras=()) -> mlir_ir.Value:
    """Sum over `axes` in `compute` of `prepare(element, *extras)` (default: the element)."""

    def step(value, *rest):
        *extra_values, accumulated = rest
        value = convert(value, compute)
        if prepare is not None:
            value = prepare(value, *extra_values)
        return arith.AddFOp(value, accumulated).result

    return reduce_into(source, axes, compute, 0.0, step, extra_inputs=extras)


def _max(source: mlir_ir.Value, axes, compute: mlir_ir.Type) -> mlir_ir.Value:
    return reduce_into(
        source,
        axes,
        compute,
        float("-inf"),
        lambda value, accumulated: arith.MaximumFOp(convert(value, compute), accumulated).result,
    )


def _count(source: mlir_ir.Value, axes, compute: mlir_ir.Type) -> mlir_ir.Value:
    """The number of elements over `axes`, as a `compute` float."""
    total = 1
    shape = mlir_ir.RankedTensorType(source.type)
    i64 = mlir_ir.IntegerType.get_signless(64)
    dynamic = constant(i64, 1)
    has_dynamic = False
    for axis, size in enumerate(tensor_sizes(source)):
        if axis not in axes:
            continue
        if shape.is_dynamic_dim(axis):
            has_dynamic = True
            dynamic = arith.MulIOp(dynamic, as_i64(size)).result
        else:
            total *= size
    if not has_dynamic:
        return constant(compute, total)
    return arith.MulFOp(arith.SIToFPOp(compute, dynamic).result, constant(compute, total)).result


def _scale_by(count: mlir_ir.Value, accumulated: mlir_ir.Value, compute: mlir_ir.Type) -> mlir_ir.Value:
    """accumulated / count, element-wise over the accumulator."""
    rank = mlir_ir.RankedTensorType(accumulated.type).rank
    identity = list(range(rank))
    return generic(
        [(accumulated, identity)],
        [(empty(tensor_sizes(accumulated), compute), identity)],
        rank,
        (),
        lambda arguments: [arith.DivFOp(arguments[0], count).result],
    )[0]


def _broadcast_map(ctx, niro_value, rank: int, what: str) -> list[int | None]:
    """Right-aligned NumPy broadcast of an operand against `rank` loop dims (size 1 -> 0)."""
    shape = ctx.ranked(niro_value, what).shape
    if len(shape) > rank:
        raise ctx.error(f"{what} {format_type(niro_value.type)} has a higher rank than the input")
    offset = rank - len(shape)
    return [None if dim == 1 else offset + axis for axis, dim in enumerate(shape)]


def _channel_map(ctx, niro_value, what: str) -> list[int | None]:
    """A 1-D per-channel operand, read along dim 1 of the input."""
    shape = ctx.ranked(niro_value, what).shape
    if len(shape) != 1:
        raise ctx.error(f"expects a 1-D {what}, got {format_type(niro_value.type)}")
    return [1]


def _elementwise(
    ctx: LoweringRuleContext,
    source: mlir_ir.Value,
    inputs: Sequence[tuple[mlir_ir.Value, list]],
    body: Callable[[list[mlir_ir.Value]], mlir_ir.Value],
    result_index: int = 0,
) -> mlir_ir.Value:
    """A generic over `source`'s dims: `body([source element, *input elements])` writes result
    `result_index` (its type must have the source's shape; a dim it leaves dynamic may be
    static in the source: the value is cast to it)."""
    rank = mlir_ir.RankedTensorType(source.type).rank
    result_type = ranked_result(ctx, result_index)
    sizes = [
        size if result_type.is_dynamic_dim(axis) else result_type.shape[axis]
        for axis, size in enumerate(tensor_sizes(source))
    ]
    computed = generic(
        [(source, list(range(rank))), *inputs],
        [(empty(sizes, result_type.element_type), list(range(rank)))],
        rank,
        (),
        lambda arguments: [body(arguments[: len(inputs) + 1])],
    )[0]
    return cast_to(computed, ctx.result_types[result_index])


def _narrow(value: mlir_ir.Value, ctx: LoweringRuleContext, result_index: int = 0) -> mlir_ir.Value:
    return convert(value, ranked_result(ctx, result_index).element_type)


def _softmax_axes(ctx: LoweringRuleContext, rank: int) -> tuple[int, ...]:
    if opset(ctx) < 13:
        axis = normalize_axis(ctx, int(attribute(ctx, "axis", 1)), rank) if rank else 0
        return tuple(range(axis, rank))
    return (normalize_axis(ctx, int(attribute(ctx, "axis", -1)), rank),)


# -- Softmax, LogSoftmax, Hardmax ---------------------------------------------------------------


def _named_softmax(ctx: LoweringRuleContext, source: mlir_ir.Value, axis: int) -> mlir_ir.Value:
    """`linalg.softmax` over one axis: IREE matches the named op (its own stable decomposition
    into one max, one exp-sum and one divide, fused with its neighbours) where the three
    generics below make it recompute exp in the divide's consumers."""
    result_type = ranked_result(ctx, 0)
    sizes = [
        size if result_type.is_dynamic_dim(axis) else result_type.shape[axis]
        for axis, size in enumerate(tensor_sizes(source))
    ]
    out = empty(sizes, result_type.element_type)
    return linalg.SoftmaxOp([out.type], source, out, axis).results[0]


def _lower_softmax(ctx: LoweringRuleContext, log: bool) -> Sequence[mlir_ir.Value]:
    source, data, compute = _float_input(ctx)
    rank = len(data.shape)
    axes = _softmax_axes(ctx, rank)
    kept = _kept(rank, axes)
    if not log and len(axes) == 1 and compute == ranked_result(ctx, 0).element_type:
        return [_named_softmax(ctx, source, axes[0])]
    peak = _max(source, axes, compute)

    def exp_shifted(value, peak_value):
        return math.ExpOp(arith.SubFOp(value, peak_value).result).result

    total = _sum(source, axes, compute, exp_shifted, extras=[peak])

    def body(arguments):
        value, peak_value, total_value = arguments
        shifted = arith.SubFOp(convert(value, compute), peak_value).result
        if log:
            result = arith.SubFOp(shifted, math.LogOp(total_value).result).result
        else:
            result = arith.DivFOp(math.ExpOp(shifted).result, total_value).result
        return _narrow(result, ctx)

    return [_elementwise(ctx, source, [(peak, kept), (total, kept)], body)]


@register_lowering("onnx.Softmax")
def _lower_softmax_rule(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_softmax(ctx, log=False)


@register_lowering("onnx.LogSoftmax")
def _lower_log_softmax(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_softmax(ctx, log=True)


@register_lowering("onnx.Hardmax")
def _lower_hardmax(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """1 at the first maximum over the axes (row-major position), 0 elsewhere."""
    source, data, _ = _float_input(ctx)
    rank = len(data.shape)
    axes = _softmax_axes(ctx, rank)
    winner = arg_extreme(ctx, source, data.element_type, axes, largest=True, last=False)
    element = ranked_result(ctx, 0).element_type

    def body(arguments):
        here = linear_index(ctx, source, axes)
        hit = arith.CmpIOp(arith.CmpIPredicate.eq, here, arguments[1]).result
        return arith.SelectOp(hit, constant(element, 1.0), constant(element, 0.0)).result

    return [_elementwise(ctx, source, [(winner, _kept(rank, axes))], body)]


# -- mean/variance normalizations ---------------------------------------------------------------


def _moments(source, axes, compute) -> tuple[mlir_ir.Value, mlir_ir.Value]:
    """(mean, variance) over `axes`, two-pass (variance of the centred values)."""
    count = _count(source, axes, compute)
    mean = _scale_by(count, _sum(source, axes, compute), compute)

    def squared_deviation(value, mean_value):
        deviation = arith.SubFOp(value, mean_value).result
        return arith.MulFOp(deviation, deviation).result

    variance = _scale_by(
        count, _sum(source, axes, compute, squared_deviation, extras=[mean]), compute
    )
    return mean, variance


def _inverse_std(variance: mlir_ir.Value, epsilon: float, compute: mlir_ir.Type) -> mlir_ir.Value:
    """1 / sqrt(variance + epsilon), element-wise."""
    rank = mlir_ir.RankedTensorType(variance.type).rank
    identity = list(range(rank))
    return generic(
        [(variance, identity)],
        [(empty(tensor_sizes(variance), compute), identity)],
        rank,
        (),
        lambda arguments: [
            math.RsqrtOp(arith.AddFOp(arguments[0], constant(compute, epsilon)).result).result
        ],
    )[0]


def _optional_operand(ctx, position: int, rank: int, what: str, channel: bool = False):
    present = input_value(ctx, position)
    if present is None:
        return None
    value, niro_value = present
    if not element_type(niro_value).is_float:
        raise ctx.error(f"expects a float {what}, got {format_type(niro_value.type)}")
    index_map = (
        _channel_map(ctx, niro_value, what)
        if channel
        else _broadcast_map(ctx, niro_value, rank, what)
    )
    return value, index_map


def _affine_normalize(ctx, source, compute, mean, inverse, stat_map, scale, bias) -> mlir_ir.Value:
    """(x - mean) * inverse * scale + bias, narrowed to the result type."""
    inputs = [(mean, stat_map), (inverse, stat_map)]
    if scale is not None:
        inputs.append(scale)
    if bias is not None:
        inputs.append(bias)

    def body(arguments):
        value, mean_value, inverse_value, *rest = arguments
        result = arith.MulFOp(
            arith.SubFOp(convert(value, compute), mean_value).result, inverse_value
        ).result
        if scale is not None:
            result = arith.MulFOp(result, convert(rest.pop(0), compute)).result
        if bias is not None:
            result = arith.AddFOp(result, convert(rest.pop(0), compute)).result
        return _narrow(result, ctx)

    return _elementwise(ctx, source, inputs, body)


def _stat_output(ctx, statistic: mlir_ir.Value, rank: int, axes, result_index: int) -> mlir_ir.Value:
    """A statistic over the kept dims written as the result `result_index` (axes kept as 1s)."""
    result_type = ranked_result(ctx, result_index)
    if result_type.rank != rank:
        raise ctx.error(
            f"result #{result_index} {format_type(ctx.niro_results[result_index].type)} "
            f"does not have rank {rank}"
        )
    stat_sizes = tensor_sizes(statistic)
    kept = _kept(rank, axes)
    sizes = []
    for axis in range(rank):
        if not result_type.is_dynamic_dim(axis):
            sizes.append(result_type.shape[axis])
        else:
            sizes.append(stat_sizes[kept.index(axis)])
    return generic(
        [(statistic, kept)],
        [(empty(sizes, result_type.element_type), list(range(rank)))],
        rank,
        (),
        lambda arguments: [convert(arguments[0], result_type.element_type)],
    )[0]


@register_lowering("onnx.LayerNormalization")
def _lower_layer_norm(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    source, data, compute = _float_input(ctx)
    rank = len(data.shape)
    axis = normalize_axis(ctx, int(attribute(ctx, "axis", -1)), rank)
    axes = tuple(range(axis, rank))
    epsilon = float(attribute(ctx, "epsilon", 1e-5))
    mean, variance = _moments(source, axes, compute)
    inverse = _inverse_std(variance, epsilon, compute)
    kept = _kept(rank, axes)
    scale = _optional_operand(ctx, 1, rank, "scale")
    bias = _optional_operand(ctx, 2, rank, "bias")
    results = []
    for result_index, position in enumerate(output_positions(ctx)):
        if position == 0:
            results.append(
                _affine_normalize(ctx, source, compute, mean, inverse, kept, scale, bias)
            )
        elif position == 1:
            results.append(_stat_output(ctx, mean, rank, axes, result_index))
        else:
            results.append(_stat_output(ctx, inverse, rank, axes, result_index))
    return results


@register_lowering("onnx.RMSNormalization")
def _lower_rms_norm(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """x / sqrt(mean(x^2 over axis..) + epsilon) * scale."""
    source, data, compute = _float_input(ctx)
    rank = len(data.shape)
    axis = normalize_axis(ctx, int(attribute(ctx, "axis", -1)), rank)
    axes = tuple(range(axis, rank))
    epsilon = float(attribute(ctx, "epsilon", 1e-5))
    squares = _sum(source, axes, compute, lambda value: arith.MulFOp(value, value).result)
    inverse = _inverse_std(
        _scale_by(_count(source, axes, compute), squares, compute), epsilon, compute
    )
    scale = _optional_operand(ctx, 1, rank, "scale")
    kept = _kept(rank, axes)

    def body(arguments):
        value, inverse_value, *rest = arguments
        result = arith.MulFOp(convert(value, compute), inverse_value).result
        if scale is not None:
            result = arith.MulFOp(result, convert(rest[0], compute)).result
        return _narrow(result, ctx)

    inputs = [(inverse, kept)] + ([scale] if scale is not None else [])
    return [_elementwise(ctx, source, inputs, body)]


@register_lowering("onnx.InstanceNormalization")
def _lower_instance_norm(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Per (batch, channel) statistics over the spatial dims; scale and bias per channel."""
    source, data, compute = _float_input(ctx)
    rank = len(data.shape)
    if rank < 3:
        raise ctx.error(f"expects an input of rank >= 3, got {format_type(data)}")
    axes = tuple(range(2, rank))
    mean, variance = _moments(source, axes, compute)
    inverse = _inverse_std(variance, float(attribute(ctx, "epsilon", 1e-5)), compute)
    scale = _optional_operand(ctx, 1, rank, "scale", channel=True)
    bias = _optional_operand(ctx, 2, rank, "bias", channel=True)
    return [_affine_normalize(ctx, source, compute, mean, inverse, [0, 1], scale, bias)]


@register_lowering("onnx.MeanVarianceNormalization")
def _lower_mvn(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """(x - mean) / (sqrt(variance) + 1e-9) over `axes` (default [0, 2, 3]), as ONNX's function
    body defines it."""
    source, data, compute = _float_input(ctx)
    rank = len(data.shape)
    axes = tuple(sorted(normalize_axes(ctx, attribute(ctx, "axes", (0, 2, 3)), rank)))
    mean, variance = _moments(source, axes, compute)
    kept = _kept(rank, axes)

    def body(arguments):
        value, mean_value, variance_value = arguments
        deviation = arith.SubFOp(convert(value, compute), mean_value).result
        spread = arith.AddFOp(math.SqrtOp(variance_value).result, constant(compute, 1e-9)).result
        return _narrow(arith.DivFOp(deviation, spread).result, ctx)

    return [_elementwise(ctx, source, [(mean, kept), (variance, kept)], body)]


@register_lowering("onnx.LpNormalization")
def _lower_lp_norm(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """x / ||x||_p along `axis`, p in {1, 2}; 0 where the norm is 0."""
    source, data, compute = _float_input(ctx)
    rank = len(data.shape)
    axis = normalize_axis(ctx, int(attribute(ctx, "axis", -1)), rank)
    p = int(attribute(ctx, "p", 2))
    if p not in (1, 2):
        raise ctx.error(f"supports p = 1 or 2, got p = {p}")
    if p == 1:
        norms = _sum(source, (axis,), compute, lambda value: math.AbsFOp(value).result)
    else:
        norms = _sum(source, (axis,), compute, lambda value: arith.MulFOp(value, value).result)

    def body(arguments):
        value, norm = arguments
        if p == 2:
            norm = math.SqrtOp(norm).result
        quotient = arith.DivFOp(convert(value, compute), norm).result
        # NOTE: a zero norm gives 0, not NaN (ONNX's reference does the same).
        zero = arith.CmpFOp(arith.CmpFPredicate.OEQ, norm, constant(compute, 0.0)).result
        return _narrow(arith.SelectOp(zero, constant(compute, 0.0), quotient).result, ctx)

    return [_elementwise(ctx, source, [(norms, _kept(rank, (axis,)))], body)]


@register_lowering("onnx.BatchNormalization", since=7)
def _lower_batch_norm(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Inference mode: (x - mean) / sqrt(var + epsilon) * scale + bias, per channel (dim 1)."""
    source, data, compute = _float_input(ctx)
    if int(attribute(ctx, "training_mode", 0)) != 0:
        return _lower_batch_norm_training(ctx, source, data, compute)
    if int(attribute(ctx, "spatial", 1)) != 1:
        raise ctx.error("supports spatial = 1 only")
    if len(ctx.result_types) != 1:
        raise ctx.error(
            "supports inference mode only: the running mean/variance outputs are not supported"
        )
    rank = len(data.shape)
    if rank < 2:
        raise ctx.error(f"expects an input of rank >= 2, got {format_type(data)}")
    epsilon = float(attribute(ctx, "epsilon", 1e-5))
    operands = []
    for position, what in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")):
        operand = _optional_operand(ctx, position, rank, what, channel=True)
        if operand is None:
            raise ctx.error(f"is missing its {what} input")
        operands.append(operand)

    def body(arguments):
        value, scale, bias, mean, variance = (convert(item, compute) for item in arguments)
        inverse = math.RsqrtOp(arith.AddFOp(variance, constant(compute, epsilon)).result).result
        centred = arith.SubFOp(value, mean).result
        result = arith.AddFOp(
            arith.MulFOp(arith.MulFOp(centred, inverse).result, scale).result, bias
        )
        return _narrow(result.result, ctx)

    return [_elementwise(ctx, source, operands, body)]


def _lower_batch_norm_training(ctx, source, data, compute) -> list[mlir_ir.Value]:
    """Training mode (opset 14+): normalise by the batch's own statistics (population variance
    over every dim but the channel), and return the running statistics updated with them:
    running = input * momentum + batch * (1 - momentum), as ONNX's reference computes them."""
    if opset(ctx) < 14:
        raise ctx.error("supports training_mode only from opset 14 (earlier opsets had other outputs)")
    rank = len(data.shape)
    if rank < 2:
        raise ctx.error(f"expects an input of rank >= 2, got {format_type(data)}")
    epsilon = float(attribute(ctx, "epsilon", 1e-5))
    momentum = float(attribute(ctx, "momentum", 0.9))
    axes = tuple(axis for axis in range(rank) if axis != 1)
    mean, variance = _moments(source, axes, compute)
    inverse = _inverse_std(variance, epsilon, compute)
    scale = _optional_operand(ctx, 1, rank, "scale", channel=True)
    bias = _optional_operand(ctx, 2, rank, "bias", channel=True)
    if scale is None or bias is None:
        raise ctx.error("is missing its scale or bias input")
    results = [_affine_normalize(ctx, source, compute, mean, inverse, [1], scale, bias)]
    positions = output_positions(ctx)
    for result_index, position in enumerate(positions[1:], start=1):
        if position not in (1, 2):
            raise ctx.error(f"has an output #{position}; training mode has 3 (Y, running_mean, running_var)")
        running, batch = (ctx.operands[3], mean) if position == 1 else (ctx.operands[4], variance)
        results.append(_running_update(ctx, running, batch, momentum, compute, result_index))
    return results


def _running_update(ctx, running, batch, momentum: float, compute, result_index: int) -> mlir_ir.Value:
    """running * momentum + batch * (1 - momentum), per channel, in the result's type."""
    result_type = ranked_result(ctx, result_index)
    if result_type.rank != 1:
        raise ctx.error(f"expects per-channel running statistics, got {result_type}")

    def body(arguments):
        old, new = (convert(item, compute) for item in arguments[:2])
        kept = arith.MulFOp(old, constant(compute, momentum)).result
        added = arith.MulFOp(new, constant(compute, 1.0 - momentum)).result
        return [convert(arith.AddFOp(kept, added).result, result_type.element_type)]

    return generic(
        [(running, [0]), (batch, [0])],
        [(empty(tensor_sizes(batch), result_type.element_type), [0])],
        1,
        (),
        body,
    )[0]


@register_lowering("onnx.GroupNormalization", since=21)
def _lower_group_norm(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Statistics per (batch, group) over the group's channels and the spatial dims.

    The input (N, C, ...) is viewed as (N, G, C/G, ...) with `tensor.expand_shape` (C static).
    Scale and bias are per channel (shape C) as from opset 21; the deprecated opset-18 form
    (per-group scale/bias) is refused by the registration's opset range.
    """
    source, data, compute = _float_input(ctx)
    rank = len(data.shape)
    groups = int(attribute(ctx, "num_groups", 0))
    if rank < 3 or data.shape[1] is None or groups <= 0 or data.shape[1] % groups:
        raise ctx.error(
            f"needs a static channel count divisible by num_groups = {groups}, got {format_type(data)}"
        )
    channels = data.shape[1]
    per_group = channels // groups
    sizes = tensor_sizes(source)
    grouped_sizes = [sizes[0], groups, per_group, *sizes[2:]]
    merged = [[0], [1, 2], *[[axis + 1] for axis in range(2, rank)]]
    grouped = expand_dim(source, 1, (groups, per_group))
    axes = tuple(range(2, rank + 1))
    mean, variance = _moments(grouped, axes, compute)
    inverse = _inverse_std(variance, float(attribute(ctx, "epsilon", 1e-5)), compute)
    operands = []
    for position, what in ((1, "scale"), (2, "bias")):
        present = input_value(ctx, position)
        if present is None:
            raise ctx.error(f"is missing its {what} input")
        value, niro_value = present
        expected = channels
        shape = ctx.ranked(niro_value, what).shape
        if tuple(shape) != (expected,):
            raise ctx.error(
                f"expects {what} of shape ({expected},), got {format_type(niro_value.type)}"
            )
        value = expand_dim(value, 0, (groups, per_group))
        operands.append((value, [1, 2]))
    grouped_rank = rank + 1
    identity = list(range(grouped_rank))

    def body(arguments):
        value, mean_value, inverse_value, scale, bias, _ = arguments
        result = arith.MulFOp(
            arith.SubFOp(convert(value, compute), mean_value).result, inverse_value
        ).result
        result = arith.MulFOp(result, convert(scale, compute)).result
        return [_narrow(arith.AddFOp(result, convert(bias, compute)).result, ctx)]

    result_element = ranked_result(ctx, 0).element_type
    normalized = generic(
        [(grouped, identity), (mean, [0, 1]), (inverse, [0, 1]), *operands],
        [(empty(grouped_sizes, result_element), identity)],
        grouped_rank,
        (),
        body,
    )[0]
    collapsed_type = mlir_ir.RankedTensorType.get(
        [size if isinstance(size, int) else DYNAMIC for size in sizes], result_element
    )
    collapsed = tensor.CollapseShapeOp(collapsed_type, normalized, reassociation(merged))
    return [cast_to(collapsed.result, ctx.result_types[0])]  # C is static, the result may not say so
