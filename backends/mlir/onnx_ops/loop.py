"""Loop (opset 1+) as an `scf.while` carrying (iteration number, condition, loop-carried values,
stacked scan outputs).

ONNX's Loop runs `for (i = 0; i < M && cond; ++i) { cond, v... = body(i, cond, v...) }` with M
(max trip count) and cond both optional: without M it runs while the body says so, without cond
it runs M times and the body's condition is ignored, without either it never ends (refused).
The `before` region tests `i < M && cond`; the `after` region binds the body's block arguments
(i and cond as one-element tensors, the carried values as they are) and lowers the body
(`ctx.lower_block`), whose Yield gives the next condition, values and scan-output slices.

A loop-carried value keeps the type of its body argument from one iteration to the next: a
yielded value of another static shape changes type across iterations and is refused; one whose
dims are dynamic where the argument's are static is cast with a run-time check (`cf.assert`), as
are the initial values and the final results. Scan outputs stack one slice per iteration along a
new leading axis, so their buffer is preallocated before the loop: the bound is the leading dim
the output is declared with (checked at run time to equal the iteration count), else a
compile-time constant M (the rows written are then extracted, a dynamic size), else M's value
when the loop starts (exporters compute it before the loop, e.g. PyTorch's `nn.EmbeddingBag`
loops over its bags: the buffer gets M rows, checked against `MAX_PREALLOCATED_ELEMENTS` at run
time, and a loop that a condition may stop early returns the rows written). A scan output without
M or a declared leading dim is refused. Slices of a dynamic (ranked) shape, as PyTorch's dynamo
exporter yields rows of run-time width, get their buffer at the first iteration, sized by that
slice; each later slice is checked at run time to have the same shape (`cf.assert`). Sequence
values never get here: the frontend rewrites them into tensors (`sequences`) or refuses them.
A loop carrying two tensors or more bounds their dynamic dims (`_bounded_dims`, a run-time
check) so that IREE can bound their byte sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from niro.ir import Block as NiroBlock
from niro.ir import (
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    Yield,
    format_type,
)

from ..bindings import arith, mlir_ir, scf, tensor
from ..builders import (
    BLOCK_STEPS,
    DYNAMIC,
    STEPS_PER_ITERATION,
    Block,
    Stacking,
    as_i64,
    as_index,
    assert_true,
    checked_cast,
    dim_size,
    empty,
    empty_tensor,
    extract_slice,
    i64_constant,
    index_constant,
    insert_row,
    insert_rows,
    stack_in_blocks,
    steps_per_iteration,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import RankedTensorType, as_ranked, lower_type
from .common import imported_op, input_value
from .indexing import clamp, cmp

__all__ = ["MAX_PREALLOCATED_ELEMENTS"]

MAX_PREALLOCATED_ELEMENTS = 1 << 28
"""Most elements a scan output bounded only by a constant M may preallocate (exporters write
`M = INT64_MAX` for while loops: such an M bounds nothing)."""


def _one_element(type_: object) -> TypeGuard[RankedTensorType]:
    return (
        isinstance(type_, TensorType)
        and type_.shape is not None
        and all(dim == 1 for dim in type_.shape)
    )


def _read_scalar(ctx: LoweringRuleContext, value: mlir_ir.Value, niro: Value, what: str, element):
    """The element of a one-element tensor (ONNX's M, cond and the body's condition)."""
    type_ = niro.type
    if not _one_element(type_) or type_.element_type is not element:
        raise ctx.error(
            f"needs {what} as a one-element {element.spelling} tensor, got {format_type(type_)}"
        )
    zeros = [index_constant(0) for _ in type_.shape]
    return tensor.ExtractOp(value, zeros).result


def _as_tensor(ctx: LoweringRuleContext, scalar: mlir_ir.Value, argument: Value, what: str, element):
    """`scalar` as the one-element tensor type of body argument `argument`."""
    if not _one_element(argument.type) or argument.type.element_type is not element:
        raise ctx.error(
            f"body takes the {what} as {format_type(argument.type)}, expected a one-element "
            f"{element.spelling} tensor"
        )
    return tensor.FromElementsOp(lower_type(argument.type), [scalar]).result


def _compatible(source: TensorType, target: TensorType) -> bool:
    """Whether a value of `source` may be a `target` at run time (same element type and rank,
    no two static dims that differ; an unranked target takes any rank)."""
    if source.element_type is not target.element_type:
        return False
    if target.shape is None:
        return True
    if source.shape is None or len(source.shape) != len(target.shape):
        return False
    return all(
        s is None or t is None or s == t for s, t in zip(source.shape, target.shape, strict=True)
    )


def _checked_cast(
    ctx: LoweringRuleContext, value: mlir_ir.Value, target: TensorType, what: str
) -> mlir_ir.Value:
    """`value` (of a compatible type) as `target`; each dim that becomes static is checked at
    run time (`checked_cast`)."""
    return checked_cast(value, lower_type(target), f"{ctx.niro_location}: 'onnx.Loop' op", what)


CARRIED_BYTES = 1 << 60
"""Most bytes a loop-carried tensor with dynamic dims may take, as its dims are bounded for
IREE (see `_bounded_dims`): the byte sizes of several such tensors still add up within i64."""


def _dim_bound(type_: RankedTensorType) -> int | None:
    """The largest size each dynamic dim of a loop-carried `type_` may take: the k-th root of
    what `CARRIED_BYTES` leaves for them (k dynamic dims), less one for the row a Concat may add
    to the leading dim in the body. None when no bound is needed (no dynamic dim, or a static
    0 dim: the tensor holds no byte)."""
    dynamic = sum(dim is None for dim in type_.shape)
    fixed = -(-type_.element_type.bit_width // 8)  # a sub-byte element counts as a byte
    for dim in type_.shape:
        fixed *= 1 if dim is None else dim
    if dynamic == 0 or fixed == 0:
        return None
    room = CARRIED_BYTES // fixed
    root = int(round(room ** (1 / dynamic)))
    while root**dynamic > room:
        root -= 1
    while (root + 1) ** dynamic <= room:
        root += 1
    return root - 1


def _bounded_dims(
    ctx: LoweringRuleContext, value: mlir_ir.Value, type_: RankedTensorType | None, what: str
) -> mlir_ir.Value:
    """`value` (a loop-carried tensor of `type_`) with each dynamic dim checked at run time to
    be at most `_dim_bound` and sliced to that clamped (equal) size, so that the compiler can
    bound its byte size (`value` itself when `type_` is None: a loop carrying one tensor).

    NOTE: IREE (3.13) packs the loop-carried tensors an iteration produces into one buffer and
    carries each one's offset in it through the loop; its int-range optimization takes the
    range of `util.align` of a byte size it cannot bound as empty, so the offset of the second
    tensor, 0 on loop entry, is folded to 0 after the loop, and the second result reads the
    first one's bytes (torchvision Keypoint R-CNN's keypoint coordinates came out as its
    keypoint scores). Dims read from buffer views are bounded by IREE, but the product of two
    of them, times the element size, already overflows i64. With every dynamic dim clamped
    here, on entry and at each yield, each byte size stays within `CARRIED_BYTES`."""
    bound = None if type_ is None else _dim_bound(type_)
    if type_ is None or bound is None:
        return value
    sizes: list[int | mlir_ir.Value] = []
    for axis, dim in enumerate(type_.shape):
        if dim is not None:
            sizes.append(dim)
            continue
        size = dim_size(value, axis)
        assert_true(
            cmp("sle", size, bound),
            f"{ctx.niro_location}: 'onnx.Loop' op: dim {axis} of {what} is above {bound}, the "
            f"most a loop-carried {format_type(type_)} may take",
        )
        sizes.append(clamp(size, 0, bound))
    return extract_slice(value, [0] * len(sizes), sizes)


def _tensor_type(ctx: LoweringRuleContext, value: Value, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise ctx.error(f"needs a tensor {what}, got {format_type(value.type)}")
    return value.type


def _slice_type(
    ctx: LoweringRuleContext, index: int, result: TensorType, piece: TensorType
) -> RankedTensorType:
    """The static type of scan output `index`'s slices, from its declared type and the yield."""
    declared = None if result.shape is None else result.shape[1:]
    if result.shape is not None and not result.shape:
        raise ctx.error(f"scan output #{index} is declared {format_type(result)}, without an axis")
    stacked = TensorType(result.element_type, declared)
    if not _compatible(piece, stacked) or piece.shape is None:
        raise ctx.error(
            f"scan output #{index} is declared {format_type(result)}, but the body yields slices "
            f"of {format_type(piece)}"
        )
    dims = piece.shape
    if declared is not None:
        dims = tuple(
            have if want is None else want for have, want in zip(dims, declared, strict=True)
        )
    return RankedTensorType(piece.element_type, dims)


