"""MLIR lowerings of CumSum, CumProd and TopK: order-dependent ops built from plain
`linalg.generic`s.

CumSum and CumProd are reductions over a second copy of the axis: out[i] = sum (product) of x[j]
for j <= i (j < i exclusive, j >= i / j > i reversed); an empty exclusive range gives 0 (1).
TopK ranks every element by counting the elements that come before it in the order ONNX asks for
(larger first, or smaller; equal elements by lower index), which makes the ranks a permutation,
then gathers rank r into output position r. All are quadratic in the axis length: exact and
sort-free with upstream dialects only, meant for the short axes such ops have in real models
(position ids, beam widths). A TopK axis that is dynamic or longer than SHORT_AXIS (a
detector's scores over a threshold) is sorted instead (bitonic.py), then cut to K.

The `axis` of CumSum/CumProd and `K` of TopK are inputs. When not compile-time constants: K is
read from the static result shape (or, where that size is dynamic, read at run time and used as
the result's size), the cumulative ops' axis is picked at run time among the operand's axes
(one `scf.if` per axis); either way a `cf.assert` fails the program if the run-time value
disagrees or is out of range.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType, format_type, op_name

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    DYNAMIC,
    accumulator_type,
    as_i64,
    assert_true,
    constant,
    convert,
    empty,
    fill,
    generic,
    index_constant,
    index_value,
    tensor_size,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .bitonic import bitonic_sort
from .common import attribute, normalize_axis, opset, ranked_result
from .indexing import data_size
from .reductions import RuntimeAxes, dispatch

__all__: list[str] = []


# -- CumSum, CumProd -------------------------------------------------------------------------


def _cumulative(ctx: LoweringRuleContext, axis: int, combine: str) -> mlir_ir.Value:
    """The running sum (`combine` "add") or product ("mul") along `axis`."""
    source = ctx.operands[0]
    data = ctx.ranked(ctx.niro_operands[0], "operand #0")
    scalar = data.element_type
    rank = len(data.shape)
    exclusive = bool(attribute(ctx, "exclusive", 0))
    reverse = bool(attribute(ctx, "reverse", 0))
    accumulator = accumulator_type(scalar)
    sizes = tensor_sizes(source)
    start = 0 if combine == "add" else 1
    init = fill(empty(sizes, accumulator), constant(accumulator, start))
    # Loops: the result dims, then `rank` = the position j combined over along `axis`.
    read = [rank if dim == axis else dim for dim in range(rank)]
    if reverse:
        predicate = arith.CmpIPredicate.ugt if exclusive else arith.CmpIPredicate.uge
    else:
        predicate = arith.CmpIPredicate.ult if exclusive else arith.CmpIPredicate.ule
    if scalar.is_float:
        op_class = arith.AddFOp if combine == "add" else arith.MulFOp
    else:
        op_class = arith.AddIOp if combine == "add" else arith.MulIOp

    def body(arguments):
        value, accumulated = arguments
        position = linalg.IndexOp(rank).result
        here = linalg.IndexOp(axis).result
        include = arith.CmpIOp(predicate, position, here).result
        element = convert(value, accumulator) if scalar.is_float else value
        combined = op_class(accumulated, element).result
        return [arith.SelectOp(include, combined, accumulated).result]

    folded = generic([(source, read)], [(init, list(range(rank)))], rank + 1, (rank,), body)[0]
    result_element = ranked_result(ctx, 0).element_type
    identity = list(range(rank))
    return generic(
        [(folded, identity)],
        [(empty(sizes, result_element), identity)],
        rank,
        (),
        lambda arguments: [
            convert(arguments[0], result_element) if scalar.is_float else arguments[0]
        ],
    )[0]


def _lower_cumulative(ctx: LoweringRuleContext, combine: str) -> Sequence[mlir_ir.Value]:
    """CumSum/CumProd: the axis is a constant input, or picked at run time (one `scf.if` per
    axis, guarded by a run-time range check)."""
    kind = "CumSum" if combine == "add" else "CumProd"
    data = ctx.ranked(ctx.niro_operands[0], "operand #0")
    if data.element_type.is_bool:
        raise ctx.error(f"does not take BOOL tensors ({kind} is defined on numbers)")
    rank = len(data.shape)
    if rank == 0:
        raise ctx.error("expects an input of rank >= 1")
    given = ctx.constant_operand(1)
    if given is not None:
        return [_cumulative(ctx, normalize_axis(ctx, int(given.reshape(-1)[0]), rank), combine)]
    axis_type = ctx.ranked(ctx.niro_operands[1], "axis")
    if any(dim != 1 for dim in axis_type.shape):
        raise ctx.error(f"expects a one-element axis, got {format_type(axis_type)}")
    (axis,) = _first(ctx.operands[1])
    i64 = mlir_ir.IntegerType.get_signless(64)
    negative = arith.CmpIOp(arith.CmpIPredicate.slt, axis, constant(i64, 0)).result
    axis = arith.SelectOp(negative, arith.AddIOp(axis, constant(i64, rank)).result, axis).result
    selectors = tuple(
        arith.CmpIOp(arith.CmpIPredicate.eq, axis, constant(i64, option)).result
        for option in range(rank)
    )
    valid = selectors[0]
    for selector in selectors[1:]:
        valid = arith.OrIOp(valid, selector).result
    assert_true(valid, f"{ctx.niro_location}: the {kind} axis is out of range")
    runtime = RuntimeAxes(tuple((option,) for option in range(rank)), selectors)
    return [dispatch(ctx, runtime, lambda option: _cumulative(ctx, option[0], combine))]


@register_lowering("onnx.CumSum", since=11)
def _lower_cumsum(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_cumulative(ctx, "add")


@register_lowering("onnx.CumProd", since=26)
def _lower_cumprod(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_cumulative(ctx, "mul")


def _first(value: mlir_ir.Value) -> list[mlir_ir.Value]:
    """The first element of a 1-element tensor of any rank, as i64."""
    shaped = mlir_ir.RankedTensorType(value.type)
    zero = arith.ConstantOp(mlir_ir.IndexType.get(), mlir_ir.IntegerAttr.get(mlir_ir.IndexType.get(), 0)).result
    element = tensor.ExtractOp(value, [zero] * shaped.rank).result
    i64 = mlir_ir.IntegerType.get_signless(64)
    if mlir_ir.IntegerType(element.type).width < 64:
        element = arith.ExtSIOp(i64, element).result
    return [element]


# -- TopK ---------------------------------------------------------------------------------------


def _comes_before(scalar: ScalarType, largest: bool, other, value, other_index, index) -> mlir_ir.Value:
    """i1: `other` (at `other_index`) is ordered before `value` (at `index`): larger (smaller)
    first, NaN as the largest, equal elements by lower index."""
    if scalar.is_float:
        ordered = arith.CmpFPredicate.OGT if largest else arith.CmpFPredicate.OLT
        strictly = arith.CmpFOp(ordered, other, value).result
        other_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, other, other).result
        value_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
        true = constant(other_nan.type, 1)
        value_number = arith.XOrIOp(value_nan, true).result
        other_number = arith.XOrIOp(other_nan, true).result
        # NaN is the largest value: first when largest, last when smallest.
        nan_first = other_nan if largest else value_nan
        number_first = value_number if largest else other_number
        strictly = arith.OrIOp(
            arith.AndIOp(arith.AndIOp(value_number, other_number).result, strictly).result,
            arith.AndIOp(nan_first, number_first).result,
        ).result
        equal = arith.OrIOp(
            arith.CmpFOp(arith.CmpFPredicate.OEQ, other, value).result,
            arith.AndIOp(other_nan, value_nan).result,
        ).result
    else:
        unsigned = scalar.is_unsigned_integer or scalar.is_bool
        if largest:
            predicate = arith.CmpIPredicate.ugt if unsigned else arith.CmpIPredicate.sgt
        else:
            predicate = arith.CmpIPredicate.ult if unsigned else arith.CmpIPredicate.slt
        strictly = arith.CmpIOp(predicate, other, value).result
        equal = arith.CmpIOp(arith.CmpIPredicate.eq, other, value).result
    earlier = arith.CmpIOp(arith.CmpIPredicate.ult, other_index, index).result
    return arith.OrIOp(strictly, arith.AndIOp(equal, earlier).result).result


@register_lowering("onnx.TopK")
def _lower_topk(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Values and i64 indices of the K largest (smallest) elements along `axis`, sorted."""
    source = ctx.operands[0]
    data = ctx.ranked(ctx.niro_operands[0], "operand #0")
    scalar = data.element_type
    rank = len(data.shape)
    if rank == 0:
        raise ctx.error("expects an input of rank >= 1")
    if len(ctx.result_types) != 2:
        raise ctx.error("expects both the Values and Indices outputs")
    axis = normalize_axis(ctx, int(attribute(ctx, "axis", -1)), rank)
    largest = bool(attribute(ctx, "largest", 1))
    values_type = ranked_result(ctx, 0)
    if values_type.rank != rank:
        raise ctx.error(
            f"result {format_type(ctx.niro_results[0].type)} does not have the rank of the input"
        )
    length = data.shape[axis]
    k: int | mlir_ir.Value
    if values_type.is_dynamic_dim(axis):
        k = _runtime_k(ctx, source, axis)
    else:
        k = values_type.shape[axis]
        _check_k(ctx, k)
        if length is not None and k > length:
            raise ctx.error(f"K = {k} exceeds the axis size {length}")
    if length is None or length > SHORT_AXIS:
        return _sorted_topk(ctx, source, axis, k, largest)
    i64 = mlir_ir.IntegerType.get_signless(64)
    sizes = tensor_sizes(source)

    # ranks[..., i, ...] = how many elements along the axis come before element i.
    counts_init = fill(empty(sizes, i64), constant(i64, 0))
    other_read = [rank if dim == axis else dim for dim in range(rank)]

    def count_body(arguments):
        value, other, counted = arguments
        index = linalg.IndexOp(axis).result
        other_index = linalg.IndexOp(rank).result
        before = _comes_before(scalar, largest, other, value, other_index, index)
        return [arith.AddIOp(counted, arith.ExtUIOp(i64, before).result).result]

    ranks = generic(
        [(source, list(range(rank))), (source, other_read)],
        [(counts_init, list(range(rank)))],
        rank + 1,
        (rank,),
        count_body,
    )[0]

    # Output position r along the axis takes the element whose rank is r.
    out_sizes = [k if dim == axis else size for dim, size in enumerate(sizes)]
    element = values_type.element_type
    values_init = fill(empty(out_sizes, element), constant(element, 0))
    indices_init = fill(empty(out_sizes, i64), constant(i64, 0))

    def gather_body(arguments):
        value, rank_value, chosen, chosen_index = arguments
        position = as_i64(linalg.IndexOp(axis).result)
        source_index = as_i64(linalg.IndexOp(rank).result)
        hit = arith.CmpIOp(arith.CmpIPredicate.eq, rank_value, position).result
        return [
            arith.SelectOp(hit, value, chosen).result,
            arith.SelectOp(hit, source_index, chosen_index).result,
        ]

    values, indices = generic(
        [(source, other_read), (ranks, other_read)],
        [(values_init, list(range(rank))), (indices_init, list(range(rank)))],
        rank + 1,
        (rank,),
        gather_body,
    )
    return [values, indices]


