"""MLIR lowering of Unique (opset 11+): the distinct elements, or distinct slices along `axis`,
of a tensor, with data-dependent output sizes.

Without `axis` the input is flattened and its elements are compared; with `axis` the slices
X[..., i, ...] are compared as wholes, lexicographically in row-major order (as NumPy's
`unique(axis=...)` orders them). Outputs, as ONNX defines them: Y the distinct elements
(slices), ascending when `sorted` = 1 else in order of first occurrence; `indices` the
position of each one's first occurrence; `inverse_indices` for every input element (slice)
the position of its value in Y; `counts` how often each occurs. NaN equals NaN and sorts
after every number (NumPy's `unique` default); -0.0 equals 0.0 (the first occurrence is kept).

How, for n elements (slices) along the compared axis, with only upstream dialects (no sort):
every one finds the first position holding an equal value and counts the equal ones
(`linalg.generic`s over n x n pairs); a position is the first of its value exactly when it is
its own first position. Its rank among the first positions (those holding smaller values, or
that come earlier, for unsorted output) is its place in Y; inverse_indices[i] is the rank of
i's first position. The number U of distinct values (a reduction read on the host) sizes Y,
indices and counts; each output position r then finds the first position of rank r (another
reduction). Quadratic in n, exact, like TopK in `selection.py`. Slices are first compared
pairwise into an n x n table (the position where two slices first differ, then which is
smaller there), which the element-wise path does not need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from niro.ir import ScalarType, format_type

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    MapSpec,
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
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, normalize_axis, output_positions
from .gather_scatter import _flatten

__all__: list[str] = []

_I64 = ScalarType.I64

Relation = Callable[[list[mlir_ir.Value]], tuple[mlir_ir.Value, mlir_ir.Value]]
"""Decodes a pair's block arguments into (a equals b, a sorts before b)."""


# -- comparing elements and slices ------------------------------------------------------------


def _compare_elements(scalar: ScalarType, a: mlir_ir.Value, b: mlir_ir.Value) -> tuple[mlir_ir.Value, mlir_ir.Value]:
    """(a == b, a < b) for one element type: NaN == NaN and NaN after every number."""
    if scalar.is_float:
        if scalar in (ScalarType.F16, ScalarType.BF16):
            f32 = mlir_ir.F32Type.get()
            a, b = arith.ExtFOp(f32, a).result, arith.ExtFOp(f32, b).result
        a_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, a, a).result
        b_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, b, b).result
        equal = arith.OrIOp(
            arith.CmpFOp(arith.CmpFPredicate.OEQ, a, b).result,
            arith.AndIOp(a_nan, b_nan).result,
        ).result
        a_number = arith.XOrIOp(a_nan, constant(a_nan.type, 1)).result
        less = arith.OrIOp(
            arith.CmpFOp(arith.CmpFPredicate.OLT, a, b).result,
            arith.AndIOp(a_number, b_nan).result,
        ).result
        return equal, less
    unsigned = scalar.is_unsigned_integer or scalar.is_bool
    predicate = arith.CmpIPredicate.ult if unsigned else arith.CmpIPredicate.slt
    equal = arith.CmpIOp(arith.CmpIPredicate.eq, a, b).result
    return equal, arith.CmpIOp(predicate, a, b).result


class _Pairs:
    """How a generic reads the relation of positions a and b (loop dims `a`, `b`) along the
    compared axis: from the two elements themselves, or from the n x n slice table
    (0 equal, 1 a before b, 2 a after b)."""

    def __init__(self, scalar: ScalarType, data: mlir_ir.Value | None, table: mlir_ir.Value | None):
        self.scalar, self.data, self.table = scalar, data, table

    def inputs(self, a: int, b: int) -> list[tuple[mlir_ir.Value, MapSpec]]:
        if self.table is not None:
            return [(self.table, [a, b])]
        return [(self.data, [a]), (self.data, [b])]

    @property
    def width(self) -> int:
        return 1 if self.table is not None else 2

    def decode(self, arguments: Sequence[mlir_ir.Value]) -> tuple[mlir_ir.Value, mlir_ir.Value]:
        if self.table is None:
            return _compare_elements(self.scalar, arguments[0], arguments[1])
        code = arguments[0]
        equal = arith.CmpIOp(arith.CmpIPredicate.eq, code, constant(code.type, 0)).result
        less = arith.CmpIOp(arith.CmpIPredicate.eq, code, constant(code.type, 1)).result
        return equal, less