@dataclass(frozen=True, slots=True)
class _ScanOutput:
    """A scan output the node uses: its position among the Loop's scan outputs (and the body's
    yielded slices), its index among the op's results, its declared type and its slices' type."""

    index: int
    result: int
    declared: TensorType
    slice_type: RankedTensorType


def _scan_outputs(ctx, wanted, yielded: Sequence[Value], carried: int) -> list[_ScanOutput]:
    found = []
    for index, entry in enumerate(wanted):
        if entry is None:
            continue
        result, result_index = entry
        declared = _tensor_type(ctx, result, f"scan output #{index}")
        piece = _tensor_type(ctx, yielded[1 + carried + index], f"scan output #{index} slice")
        slice_type = _slice_type(ctx, index, declared, piece)
        found.append(_ScanOutput(index, result_index, declared, slice_type))
    return found


def _bound(
    ctx, scans: Sequence[_ScanOutput], trip_count: int | None, has_trip_count: bool
) -> tuple[int | None, bool]:
    """(rows to preallocate, whether the outputs are declared with exactly that many rows):
    their declared leading dim, else the constant max trip count `trip_count`, else None for the
    run-time value of a max trip count M that is not a compile-time constant."""
    declared = sorted(
        {
            scan.declared.shape[0]
            for scan in scans
            if scan.declared.shape is not None and scan.declared.shape[0] is not None
        }
    )
    if len(declared) > 1:
        raise ctx.error(f"scan outputs are declared with different numbers of rows: {declared}")
    if declared:
        return declared[0], True
    if trip_count is None:
        if has_trip_count:
            return None, False
        raise ctx.error(
            "cannot bound the number of iterations to preallocate its scan outputs: the max "
            "trip count M is absent and the outputs' leading dims are dynamic"
        )
    rows = max(trip_count, 0)
    for scan in scans:
        elements = rows * _known_elements(scan.slice_type)
        if elements > MAX_PREALLOCATED_ELEMENTS:
            raise ctx.error(
                f"cannot preallocate scan output #{scan.index} for the max trip count "
                f"M = {trip_count} ({elements} elements, more than {MAX_PREALLOCATED_ELEMENTS}); "
                "declare its leading dim to bound it"
            )
    return rows, False


