"""RNN, GRU and LSTM (opset 7+): per direction, the steps unrolled over a static sequence of
at most UNROLLED_STEPS steps, else `scf.for` loops over the sequence length walking every
direction at once (LOOPED_STEPS steps per iteration, then one; a recurrence reading its hidden
state from Y in blocks of BLOCK_STEPS steps).

The three ops share everything but the gate math (`recurrent_kit.py` holds what they share).
Per direction: every time step of X is projected through W at once (`X * W^T + Wb`, time-major
whatever the layout); then the steps, as straight-line ops or in `scf.for` loops over time (their
bounds from the `tensor.dim` of X when the sequence length is dynamic) carrying the hidden state
(and LSTM's cell state) and the stacked Y. Each step projects the state through R
(`H * R^T + Rb`) and hands both projections to the cell's `step`, whose gate math is
element-wise `linalg.generic` ops over (batch, hidden). A reverse direction walks time
backwards. A bidirectional op walks both directions together, unrolled or looped: forward step
t next to reverse step t (time T-1-t), both writing into one Y, their steps independent so that
IREE may run them side by side.
Y, Y_h and Y_c are assembled in the layout asked for (0: time-major, 1: batch-major); absent
outputs are not built. Results are narrowed once at the end. A dynamic batch is carried as a
dynamic dim of the states and of Y (its size the `tensor.dim` of X); a dynamic sequence of
length 0 fails at run time with a clear message.

`sequence_lens` follows the ONNX definition as onnxruntime implements it (onnx.reference ignores
the input): for batch entry b, steps at or past `sequence_lens[b]` leave the states unchanged and
write zeros to Y, so Y_h/Y_c hold the state after the last valid step and the reverse direction
starts at step `sequence_lens[b] - 1`; a length of 0 gives zero Y_h/Y_c.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from niro.ir import format_type

from ..bindings import arith, mlir_ir, scf, tensor
from ..builders import (
    DYNAMIC,
    as_i64,
    assert_true,
    block_loop,
    empty,
    extract_slice,
    fill,
    first_step_reads,
    generic,
    index_constant,
    run_steps,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .common import attribute, output_positions
from .recurrent_kit import (
    Cell,
    Recurrence,
    elementwise,
    gate,
    input_bias_offsets,
    parse_recurrence,
    peephole,
    project,
    project_gates,
    project_state,
    shape_text,
    state,
    static_size,
    x_gate,
)

__all__ = ["CELLS"]

# -- the time loop ---------------------------------------------------------------------------------


def _slice_spec(
    rec: Recurrence, direction: int, time: mlir_ir.Value | None, steps: mlir_ir.Value | None = None
) -> tuple:
    """(DYNAMIC offsets, static offsets, DYNAMIC sizes, static sizes) of one direction's
    (batch, hidden) slab of a state tensor (time None: rank 3) or of Y at step `time` (rank 4),
    in the layout; with `steps`, of that many steps of Y from `time`."""
    batch, hidden = static_size(rec.batch), rec.hidden
    dynamic_batch = [] if isinstance(rec.batch, int) else [rec.batch]
    if time is None:
        if rec.layout == 0:
            return [], [direction, 0, 0], dynamic_batch, [1, batch, hidden]
        return [], [0, direction, 0], dynamic_batch, [batch, 1, hidden]
    length = 1 if steps is None else DYNAMIC
    lengths = [] if steps is None else [steps]
    if rec.layout == 0:
        sizes = [*lengths, *dynamic_batch]
        return [time], [DYNAMIC, direction, 0, 0], sizes, [length, 1, batch, hidden]
    sizes = [*dynamic_batch, *lengths]
    return [time], [0, DYNAMIC, direction, 0], sizes, [batch, length, 1, hidden]


def _extract(rec: Recurrence, source: mlir_ir.Value, spec: tuple) -> mlir_ir.Value:
    offsets, static_offsets, sizes, static_sizes = spec
    result = mlir_ir.RankedTensorType.get([static_size(rec.batch), rec.hidden], rec.compute)
    return tensor.ExtractSliceOp(
        result, source, offsets, sizes, [], static_offsets, static_sizes, [1] * len(static_sizes)
    ).result


def _insert(piece: mlir_ir.Value, into: mlir_ir.Value, spec: tuple) -> mlir_ir.Value:
    offsets, static_offsets, sizes, static_sizes = spec
    return tensor.InsertSliceOp(
        piece, into, offsets, sizes, [], static_offsets, static_sizes, [1] * len(static_sizes)
    ).result


def _mask(
    rec: Recurrence, time: mlir_ir.Value, new: list[mlir_ir.Value], old: list[mlir_ir.Value]
) -> tuple[list[mlir_ir.Value], mlir_ir.Value]:
    """Where step `time` is past a batch entry's length: the old states, and 0 for Y."""
    assert rec.lengths is not None
    i64 = mlir_ir.IntegerType.get_signless(64)
    step = as_i64(time)
    math = rec.math

    def body(length, *elements):
        valid = arith.CmpIOp(arith.CmpIPredicate.slt, step, arith.ExtSIOp(i64, length).result)
        count = len(new)
        kept = [
            math.select(valid.result, fresh, stale)
            for fresh, stale in zip(elements[:count], elements[count:], strict=True)
        ]
        return [*kept, math.select(valid.result, elements[0], math.zero())]

    results = elementwise(
        rec, [(rec.lengths, [0]), *map(state, new), *map(state, old)], len(new) + 1, body
    )
    return results[:-1], results[-1]


