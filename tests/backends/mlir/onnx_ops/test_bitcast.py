"""BitCast (opset 26) run end to end against onnx.reference: the bits of every element kept.

ONNX allows only types of one bit width (its shape inference rejects the rest, so the verifier
reports such a model); the lowering refuses them too, for modules built without ONNX.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import TensorProto

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import node_test_case

from .model_cases import one_node_case

NODE_TESTS = [
    "test_bitcast_2d_float32_to_int32",
    "test_bitcast_bool_to_uint8",
    "test_bitcast_int64_to_float64",
    "test_bitcast_uint16_to_int16",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


HALF_BITS = np.array([[0x3C00, 0x8000, 0x7C00], [0xFC00, 0x3555, 0x0001]], np.uint16)

MODEL_CASES = {
    # f16 <-> bf16 share a width but not a layout: the bits must move unchanged.
    "f16_to_bf16": (HALF_BITS.view(np.float16), TensorProto.BFLOAT16),
    "bf16_to_u16": (HALF_BITS.view(ml_dtypes.bfloat16), TensorProto.UINT16),
    "i16_to_f16": (HALF_BITS.view(np.int16), TensorProto.FLOAT16),
    "u8_to_bool": (np.array([0, 1, 2, 255], np.uint8), TensorProto.BOOL),  # non-zero: true
    "u32_to_f32_scalar": (np.array(0x40490FDB, np.uint32), TensorProto.FLOAT),
    "f64_to_u64": (np.array([1.5, -0.0, np.inf], np.float64), TensorProto.UINT64),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    x, to = MODEL_CASES[name]
    outcome = run_case(one_node_case(name, "BitCast", {"x": x}, opset=26, to=to))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_different_widths_are_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<4xf32> {name = "x"}) -> (tensor<4xi64> {name = "y"}) {
^bb0(%0: tensor<4xf32>):
  %1 = "onnx.BitCast"(%0) {niro.opset = 26, to = 7} : (tensor<4xf32>) -> tensor<4xi64> loc("BitCast_0")
  niro.return %1 : tensor<4xi64>
}
"""
    )
    with pytest.raises(
        LoweringError,
        match=r"'onnx\.BitCast' op cannot reinterpret f32 \(32 bits\) as i64 \(64 bits\): BitCast "
        r"needs one bit width",
    ):
        lower_to_mlir(module)
