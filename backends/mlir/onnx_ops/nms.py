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
greedy walk is inherently sequential: `scf.for` loops over batches, classes and ranks carry a
per-class "suppressed" mask (one element-wise generic over the boxes marks the boxes a newly
selected box suppresses, so no N x N IoU matrix is built) and write selected rows into a
buffer of the maximum possible size (batches x classes x boxes rows); the result is its first
rows, a dynamic-size `tensor.extract_slice`. When the model declares a static row count, a
run-time check compares it with the count found before the result is cast to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType, format_type

from ..bindings import arith, ir, linalg, scf, tensor
from ..context import LoweringRuleContext, register_lowering
from ..types import index_type
from .common import attribute, input_value
from .indexing import const_index, scalar_input
from .selection import _comes_before
from .structured import assert_true, constant, empty, fill, generic, tensor_sizes

__all__: list[str] = []


def _box_order(scores: ir.Value, sizes: Sequence[int | ir.Value]) -> ir.Value:
    """order[b, c, r] = the index (i64) of the box of rank r among class c's boxes: higher score
    first, equal scores by lower index (NaN first, as in TopK; a permutation in every case)."""
    i64 = ir.IntegerType.get_signless(64)
    ranks_init = fill(empty(sizes, i64), constant(i64, 0))

    def count_before(arguments):
        score, other, counted = arguments
        before = _comes_before(
            ScalarType.F32,
            True,
            other,
            score,
            linalg_index(3),
            linalg_index(2),
        )
        return [arith.AddIOp(counted, arith.ExtUIOp(i64, before).result).result]

    ranks = generic(
        [(scores, [0, 1, 2]), (scores, [0, 1, 3])], [(ranks_init, [0, 1, 2])], 4, (3,), count_before
    )[0]
    order_init = fill(empty(sizes, i64), constant(i64, 0))

    def place(arguments):
        rank, chosen = arguments
        position = arith.IndexCastOp(i64, linalg_index(2)).result
        box = arith.IndexCastOp(i64, linalg_index(3)).result
        hit = arith.CmpIOp(arith.CmpIPredicate.eq, rank, position).result
        return [arith.SelectOp(hit, box, chosen).result]

    return generic([(ranks, [0, 1, 3])], [(order_init, [0, 1, 2])], 4, (3,), place)[0]


def linalg_index(dim: int) -> ir.Value:
    return linalg.IndexOp(dim).result


# -- the IoU test, as onnx.reference's suppress_by_iou ----------------------------------------