def _zero_empty_sequences(rec: Recurrence, final: mlir_ir.Value) -> mlir_ir.Value:
    """A final state is 0 for a batch entry of length 0 (as onnxruntime)."""
    assert rec.lengths is not None
    i32 = mlir_ir.IntegerType.get_signless(32)
    zero = arith.ConstantOp(i32, mlir_ir.IntegerAttr.get(i32, 0)).result
    math = rec.math

    def body(length, element):
        positive = arith.CmpIOp(arith.CmpIPredicate.sgt, length, zero).result
        return [math.select(positive, element, math.zero())]

    return elementwise(rec, [(rec.lengths, [0]), state(final)], 1, body)[0]


UNROLLED_STEPS = 64
"""The longest static sequence whose steps are built as straight-line ops: each unrolled step
adds small dispatches for iree-compile to build (about 60 ms of compile CPU per step)."""


def _unrolled(
    rec: Recurrence, y: mlir_ir.Value | None
) -> tuple[list[list[mlir_ir.Value]], mlir_ir.Value | None]:
    """Every direction's steps over a static sequence of at most UNROLLED_STEPS steps, as
    straight-line ops, the directions' steps interleaved: the final states of each direction,
    and `y` with its Y slabs written.

    NOTE: IREE 3.13 runs an `scf.for` over tensors on the host, one submission of the step's
    dispatches per iteration: the bench's 2-layer bidirectional LSTM (32 steps, static) took
    2.9 ms as loops against onnxruntime's 0.34 ms, and 0.34 ms unrolled (onnxruntime 0.20 ms
    in that run), its whole sequence one command buffer of small dispatches."""
    assert isinstance(rec.seq, int)
    directions = range(len(rec.reverse))
    starts = [_start(rec, direction) for direction in directions]
    rec.hoist_before(starts[0][0].owner)  # step-independent values: once, before the steps
    states = [list(initial) for _, initial in starts]
    for step in range(rec.seq):
        for direction, (projected, _) in enumerate(starts):
            time = rec.seq - 1 - step if rec.reverse[direction] else step
            states[direction], y = _step(
                rec, direction, projected, index_constant(time), states[direction], y
            )
    rec.hoist_before(None)
    return [_finals(rec, final) for final in states], y


