"""MLIR lowerings of the ONNX reductions (ReduceSum ... ReduceLogSumExp) and ArgMax/ArgMin.

Every reduction is one reduction `linalg.generic` into an accumulator of the reduced shape
(f16/bf16 sums accumulate in f32), then one element-wise `linalg.generic` that finishes the value
(sqrt, log, divide by the count, narrow) and writes the result shape (keepdims re-inserts the 1s
by reading the accumulator through a projected map). Empty reductions give ONNX's identities:
0 for sums, 1 for products, -inf/+inf (or the integer extremes) for max/min.

The reduced axes come from the `axes` attribute (before ReduceSum-13 / Reduce*-18) or the `axes`
input after. When that input is not a compile-time constant (ONNX's node tests feed it as a graph
input) the axes are recovered from the static operand and result shapes: one answer is compiled
directly; a few (3x2x2 -> 3x2 reduces axis 1 or 2) become an `scf.if` chain on the run-time
value. A run-time check (`cf.assert`) makes the program fail if the actual axes are none of
them: the compiled code never silently reduces over the wrong axes. Otherwise the op is refused.
A dynamic dim fits any size, so with dynamic shapes every set of axes of the input's length
that the result's rank allows is a candidate (the frontend ranks such a result: ONNX leaves
it unranked).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from niro.ir import ScalarType, format_type

from ..bindings import arith, linalg, math, mlir_ir, scf
from ..builders import (
    accumulator_type,
    as_i64,
    assert_true,
    cast_to,
    constant,
    convert,
    empty,
    fill,
    generic,
    identity_value,
    read_int_scalars,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import (
    attribute,
    element_type,
    input_value,
    normalize_axes,
    normalize_axis,
    opset,
    ranked_result,
)

__all__ = [
    "reduce_axes",
    "finish_to_result",
    "dispatch",
    "RuntimeAxes",
    "ReductionSpec",
    "REDUCTIONS",
    "arg_extreme",
    "linear_index",
    "reduce_into",
]


@dataclass(frozen=True, slots=True)
class ReductionSpec:
    """One Reduce* op: how an element enters the accumulator (`prepare`), how two combine
    (`combine`: "add", "mul", "max", "min"), how the accumulator becomes the result (`finish`:
    "none", "mean", "sqrt", "log", "logsumexp"), and the opset from which `axes` is an input."""

    op_type: str
    combine: str
    prepare: str = "none"  # "none", "abs", "square"
    finish: str = "none"
    axes_input_since: int = 18
    floats_only: bool = False

    @property
    def elementwise_on_single(self) -> bool:
        """Whether reducing one element is not the identity (|x|, x*x, log x)."""
        return self.prepare != "none" or self.finish in ("sqrt", "log")


REDUCTIONS = (
    ReductionSpec("ReduceSum", "add", axes_input_since=13),
    ReductionSpec("ReduceSumSquare", "add", prepare="square"),
    ReductionSpec("ReduceMean", "add", finish="mean"),
    ReductionSpec("ReduceMax", "max"),
    ReductionSpec("ReduceMin", "min"),
    ReductionSpec("ReduceProd", "mul"),
    ReductionSpec("ReduceL1", "add", prepare="abs"),
    ReductionSpec("ReduceL2", "add", prepare="square", finish="sqrt", floats_only=True),
    ReductionSpec("ReduceLogSum", "add", finish="log", floats_only=True),
    ReductionSpec("ReduceLogSumExp", "add", finish="logsumexp", floats_only=True),
)


# -- which axes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuntimeAxes:
    """Axes read at run time that the static shapes narrow to a few `options` (sorted axes
    tuples); `selectors[i]` is an i1 value true when the run-time axes are option i. A run-time
    check already guarantees one of them holds."""

    options: tuple[tuple[int, ...], ...]
    selectors: tuple[mlir_ir.Value, ...]


def reduce_axes(
    ctx: LoweringRuleContext, spec: ReductionSpec
) -> tuple[int, ...] | RuntimeAxes | None:
    """The normalized reduced axes, sorted; None means "no reduction" (noop_with_empty_axes);
    RuntimeAxes when only the run-time value of the axes input can decide."""
    data = ctx.ranked(ctx.niro_operands[0], "operand #0")
    rank = len(data.shape)
    noop = bool(attribute(ctx, "noop_with_empty_axes", 0))
    if opset(ctx) < spec.axes_input_since:
        listed = attribute(ctx, "axes")
        if listed is None or len(listed) == 0:
            return tuple(range(rank))
        return tuple(sorted(normalize_axes(ctx, listed, rank)))
    given = input_value(ctx, 1)
    if given is None:
        axes: Sequence[int] = ()
    else:
        constant_axes = ctx.constant_operand(1)
        if constant_axes is None:
            runtime = _runtime_axes(ctx, given[0], given[1], rank)
            if isinstance(runtime, RuntimeAxes):
                return runtime
            axes = runtime
        else:
            axes = [int(axis) for axis in constant_axes.reshape(-1)]
    if len(axes) == 0:
        if noop:
            if spec.elementwise_on_single:
                raise ctx.error(
                    "with noop_with_empty_axes and empty axes is not supported: the ONNX spec "
                    "returns the input, the reference applies the op to each element"
                )
            return None
        return tuple(range(rank))
    return tuple(sorted(normalize_axes(ctx, axes, rank)))


_MAX_RUNTIME_OPTIONS = 6  # C(4, 2): 2 run-time axes of a 4-D tensor of dynamic dims


def _runtime_axes(
    ctx: LoweringRuleContext, axes_value, axes_niro, rank: int
) -> tuple[int, ...] | RuntimeAxes:
    """Axes from the static shapes when `axes` is a run-time input, guarded by a run-time check.

    Sets of `count` axes are candidates when they turn the operand shape into the result shape.
    Candidates that reduce the same non-size-1 axes compute the same values (reducing a size-1
    axis changes nothing); when several such groups remain (e.g. 3x2x2 -> 3x2 reduces axis 1 or
    2) the run-time value picks one (`RuntimeAxes`), up to a few groups.
    """
    axes_type = ctx.ranked(axes_niro, "axes")
    if len(axes_type.shape) != 1 or axes_type.shape[0] is None:
        raise ctx.error(
            f"needs a constant axes input or a static 1-D one, got {format_type(axes_type)}"
        )
    count = axes_type.shape[0]
    if count == 0:
        return ()
    source = ctx.ranked(ctx.niro_operands[0], "operand #0").shape
    result = ctx.ranked(ctx.niro_results[0], "result").shape
    keepdims = bool(attribute(ctx, "keepdims", 1))
    candidates = [
        chosen
        for chosen in itertools.combinations(range(rank), count)
        if _fits(_reduced_shape(source, chosen, keepdims), result)
    ]
    # Reducing a size-1 axis changes no value; without keepdims it moves the other dims,
    # which only a static result shape pins down.
    merge = keepdims or None not in result
    groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for chosen in candidates:
        key = tuple(axis for axis in chosen if source[axis] != 1) if merge else chosen
        groups.setdefault(key, []).append(chosen)
    if not groups or len(groups) > _MAX_RUNTIME_OPTIONS:
        reason = "no" if not groups else "too many"
        raise ctx.error(
            f"needs a constant axes input: {reason} sets of {count} axes reduce "
            f"{format_type(ctx.niro_operands[0].type)} to {format_type(ctx.niro_results[0].type)}"
        )
    mask = _runtime_mask(ctx, axes_value, count, rank)
    selectors = [_mask_in(mask, members) for members in groups.values()]
    valid, *_ = selectors
    for selector in selectors[1:]:
        valid = arith.OrIOp(valid, selector).result
    assert_true(
        valid,
        f"{ctx.niro_location}: the axes input disagrees with the static result shape niroc "
        "compiled for",
    )
    if len(groups) == 1:
        return candidates[0]
    return RuntimeAxes(tuple(members[0] for members in groups.values()), tuple(selectors))


def _fits(shape: tuple, result: tuple) -> bool:
    """Whether a reduced `shape` can be the `result` shape (a dynamic dim, None, fits any)."""
    return len(shape) == len(result) and all(
        a is None or b is None or a == b for a, b in zip(shape, result, strict=True)
    )


def _reduced_shape(shape, axes, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if axis in axes else dim for axis, dim in enumerate(shape))
    return tuple(dim for axis, dim in enumerate(shape) if axis not in axes)


def _runtime_mask(ctx, axes_value, count: int, rank: int) -> mlir_ir.Value:
    """The run-time axes as an i64 bit set (negative axes normalized); an axis out of range
    sets bit 63, which no candidate has."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    mask = constant(i64, 0)
    for axis in read_int_scalars(axes_value, count):
        negative = arith.CmpIOp(arith.CmpIPredicate.slt, axis, constant(i64, 0)).result
        normalized = arith.SelectOp(
            negative, arith.AddIOp(axis, constant(i64, rank)).result, axis
        ).result
        in_range = arith.AndIOp(
            arith.CmpIOp(arith.CmpIPredicate.sge, normalized, constant(i64, 0)).result,
            arith.CmpIOp(arith.CmpIPredicate.slt, normalized, constant(i64, rank)).result,
        ).result
        safe = arith.SelectOp(in_range, normalized, constant(i64, 63)).result
        mask = arith.OrIOp(mask, arith.ShLIOp(constant(i64, 1), safe).result).result
    return mask


