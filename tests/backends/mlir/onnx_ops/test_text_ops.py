"""TfIdfVectorizer runs end to end against onnx.reference beyond ONNX's TF-only node tests: IDF
and TFIDF with and without weights, int64 input, trigrams with skips, a repeated n-gram (the
last id wins), two ids sharing an output column, n-gram sizes outside [min, max] (their ids
are skipped), a run-time row length. Refusals name the reason. The node tests run in tests/conformance/subset.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import helper

from tests.conformance.pipeline import run_case

from .model_cases import one_node_case
from .test_shape_ops import graph_case

RNG = np.random.default_rng(5)
POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 5, 6, 7]  # 4 unigrams, 3 bigrams, 1 trigram


def _case(name, data, **attributes):
    base = dict(
        mode="TF", min_gram_length=1, max_gram_length=3, max_skip_count=2,
        ngram_counts=[0, 4, 10], ngram_indexes=list(range(8)), pool_int64s=POOL,
    )
    base.update(attributes)
    return lambda: one_node_case(name, "TfIdfVectorizer", {"x": data}, opset=9, **base)


MODEL_CASES = {
    "tf_trigrams_i64_batch": _case("tf_trigrams_i64_batch", RNG.integers(2, 9, (3, 14)).astype(np.int64)),
    "idf_weights": _case(
        "idf_weights", RNG.integers(2, 9, (2, 10)).astype(np.int32), mode="IDF",
        weights=[0.5, 1.5, 2.0, 3.0, 0.25, 4.0, 5.0, 6.0],
    ),
    "tfidf_weights": _case(
        "tfidf_weights", RNG.integers(2, 9, (2, 12)).astype(np.int64), mode="TFIDF",
        weights=[0.1, 1.5, 2.0, 3.0, 0.3, 4.0, 5.0, 6.7],
    ),
    "bigrams_only_reversed_columns": _case(
        "bigrams_only_reversed_columns", RNG.integers(2, 9, (2, 9)).astype(np.int32),
        min_gram_length=2, max_gram_length=2, ngram_indexes=[7, 6, 5, 4, 3, 2, 1, 0],
    ),
    "repeated_gram_shared_column": _case(
        "repeated_gram_shared_column", np.array([[5, 6, 5, 6, 7, 2, 2, 3]], np.int64),
        ngram_counts=[0, 3], ngram_indexes=[0, 1, 0, 2, 3], pool_int64s=[2, 3, 2, 5, 6, 6, 7],
        max_gram_length=2, max_skip_count=1,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


@pytest.mark.parametrize("mode", ["IDF", "TFIDF"])
def test_mode_without_weights_passes(mode: str) -> None:
    """onnx.reference fails on IDF and TFIDF without weights (it takes len(None)); the spec's
    numbers are 1 where the count is > 0 (IDF) and the count itself (TFIDF), derived here from
    the reference's TF counts."""
    case = _case(f"{mode.lower()}_no_weights", RNG.integers(2, 9, (2, 11)).astype(np.int32))()
    (mode_attribute,) = [item for item in case.model.graph.node[0].attribute if item.name == "mode"]
    mode_attribute.s = mode.encode()
    (inputs, (counts,)), = case.data_sets
    expected = (counts > 0).astype(np.float32) if mode == "IDF" else counts
    case = dataclasses.replace(case, data_sets=((inputs, (expected,)),))
    outcome = run_case(case)
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def _module(input_type: str, result_type: str, attributes: str) -> str:
    return f"""
niro.func @main({input_type} {{name = "x"}}) -> ({result_type} {{name = "y"}}) {{
^bb0(%0: {input_type}):
  %1 = "onnx.TfIdfVectorizer"(%0) {{niro.opset = 9, {attributes}}} : ({input_type}) -> {result_type} loc("TfIdfVectorizer_0")
  niro.return %1 : {result_type}
}}
"""


GOOD = (
    'max_gram_length = 2, max_skip_count = 0, min_gram_length = 1, mode = "TF", '
    "ngram_counts = [0, 2], ngram_indexes = [0, 1, 2], pool_int64s = [1, 2, 1, 2]"
)


@pytest.mark.parametrize("length", [2, 14])
def test_a_run_time_row_length(length: int) -> None:
    """C dynamic: the n-gram starts and reads are bounded at run time (2 is shorter than the
    trigram and the skipped bigrams)."""
    node = helper.make_node(
        "TfIdfVectorizer", ["x"], ["y"], mode="TFIDF", min_gram_length=1, max_gram_length=3,
        max_skip_count=2, ngram_counts=[0, 4, 10], ngram_indexes=list(range(8)), pool_int64s=POOL,
        weights=[0.1, 1.5, 2.0, 3.0, 0.3, 4.0, 5.0, 6.7],
    )
    x = RNG.integers(2, 9, (2, length)).astype(np.int64)
    outcome = run_case(graph_case("row_length", [node], {"x": (x, [2, "C"])}, opset=9))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_unknown_mode_is_refused() -> None:
    attributes = GOOD.replace('"TF"', '"BM25"')
    with pytest.raises(
        LoweringError, match=r"'onnx\.TfIdfVectorizer' op expects mode TF, IDF or TFIDF, got 'BM25'$"
    ):
        lower_to_mlir(parse_module(_module("tensor<6xi32>", "tensor<3xf32>", attributes)))


def test_too_few_weights_are_refused() -> None:
    attributes = GOOD + ", weights = [1.0, 2.0]"
    with pytest.raises(
        LoweringError, match=r"'onnx\.TfIdfVectorizer' op has 2 weights for 3 output columns$"
    ):
        lower_to_mlir(parse_module(_module("tensor<6xi32>", "tensor<3xf32>", attributes)))
