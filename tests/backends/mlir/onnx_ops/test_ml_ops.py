"""`ai.onnx.ml` Binarizer and ArrayFeatureExtractor run end to end against onnx.reference:
every element type Binarizer allows (NaN and the threshold itself give 0), and
ArrayFeatureExtractor on 1-D X (a [1, K] result), higher ranks, 2-D indices and negative
indices. ONNX's two node tests run in tests/conformance/subset.py."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module

from tests.conformance.pipeline import run_case

from .model_cases import one_node_case

ML = "ai.onnx.ml"


RNG = np.random.default_rng(17)

MODEL_CASES = {
    "binarizer_f32_nan_and_threshold": lambda: one_node_case(
        "binarizer_f32_nan_and_threshold",
        "Binarizer",
        {"x": np.array([np.nan, 0.25, 0.2500001, -1.0, np.inf, 0.3], np.float32)},
        domain=ML,
        threshold=0.25,
    ),
    "binarizer_f64_default": lambda: one_node_case(
        "binarizer_f64_default",
        "Binarizer",
        {"x": RNG.standard_normal((3, 4))},
        domain=ML,
    ),
    "binarizer_i64": lambda: one_node_case(
        "binarizer_i64",
        "Binarizer",
        {"x": np.array([[-3, 1, 2], [5, 1, 0]], np.int64)},
        domain=ML,
        threshold=1.5,
    ),
    "binarizer_i32_negative_threshold": lambda: one_node_case(
        "binarizer_i32_negative_threshold",
        "Binarizer",
        {"x": np.arange(-4, 4, dtype=np.int32)},
        domain=ML,
        threshold=-1.0,
    ),
    "array_feature_extractor_1d": lambda: one_node_case(
        "array_feature_extractor_1d",
        "ArrayFeatureExtractor",
        {"x": np.arange(6, dtype=np.float32), "y": np.array([4, 0, 4], np.int64)},
        domain=ML,
    ),
    "array_feature_extractor_3d_i32": lambda: one_node_case(
        "array_feature_extractor_3d_i32",
        "ArrayFeatureExtractor",
        {
            "x": RNG.integers(-50, 50, (2, 3, 5)).astype(np.int32),
            "y": np.array([[3, 1]], np.int64),
        },
        domain=ML,
    ),
    "array_feature_extractor_negative_index": lambda: one_node_case(
        "array_feature_extractor_negative_index",
        "ArrayFeatureExtractor",
        {"x": RNG.standard_normal((4, 3)), "y": np.array([-1, 0, -3], np.int64)},
        domain=ML,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_binarizer_on_a_type_outside_the_schema_is_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<4xi8> {name = "x"}) -> (tensor<4xi8> {name = "y"}) {
^bb0(%0: tensor<4xi8>):
  %1 = "ai.onnx.ml.Binarizer"(%0) {niro.opset = 1, threshold = 1.0} : (tensor<4xi8>) -> tensor<4xi8> loc("Binarizer_0")
  niro.return %1 : tensor<4xi8>
}
"""
    )
    with pytest.raises(
        LoweringError,
        match=r"'ai\.onnx\.ml\.Binarizer' op expects a float, double, int64 or int32 input, got "
        r"tensor<4xi8>$",
    ):
        lower_to_mlir(module)


def test_array_feature_extractor_result_of_the_wrong_shape_is_refused() -> None:
    module = parse_module(
        """
niro.func @main(tensor<3x4xf32> {name = "x"}, tensor<2xi64> {name = "y"}) -> (tensor<3x3xf32> {name = "z"}) {
^bb0(%0: tensor<3x4xf32>, %1: tensor<2xi64>):
  %2 = "ai.onnx.ml.ArrayFeatureExtractor"(%0, %1) {niro.opset = 1} : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<3x3xf32> loc("ArrayFeatureExtractor_0")
  niro.return %2 : tensor<3x3xf32>
}
"""
    )
    with pytest.raises(
        LoweringError,
        match=r"'ai\.onnx\.ml\.ArrayFeatureExtractor' op result tensor<3x3xf32> differs from the "
        r"expected shape 3x2$",
    ):
        lower_to_mlir(module)
