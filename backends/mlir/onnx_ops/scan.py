"""Scan (opset 9+) as an `scf.for` over the sequence.

The body region's entry block takes the N state values and one slice of each of the M scan
inputs; its Yield gives the N new states and K scan-output slices. The loop carries the
states and the K stacked outputs (each slice written with `tensor.insert_slice` at the
iteration's position), and reads each scan input slice with a rank-reducing
`tensor.extract_slice`; `scan_*_directions` 1 walks that input or output backwards. A
sequence longer than BLOCK_STEPS, or of a length known at run time only, is walked in blocks,
STEPS_PER_ITERATION steps an iteration (`_stack`): IREE copies a loop-carried tensor at every
iteration, and drives every iteration from the host. A scan
axis other than 0 is handled by a transpose that brings it to the front before the loop (scan
inputs) or moves it back after it (scan outputs). With dynamic dims the first iteration is
peeled to size the scan outputs (`_lower_dynamic_scan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from niro.ir import UnknownOp

from ..bindings import arith, mlir_ir, scf, tensor
from ..builders import (
    BLOCK_STEPS,
    DYNAMIC,
    Block,
    Stacking,
    assert_true,
    cast_to,
    dim_size,
    empty,
    extract_row,
    first_step_reads,
    generic,
    index_constant,
    insert_row,
    run_steps,
    stack_in_blocks,
    steps_per_iteration,
    tensor_size,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_type
from .common import attribute, static_shape
from .indexing import cmp, sub

__all__: list[str] = []


def _flags(ctx: LoweringRuleContext, name: str, count: int, allowed: tuple[int, ...]) -> list[int]:
    values = attribute(ctx, name)
    values = [0] * count if values is None else [int(v) for v in values]
    if len(values) != count:
        raise ctx.error(f"attribute '{name}' has {len(values)} values, expected {count}")
    if any(v not in allowed for v in values):
        raise ctx.error(f"supports {name} in {allowed} only, got {values}")
    return values


@register_lowering("onnx.Scan", since=9)
def _lower_scan(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, UnknownOp), op
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        raise ctx.error("expects one body region with one block")
    block = op.regions[0].blocks[0]
    scan_inputs = int(attribute(ctx, "num_scan_inputs", 0))
    states = len(ctx.operands) - scan_inputs
    scan_outputs = len(ctx.niro_results) - states
    if scan_inputs < 1 or states < 0 or scan_outputs < 0:
        raise ctx.error("has inconsistent numbers of states, scan inputs and outputs")
    if len(block.arguments) != states + scan_inputs:
        raise ctx.error(
            f"body takes {len(block.arguments)} values, expected {states + scan_inputs}"
        )
    input_axes = _axes(ctx, "scan_input_axes", ctx.niro_operands[states:], 0)
    output_axes = _axes(ctx, "scan_output_axes", ctx.niro_results[states:], 0)
    input_reverse = _flags(ctx, "scan_input_directions", scan_inputs, (0, 1))
    output_reverse = _flags(ctx, "scan_output_directions", scan_outputs, (0, 1))
    scanned = [*ctx.niro_operands[states:], *ctx.niro_results[states:]]
    if any(None in ctx.ranked(value, f"scan value #{index}").shape for index, value in enumerate(scanned)):
        layout = _Layout(states, scan_outputs, input_axes, output_axes, input_reverse, output_reverse)
        return _lower_dynamic_scan(ctx, block, layout)
    lengths = {
        static_shape(ctx, value, f"scan input #{i}")[input_axes[i]]
        for i, value in enumerate(ctx.niro_operands[states:])
    }
    lengths |= {
        static_shape(ctx, value, f"scan output #{i}")[output_axes[i]]
        for i, value in enumerate(ctx.niro_results[states:])
    }
    if len(lengths) != 1:
        raise ctx.error(
            f"scan inputs and outputs disagree on the sequence length: {sorted(lengths)}"
        )
    length = lengths.pop()
    layout = _Layout(states, scan_outputs, input_axes, output_axes, input_reverse, output_reverse)
    sources = [
        _permute(value, _axis_first(axis, mlir_ir.RankedTensorType(value.type).rank))
        for value, axis in zip(ctx.operands[states:], input_axes, strict=True)
    ]
    accumulators = []
    for type_, axis in zip(ctx.result_types[states:], output_axes, strict=True):
        ranked = mlir_ir.RankedTensorType(type_)
        shape = list(ranked.shape)
        order = _axis_first(axis, len(shape))
        accumulators.append(tensor.EmptyOp([shape[d] for d in order], ranked.element_type).result)
    steps = _Steps(index_constant(0), index_constant(length), index_constant(length - 1), length)
    results = _stack(ctx, block, layout, steps, sources, [*ctx.operands[:states], *accumulators])
    return _scan_results(ctx, layout, results)


@dataclass(frozen=True)
class _Layout:
    """A Scan's attributes: how many states and scan outputs, each scan value's axis and
    direction (1: backwards)."""

    states: int
    scan_outputs: int
    input_axes: list[int]
    output_axes: list[int]
    input_reverse: list[int]
    output_reverse: list[int]


def _lower_dynamic_scan(ctx: LoweringRuleContext, block, layout: _Layout) -> list[mlir_ir.Value]:
    """Scan with dynamic dims: the sequence length is the scan inputs' (checked equal at run
    time) and the slices take their sizes with `tensor.dim`. The scan outputs' slice sizes are
    known only once the body has run, so the first iteration is peeled (an
    `scf.execute_region`): its yields size the stacked outputs, the loop runs the others. A
    run-time check makes the program fail on an empty sequence (its outputs' sizes are
    unknown)."""
    states = layout.states
    sources = [
        _permute(value, _axis_first(axis, mlir_ir.RankedTensorType(value.type).rank))
        for value, axis in zip(ctx.operands[states:], layout.input_axes, strict=True)
    ]
    static_lengths = {mlir_ir.RankedTensorType(source.type).shape[0] for source in sources} - {DYNAMIC}
    static_lengths |= {
        ctx.ranked(value, f"scan output #{index}").shape[axis]
        for index, (value, axis) in enumerate(zip(ctx.niro_results[states:], layout.output_axes, strict=True))
    } - {None}
    if len(static_lengths) > 1:
        raise ctx.error(
            f"scan inputs and outputs disagree on the sequence length: {sorted(static_lengths)}"
        )
    known = static_lengths.pop() if static_lengths else None
    length = dim_size(sources[0], 0) if known is None else index_constant(known)
    valid = cmp("sge", length, 1)
    for source in sources:
        valid = arith.AndIOp(valid, cmp("eq", dim_size(source, 0), length)).result
    assert_true(
        valid,
        f"{ctx.niro_location}: 'onnx.Scan' op: the scan inputs must have one sequence length, at least 1",
    )
    steps = _Steps(index_constant(1), length, sub(length, 1), None if known is None else known - 1)

    yield_types = [lower_type(value.type) for value in _yielded(block)]
    if len(yield_types) != states + layout.scan_outputs:
        raise ctx.error(f"body yields {len(yield_types)} values, expected {states + layout.scan_outputs}")
    first = scf.ExecuteRegionOp(yield_types)
    entry = first.region.blocks.append()
    with mlir_ir.InsertionPoint(entry):
        bound = _bind(block, layout, steps, sources, index_constant(0), ctx.operands[:states])

    def finish_first(yield_ctx: LoweringRuleContext) -> None:
        scf.YieldOp(list(yield_ctx.operands))

    ctx.lower_block(block, entry, bound, yield_builder=finish_first)
    peeled = list(first.results)
    accumulators = []
    for index, piece in enumerate(peeled[states:]):
        sizes = [length, *tensor_sizes(piece)]
        stacked = empty(sizes, mlir_ir.RankedTensorType(piece.type).element_type)
        offset = steps.last if layout.output_reverse[index] else index_constant(0)
        accumulators.append(insert_row(piece, stacked, offset))
    results = _stack(ctx, block, layout, steps, sources, [*peeled[:states], *accumulators])
    return _scan_results(ctx, layout, results)


@dataclass(frozen=True)
class _Steps:
    """The steps [lower, upper) a Scan's loop walks, of a sequence whose last step is `last`
    (a scan value walked backwards reads or writes step p at `last - p`); `count` is the
    number of steps when known at compile time."""

    lower: mlir_ir.Value
    upper: mlir_ir.Value
    last: mlir_ir.Value
    count: int | None


def _bind(
    block, layout: _Layout, steps: _Steps, sources: Sequence[mlir_ir.Value], position, carried
) -> list[mlir_ir.Value]:
    """The values of the body's arguments at step `position`: the states `carried`, then the
    scan inputs' slices."""
    states = layout.states
    bound = []
    for argument, value in zip(block.arguments[:states], carried, strict=True):
        bound.append(cast_to(value, lower_type(argument.type)))
    backwards = None
    for index, argument in enumerate(block.arguments[states:]):
        offset = position
        if layout.input_reverse[index]:
            if backwards is None:
                backwards = sub(steps.last, position)
            offset = backwards
        bound.append(cast_to(extract_row(sources[index], offset), lower_type(argument.type)))
    return bound