def _mask_in(mask: mlir_ir.Value, members: Sequence[tuple[int, ...]]) -> mlir_ir.Value:
    """i1: the bit set `mask` is exactly one of `members` (duplicated axes set fewer bits, so
    they match no member of `count` axes)."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    matches = constant(mlir_ir.IntegerType.get_signless(1), 0)
    for chosen in members:
        bits = sum(1 << axis for axis in chosen)
        equal = arith.CmpIOp(arith.CmpIPredicate.eq, mask, constant(i64, bits)).result
        matches = arith.OrIOp(matches, equal).result
    return matches


# -- building ---------------------------------------------------------------------------------


def reduce_into(
    source: mlir_ir.Value,
    axes: Sequence[int],
    accumulator: mlir_ir.Type,
    start: float | int,
    step: Callable[..., mlir_ir.Value],
    extra_inputs: Sequence[mlir_ir.Value] = (),
) -> mlir_ir.Value:
    """A reduction generic: the accumulator (the source shape without `axes`) starts at `start`
    and takes `step(element, accumulated)` for each element. `extra_inputs` have the accumulator's
    shape and are read at the same position; `step` then gets (element, *extras, accumulated)."""
    rank = mlir_ir.RankedTensorType(source.type).rank
    kept = [axis for axis in range(rank) if axis not in axes]
    sizes = tensor_sizes(source)
    init = fill(empty([sizes[axis] for axis in kept], accumulator), constant(accumulator, start))
    inputs = [(source, list(range(rank)))] + [(extra, kept) for extra in extra_inputs]
    return generic(inputs, [(init, kept)], rank, axes, lambda arguments: [step(*arguments)])[0]


def finish_to_result(
    ctx: LoweringRuleContext,
    accumulated: mlir_ir.Value,
    axes: Sequence[int],
    keepdims: bool,
    finish: Callable[[mlir_ir.Value], mlir_ir.Value] | None,
    source: mlir_ir.Value,
) -> mlir_ir.Value:
    """The element-wise generic from an accumulator (the source shape without `axes`) to the
    op's result type; with keepdims the reduced dims are the result's 1s. `finish` None: the
    accumulator's elements are the result's, so without keepdims (same shape) it is the result
    itself, no copy."""
    result_type = ranked_result(ctx, 0)
    rank = mlir_ir.RankedTensorType(source.type).rank
    kept = [axis for axis in range(rank) if axis not in axes]
    source_sizes = tensor_sizes(source)
    if keepdims:
        expected = [1 if axis in axes else source_sizes[axis] for axis in range(rank)]
        read = kept  # the result has the source's rank; the accumulator skips the reduced dims
    else:
        expected = [source_sizes[axis] for axis in kept]
        read = list(range(len(kept)))
    if len(expected) != result_type.rank:
        raise ctx.error(
            f"result {format_type(ctx.niro_results[0].type)} does not have rank {len(expected)}"
        )
    sizes = []
    for axis, size in enumerate(expected):
        if not result_type.is_dynamic_dim(axis):
            if isinstance(size, int) and size != result_type.shape[axis]:
                raise ctx.error(
                    f"result {format_type(ctx.niro_results[0].type)} disagrees with the reduced "
                    f"shape at dim {axis} ({size})"
                )
            sizes.append(result_type.shape[axis])
        else:
            sizes.append(size)
    out_rank = len(expected)
    dynamic = mlir_ir.ShapedType.get_dynamic_size()
    shape = [size if isinstance(size, int) else dynamic for size in sizes]
    if finish is None and accumulated.type == mlir_ir.RankedTensorType.get(
        shape, result_type.element_type
    ):
        return accumulated
    init = empty(sizes, result_type.element_type)
    return generic(
        [(accumulated, read)],
        [(init, list(range(out_rank)))],
        out_rank,
        (),
        lambda arguments: [finish(arguments[0]) if finish is not None else arguments[0]],
    )[0]


def _combine(kind: str, scalar: ScalarType, left: mlir_ir.Value, right: mlir_ir.Value) -> mlir_ir.Value:
    floating = scalar.is_float
    unsigned = scalar.is_unsigned_integer or scalar.is_bool
    match kind:
        case "add":
            return (arith.AddFOp if floating else arith.AddIOp)(left, right).result
        case "mul":
            return (arith.MulFOp if floating else arith.MulIOp)(left, right).result
        case "max":
            if floating:
                return arith.MaximumFOp(left, right).result
            return (arith.MaxUIOp if unsigned else arith.MaxSIOp)(left, right).result
        case "min":
            if floating:
                return arith.MinimumFOp(left, right).result
            return (arith.MinUIOp if unsigned else arith.MinSIOp)(left, right).result
    raise AssertionError(f"unknown combine {kind!r}")


def _start(kind: str, scalar: ScalarType) -> float | int:
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if scalar.is_bool:
        return 0 if kind == "max" else 1
    return identity_value(scalar, kind)


def _prepare(kind: str, scalar: ScalarType, element: mlir_ir.Value) -> mlir_ir.Value:
    match kind:
        case "none":
            return element
        case "square":
            return (arith.MulFOp if scalar.is_float else arith.MulIOp)(element, element).result
        case "abs":
            if scalar.is_float:
                return math.AbsFOp(element).result
            if scalar.is_unsigned_integer:
                return element
            return math.AbsIOp(element).result
    raise AssertionError(f"unknown prepare {kind!r}")


def _element_count(source: mlir_ir.Value, axes: Sequence[int], target: mlir_ir.Type, scalar) -> mlir_ir.Value:
    """The number of reduced elements as a scalar of `target` (float or integer)."""
    sizes = tensor_sizes(source)
    count = 1
    dynamic = []
    for axis in axes:
        if isinstance(sizes[axis], int):
            count *= sizes[axis]
        else:
            dynamic.append(sizes[axis])
    if not dynamic:
        return constant(target, count)
    i64 = mlir_ir.IntegerType.get_signless(64)
    total = constant(i64, count)
    for size in dynamic:
        total = arith.MulIOp(total, as_i64(size)).result
    if isinstance(target, mlir_ir.IntegerType):
        return total if target.width == 64 else arith.TruncIOp(target, total).result
    return arith.SIToFPOp(target, total).result


def lower_reduction(ctx: LoweringRuleContext, spec: ReductionSpec) -> Sequence[mlir_ir.Value]:
    source = ctx.operands[0]
    scalar = element_type(ctx.niro_operands[0])
    if scalar.is_bool and spec.combine not in ("max", "min"):
        raise ctx.error("does not reduce BOOL tensors")
    if spec.floats_only and not scalar.is_float:
        raise ctx.error(f"is only supported on float tensors, got {scalar.spelling}")
    axes = reduce_axes(ctx, spec)
    if axes is None:
        return [source]
    if isinstance(axes, RuntimeAxes):
        return [dispatch(ctx, axes, lambda option: _reduce(ctx, spec, option))]
    return [cast_to(_reduce(ctx, spec, axes), ctx.result_types[0])]


def dispatch(ctx: LoweringRuleContext, runtime: RuntimeAxes, build: Callable) -> mlir_ir.Value:
    """A chain of `scf.if`s running `build(option)` for the option the run-time axes select
    (the last option is the final else: the run-time check rules out the rest). Each option's
    value is cast to the result type, which a dynamic dim leaves less static than the option's."""
    *tried, last = range(len(runtime.options))
    if not tried:
        return cast_to(build(runtime.options[last]), ctx.result_types[0])
    head = tried[0]
    branch = scf.IfOp(runtime.selectors[head], [ctx.result_types[0]], has_else=True)
    with mlir_ir.InsertionPoint(branch.then_block):
        scf.YieldOp([cast_to(build(runtime.options[head]), ctx.result_types[0])])
    with mlir_ir.InsertionPoint(branch.else_block):
        rest = RuntimeAxes(runtime.options[head + 1 :], runtime.selectors[head + 1 :])
        scf.YieldOp([dispatch(ctx, rest, build)])
    return branch.results[0]


