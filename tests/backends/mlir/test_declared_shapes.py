"""The dims a model declares on value_info and on graph outputs are not proven: only inference
from the graph inputs and the ops types those values (a graph output's declared size counts only
on a dim inference knows nothing of). A declaration
that lies about a static size (an exporter's traced dims on a model exported with dynamic
axes) must neither make niroc compute another number than onnxruntime nor turn a dynamic
value static; one that tells the truth changes nothing."""

from __future__ import annotations

import numpy as np
import onnx
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper

from .mlir_harness import assert_matches_onnxruntime, compile_onnx


def _model(x_dims, relu_dims, output_dims, *, relu_is_output: bool = False) -> onnx.ModelProto:
    """y = Relu(x) + x, with the Relu's shape declared `relu_dims` (None: not declared) in
    value_info, or on the graph output the Relu also is, and y's `output_dims` on its output."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    relu = [helper.make_tensor_value_info("r", TensorProto.FLOAT, relu_dims)] if relu_dims is not None else []
    graph = helper.make_graph(
        nodes,
        "declared",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
        [*(relu if relu_is_output else []), helper.make_tensor_value_info("y", TensorProto.FLOAT, output_dims)],
        value_info=[] if relu_is_output else relu,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _feeds(*rows: int) -> list[dict[str, np.ndarray]]:
    return [{"x": np.linspace(-1, 1, count * 4, dtype=np.float32).reshape(count, 4)} for count in rows]


def _lowered(model: onnx.ModelProto) -> str:
    return lower_to_mlir(import_model(model)).to_text()


def test_lying_value_info_is_not_trusted(tmp_path):
    """value_info calls Relu(x) [3, 4] when x is [b, 4]: trusted, the Add broadcast a 1-row x
    to 3 rows."""
    model = _model(["b", 4], [3, 4], ["b", 4])
    vm_module = compile_onnx(model, tmp_path)
    assert_matches_onnxruntime(vm_module, model, _feeds(1, 3, 5), function="declared", rtol=0, atol=0)
    assert "3x4" not in _lowered(model)  # dynamic, as inference types it


def test_lying_output_shape_is_not_trusted(tmp_path):
    """The Relu is also a graph output, which the Add reads, declared [3, 4] when x is [b, 4]:
    trusted, both outputs had 3 rows at b=1. onnxruntime returns the true shapes (with a
    warning), and so must niroc."""
    model = _model(["b", 4], [3, 4], ["b", 4], relu_is_output=True)
    vm_module = compile_onnx(model, tmp_path)
    assert_matches_onnxruntime(vm_module, model, _feeds(1, 3, 5), function="declared", rtol=0, atol=0)
    assert "3x4" not in _lowered(model)  # dynamic, as inference types it


def test_lying_unread_output_shape_is_not_trusted(tmp_path):
    """A graph output no node reads, the Relu's, declared [3, 4] when x is [b, 4]: trusted, a
    1-row x came out as 3 rows (the clamped read repeating its row)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"])],
        "declared",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    vm_module = compile_onnx(model, tmp_path)
    assert_matches_onnxruntime(vm_module, model, _feeds(1, 3, 5), function="declared", rtol=0, atol=0)
    assert "3x4" not in _lowered(model)


def test_declared_output_size_fills_what_inference_cannot_know(tmp_path):
    """TopK with a run-time k: inference knows nothing of its result's dims, and the declared
    output shape is what types it (ONNX's own node tests are written so)."""
    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1)],
        "declared",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("values", TensorProto.FLOAT, [3, 2]),
            helper.make_tensor_value_info("indices", TensorProto.INT64, [3, 2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert "tensor<3x2xf32>" in _lowered(model)
    vm_module = compile_onnx(model, tmp_path)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-1].copy()
    feeds = [{"x": x, "k": np.array([2], np.int64)}]
    assert_matches_onnxruntime(vm_module, model, feeds, function="declared", rtol=0, atol=0)


def test_true_declarations_keep_static_types(tmp_path):
    """Declarations that tell the truth change nothing: a model static in fact stays static
    with them as without them."""
    model = _model([2, 4], [2, 4], [2, 4])
    text = _lowered(model)
    assert text == _lowered(_model([2, 4], None, None))
    assert "tensor<?" not in text and "tensor<2x4xf32>" in text
    vm_module = compile_onnx(model, tmp_path)
    assert_matches_onnxruntime(vm_module, model, _feeds(2), function="declared", rtol=0, atol=0)