def _carried_types(ctx, initial: Sequence[Value], arguments: Sequence[Value]) -> list[RankedTensorType]:
    """The types the loop carries: the body's arguments', which the first values must fit."""
    types = []
    for index, (start, argument) in enumerate(zip(initial, arguments, strict=True)):
        start_type = _tensor_type(ctx, start, f"loop-carried value #{index}")
        body_type = _tensor_type(ctx, argument, f"loop-carried value #{index} in the body")
        if body_type.shape is None:
            raise ctx.error(
                f"body takes loop-carried value #{index} as {format_type(body_type)}; it needs "
                "a ranked tensor"
            )
        if not _compatible(start_type, body_type):
            raise ctx.error(
                f"loop-carried value #{index} starts as {format_type(start_type)}, but the body "
                f"takes {format_type(body_type)}"
            )
        types.append(as_ranked(body_type))
    return types


def _results_by_position(ctx: LoweringRuleContext, carried: int):
    """(final loop-carried results, scan results) by ONNX output position: each entry is
    (Niro result, index among the op's results), or None for an absent output."""
    indices = iter(range(len(ctx.niro_results)))
    by_position = [
        None if value is None else (value, next(indices)) for value in imported_op(ctx).outputs
    ]
    return (by_position + [None] * carried)[:carried], by_position[carried:]


def _stacked_type(rows: int | None, scan: _ScanOutput) -> RankedTensorType:
    """The type of a scan output's buffer: `rows` (None: a run-time count) slices."""
    return RankedTensorType(scan.slice_type.element_type, (rows, *scan.slice_type.shape))


def _known_elements(slice_type: RankedTensorType) -> int:
    """The elements of a slice counting each dynamic dim as 1 (what a preallocation limit can
    check before the loop runs)."""
    count = 1
    for dim in slice_type.shape:
        count *= 1 if dim is None else dim
    return count


def _sizes(ctx: LoweringRuleContext, value: mlir_ir.Value, slice_type: RankedTensorType, first: int) -> list[mlir_ir.Value]:
    """The sizes of `slice_type`'s dynamic dims, read from `value`'s dims `first`, `first + 1`..."""
    return [
        dim_size(value, first + axis) for axis, dim in enumerate(slice_type.shape) if dim is None
    ]


def _static_sizes(slice_type: RankedTensorType) -> list[int]:
    return [DYNAMIC if dim is None else dim for dim in slice_type.shape]


