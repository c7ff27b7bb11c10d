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


# -- Broadcasting a dynamic dim ----------------------------------------------------------------


def test_elementwise_broadcasts_a_dynamic_one_against_a_static_dim(tmp_path) -> None:
    model = _model(
        [helper.make_node("Add", ["x", "y"], ["z"])],
        [("x", F32, ["a", 4, "c", "d"]), ("y", F32, [3, 1, 5, 6])],
        [("z", F32, [3, 4, 5, 6])],
    )
    vm = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(0)
    y = rng.standard_normal((3, 1, 5, 6)).astype(np.float32)
    feeds = [
        {"x": rng.standard_normal(shape).astype(np.float32), "y": y}
        for shape in [(1, 4, 1, 6), (3, 4, 5, 6), (1, 4, 5, 1), (3, 4, 1, 1)]
    ]
    assert_matches_onnxruntime(vm, model, feeds, function="g", rtol=1e-6, atol=1e-6)
    with pytest.raises(Exception, match="is neither 1 nor the result dim 3"):
        call(vm, "g", np.zeros((2, 4, 5, 6), np.float32), y)


def test_elementwise_dynamic_dims_against_each_other_must_be_equal(tmp_path) -> None:
    """Two dynamic dims on one axis are not broadcast (see `builders.elementwise`'s NOTE): equal
    sizes match onnxruntime, a run-time 1 against another size stops with the op's message."""
    model = _model(
        [helper.make_node("Add", ["x", "y"], ["z"])],
        [("x", F32, ["a", "b", 4]), ("y", F32, ["c", "d", 4])],
        [("z", F32, ["e", "f", 4])],
    )
    vm = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(2)
    feeds = [
        {
            "x": rng.standard_normal((*shape, 4)).astype(np.float32),
            "y": rng.standard_normal((*shape, 4)).astype(np.float32),
        }
        for shape in ((3, 5), (1, 1), (0, 2))
    ]
    assert_matches_onnxruntime(vm, model, feeds, function="g", rtol=1e-6, atol=1e-6)
    with pytest.raises(Exception, match="dynamic dim 0 of operand #1 differs from the result dim"):
        call(vm, "g", np.zeros((3, 5, 4), np.float32), np.zeros((1, 5, 4), np.float32))


def test_matmul_batch_dims_all_dynamic_are_checked(tmp_path) -> None:
    model = _model(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        [("a", F32, ["a0", "a1", "a2", "a3"]), ("b", F32, ["b0", "b1", "b2", "b3"])],
        [("c", F32, ["c0", "c1", "c2", "c3"])],
    )
    vm = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(1)
    feeds = [
        {
            "a": rng.standard_normal((3, 2, 3, 4)).astype(np.float32),
            "b": rng.standard_normal((3, 2, 4, 2)).astype(np.float32),
        },
        {
            "a": rng.standard_normal((1, 1, 5, 2)).astype(np.float32),
            "b": rng.standard_normal((1, 1, 2, 3)).astype(np.float32),
        },
    ]
    assert_matches_onnxruntime(vm, model, feeds, function="g", rtol=1e-5, atol=1e-5)
    # ONNX broadcasts these to [3, 2, 3, 2]: a run-time 1 against another dynamic dim is not
    # broadcast, and must stop the program rather than return [3, 1, 3, 2].
    with pytest.raises(Exception, match="'onnx.MatMul' op: dynamic dim 0 of operand #1 differs"):
        call(vm, "g", np.ones((3, 1, 3, 4), np.float32), np.ones((1, 2, 4, 2), np.float32))
    with pytest.raises(Exception, match="'onnx.MatMul' op: dynamic dim 3 of operand #0 differs"):
        call(vm, "g", np.ones((1, 1, 3, 4), np.float32), np.ones((1, 1, 5, 2), np.float32))


def test_matmulinteger_zero_points_of_dynamic_length(tmp_path) -> None:
    u8 = TensorProto.UINT8
    model = _model(
        [helper.make_node("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["c"])],
        [
            ("a", u8, ["m", "k"]),
            ("b", u8, ["k2", "n"]),
            ("a_zero", u8, ["z"]),
            ("b_zero", u8, ["w"]),
        ],
        [("c", TensorProto.INT32, ["p", "q"])],
        opset=10,
    )
    vm = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(2)
    a = rng.integers(0, 255, (4, 3), dtype=np.uint8)
    b = rng.integers(0, 255, (3, 2), dtype=np.uint8)
    feeds = [
        {"a": a, "b": b, "a_zero": np.array([12], np.uint8), "b_zero": np.array([3], np.uint8)},
        {
            "a": a,
            "b": b,
            "a_zero": np.array([200], np.uint8),
            "b_zero": np.array([3, 250], np.uint8),
        },
    ]
    assert_matches_onnxruntime(vm, model, feeds, function="g", rtol=0, atol=0)
    with pytest.raises(
        Exception, match="'onnx.MatMulInteger' op: a_zero_point has neither 1 entry nor one per row"
    ):
        call(vm, "g", a, b, np.array([12, 1], np.uint8), np.array([3], np.uint8))
