"""Scan (opset 9+) end to end against onnxruntime, scan axes other than 0 included: an input
scanned along axis 1 or -1 is transposed so the axis comes first, an output stacked along axis
1 is transposed back after the loop; directions reverse single inputs and outputs."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.pipeline import run_case

from .model_cases import one_node_case

RNG = np.random.default_rng(5)


def _body() -> object:
    """state (2,), x slice (2,), y slice (2,) -> state + x * y, and [state, x - y] stacked (2, 2)."""
    return helper.make_graph(
        [
            helper.make_node("Mul", ["x", "y"], ["xy"]),
            helper.make_node("Add", ["state", "xy"], ["next"]),
            helper.make_node("Sub", ["x", "y"], ["diff"]),
            helper.make_node("Concat", ["next", "diff"], ["flat"], axis=0),
            helper.make_node("Reshape", ["flat", "two_by_two"], ["out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("next", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 2]),
        ],
        [helper.make_tensor("two_by_two", TensorProto.INT64, [2], [2, 2])],
    )


CASES = {
    "axis_0": ({"scan_input_axes": [0, 0]}, (5, 2), (5, 2)),
    "input_axes_1_and_minus_1": ({"scan_input_axes": [1, -1]}, (2, 5), (2, 5)),
    "output_axis_1": ({"scan_input_axes": [1, 0], "scan_output_axes": [1]}, (2, 5), (5, 2)),
    "output_axis_2_reversed": (
        {"scan_input_axes": [0, 1], "scan_output_axes": [-1], "scan_input_directions": [1, 0], "scan_output_directions": [1]},
        (5, 2),
        (2, 5),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_scan_matches_the_reference(name: str) -> None:
    attributes, x_shape, y_shape = CASES[name]
    case = one_node_case(
        f"scan_{name}",
        "Scan",
        {
            "state": RNG.standard_normal(2).astype(np.float32),
            "xs": RNG.standard_normal(x_shape).astype(np.float32),
            "ys": RNG.standard_normal(y_shape).astype(np.float32),
        },
        ["final", "stacked"],
        opset=16,
        reference="onnxruntime",  # onnx.reference implements scan axes and directions 0 only
        body=_body(),
        num_scan_inputs=2,
        **attributes,
    )
    outcome = run_case(case)
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"