def _sized_buffer(ctx, buffer: mlir_ir.Value, piece: mlir_ir.Value, first: mlir_ir.Value, stacked: RankedTensorType, index: int):
    """The buffer of a scan output whose slices have dynamic dims: made at the first iteration
    with the first slice's dims (the one before the loop holds no element), then checked to
    match every later slice."""
    slice_type = RankedTensorType(stacked.element_type, stacked.shape[1:])
    choice = scf.IfOp(first, [buffer.type], has_else=True)
    with mlir_ir.InsertionPoint(choice.then_block):
        sizes = [dim_size(buffer, 0) if stacked.shape[0] is None else None]
        sizes += [
            dim_size(piece, axis) if dim is None else None
            for axis, dim in enumerate(slice_type.shape)
        ]
        scf.YieldOp([empty_tensor(ctx, stacked, sizes)])
    with mlir_ir.InsertionPoint(choice.else_block):
        scf.YieldOp([buffer])
    sized = choice.results[0]
    for axis, dim in enumerate(slice_type.shape):
        if dim is None:
            same = arith.CmpIOp(
                arith.CmpIPredicate.eq, dim_size(piece, axis), dim_size(sized, axis + 1)
            ).result
            assert_true(
                same,
                f"{ctx.niro_location}: 'onnx.Loop' op: scan output #{index}'s slices change size "
                f"along dim {axis} from one iteration to the next",
            )
    return sized


def _run_time_rows(ctx: LoweringRuleContext, limit: mlir_ir.Value, scans) -> mlir_ir.Value:
    """The rows of scan outputs bounded by a run-time max trip count M: max(M, 0) (a negative M
    runs no iteration), as an index. An M whose rows would exceed `MAX_PREALLOCATED_ELEMENTS`
    stops the program with a message rather than failing to allocate."""
    largest = max(_known_elements(scan.slice_type) for scan in scans)
    if largest > 0:
        most = MAX_PREALLOCATED_ELEMENTS // largest
        assert_true(
            arith.CmpIOp(arith.CmpIPredicate.sle, limit, i64_constant(most)).result,
            f"{ctx.niro_location}: 'onnx.Loop' op max trip count M is more than {most}, too many "
            f"iterations to preallocate its scan outputs (at most {MAX_PREALLOCATED_ELEMENTS} "
            "elements each); declare their leading dim to bound them",
        )
    rows = arith.MaxSIOp(limit, i64_constant(0)).result
    return as_index(rows)


def _runs_every_iteration(ctx: LoweringRuleContext, condition, block, yielded) -> bool:
    """Whether the loop surely runs all max(M, 0) iterations: no cond input, or a constant true
    one that the body passes on or replaces by a constant true (as PyTorch's exports do)."""
    if condition is None:
        return True

    def true(value: Value) -> bool:
        constant = ctx.constant_value(value)
        return constant is not None and constant.size == 1 and bool(constant.reshape(-1)[0])

    return true(condition[1]) and (yielded[0].id == block.arguments[1].id or true(yielded[0]))


def _nexts(ctx: LoweringRuleContext, yield_ctx: LoweringRuleContext, carried_types, bounds: bool) -> list[mlir_ir.Value]:
    """The loop-carried values the body yields (`yield_ctx`), each as the type the body takes
    it (checked at run time), their dims bounded when the loop carries several tensors."""
    values, niro_values = yield_ctx.operands, yield_ctx.niro_operands
    nexts = []
    for index, body_type in enumerate(carried_types):
        produced = _tensor_type(ctx, niro_values[1 + index], f"loop-carried value #{index}")
        if produced.shape is None or not _compatible(produced, body_type):
            raise ctx.error(
                f"loop-carried value #{index} changes type across iterations: the body "
                f"takes {format_type(body_type)} and yields {format_type(produced)}"
            )
        what = f"loop-carried value #{index} yielded by the body"
        value = _checked_cast(ctx, values[1 + index], body_type, what)
        nexts.append(_bounded_dims(ctx, value, body_type if bounds else None, what))
    return nexts


def _slice_of(ctx: LoweringRuleContext, values, carried: int, scan: _ScanOutput) -> mlir_ir.Value:
    """Scan output `scan`'s slice among the body's yielded `values`, as its slice type."""
    piece = values[1 + carried + scan.index]
    return _checked_cast(ctx, piece, scan.slice_type, f"scan output #{scan.index}'s slice")


@dataclass(frozen=True)
class _LoopPlan:
    """What both forms of a Loop (`_unrolled`, `_while_loop`) are built from: its body, its max
    trip count M (an i64, None without one) and whether it has a cond input, the loop-carried
    values' types in the body and their entering values, the scan outputs and their buffers,
    the scan outputs' rows (None: a run-time number), whether each iteration checks that it
    stays within them, and whether the loop-carried values' dims are bounded (`_nexts`)."""

    block: NiroBlock
    limit: mlir_ir.Value | None
    has_condition: bool
    carried_types: list[RankedTensorType]
    starts: list[mlir_ir.Value]
    scans: list[_ScanOutput]
    buffers: list[mlir_ir.Value]
    rows: int | None
    guard_rows: bool
    bounds: bool

    @property
    def carried(self) -> int:
        return len(self.starts)


