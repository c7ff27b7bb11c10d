"""Loops that stack one row per step into a tensor (Scan's and Loop's scan outputs, a
recurrence's Y), walked in blocks of steps, and the row reads and writes they use.

A stacked tensor holds step p's row at leading index p, or at `last - p` when it is stacked
backwards (Scan's `scan_output_directions`, a reverse recurrence).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..bindings import arith, mlir_ir, scf, tensor
from .constants import index_constant
from .shapes import DYNAMIC, dim_size, empty, tensor_sizes
from .structured import generic

__all__ = [
    "BLOCK_STEPS",
    "STEPS_PER_ITERATION",
    "UNROLLED_BODY_OPS",
    "steps_per_iteration",
    "run_steps",
    "Stacking",
    "stack_in_blocks",
    "Block",
    "block_loop",
    "first_step_reads",
    "extract_row",
    "insert_row",
    "insert_rows",
]

BLOCK_STEPS = 64
"""Steps per block of a loop that stacks a row per step: an outer `scf.for` walks the steps a
block at a time, the block's steps write a slab of at most BLOCK_STEPS rows, and the block
inserts the slab into the stacked tensor.

NOTE: IREE 3.13 copies every tensor an `scf.for` carries into a new buffer at every iteration
(its conversion to the stream dialect cannot place a loop's block argument on a device, so it
inserts a `stream.async.transfer` from no device, which ElideAsyncCopies keeps), so a loop
carrying the whole stacked tensor copies all of it at every step: time quadratic in the number
of steps. In blocks, a step copies the slab and a block the stacked tensor.
- The bench's dynamic 2-layer bidirectional LSTM took 1.3-1.6 s at 2048 steps and batch 64
  carrying Y (onnxruntime 0.15 s), 0.58-0.72 s in blocks; its GRU 484 against 147 ms at 2048
  steps and batch 16 (onnxruntime 52 ms); at 32 steps (one block) blocks cost nothing
  measurable.
- A Scan stacking a running sum of 256 floats per step took 112 ms at 1024 steps, 2.8 s at
  4096 and 36 s at 16384 so (onnxruntime 1.4, 4.0 and 17 ms), 13-27 ms, 61-140 ms and
  0.55-0.63 s in blocks a step an iteration; 16 steps a block took 2.1 s at 16384, 256 steps
  1.1 s (a step then copies a slab of 256 rows). Scan runs 8 steps an iteration now (see
  STEPS_PER_ITERATION).
- A Loop stacking such rows took 412 ms at 4096 iterations so (onnxruntime 10-12 ms), 84-103
  ms in blocks."""


STEPS_PER_ITERATION = 8
"""Steps of a block one loop iteration runs (the body lowered that many times in a row), where
every step surely runs (Scan; a Loop without a condition that can stop it) and the body has at
most UNROLLED_BODY_OPS ops; the steps that do not fill whole iterations run first, one an
iteration, stacked straight into the stacked tensor.

