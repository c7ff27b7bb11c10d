"""MLIR lowering of NonMaxSuppression (opset 10+): greedy per-class box selection with a
data-dependent number of selected boxes.

For each batch b and class c, the boxes whose score passes `score_threshold` (strictly
greater; every box when the input is absent) are visited by decreasing score, equal scores by
lower box index; a box is selected unless it overlaps an already selected box of that class
with IoU > `iou_threshold`, until `max_output_boxes_per_class` boxes are selected (absent or
<= 0: none). The result lists [b, c, box] per selected box, batch-major, then class, then
selection order: exactly onnx.reference's algorithm, with its float32 arithmetic in the same
order (so boxes exactly at the IoU threshold go the same way).

How: the visiting order is a permutation computed in parallel (`linalg.generic`s: each box's
rank among its class's boxes, then the box of each rank; quadratic in the box count). The
greedy walk is inherently sequential: one `scf.for` over (batch, class, rank) carries a
per-class "suppressed" mask (one element-wise generic over the boxes marks the boxes a newly
selected box suppresses, so no N x N IoU matrix is built) and writes selected rows into a
buffer of the maximum possible size (batches x classes x boxes rows); the result is its first
rows, a dynamic-size `tensor.extract_slice`. When the model declares a static row count, a
run-time check compares it with the count found before the result is cast to it.

Cost: the walk visits every (batch, class, box) on the host, with a few scalar reads and two
small dispatches each: right for the box counts of node tests and small detectors, slow for
tens of thousands of boxes times many classes.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType, format_type

from ..bindings import arith, linalg, mlir_ir, scf, tensor
from ..builders import (
    DYNAMIC,
    as_i64,
    as_index,
    assert_true,
    constant,
    dim_size,
    empty,
    fill,
    generic,
    index_constant,
    index_value,
    reassociation,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .common import attribute, input_value
from .indexing import scalar_input
from .selection import _comes_before

__all__: list[str] = []


def _box_order(scores: mlir_ir.Value, sizes: Sequence[int | mlir_ir.Value]) -> mlir_ir.Value:
    """order[b, c, r] = the index (i64) of the box of rank r among class c's boxes: higher score
    first, equal scores by lower index (NaN first, as in TopK; a permutation in every case)."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    ranks_init = fill(empty(sizes, i64), constant(i64, 0))

    def count_before(arguments):
        score, other, counted = arguments
        before = _comes_before(
            ScalarType.F32,
            True,
            other,
            score,
            _loop_index(3),
            _loop_index(2),
        )
        return [arith.AddIOp(counted, arith.ExtUIOp(i64, before).result).result]

    ranks = generic(
        [(scores, [0, 1, 2]), (scores, [0, 1, 3])], [(ranks_init, [0, 1, 2])], 4, (3,), count_before
    )[0]
    order_init = fill(empty(sizes, i64), constant(i64, 0))

    def place(arguments):
        rank, chosen = arguments
        position = as_i64(_loop_index(2))
        box = as_i64(_loop_index(3))
        hit = arith.CmpIOp(arith.CmpIPredicate.eq, rank, position).result
        return [arith.SelectOp(hit, box, chosen).result]

    return generic([(ranks, [0, 1, 3])], [(order_init, [0, 1, 2])], 4, (3,), place)[0]


def _loop_index(dim: int) -> mlir_ir.Value:
    return linalg.IndexOp(dim).result


# -- the IoU test, as onnx.reference's suppress_by_iou ----------------------------------------