def _unrolls(plan: _LoopPlan) -> bool:
    """Whether the loop runs as `_unrolled`: it walks blocks (`_walks_blocks`), has a max trip
    count M that bounds its scan outputs (no check of the rows at each iteration), and a small
    body; the caller adds that it runs every iteration."""
    return (
        _walks_blocks(plan.scans, plan.carried_types)
        and plan.limit is not None
        and not plan.guard_rows
        and steps_per_iteration(len(plan.block.operations)) > 1
    )


def _unrolled(ctx: LoweringRuleContext, plan: _LoopPlan) -> list[mlir_ir.Value]:
    """A loop that runs all max(M, 0) iterations, as Scan walks its steps: the first (count
    mod STEPS_PER_ITERATION) iterations one an `scf.for` iteration, stacking their rows
    straight into the scan outputs, then blocks of BLOCK_STEPS iterations (`block_loop`) whose
    inner `scf.for` runs STEPS_PER_ITERATION iterations in a row, stacking into a slab of the
    block's own inserted once per block. What the `scf.while` form gives: the iteration count,
    the condition (true), the loop-carried values, the scan outputs. The single iterations come
    first (see STEPS_PER_ITERATION)."""
    block, scans, carried, limit = plan.block, plan.scans, plan.carried, plan.limit
    assert limit is not None, "an unrolled loop runs max(M, 0) iterations"
    i1 = mlir_ir.IntegerType.get_signless(1)
    true = arith.ConstantOp(i1, mlir_ir.IntegerAttr.get(i1, 1)).result
    count = as_index(arith.MaxSIOp(limit, i64_constant(0)).result)

    def step_for(loop: scf.ForOp, walked: Block | None, _starting: list[mlir_ir.Value]) -> Callable:
        """The `run_steps` step of `loop` (`stack_in_blocks`): an iteration at `position`
        (index) from what the one before it yields, its rows written at `position`, or in
        block `walked`'s slab (`Block.slot`)."""

        def step(position: mlir_ir.Value, walking: list[mlir_ir.Value], _offset: int) -> list[mlir_ir.Value]:
            with mlir_ir.InsertionPoint(loop.body):
                slot = position if walked is None else walked.slot(position, False)
                bound = [
                    _as_tensor(ctx, as_i64(position), block.arguments[0], "iteration number", ScalarType.I64),
                    _as_tensor(ctx, true, block.arguments[1], "condition", ScalarType.BOOL),
                    *walking[:carried],
                ]
            stepped: list[mlir_ir.Value] = []

            def finish(yield_ctx: LoweringRuleContext) -> None:
                nexts = _nexts(ctx, yield_ctx, plan.carried_types, plan.bounds)
                pieces = [_slice_of(ctx, yield_ctx.operands, carried, scan) for scan in scans]
                rows = [insert_row(p, r, slot) for p, r in zip(pieces, walking[carried:], strict=True)]
                stepped.extend([*nexts, *rows])

            ctx.lower_block(block, loop.body, bound, yield_builder=finish)
            return stepped

        return step

    stacking = Stacking(carried, [list(scan.slice_type.shape) for scan in scans], [False] * len(scans))
    finals = stack_in_blocks(
        index_constant(0), count, [*plan.starts, *plan.buffers], stacking, STEPS_PER_ITERATION, step_for
    )
    return [as_i64(count), true, *finals]


def _keeps_going(
    iteration: mlir_ir.Value, go: mlir_ir.Value, limit: mlir_ir.Value | None, has_condition: bool
) -> mlir_ir.Value:
    """Whether the loop runs iteration `iteration` with condition `go`: i < M and cond, as
    the loop has them (without a cond input the condition is ignored)."""
    keep = go
    if limit is not None:
        below = arith.CmpIOp(arith.CmpIPredicate.slt, iteration, limit).result
        keep = below if not has_condition else arith.AndIOp(keep, below).result
    return keep


def _walks_blocks(scans: Sequence[_ScanOutput], carried_types: Sequence[RankedTensorType]) -> bool:
    """Whether the loop walks blocks of iterations (`_block_walk`): it has scan outputs, their
    slices and the loop-carried values are static.

    NOTE: IREE 3.13 cannot find the dims of a tensor one loop carries into another ("'tensor.dim'
    op unexpected during shape cleanup"), and a loop-carried value may change its dims from one
    iteration to the next; a slice of a dynamic shape is sized at the first iteration only
    (`_sized_buffer`). Such loops stack their rows straight into the scan outputs, which IREE
    copies whole at every iteration (fine for the short loops exporters write so)."""
    return bool(scans) and all(
        type_.is_static for type_ in (*carried_types, *(scan.slice_type for scan in scans))
    )


