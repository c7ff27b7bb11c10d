"""Dynamic-shape cases the dynamic conformance run (`make conformance-dynamic`) found wrong or
crashing: each model is compiled once by niroc + iree-compile, run at shapes onnxruntime accepts
and compared with it; inputs ONNX calls invalid must stop with niroc's run-time check."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx


def _model(nodes, inputs, outputs, opset=19) -> onnx.ModelProto:
    """A graph of `nodes` with inputs/outputs given as (name, element type, dims or None)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, kind, dims) for name, kind, dims in inputs],
        [helper.make_tensor_value_info(name, kind, dims) for name, kind, dims in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


F32, I64 = TensorProto.FLOAT, TensorProto.INT64


# -- Reshape: a 0 in the shape beside the -1 it would divide by --------------------------------


def test_reshape_allowzero_with_a_zero_dim_runs(tmp_path) -> None:
    model = _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
        [("x", F32, ["a", "b", "c"]), ("shape", I64, [3])],
        [("y", F32, ["p", "q", "r"])],
    )
    vm = compile_onnx(model, tmp_path)
    feeds = [
        {"x": np.zeros((0, 3, 4), np.float32), "shape": np.array([3, 4, 0], np.int64)},
        {
            "x": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
            "shape": np.array([4, -1, 2], np.int64),
        },
    ]
    assert_matches_onnxruntime(vm, model, feeds, function="g", rtol=0, atol=0)


def test_reshape_minus_one_beside_a_zero_dim_stops_with_a_check(tmp_path) -> None:
    model = _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)],
        [("x", F32, ["a", "b"]), ("shape", I64, [2])],
        [("y", F32, ["p", "q"])],
    )
    vm = compile_onnx(model, tmp_path)
    with pytest.raises(Exception, match="a -1 beside a 0 dim"):
        call(vm, "g", np.zeros((0, 3), np.float32), np.array([-1, 0], np.int64))
