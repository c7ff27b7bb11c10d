"""Contractions: a sum of products over index labels (einsum's view), and the one lowering of a
matrix product (Niro's MatMul and `onnx.MatMul`).

`contract` builds one `linalg.generic` from labels: every operand dim and every result dim
carries a label, each label is one loop, labels absent from the result are reduction loops. A
static size-1 operand dim whose label is larger elsewhere reads index 0 (NumPy broadcasting of
batch dims); a dynamic dim must equal its label's size at run time (checked). `matmul` is
NumPy's matmul on top of it, or the named `linalg.matmul` / `linalg.batch_matmul` where those
fit (`matmul` says when).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from niro.ir import ScalarType, Value, format_type, op_name

from ..bindings import arith, mlir_ir, scf
from ..weight_layout import FEW_ROWS, MIN_ELEMENTS, TILE_COLUMNS, reads_in_tiles
from .checks import assert_true
from .constants import constant, index_constant
from .elements import convert
from .shapes import (
    DYNAMIC,
    cast_to,
    collapse_dims,
    dim_size,
    empty,
    expand_dim,
    expand_shape,
    extract_slice,
    index_value,
    pad,
    producer,
    ranked_result,
    tensor_size,
)
from .structured import MapSpec, fill, generic, named_op, pack, transpose, unpack

if TYPE_CHECKING:
    from ..context import LoweringRuleContext

__all__ = [
    "VERSION_ATTRIBUTE",
    "Label",
    "contract",
    "erase_unread_untiled",
    "matmul",
    "matmul_labels",
    "multiply_all",
    "named_matmul",
    "narrow_to_result",
    "rows_by_tiled_columns",
    "untiled",
    "untiled_filter",
]

Label = object  # a str letter, or ("...", i) for the i-th broadcast (ellipsis) dim


def contract(
    ctx: LoweringRuleContext,
    operands: Sequence[tuple[mlir_ir.Value, Value, Sequence[Label]]],
    output: Sequence[Label],
    accumulator: mlir_ir.Type,
    product: Callable[[list[mlir_ir.Value]], mlir_ir.Value],
    finish: Callable[..., mlir_ir.Value] | None,
    finish_operands: Sequence[tuple[mlir_ir.Value, MapSpec]] = (),
) -> mlir_ir.Value:
    """sum over the labels not in `output` of `product(elements)`, then `finish` it into the
    op's result type (None: the sum, in the accumulator type, is the result). Each operand
    is (MLIR value, Niro value, one label per dim).
    `finish(sum, *elements)` also gets one element of each of `finish_operands` (MLIR value,
    indexing map over the result's dims), e.g. a per-column scale."""
    order: list[Label] = list(output)
    for _, _, labels in operands:
        for label in labels:
            if label not in order:
                order.append(label)
    loop_of = {label: loop for loop, label in enumerate(order)}
    static: dict[Label, int] = {}
    dynamic_source: dict[Label, tuple[mlir_ir.Value, int]] = {}
    for value, niro_value, labels in operands:
        shape = ctx.ranked(niro_value, "operand").shape
        if len(shape) != len(labels):
            raise ctx.error(
                f"operand {format_type(niro_value.type)} has rank {len(shape)}, "
                f"the equation gives it {len(labels)} labels"
            )
        for axis, (label, dim) in enumerate(zip(labels, shape, strict=True)):
            if dim is None:
                dynamic_source.setdefault(label, (value, axis))
                continue
            known = static.get(label, 1)
            if known != 1 and dim != 1 and known != dim:
                raise ctx.error(f"sizes {known} and {dim} of one index disagree")
            static[label] = max(known, dim) if dim != 0 and known != 0 else 0
    inputs = []
    for value, niro_value, labels in operands:
        shape = ctx.ranked(niro_value, "operand").shape
        # A static 1 against a larger (or dynamic) size of its label broadcasts: index 0.
        index_map = [
            None
            if dim == 1 and (static.get(label, 1) != 1 or label in dynamic_source)
            else loop_of[label]
            for label, dim in zip(labels, shape, strict=True)
        ]
        inputs.append((value, index_map))
    result_type = ranked_result(ctx, 0)
    if result_type.rank != len(output):
        raise ctx.error(
            f"result {format_type(ctx.niro_results[0].type)} does not have rank {len(output)}"
        )
    sizes: list[int | mlir_ir.Value] = []
    for axis, label in enumerate(output):
        if not result_type.is_dynamic_dim(axis):
            sizes.append(result_type.shape[axis])
        elif label in static and static[label] != 1:
            sizes.append(static[label])
        elif label in dynamic_source:
            sizes.append(_label_size(operands, label))
        else:
            sizes.append(static.get(label, 1))
    _assert_label_sizes(ctx, operands, static, dynamic_source)
    loops = len(order)
    identity = list(range(len(output)))
    init = fill(empty(sizes, accumulator), constant(accumulator, 0))
    floating = not isinstance(accumulator, mlir_ir.IntegerType)
    add = arith.AddFOp if floating else arith.AddIOp
    summed = generic(
        inputs,
        [(init, identity)],
        loops,
        tuple(range(len(output), loops)),
        lambda arguments: [add(product(arguments[:-1]), arguments[-1]).result],
    )[0]
    # A dim the result's type leaves dynamic may be static here (a static operand's size of
    # its label): the value is cast to the result's type.
    if finish is None:
        return cast_to(summed, ctx.result_types[0])  # the sum is the result: no copy
    return cast_to(
        generic(
            [(summed, identity), *finish_operands],
            [(empty(sizes, result_type.element_type), identity)],
            len(output),
            (),
            lambda arguments: [finish(*arguments[:-1])],
        )[0],
        ctx.result_types[0],
    )


def _label_size(operands, label: Label) -> mlir_ir.Value:
    """The run-time size of a label that only dynamic dims carry: their largest (a 1 that
    another dim exceeds then fails `_assert_label_sizes`, instead of shrinking the result)."""
    size = None
    for value, _, labels in operands:
        for axis, each in enumerate(labels):
            if each == label:
                dim = tensor_size(value, axis)
                dim = index_value(dim)
                size = dim if size is None else arith.MaxSIOp(size, dim).result
    return size


def _assert_label_sizes(ctx: LoweringRuleContext, operands, static, dynamic_source) -> None:
    """A run-time check that every dynamic dim equals the size of its label (a static size,
    else the largest dynamic one): the loops run over one size per label, so a dim of another
    length (a run-time 1 meant to broadcast, a mismatched K) would be read out of bounds or
    shrink the result. Static shapes have nothing to check, nor has a label whose dims are
    all dynamic with one name (`TensorType.dim_names`: known equal)."""
    for label in dynamic_source:
        known = static.get(label, 1)
        names = {
            ctx.ranked(niro_value, "operand").dim_name(axis)
            for _, niro_value, labels in operands
            for axis, each in enumerate(labels)
            if each == label
        }
        if known == 1 and len(names) == 1 and None not in names:
            continue
        expected = index_constant(known) if known != 1 else _label_size(operands, label)
        for index, (value, _, labels) in enumerate(operands):
            for axis, (each, dim) in enumerate(
                zip(labels, ctx.ranked(operands[index][1], "operand").shape, strict=True)
            ):
                size = tensor_size(value, axis)
                if each != label or dim is not None or isinstance(size, int):
                    continue
                equal = arith.CmpIOp(arith.CmpIPredicate.eq, size, expected).result
                assert_true(
                    equal,
                    f"{ctx.niro_location}: '{op_name(ctx.op)}' op: dynamic dim {axis} of operand #{index} "
                    "differs from the other operands' size of that dim",
                )


def multiply_all(
    scalar: ScalarType, accumulator: mlir_ir.Type
) -> Callable[[list[mlir_ir.Value]], mlir_ir.Value]:
    def product(elements: list[mlir_ir.Value]) -> mlir_ir.Value:
        result = None
        for element in elements:
            if scalar.is_float:
                element = convert(element, accumulator)
            if result is None:
                result = element
            else:
                result = (arith.MulFOp if scalar.is_float else arith.MulIOp)(result, element).result
        assert result is not None
        return result

    return product


def narrow_to_result(
    ctx: LoweringRuleContext, accumulator: mlir_ir.Type
) -> Callable[[mlir_ir.Value], mlir_ir.Value] | None:
    """The f32 sum of f16/bf16 operands narrowed to the result's type; None (no copy) when the
    sum already has it."""
    element = ranked_result(ctx, 0).element_type
    return None if element == accumulator else (lambda value: convert(value, element))


def matmul_labels(lhs_rank: int, rhs_rank: int) -> tuple[list[Label], list[Label], list[Label]]:
    """NumPy matmul as labels: batch dims right-aligned, then (m, k) x (k, n)."""
    if lhs_rank < 1 or rhs_rank < 1:
        raise ValueError("MatMul operands must have rank >= 1")
    lhs_batch = max(lhs_rank - 2, 0)
    rhs_batch = max(rhs_rank - 2, 0)
    batch = max(lhs_batch, rhs_batch)
    lhs: list[Label] = [("batch", batch - lhs_batch + axis) for axis in range(lhs_batch)]
    rhs: list[Label] = [("batch", batch - rhs_batch + axis) for axis in range(rhs_batch)]
    out: list[Label] = [("batch", axis) for axis in range(batch)]
    lhs += ["m", "k"] if lhs_rank >= 2 else ["k"]
    rhs += ["k", "n"] if rhs_rank >= 2 else ["k"]
    if lhs_rank >= 2:
        out.append("m")
    if rhs_rank >= 2:
        out.append("n")
    return lhs, rhs, out


def matmul(ctx: LoweringRuleContext, accumulator: mlir_ir.Type) -> mlir_ir.Value:
    """The one lowering of a matrix product (Niro's MatMul and `onnx.MatMul`): NumPy's matmul of
    the op's two operands (numbers of one type, ranks >= 1), the products summed in
    `accumulator`. Niro's rank-2 MatMul sums in its element type; `onnx.MatMul` sums f16/bf16
    in f32 (`accumulator_type`).

    Summed in the result's element type, two matrices are the named `linalg.matmul` and a batch
    that fits `_batch_matmul_fits` is `linalg.batch_matmul`; everything else (vectors,
    broadcast or dynamic batches, a wider accumulator) is `contract`'s generic."""
    lhs = ctx.ranked(ctx.niro_operands[0], "operand #0")
    rhs = ctx.ranked(ctx.niro_operands[1], "operand #1")
    result = ctx.ranked(ctx.niro_results[0], "result")
    if accumulator == ctx.mlir_type(result.element_type):
        named = named_matmul(ctx, accumulator)
        if named is not None:
            return named
    lhs_labels, rhs_labels, out = matmul_labels(len(lhs.shape), len(rhs.shape))
    operands = [
        (ctx.operands[0], ctx.niro_operands[0], lhs_labels),
        (ctx.operands[1], ctx.niro_operands[1], rhs_labels),
    ]
    return contract(
        ctx,
        operands,
        out,
        accumulator,
        multiply_all(lhs.element_type, accumulator),
        narrow_to_result(ctx, accumulator),
    )


def named_matmul(ctx: LoweringRuleContext, accumulator: mlir_ir.Type) -> mlir_ir.Value | None:
    """The op's two operands' product as a named linalg op summed from 0 in `accumulator` (the
    result's element type), when their shapes allow one (`matmul` says which); None otherwise.
    The named ops sign-extend narrower integer operands into the accumulator, so int8 x int8
    summed in i32 (an integer product without zero points) takes the same path."""
    lhs = ctx.ranked(ctx.niro_operands[0], "operand #0").shape
    rhs = ctx.ranked(ctx.niro_operands[1], "operand #1").shape
    if len(lhs) == 2 and len(rhs) == 2:
        product = _rows_product(ctx.operands[0], ctx.operands[1], lhs[0], rhs, accumulator)
        return cast_to(product, ctx.result_types[0])  # a result typed more statically than A
    if _batch_matmul_fits(lhs, rhs):
        return _batch_matmul(ctx, lhs, accumulator)
    if _rows_times_matrix_fits(lhs, rhs):
        return _rows_times_matrix(ctx, lhs, accumulator)
    return None


def _batch_matmul_fits(lhs: Sequence[int | None], rhs: Sequence[int | None]) -> bool:
    """Operands of one rank >= 3 whose batch dims are static and equal (no broadcasting) and
    whose reduced dim is static on both sides (a dynamic one needs `contract`'s run-time
    check)."""
    if len(lhs) != len(rhs) or len(lhs) < 3 or lhs[-1] is None or lhs[-1] != rhs[-2]:
        return False
    batch = lhs[:-2]
    return all(dim is not None for dim in batch) and list(batch) == list(rhs[:-2])


def _rows_times_matrix_fits(lhs: Sequence[int | None], rhs: Sequence[int | None]) -> bool:
    """An lhs of rank >= 3 times a static matrix (a layer's weights applied to every position
    of a batch of sequences); the lhs's leading dims may be dynamic."""
    return len(lhs) >= 3 and len(rhs) == 2 and None not in rhs and lhs[-1] == rhs[0]


def _rows_times_matrix(
    ctx: LoweringRuleContext, shape: Sequence[int | None], element: mlir_ir.Type
) -> mlir_ir.Value:
    """A stack of rows times one matrix as the named `linalg.matmul` of the rows collapsed
    into one matrix (expanded back after). Why: IREE folds a transpose that reads a generic
    contraction's result into that contraction, which then writes its result transposed: a
    BERT-style encoder's key projection (128 positions x 256 -> 256, its result transposed for
    Q x K^T) ran 237 us a call against 84 us as a plain product followed by the transpose's own
    copy; a named op's result stays in its own layout."""
    rows = [tensor_size(ctx.operands[0], axis) for axis in range(len(shape) - 1)]
    lhs = collapse_dims(ctx.operands[0], 0, len(rows))
    count = None if None in shape[:-1] else math.prod(dim or 0 for dim in shape[:-1])
    matrix = ctx.ranked(ctx.niro_operands[1], "operand #1").shape
    return expand_dim(_rows_product(lhs, ctx.operands[1], count, matrix, element), 0, rows)


def _rows_product(
    lhs: mlir_ir.Value,
    rhs: mlir_ir.Value,
    rows: int | None,
    matrix: Sequence[int | None],
    element: mlir_ir.Type,
) -> mlir_ir.Value:
    """The product of `rows` rows (None: a run-time number) by the matrix `rhs` of shape
    `matrix`. By a static matrix of at least MIN_ELEMENTS (`_versioned_fits`): in tiles when it
    is an f32 weight of whole tiles (`_f32_tiles_fit`, `_global_read`), one row as a tile of one
    row and a run-time number of them in versions (`_tiled_versions`); otherwise a run-time
    number of rows in versions by their count (`_few_rows_versioned`). The named product in
    any other case."""
    if _versioned_fits(matrix):
        depth = mlir_ir.RankedTensorType(lhs.type).shape[-1]
        tiled = _f32_tiles_fit(rhs, element) and _global_read(rhs) and depth != DYNAMIC
        if tiled and rows in (None, 1):
            return _in_tiles(lhs, _rhs_tiles(rhs, _F32_TILE), element, _F32_TILE, rows)
        if rows is None:
            return _few_rows_versioned(lhs, rhs, element)
    return _product(lhs, rhs, element)


def _product(lhs: mlir_ir.Value, rhs: mlir_ir.Value, element: mlir_ir.Type) -> mlir_ir.Value:
    """The named `linalg.matmul` of two matrices, or `linalg.batch_matmul` of two rank-3
    tensors, summed from 0 in `element`."""
    rank = mlir_ir.RankedTensorType(lhs.type).rank
    sizes = [tensor_size(lhs, axis) for axis in range(rank - 1)] + [tensor_size(rhs, rank - 1)]
    name = "linalg.matmul" if rank == 2 else "linalg.batch_matmul"
    return named_op(name, [lhs, rhs], fill(empty(sizes, element), constant(element, 0)))


VERSION_ATTRIBUTE = "niro.rows_version"
"""The unit attribute `_versioned` puts on the `scf.if` of a product in two versions by rows:
its then-region is the version for few rows, its condition says the rows are few, its first
result is the product and the others the product's run-time sizes, yielded alike by both
versions (`early_checks` reads a size of the product there; `row_versions.py` chooses the
versions of a function's products once)."""


def _versioned(
    small: mlir_ir.Value,
    result_type: mlir_ir.Type,
    sizes: list[mlir_ir.Value],
    static: Callable[[], mlir_ir.Value],
    dynamic: Callable[[], mlir_ir.Value],
) -> mlir_ir.Value:
    """A product in two versions chosen at run time: `static()` where the rows are `small` (an
    i1), `dynamic()` otherwise, each yielded as `result_type`, whose dynamic dims are `sizes`
    (computed before the choice)."""
    index = mlir_ir.IndexType.get()
    branch = scf.IfOp(small, [result_type] + [index] * len(sizes), has_else=True)
    branch.operation.attributes[VERSION_ATTRIBUTE] = mlir_ir.UnitAttr.get()
    for block, build in ((branch.then_block, static), (branch.else_block, dynamic)):
        with mlir_ir.InsertionPoint(block):
            scf.YieldOp([cast_to(build(), result_type), *sizes])
    return branch.results[0]


def _versioned_fits(rhs: Sequence[int | None]) -> bool:
    """A static matrix of at least MIN_ELEMENTS: the right operand of a product that
    `_rows_product` versions or makes in tiles (a smaller one gains too little for the copy)."""
    return len(rhs) == 2 and None not in rhs and math.prod(dim or 0 for dim in rhs) >= MIN_ELEMENTS


def _few_rows_versioned(
    lhs: mlir_ir.Value, rhs: mlir_ir.Value, element: mlir_ir.Type
) -> mlir_ir.Value:
    """The product of a run-time number of rows by a static matrix (`_versioned_fits`), in two
    versions chosen at run time: at most FEW_ROWS rows (a decode step's tokens) are padded with
    zeros to FEW_ROWS and multiplied as a static product, of which the rows asked for are kept;
    more rows take the dynamic product.

    Why: IREE 3.13 compiles a product of run-time rows much slower than a static one when the
    rows are few: one row by 2048x5632 (weights stored transposed, `weight_layout.py`) ran
    9.2-11.9 ms dynamic (the weights as stored in the model) against 1.8-2.2 ms so versioned;
    256x4096: 232 -> 112-140 us. At 128 rows the two versions ran alike (34-52 against 35-36
    ms). The matrix need not be a weight: an int4 MatMulNBits' f32 product (below
    accuracy_level 4) reads its weights dequantized at run time."""
    rows = dim_size(lhs, 0)
    few = arith.CmpIOp(arith.CmpIPredicate.ule, rows, index_constant(FEW_ROWS)).result
    columns = mlir_ir.RankedTensorType(rhs.type).shape[1]

    def padded() -> mlir_ir.Value:
        padding = arith.SubIOp(index_constant(FEW_ROWS), rows).result
        source = mlir_ir.RankedTensorType(lhs.type)
        rows_padded = cast_to(
            pad(lhs, [0, 0], [padding, 0], constant(source.element_type, 0)),
            mlir_ir.RankedTensorType.get([FEW_ROWS, source.shape[1]], source.element_type),
        )
        return extract_slice(_product(rows_padded, rhs, element), [0, 0], [rows, columns])

    result_type = mlir_ir.RankedTensorType.get([DYNAMIC, columns], element)
    return _versioned(few, result_type, [rows], padded, lambda: _product(lhs, rhs, element))


def _batch_matmul(
    ctx: LoweringRuleContext, shape: Sequence[int | None], element: mlir_ir.Type
) -> mlir_ir.Value:
    """A batched MatMul as the named `linalg.batch_matmul` (its batch dims collapsed into one,
    expanded back after), or in tiles (`linalg.batch_mmt4d`) where `_int8_tiles_fit`. Why: IREE
    folds a transpose feeding a generic contraction into that contraction's operand reads
    (strided loads in the matmul's inner loop: attention's Q x K^T and weights x V ran ~1.5x
    slower so); a named op's operands stay contiguous, the transposes run as their own cheap
    copies."""
    batch = [dim for dim in shape[:-2] if dim is not None]
    operands = [ctx.operands[0], ctx.operands[1]]
    if len(batch) > 1:
        operands = [collapse_dims(operand, 0, len(batch)) for operand in operands]
    lhs, rhs = operands
    narrow = _widened_int8(rhs) if element == mlir_ir.F32Type.get() else None
    if narrow is not None and _tile_divides(mlir_ir.RankedTensorType(narrow.type), _F32_TILE):
        # f32 rows by int8 matrices widened to f32 (MatMulNBits' f32 block products): the
        # product in tiles reads the int8 ones and widens them in its loop
        product = _in_tiles(lhs, _rhs_tiles(narrow, _F32_TILE), element, _F32_TILE, shape[-2])
    elif _int8_tiles_fit(lhs, rhs, element):
        product = _in_tiles(lhs, _rhs_tiles(rhs, _INT8_TILE), element, _INT8_TILE, shape[-2])
    elif shape[-2] is None and _int8_matrices(lhs, rhs):
        columns = mlir_ir.RankedTensorType(rhs.type).shape[2]

        def by_matrices(rows: mlir_ir.Value) -> mlir_ir.Value:
            return _product(rows, rhs, element)

        product = _one_row_versioned(lhs, columns, element, by_matrices, by_matrices)
    else:
        product = _product(lhs, rhs, element)
    return expand_dim(product, 0, batch) if len(batch) > 1 else product


@dataclass(frozen=True)
class _Tile:
    """The inner tile of a product in tiles (`linalg.mmt4d` / `linalg.batch_mmt4d`): `rows`
    of the left operand (M0; None: 1, the rows then a reshape, `_tiled_product`), `columns`
    (N0) and `depth` (K0, the reduced dim) of the right one."""

    rows: int | None
    columns: int
    depth: int

    @property
    def one_row(self) -> _Tile:
        """This tile for a product of one row."""
        return _Tile(None, self.columns, self.depth)


_INT8_TILE = _Tile(None, 16, 2)
"""int8 x int8 -> i32: the tile IREE 3.13's data tiling (`--iree-opt-data-tiling`) chooses on
x86 with AVX-512 for a few rows (M0 1, N0 16, K0 2); at 32 rows M0 1 still ran 2x faster than
the batch_matmul (below). Any target compiles it; another may prefer another tile."""

_F32_TILE = _Tile(8, TILE_COLUMNS, 1)
"""f32: N0 16, K0 1 as IREE's data tiling for AVX-512; M0 8 for a run-time number of rows (16,
its choice for many rows, ran alike at 128 rows and slower below 8: 0.42 against 0.32 ms at 7
rows by 768 x 3072)."""


def _widened_int8(value: mlir_ir.Value) -> mlir_ir.Value | None:
    """The static int8 tensor that `value` widens element by element to f32 (the
    `linalg.generic` of one `arith.sitofp` an int8 -> f32 Cast lowers to), None for any other
    value.

    Why: MatMulNBits' f32 block products (`contrib_functions._f32_block_product`) multiply f32
    rows by its int8 weights widened; iree-compile keeps the int8 weights (const-eval) but
    computes their f32 widening at every call (4x the bytes), and a product that reads the
    int8 ones widens them in its loop: [32, 1, 32] by [32, 32, 2816] 0.83-0.96 ms so, 0.15-0.16
    ms reading the int8 tiles (iree-benchmark-module)."""
    owner = producer(value)
    if owner is None or owner.name != "linalg.generic":
        return None
    inputs = list(owner.operands)[:-1]
    block = owner.regions[0].blocks[0]
    body = [op.name for op in block.operations]
    if len(inputs) != 1 or body != ["arith.sitofp", "linalg.yield"]:
        return None
    source = mlir_ir.RankedTensorType(inputs[0].type)
    maps = [mlir_ir.AffineMapAttr(attr).value for attr in owner.attributes["indexing_maps"]]
    identity = mlir_ir.AffineMap.get_identity(source.rank)
    if source.element_type != mlir_ir.IntegerType.get_signless(8) or any(
        m != identity for m in maps
    ):
        return None
    return inputs[0] if source.has_static_shape else None


def _int8_matrices(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> bool:
    """An int8 batch of rows by static int8 matrices (MatMulNBits' int8 block products,
    `contrib_functions._int8_block_product`)."""
    lhs_type, rhs_type = mlir_ir.RankedTensorType(lhs.type), mlir_ir.RankedTensorType(rhs.type)
    int8 = mlir_ir.IntegerType.get_signless(8)
    return (
        lhs_type.element_type == int8
        and rhs_type.element_type == int8
        and rhs_type.has_static_shape
    )


def _int8_tiles_fit(lhs: mlir_ir.Value, rhs: mlir_ir.Value, element: mlir_ir.Type) -> bool:
    """int8 x int8 summed in i32, a static right operand whose reduced dim and columns the
    tile divides (MatMulNBits' int8 block products, `contrib_functions._int8_block_product`:
    blocks of 16 or more of K, N a multiple of 16 in every model builder's layers)."""
    return (
        _int8_matrices(lhs, rhs)
        and element == mlir_ir.IntegerType.get_signless(32)
        and _tile_divides(mlir_ir.RankedTensorType(rhs.type), _INT8_TILE)
    )


def _f32_tiles_fit(rhs: mlir_ir.Value, element: mlir_ir.Type) -> bool:
    """An f32 matrix (static, of at least MIN_ELEMENTS: `_rows_product` asks) of whole tiles
    (`weight_layout.reads_in_tiles`, which then stores a weight in either layout)."""
    rhs_type = mlir_ir.RankedTensorType(rhs.type)
    f32 = mlir_ir.F32Type.get()
    return rhs_type.element_type == f32 and element == f32 and reads_in_tiles(rhs_type.shape[1])


def _global_read(value: mlir_ir.Value) -> bool:
    """`value` is a Global read as it is or back from its stored layout (transposed, or
    `untiled`: `rules._lower_get_global`), whose tiles are written or made by iree-compile at
    compile time. A matrix computed from weights need not be: IREE computes an int4
    MatMulNBits' dequantized f32 weights (8x the bytes they are made of) at run time, and would
    their tiles too (cut in tiles, they made the onnxruntime-genai int4 Llama at
    accuracy_level 1 run a decode step in 93 ms instead of 41)."""
    owner = producer(value)
    while owner is not None and owner.name in ("linalg.transpose", "tensor.collapse_shape"):
        owner = producer(owner.operands[0])
    return owner is not None and owner.name == "ml_program.global_load_const"


def _tile_divides(rhs: mlir_ir.RankedTensorType, tile: _Tile) -> bool:
    """A static [..., K, N] matrix type of whole tiles along K and N."""
    if not rhs.has_static_shape:
        return False
    depth, columns = rhs.shape[-2:]
    return depth % tile.depth == 0 and columns % tile.columns == 0


def untiled(tiles: mlir_ir.Value) -> mlir_ir.Value:
    """A matrix written in f32 product tiles, [N / N0, K, N0, 1] (`weight_layout.Layout.TILES`),
    as the [K, N] matrix it holds: a `linalg.transpose` and two `tensor.collapse_shape`s,
    which the products of the matrix undo (`_rhs_tiles` reads `tiles`); where nothing else
    reads the matrix they are erased (`erase_unread_untiled`)."""
    column_tiles, depth, columns, _ = mlir_ir.RankedTensorType(tiles.type).shape
    element = mlir_ir.RankedTensorType(tiles.type).element_type
    init = empty([depth, 1, column_tiles, columns], element)
    rows_by_columns = transpose(tiles, init, mlir_ir.DenseI64ArrayAttr.get(_UNTILE_ORDER))
    return collapse_dims(collapse_dims(rows_by_columns, 2, 2), 0, 2)


_UNTILE_ORDER = [1, 3, 0, 2]
"""The `linalg.transpose` of `untiled`: [N1, K, N0, 1] -> [K, 1, N1, N0]."""


def untiled_filter(tiles: mlir_ir.Value, shape: Sequence[int]) -> mlir_ir.Value:
    """A convolution filter written as the tiles of its rows, [M / M0, K, M0, 1]
    (`weight_layout.Layout.FILTER_TILES`), as the filter of `shape` (M, C, K...) it holds: a
    `linalg.transpose` to [M / M0, M0, K, 1] and reshapes, which its products in tiles undo
    (`_tiled_product` reads `tiles`); where nothing else reads the filter they are erased
    (`erase_unread_untiled`)."""
    row_tiles, depth, rows, _ = mlir_ir.RankedTensorType(tiles.type).shape
    element = mlir_ir.RankedTensorType(tiles.type).element_type
    init = empty([row_tiles, rows, depth, 1], element)
    by_rows = transpose(tiles, init, mlir_ir.DenseI64ArrayAttr.get(_ROWS_UNTILE_ORDER))
    matrix = collapse_dims(collapse_dims(by_rows, 2, 2), 0, 2)
    return expand_dim(matrix, 1, list(shape[1:]))


_ROWS_UNTILE_ORDER = [0, 2, 1, 3]
"""The `linalg.transpose` of `untiled_filter`: [M1, K, M0, 1] -> [M1, M0, K, 1]."""


def erase_unread_untiled(module: mlir_ir.Module) -> bool:
    """Erases the `untiled` and `untiled_filter` forms that nothing reads, with the reshapes
    of them nothing reads (a weight or filter written in tiles is read by its products in tiles
    only: `weight_layout.Layout.TILES`, `FILTER_TILES`), so that the MLIR shows the products
    reading the tiles and no dead copies; whether any was erased."""
    transposes: list[mlir_ir.Operation] = []

    def visit(op) -> mlir_ir.WalkResult:
        if op.name == "linalg.transpose":
            order = tuple(mlir_ir.DenseI64ArrayAttr(op.attributes["permutation"]))
            if order in _UNTILED_ORDERS and _loads_global(op.operands[0]):
                transposes.append(op)
        return mlir_ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    erased = False
    for transpose_op in transposes:
        unread = _unread_reshapes(transpose_op)
        if unread is None:
            continue
        init = transpose_op.operands[1].owner
        for op in reversed(unread):
            op.erase()
        if not any(True for _ in init.results[0].uses):
            init.erase()
        erased = True
    return erased


_UNTILED_ORDERS = (tuple(_UNTILE_ORDER), tuple(_ROWS_UNTILE_ORDER))
"""The permutations of the transposes of `untiled` and `untiled_filter`."""
_RESHAPES = ("tensor.collapse_shape", "tensor.expand_shape")


def _loads_global(value: mlir_ir.Value) -> bool:
    owner = producer(value)
    return owner is not None and owner.name == "ml_program.global_load_const"


def _unread_reshapes(op: mlir_ir.Operation) -> list[mlir_ir.Operation] | None:
    """`op` and the reshapes of its result, and of theirs, when nothing else reads any of
    them (in order, readers after what they read); None otherwise."""
    unread = [op]
    for use in op.results[0].uses:
        if use.owner.name not in _RESHAPES:
            return None
        below = _unread_reshapes(use.owner)
        if below is None:
            return None
        unread.extend(below)
    return unread


def _stored_tiles(value: mlir_ir.Value, tile: _Tile) -> mlir_ir.Value | None:
    """The tiles static [K, N] `value` is the `untiled` form of, when they are of `tile`;
    None otherwise."""
    tiles = _read_back(value, _UNTILE_ORDER)
    if tiles is None:
        return None
    column_tiles, depth, columns, depth_tile = mlir_ir.RankedTensorType(tiles.type).shape
    fits = (columns, depth_tile) == (tile.columns, tile.depth)
    return tiles if fits and _shape(value) == [depth, column_tiles * columns] else None


def _stored_row_tiles(lhs: mlir_ir.Value, tile: _Tile) -> mlir_ir.Value | None:
    """The tiles static [M, K] `lhs` is the `untiled_filter` form of (reshaped), when they
    are tiles of `tile` (rows by depth); None otherwise."""
    tiles = _read_back(lhs, _ROWS_UNTILE_ORDER)
    if tiles is None:
        return None
    row_tiles, depth, rows, depth_tile = mlir_ir.RankedTensorType(tiles.type).shape
    fits = (rows, depth_tile) == (tile.rows, tile.depth)
    return tiles if fits and _shape(lhs) == [row_tiles * rows, depth] else None


def _read_back(value: mlir_ir.Value, order: Sequence[int]) -> mlir_ir.Value | None:
    """The tiles of a loaded Global that `value` reshapes a `linalg.transpose` of by `order`
    (`untiled`, `untiled_filter`); None otherwise. Reshapes keep the order of the elements,
    so any that lead to the right shape read the transposed tiles as they are."""
    owner = producer(value)
    while owner is not None and owner.name in _RESHAPES:
        owner = producer(owner.operands[0])
    if owner is None or owner.name != "linalg.transpose":
        return None
    if list(mlir_ir.DenseI64ArrayAttr(owner.attributes["permutation"])) != list(order):
        return None
    tiles = owner.operands[0]
    return tiles if _loads_global(tiles) else None


def _shape(value: mlir_ir.Value) -> list[int]:
    return list(mlir_ir.RankedTensorType(value.type).shape)


def _rhs_tiles(rhs: mlir_ir.Value, tile: _Tile) -> mlir_ir.Value:
    """The static [..., K, N] `rhs` as `linalg.mmt4d` / `linalg.batch_mmt4d` read it: [...,
    N / N0, K / K0, N0, K0], each tile's K0 values of one column side by side: the tiles a
    weight is written in (`untiled`) or a `linalg.transpose`, which IREE computes at compile
    time for a constant `rhs` built outside any `scf.if` (callers build it before choosing a
    version)."""
    stored = _stored_tiles(rhs, tile)
    if stored is not None:
        return stored
    source = mlir_ir.RankedTensorType(rhs.type)
    *batch, depth, columns = source.shape
    lead = len(batch)
    split = [*batch, depth // tile.depth, tile.depth, columns // tile.columns, tile.columns]
    groups = [[axis] for axis in range(lead)] + [[lead, lead + 1], [lead + 2, lead + 3]]
    rows_by_columns = expand_shape(
        rhs, mlir_ir.RankedTensorType.get(split, source.element_type), groups, []
    )
    tiles = [*batch, columns // tile.columns, depth // tile.depth, tile.columns, tile.depth]
    order = [*range(lead), lead + 2, lead, lead + 3, lead + 1]
    init = empty(tiles, source.element_type)
    return transpose(rows_by_columns, init, mlir_ir.DenseI64ArrayAttr.get(order))


def _one_row_versioned(
    lhs: mlir_ir.Value,
    columns: int,
    element: mlir_ir.Type,
    one_row: Callable[[mlir_ir.Value], mlir_ir.Value],
    rows: Callable[[mlir_ir.Value], mlir_ir.Value],
) -> mlir_ir.Value:
    """The product of [..., rows, K] `lhs` (rows a run-time size) by a static right operand
    (built before the choice: a weight's tiles are then computed at compile time) in two
    versions chosen at run time: one row (a decode step's token) as `one_row(lhs as one static
    row)`, more as `rows(lhs)`; [..., rows, columns] of `element`.

    Why: IREE 3.13 compiles a product of run-time rows slower than a static one when the rows
    are few, and so what reads it. MatMulNBits' int8 block product [32, rows, 32] x [32, 32,
    1536] as a batch_matmul ran 3-4x slower at one run-time row than static (0.33-0.50 against
    0.12 ms, iree-benchmark-module), and padded to 8 static rows no faster than dynamic
    (0.34-0.37 ms); in tiles the dynamic product itself runs almost as fast (0.067 against
    0.053 ms by [32, 32, 2816]), but the reduction that reads it (the blocks' scaling and sum)
    still ran ~6x slower on a run-time row (0.31 against 0.05 ms). An f32 row by 1024 x 2816 in
    tiles of one row: 0.29 ms against 0.31-0.45 as the product of 8 padded rows by the
    transposed weight (what `_few_rows_versioned` makes of other matrices)."""
    source = mlir_ir.RankedTensorType(lhs.type)
    axis = source.rank - 2
    size = dim_size(lhs, axis)
    one = arith.CmpIOp(arith.CmpIPredicate.eq, size, index_constant(1)).result
    row_shape = list(source.shape)
    row_shape[axis] = 1
    row_type = mlir_ir.RankedTensorType.get(row_shape, source.element_type)
    result_shape = [*source.shape[:axis], DYNAMIC, columns]
    result_type = mlir_ir.RankedTensorType.get(result_shape, element)
    return _versioned(
        one, result_type, [size], lambda: one_row(cast_to(lhs, row_type)), lambda: rows(lhs)
    )


def _in_tiles(
    lhs: mlir_ir.Value, tiles: mlir_ir.Value, element: mlir_ir.Type, tile: _Tile, rows: int | None
) -> mlir_ir.Value:
    """[..., rows, K] `lhs` times the right operand in `tiles`: a run-time number of rows in
    versions (`_tiled_versions`), one static row in a row tile of 1, more in `tile`."""
    if rows is None:
        return _tiled_versions(lhs, tiles, element, tile)
    return _tiled_product(lhs, tiles, element, tile.one_row if rows == 1 else tile)


def _tiled_versions(
    lhs: mlir_ir.Value, tiles: mlir_ir.Value, element: mlir_ir.Type, tile: _Tile
) -> mlir_ir.Value:
    """`_one_row_versioned` in tiles: one row in a row tile of 1, more rows in `tile`."""
    columns = mlir_ir.RankedTensorType(tiles.type).shape[-4] * tile.columns
    return _one_row_versioned(
        lhs,
        columns,
        element,
        lambda row: _tiled_product(row, tiles, element, tile.one_row),
        lambda rows: _tiled_product(rows, tiles, element, tile),
    )


_MANY_ROWS_TILE = _Tile(16, TILE_COLUMNS, 1)
"""f32 tiles of 16 rows by 16 columns: IREE 3.13's data-tiling choice on AVX-512 for products
of many static rows (`rows_by_tiled_columns`)."""


def rows_by_tiled_columns(
    rows: mlir_ir.Value, columns: mlir_ir.Value, *, depth_major: bool = False
) -> mlir_ir.Value:
    """[M, K] `rows` times the transpose of [N, K] `columns` ([M, N], f32, static), both
    packed into tiles of 16 (zero padding where 16 does not divide M or N) and multiplied in
    them (`_tiled_product`). `depth_major`: `columns` is given as [K, N], and its pack
    transposes it. A constant `rows` is packed at compile time by IREE.

    Why: IREE 3.13 without `--iree-opt-data-tiling` compiles `linalg.mmt4d` of these tiles
    about twice as fast as the named matmul of the same matrices (256 x 2304 by 2304 x 196, a
    ResNet-50 3x3 convolution at 14x14: 1.05-1.2 against 2.1-2.2 ms), but the packing is a
    copy of each operand: it pays where a product has many rows (see `conv`)."""
    element = mlir_ir.RankedTensorType(rows.type).element_type
    count, depth = mlir_ir.RankedTensorType(columns.type).shape
    if depth_major:
        count, depth = depth, count
    tile = _MANY_ROWS_TILE
    column_tiles = -(-count // tile.columns)
    tiles = pack(
        columns,
        [column_tiles, depth],
        [tile.columns, tile.depth],
        constant(element, 0),
        transposed=depth_major,
    )
    return _tiled_product(rows, tiles, element, tile, columns=count)


def _tiled_product(
    lhs: mlir_ir.Value,
    tiles: mlir_ir.Value,
    element: mlir_ir.Type,
    tile: _Tile,
    *,
    columns: int | None = None,
) -> mlir_ir.Value:
    """[..., M, K] `lhs` times the right operand in `tiles` (`_rhs_tiles`), [..., M, N], as the
    named `linalg.mmt4d` (`linalg.batch_mmt4d` with one batch dim) summed from 0 in `element`.
    With a row tile of 1 the left operand's tiles and the result are reshapes of it (a run-time
    M stays one dim); with `tile.rows` they are `linalg.pack` (zero rows padding M to a
    multiple; a filter written in such tiles, `untiled_filter`, is read as written) and
    `linalg.unpack`, to N `columns` where the tiles hold padding columns (else all the tiles'
    columns).

    Why: IREE 3.13 (without `--iree-opt-data-tiling`) compiles these far better than the named
    products (iree-benchmark-module): MatMulNBits' int8 block product [32, 1, 32] x [32, 32,
    2816] in 0.05 ms against 0.11-0.12 as a batch_matmul, at 32 rows 0.94 against 1.9 ms; 128
    run-time rows by an f32 768 x 3072 in 4.0 against 6.7-7.2 ms (7 rows: 0.30 against 0.38)."""
    *batch, column_tiles, depth_tiles, _, _ = mlir_ir.RankedTensorType(tiles.type).shape
    axis = len(batch)
    name = "linalg.batch_mmt4d" if batch else "linalg.mmt4d"
    rows = tensor_size(lhs, axis)
    zero = constant(element, 0)
    if tile.rows is None:
        lhs_tiles = expand_dim(lhs, axis + 1, [depth_tiles, 1, tile.depth])
        init = fill(empty([*batch, rows, column_tiles, 1, tile.columns], element), zero)
        return collapse_dims(named_op(name, [lhs_tiles, tiles], init), axis + 1, 3)
    row_tiles = (
        -(-rows // tile.rows)
        if isinstance(rows, int)
        else arith.CeilDivUIOp(rows, index_constant(tile.rows)).result
    )
    lhs_tiles = _stored_row_tiles(lhs, tile)
    if lhs_tiles is None:
        lhs_tiles = pack(lhs, [row_tiles, depth_tiles], [tile.rows, tile.depth], zero)
    init = fill(empty([*batch, row_tiles, column_tiles, tile.rows, tile.columns], element), zero)
    product = named_op(name, [lhs_tiles, tiles], init)
    return unpack(product, [*batch, rows, columns or column_tiles * tile.columns])