def _reduce(ctx: LoweringRuleContext, spec: ReductionSpec, axes: tuple[int, ...]) -> mlir_ir.Value:
    source = ctx.operands[0]
    scalar = element_type(ctx.niro_operands[0])
    keepdims = bool(attribute(ctx, "keepdims", 1))
    element = lower_scalar_type(scalar)
    accumulator = element if spec.combine in ("max", "min") else accumulator_type(scalar)
    result_element = ranked_result(ctx, 0).element_type

    def widen(value: mlir_ir.Value) -> mlir_ir.Value:
        return convert(value, accumulator) if scalar.is_float else value

    if spec.finish == "logsumexp":
        return _log_sum_exp(ctx, source, axes, keepdims, accumulator, scalar)

    def step(value: mlir_ir.Value, accumulated: mlir_ir.Value) -> mlir_ir.Value:
        return _combine(
            spec.combine, scalar, _prepare(spec.prepare, scalar, widen(value)), accumulated
        )

    accumulated = reduce_into(source, axes, accumulator, _start(spec.combine, scalar), step)
    count = _element_count(source, axes, accumulator, scalar) if spec.finish == "mean" else None

    def finish(value: mlir_ir.Value) -> mlir_ir.Value:
        match spec.finish:
            case "sqrt":
                value = math.SqrtOp(value).result
            case "log":
                value = math.LogOp(value).result
            case "mean":
                if scalar.is_float:
                    value = arith.DivFOp(value, count).result
                elif scalar.is_unsigned_integer:
                    value = arith.DivUIOp(value, count).result
                else:
                    value = arith.DivSIOp(value, count).result
        return convert(value, result_element) if scalar.is_float else value

    plain = spec.finish == "none" and accumulator == result_element
    return finish_to_result(ctx, accumulated, axes, keepdims, None if plain else finish, source)