def _start(rec: Recurrence, direction: int) -> tuple[mlir_ir.Value, list[mlir_ir.Value]]:
    """What a direction's steps start from: every time step of X projected through its W
    (time-major; with its bias unless the steps add it, `Recurrence.bias_in_step`), and its
    initial states (zero where the op has none)."""
    x_map = [0, 1, 3] if rec.layout == 0 else [1, 0, 3]
    biases = [] if rec.bias_in_step else input_bias_offsets(rec)
    projected = project(
        rec, rec.x, x_map, (rec.seq, rec.batch), rec.w, direction, 0, rec.rows, biases
    )
    states = []
    for initial in rec.initial:
        if initial is None:
            states.append(fill(empty([rec.batch, rec.hidden], rec.compute), rec.math.zero()))
        else:
            states.append(_extract(rec, initial, _slice_spec(rec, direction, None)))
    return projected, states


def _step(
    rec: Recurrence,
    direction: int,
    projected: mlir_ir.Value,
    time: mlir_ir.Value,
    old: list[mlir_ir.Value],
    y: mlir_ir.Value | None,
    slot: mlir_ir.Value | None = None,
) -> tuple[list[mlir_ir.Value], mlir_ir.Value | None]:
    """Step `time` (its position in X) from states `old`: the new states, and `y` with the
    step's Y slab written at time `slot` of `y` (default `time`: `y` is the whole Y)."""
    x_step = tensor.ExtractSliceOp(
        mlir_ir.RankedTensorType.get([static_size(rec.batch), rec.rows], rec.compute),
        projected,
        [time],
        [] if isinstance(rec.batch, int) else [rec.batch],
        [],
        [DYNAMIC, 0, 0],
        [1, static_size(rec.batch), rec.rows],
        [1, 1, 1],
    ).result
    new = rec.cell.step(rec, direction, x_step, old)
    output = new[0]
    if rec.lengths is not None:
        new, output = _mask(rec, time, new, old)
    if y is not None:
        y = _insert(output, y, _slice_spec(rec, direction, time if slot is None else slot))
    return new, y


LOOPED_STEPS = (8, 1)
"""Steps per iteration of the `scf.for` loops over a sequence that is not unrolled: a loop of
8 steps per iteration while 8 remain, then one of 1 (each loop of the tuple takes the whole
iterations of its size that remain).

NOTE: IREE 3.13 runs each iteration of an `scf.for` over tensors from the host: the host
records the iteration's command buffer (a dispatch and a barrier or two per step) and submits
it, and the device idles some tens of microseconds between two; but every step of a loop body
is compiled. Longer iterations are not faster past a point: the bench's dynamic 2-layer
bidirectional LSTM (iree-benchmark-module medians, quiet machine) ran 32 steps in 0.36 ms with
(4, 1), 0.38 (6, 1), 0.40 (8, 1), 0.46 (12, 1) and 0.69 ms with (16, 1), and 100 steps in 0.94,
0.87, 0.83, 0.79 and 0.77 ms. (8, 1) is between, for an iree-compile of 3.3 s of CPU against
2.9 s with (4, 1) and 4.2 s with (16, 1)."""


# A recurrence that reads its hidden state from Y walks the sequence in blocks of BLOCK_STEPS
# steps (builders.blocks: IREE copies a loop-carried Y whole at every iteration), its steps
# (LOOPED_STEPS loops) writing a block-sized slab of Y that the block then inserts into Y.
# NOTE: a recurrence carrying its hidden state (one masked by `sequence_lens`) walked in blocks
# fails at run time on IREE 3.13's `local-task` driver ("transient buffer has not been
# committed"; test_recurrent_dynamic's task-driver test), so it still carries the whole Y.


