"""CumSum and CumProd (one shared lowering) run end to end against onnx.reference.

ONNX's node tests feed `axis` as a graph input, so the lowering picks the axis at run time; the
`one_node_case` models give it as an initializer (as exported models do) and cover f16 and
64-bit integers, and a run-time axis out of range must stop the program.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

from .model_cases import one_node_case

NODE_TESTS = [
    "test_cumprod_1d_reverse_exclusive",
    "test_cumprod_2d_int32",
    "test_cumprod_2d_negative_axis",
    "test_cumsum_1d_reverse_exclusive",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(11)

MODEL_CASES = {
    "cumprod_f16_constant_axis": lambda: one_node_case(
        "cumprod_f16_constant_axis",
        "CumProd",
        {"x": RNG.uniform(0.5, 1.5, (3, 6)).astype(np.float16)},
        initializers={"axis": np.array(1, np.int64)},
        opset=26,
    ),
    "cumprod_i64_3d_exclusive_reverse": lambda: one_node_case(
        "cumprod_i64_3d_exclusive_reverse",
        "CumProd",
        {"x": RNG.integers(-3, 4, (2, 4, 3)).astype(np.int64)},
        initializers={"axis": np.array(-2, np.int32)},
        exclusive=1,
        reverse=1,
        opset=26,
    ),
    "cumprod_f32_runtime_axis_0": lambda: one_node_case(
        "cumprod_f32_runtime_axis_0",
        "CumProd",
        {"x": RNG.uniform(-2, 2, (4, 3)).astype(np.float32), "axis": np.array(0, np.int32)},
        exclusive=1,
        opset=26,
    ),
    "cumsum_f16_constant_axis": lambda: one_node_case(
        "cumsum_f16_constant_axis",
        "CumSum",
        {"x": RNG.standard_normal((3, 5)).astype(np.float16)},
        initializers={"axis": np.array(0, np.int64)},
        reverse=1,
        opset=14,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_runtime_axis_out_of_range_fails_the_run() -> None:
    case = node_test_case("test_cumprod_2d_axis_0")
    ((inputs, expected),) = case.data_sets
    wrong = NodeTestCase(
        case.name, case.model, (((inputs[0], np.array(2, inputs[1].dtype)), expected),), 1e-3, 1e-5
    )
    outcome = run_case(wrong)
    assert outcome.stage == "run"
    assert "the CumProd axis is out of range" in outcome.message