NOTE: IREE 3.13 runs each iteration of an `scf.for` over tensors from the host (a command
buffer recorded and submitted, buffers allocated for what the loop carries, the slab copied).
The `scan_long` bench row (4096 steps of 256 floats) took 85-99 ms a step an iteration, 19-23
ms 8 steps an iteration (16384 steps: 600 against 206-227 ms; onnxruntime 3.7 and ~17 ms), for
0.59 s of iree-compile against 0.53; `loop_long` (4096 iterations) 89-109 against 24-28 ms
(interleaved; bench-run 164 against 20 ms, onnxruntime 9.5-16 ms).
NOTE: the single steps come first, so that every loop carrying a slab runs an iteration at
least: IREE 3.13's `local-task` driver fails at run time ("transient buffer has not been
committed") on a loop that runs none and carries a tensor made for it. Single steps after each
block's whole iterations, or the leading steps as a block of their own, failed so whenever
there were none (test_scan_blocks.py's task-driver test, a call in two)."""

UNROLLED_BODY_OPS = 64
"""The most ops a body may have to run STEPS_PER_ITERATION steps an iteration: a bigger body
runs a step an iteration (iree-compile's time grows with the copies of the body)."""


def steps_per_iteration(body_ops: int) -> int:
    """STEPS_PER_ITERATION for a body of at most UNROLLED_BODY_OPS ops, else 1."""
    return STEPS_PER_ITERATION if body_ops <= UNROLLED_BODY_OPS else 1


def run_steps(
    loop: scf.ForOp,
    count: int,
    step: Callable[[mlir_ir.Value, list[mlir_ir.Value], int], list[mlir_ir.Value]],
) -> None:
    """`count` steps in a row in each iteration of `loop`, and its yield: `step(position,
    carried, offset)` builds the step `offset` places after the iteration's first (at the
    induction variable) from what the step before it yields (the first: the iteration's
    arguments) and returns what it yields; the last step's values are the loop's yield."""
    carried = list(loop.inner_iter_args)
    for offset in range(count):
        position = loop.induction_variable
        if offset:
            with mlir_ir.InsertionPoint(loop.body):
                position = arith.AddIOp(position, index_constant(offset)).result
        carried = step(position, carried, offset)
    with mlir_ir.InsertionPoint(loop.body):
        scf.YieldOp(carried)


@dataclass(frozen=True)
class Stacking:
    """What a loop that stacks rows carries: `states` states, then one stacked tensor per entry
    of `rows` (the sizes of its row, read before the loops) stacked forwards, or backwards
    from `last` where `backwards` says so."""

    states: int
    rows: list[list[int | mlir_ir.Value]]
    backwards: list[bool]
    last: mlir_ir.Value | None = None


StepFor = Callable[
    [scf.ForOp, "Block | None", list[mlir_ir.Value]],
    Callable[[mlir_ir.Value, list[mlir_ir.Value], int], list[mlir_ir.Value]],
]
"""`step_for(loop, block, starting)`: the `run_steps` step of `loop`, for a loop of single
steps stacking straight into the stacked tensors (`block` None), or for the loop over `block`'s
steps, stacking into the block's slabs, the block starting from the values `starting`."""


def stack_in_blocks(
    lower: mlir_ir.Value,
    upper: mlir_ir.Value,
    carried: list[mlir_ir.Value],
    stacking: Stacking,
    per_iteration: int,
    step_for: StepFor,
    enter: Callable[[list[mlir_ir.Value]], list[mlir_ir.Value]] | None = None,
) -> list[mlir_ir.Value]:
    """Steps [lower, upper) from `carried` (states, then stacked tensors), and what they leave:
    with `per_iteration` > 1, the first ((upper - lower) mod per_iteration) steps one a loop
    iteration, stacking straight into the stacked tensors (see STEPS_PER_ITERATION); then a
    loop over blocks of BLOCK_STEPS steps (`block_loop`), whose steps run `per_iteration` in a
    row and stack into a slab per stacked tensor, inserted once per block at its origin.
    `enter(starting)` gives the states a block's loop starts from (default: the block's)."""
    states = stacking.states
    if per_iteration > 1:
        span = arith.SubIOp(upper, lower).result
        head_end = arith.AddIOp(lower, arith.RemUIOp(span, index_constant(per_iteration)).result).result
        head = scf.ForOp(lower, head_end, index_constant(1), carried)
        run_steps(head, 1, step_for(head, None, carried))
        lower, carried = head_end, list(head.results)
    outer, walked = block_loop(lower, upper, carried)
    with mlir_ir.InsertionPoint(outer.body):
        starting = list(outer.inner_iter_args)
        entering = starting[:states] if enter is None else enter(starting)
        slabs = [
            empty([walked.size, *row], mlir_ir.RankedTensorType(value.type).element_type)
            for value, row in zip(starting[states:], stacking.rows, strict=True)
        ]
        inner = scf.ForOp(walked.start, walked.end, index_constant(per_iteration), [*entering, *slabs])
    run_steps(inner, per_iteration, step_for(inner, walked, starting))
    with mlir_ir.InsertionPoint(outer.body):
        written = list(inner.results)
        stacked = []
        for slab, into, row, backwards in zip(
            written[states:], starting[states:], stacking.rows, stacking.backwards, strict=True
        ):
            origin = walked.start
            if backwards:
                assert stacking.last is not None, "a tensor stacked backwards needs the last step"
                origin = walked.origin(stacking.last, True)
            stacked.append(insert_rows(slab, into, origin, [walked.size, *row]))
        scf.YieldOp([*written[:states], *stacked])
    return list(outer.results)


@dataclass(frozen=True)
class Block:
    """Steps [start, end) of a loop walked in blocks: `size` = end - start, at most
    BLOCK_STEPS (the last block takes what remains)."""

    start: mlir_ir.Value
    size: mlir_ir.Value
    end: mlir_ir.Value

    def origin(self, last: mlir_ir.Value, backwards: bool) -> mlir_ir.Value:
        """The leading index of the block's first row in a tensor stacked forwards (`start`)
        or backwards from `last` (`last + 1 - end`)."""
        if not backwards:
            return self.start
        after_last = arith.AddIOp(last, index_constant(1)).result
        return arith.SubIOp(after_last, self.end).result

    def slot(self, step: mlir_ir.Value, backwards: bool) -> mlir_ir.Value:
        """Where step `step` (in the block) writes its row in the block's slab, for a tensor
        stacked forwards (`step - start`) or backwards (`end - 1 - step`)."""
        if not backwards:
            return arith.SubIOp(step, self.start).result
        before_end = arith.SubIOp(self.end, index_constant(1)).result
        return arith.SubIOp(before_end, step).result


def block_loop(
    lower: mlir_ir.Value, upper: mlir_ir.Value, carried: list[mlir_ir.Value]
) -> tuple[scf.ForOp, Block]:
    """An `scf.for` over the blocks of steps [lower, upper), BLOCK_STEPS steps each, carrying
    `carried`, and the block its body walks (the body starts with the block's size and end;
    the caller builds the rest of the body and its yield)."""
    loop = scf.ForOp(lower, upper, index_constant(BLOCK_STEPS), carried)
    with mlir_ir.InsertionPoint(loop.body):
        start = loop.induction_variable
        remaining = arith.SubIOp(upper, start).result
        size = arith.MinUIOp(remaining, index_constant(BLOCK_STEPS)).result
        end = arith.AddIOp(start, size).result
    return loop, Block(start, size, end)


def first_step_reads(
    step: mlir_ir.Value,
    start: mlir_ir.Value,
    initial: list[mlir_ir.Value],
    carried: list[mlir_ir.Value],
    sizes: list[int | mlir_ir.Value],
) -> list[mlir_ir.Value]:
    """The states a step starts from: `initial` at step `start`, else `carried` (all of
    `sizes`), picked element by element in one `linalg.generic` with a result per state.

    NOTE: a block's state with dynamic dims is read so, not carried into the loop over the
    block's steps (that loop carries an unread `tensor.empty` of `sizes`, read before the
    loops): IREE 3.13 cannot find the dims of a tensor one loop carries into another
    ("'tensor.dim' op unexpected during shape cleanup")."""
    first = arith.CmpIOp(arith.CmpIPredicate.eq, step, start).result
    count = len(initial)
    every = list(range(len(sizes)))
    elements = [mlir_ir.RankedTensorType(value.type).element_type for value in initial]
    return generic(
        [(value, every) for value in (*initial, *carried)],
        [(empty(sizes, element), every) for element in elements],
        len(sizes),
        (),
        lambda values: [
            arith.SelectOp(first, fresh, stale).result
            for fresh, stale in zip(values[:count], values[count : 2 * count], strict=True)
        ],
    )


def extract_row(stacked: mlir_ir.Value, offset: mlir_ir.Value) -> mlir_ir.Value:
    """Row `offset` of the leading axis of `stacked`, without that axis (dynamic sizes
    allowed)."""
    ranked = mlir_ir.RankedTensorType(stacked.type)
    shape = list(ranked.shape)
    row = mlir_ir.RankedTensorType.get(shape[1:], ranked.element_type)
    return tensor.ExtractSliceOp(
        row,
        stacked,
        [offset],
        [dim_size(stacked, axis) for axis in range(1, len(shape)) if shape[axis] == DYNAMIC],
        [],
        [DYNAMIC] + [0] * (len(shape) - 1),
        [1, *shape[1:]],
        [1] * len(shape),
    ).result


def insert_row(row: mlir_ir.Value, stacked: mlir_ir.Value, offset: mlir_ir.Value) -> mlir_ir.Value:
    """`row` written at `offset` of the leading axis of `stacked` (dynamic sizes allowed)."""
    shape = list(mlir_ir.RankedTensorType(row.type).shape)
    return tensor.InsertSliceOp(
        row,
        stacked,
        [offset],
        [size for size in tensor_sizes(row) if not isinstance(size, int)],
        [],
        [DYNAMIC] + [0] * len(shape),
        [1, *shape],
        [1] * (len(shape) + 1),
    ).result


def insert_rows(
    rows: mlir_ir.Value,
    stacked: mlir_ir.Value,
    offset: mlir_ir.Value,
    sizes: list[int | mlir_ir.Value],
) -> mlir_ir.Value:
    """`rows` (a tensor of `stacked`'s rank and of mixed `sizes`) written from `offset` of the
    leading axis of `stacked`."""
    rank = len(sizes)
    return tensor.InsertSliceOp(
        rows,
        stacked,
        [offset],
        [size for size in sizes if not isinstance(size, int)],
        [],
        [DYNAMIC] + [0] * (rank - 1),
        [size if isinstance(size, int) else DYNAMIC for size in sizes],
        [1] * rank,
    ).result