def _looped(
    rec: Recurrence, y: mlir_ir.Value | None
) -> tuple[list[list[mlir_ir.Value]], mlir_ir.Value | None]:
    """Every direction's steps in the same `scf.for` loops over time, carrying their states
    and Y: LOOPED_STEPS[0] steps of each direction per iteration while that many remain, then
    fewer (LOOPED_STEPS); for a recurrence reading its hidden state from Y, inside an outer
    loop over blocks of BLOCK_STEPS steps (builders.blocks).
    The final states of each direction, and `y` with its Y slabs written. A bidirectional op
    walks both directions in one loop: half the host-driven iterations of a loop per
    direction.

    A recurrence whose Y is built and not masked by `sequence_lens` reads its hidden state
    from Y (the slab its previous step wrote), and the loops carry only the other states
    (LSTM's cell) and Y: a carried hidden state has two uses, the next step and Y, and IREE
    3.13 then writes it to a buffer of its own and copies it into Y, a copy and a barrier per
    step in the iteration's command buffer, which the host records at every iteration. Read
    from Y, the step's dispatch writes Y in place. The bench's dynamic 2-layer bidirectional
    LSTM: 42 commands per iteration of 8 steps against 78; 0.46 against 0.50 ms a call at 32
    steps, 0.93 against 1.16 ms at 100 (iree-benchmark-module medians, interleaved), for 3
    more executables (12). Its GRU gains nothing measurable at 32 steps so and takes about 30%
    more iree-compile time (27 executables against 18), but only a hidden state read from Y
    lets it walk blocks (see builders.blocks), 3.3x faster at 2048 steps."""
    directions = range(len(rec.reverse))
    starts = [_start(rec, direction) for direction in directions]
    bound = index_constant(rec.seq) if isinstance(rec.seq, int) else rec.seq
    last = arith.SubIOp(bound, index_constant(1)).result  # the reverse direction's first step
    hidden_in_y = y is not None and rec.lengths is None
    # NOTE: a dynamic-batch state does not enter the loop as its initial value: IREE (3.x)
    # may pack that value into a buffer shared with others (the projections) and then carry
    # the whole buffer, reading the state at offset 0, i.e. another tensor's bytes. The loop
    # carries an unread `tensor.empty` instead, and the first step reads the initial states
    # captured from outside (read at their true offsets, as the projections are). A hidden
    # state read from Y is captured so too, whatever the batch.
    captured = None
    if hidden_in_y or not isinstance(rec.batch, int):
        captured = [states for _, states in starts]
    skipped = 1 if hidden_in_y else 0  # the states not carried: the hidden one, in Y
    entering = [
        state if captured is None else empty([rec.batch, rec.hidden], rec.compute)
        for _, states in starts
        for state in states[skipped:]
    ]
    projections = [projected for projected, _ in starts]
    span = _Span(index_constant(0), bound, last, skipped)
    if hidden_in_y:
        assert y is not None and captured is not None
        carried = _blocks(rec, projections, span, [*entering, y], captured)
    else:
        carried = _walk(
            rec, projections, span, [*entering, *([] if y is None else [y])], captured, None
        )
    rec.hoist_before(None)
    count = rec.cell.states - skipped
    finals = []
    for direction in directions:
        states = carried[direction * count : (direction + 1) * count]
        if hidden_in_y:  # the hidden state after the direction's last step
            time = index_constant(0) if rec.reverse[direction] else last
            states = [_extract(rec, carried[-1], _slice_spec(rec, direction, time)), *states]
        finals.append(_finals(rec, states))
    return finals, (carried[-1] if y is not None else None)


@dataclass(frozen=True)
class _Span:
    """Steps [lower, upper) of a sequence whose last step (the reverse direction's first) is
    `last`; the first `skipped` states are not carried but read from Y."""

    lower: mlir_ir.Value
    upper: mlir_ir.Value
    last: mlir_ir.Value
    skipped: int


@dataclass(frozen=True)
class _Slab:
    """Where a block's steps write Y: a slab of `size` time slots whose slot 0 is time
    `origins[d]` for direction d."""

    size: mlir_ir.Value
    origins: list[mlir_ir.Value]


