"""Shrink run end to end against onnx.reference. Its node tests are opset 9, before ONNX gave
Shrink a function body (opset 18), so niroc lowers it itself, computing as the reference does
(f32 for inputs up to 16 bits, f64 above; integers truncate the result toward zero)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import node_test_case

from .model_cases import one_node_case

NODE_TESTS = ["test_shrink_hard", "test_shrink_soft"]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


MODEL_CASES = {
    # f16(-0.3) = -0.30005 is below -0.3 in f32: the threshold is not rounded to f16 first.
    "f16": (np.linspace(-1, 1, 21, dtype=np.float16), {"lambd": 0.3, "bias": 0.25}),
    "f64": (np.linspace(-2, 2, 17), {"lambd": 0.5, "bias": 0.5}),
    # 3 - 1.5 = 1.5 truncates to 1 (casting bias to int first would give 2).
    "i8": (np.arange(-6, 7, dtype=np.int8), {"lambd": 1.5, "bias": 1.5}),
    "i32": (np.array([-70000, -3, -2, 2, 3, 70000], np.int32), {"lambd": 2.0, "bias": 0.75}),
    "u8": (np.arange(0, 250, 17, dtype=np.uint8), {"lambd": 40.0, "bias": 3.0}),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    x, attributes = MODEL_CASES[name]
    outcome = run_case(one_node_case(name, "Shrink", {"x": x}, opset=9, **attributes))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"
