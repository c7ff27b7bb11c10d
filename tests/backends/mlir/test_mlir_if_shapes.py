"""An If whose branches yield different shapes (torchvision's `batched_nms`: an empty
tensor<0xi64> in one arm, tensor<?xi64> in the other) stays an `onnx.If` UnknownOp; its
lowering casts each arm's yields to the result types. Arms of different ranks are refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.frontends.onnx import import_model

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def _model(empty_type: str, empty_value: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(
        HEADER
        + f"""
g (float[N] x, bool c) => (float[M] y) {{
  y = If (c) <then_branch = t () => ({empty_type} e) {{
      e = Constant <value = {empty_type} {empty_value}> ()
    }}, else_branch = f () => (float[N] z) {{
      z = Relu (x)
    }}>
}}"""
    )


def test_arms_of_different_shapes_are_cast_to_the_result_type(tmp_path) -> None:
    model = _model("float[0]", "{}")
    vm_module = compile_onnx(model, tmp_path)
    x = np.array([-1, 2, 3], np.float32)
    feeds = [
        {"x": x, "c": np.array(False)},
        {"x": x, "c": np.array(True)},
        {"x": x[:1], "c": np.array(False)},
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=0, atol=0)


def test_arms_of_different_ranks_are_refused() -> None:
    model = _model("float", "{1.0}")
    with pytest.raises(LoweringError, match=r"'onnx.If' op then_branch yields tensor<f32> for result #0 of type tensor<\?xf32>: only shapes of the same rank"):
        lower_to_mlir(import_model(model))


def test_a_reshape_in_a_branch_reads_its_constant_shape_at_compile_time(tmp_path) -> None:
    """ONNX types a Reshape of a dynamic tensor to [-1, 4] inside a branch with a run-time
    dim, so the lowering computes the -1: from the shape's constant elements, on the host, not
    by a `tensor.extract` of the constant (IREE 3.13 crashed folding that when the constant was
    a `dense_resource` blob: "ElementsAttr does not provide iteration facilities"; small shape
    vectors are now `dense<...>`, test_mlir_output.py)."""
    model = onnx.parser.parse_model(
        HEADER
        + """
g (float[N, 8] x, bool c) => (float[M, 4] y) {
  y = If (c) <then_branch = t () => (float[A, 4] r) {
      shape = Constant <value = int64[2] {-1, 4}> ()
      r = Reshape (x, shape)
    }, else_branch = f () => (float[B, 4] s) {
      shape2 = Constant <value = int64[2] {-1, 4}> ()
      flat = Reshape (x, shape2)
      s = Neg (flat)
    }>
}"""
    )
    text = lower_to_mlir(import_model(model)).to_text()
    assert text.count("tensor.extract") == 1, text  # the condition's, no shape element
    vm_module = compile_onnx(model, tmp_path)
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    feeds = [{"x": x, "c": np.array(True)}, {"x": x[:1], "c": np.array(False)}]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=0, atol=0)
