"""Unique runs end to end: ONNX's node tests, and models whose expected outputs are computed
here from ONNX's definition with NumPy (onnx.reference gathers unsorted Y along axis 0 whatever
the axis, and sorts Y when it is the only output: it cannot judge those cases)."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

NODE_TESTS = ["test_unique_sorted_with_negative_axis"]  # the others: conformance/subset.py

OUTPUTS = ("Y", "indices", "inverse_indices", "counts")


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def expected_unique(x: np.ndarray, axis: int | None, sorted_: int) -> tuple[np.ndarray, ...]:
    """ONNX Unique's four outputs, from NumPy's sorted unique (NaNs equal) reordered by first
    occurrence when `sorted_` is 0."""
    source = x.reshape(-1) if axis is None else x
    y, indices, inverse, counts = np.unique(
        source, return_index=True, return_inverse=True, return_counts=True, axis=axis
    )
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(indices, kind="stable")
        place = np.empty_like(order)
        place[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if axis is None else axis)
        indices, counts, inverse = indices[order], counts[order], place[inverse]
    return y, indices.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)


def unique_case(
    name: str,
    x: np.ndarray,
    *,
    outputs: tuple[str, ...] = OUTPUTS,
    symbolic: bool = False,
    declared: dict[str, list] | None = None,
    **attributes,
) -> NodeTestCase:
    """A one-node Unique model; `outputs` may hold "" for an absent output. Result types are
    dynamic unless `declared` gives a shape."""
    shape = [f"d{axis}" for axis in range(x.ndim)] if symbolic else list(x.shape)
    all_values = expected_unique(x, attributes.get("axis"), attributes.get("sorted", 1))
    expected, graph_outputs = [], []
    for position, output in enumerate(outputs):
        if not output:
            continue
        value = all_values[position]
        expected.append(value)
        dims = (declared or {}).get(output, [None] * value.ndim)
        graph_outputs.append(
            helper.make_tensor_value_info(
                output, helper.np_dtype_to_tensor_dtype(value.dtype), dims
            )
        )
    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], list(outputs), **attributes)],
        name,
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), shape)],
        graph_outputs,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    return NodeTestCase(name, model, (((x,), tuple(expected)),), 1e-3, 1e-5)


RNG = np.random.default_rng(29)

MODEL_CASES = {
    "unsorted_axis_1": lambda: unique_case(
        "unsorted_axis_1",
        np.array([[3, 1, 3, 0, 1], [2, 5, 2, 0, 5]], np.int32),
        axis=1,
        sorted=0,
    ),
    "sorted_axis_0_dynamic_dims": lambda: unique_case(
        "sorted_axis_0_dynamic_dims",
        RNG.integers(0, 2, (7, 2, 2)).astype(np.float32),
        axis=0,
        symbolic=True,
    ),
    "unsorted_flattened_matrix": lambda: unique_case(
        "unsorted_flattened_matrix", RNG.integers(-3, 3, (4, 5)).astype(np.int64), sorted=0
    ),
    "unsigned_order_u8": lambda: unique_case(
        "unsigned_order_u8", np.array([200, 3, 255, 3, 128, 0, 200], np.uint8)
    ),
    "nan_and_signed_zero": lambda: unique_case(
        "nan_and_signed_zero",
        np.array([np.nan, -0.0, 1.5, 0.0, np.nan, -np.inf, 1.5], np.float32),
    ),
    "f16_dynamic_length": lambda: unique_case(
        "f16_dynamic_length",
        np.round(RNG.standard_normal(40), 1).astype(np.float16),
        symbolic=True,
    ),
    "only_y_unsorted": lambda: unique_case(
        "only_y_unsorted", np.array([5, 2, 5, 9, 2], np.int32), outputs=("Y",), sorted=0
    ),
    "absent_indices_output": lambda: unique_case(
        "absent_indices_output",
        np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 7.0]]),
        outputs=("Y", "", "inverse_indices", "counts"),
        axis=-2,
    ),
    "declared_static_sizes": lambda: unique_case(
        "declared_static_sizes",
        np.array([4, 4, 1, 4], np.int64),
        declared={"Y": [2], "indices": [2], "inverse_indices": [4], "counts": [2]},
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_declared_size_that_disagrees_fails_the_run() -> None:
    case = MODEL_CASES["declared_static_sizes"]()
    ((_, expected),) = case.data_sets
    three = np.array([4, 2, 1, 4], np.int64)  # three distinct values, two declared
    outcome = run_case(NodeTestCase(case.name, case.model, (((three,), expected),), 1e-3, 1e-5))
    assert outcome.stage == "run"
    assert (
        "Unique found a size other than the 2 that result #0 declares at dim 0" in outcome.message
    )


def test_unknown_sorted_value_is_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<4xf32> {name = "x"}) -> (tensor<?xf32> {name = "y"}) {
^bb0(%0: tensor<4xf32>):
  %1 = "onnx.Unique"(%0) {niro.opset = 11, sorted = 2} : (tensor<4xf32>) -> tensor<?xf32> loc("Unique_0")
  niro.return %1 : tensor<?xf32>
}
"""
    )
    with pytest.raises(LoweringError, match=r"'onnx\.Unique' op expects sorted 0 or 1, got 2$"):
        lower_to_mlir(module)


def test_axis_on_a_scalar_is_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<f32> {name = "x"}) -> (tensor<?xf32> {name = "y"}) {
^bb0(%0: tensor<f32>):
  %1 = "onnx.Unique"(%0) {axis = 0, niro.opset = 11} : (tensor<f32>) -> tensor<?xf32> loc("Unique_0")
  niro.return %1 : tensor<?xf32>
}
"""
    )
    with pytest.raises(
        LoweringError,
        match=r"'onnx\.Unique' op expects an input of rank >= 1 when 'axis' is given$",
    ):
        lower_to_mlir(module)