def _slice_table(
    data: mlir_ir.Value, scalar: ScalarType, axis: int, sizes: Sequence[int | mlir_ir.Value]
) -> mlir_ir.Value:
    """The n x n table comparing slices i and j along `axis` (i8: 0 equal, 1 i < j, 2 i > j),
    lexicographic in row-major order over the other dims."""
    rank = len(sizes)
    others = [dim for dim in range(rank) if dim != axis]
    n = sizes[axis]
    # Loops: i, j, then the other dims in order (reductions).
    loops = 2 + len(others)
    read_i = [0 if dim == axis else 2 + others.index(dim) for dim in range(rank)]
    read_j = [1 if dim == axis else 2 + others.index(dim) for dim in range(rank)]
    i64 = mlir_ir.IntegerType.get_signless(64)
    slice_size: int | mlir_ir.Value = 1
    for dim in others:
        slice_size = _multiply(slice_size, sizes[dim])
    slice_size_value = as_i64(slice_size)

    def linear_position() -> mlir_ir.Value:
        """The row-major position within a slice of the current other-dim indices (i64)."""
        position = constant(i64, 0)
        for loop, dim in enumerate(others):
            extent = as_i64(sizes[dim])
            index = as_i64(linalg.IndexOp(2 + loop).result)
            position = arith.AddIOp(arith.MulIOp(position, extent).result, index).result
        return position

    reductions = tuple(range(2, loops))
    first_init = fill(empty([n, n], i64), slice_size_value)

    def first_difference(arguments):
        a, b, first = arguments
        equal, _ = _compare_elements(scalar, a, b)
        here = arith.MinSIOp(first, linear_position()).result
        return [arith.SelectOp(equal, first, here).result]

    first = generic(
        [(data, read_i), (data, read_j)],
        [(first_init, [0, 1])],
        loops,
        reductions,
        first_difference,
    )[0]
    i8 = mlir_ir.IntegerType.get_signless(8)
    table_init = fill(empty([n, n], i8), constant(i8, 0))

    def order_there(arguments):
        a, b, first_position, code = arguments
        _, less = _compare_elements(scalar, a, b)
        there = arith.CmpIOp(arith.CmpIPredicate.eq, linear_position(), first_position).result
        verdict = arith.SelectOp(less, constant(i8, 1), constant(i8, 2)).result
        return [arith.SelectOp(there, verdict, code).result]

    return generic(
        [(data, read_i), (data, read_j), (first, [0, 1])],
        [(table_init, [0, 1])],
        loops,
        reductions,
        order_there,
    )[0]


def _multiply(a: int | mlir_ir.Value, b: int | mlir_ir.Value) -> int | mlir_ir.Value:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return arith.MulIOp(index_value(a), index_value(b)).result



def _position(dim: int) -> mlir_ir.Value:
    return as_i64(linalg.IndexOp(dim).result)


# -- the rule ---------------------------------------------------------------------------------


