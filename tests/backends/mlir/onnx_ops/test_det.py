"""Det (backends/mlir/onnx_ops/determinant.py) run end to end against onnx.reference (numpy's
LU determinant): matrices that need row swaps, singular ones (an exact 0, not NaN), 1x1 to 8x8,
batch dims (one dynamic), f64 and f16, one matrix dim dynamic (checked at run time to be the
other's size); a matrix size with both dims dynamic is refused."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

from .model_cases import one_node_case
from .test_shape_ops import graph_case

NODE_TESTS = ["test_det_2d", "test_det_nd"]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(3)

PIVOTING = np.array(
    [
        [[0, 1, 2], [1, 0, 3], [4, -3, 8]],  # a zero on the diagonal: needs a swap
        [[1, 2, 3], [2, 4, 6], [1, 0, 1]],  # singular
        [[0, 1, 2], [0, 5, 3], [0, 3, 8]],  # a zero column: singular, no pivot at all
        [[2, 0, 0], [0, 3, 0], [0, 0, -4]],
    ],
    np.float32,
)

MODEL_CASES = {
    "pivoting_and_singular": lambda: one_node_case(
        "pivoting_and_singular", "Det", {"x": PIVOTING}, opset=22
    ),
    "batched_5x5": lambda: one_node_case(
        "batched_5x5", "Det", {"x": RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)}
    ),
    "one_by_one": lambda: one_node_case(
        "one_by_one", "Det", {"x": np.array([[[-2.5]], [[4.0]]], np.float32)}
    ),
    "f64_8x8": lambda: one_node_case(
        "f64_8x8", "Det", {"x": RNG.standard_normal((2, 8, 8))}, opset=22
    ),
    "dynamic_batch": lambda: graph_case(
        "dynamic_batch",
        [helper.make_node("Det", ["x"], ["y"])],
        {"x": (RNG.standard_normal((4, 3, 3)).astype(np.float32), ["B", 3, 3])},
    ),
    "dynamic_rows": lambda: graph_case(
        "dynamic_rows",
        [helper.make_node("Det", ["x"], ["y"])],
        {"x": (RNG.standard_normal((4, 3, 3)).astype(np.float32), ["B", "M", 3])},
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_f16_computes_in_f32() -> None:
    # numpy has no f16 determinant: the expected values are f32 determinants, rounded.
    x = RNG.uniform(-1, 1, (3, 4, 4)).astype(np.float16)
    expected = np.linalg.det(x.astype(np.float32)).astype(np.float16)
    graph = helper.make_graph(
        [helper.make_node("Det", ["x"], ["y"], name="Det_0")],
        "f16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    outcome = run_case(NodeTestCase("f16", model, (((x,), (expected,)),), 1e-3, 1e-5))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_dynamic_matrix_size_is_refused() -> None:
    case = graph_case(
        "dynamic_size",
        [helper.make_node("Det", ["x"], ["y"])],
        {"x": (np.eye(3, dtype=np.float32), ["M", "M"])},
    )
    outcome = run_case(case)
    assert (outcome.stage, outcome.refused) == ("lower", True), outcome
    assert re.search(
        r"'onnx\.Det' op needs a static matrix size \(the elimination is unrolled\), got "
        r"tensor<\?x\?xf32>$",
        outcome.message,
    ), outcome.message


def test_a_dynamic_matrix_dim_other_than_the_static_one_stops_the_run() -> None:
    graph = helper.make_graph(
        [helper.make_node("Det", ["x"], ["y"], name="Det_0")],
        "not_square",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, "N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    x = np.ones((2, 3, 4), np.float32)
    outcome = run_case(NodeTestCase("not_square", model, (((x,), (np.zeros(2, np.float32),)),), 1e-3, 1e-5))
    assert (outcome.stage, outcome.refused) == ("run", True), outcome
    assert "'onnx.Det' op: dim 2 of the input (square matrices) is not 3" in outcome.message