def _blocks(
    rec: Recurrence,
    projections: list[mlir_ir.Value],
    span: _Span,
    carried: list[mlir_ir.Value],
    captured: list[list[mlir_ir.Value]],
) -> list[mlir_ir.Value]:
    """An `scf.for` over blocks of BLOCK_STEPS steps of a recurrence reading its hidden state
    from Y, carrying its other states and Y (last of `carried`): each block walks its steps
    (`_walk`) into a slab of its own, which it then inserts into Y; its results. A block's first
    step starts from the hidden state the previous block's last step wrote into Y and the
    states that block left, the first block's from the initial ones (`captured`).

    NOTE: the states a block starts from are read by its first step, not carried into its
    loops: IREE 3.13 cannot find the dims of a dynamic-batch state that one loop carries
    into another ("'tensor.dim' op unexpected during shape cleanup")."""
    assert span.skipped == 1, "only a hidden state read from Y can be walked in blocks"
    block, steps = block_loop(span.lower, span.upper, carried)
    rec.hoist_before(block.operation)
    count = rec.cell.states - 1
    with mlir_ir.InsertionPoint(block.body):
        start, size, end = steps.start, steps.size, steps.end
        inner = list(block.inner_iter_args)
        y = inner[-1]
        after_last = arith.AddIOp(span.last, index_constant(1)).result
        origins = [steps.origin(span.last, reverse) for reverse in rec.reverse]
        initial = []
        for direction, reverse in enumerate(rec.reverse):
            if reverse:  # the time of the step before the block's first, inside the sequence
                before = arith.MinUIOp(arith.SubIOp(after_last, start).result, span.last).result
            else:
                before = arith.SubIOp(start, index_constant(1)).result
                before = arith.MaxSIOp(before, index_constant(0)).result
            hidden = _extract(rec, y, _slice_spec(rec, direction, before))
            states = [hidden, *inner[direction * count : (direction + 1) * count]]
            initial.append(
                first_step_reads(start, span.lower, captured[direction], states, [rec.batch, rec.hidden])
            )
        entering = [
            empty([rec.batch, rec.hidden], rec.compute) for _ in range(count * len(initial))
        ]
        shape = (
            [size, len(rec.reverse), rec.batch, rec.hidden]
            if rec.layout == 0
            else [rec.batch, size, len(rec.reverse), rec.hidden]
        )
        walked = _walk(
            rec,
            projections,
            _Span(start, end, span.last, span.skipped),
            [*entering, empty(shape, rec.compute)],
            initial,
            _Slab(size, origins),
        )
        slab = walked[-1]
        for direction, origin in enumerate(origins):  # the direction's steps, at its origin
            if rec.layout == 0:
                read, sizes = [0, direction, 0, 0], [size, 1, rec.batch, rec.hidden]
            else:
                read, sizes = [0, 0, direction, 0], [rec.batch, size, 1, rec.hidden]
            y = _insert(
                extract_slice(slab, read, sizes), y, _slice_spec(rec, direction, origin, size)
            )
        scf.YieldOp([*walked[:-1], y])
    return list(block.results)


def _walk(
    rec: Recurrence,
    projections: list[mlir_ir.Value],
    span: _Span,
    carried: list[mlir_ir.Value],
    captured: list[list[mlir_ir.Value]] | None,
    slab: _Slab | None,
) -> list[mlir_ir.Value]:
    """The steps of `span` in LOOPED_STEPS loops, carrying `carried` (the states, then Y or a
    block's slab); the loops' results."""
    lower = span.lower
    assert LOOPED_STEPS[-1] == 1, "the last loop must walk what the others leave, one by one"
    for steps in LOOPED_STEPS:
        upper = span.upper
        if steps > 1:  # the end of the whole iterations of `steps` steps from `lower`
            per = index_constant(steps)
            whole = arith.DivUIOp(arith.SubIOp(span.upper, lower).result, per).result
            upper = arith.AddIOp(lower, arith.MulIOp(whole, per).result).result
        walk = _Walk(lower, upper, steps, span, slab)
        carried = _loop(rec, projections, walk, carried, captured)
        lower = upper
    return carried


@dataclass(frozen=True)
class _Walk:
    """What one loop of `_walk` walks: steps [lower, upper) of `span`, `steps` of them per
    iteration, writing Y or `slab`."""

    lower: mlir_ir.Value
    upper: mlir_ir.Value
    steps: int
    span: _Span
    slab: _Slab | None


