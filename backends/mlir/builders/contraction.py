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
from typing import TYPE_CHECKING

from niro.ir import ScalarType, Value, format_type, op_name

from ..bindings import arith, mlir_ir, scf
from ..weight_layout import FEW_ROWS, MIN_ELEMENTS
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
    extract_slice,
    index_value,
    pad,
    ranked_result,
    tensor_size,
)
from .structured import MapSpec, fill, generic, named_op

if TYPE_CHECKING:
    from ..context import LoweringRuleContext

__all__ = [
    "VERSION_ATTRIBUTE",
    "Label",
    "contract",
    "matmul",
    "matmul_labels",
    "multiply_all",
    "named_matmul",
    "narrow_to_result",
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
        if lhs[0] is None and _versioned_fits(rhs):
            product = _few_rows_versioned(ctx.operands[0], ctx.operands[1], accumulator)
        else:
            product = _product(ctx.operands[0], ctx.operands[1], accumulator)
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
    rhs = ctx.operands[1]
    if None in shape[:-1] and _versioned_fits(ctx.ranked(ctx.niro_operands[1], "operand #1").shape):
        return expand_dim(_few_rows_versioned(lhs, rhs, element), 0, rows)
    return expand_dim(_product(lhs, rhs, element), 0, rows)


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
    """A static matrix of at least MIN_ELEMENTS: the right operand of a product of run-time
    rows that `_few_rows_versioned` builds (a smaller one gains too little for the copy)."""
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
    expanded back after). Why: IREE folds a transpose feeding a generic contraction into that
    contraction's operand reads (strided loads in the matmul's inner loop: attention's
    Q x K^T and weights x V ran ~1.5x slower so); a named op's operands stay contiguous, the
    transposes run as their own cheap copies."""
    batch = [dim for dim in shape[:-2] if dim is not None]
    operands = [ctx.operands[0], ctx.operands[1]]
    if len(batch) > 1:
        operands = [collapse_dims(operand, 0, len(batch)) for operand in operands]
    lhs, rhs = operands
    if shape[-2] is None and _one_row_fits(lhs, rhs):
        product = _one_row_versioned(lhs, rhs, element)
    else:
        product = _product(lhs, rhs, element)
    return expand_dim(product, 0, batch) if len(batch) > 1 else product


def _one_row_fits(lhs: mlir_ir.Value, rhs: mlir_ir.Value) -> bool:
    """An int8 batch of run-time rows by static matrices (MatMulNBits' int8 block products,
    `contrib_functions._int8_block_product`): `_one_row_versioned` builds it."""
    lhs_type, rhs_type = mlir_ir.RankedTensorType(lhs.type), mlir_ir.RankedTensorType(rhs.type)
    int8 = mlir_ir.IntegerType.get_signless(8)
    return (
        lhs_type.element_type == int8
        and rhs_type.element_type == int8
        and DYNAMIC not in rhs_type.shape
    )


def _one_row_versioned(
    lhs: mlir_ir.Value, rhs: mlir_ir.Value, element: mlir_ir.Type
) -> mlir_ir.Value:
    """The batched product of a run-time number of rows in two versions chosen at run time:
    one row (a decode step's token) as a static product, more as the dynamic one.

    Why: IREE 3.13 compiles the int8 batch product [32, rows, 32] x [32, 32, 1536] at one
    run-time row 3-4x slower than with the row static (0.33-0.50 against 0.12 ms,
    iree-benchmark-module); padded to 8 static rows it is no faster than dynamic (0.34-0.37 ms),
    so `_few_rows_versioned`'s padding does not serve here."""
    rows = dim_size(lhs, 1)
    one = arith.CmpIOp(arith.CmpIPredicate.eq, rows, index_constant(1)).result
    source, matrices = mlir_ir.RankedTensorType(lhs.type), mlir_ir.RankedTensorType(rhs.type)
    batch, columns = source.shape[0], matrices.shape[2]
    row_type = mlir_ir.RankedTensorType.get([batch, 1, source.shape[2]], source.element_type)
    result_type = mlir_ir.RankedTensorType.get([batch, DYNAMIC, columns], element)
    return _versioned(
        one,
        result_type,
        [rows],
        lambda: _product(cast_to(lhs, row_type), rhs, element),
        lambda: _product(lhs, rhs, element),
    )
