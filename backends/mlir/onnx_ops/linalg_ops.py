"""MLIR lowerings of the ONNX contractions: N-D MatMul, MatMulInteger and Einsum.

All three are `builders.contract`'s `linalg.generic` over index labels (einsum's view), MatMul
through `builders.matmul`, the lowering Niro's own (rank-2) MatMul shares. MatMul follows
NumPy: a 1-D lhs is a row vector and a 1-D rhs a column vector, whose unit dim is then dropped.
f16/bf16 products accumulate in f32, integers in their own type (wrapping, as ONNX MatMul on
integers); MatMulInteger widens to i32 after subtracting the zero points. A batched MatMul of
equal static batch dims and a static reduced dim is the named `linalg.batch_matmul`
(`builders.contraction._batch_matmul` says why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from niro.ir import ScalarType, format_type, op_name

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    Label,
    MapSpec,
    accumulator_type,
    assert_true,
    contract,
    empty,
    generic,
    index_constant,
    index_value,
    matmul,
    matmul_labels,
    multiply_all,
    named_matmul,
    narrow_to_result,
    tensor_size,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .common import attribute, element_type, input_value

__all__ = ["integer_matmul", "matmul_row_column_dims", "parse_einsum"]


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


@register_lowering("onnx.MatMulInteger", since=10)
def _lower_matmul_integer(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """(A - a_zero_point) x (B - b_zero_point) in i32; zero points are scalars, or per row of
    A / per column of B (1-D). int8 x int8 without zero points (MatMulNBits' int8 block
    products, `contrib_functions._int8_block_product`) is a named op where the shapes allow
    (`builders.named_matmul`): IREE compiles its batched form ~2x faster than the generic."""
    operands = [
        ctx.ranked(ctx.niro_operands[position], f"operand #{position}") for position in (0, 1)
    ]
    if (
        all(operand.element_type is ScalarType.I8 for operand in operands)
        and input_value(ctx, 2) is None
        and input_value(ctx, 3) is None
    ):
        named = named_matmul(ctx, ctx.mlir_type(ScalarType.I32))
        if named is not None:
            return [named]
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
    lhs_labels, rhs_labels, out = labels or matmul_labels(len(lhs.shape), len(rhs.shape))
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
        point_labels: list[Label]
        if all(dim == 1 for dim in shape):
            point_labels = [("zero_point", position, axis) for axis in range(len(shape))]
        elif len(shape) == 1 and row_label in (lhs_labels, rhs_labels)[index]:
            point_labels = [row_label]
            if shape[0] is None:
                matrix = operands[index][0]
                value = _zero_point_per_row(
                    ctx, value, matrix, (lhs_labels, rhs_labels)[index].index(row_label), what
                )
        else:
            raise ctx.error(f"supports a scalar or 1-D {what}, got {format_type(niro_value.type)}")
        operands.append((value, niro_value, point_labels))
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
    _, _, out = matmul_labels(lhs_rank, rhs_rank)
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
    for (before, marked, after), rank in zip(parsed, ranks, strict=True):
        term_labels: list[Label] = list(before)
        if marked:
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
        output: list[Label] = [
            *ellipsis,
            *sorted(letter for letter, count in counts.items() if count == 1),
        ]
    else:
        before, has_ellipsis, after = output_text.partition("...")
        if not all(letter.isalpha() for letter in before + after):
            raise ValueError(f"equation '{equation}' has an output that is not letters")
        if len(set(before + after)) != len(before + after):
            raise ValueError(f"equation '{equation}' repeats an output index")
        output = [*before, *(ellipsis if has_ellipsis else []), *after]
        known = {label for term in labels for label in term}
        missing = [label for label in output if isinstance(label, str) and label not in known]
        if missing:
            raise ValueError(f"equation '{equation}' outputs index '{missing[0]}' no operand has")
        if not has_ellipsis and ellipsis_rank:
            raise ValueError(f"equation '{equation}' drops the '...' dims from the output")
    return labels, output


@register_lowering("onnx.Einsum", since=12)
def _lower_einsum(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    equation = attribute(ctx, "equation")
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
            multiply_all(scalar, accumulator),
            narrow_to_result(ctx, accumulator),
        )
    ]