@dataclass(frozen=True)
class _BlockWalk:
    """The inner `scf.while` of a loop walking blocks: it runs the iterations from `start`
    (an index) while the loop would and fewer than BLOCK_STEPS have run, its `steps` block
    runs one iteration, writing its rows into the block's `slabs`."""

    loop: scf.WhileOp
    start: mlir_ir.Value
    steps: mlir_ir.Block
    slabs: list[mlir_ir.Value]


def _block_walk(after: mlir_ir.Block, carried: int, scans, limit, has_condition: bool) -> _BlockWalk:
    """The inner loop of a Loop walking blocks of BLOCK_STEPS iterations, built in the outer
    loop's `after` block (whose arguments it starts from) over slabs of BLOCK_STEPS rows.

    NOTE: IREE (3.13) copies a loop-carried tensor whole at every iteration (builders.blocks),
    so the outer loop carries the scan outputs and copies them once per block, the inner one
    a slab per iteration. The slabs are made in the outer loop's body: a slab carried into a
    single loop beside the scan outputs and flushed by an `scf.if` fails at run time on a loop
    carrying nothing else (the stream IR packs both initial values into one `alloca
    uninitialized` and drops its timepoint: "indirect buffer reference slot 0 is out range",
    the EmbeddingBag export). 4096 rows of 256 floats: 412 ms stacked straight, 111 ms
    through slabs (onnxruntime 12 ms)."""
    with mlir_ir.InsertionPoint(after):
        first = after.arguments[0]
        start = as_index(first)
        end = arith.AddIOp(first, i64_constant(BLOCK_STEPS)).result
        slabs = [
            empty([BLOCK_STEPS, *scan.slice_type.shape], lower_type(scan.slice_type).element_type)
            for scan in scans
        ]
        inits = [*list(after.arguments)[: 2 + carried], *slabs]
        types = [value.type for value in inits]
        loop = scf.WhileOp(types, inits)
    before = loop.before.blocks.append(*types)
    with mlir_ir.InsertionPoint(before):
        keep = _keeps_going(before.arguments[0], before.arguments[1], limit, has_condition)
        inside = arith.CmpIOp(arith.CmpIPredicate.slt, before.arguments[0], end).result
        scf.ConditionOp(arith.AndIOp(keep, inside).result, list(before.arguments))
    steps = loop.after.blocks.append(*types)
    return _BlockWalk(loop, start, steps, list(steps.arguments)[2 + carried :])


def _flush(walk: _BlockWalk, after: mlir_ir.Block, carried: int, scans) -> None:
    """The end of an outer loop's iteration: the rows the block wrote into its slabs inserted
    into the scan outputs (the outer loop's carried buffers) from the block's start; the
    yield."""
    with mlir_ir.InsertionPoint(after):
        walked = list(walk.loop.results)
        count = arith.SubIOp(as_index(walked[0]), walk.start).result
        buffers = list(after.arguments)[2 + carried :]
        stacked = []
        for scan, slab, buffer in zip(scans, walked[2 + carried :], buffers, strict=True):
            sizes = [count, *scan.slice_type.shape]
            rows = extract_slice(slab, [0] * len(sizes), sizes)
            stacked.append(insert_rows(rows, buffer, walk.start, sizes))
        scf.YieldOp([*walked[: 2 + carried], *stacked])


def _first_rows(ctx, buffer: mlir_ir.Value, count: mlir_ir.Value, slice_type: RankedTensorType) -> mlir_ir.Value:
    rank = len(slice_type.shape)
    rows_type = TensorType(slice_type.element_type, (None, *slice_type.shape))
    return tensor.ExtractSliceOp(
        lower_type(rows_type),
        buffer,
        [],
        [count, *_sizes(ctx, buffer, slice_type, 1)],
        [],
        [0] * (rank + 1),
        [DYNAMIC, *_static_sizes(slice_type)],
        [1] * (rank + 1),
    ).result