@register_lowering("onnx.Unique", since=11)
def _lower_unique(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    source_type = ctx.ranked(ctx.niro_operands[0], "input")
    scalar = source_type.element_type
    sorted_ = attribute(ctx, "sorted", 1)
    if sorted_ not in (0, 1):
        raise ctx.error(f"expects sorted 0 or 1, got {sorted_!r}")
    axis = attribute(ctx, "axis")
    data = ctx.operands[0]
    if axis is None:
        data, data_type = _flatten(ctx, data, source_type)
        axis = 0
    else:
        data_type = source_type
        if len(source_type.shape) == 0:
            raise ctx.error("expects an input of rank >= 1 when 'axis' is given")
        axis = normalize_axis(ctx, int(axis), len(source_type.shape))
    sizes = tensor_sizes(data)
    n = sizes[axis]
    table = _slice_table(data, scalar, axis, sizes) if len(data_type.shape) > 1 else None
    pairs = _Pairs(scalar, data if table is None else None, table)
    i64 = mlir_ir.IntegerType.get_signless(64)
    zero64 = constant(i64, 0)

    # first[i]: the first position whose value equals position i's; count[i]: how many do.
    def first_and_count(arguments):
        equal, _ = pairs.decode(arguments[: pairs.width])
        first, count = arguments[pairs.width :]
        earliest = arith.MinSIOp(first, _position(1)).result
        return [
            arith.SelectOp(equal, earliest, first).result,
            arith.AddIOp(count, arith.ExtUIOp(i64, equal).result).result,
        ]

    first, count = generic(
        pairs.inputs(0, 1),
        [(fill(empty([n], i64), as_i64(n)), [0]), (fill(empty([n], i64), zero64), [0])],
        2,
        (1,),
        first_and_count,
    )

    # rank[i]: the place of position i's value in Y (the same for every position of a value).
    def rank_of(arguments):
        first_j, first_i = arguments[:2]
        relation = arguments[2 : 2 + pairs.width]
        rank = arguments[-1]
        j = _position(1)
        leads = arith.CmpIOp(arith.CmpIPredicate.eq, first_j, j).result
        if sorted_:
            _, before = pairs.decode(relation)
        else:
            before = arith.CmpIOp(arith.CmpIPredicate.slt, j, first_i).result
        counted = arith.AndIOp(leads, before).result
        return [arith.AddIOp(rank, arith.ExtUIOp(i64, counted).result).result]

    rank = generic(
        [(first, [1]), (first, [0]), *pairs.inputs(1, 0)],
        [(fill(empty([n], i64), zero64), [0])],
        2,
        (1,),
        rank_of,
    )[0]

    # U, the number of distinct values: read on the host to size Y, indices and counts.
    def count_leaders(arguments):
        leads = arith.CmpIOp(arith.CmpIPredicate.eq, arguments[0], _position(0)).result
        return [arith.AddIOp(arguments[1], arith.ExtUIOp(i64, leads).result).result]

    distinct_tensor = generic(
        [(first, [0])], [(fill(empty([], i64), zero64), [])], 1, (0,), count_leaders
    )[0]
    distinct = as_index(tensor.ExtractOp(distinct_tensor, []).result)

    # indices[r], counts[r]: the first position of rank r, and its value's count.
    def pick(arguments):
        first_i, rank_i, count_i, chosen, counted = arguments
        leads = arith.CmpIOp(arith.CmpIPredicate.eq, first_i, _position(1)).result
        placed = arith.CmpIOp(arith.CmpIPredicate.eq, rank_i, _position(0)).result
        hit = arith.AndIOp(leads, placed).result
        return [
            arith.SelectOp(hit, _position(1), chosen).result,
            arith.SelectOp(hit, count_i, counted).result,
        ]

    indices, counts = generic(
        [(first, [1]), (rank, [1]), (count, [1])],
        [
            (fill(empty([distinct], i64), zero64), [0]),
            (fill(empty([distinct], i64), zero64), [0]),
        ],
        2,
        (1,),
        pick,
    )

    values = _gather_y(data, scalar, axis, sizes, indices, distinct)
    outputs = (values, indices, rank, counts)
    return [
        _fit(ctx, result_index, outputs[position])
        for result_index, position in enumerate(output_positions(ctx))
    ]


def _gather_y(data, scalar, axis, sizes, indices, distinct) -> mlir_ir.Value:
    """Y: the slices (elements) of `data` at `indices` along `axis`."""
    rank = len(sizes)
    out_sizes = [distinct if dim == axis else size for dim, size in enumerate(sizes)]
    init = empty(out_sizes, lower_scalar_type(scalar))

    def body(arguments):
        where = [linalg.IndexOp(dim).result for dim in range(rank)]
        where[axis] = as_index(arguments[0])
        return [tensor.ExtractOp(data, where).result]

    return generic([(indices, [axis])], [(init, list(range(rank)))], rank, (), body)[0]


def _fit(ctx: LoweringRuleContext, index: int, value: mlir_ir.Value) -> mlir_ir.Value:
    """`value` as result `index`'s type: a data-dependent dim the model declares static is
    checked at run time, then a `tensor.cast`; a static size that disagrees is refused."""
    declared = ctx.ranked(ctx.niro_results[index], f"result #{index}")
    computed = mlir_ir.RankedTensorType(value.type)
    if len(declared.shape) != computed.rank:
        raise ctx.error(
            f"result #{index} {format_type(ctx.niro_results[index].type)} does not have rank "
            f"{computed.rank}"
        )
    for dim, size in enumerate(declared.shape):
        if size is None:
            continue
        if computed.is_dynamic_dim(dim):
            actual = dim_size(value, dim)
            agree = arith.CmpIOp(arith.CmpIPredicate.eq, actual, index_constant(size)).result
            assert_true(
                agree,
                f"{ctx.niro_location}: Unique found a size other than the {size} that result "
                f"#{index} declares at dim {dim}",
            )
        elif computed.shape[dim] != size:
            raise ctx.error(
                f"result #{index} {format_type(ctx.niro_results[index].type)} differs from the "
                f"input's size {computed.shape[dim]} at dim {dim}"
            )
    if value.type == ctx.result_types[index]:
        return value
    return tensor.CastOp(ctx.result_types[index], value).result