def _loop(
    rec: Recurrence,
    projections: list[mlir_ir.Value],
    walk: _Walk,
    carried: list[mlir_ir.Value],
    captured: list[list[mlir_ir.Value]] | None,
) -> list[mlir_ir.Value]:
    """One `scf.for` over the steps of `walk` for every direction (its projection in
    `projections`), carrying each direction's carried states in turn (and Y or a slab, last);
    its results. Step-independent values go before the first loop. The span's first step
    starts from `captured`."""
    span, slab = walk.span, walk.slab
    # the last slot of what the steps write: a step reading the one its previous step wrote
    # stays inside it
    slot_last = span.last if slab is None else arith.SubIOp(slab.size, index_constant(1)).result
    loop = scf.ForOp(walk.lower, walk.upper, index_constant(walk.steps), carried)
    if rec.hoist is None:
        rec.hoist_before(loop.operation)
    count = rec.cell.states - span.skipped

    def step(position: mlir_ir.Value, carried: list[mlir_ir.Value], offset: int) -> list[mlir_ir.Value]:
        """Every direction's step `offset` places into the iteration, at `position`."""
        states = [carried[d * count : (d + 1) * count] for d in range(len(projections))]
        y = carried[-1] if len(carried) > count * len(projections) else None
        with mlir_ir.InsertionPoint(loop.body):
            for direction, projected in enumerate(projections):
                reverse = rec.reverse[direction]
                time = arith.SubIOp(span.last, position).result if reverse else position
                slot = time if slab is None else arith.SubIOp(time, slab.origins[direction]).result
                old = states[direction]
                if span.skipped:
                    assert y is not None
                    previous = _previous_time(slot, reverse, slot_last, clamped=offset == 0)
                    old = [_extract(rec, y, _slice_spec(rec, direction, previous)), *old]
                if captured is not None and offset == 0:  # only a first step can be the span's
                    old = first_step_reads(
                        position, span.lower, captured[direction], old, [rec.batch, rec.hidden]
                    )
                new, y = _step(rec, direction, projected, time, old, y, slot)
                states[direction] = new[span.skipped :]
        return [*(state for group in states for state in group), *([] if y is None else [y])]

    run_steps(loop, walk.steps, step)
    return list(loop.results)


def _previous_time(
    time: mlir_ir.Value, reverse: bool, last: mlir_ir.Value, *, clamped: bool
) -> mlir_ir.Value:
    """The time of the step before the one at `time` (its Y slab holds the hidden state that
    step starts from); `clamped` keeps it inside the sequence for a step that may be the
    first, whose read is then discarded for the initial state."""
    one = index_constant(1)
    if reverse:
        later = arith.AddIOp(time, one).result
        return arith.MinUIOp(later, last).result if clamped else later
    earlier = arith.SubIOp(time, one).result
    return arith.MaxSIOp(earlier, index_constant(0)).result if clamped else earlier


