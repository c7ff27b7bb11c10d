"""OptionalHasElement / OptionalGetElement on plain tensors and absent inputs, end to end; the
node tests whose inputs are optional-typed stay refused at import (Niro has no optional)."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module

from tests.conformance.pipeline import run_case

from .model_cases import one_node_case

MODEL_CASES = {
    "has_element_of_a_tensor": lambda: one_node_case(
        "has_element_of_a_tensor", "OptionalHasElement", {"x": np.ones((2, 3), np.float32)}, opset=18
    ),
    "get_element_of_a_tensor": lambda: one_node_case(
        "get_element_of_a_tensor", "OptionalGetElement", {"x": np.arange(5, dtype=np.int64)}, opset=18
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_has_element_without_an_input_is_false() -> None:
    module = parse_module(
        """
niro.func @main() -> (tensor<i1> {name = "y"}) {
^bb0:
  %0 = "onnx.OptionalHasElement"() {niro.opset = 18, absent_inputs = [0]} : () -> tensor<i1> loc("h")
  niro.return %0 : tensor<i1>
}
"""
    )
    text = lower_to_mlir(module).to_text()
    assert "arith.constant false" in text


def test_get_element_of_an_absent_input_is_refused() -> None:
    module = parse_module(
        """
niro.func @main() -> (tensor<2xf32> {name = "y"}) {
^bb0:
  %0 = "onnx.OptionalGetElement"() {niro.opset = 18, absent_inputs = [0]} : () -> tensor<2xf32> loc("g")
  niro.return %0 : tensor<2xf32>
}
"""
    )
    with pytest.raises(
        LoweringError, match=r"'onnx\.OptionalGetElement' op gets the element of an empty optional \(the input is absent\)$"
    ):
        lower_to_mlir(module)
