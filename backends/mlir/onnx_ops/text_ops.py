"""MLIR lowering of ONNX TfIdfVectorizer (integer n-grams; strings have no Niro type).

The n-gram pool is an attribute, so everything about it is settled at compile time, exactly as
onnx.reference builds its trie: `ngram_counts` splits `pool_int64s` into runs of 1-grams,
2-grams, ...; only sizes in [min_gram_length, max_gram_length] are kept (the others still use up
their ids), a repeated n-gram keeps its last id, and id `i` counts into output column
`ngram_indexes[i - 1]`.

The reference's trie walk counts an n-gram g of size n once for every start position s and skip
distance d with X[s + j*d] == g[j] for all j < n (and s + (n-1)*d inside the row), where d runs
over 1..max_skip_count+1 for n >= 2 and only d = 1 for unigrams (they are counted once). So the
lowering is one reduction `linalg.generic` over (row, column, gram of that column, d, s) reading
the input and constant gram tables, followed by an element-wise generic applying `mode`
(TF / IDF / TFIDF) and `weights` in f32, the output type.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from niro.ir import ScalarType, format_type

from ..bindings import arith, mlir_ir, tensor
from ..builders import constant, dense_constant, dim_size, empty_tensor, fill, index_constant
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import RankedTensorType
from .common import attribute, element_type
from .indexing import add, clamp, cmp, gather_generic, mul, projection, sub, to_index

__all__: list[str] = []

_MODES = ("TF", "IDF", "TFIDF")


def _effective_grams(ctx: LoweringRuleContext, pool, counts, low: int, high: int) -> dict:
    """n-gram tuple -> id, as onnx.reference's trie assigns them (1-based, last id wins)."""
    grams: dict[tuple[int, ...], int] = {}
    next_id, size = 1, 1
    for run, start in enumerate(counts):
        end = counts[run + 1] if run + 1 < len(counts) else len(pool)
        items = end - start
        if items > 0:
            number = items // size
            if low <= size <= high:
                for position in range(number):
                    first = start + position * size
                    if first < 0 or first + size > len(pool):
                        raise ctx.error(
                            f"ngram_counts {tuple(counts)} point outside pool_int64s "
                            f"({len(pool)} items)"
                        )
                    grams[tuple(pool[first : first + size])] = next_id
                    next_id += 1
            else:
                next_id += number
        size += 1
    return grams


def _int_tuple(ctx: LoweringRuleContext, name: str, default=None) -> tuple[int, ...]:
    value = attribute(ctx, name, default)
    if value is None:
        raise ctx.error(f"needs attribute '{name}'")
    if not isinstance(value, tuple) or not all(isinstance(item, int) for item in value):
        raise ctx.error(f"expects a list of ints for attribute '{name}', got {value!r}")
    return value


