"""Reductions, Split, Squeeze, Unsqueeze by run-time axes or sizes, and Scan, on inputs with
dynamic batch and sequence dims: ONNX leaves such results unranked (niroc ranks them) and the
lowerings take their sizes at run time. Each model is compiled once with iree-compile and run
at two shapes (and two axes values) against onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx


def _model(nodes, inputs, outputs, opset: int = 18, body=None) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in inputs],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


X = ("x", TensorProto.FLOAT, ["b", 4, "t"])
RNG = np.random.default_rng(21)


def _x(batch: int, length: int) -> np.ndarray:
    return RNG.standard_normal((batch, 4, length)).astype(np.float32)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean", "ReduceL2"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduction_by_run_time_axes(tmp_path, op: str, keepdims: int) -> None:
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    model = _model([node], [X, ("axes", TensorProto.INT64, [1])], ["y"])
    vm_module = compile_onnx(model, tmp_path, "reduce")
    feeds = [
        {"x": _x(2, 5), "axes": np.array([2], np.int64)},
        {"x": _x(3, 7), "axes": np.array([-3], np.int64)},
        {"x": _x(1, 6), "axes": np.array([1], np.int64)},
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-5)


def test_two_run_time_axes_of_a_4d_input(tmp_path) -> None:
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    x = ("x", TensorProto.FLOAT, ["b", 3, "h", "w"])
    model = _model([node], [x, ("axes", TensorProto.INT64, [2])], ["y"])
    vm_module = compile_onnx(model, tmp_path, "reduce2")
    data = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    feeds = [
        {"x": data, "axes": np.array([2, 3], np.int64)},
        {
            "x": RNG.standard_normal((3, 3, 2, 6)).astype(np.float32),
            "axes": np.array([0, -1], np.int64),
        },
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-5)


def test_split_by_run_time_sizes(tmp_path) -> None:
    node = helper.make_node("Split", ["x", "split"], ["y0", "y1"], axis=2)
    model = _model([node], [X, ("split", TensorProto.INT64, [2])], ["y0", "y1"])
    vm_module = compile_onnx(model, tmp_path, "split")
    feeds = [
        {"x": _x(2, 5), "split": np.array([2, 3], np.int64)},
        {"x": _x(3, 7), "split": np.array([7, 0], np.int64)},
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=0, atol=0)


def test_unsqueeze_then_squeeze_by_run_time_axes(tmp_path) -> None:
    nodes = [
        helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
        helper.make_node("Squeeze", ["u", "axes"], ["s"]),
    ]
    model = _model(nodes, [X, ("axes", TensorProto.INT64, [2])], ["u", "s"])
    vm_module = compile_onnx(model, tmp_path, "unsqueeze")
    feeds = [
        {"x": _x(2, 5), "axes": np.array([0, 3], np.int64)},
        {"x": _x(3, 7), "axes": np.array([-1, 1], np.int64)},
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=0, atol=0)


def test_scan_with_dynamic_batch_and_length(tmp_path) -> None:
    """A running sum over the sequence axis (1) of x [b, t, 4] with state [b, 4]: the first
    iteration is peeled to size the stacked output."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["state", "item"], ["next"]),
            helper.make_node("Mul", ["next", "item"], ["out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("state", TensorProto.FLOAT, ["b", 4]),
            helper.make_tensor_value_info("item", TensorProto.FLOAT, ["b", 4]),
        ],
        [
            helper.make_tensor_value_info("next", TensorProto.FLOAT, ["b", 4]),
            helper.make_tensor_value_info("out", TensorProto.FLOAT, ["b", 4]),
        ],
    )
    node = helper.make_node(
        "Scan", ["s0", "x"], ["final", "ys"], body=body, num_scan_inputs=1, scan_input_axes=[1]
    )
    inputs = [("s0", TensorProto.FLOAT, ["b", 4]), ("x", TensorProto.FLOAT, ["b", "t", 4])]
    model = _model([node], inputs, ["final", "ys"])
    vm_module = compile_onnx(model, tmp_path, "scan")
    feeds = [
        {
            "s0": RNG.standard_normal((2, 4)).astype(np.float32),
            "x": RNG.standard_normal((2, 5, 4)).astype(np.float32),
        },
        {
            "s0": RNG.standard_normal((3, 4)).astype(np.float32),
            "x": RNG.standard_normal((3, 1, 4)).astype(np.float32),
        },
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-5)