def _while_loop(ctx: LoweringRuleContext, plan: _LoopPlan, go: mlir_ir.Value) -> list[mlir_ir.Value]:
    """The loop as one `scf.while` (over blocks of iterations when `_walks_blocks`), starting
    from condition `go`: the iteration count, the condition, the loop-carried values, the scan
    outputs."""
    block, limit, scans, rows, carried = plan.block, plan.limit, plan.scans, plan.rows, plan.carried
    inits = [i64_constant(0), go, *plan.starts, *plan.buffers]
    types = [value.type for value in inits]
    loop = scf.WhileOp(types, inits)

    before = loop.before.blocks.append(*types)
    with mlir_ir.InsertionPoint(before):
        keep = _keeps_going(before.arguments[0], before.arguments[1], limit, plan.has_condition)
        scf.ConditionOp(keep, list(before.arguments))

    after = loop.after.blocks.append(*types)
    blocked = _walks_blocks(scans, plan.carried_types)
    if blocked:
        walk = _block_walk(after, carried, scans, limit, plan.has_condition)
        step_block, rows_in = walk.steps, walk.slabs
    else:
        step_block, rows_in = after, list(after.arguments)[2 + carried :]
    iteration, current = step_block.arguments[0], step_block.arguments[1]
    carried_in = list(step_block.arguments)[2 : 2 + carried]
    with mlir_ir.InsertionPoint(step_block):
        bound = [
            _as_tensor(ctx, iteration, block.arguments[0], "iteration number", ScalarType.I64),
            _as_tensor(ctx, current, block.arguments[1], "condition", ScalarType.BOOL),
            *carried_in,
        ]
        if plan.guard_rows:
            assert rows is not None, "guard_rows is set for a constant number of rows only"
            assert_true(
                arith.CmpIOp(arith.CmpIPredicate.slt, iteration, i64_constant(rows)).result,
                f"{ctx.niro_location}: 'onnx.Loop' op runs more than {rows} iterations, the "
                "rows of its scan outputs",
            )

    def finish(yield_ctx: LoweringRuleContext) -> None:
        """The Yield: next iteration number, condition, loop-carried values and buffers."""
        values, niro_values = yield_ctx.operands, yield_ctx.niro_operands
        if not plan.has_condition:
            following = current  # without a cond input the body's condition is ignored
        else:
            following = _read_scalar(
                ctx, values[0], niro_values[0], "the body's condition", ScalarType.BOOL
            )
            if blocked or any(not scan.slice_type.is_static for scan in scans):
                # NOTE: `current` is true here (the loop runs only while it is); and-ing it in
                # keeps the `after` region's condition argument alive: iree-compile (3.x)
                # mis-numbers the arguments of an scf.while that canonicalization left with
                # fewer `after` than `before` arguments once a buffer's dynamic dims are carried,
                # and crashes on such an inner loop of a walk in blocks (ScfWhileOpConversion)
                following = arith.AndIOp(following, current).result
        nexts = _nexts(ctx, yield_ctx, plan.carried_types, plan.bounds)
        offset = as_index(iteration)
        if blocked:  # the row's slot in the block's slab
            offset = arith.SubIOp(offset, walk.start).result
        stacked = []
        for scan, buffer in zip(scans, rows_in, strict=True):
            piece = _slice_of(ctx, values, carried, scan)
            if not scan.slice_type.is_static:
                first = arith.CmpIOp(arith.CmpIPredicate.eq, iteration, i64_constant(0)).result
                buffer = _sized_buffer(
                    ctx, buffer, piece, first, _stacked_type(rows, scan), scan.index
                )
            stacked.append(insert_row(piece, buffer, offset))
        step = arith.AddIOp(iteration, i64_constant(1)).result
        scf.YieldOp([step, following, *nexts, *stacked])

    ctx.lower_block(block, step_block, bound, yield_builder=finish)
    if blocked:
        _flush(walk, after, carried, scans)

    return list(loop.results)