def _int(ctx: LoweringRuleContext, name: str) -> int:
    value = attribute(ctx, name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ctx.error(f"needs an int attribute '{name}', got {value!r}")
    return value


@register_lowering("onnx.TfIdfVectorizer", since=9)
def _lower_tfidf_vectorizer(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    source = ctx.ranked(ctx.niro_operands[0], "input X")
    result = ctx.ranked(ctx.niro_results[0], "result Y")
    scalar = element_type(ctx.niro_operands[0])
    if scalar not in (ScalarType.I32, ScalarType.I64):
        raise ctx.error(f"expects an int32 or int64 input X, got {format_type(source)}")
    if len(source.shape) not in (1, 2):
        raise ctx.error(f"expects an input X of shape [C] or [N, C], got {format_type(source)}")
    width: int | mlir_ir.Value | None = source.shape[-1]
    if width is None:  # C at run time: the start positions and the reads are bounded by it
        width = dim_size(ctx.operands[0], len(source.shape) - 1)
    if attribute(ctx, "pool_strings") is not None:
        raise ctx.error("cannot match 'pool_strings': Niro IR has no string tensors")
    mode = attribute(ctx, "mode")
    if mode not in _MODES:
        raise ctx.error(f"expects mode TF, IDF or TFIDF, got {mode!r}")
    low, high = _int(ctx, "min_gram_length"), _int(ctx, "max_gram_length")
    skips = _int(ctx, "max_skip_count")
    if low < 1 or high < low or skips < 0:
        raise ctx.error(
            f"expects 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got "
            f"{low}, {high} and {skips}"
        )
    counts = _int_tuple(ctx, "ngram_counts")
    indexes = _int_tuple(ctx, "ngram_indexes")
    pool = _int_tuple(ctx, "pool_int64s", ())
    weights = attribute(ctx, "weights", ())
    if not indexes or min(indexes) < 0:
        raise ctx.error(f"expects non-empty, non-negative ngram_indexes, got {indexes}")
    outputs = max(indexes) + 1
    if weights and len(weights) < outputs:
        raise ctx.error(f"has {len(weights)} weights for {outputs} output columns")
    expected = (outputs,) if len(source.shape) == 1 else (source.shape[0], outputs)
    if len(result.shape) != len(expected) or any(
        got is not None and want is not None and got != want
        for got, want in zip(result.shape, expected, strict=True)
    ):
        raise ctx.error(
            f"result {format_type(result)} differs from the expected shape "
            + "x".join("?" if dim is None else str(dim) for dim in expected)
        )
    grams = _effective_grams(ctx, pool, counts, low, high)
    if any(gram_id > len(indexes) for gram_id in grams.values()):
        raise ctx.error(f"has more n-grams than the {len(indexes)} ngram_indexes")

    batched = len(source.shape) == 2
    sizes = [dim_size(ctx.operands[0], 0) if batched and result.shape[0] is None else None]
    sizes = sizes[:1] if batched else []
    count_type = RankedTensorType(ScalarType.I64, result.shape)
    zero64 = constant(mlir_ir.IntegerType.get_signless(64), 0)
    counts_init = fill(empty_tensor(ctx, count_type, [*sizes, None]), zero64)
    if grams and (not isinstance(width, int) or width > 0):
        frequencies = _count_grams(ctx, grams, indexes, outputs, skips, width, batched, count_type, sizes, counts_init)
    else:  # an empty row or no n-gram to look for: every frequency is 0 (as the reference)
        frequencies = counts_init
    return [_weigh(ctx, frequencies, count_type, result, sizes, mode, weights)]


def _count_grams(ctx, grams, indexes, outputs, skips, width, batched, count_type, sizes, init) -> mlir_ir.Value:
    """The reduction generic: frequencies[row, column] as int64."""
    by_column: list[list[int]] = [[] for _ in range(outputs)]
    ordered = list(grams.items())
    for number, (_, gram_id) in enumerate(ordered):
        by_column[indexes[gram_id - 1]].append(number)
    per_column = max(len(column) for column in by_column)
    longest = max(len(gram) for gram, _ in ordered)
    column_table = np.full((outputs, per_column), -1, np.int64)
    for column, numbers in enumerate(by_column):
        column_table[column, : len(numbers)] = numbers
    gram_table = np.zeros((len(ordered), longest), np.int64)
    lengths = np.zeros((len(ordered),), np.int64)
    for number, (gram, _) in enumerate(ordered):
        gram_table[number, : len(gram)] = gram
        lengths[number] = len(gram)
    distances = skips + 1 if longest > 1 else 1
    columns = dense_constant(column_table, ScalarType.I64)
    gram_values = dense_constant(gram_table, ScalarType.I64)
    gram_lengths = dense_constant(lengths, ScalarType.I64)
    data, scalar = ctx.operands[0], element_type(ctx.niro_operands[0])
    rank = 2 if batched else 1
    i64 = mlir_ir.IntegerType.get_signless(64)
    anchor = tensor.EmptyOp([per_column, distances, width], mlir_ir.IntegerType.get_signless(8)).result
    last_place = width - 1 if isinstance(width, int) else sub(width, 1)
    anchor_map = projection(rank + 3, [rank, rank + 1, rank + 2])

    def body(position, elements):
        row = position[:1] if batched else []
        column, slot, skip, start = position[rank - 1 : rank + 3]
        number = to_index(tensor.ExtractOp(columns, [column, slot]).result, ScalarType.I64)
        valid = cmp("sge", number, 0)
        number = clamp(number, 0, len(ordered) - 1)
        length = to_index(tensor.ExtractOp(gram_lengths, [number]).result, ScalarType.I64)
        # Unigrams are counted once, at skip distance 1.
        valid = arith.AndIOp(valid, arith.OrIOp(cmp("sge", length, 2), cmp("eq", skip, 0)).result).result
        distance = add(skip, 1)
        last = add(start, mul(add(length, -1), distance))
        valid = arith.AndIOp(valid, cmp("slt", last, width)).result
        for item in range(longest):
            place = clamp(add(start, mul(item, distance)), 0, last_place)
            value = tensor.ExtractOp(data, [*row, place]).result
            if scalar is ScalarType.I32:
                value = arith.ExtSIOp(i64, value).result
            wanted = tensor.ExtractOp(gram_values, [number, index_constant(item)]).result
            same = arith.CmpIOp(arith.CmpIPredicate.eq, value, wanted).result
            beyond = cmp("sge", index_constant(item), length)
            valid = arith.AndIOp(valid, arith.OrIOp(same, beyond).result).result
        one = arith.ExtUIOp(i64, valid).result
        return arith.AddIOp(elements[-1], one).result

    return gather_generic(
        ctx, count_type, [*sizes, None], body, [(anchor, anchor_map, ScalarType.I8)], reduction_dims=3, init=init
    )


def _weigh(ctx, frequencies, count_type, result, sizes, mode, weights) -> mlir_ir.Value:
    """Y from the frequencies: TF the count, IDF the weight (or 1) where the count is > 0,
    TFIDF the weight times the count (or the count), in f32."""
    f32 = mlir_ir.F32Type.get()
    output = RankedTensorType(ScalarType.F32, result.shape)
    table = dense_constant(np.asarray(weights, np.float32), ScalarType.F32) if weights else None
    rank = len(result.shape)

    def body(position, elements):
        count = elements[0]
        as_float = arith.SIToFPOp(f32, count).result
        weight = (
            tensor.ExtractOp(table, [position[rank - 1]]).result
            if table is not None
            else arith.ConstantOp(f32, mlir_ir.FloatAttr.get(f32, 1.0)).result
        )
        if mode == "TF":
            return as_float
        if mode == "IDF":
            present = arith.CmpIOp(arith.CmpIPredicate.sgt, count, constant(count.type, 0)).result
            return arith.SelectOp(present, weight, constant(f32, 0)).result
        if table is None:
            return as_float
        return arith.MulFOp(weight, as_float).result

    identity = projection(rank, list(range(rank)))
    return gather_generic(ctx, output, [*sizes, None], body, [(frequencies, identity, ScalarType.I64)])
