"""MLIR lowerings of the contractions: N-D MatMul, MatMulInteger and Einsum.

All three are one `linalg.generic` built from index labels (einsum's view): every operand dim
and every result dim carries a label, each label is one loop, labels absent from the result are
reduction loops. A static size-1 operand dim whose label is larger elsewhere reads index 0
(NumPy broadcasting of batch dims); a dynamic batch dim must equal its label's size at run time
(checked). MatMul follows NumPy: a 1-D lhs is a row vector and a 1-D
rhs a column vector, whose unit dim is then dropped. Rank-2 MatMul is Niro's own op and never
gets here. f16/bf16 products accumulate in f32, integers in their own type (wrapping, as ONNX
MatMul on integers); MatMulInteger widens to i32 after subtracting the zero points. One
exception: a batched MatMul of equal static batch dims and a static reduced dim is the named
`linalg.batch_matmul` (`_batch_matmul` says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from niro.ir import ScalarType, Value, format_type, op_name

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    MapSpec,
    accumulator_type,
    assert_true,
    collapse_dims,
    constant,
    convert,
    dim_size,
    empty,
    empty_tensor,
    expand_dim,
    fill,
    generic,
    index_constant,
    index_value,
    named_op,
    tensor_size,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .common import element_type, input_value, ranked_result

__all__ = ["contract", "integer_matmul", "matmul", "matmul_row_column_dims", "parse_einsum"]

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
    if finish is None:
        return summed  # the sum is the result: no copy
    return generic(
        [(summed, identity), *finish_operands],
        [(empty(sizes, result_type.element_type), identity)],
        len(output),
        (),
        lambda arguments: [finish(*arguments[:-1])],
    )[0]


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
    shrink the result. Static shapes have nothing to check."""
    for label in dynamic_source:
        known = static.get(label, 1)
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


def _multiply_all(scalar: ScalarType, accumulator: mlir_ir.Type) -> Callable[[list[mlir_ir.Value]], mlir_ir.Value]:
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


def _narrow_to_result(
    ctx: LoweringRuleContext, accumulator: mlir_ir.Type
) -> Callable[[mlir_ir.Value], mlir_ir.Value] | None:
    """The f32 sum of f16/bf16 operands narrowed to the result's type; None (no copy) when the
    sum already has it."""
    element = ranked_result(ctx, 0).element_type
    return None if element == accumulator else (lambda value: convert(value, element))


def _matmul_labels(lhs_rank: int, rhs_rank: int) -> tuple[list, list, list]:
    """NumPy matmul as labels: batch dims right-aligned, then (m, k) x (k, n)."""
    if lhs_rank < 1 or rhs_rank < 1:
        raise ValueError("MatMul operands must have rank >= 1")
    lhs_batch = max(lhs_rank - 2, 0)
    rhs_batch = max(rhs_rank - 2, 0)
    batch = max(lhs_batch, rhs_batch)
    lhs = [("batch", batch - lhs_batch + axis) for axis in range(lhs_batch)]
    rhs = [("batch", batch - rhs_batch + axis) for axis in range(rhs_batch)]
    out = [("batch", axis) for axis in range(batch)]
    lhs += ["m", "k"] if lhs_rank >= 2 else ["k"]
    rhs += ["k", "n"] if rhs_rank >= 2 else ["k"]
    if lhs_rank >= 2:
        out.append("m")
    if rhs_rank >= 2:
        out.append("n")
    return lhs, rhs, out


