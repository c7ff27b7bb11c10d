"""N-D MatMul, MatMulInteger and Einsum lowered and run end to end, plus the einsum parser."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir.onnx_ops.linalg_ops import parse_einsum

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import node_test_case

from .model_cases import one_node_case

NODE_TESTS = [
    "test_matmul_1d_3d",
    "test_matmul_4d_1d",
    "test_matmulinteger",
    "test_einsum_batch_diagonal",
    "test_einsum_batch_matmul",
    "test_einsum_transpose_bfloat16",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(11)


def _floats(*shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _ints(low, high, shape, dtype) -> np.ndarray:
    return RNG.integers(low, high, shape).astype(dtype)


MODEL_CASES = {
    "matmul_batch_broadcast": lambda: one_node_case(
        "matmul_batch_broadcast", "MatMul", {"a": _floats(2, 1, 3, 4), "b": _floats(5, 4, 2)}
    ),
    "matmul_i32": lambda: one_node_case(
        "matmul_i32",
        "MatMul",
        {"a": _ints(-5, 5, (2, 3, 4), np.int32), "b": _ints(-5, 5, (2, 4, 3), np.int32)},
    ),
    "matmul_f16": lambda: one_node_case(
        "matmul_f16",
        "MatMul",
        {"a": _floats(2, 3, 64, dtype=np.float16), "b": _floats(1, 64, 5, dtype=np.float16)},
    ),
    # Equal static batch dims: the named linalg.batch_matmul (4-D: batch dims collapsed).
    "matmul_batched_4d": lambda: one_node_case(
        "matmul_batched_4d", "MatMul", {"a": _floats(2, 3, 5, 16), "b": _floats(2, 3, 16, 7)}
    ),
    "matmul_f64_batched": lambda: one_node_case(
        "matmul_f64_batched", "MatMul", {"a": _floats(3, 2, 4, dtype=np.float64), "b": _floats(3, 4, 2, dtype=np.float64)}
    ),
    # Rows times one matrix: the named linalg.matmul of the rows collapsed (its weights a
    # constant, as a layer's are).
    "matmul_rows_times_weights": lambda: one_node_case(
        "matmul_rows_times_weights",
        "MatMul",
        {"a": _floats(2, 3, 4)},
        initializers={"w": _floats(4, 5)},
    ),
    "matmul_rows_times_weights_i32": lambda: one_node_case(
        "matmul_rows_times_weights_i32",
        "MatMul",
        {"a": _ints(-5, 5, (2, 3, 2, 4), np.int32)},
        initializers={"w": _ints(-5, 5, (4, 3), np.int32)},
    ),
    "matmul_integer_zero_points": lambda: one_node_case(
        "matmul_integer_zero_points",
        "MatMulInteger",
        {"a": _ints(0, 255, (3, 4), np.uint8), "b": _ints(0, 255, (4, 2), np.uint8)},
        initializers={
            "a_zero_point": np.array(12, np.uint8),
            "b_zero_point": np.array([3, 200], np.uint8),
        },
    ),
    "einsum_ellipsis": lambda: one_node_case(
        "einsum_ellipsis",
        "Einsum",
        {"a": _floats(2, 3, 4), "b": _floats(4, 5)},
        equation="...ij,jk->...ik",
    ),
    "einsum_implicit_trace": lambda: one_node_case(
        "einsum_implicit_trace", "Einsum", {"a": _floats(4, 4)}, equation="ii"
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_parse_einsum_explicit_and_implicit_outputs() -> None:
    assert parse_einsum("ij,jk->ik", [2, 2]) == ([["i", "j"], ["j", "k"]], ["i", "k"])
    assert parse_einsum("ba,ac", [2, 2]) == ([["b", "a"], ["a", "c"]], ["b", "c"])
    labels, output = parse_einsum("...i,i", [3, 1])
    assert labels == [[("...", 0), ("...", 1), "i"], ["i"]]
    assert output == [("...", 0), ("...", 1)]


def test_parse_einsum_aligns_ellipses_right() -> None:
    labels, output = parse_einsum("...ij,...jk->...ik", [4, 3])
    assert labels[0][:2] == [("...", 0), ("...", 1)]
    assert labels[1][:1] == [("...", 1)]
    assert output == [("...", 0), ("...", 1), "i", "k"]


@pytest.mark.parametrize(
    ("equation", "ranks", "message"),
    [
        ("ij,jk", [2], "equation 'ij,jk' has 2 terms for 1 operands"),
        ("ij->ik", [2], "equation 'ij->ik' outputs index 'k' no operand has"),
        ("ij", [3], "term 'ij' has 2 indices for an operand of rank 3"),
        ("...ij->ij", [3], "equation '...ij->ij' drops the '...' dims from the output"),
        ("i1", [2], "equation 'i1' has a term 'i1' that is not letters"),
    ],
)
def test_parse_einsum_rejects(equation: str, ranks: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message.replace('.', '[.]')}$"):
        parse_einsum(equation, ranks)


def test_attention_matmuls_of_transposed_heads_on_symbolic_lengths() -> None:
    """Attention as exporters write it: heads split by Reshape + Transpose, Q x K^T and
    weights x V batched over static heads with symbolic sequence lengths (the named
    batch_matmul with dynamic M and N)."""
    from .test_shape_ops import N, graph_case

    q, k = _floats(6, 4, 8), _floats(5, 4, 8)
    nodes = [
        N("Transpose", ["q"], ["qh"], perm=[1, 0, 2]),
        N("Transpose", ["k"], ["kt"], perm=[1, 2, 0]),
        N("MatMul", ["qh", "kt"], ["s"]),
        N("Softmax", ["s"], ["w"], axis=-1),
        N("Transpose", ["k"], ["kh"], perm=[1, 0, 2]),
        N("MatMul", ["w", "kh"], ["y"]),
    ]
    case = graph_case("attention_symbolic", nodes, {"q": (q, ["T", 4, 8]), "k": (k, ["S", 4, 8])})
    outcome = run_case(case)
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_rows_times_weights_on_symbolic_batch_and_length() -> None:
    """A layer's weights applied to every position of a [batch, length, features] input whose
    batch and length are symbolic (the rows collapsed into one run-time count and split back
    into both at run time), then transposed as an attention's key projection is."""
    from .test_shape_ops import N, graph_case

    nodes = [
        N("MatMul", ["x", "w"], ["p"]),
        N("Transpose", ["p"], ["y"], perm=[0, 2, 1]),
    ]
    case = graph_case(
        "rows_symbolic", nodes, {"x": (_floats(3, 7, 8), ["B", "T", 8])}, {"w": _floats(8, 6)}
    )
    outcome = run_case(case)
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"
