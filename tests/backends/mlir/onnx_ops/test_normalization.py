"""Softmax/LogSoftmax/Hardmax and the normalizations lowered and run end to end."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import node_test_case

from .model_cases import one_node_case

NODE_TESTS = [
    "test_softmax_axis_0",
    "test_softmax_large_number",
    "test_hardmax_one_hot",
    "test_layer_normalization_4d_axis_negative_2",
    "test_rms_normalization_3d_axis_negative_2_epsilon",
    "test_batchnorm_example",
    "test_group_normalization_epsilon",
    "test_l2normalization_axis_0",  # a zero norm gives 0
    "test_mvn",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(5)


def _floats(*shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


MODEL_CASES = {
    # Before opset 13 the input is coerced to 2-D at `axis`; onnx.reference ignores that.
    "softmax_opset11_coerced": lambda: one_node_case(
        "softmax_opset11_coerced",
        "Softmax",
        {"x": _floats(2, 3, 4)},
        axis=1,
        opset=11,
        reference="onnxruntime",
    ),
    # One axis of f32: the named linalg.softmax; large values test the max subtraction.
    "softmax_named_middle_axis": lambda: one_node_case(
        "softmax_named_middle_axis",
        "Softmax",
        {"x": _floats(2, 5, 3) * 40},
        axis=1,
        opset=13,
    ),
    # Attention's masked scores: -inf entries (a causal mask) give exact zeros.
    "softmax_named_masked": lambda: one_node_case(
        "softmax_named_masked",
        "Softmax",
        {"x": _floats(2, 6, 6) + np.triu(np.full((6, 6), -np.inf, np.float32), 1)},
        axis=-1,
        opset=13,
    ),
    # f16 is computed in f32 by generics, narrowed at the end.
    "softmax_f16": lambda: one_node_case(
        "softmax_f16",
        "Softmax",
        {"x": _floats(3, 7, dtype=np.float16)},
        axis=-1,
        opset=13,
        reference="onnxruntime",
    ),
    "hardmax_opset11_coerced": lambda: one_node_case(
        "hardmax_opset11_coerced",
        "Hardmax",
        {"x": _floats(2, 3, 4)},
        axis=1,
        opset=11,
        reference="onnxruntime",
    ),
    # Mean and InvStdDev are f32 (the stash type) for f16 inputs, so only Y here; the node
    # tests check all three outputs for f32.
    "layer_norm_f16": lambda: one_node_case(
        "layer_norm_f16",
        "LayerNormalization",
        {
            "x": _floats(2, 3, 8, dtype=np.float16),
            "scale": _floats(8, dtype=np.float16),
            "bias": _floats(8, dtype=np.float16),
        },
        ["y"],
        axis=-1,
        opset=17,
        reference="onnxruntime",  # computes in f32 like niroc; onnx.reference in f16
    ),
    "batch_norm_constants": lambda: one_node_case(
        "batch_norm_constants",
        "BatchNormalization",
        {"x": _floats(2, 3, 4, 5)},
        initializers={
            "scale": _floats(3),
            "bias": _floats(3),
            "mean": _floats(3),
            "var": np.abs(_floats(3)),
        },
        opset=15,
    ),
    "batch_norm_training_running_stats": lambda: one_node_case(
        "batch_norm_training_running_stats",
        "BatchNormalization",
        {"x": _floats(4, 3, 5, 2), "scale": _floats(3), "bias": _floats(3), "mean": _floats(3), "var": np.abs(_floats(3))},
        ["y", "running_mean", "running_var"],
        opset=15,
        training_mode=1,
        momentum=0.7,
        epsilon=1e-3,
    ),
    "batch_norm_training_f16": lambda: one_node_case(
        "batch_norm_training_f16",
        "BatchNormalization",
        {
            "x": _floats(2, 3, 6, dtype=np.float16),
            "scale": _floats(3, dtype=np.float16),
            "bias": _floats(3, dtype=np.float16),
            "mean": _floats(3, dtype=np.float16),
            "var": np.abs(_floats(3, dtype=np.float16)),
        },
        ["y", "running_mean", "running_var"],
        opset=15,
        training_mode=1,
        reference="onnxruntime",
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_batch_norm_training_mode_uses_the_batch_statistics() -> None:
    outcome = run_case(node_test_case("test_batchnorm_example_training_mode"))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"