@register_lowering("onnx.MatMul")
def _lower_matmul(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Any ranks >= 1 (NumPy's matmul); f16/bf16 products summed in f32."""
    lhs = ctx.ranked(ctx.niro_operands[0], "operand #0")
    rhs = ctx.ranked(ctx.niro_operands[1], "operand #1")
    scalar = lhs.element_type
    if scalar.is_bool or rhs.element_type is not scalar:
        raise ctx.error(
            f"expects two numeric operands of one type, got {format_type(lhs)} and {format_type(rhs)}"
        )
    if not lhs.shape or not rhs.shape:
        raise ctx.error(
            f"expects operands of rank >= 1, got {format_type(lhs)} and {format_type(rhs)}"
        )
    return [matmul(ctx, accumulator_type(scalar))]


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
    in_result_type = accumulator == ctx.mlir_type(result.element_type)
    if in_result_type and len(lhs.shape) == 2 and len(rhs.shape) == 2:
        sizes = [
            dim_size(ctx.operands[0], 0) if result.shape[0] is None else None,
            dim_size(ctx.operands[1], 1) if result.shape[1] is None else None,
        ]
        init = empty_tensor(ctx, result, sizes)
        return named_op("linalg.matmul", [ctx.operands[0], ctx.operands[1]], fill(init, constant(accumulator, 0)))
    if in_result_type and _batch_matmul_fits(lhs.shape, rhs.shape):
        return _batch_matmul(ctx, lhs.shape, accumulator)
    lhs_labels, rhs_labels, out = _matmul_labels(len(lhs.shape), len(rhs.shape))
    operands = [
        (ctx.operands[0], ctx.niro_operands[0], lhs_labels),
        (ctx.operands[1], ctx.niro_operands[1], rhs_labels),
    ]
    return contract(
        ctx,
        operands,
        out,
        accumulator,
        _multiply_all(lhs.element_type, accumulator),
        _narrow_to_result(ctx, accumulator),
    )


def _batch_matmul_fits(lhs: Sequence[int | None], rhs: Sequence[int | None]) -> bool:
    """Operands of one rank >= 3 whose batch dims are static and equal (no broadcasting) and
    whose reduced dim is static on both sides (a dynamic one needs `contract`'s run-time
    check)."""
    if len(lhs) != len(rhs) or len(lhs) < 3 or lhs[-1] is None or lhs[-1] != rhs[-2]:
        return False
    batch = lhs[:-2]
    return all(dim is not None for dim in batch) and list(batch) == list(rhs[:-2])


def _batch_matmul(ctx: LoweringRuleContext, shape: Sequence[int | None], element: mlir_ir.Type) -> mlir_ir.Value:
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
    sizes = [math.prod(batch), tensor_size(lhs, 1), tensor_size(rhs, 2)]
    product = named_op("linalg.batch_matmul", operands, fill(empty(sizes, element), constant(element, 0)))
    return expand_dim(product, 0, batch) if len(batch) > 1 else product


@register_lowering("onnx.MatMulInteger", since=10)
def _lower_matmul_integer(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """(A - a_zero_point) x (B - b_zero_point) in i32; zero points are scalars, or per row of
    A / per column of B (1-D)."""
    return [integer_matmul(ctx, (0, 1, 2, 3), lambda value: value)]


def integer_matmul(
    ctx: LoweringRuleContext,
    positions: tuple[int, int, int, int],
    finish: Callable[..., mlir_ir.Value],
    finish_operands: Sequence[tuple[mlir_ir.Value, MapSpec]] = (),
    labels: tuple[list, list, list] | None = None,
) -> mlir_ir.Value:
    """sum (A - a_zero_point) * (B - b_zero_point) in i32 with NumPy matmul broadcasting (any
    dim may be dynamic), each i32 sum then `finish`ed into the result's element type (MatMulInteger
    keeps it; QLinearMatMul requantizes it). `positions` are the ONNX input positions of A, B,
    a_zero_point and b_zero_point (the zero points optional). `labels` (A's, B's, the result's)
    replace matmul's: QGemm's transposed operands are (k, m) or (n, k)."""
    a_position, b_position, a_zero_position, b_zero_position = positions
    # NOTE: finish_operands index the result's dims: QLinearMatMul's per-row / per-column
    # scales (`matmul_row_column_dims` says where the rows and columns are).
    lhs = ctx.ranked(ctx.niro_operands[a_position], f"operand #{a_position}")
    rhs = ctx.ranked(ctx.niro_operands[b_position], f"operand #{b_position}")
    for operand in (lhs, rhs):
        if operand.element_type not in (ScalarType.I8, ScalarType.U8):
            raise ctx.error(f"expects int8 or uint8 operands, got {format_type(operand)}")
    if not lhs.shape or not rhs.shape:
        raise ctx.error(
            f"expects operands of rank >= 1, got {format_type(lhs)} and {format_type(rhs)}"
        )
    lhs_labels, rhs_labels, out = labels or _matmul_labels(len(lhs.shape), len(rhs.shape))
    operands = [
        (ctx.operands[a_position], ctx.niro_operands[a_position], lhs_labels),
        (ctx.operands[b_position], ctx.niro_operands[b_position], rhs_labels),
    ]
    signed = [lhs.element_type is ScalarType.I8, rhs.element_type is ScalarType.I8]
    has_zero_point = []
    for index, (position, row_label, what) in enumerate(
        ((a_zero_position, "m", "a_zero_point"), (b_zero_position, "n", "b_zero_point"))
    ):
        present = input_value(ctx, position)
        has_zero_point.append(present is not None)
        if present is None:
            continue
        value, niro_value = present
        shape = ctx.ranked(niro_value, what).shape
        if element_type(niro_value) is not (lhs, rhs)[index].element_type:
            raise ctx.error(f"{what} {format_type(niro_value.type)} must have its matrix's type")
        if all(dim == 1 for dim in shape):
            labels = [("zero_point", position, axis) for axis in range(len(shape))]
        elif len(shape) == 1 and row_label in (lhs_labels, rhs_labels)[index]:
            labels = [row_label]
            if shape[0] is None:
                matrix = operands[index][0]
                value = _zero_point_per_row(
                    ctx, value, matrix, (lhs_labels, rhs_labels)[index].index(row_label), what
                )
        else:
            raise ctx.error(f"supports a scalar or 1-D {what}, got {format_type(niro_value.type)}")
        operands.append((value, niro_value, labels))
        signed.append(signed[index])
    # NOTE: a scalar zero point's dims get labels of their own: size-1 reduction loops.
    i32 = mlir_ir.IntegerType.get_signless(32)

    def widen(value: mlir_ir.Value, is_signed: bool) -> mlir_ir.Value:
        return (arith.ExtSIOp if is_signed else arith.ExtUIOp)(i32, value).result

    def product(elements: list[mlir_ir.Value]) -> mlir_ir.Value:
        wide = [
            widen(element, is_signed) for element, is_signed in zip(elements, signed, strict=True)
        ]
        a, b, *zero_points = wide
        if has_zero_point[0]:
            a = arith.SubIOp(a, zero_points.pop(0)).result
        if has_zero_point[1]:
            b = arith.SubIOp(b, zero_points.pop(0)).result
        return arith.MulIOp(a, b).result

    return contract(ctx, operands, out, i32, product, finish, finish_operands)


def _zero_point_per_row(
    ctx: LoweringRuleContext, value: mlir_ir.Value, matrix: mlir_ir.Value, axis: int, what: str
) -> mlir_ir.Value:
    """A 1-D zero point of dynamic length as one entry per row of `matrix` (its dim `axis`):
    a length 1 (onnxruntime's only one for a_zero_point) repeats its entry, a length equal to
    the rows is kept; any other length stops the program. The copy has as many elements as the
    rows: the contraction then reads it like a static per-row zero point."""
    rows = tensor_size(matrix, axis)
    rows = index_value(rows)
    length = tensor_size(value, 0)
    one = arith.CmpIOp(arith.CmpIPredicate.eq, length, index_constant(1)).result
    per_row = arith.CmpIOp(arith.CmpIPredicate.eq, length, rows).result
    assert_true(
        arith.OrIOp(one, per_row).result,
        f"{ctx.niro_location}: '{op_name(ctx.op)}' op: {what} has neither 1 entry nor one per row",
    )
    last = arith.SubIOp(length, index_constant(1)).result
    element = mlir_ir.RankedTensorType(value.type).element_type
    out = empty([tensor_size(matrix, axis)], element)

    def body(_):
        position = arith.MinUIOp(linalg.IndexOp(0).result, last).result
        return [tensor.ExtractOp(value, [position]).result]

    return generic([], [(out, [0])], 1, (), body)[0]


def matmul_row_column_dims(lhs_rank: int, rhs_rank: int) -> tuple[int | None, int | None]:
    """The result dims of a NumPy matmul of operands of these ranks that index A's rows (m)
    and B's columns (n); None where a 1-D operand has none."""
    _, _, out = _matmul_labels(lhs_rank, rhs_rank)
    return (
        out.index("m") if "m" in out else None,
        out.index("n") if "n" in out else None,
    )


# -- Einsum -------------------------------------------------------------------------------------


def parse_einsum(equation: str, ranks: Sequence[int]) -> tuple[list[list[Label]], list[Label]]:
    """Labels per operand and for the output of an einsum `equation` over operands of `ranks`.

    `...` becomes labels ("...", i), right-aligned across operands (NumPy broadcasting). A label
    repeated within one term reads a diagonal (the same loop indexes both dims). Raises
    ValueError for a malformed equation."""
    text = equation.replace(" ", "")
    if "->" in text:
        inputs_text, output_text = text.split("->", 1)
    else:
        inputs_text, output_text = text, None
    terms = inputs_text.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"equation '{equation}' has {len(terms)} terms for {len(ranks)} operands")
    ellipsis_rank = 0
    parsed: list[tuple[str, str | None, str]] = []
    for term, rank in zip(terms, ranks, strict=True):
        before, has_ellipsis, after = term.partition("...")
        letters = before + after
        if not all(letter.isalpha() for letter in letters):
            raise ValueError(f"equation '{equation}' has a term '{term}' that is not letters")
        if has_ellipsis:
            covered = rank - len(letters)
            if covered < 0:
                raise ValueError(f"term '{term}' has more indices than its operand's rank {rank}")
            ellipsis_rank = max(ellipsis_rank, covered)
        elif len(letters) != rank:
            raise ValueError(
                f"term '{term}' has {len(letters)} indices for an operand of rank {rank}"
            )
        parsed.append((before, has_ellipsis or None, after))
    labels: list[list[Label]] = []
    for (before, has_ellipsis, after), rank in zip(parsed, ranks, strict=True):
        term_labels: list[Label] = list(before)
        if has_ellipsis:
            covered = rank - len(before) - len(after)
            term_labels += [("...", ellipsis_rank - covered + axis) for axis in range(covered)]
        term_labels += list(after)
        labels.append(term_labels)
    ellipsis = [("...", axis) for axis in range(ellipsis_rank)]
    if output_text is None:
        counts: dict[str, int] = {}
        for before, _, after in parsed:
            for letter in before + after:
                counts[letter] = counts.get(letter, 0) + 1
        output: list[Label] = ellipsis + sorted(
            letter for letter, count in counts.items() if count == 1
        )
    else:
        before, has_ellipsis, after = output_text.partition("...")
        if not all(letter.isalpha() for letter in before + after):
            raise ValueError(f"equation '{equation}' has an output that is not letters")
        if len(set(before + after)) != len(before + after):
            raise ValueError(f"equation '{equation}' repeats an output index")
        output = list(before) + (ellipsis if has_ellipsis else []) + list(after)
        known = {label for term in labels for label in term}
        missing = [label for label in output if isinstance(label, str) and label not in known]
        if missing:
            raise ValueError(f"equation '{equation}' outputs index '{missing[0]}' no operand has")
        if not has_ellipsis and ellipsis_rank:
            raise ValueError(f"equation '{equation}' drops the '...' dims from the output")
    return labels, output


@register_lowering("onnx.Einsum", since=12)
def _lower_einsum(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    equation = ctx.op.attributes.get("equation")  # type: ignore[union-attr]
    if not isinstance(equation, str):
        raise ctx.error("needs a string 'equation' attribute")
    types = [
        ctx.ranked(value, f"operand #{index}") for index, value in enumerate(ctx.niro_operands)
    ]
    scalar = types[0].element_type
    if scalar.is_bool or any(type_.element_type is not scalar for type_ in types):
        raise ctx.error("expects numeric operands of one element type")
    try:
        labels, output = parse_einsum(equation, [len(type_.shape) for type_ in types])
    except ValueError as error:
        raise ctx.error(f"is not supported: {error}") from None
    accumulator = accumulator_type(scalar)
    operands = [
        (value, niro_value, term)
        for value, niro_value, term in zip(ctx.operands, ctx.niro_operands, labels, strict=True)
    ]
    return [
        contract(
            ctx,
            operands,
            output,
            accumulator,
            _multiply_all(scalar, accumulator),
            _narrow_to_result(ctx, accumulator),
        )
    ]
