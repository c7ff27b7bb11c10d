"""ReverseSequence and TensorScatter (backends/mlir/onnx_ops/sequence_ops.py) run end to end
against onnx.reference: dynamic batch and sequence dims, rank 3 and 4, an absent write_indices,
circular writes that wrap, lengths of 0 and beyond the time axis; a linear write past the cache
stops the program, and an axis ONNX forbids is refused."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

from .test_shape_ops import graph_case

NODE_TESTS = [
    "test_reversesequence_batch",
    "test_reversesequence_bfloat16",
    "test_reversesequence_time",
    "test_tensorscatter",
    "test_tensorscatter_3d",
    "test_tensorscatter_circular",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(5)
N = helper.make_node
I64 = np.int64


def _floats(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


MODEL_CASES = {
    "reverse_rank3_time_first_int32": lambda: graph_case(
        "reverse_rank3_time_first_int32",
        [N("ReverseSequence", ["x", "lens"], ["y"], time_axis=0, batch_axis=1)],
        {
            "x": (np.arange(5 * 4 * 2, dtype=np.int32).reshape(5, 4, 2), [5, 4, 2]),
            "lens": (np.array([0, 5, 9, 2], I64), [4]),  # 0: unchanged; 9 > 5: all of it
        },
        opset=10,
    ),
    "reverse_dynamic_batch": lambda: graph_case(
        "reverse_dynamic_batch",
        [N("ReverseSequence", ["x", "lens"], ["y"], time_axis=1, batch_axis=0)],
        {"x": (_floats(3, 6, 2), ["B", 6, 2]), "lens": (np.array([6, 1, 4], I64), ["B"])},
        opset=10,
    ),
    "scatter_without_write_indices": lambda: graph_case(
        "scatter_without_write_indices",
        [N("TensorScatter", ["past", "update"], ["y"])],
        {
            "past": (_floats(2, 3, 6, 4), [2, 3, 6, 4]),
            "update": (_floats(2, 3, 2, 4), [2, 3, 2, 4]),
        },
        opset=24,
    ),
    "scatter_circular_wraps": lambda: graph_case(
        "scatter_circular_wraps",
        [N("TensorScatter", ["past", "update", "w"], ["y"], mode="circular", axis=1)],
        {
            "past": (_floats(2, 5, 3), [2, 5, 3]),
            "update": (_floats(2, 3, 3), [2, 3, 3]),
            "w": (np.array([4, 1], I64), [2]),
        },
        opset=24,
    ),
    "scatter_dynamic_lengths": lambda: graph_case(
        "scatter_dynamic_lengths",
        [N("TensorScatter", ["past", "update", "w"], ["y"], axis=1)],
        {
            "past": (_floats(2, 8, 4), ["B", 8, 4]),
            "update": (_floats(2, 3, 4), ["B", "L", 4]),
            "w": (np.array([0, 5], I64), ["B"]),
        },
        opset=24,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_linear_write_past_the_cache_fails_the_run() -> None:
    case = node_test_case("test_tensorscatter_3d")  # max length 4, update length 2
    ((inputs, expected),) = case.data_sets
    past, update, _ = inputs
    wrong = NodeTestCase(
        case.name, case.model, (((past, update, np.array([0, 3, 1], I64)), expected),), 1e-3, 1e-5
    )
    outcome = run_case(wrong)
    assert outcome.stage == "run"
    assert "TensorScatter's linear mode needs 0 <= write_indices[b]" in outcome.message


def test_scatter_along_the_batch_axis_is_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<2x4xf32> {name = "past"}, tensor<1x4xf32> {name = "update"}) -> (tensor<2x4xf32> {name = "y"}) {
^bb0(%0: tensor<2x4xf32>, %1: tensor<1x4xf32>):
  %2 = "onnx.TensorScatter"(%0, %1) {axis = 0, niro.opset = 24} : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32> loc("TensorScatter_0")
  niro.return %2 : tensor<2x4xf32>
}
"""
    )
    with pytest.raises(
        LoweringError, match=r"'onnx\.TensorScatter' op axis must not be 0 \(the batch dimension\)"
    ):
        lower_to_mlir(module)