def _finals(rec: Recurrence, finals: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
    """The final states, zero for batch entries of length 0."""
    if rec.lengths is None:
        return finals
    return [_zero_empty_sequences(rec, final) for final in finals]


def _finish(
    ctx: LoweringRuleContext, rec: Recurrence, value: mlir_ir.Value, index: int
) -> mlir_ir.Value:
    """`value` narrowed to result `index`'s element type and cast to its type."""
    target = ctx.result_types[index]
    ctx.ranked(ctx.niro_results[index], f"result #{index}")
    target_type = mlir_ir.RankedTensorType(target)
    shaped = mlir_ir.RankedTensorType(value.type)
    computed = [
        None if shaped.is_dynamic_dim(axis) else size for axis, size in enumerate(shaped.shape)
    ]
    if target_type.rank != shaped.rank or any(
        size is not None
        and not target_type.is_dynamic_dim(axis)
        and target_type.shape[axis] != size
        for axis, size in enumerate(computed)
    ):
        raise ctx.error(
            f"result #{index} {format_type(ctx.niro_results[index].type)} does not have the "
            f"shape {shape_text(computed)} the op computes"
        )
    if shaped.element_type != target_type.element_type:
        identity = list(range(shaped.rank))
        value = generic(
            [(value, identity)],
            [(empty(tensor_sizes(value), target_type.element_type), identity)],
            shaped.rank,
            (),
            lambda arguments: [rec.math.narrow(arguments[0])],
        )[0]
    if value.type != target:
        value = tensor.CastOp(target, value).result
    return value


def _lower_recurrence(ctx: LoweringRuleContext, cell: Cell) -> list[mlir_ir.Value]:
    rec = parse_recurrence(ctx, cell)
    if not isinstance(rec.seq, int):
        # NOTE: an empty run-time sequence fails clearly rather than computing Y_h/Y_c: with
        # a dynamic batch they would be the loop's unread carried values (see
        # `_looped`), and zeroing them after the loop (onnxruntime's LSTM answer) makes
        # IREE 3.13's runtime crash on a bidirectional LSTM
        walks = arith.CmpIOp(arith.CmpIPredicate.sgt, rec.seq, index_constant(0)).result
        assert_true(
            walks,
            f"{ctx.niro_location}: 'onnx.{cell.name}' op: input X has an empty sequence "
            "(length 0), which is not supported",
        )
    positions = output_positions(ctx)
    if any(position > cell.states for position in positions):
        raise ctx.error(f"has more results than {cell.name}'s {cell.states + 1} outputs")
    directions = len(rec.reverse)
    y = None
    if 0 in positions:
        shape = (
            [rec.seq, directions, rec.batch, rec.hidden]
            if rec.layout == 0
            else [rec.batch, rec.seq, directions, rec.hidden]
        )
        y = empty(shape, rec.compute)
    rec.bias_in_step = not (isinstance(rec.seq, int) and isinstance(rec.batch, int))
    if isinstance(rec.seq, int) and rec.seq <= UNROLLED_STEPS:
        finals, y = _unrolled(rec, y)
    else:
        rec.gates_apart = cell.name == "LSTM"  # `project_gates`
        finals, y = _looped(rec, y)
    state_shape = (
        [directions, rec.batch, rec.hidden]
        if rec.layout == 0
        else [rec.batch, directions, rec.hidden]
    )
    results = []
    for index, position in enumerate(positions):
        if position == 0:
            assert y is not None
            value = y
        else:
            value = empty(state_shape, rec.compute)
            for direction, direction_finals in enumerate(finals):
                spec = _slice_spec(rec, direction, None)
                value = _insert(direction_finals[position - 1], value, spec)
        results.append(_finish(ctx, rec, value, index))
    return results


# -- the cells --------------------------------------------------------------------------------------


def _rnn_step(rec: Recurrence, direction: int, x_step: mlir_ir.Value, old: list[mlir_ir.Value]):
    """H = f(Xt*W^T + Wb + Ht-1*R^T + Rb)."""
    hidden = rec.hidden
    recurrent = project_state(rec, old[0], direction, 0, hidden)

    def body(x, h):
        return [rec.activate(direction, 0, rec.math.add(x, h))]

    inputs = [x_gate(rec, direction, x_step, 0), gate(rec, recurrent, 0)]
    return elementwise(rec, inputs, 1, body)


def _gru_step(rec: Recurrence, direction: int, x_step: mlir_ir.Value, old: list[mlir_ir.Value]):
    """z = f(x_z + h_z), r = f(x_r + h_r), n = g(x_n + (r . H) * Rh^T + Rbh) (or with
    linear_before_reset, g(x_n + r . (H * Rh^T + Rbh))), H' = (1 - z) . n + z . H."""
    hidden, math = rec.hidden, rec.math
    previous = old[0]
    linear_before_reset = int(attribute(rec.ctx, "linear_before_reset", 0))

    def blend(z, candidate, h):
        return math.add(math.mul(math.sub(math.one(), z), candidate), math.mul(z, h))

    if linear_before_reset:
        recurrent = project_state(rec, previous, direction, 0, 3 * hidden)

        def fused(xz, xr, xn, hz, hr, hn, h):
            z = rec.activate(direction, 0, math.add(xz, hz))
            r = rec.activate(direction, 0, math.add(xr, hr))
            candidate = rec.activate(direction, 1, math.add(xn, math.mul(r, hn)))
            return [blend(z, candidate, h)]

        inputs = [x_gate(rec, direction, x_step, index) for index in range(3)]
        inputs += [gate(rec, recurrent, index) for index in range(3)]
        return elementwise(rec, [*inputs, state(previous)], 1, fused)

    recurrent = project_state(rec, previous, direction, 0, 2 * hidden)

    def gates(xz, xr, hz, hr, h):
        z = rec.activate(direction, 0, math.add(xz, hz))
        r = rec.activate(direction, 0, math.add(xr, hr))
        return [z, math.mul(r, h)]

    inputs = [x_gate(rec, direction, x_step, 0), x_gate(rec, direction, x_step, 1)]
    inputs += [gate(rec, recurrent, 0), gate(rec, recurrent, 1)]
    update, reset_state = elementwise(rec, [*inputs, state(previous)], 2, gates)
    reset_projected = project_state(rec, reset_state, direction, 2 * hidden, hidden)

    def output(xn, hn, z, h):
        return [blend(z, rec.activate(direction, 1, math.add(xn, hn)), h)]

    inputs = [x_gate(rec, direction, x_step, 2), state(reset_projected), state(update)]
    inputs.append(state(previous))
    return elementwise(rec, inputs, 1, output)


def _lstm_step(rec: Recurrence, direction: int, x_step: mlir_ir.Value, old: list[mlir_ir.Value]):
    """i = f(x_i + h_i + P_i . C), f = f(x_f + h_f + P_f . C) (or 1 - i with input_forget),
    c = g(x_c + h_c), C' = f . C + i . c, o = f(x_o + h_o + P_o . C'), H' = o . h(C').
    Gates are ordered i, o, f, c in W, R and B; peepholes i, o, f in P."""
    hidden, math = rec.hidden, rec.math
    previous, cell_state = old
    if rec.gates_apart:
        apart = project_gates(rec, previous, direction, 0, 4)
    else:
        recurrent = project_state(rec, previous, direction, 0, 4 * hidden)
    input_forget = int(attribute(rec.ctx, "input_forget", 0))
    inputs = [x_gate(rec, direction, x_step, index) for index in range(4)]
    if rec.gates_apart:
        inputs += [state(projected) for projected in apart]
    else:
        inputs += [gate(rec, recurrent, index) for index in range(4)]
    inputs.append(state(cell_state))
    has_peepholes = rec.peepholes is not None
    if has_peepholes:
        inputs += [peephole(rec, direction, index) for index in range(3)]

    def body(xi, xo, xf, xc, hi, ho, hf, hc, c, *peepholes):
        def pre(x, h, which, cell):
            total = math.add(x, h)
            if has_peepholes:
                total = math.add(total, math.mul(peepholes[which], cell))
            return total

        input_gate = rec.activate(direction, 0, pre(xi, hi, 0, c))
        if input_forget:
            forget = math.sub(math.one(), input_gate)
        else:
            forget = rec.activate(direction, 0, pre(xf, hf, 2, c))
        candidate = rec.activate(direction, 1, math.add(xc, hc))
        new_cell = math.add(math.mul(forget, c), math.mul(input_gate, candidate))
        output_gate = rec.activate(direction, 0, pre(xo, ho, 1, new_cell))
        squashed = rec.activate(direction, 2, new_cell, clipped=False)
        return [math.mul(output_gate, squashed), new_cell]

    return elementwise(rec, inputs, 2, body)


CELLS = (
    Cell("RNN", 1, ("Tanh",), 1, _rnn_step),
    Cell("GRU", 3, ("Sigmoid", "Tanh"), 1, _gru_step),
    Cell("LSTM", 4, ("Sigmoid", "Tanh", "Tanh"), 2, _lstm_step),
)


def _register(cell: Cell) -> None:
    def rule(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
        return _lower_recurrence(ctx, cell)

    rule.__name__ = f"_lower_{cell.name.lower()}"
    register_lowering(f"onnx.{cell.name}", since=7)(rule)


for _cell in CELLS:
    _register(_cell)