SHORT_AXIS = 1024
"""The longest static axis TopK ranks by counting (quadratic, one generic: exact and simple for
the short axes of most models and every node test); longer or dynamic axes are sorted."""


def _sorted_topk(ctx: LoweringRuleContext, source: mlir_ir.Value, axis: int, k, largest: bool) -> list[mlir_ir.Value]:
    """TopK by a bitonic sort of the whole axis, then its first K positions: O(n log^2 n).
    NOTE: the rank count is quadratic in the axis length; torchvision's RetinaNet takes the
    TopK of the ~10^5 scores over its threshold on an FPN level."""
    scalar = ctx.ranked(ctx.niro_operands[0], "operand #0").element_type
    element = mlir_ir.RankedTensorType(source.type).element_type

    def before(a, a_index, b, b_index):
        return _comes_before(scalar, largest, a, b, a_index, b_index)

    order, element_at = bitonic_sort(source, axis, before)
    rank = mlir_ir.RankedTensorType(source.type).rank
    sizes = tensor_sizes(source)
    out_sizes = [k if dim == axis else size for dim, size in enumerate(sizes)]
    dynamic = [size for size in out_sizes if not isinstance(size, int)]
    static = [size if isinstance(size, int) else DYNAMIC for size in out_sizes]
    sliced = mlir_ir.RankedTensorType.get(static, mlir_ir.IntegerType.get_signless(64))
    indices = tensor.ExtractSliceOp(sliced, order, [], dynamic, [], [0] * rank, static, [1] * rank).result
    every = list(range(rank))
    values = generic(
        [(indices, every)],
        [(empty(out_sizes, element), every)],
        rank,
        (),
        lambda arguments: [element_at([linalg.IndexOp(dim).result for dim in range(rank)], arguments[0])],
    )[0]
    return [
        value if value.type == type_ else tensor.CastOp(type_, value).result
        for value, type_ in zip((values, indices), ctx.result_types, strict=True)
    ]


