"""MaxUnpool (backends/mlir/onnx_ops/unpool.py) run end to end against onnx.reference, mostly
fed by a MaxPool's Indices as real models do: overlapping and padded windows, 1-D to 3-D, f16, an
`output_shape` larger than the inferred one. Indices that MaxPool could not have made stop the
program with a message; a result type that disagrees with the attributes is refused."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

from .model_cases import one_node_case
from .test_shape_ops import graph_case

NODE_TESTS = [
    "test_maxunpool_export_with_output_shape",
    "test_maxunpool_export_without_output_shape",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(17)


def _pool_unpool(name: str, x: np.ndarray, output_shape=None, **window) -> NodeTestCase:
    """MaxPool(x) -> (values, indices) -> MaxUnpool with the same window attributes."""
    unpool_inputs = ["pooled", "indices"] + (["shape"] if output_shape is not None else [])
    nodes = [
        helper.make_node("MaxPool", ["x"], ["pooled", "indices"], **window),
        helper.make_node("MaxUnpool", unpool_inputs, ["y"], **window),
    ]
    initializers = {} if output_shape is None else {"shape": np.array(output_shape, np.int64)}
    case = graph_case(name, nodes, {"x": (x, list(x.shape))}, initializers, opset=22)
    if output_shape is not None:
        # ONNX's shape inference does not read a constant output_shape: declare the output's
        # rank, as an exporter would, and leave the spatial sizes to the constant.
        declared = [*output_shape[:2], *(f"S{axis}" for axis in range(len(output_shape) - 2))]
        output = case.model.graph.output[0]
        output.CopyFrom(
            helper.make_tensor_value_info(output.name, output.type.tensor_type.elem_type, declared)
        )
    return case


MODEL_CASES = {
    # kernel 3 > stride 2: windows overlap, one input element can be the max of two windows.
    "overlapping_padded_2d": lambda: _pool_unpool(
        "overlapping_padded_2d",
        RNG.standard_normal((2, 2, 5, 5)).astype(np.float32),
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
    ),
    "f16_1d": lambda: _pool_unpool(
        "f16_1d",
        RNG.standard_normal((2, 3, 8)).astype(np.float16),
        kernel_shape=[2],
        strides=[2],
    ),
    "3d": lambda: _pool_unpool(
        "3d",
        RNG.standard_normal((1, 2, 4, 4, 4)).astype(np.float32),
        kernel_shape=[2, 2, 2],
        strides=[2, 2, 2],
    ),
    "constant_output_shape": lambda: _pool_unpool(
        "constant_output_shape",
        RNG.standard_normal((1, 2, 4, 6)).astype(np.float32),
        output_shape=[1, 2, 5, 7],
        kernel_shape=[2, 3],
        strides=[2, 3],
    ),
    # Every element names position (1, 1), inside all four windows: the last one wins.
    "same_position_last_wins": lambda: one_node_case(
        "same_position_last_wins",
        "MaxUnpool",
        {
            "x": np.array([[[[1, 2], [3, 4]]]], np.float32),
            "i": np.full((1, 1, 2, 2), 5, np.int64),
        },
        kernel_shape=[3, 3],
        opset=22,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_index_outside_its_window_fails_the_run() -> None:
    case = node_test_case("test_maxunpool_export_without_output_shape")
    ((inputs, expected),) = case.data_sets
    values, indices = inputs
    moved = indices.copy()
    moved.reshape(-1)[-1] = 0  # the last window covers rows 2-3, cols 2-3; 0 is (0, 0)
    wrong = NodeTestCase(case.name, case.model, (((values, moved), expected),), 1e-3, 1e-5)
    outcome = run_case(wrong)
    assert outcome.stage == "run"
    assert (
        "a MaxUnpool index does not name a position in its element's pooling window"
        in outcome.message
    )


def test_result_shape_that_disagrees_with_the_window_is_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<1x1x2x2xf32> {name = "x"}, tensor<1x1x2x2xi64> {name = "i"}) -> (tensor<1x1x3x3xf32> {name = "y"}) {
^bb0(%0: tensor<1x1x2x2xf32>, %1: tensor<1x1x2x2xi64>):
  %2 = "onnx.MaxUnpool"(%0, %1) {kernel_shape = [2, 2], niro.opset = 22, strides = [2, 2]} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>) -> tensor<1x1x3x3xf32> loc("MaxUnpool_0")
  niro.return %2 : tensor<1x1x3x3xf32>
}
"""
    )
    with pytest.raises(
        LoweringError,
        match=r"'onnx\.MaxUnpool' op result tensor<1x1x3x3xf32> differs from the inferred output "
        r"shape \(1, 1, 4, 4\)",
    ):
        lower_to_mlir(module)