def _log_sum_exp(ctx, source, axes, keepdims, accumulator, scalar) -> mlir_ir.Value:
    """log(sum(exp(x - m))) + m with m the max (0 where the max is infinite), in `accumulator`."""
    result_element = ranked_result(ctx, 0).element_type
    maximum = reduce_into(
        source,
        axes,
        accumulator,
        float("-inf"),
        lambda value, accumulated: (
            arith.MaximumFOp(convert(value, accumulator), accumulated).result
        ),
    )

    def shift_of(peak: mlir_ir.Value) -> mlir_ir.Value:
        infinite = arith.CmpFOp(
            arith.CmpFPredicate.OEQ, math.AbsFOp(peak).result, constant(accumulator, float("inf"))
        ).result
        return arith.SelectOp(infinite, constant(accumulator, 0.0), peak).result

    def step(value, peak, accumulated):
        shifted = arith.SubFOp(convert(value, accumulator), shift_of(peak)).result
        return arith.AddFOp(math.ExpOp(shifted).result, accumulated).result

    summed = reduce_into(source, axes, accumulator, 0.0, step, extra_inputs=[maximum])
    rank = mlir_ir.RankedTensorType(source.type).rank
    kept = [axis for axis in range(rank) if axis not in axes]
    combined = generic(
        [(summed, list(range(len(kept)))), (maximum, list(range(len(kept))))],
        [
            (
                empty([tensor_sizes(source)[axis] for axis in kept], accumulator),
                list(range(len(kept))),
            )
        ],
        len(kept),
        (),
        lambda arguments: [
            arith.AddFOp(math.LogOp(arguments[0]).result, shift_of(arguments[1])).result
        ],
    )[0]
    return finish_to_result(
        ctx, combined, axes, keepdims, lambda value: convert(value, result_element), source
    )