def _cmp(predicate: str, lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.CmpFOp(getattr(arith.CmpFPredicate, predicate), lhs, rhs).result


def _not(value: mlir_ir.Value) -> mlir_ir.Value:
    return arith.XOrIOp(value, constant(value.type, 1)).result


def _py_max(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    """Python's max(lhs, rhs): rhs only when rhs > lhs."""
    return arith.SelectOp(_cmp("OGT", rhs, lhs), rhs, lhs).result


def _py_min(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> mlir_ir.Value:
    return arith.SelectOp(_cmp("OLT", rhs, lhs), rhs, lhs).result


def _min_max(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> tuple[mlir_ir.Value, mlir_ir.Value]:
    """The reference's max_min: (rhs, lhs) when lhs >= rhs, else (lhs, rhs)."""
    swap = _cmp("OGE", lhs, rhs)
    return arith.SelectOp(swap, rhs, lhs).result, arith.SelectOp(swap, lhs, rhs).result


def _extent(box: Sequence[mlir_ir.Value], center: bool, axis: int) -> tuple[mlir_ir.Value, mlir_ir.Value]:
    """(min, max) of `box` along x (axis 1 of [y1, x1, y2, x2]) or y (axis 0)."""
    if not center:
        return _min_max(box[axis], box[axis + 2])
    # [x_center, y_center, width, height]: x is coordinate 0 here, y coordinate 1.
    middle = box[1 - axis]
    half = arith.DivFOp(box[3 - axis], constant(middle.type, 2.0)).result
    return arith.SubFOp(middle, half).result, arith.AddFOp(middle, half).result


def _suppresses(
    candidate: Sequence[mlir_ir.Value], selected: Sequence[mlir_ir.Value], center: bool, threshold: mlir_ir.Value
) -> mlir_ir.Value:
    """i1: the reference's suppress_by_iou(box1=candidate, box2=selected)."""
    x1_min, x1_max = _extent(candidate, center, 1)
    x2_min, x2_max = _extent(selected, center, 1)
    y1_min, y1_max = _extent(candidate, center, 0)
    y2_min, y2_max = _extent(selected, center, 0)
    ix_min, ix_max = _py_max(x1_min, x2_min), _py_min(x1_max, x2_max)
    iy_min, iy_max = _py_max(y1_min, y2_min), _py_min(y1_max, y2_max)
    zero = constant(threshold.type, 0.0)
    intersection = arith.MulFOp(
        arith.SubFOp(ix_max, ix_min).result, arith.SubFOp(iy_max, iy_min).result
    ).result
    area1 = arith.MulFOp(
        arith.SubFOp(x1_max, x1_min).result, arith.SubFOp(y1_max, y1_min).result
    ).result
    area2 = arith.MulFOp(
        arith.SubFOp(x2_max, x2_min).result, arith.SubFOp(y2_max, y2_min).result
    ).result
    union = arith.SubFOp(arith.AddFOp(area1, area2).result, intersection).result
    iou = arith.DivFOp(intersection, union).result
    conditions = [
        _not(_cmp("OLE", ix_max, ix_min)),
        _not(_cmp("OLE", iy_max, iy_min)),
        _not(_cmp("OLE", intersection, zero)),
        _not(_cmp("OLE", area1, zero)),
        _not(_cmp("OLE", area2, zero)),
        _not(_cmp("OLE", union, zero)),
        _cmp("OGT", iou, threshold),
    ]
    result = conditions[0]
    for condition in conditions[1:]:
        result = arith.AndIOp(result, condition).result
    return result


def _mark_suppressed(
    boxes: mlir_ir.Value,
    batch: mlir_ir.Value,
    chosen: mlir_ir.Value,
    suppressed: mlir_ir.Value,
    fresh: mlir_ir.Value,
    keep: mlir_ir.Value,
    count: int | mlir_ir.Value,
    center: bool,
    threshold: mlir_ir.Value,
) -> mlir_ir.Value:
    """`suppressed` (i32 per box of batch `batch`; all 0 when `fresh`) with, when `keep`,
    every box that box `chosen` suppresses marked 1: one element-wise generic over the boxes."""
    batch_boxes = _batch_boxes(boxes, batch)
    coordinate_maps = [[0, mlir_ir.AffineConstantExpr.get(k)] for k in range(4)]
    inputs = [(batch_boxes, spec) for spec in coordinate_maps]

    def body(arguments):
        candidate, marked = arguments[:4], arguments[4]
        selected = [
            tensor.ExtractOp(batch_boxes, [chosen, index_constant(k)]).result for k in range(4)
        ]
        hit = arith.AndIOp(keep, _suppresses(candidate, selected, center, threshold)).result
        marked = arith.SelectOp(fresh, constant(marked.type, 0), marked).result
        return [arith.SelectOp(hit, constant(marked.type, 1), marked).result]

    init = empty([count], mlir_ir.IntegerType.get_signless(32))
    return generic([*inputs, (suppressed, [0])], [(init, [0])], 1, (), body)[0]


def _batch_boxes(boxes: mlir_ir.Value, batch: mlir_ir.Value) -> mlir_ir.Value:
    """The [boxes, 4] of batch `batch`: a `tensor.collapse_shape` when there is one batch,
    else a `tensor.extract_slice` at row `batch`.

    NOTE: IREE 3.13's BubbleUpExpandShapesPass moves such a slice up through the element-wise
    generic that makes the boxes, bounding the slice's box count with an integer-set solver
    (Fourier-Motzkin, in `getTiledImplementation`). When that count is a sum of many clamped
    data-dependent counts (torchvision's batched_nms concatenates the top-k of each of
    SSDlite's 90 classes) the bound's time grows about tenfold per doubling of the classes:
    SSDlite's iree-compile took 45 minutes, 94% of it in that pass. A collapse_shape has no
    size to bound (tests/backends/mlir/onnx_ops/test_batched_nms.py)."""
    shaped = mlir_ir.RankedTensorType(boxes.type)
    slice_type = mlir_ir.RankedTensorType.get([shaped.shape[1], 4], shaped.element_type)
    if shaped.shape[0] == 1 and shaped.shape[2] == 4:
        return tensor.CollapseShapeOp(slice_type, boxes, reassociation([[0, 1], [2]])).result
    return tensor.ExtractSliceOp(
        slice_type,
        boxes,
        [batch],
        [dim_size(boxes, 1)] if shaped.is_dynamic_dim(1) else [],
        [],
        [DYNAMIC, 0, 0],
        [1, shaped.shape[1], 4],
        [1, 1, 1],
    ).result


# -- the rule ---------------------------------------------------------------------------------


@register_lowering("onnx.NonMaxSuppression", since=10)
def _lower_non_max_suppression(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    boxes_type = ctx.ranked(ctx.niro_operands[0], "boxes")
    scores_type = ctx.ranked(ctx.niro_operands[1], "scores")
    result = ctx.ranked(ctx.niro_results[0], "result")
    for what, type_ in (("boxes", boxes_type), ("scores", scores_type)):
        if type_.element_type is not ScalarType.F32:
            raise ctx.error(f"expects float {what}, got {format_type(type_)}")
    if len(boxes_type.shape) != 3 or boxes_type.shape[2] not in (4, None):
        raise ctx.error(
            f"expects boxes of shape [batches, boxes, 4], got {format_type(boxes_type)}"
        )
    if len(scores_type.shape) != 3:
        raise ctx.error(
            f"expects scores of shape [batches, classes, boxes], got {format_type(scores_type)}"
        )
    if len(result.shape) != 2 or result.shape[1] not in (3, None):
        raise ctx.error(f"expects a result of shape [selected, 3], got {format_type(result)}")
    center = attribute(ctx, "center_point_box", 0)
    if center not in (0, 1):
        raise ctx.error(f"expects center_point_box 0 or 1, got {center!r}")
    boxes, scores = ctx.operands[0], ctx.operands[1]
    batches, count, _ = tensor_sizes(boxes)
    _, classes, _ = tensor_sizes(scores)
    sizes = [index_value(batches), index_value(classes), index_value(count)]
    # The box counts of boxes and scores must agree (the spec's shapes).
    same = arith.CmpIOp(arith.CmpIPredicate.eq, sizes[2], index_value(tensor_sizes(scores)[2])).result
    batches_agree = arith.CmpIOp(
        arith.CmpIPredicate.eq, sizes[0], index_value(tensor_sizes(scores)[0])
    ).result
    assert_true(
        arith.AndIOp(same, batches_agree).result,
        f"{ctx.niro_location}: NonMaxSuppression boxes and scores disagree on the batch or box count",
    )

    i64 = mlir_ir.IntegerType.get_signless(64)
    f32 = mlir_ir.F32Type.get()
    limit = _optional_scalar(ctx, 2, "max_output_boxes_per_class", ScalarType.I64)
    limit = constant(i64, 0) if limit is None else arith.MaxSIOp(limit, constant(i64, 0)).result
    threshold = _optional_scalar(ctx, 3, "iou_threshold", ScalarType.F32)
    threshold = constant(f32, 0.0) if threshold is None else threshold
    score_threshold = _optional_scalar(ctx, 4, "score_threshold", ScalarType.F32)

    order = _box_order(scores, tensor_sizes(scores))
    static = [size for size in (batches, classes, count) if isinstance(size, int)]
    if len(static) == 3:
        rows: int | mlir_ir.Value = batches * classes * count
    else:
        rows = arith.MulIOp(arith.MulIOp(sizes[0], sizes[1]).result, sizes[2]).result
    # Rows past the selected count are never read: no fill (IREE 3.x also miscomputes the
    # length of a host-side i64 fill of a 3-column tensor).
    buffer = empty([rows, 3], i64)
    zero, one = index_constant(0), index_constant(1)
    i32 = mlir_ir.IntegerType.get_signless(32)

    # One flat loop over (batch, class, rank): a nest would carry the result buffer through
    # loops of loops, and IREE (3.x) loses the DYNAMIC size of a tensor carried that way.
    # The class state (the suppressed mask, the count taken) restarts at rank 0, so the mask
    # starts uninitialized: what it holds at rank 0 is ignored and replaced.
    per_batch = arith.MulIOp(sizes[1], sizes[2]).result
    steps = arith.MulIOp(sizes[0], per_batch).result
    nothing = arith.CmpIOp(arith.CmpIPredicate.eq, limit, constant(i64, 0)).result
    steps = arith.SelectOp(nothing, zero, steps).result  # no box may be selected: no walk
    mask = empty([count], i32)
    loop = scf.ForOp(zero, steps, one, [buffer, zero, mask, zero])
    with mlir_ir.InsertionPoint(loop.body):
        written, total, suppressed, taken = loop.inner_iter_args
        step = loop.induction_variable
        batch = arith.DivUIOp(step, per_batch).result
        klass = arith.RemUIOp(arith.DivUIOp(step, sizes[2]).result, sizes[1]).result
        rank = arith.RemUIOp(step, sizes[2]).result
        fresh = arith.CmpIOp(arith.CmpIPredicate.eq, rank, zero).result
        taken = arith.SelectOp(fresh, zero, taken).result
        box = as_index(tensor.ExtractOp(order, [batch, klass, rank]).result)
        keep = arith.CmpIOp(
            arith.CmpIPredicate.slt, as_i64(taken), limit
        ).result
        if score_threshold is not None:
            score = tensor.ExtractOp(scores, [batch, klass, box]).result
            keep = arith.AndIOp(keep, _cmp("OGT", score, score_threshold)).result
        marked = tensor.ExtractOp(suppressed, [box]).result
        free = arith.CmpIOp(arith.CmpIPredicate.eq, marked, constant(i32, 0)).result
        keep = arith.AndIOp(keep, arith.OrIOp(fresh, free).result).result
        # NOTE: no scf.if, and every carried tensor is updated by an insert_slice into
        # itself: then MLIR can tell a carried tensor keeps its (DYNAMIC) size, which IREE
        # needs. A row written at `total` when the box is not kept is overwritten by the next
        # kept box, or lies past the result's rows.
        row = tensor.InsertSliceOp(
            _row(batch, klass, box), written, [total], [], [], [DYNAMIC, 0], [1, 3], [1, 1]
        ).result
        marks = _mark_suppressed(
            boxes, batch, box, suppressed, fresh, keep, count, bool(center), threshold
        )
        marks = tensor.InsertSliceOp(
            marks,
            suppressed,
            [],
            [] if isinstance(count, int) else [count],
            [],
            [0],
            [count if isinstance(count, int) else DYNAMIC],
            [1],
        ).result
        added = arith.SelectOp(keep, one, zero).result
        scf.YieldOp(
            [row, arith.AddIOp(total, added).result, marks, arith.AddIOp(taken, added).result]
        )
    written, total = list(loop.results)[:2]
    selected = tensor.ExtractSliceOp(
        mlir_ir.RankedTensorType.get([DYNAMIC, 3], i64),
        written,
        [],
        [total],
        [],
        [0, 0],
        [DYNAMIC, 3],
        [1, 1],
    ).result
    return [_fit(ctx, selected, total, result.shape[0])]


def _row(batch: mlir_ir.Value, klass: mlir_ir.Value, box: mlir_ir.Value) -> mlir_ir.Value:
    """The result row [batch, class, box] as a tensor<1x3xi64> built by a `linalg.generic`.

    NOTE: not `tensor.from_elements` or scalar `tensor.insert`s: IREE (3.x) turns those into
    `stream.tensor.fill`s of sub-regions of the loop-carried result, whose byte ranges it
    miscomputes (out-of-range writes, or a compile error when the values fold to constants)."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    init = empty([1, 3], i64)

    def body(arguments):
        column = _loop_index(1)
        value = arith.SelectOp(
            arith.CmpIOp(arith.CmpIPredicate.eq, column, index_constant(0)).result,
            batch,
            arith.SelectOp(
                arith.CmpIOp(arith.CmpIPredicate.eq, column, index_constant(1)).result, klass, box
            ).result,
        ).result
        return [as_i64(value)]

    return generic([], [(init, [0, 1])], 2, (), body)[0]



def _optional_scalar(
    ctx: LoweringRuleContext, position: int, what: str, expected: ScalarType
) -> mlir_ir.Value | None:
    """ONNX input `position` (a one-element tensor) as a host scalar, or None when absent."""
    given = input_value(ctx, position)
    if given is None:
        return None
    value, niro = given
    type_ = ctx.ranked(niro, what)
    if type_.element_type is not expected:
        raise ctx.error(f"expects a {expected.name.lower()} {what}, got {format_type(type_)}")
    if type_.shape is not None and any(dim == 0 for dim in type_.shape):
        return None  # an empty tensor: as if absent (the reference's `.size == 0`)
    return scalar_input(ctx, value, niro)


def _fit(ctx: LoweringRuleContext, selected: mlir_ir.Value, total: mlir_ir.Value, declared: int | None):
    """The selected rows as the result type: when the model declares a static row count, a
    run-time check that it is the count found, then a `tensor.cast`."""
    if declared is not None:
        agree = arith.CmpIOp(arith.CmpIPredicate.eq, total, index_constant(declared)).result
        assert_true(
            agree,
            f"{ctx.niro_location}: NonMaxSuppression selected a number of boxes other than the "
            f"{declared} rows its result type declares",
        )
    if selected.type == ctx.result_types[0]:
        return selected
    return tensor.CastOp(ctx.result_types[0], selected).result