def _stack(
    ctx: LoweringRuleContext,
    block,
    layout: _Layout,
    steps: _Steps,
    sources: Sequence[mlir_ir.Value],
    carried: Sequence[mlir_ir.Value],
) -> list[mlir_ir.Value]:
    """The `scf.for` over `steps` running the body, carrying the states and the stacked scan
    outputs (`carried`), and its results. A walk of more than BLOCK_STEPS steps (or of a
    number known at run time only) goes in blocks (`stack_in_blocks`): each block's steps stack
    their rows in a slab of their own, which the block inserts into the scan outputs. A state
    with dynamic dims is read by a block's first step (`first_step_reads`), not carried into
    the block's loop, and checked to keep its dims."""
    if steps.count is not None and steps.count <= BLOCK_STEPS:
        loop = scf.ForOp(steps.lower, steps.upper, index_constant(1), list(carried))
        run_steps(loop, 1, _body_step(ctx, block, layout, steps, sources, loop, None))
        return list(loop.results)
    states = layout.states
    # the dims of the states and of the scan outputs' rows, read before the loops
    sizes = [
        [tensor_size(value, axis) for axis in range(mlir_ir.RankedTensorType(value.type).rank)]
        for value in carried
    ]

    def enter(starting: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        """The states a block's loop starts from: a state with dynamic dims as an unread
        `tensor.empty` (its first step reads the block's), once checked."""
        for index, value in enumerate(starting[:states]):
            _check_same_dims(ctx, value, sizes[index], index)
        return [
            empty(sizes[index], _element(value)) if _is_dynamic(value) else value
            for index, value in enumerate(starting[:states])
        ]

    def step_for(loop: scf.ForOp, walked: Block | None, starting: list[mlir_ir.Value]):
        blocked = None if walked is None else _Blocked(walked, starting[:states], sizes[:states])
        return _body_step(ctx, block, layout, steps, sources, loop, blocked)

    stacking = Stacking(
        states,
        [row[1:] for row in sizes[states:]],
        [bool(reverse) for reverse in layout.output_reverse],
        steps.last,
    )
    per_iteration = steps_per_iteration(len(block.operations))
    return stack_in_blocks(
        steps.lower, steps.upper, list(carried), stacking, per_iteration, step_for, enter
    )


@dataclass(frozen=True)
class _Blocked:
    """The block a loop over a block's steps walks, the states the block starts from and their
    dims (read before the loops)."""

    block: Block
    states: list[mlir_ir.Value]
    sizes: list[list[int | mlir_ir.Value]]


def _is_dynamic(value: mlir_ir.Value) -> bool:
    return DYNAMIC in list(mlir_ir.RankedTensorType(value.type).shape)


def _element(value: mlir_ir.Value) -> mlir_ir.Type:
    return mlir_ir.RankedTensorType(value.type).element_type


def _body_step(
    ctx: LoweringRuleContext,
    block,
    layout: _Layout,
    steps: _Steps,
    sources: Sequence[mlir_ir.Value],
    loop: scf.ForOp,
    blocked: _Blocked | None,
):
    """The `run_steps` step of `loop`: the body lowered once, each scan output's row going into
    the stacked output it carries, or into the slab of the `blocked` block; a step starts from
    the states the step before it yields."""
    states = layout.states

    def step(position: mlir_ir.Value, carried: list[mlir_ir.Value], offset: int) -> list[mlir_ir.Value]:
        """The step `offset` places into an iteration, at `position`, from `carried`: what it
        yields (states, then the stacked outputs or slabs with its rows)."""
        with mlir_ir.InsertionPoint(loop.body):
            starts = carried[:states]
            if blocked is not None and offset == 0:  # only a first step can be the block's
                starts = [
                    first_step_reads(position, blocked.block.start, [start], [value], blocked.sizes[index])[0]
                    if _is_dynamic(value)
                    else value
                    for index, (start, value) in enumerate(zip(blocked.states, starts, strict=True))
                ]
            bound = _bind(block, layout, steps, sources, position, starts)
        stepped: list[mlir_ir.Value] = []

        def finish(yield_ctx: LoweringRuleContext) -> None:
            yielded = list(yield_ctx.operands)
            if len(yielded) != states + layout.scan_outputs:
                raise ctx.error(f"body yields {len(yielded)} values, expected {states + layout.scan_outputs}")
            rows = []
            for index, (piece, into) in enumerate(zip(yielded[states:], carried[states:], strict=True)):
                backwards = bool(layout.output_reverse[index])
                if blocked is not None:
                    at = blocked.block.slot(position, backwards)
                else:
                    at = sub(steps.last, position) if backwards else position
                rows.append(insert_row(cast_to(piece, _row_type(into.type)), into, at))
            new_states = [cast_to(value, old.type) for value, old in zip(yielded[:states], carried[:states], strict=True)]
            stepped.extend([*new_states, *rows])

        ctx.lower_block(block, loop.body, bound, yield_builder=finish)
        return stepped

    return step


def _check_same_dims(ctx: LoweringRuleContext, value: mlir_ir.Value, sizes, index: int) -> None:
    """A run-time check that a state a block starts from has the dynamic dims the state
    started with (the block's first step reads it in those dims)."""
    for axis, size in enumerate(sizes):
        if isinstance(size, int):
            continue
        assert_true(
            cmp("eq", dim_size(value, axis), size),
            f"{ctx.niro_location}: 'onnx.Scan' op: state #{index} changes size along dim {axis} "
            "from one iteration to the next",
        )


def _scan_results(ctx: LoweringRuleContext, layout: _Layout, results: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
    """The loop's results as the Scan's: scan outputs moved back to their axes, every result
    cast to the Scan's result type (a state's type may be less static)."""
    states = layout.states
    for index, axis in enumerate(layout.output_axes):
        value = results[states + index]
        if axis:
            value = _permute(value, _axis_back(axis, mlir_ir.RankedTensorType(value.type).rank))
        results[states + index] = cast_to(value, ctx.result_types[states + index])
    for index in range(states):
        results[index] = cast_to(results[index], ctx.result_types[index])
    return results


def _row_type(stacked: mlir_ir.Type) -> mlir_ir.RankedTensorType:
    """The type of one row of a stacked tensor (its leading axis dropped)."""
    ranked = mlir_ir.RankedTensorType(stacked)
    return mlir_ir.RankedTensorType.get(list(ranked.shape)[1:], ranked.element_type)


def _yielded(block) -> list:
    """The values the body block's terminator yields (its operands)."""
    return list(block.operations[-1].operands)


def _axes(ctx: LoweringRuleContext, name: str, values, rank_offset: int) -> list[int]:
    """Attribute `name` (one axis per scan input or output; default 0), made non-negative."""
    found = attribute(ctx, name)
    axes = [0] * len(values) if found is None else [int(axis) for axis in found]
    if len(axes) != len(values):
        raise ctx.error(f"attribute '{name}' has {len(axes)} values, expected {len(values)}")
    normalized = []
    for index, (axis, value) in enumerate(zip(axes, values, strict=True)):
        rank = len(ctx.ranked(value, f"scan value #{index}").shape) + rank_offset
        if not -rank <= axis < rank:
            raise ctx.error(f"attribute '{name}' has axis {axis} out of range for rank {rank}")
        normalized.append(axis % rank)
    return normalized


def _axis_first(axis: int, rank: int) -> list[int]:
    """The dims of a tensor, scan axis first (the others in order)."""
    return [axis, *(dim for dim in range(rank) if dim != axis)]


def _axis_back(axis: int, rank: int) -> list[int]:
    """For each dim of a result whose scan axis is `axis`, the dim of the axis-first tensor."""
    return [dim + 1 if dim < axis else 0 if dim == axis else dim for dim in range(rank)]


def _permute(value: mlir_ir.Value, order: Sequence[int]) -> mlir_ir.Value:
    """`value` with dim k of the result read from dim `order[k]`."""
    if list(order) == list(range(len(order))):
        return value
    ranked = mlir_ir.RankedTensorType(value.type)
    sizes = tensor_sizes(value)
    init = empty([sizes[dim] for dim in order], ranked.element_type)
    spec = [list(order).index(dim) for dim in range(len(order))]
    return generic([(value, spec)], [(init, list(range(len(order))))], len(order), (), lambda a: [a[0]])[0]