def _cmp(predicate: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    return arith.CmpFOp(getattr(arith.CmpFPredicate, predicate), lhs, rhs).result


def _not(value: ir.Value) -> ir.Value:
    return arith.XOrIOp(value, constant(value.type, 1)).result


def _py_max(lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """Python's max(lhs, rhs): rhs only when rhs > lhs."""
    return arith.SelectOp(_cmp("OGT", rhs, lhs), rhs, lhs).result


def _py_min(lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    return arith.SelectOp(_cmp("OLT", rhs, lhs), rhs, lhs).result


def _min_max(lhs: ir.Value, rhs: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The reference's max_min: (rhs, lhs) when lhs >= rhs, else (lhs, rhs)."""
    swap = _cmp("OGE", lhs, rhs)
    return arith.SelectOp(swap, rhs, lhs).result, arith.SelectOp(swap, lhs, rhs).result


def _extent(box: Sequence[ir.Value], center: bool, axis: int) -> tuple[ir.Value, ir.Value]:
    """(min, max) of `box` along x (axis 1 of [y1, x1, y2, x2]) or y (axis 0)."""
    if not center:
        return _min_max(box[axis], box[axis + 2])
    # [x_center, y_center, width, height]: x is coordinate 0 here, y coordinate 1.
    middle = box[1 - axis]
    half = arith.DivFOp(box[3 - axis], constant(middle.type, 2.0)).result
    return arith.SubFOp(middle, half).result, arith.AddFOp(middle, half).result


def _suppresses(
    candidate: Sequence[ir.Value], selected: Sequence[ir.Value], center: bool, threshold: ir.Value
) -> ir.Value:
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
    boxes: ir.Value,
    batch: ir.Value,
    chosen: ir.Value,
    suppressed: ir.Value,
    center: bool,
    threshold: ir.Value,
) -> ir.Value:
    """`suppressed` (i32 per box of batch `batch`) with every box that box `chosen` suppresses
    marked 1: one element-wise generic over the boxes."""
    shaped = ir.RankedTensorType(boxes.type)
    slice_type = ir.RankedTensorType.get([shaped.shape[1], 4], shaped.element_type)
    dynamic = ir.ShapedType.get_dynamic_size()
    batch_boxes = tensor.ExtractSliceOp(
        slice_type,
        boxes,
        [batch],
        [tensor_sizes(boxes)[1]] if shaped.is_dynamic_dim(1) else [],
        [],
        [dynamic, 0, 0],
        [1, shaped.shape[1], 4],
        [1, 1, 1],
    ).result
    coordinate_maps = [[0, ir.AffineConstantExpr.get(k)] for k in range(4)]
    inputs = [(batch_boxes, spec) for spec in coordinate_maps]

    def body(arguments):
        candidate, marked = arguments[:4], arguments[4]
        selected = [
            tensor.ExtractOp(batch_boxes, [chosen, const_index(k)]).result for k in range(4)
        ]
        hit = _suppresses(candidate, selected, center, threshold)
        one = constant(marked.type, 1)
        return [arith.SelectOp(hit, one, marked).result]

    return generic(inputs, [(suppressed, [0])], 1, (), body)[0]


# -- the rule ---------------------------------------------------------------------------------


@register_lowering("onnx.NonMaxSuppression", since=10)
def _lower_non_max_suppression(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    boxes_type = ctx.ranked(ctx.niro_operands[0], "boxes")
    scores_type = ctx.ranked(ctx.niro_operands[1], "scores")
    result = ctx.ranked(ctx.niro_results[0], "result")
    for what, type_ in (("boxes", boxes_type), ("scores", scores_type)):
        if type_.element_type is not ScalarType.F32:
            raise ctx.error(f"expects float {what}, got {format_type(type_)}")
    if len(boxes_type.shape) != 3 or boxes_type.shape[2] not in (4, None):
        raise ctx.error(f"expects boxes of shape [batches, boxes, 4], got {format_type(boxes_type)}")
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
    sizes = [_index(batches), _index(classes), _index(count)]
    # The box counts of boxes and scores must agree (the spec's shapes).
    same = arith.CmpIOp(arith.CmpIPredicate.eq, sizes[2], _index(tensor_sizes(scores)[2])).result
    batches_agree = arith.CmpIOp(
        arith.CmpIPredicate.eq, sizes[0], _index(tensor_sizes(scores)[0])
    ).result
    assert_true(
        arith.AndIOp(same, batches_agree).result,
        f"{ctx.niro_location}: NonMaxSuppression boxes and scores disagree on the batch or box count",
    )

    i64 = ir.IntegerType.get_signless(64)
    f32 = ir.F32Type.get()
    limit = _optional_scalar(ctx, 2, "max_output_boxes_per_class", ScalarType.I64)
    limit = constant(i64, 0) if limit is None else arith.MaxSIOp(limit, constant(i64, 0)).result
    threshold = _optional_scalar(ctx, 3, "iou_threshold", ScalarType.F32)
    threshold = constant(f32, 0.0) if threshold is None else threshold
    score_threshold = _optional_scalar(ctx, 4, "score_threshold", ScalarType.F32)

    order = _box_order(scores, tensor_sizes(scores))
    rows = arith.MulIOp(arith.MulIOp(sizes[0], sizes[1]).result, sizes[2]).result
    buffer = fill(empty([rows, 3], i64), constant(i64, 0))
    zero, one = const_index(0), const_index(1)
    i32 = ir.IntegerType.get_signless(32)

    batch_loop = scf.ForOp(zero, sizes[0], one, [buffer, zero])
    with ir.InsertionPoint(batch_loop.body):
        batch = batch_loop.induction_variable
        class_loop = scf.ForOp(zero, sizes[1], one, list(batch_loop.inner_iter_args))
        with ir.InsertionPoint(class_loop.body):
            klass = class_loop.induction_variable
            clear = fill(empty([sizes[2]], i32), constant(i32, 0))
            rank_loop = scf.ForOp(
                zero, sizes[2], one, [*class_loop.inner_iter_args, clear, zero]
            )
            with ir.InsertionPoint(rank_loop.body):
                written, total, suppressed, taken = rank_loop.inner_iter_args
                rank = rank_loop.induction_variable
                box = arith.IndexCastOp(
                    index_type(), tensor.ExtractOp(order, [batch, klass, rank]).result
                ).result
                keep = arith.CmpIOp(
                    arith.CmpIPredicate.slt, arith.IndexCastOp(i64, taken).result, limit
                ).result
                if score_threshold is not None:
                    score = tensor.ExtractOp(scores, [batch, klass, box]).result
                    keep = arith.AndIOp(keep, _cmp("OGT", score, score_threshold)).result
                marked = tensor.ExtractOp(suppressed, [box]).result
                free = arith.CmpIOp(arith.CmpIPredicate.eq, marked, constant(i32, 0)).result
                keep = arith.AndIOp(keep, free).result
                branch = scf.IfOp(
                    keep,
                    [written.type, index_type(), suppressed.type, index_type()],
                    has_else=True,
                )
                with ir.InsertionPoint(branch.then_block):
                    row = written
                    for column, value in enumerate((batch, klass, box)):
                        row = tensor.InsertOp(
                            arith.IndexCastOp(i64, value).result, row, [total, const_index(column)]
                        ).result
                    marked_now = _mark_suppressed(
                        boxes, batch, box, suppressed, bool(center), threshold
                    )
                    scf.YieldOp(
                        [row, arith.AddIOp(total, one).result, marked_now, arith.AddIOp(taken, one).result]
                    )
                with ir.InsertionPoint(branch.else_block):
                    scf.YieldOp([written, total, suppressed, taken])
                scf.YieldOp(list(branch.results))
            scf.YieldOp(list(rank_loop.results)[:2])
        scf.YieldOp(list(class_loop.results))
    written, total = batch_loop.results
    selected = tensor.ExtractSliceOp(
        ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size(), 3], i64),
        written,
        [],
        [total],
        [],
        [0, 0],
        [ir.ShapedType.get_dynamic_size(), 3],
        [1, 1],
    ).result
    return [_fit(ctx, selected, total, result.shape[0])]


def _index(size: int | ir.Value) -> ir.Value:
    return const_index(size) if isinstance(size, int) else size


def _optional_scalar(
    ctx: LoweringRuleContext, position: int, what: str, expected: ScalarType
) -> ir.Value | None:
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


def _fit(ctx: LoweringRuleContext, selected: ir.Value, total: ir.Value, declared: int | None):
    """The selected rows as the result type: when the model declares a static row count, a
    run-time check that it is the count found, then a `tensor.cast`."""
    if declared is not None:
        agree = arith.CmpIOp(arith.CmpIPredicate.eq, total, const_index(declared)).result
        assert_true(
            agree,
            f"{ctx.niro_location}: NonMaxSuppression selected a number of boxes other than the "
            f"{declared} rows its result type declares",
        )
    if selected.type == ctx.result_types[0]:
        return selected
    return tensor.CastOp(ctx.result_types[0], selected).result