def _runtime_k(ctx: LoweringRuleContext, source: mlir_ir.Value, axis: int) -> mlir_ir.Value:
    """K as an index, for a result whose size along `axis` is dynamic: the `k` attribute
    before opset 10, else the K input (read at run time unless constant). A constant K is
    range-checked now against a static axis; otherwise a `cf.assert` checks 0 <= K <= the axis
    length at run time (and a run-time K is clamped to that range, see `data_size`)."""
    index = mlir_ir.IndexType.get()
    length = tensor_size(source, axis)
    known: int | None = None
    if opset(ctx) < 10:
        known = int(attribute(ctx, "k", -1))
    else:
        given = ctx.constant_operand(1)
        if given is not None:
            known = int(given.reshape(-1)[0])
    if known is not None:
        if known < 0:
            raise ctx.error(f"K = {known} is negative")
        if isinstance(length, int) and known > length:
            raise ctx.error(f"K = {known} exceeds the axis size {length}")
        k = index_constant(known)
        if isinstance(length, int):
            return k
    else:
        k_type = ctx.ranked(ctx.niro_operands[1], "K")
        if any(dim != 1 for dim in k_type.shape):
            raise ctx.error(f"expects a one-element K, got {format_type(k_type)}")
        (value,) = _first(ctx.operands[1])
        k = arith.IndexCastOp(index, value).result
    extent = index_value(length)
    in_range = arith.AndIOp(
        arith.CmpIOp(arith.CmpIPredicate.sge, k, index_constant(0)).result,
        arith.CmpIOp(arith.CmpIPredicate.sle, k, extent).result,
    ).result
    assert_true(
        in_range,
        f"{ctx.niro_location}: '{op_name(ctx.op)}' op: K is negative or exceeds the length of axis {axis}",
    )
    return k if known is not None else data_size(k, extent)


def _check_k(ctx: LoweringRuleContext, k: int) -> None:
    """K from the result shape must be K's value: checked now if constant (or the `k`
    attribute before opset 10), else at run time."""
    if opset(ctx) < 10:
        if int(attribute(ctx, "k", -1)) != k:
            raise ctx.error(f"k = {attribute(ctx, 'k')} disagrees with the result shape (K = {k})")
        return
    given = ctx.constant_operand(1)
    if given is not None:
        if int(given.reshape(-1)[0]) != k:
            raise ctx.error(
                f"K = {int(given.reshape(-1)[0])} disagrees with the result shape (K = {k})"
            )
        return
    k_type = ctx.ranked(ctx.niro_operands[1], "K")
    if any(dim != 1 for dim in k_type.shape):
        raise ctx.error(f"expects a one-element K, got {format_type(k_type)}")
    (value,) = _first(ctx.operands[1])
    equal = arith.CmpIOp(arith.CmpIPredicate.eq, value, constant(value.type, k)).result
    assert_true(equal, f"{ctx.niro_location}: K differs from the static result shape (K = {k})")
