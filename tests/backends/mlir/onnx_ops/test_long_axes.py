"""NonZero, Compress and TopK on long or dynamic axes, compiled once and run at several sizes
against onnxruntime: the O(n log n) NonZero (prefix count by doubling, binary search per
output) and the bitonic-sort TopK (dynamic axes, static ones over SHORT_AXIS). Their quadratic
forms took minutes on the 8.2M class scores of torchvision's RetinaNet; the millions of
elements here would not finish in a test's time with them."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from niro.backends.mlir.onnx_ops.selection import SHORT_AXIS
from onnx import TensorProto, helper

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx

node = helper.make_node


def _model(name, nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _check(tmp_path, model, feeds_list):
    vm_module = compile_onnx(model, tmp_path, model.graph.name)
    return assert_matches_onnxruntime(
        vm_module, model, feeds_list, function=model.graph.name, rtol=0, atol=0
    )


def test_nonzero_of_millions_of_elements(tmp_path) -> None:
    model = _model(
        "nonzero_long",
        [node("Greater", ["x", "threshold"], ["keep"]), node("NonZero", ["keep"], ["where"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("where", TensorProto.INT64, [2, None])],
        [helper.make_tensor("threshold", TensorProto.FLOAT, [], [0.9])],
    )
    rng = np.random.default_rng(0)
    sizes = [0, 1, 7, 1_000_000]
    feeds = [{"x": rng.random((n, 3)).astype(np.float32)} for n in sizes]
    feeds[1]["x"][:] = 1.0  # everything kept
    results = _check(tmp_path, model, feeds)
    assert results[1][0].shape == (2, 3)
    assert results[3][0].shape[1] > 250_000


def test_compress_with_a_long_condition(tmp_path) -> None:
    model = _model(
        "compress_long",
        [node("Compress", ["x", "condition"], ["y"], axis=0)],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2]),
            helper.make_tensor_value_info("condition", TensorProto.BOOL, ["C"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
    )
    rng = np.random.default_rng(1)
    feeds = [
        {"x": rng.random((n, 2)).astype(np.float32), "condition": rng.random(c) < 0.3}
        for n, c in [(5, 3), (200_000, 200_000)]
    ]
    _check(tmp_path, model, feeds)


def _topk(name, x_type, shape, axis, largest) -> onnx.ModelProto:
    out_shape = [None if dim == axis else size for dim, size in enumerate(shape)]
    return _model(
        name,
        [node("TopK", ["x", "k"], ["values", "indices"], axis=axis, largest=largest)],
        [
            helper.make_tensor_value_info("x", x_type, shape),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("values", x_type, out_shape),
            helper.make_tensor_value_info("indices", TensorProto.INT64, out_shape),
        ],
    )


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_of_a_dynamic_axis_is_sorted(tmp_path, largest: int) -> None:
    """Ties (equal elements keep index order) and NaN (the largest value) included."""
    model = _topk(f"topk_dynamic_{largest}", TensorProto.FLOAT, ["N"], 0, largest)
    rng = np.random.default_rng(largest)
    feeds = []
    for n, k in [(0, 0), (1, 1), (5, 5), (9, 4), (1000, 17), (300_000, 1000)]:
        x = rng.standard_normal(n).astype(np.float32)
        if n > 8:
            x[::3] = x[1]
            x[5] = np.nan
        feeds.append({"x": x, "k": np.array([k], np.int64)})
    results = _check(tmp_path, model, feeds)
    assert results[-1][1].shape == (1000,)


def test_topk_along_a_dynamic_leading_axis(tmp_path) -> None:
    model = _topk("topk_rows", TensorProto.INT64, ["N", 3], 0, 1)
    rng = np.random.default_rng(2)
    feeds = [
        {"x": rng.integers(-4, 4, (n, 3)), "k": np.array([k], np.int64)}
        for n, k in [(2, 1), (33, 33), (70, 6)]
    ]
    _check(tmp_path, model, feeds)


def test_topk_of_a_long_static_axis(tmp_path) -> None:
    length = 2 * SHORT_AXIS + 3
    model = _topk("topk_static", TensorProto.FLOAT, [2, length], 1, 0)
    x = np.random.default_rng(3).integers(0, 50, (2, length)).astype(np.float32)
    _check(tmp_path, model, [{"x": x, "k": np.array([k], np.int64)} for k in (0, 10, length)])