@register_lowering("onnx.Loop", since=1)
def _lower_loop(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, UnknownOp), op
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        raise ctx.error("expects one body region with one block")
    block = op.regions[0].blocks[0]
    terminator = block.operations[-1] if block.operations else None
    if not isinstance(terminator, Yield):
        raise ctx.error("expects its body to end with 'niro.yield'")
    max_trip = input_value(ctx, 0)
    condition = input_value(ctx, 1)
    if max_trip is None and condition is None:
        raise ctx.error("has neither a max trip count M nor a condition: the loop would never end")
    absent_inputs = imported_op(ctx).absent_inputs
    if any(position >= 2 for position in absent_inputs):
        raise ctx.error("has an absent loop-carried value")
    first_carried = 2 - len(absent_inputs)
    initial = ctx.operands[first_carried:]
    carried = len(initial)
    if len(block.arguments) != carried + 2:
        raise ctx.error(
            f"body takes {len(block.arguments)} values, expected {carried + 2} (iteration "
            f"number, condition, {carried} loop-carried values)"
        )
    arguments = block.arguments[2:]
    carried_types = _carried_types(ctx, ctx.niro_operands[first_carried:], arguments)
    final_results, scan_results = _results_by_position(ctx, carried)
    yielded = terminator.operands
    if len(yielded) < 1 + carried + len(scan_results):
        raise ctx.error(
            f"body yields {len(yielded)} values, expected the condition, {carried} loop-carried "
            f"values and {len(scan_results)} scan outputs"
        )
    scans = _scan_outputs(ctx, scan_results, yielded, carried)
    trip_count = None
    if max_trip is not None:
        constant = ctx.constant_operand(0)
        if constant is not None and constant.size == 1:
            trip_count = int(constant.reshape(-1)[0])
    rows, exact = _bound(ctx, scans, trip_count, max_trip is not None) if scans else (0, False)
    # NOTE: a constant M no larger than the rows keeps every slice write in bounds by itself, as
    # does a run-time M (rows None): the `before` region runs an iteration only while i < M.
    guard_rows = bool(scans) and rows is not None and (trip_count is None or trip_count > rows)

    limit = None
    if max_trip is not None:
        limit = _read_scalar(ctx, *max_trip, "the max trip count M", ScalarType.I64)
    i1 = mlir_ir.IntegerType.get_signless(1)
    go = (
        _read_scalar(ctx, *condition, "the condition", ScalarType.BOOL)
        if condition is not None
        else arith.ConstantOp(i1, mlir_ir.IntegerAttr.get(i1, 1)).result
    )
    # Only a loop that carries two tensors or more gets them packed into one buffer by IREE.
    # NOTE: the scan outputs' buffers are not bounded: IREE (3.13) writes them in place and
    # carries each as a resource of its own, with no offset to fold (seen in its stream IR, and
    # two dynamic-slice scan outputs, or one growing carried tensor beside a dynamic-slice or
    # run-time-M scan output, match onnxruntime).
    bounds = carried + len(scans) > 1
    starts = [
        _bounded_dims(
            ctx,
            _checked_cast(ctx, value, type_, f"loop-carried value #{index}"),
            type_ if bounds else None,
            f"loop-carried value #{index}",
        )
        for index, (value, type_) in enumerate(zip(initial, carried_types, strict=True))
    ]
    every_iteration = _runs_every_iteration(ctx, condition, block, yielded)
    if rows is None:
        run_time_rows = _run_time_rows(ctx, limit, scans)
    whole = rows is None and every_iteration
    # NOTE: a slice's dynamic dims are 0 until the first iteration sizes the buffer (_sized_buffer)
    buffers = [
        empty_tensor(
            ctx,
            _stacked_type(rows, scan),
            [run_time_rows if rows is None else None]
            + [None if dim is not None else index_constant(0) for dim in scan.slice_type.shape],
        )
        for scan in scans
    ]
    plan = _LoopPlan(
        block, limit, condition is not None, carried_types, starts, scans, buffers, rows, guard_rows, bounds
    )
    if every_iteration and _unrolls(plan):
        finals = _unrolled(ctx, plan)
    else:
        finals = _while_loop(ctx, plan, go)

    outputs: list[mlir_ir.Value | None] = [None] * len(ctx.niro_results)
    for index, entry in enumerate(final_results):
        if entry is None:
            continue
        result, result_index = entry
        declared = _tensor_type(ctx, result, f"loop-carried value #{index} result")
        if not _compatible(carried_types[index], declared):
            raise ctx.error(
                f"loop-carried value #{index} is {format_type(carried_types[index])} in the "
                f"body, but its result is declared {format_type(declared)}"
            )
        outputs[result_index] = _checked_cast(
            ctx, finals[2 + index], declared, f"loop-carried value #{index}"
        )
    count = None
    if exact:
        assert rows is not None, "_bound says exact only for the declared (constant) rows"
        assert_true(
            arith.CmpIOp(arith.CmpIPredicate.eq, finals[0], i64_constant(rows)).result,
            f"{ctx.niro_location}: 'onnx.Loop' op stops before {rows} iterations, the rows its "
            "scan outputs are declared with",
        )
    elif scans and not whole:
        count = as_index(finals[0])
        # NOTE: no-op clamp (the loop stops by M) that keeps IREE (3.13) from cloning the bare
        # `index_cast` into the dispatch copying the rows out (e.g. for a Concat): it then
        # fails with "failed to resolve workgroup count hint in terms of workload ordinals".
        bound = run_time_rows if rows is None else index_constant(rows)
        count = arith.MinSIOp(count, bound).result
    for scan, buffer in zip(scans, finals[2 + carried :], strict=True):
        stacked_type = TensorType(scan.slice_type.element_type, (rows, *scan.slice_type.shape))
        if not exact and not whole:
            buffer = _first_rows(ctx, buffer, count, scan.slice_type)
            stacked_type = TensorType(stacked_type.element_type, (None, *scan.slice_type.shape))
        outputs[scan.result] = _checked_cast(
            ctx, buffer, scan.declared, f"scan output #{scan.index}"
        )
    return outputs
