"""MelWeightMatrix runs end to end against onnx.reference: computed at run time (inputs fed to
the model, a static result shape) and at compile time (inputs as initializers, emitted as a
constant), with int64 and int32 sizes, float and double edges, and an f64 or int output type.
Refusals name the reason."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import TensorProto

from tests.conformance.pipeline import run_case

from .model_cases import one_node_case


def _inputs(bins, dft, rate, low, high, sizes=np.int32, edges=np.float32) -> dict:
    return {
        "num_mel_bins": np.array(bins, sizes), "dft_length": np.array(dft, sizes),
        "sample_rate": np.array(rate, sizes), "lower_edge_hertz": np.array(low, edges),
        "upper_edge_hertz": np.array(high, edges),
    }


MODEL_CASES = {
    "runtime_16k": lambda: one_node_case(
        "runtime_16k", "MelWeightMatrix", _inputs(10, 64, 16000, 20.0, 8000.0), opset=17
    ),
    "runtime_i64_f64_to_f64": lambda: one_node_case(
        "runtime_i64_f64_to_f64", "MelWeightMatrix",
        _inputs(12, 128, 22050, 0.0, 11025.0, np.int64, np.float64), opset=17,
        output_datatype=TensorProto.DOUBLE,
    ),
    "constant_i64_f64": lambda: one_node_case(
        "constant_i64_f64", "MelWeightMatrix", {},
        initializers=_inputs(16, 256, 16000, 125.0, 7600.0, np.int64, np.float64), opset=17,
    ),
    "constant_to_int32": lambda: one_node_case(
        "constant_to_int32", "MelWeightMatrix", {}, initializers=_inputs(8, 16, 8192, 0.0, 4096.0),
        opset=17, output_datatype=TensorProto.INT32,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_runtime_inputs_with_a_dynamic_result_are_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<i32> {name = "n"}, tensor<i32> {name = "d"}, tensor<i32> {name = "r"}, tensor<f32> {name = "lo"}, tensor<f32> {name = "hi"}) -> (tensor<?x?xf32> {name = "y"}) {
^bb0(%0: tensor<i32>, %1: tensor<i32>, %2: tensor<i32>, %3: tensor<f32>, %4: tensor<f32>):
  %5 = "onnx.MelWeightMatrix"(%0, %1, %2, %3, %4) {niro.opset = 17} : (tensor<i32>, tensor<i32>, tensor<i32>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32> loc("MelWeightMatrix_0")
  niro.return %5 : tensor<?x?xf32>
}
"""
    )
    with pytest.raises(
        LoweringError,
        match=r"'onnx\.MelWeightMatrix' op needs a static result shape when its inputs are "
        r"computed at run time \(the shape depends on num_mel_bins and dft_length\), got "
        r"tensor<\?x\?xf32>$",
    ):
        lower_to_mlir(module)
