"""The com.microsoft ops onnxruntime's graph optimizer fuses (FusedMatMul, FusedConv,
FusedGemm; the integer products are in test_contrib_quantized.py), which a model saved optimized by
onnxruntime (`SessionOptions.optimized_model_filepath`) carries: one-node models against
onnxruntime's kernels, and PyTorch exports (testdata/pytorch) saved optimized at the extended
level, compiled once and run at two batch sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx

RNG = np.random.default_rng(29)
F32 = TensorProto.FLOAT
PYTORCH = Path(__file__).resolve().parents[4] / "testdata" / "pytorch"


def _model(node, inputs, weights) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(name, F32, shape) for name, shape in inputs],
        [helper.make_tensor_value_info("y", F32, None)],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=9)


def _f(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("trans_a, trans_b, alpha", [(0, 1, 0.125), (1, 0, 1.0), (1, 1, 2.0)])
def test_fused_matmul_matches_onnxruntime(tmp_path, trans_a, trans_b, alpha):
    """alpha * op(A) @ op(B), A [batch, 3, 4, 5] (its last two dims swapped when transA), B
    [5, 6] (likewise when transB)."""
    a_shape = ["b", 3, 5, 4] if trans_a else ["b", 3, 4, 5]
    weights = {"B": _f(6, 5) if trans_b else _f(5, 6)}
    node = helper.make_node(
        "FusedMatMul", ["A", "B"], ["y"], domain="com.microsoft", alpha=alpha,
        transA=trans_a, transB=trans_b,
    )  # fmt: skip
    model = _model(node, [("A", a_shape)], weights)
    module = compile_onnx(model, tmp_path)
    feeds = [{"A": _f(batch, *a_shape[1:])} for batch in (1, 2)]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "activation, params, with_z",
    [("Relu", [], False), ("LeakyRelu", [0.2], True), ("Clip", [0.0, 6.0], False), ("", [], True)],
)
def test_fused_conv_matches_onnxruntime(tmp_path, activation, params, with_z):
    """activation(Conv(X, W, B) + Z), 3x3 padded convolutions of a dynamic batch."""
    attributes = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]}
    if activation:
        attributes["activation"] = activation
    if params:
        attributes["activation_params"] = params
    names = ["X", "W", "B"] + (["Z"] if with_z else [])
    node = helper.make_node("FusedConv", names, ["y"], domain="com.microsoft", **attributes)
    inputs = [("X", ["b", 2, 6, 6])] + ([("Z", ["b", 4, 6, 6])] if with_z else [])
    model = _model(node, inputs, {"W": _f(4, 2, 3, 3), "B": _f(4)})
    module = compile_onnx(model, tmp_path)
    feeds = [
        {name: _f(batch, *shape[1:]) for name, shape in inputs} for batch in (1, 3)
    ]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "activation, attributes",
    [("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.1}), ("Tanh", {})],
)
def test_fused_gemm_matches_onnxruntime(tmp_path, activation, attributes):
    """activation(alpha * A @ B^T + beta * C), A [n, 8] of a dynamic n."""
    node = helper.make_node(
        "FusedGemm", ["A", "B", "C"], ["y"], domain="com.microsoft", activation=activation,
        alpha=0.5, beta=2.0, transB=1, **attributes,
    )  # fmt: skip
    model = _model(node, [("A", ["n", 8])], {"B": _f(6, 8), "C": _f(6)})
    module = compile_onnx(model, tmp_path)
    feeds = [{"A": _f(rows, 8)} for rows in (1, 5)]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "name, fused", [("resnet.onnx", "FusedConv"), ("llama.onnx", "FusedMatMul")]
)
def test_a_model_saved_optimized_by_onnxruntime_matches_it(tmp_path, name, fused):
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / name)
    onnxruntime.InferenceSession(str(PYTORCH / name), options, providers=["CPUExecutionProvider"])
    model = onnx.load(str(tmp_path / name))
    assert fused in {node.op_type for node in model.graph.node if node.domain == "com.microsoft"}
    module = compile_onnx(model, tmp_path)
    if name == "resnet.onnx":
        feeds = [{"x": _f(batch, 3, 32, 32)} for batch in (1, 2)]
    else:
        feeds = [{"ids": RNG.integers(0, 64, (batch, 9)).astype(np.int64)} for batch in (1, 2)]
    session = onnxruntime.InferenceSession(str(tmp_path / name), providers=["CPUExecutionProvider"])
    assert_matches_onnxruntime(
        module, session, feeds, function=model.graph.name, rtol=1e-4, atol=1e-4
    )