def _register(spec: ReductionSpec) -> None:
    @register_lowering(f"onnx.{spec.op_type}")
    def rule(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
        return lower_reduction(ctx, spec)


for _spec in REDUCTIONS:
    _register(_spec)


# -- ArgMax / ArgMin ----------------------------------------------------------------------------


def _lower_arg(ctx: LoweringRuleContext, largest: bool) -> Sequence[mlir_ir.Value]:
    source = ctx.operands[0]
    data = ctx.ranked(ctx.niro_operands[0], "operand #0")
    axis = normalize_axis(ctx, int(attribute(ctx, "axis", 0)), len(data.shape))
    keepdims = bool(attribute(ctx, "keepdims", 1))
    last = bool(attribute(ctx, "select_last_index", 0))
    indices = arg_extreme(ctx, source, data.element_type, (axis,), largest, last)
    return [finish_to_result(ctx, indices, (axis,), keepdims, None, source)]


def linear_index(ctx: LoweringRuleContext, source: mlir_ir.Value, axes: Sequence[int]) -> mlir_ir.Value:
    """Inside a generic over `source`'s dims: the row-major position (i64) over `axes`."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    shape = mlir_ir.RankedTensorType(source.type)
    position = None
    for axis in axes:
        index = as_i64(linalg.IndexOp(axis).result)
        if position is None:
            position = index
            continue
        if shape.is_dynamic_dim(axis):
            raise ctx.error("needs static sizes for a position over several dynamic dims")
        position = arith.AddIOp(
            arith.MulIOp(position, constant(i64, shape.shape[axis])).result, index
        ).result
    assert position is not None
    return position


def arg_extreme(
    ctx: LoweringRuleContext,
    source: mlir_ir.Value,
    scalar: ScalarType,
    axes: Sequence[int],
    largest: bool,
    last: bool,
) -> mlir_ir.Value:
    """The i64 position (row-major over `axes`) of the first (or, with `last`, the last)
    largest or smallest element, over the source's dims without `axes`.

    Ties are broken by comparing positions, not by loop order, so the answer does not depend on
    how the reduction is scheduled; NaN counts as the extreme, as in numpy."""
    if scalar.is_bool:
        raise ctx.error("does not take BOOL tensors")
    rank = mlir_ir.RankedTensorType(source.type).rank
    element = lower_scalar_type(scalar)
    i64 = mlir_ir.IntegerType.get_signless(64)
    kept = [dim for dim in range(rank) if dim not in axes]
    sizes = tensor_sizes(source)
    start = identity_value(scalar, "max" if largest else "min")
    best_init = fill(empty([sizes[dim] for dim in kept], element), constant(element, start))
    index_init = fill(empty([sizes[dim] for dim in kept], i64), constant(i64, -1))

    def body(arguments):
        value, best, best_index = arguments
        index = linear_index(ctx, source, axes)
        if scalar.is_float:
            predicate = arith.CmpFPredicate.OGT if largest else arith.CmpFPredicate.OLT
            better = arith.CmpFOp(predicate, value, best).result
            equal = arith.CmpFOp(arith.CmpFPredicate.OEQ, value, best).result
            value_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
            best_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, best, best).result
            best_number = arith.XOrIOp(best_nan, constant(best_nan.type, 1)).result
            # NaN beats any number; two NaNs tie.
            better = arith.AndIOp(arith.OrIOp(better, value_nan).result, best_number).result
            equal = arith.OrIOp(equal, arith.AndIOp(value_nan, best_nan).result).result
        else:
            unsigned = scalar.is_unsigned_integer
            if largest:
                predicate = arith.CmpIPredicate.ugt if unsigned else arith.CmpIPredicate.sgt
            else:
                predicate = arith.CmpIPredicate.ult if unsigned else arith.CmpIPredicate.slt
            better = arith.CmpIOp(predicate, value, best).result
            equal = arith.CmpIOp(arith.CmpIPredicate.eq, value, best).result
        unset = arith.CmpIOp(arith.CmpIPredicate.slt, best_index, constant(i64, 0)).result
        order = arith.CmpIPredicate.sgt if last else arith.CmpIPredicate.slt
        earlier = arith.CmpIOp(order, index, best_index).result
        take = arith.OrIOp(
            arith.OrIOp(unset, better).result, arith.AndIOp(equal, earlier).result
        ).result
        return [
            arith.SelectOp(take, value, best).result,
            arith.SelectOp(take, index, best_index).result,
        ]

    _, indices = generic(
        [(source, list(range(rank)))],
        [(best_init, kept), (index_init, kept)],
        rank,
        tuple(axes),
        body,
    )
    return indices


@register_lowering("onnx.ArgMax")
def _lower_argmax(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_arg(ctx, largest=True)


@register_lowering("onnx.ArgMin")
def _lower_argmin(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_arg(ctx, largest=False)
