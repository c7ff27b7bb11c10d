"""Results whose size is read from tensor data at run time (a shape input's element, a run-time
K or depth) and then concatenated: what torchvision's detection post-processing does (per
class: NonZero picks the scores over a threshold, TopK keeps min(K, that count), and
ConstantOfShape(Shape(kept scores)) makes their labels; one Concat joins the classes).

IREE (3.13) clones `arith.index_cast` and `tensor.extract` into the dispatches that use a size,
so a size that is just `index_cast(extract(t))` was recomputed inside the Concat's copy of a
ConstantOfShape fill, and iree-compile failed with "failed to resolve workgroup count hint in
terms of workload ordinals". Each model is compiled once and run at several inputs against
onnxruntime, empty selections included."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

node = helper.make_node


def _model(name, nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        inputs,
        outputs,
        [numpy_helper.from_array(np.asarray(value), key) for key, value in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _detection_labels() -> onnx.ModelProto:
    """scores [N, 2]: per class c, the (at most 3) best scores over 0.5 and a label tensor of
    c's of the same length, concatenated over the classes (torchvision's postprocess_detections
    without the boxes)."""
    nodes, scores, labels = [], [], []
    for c in range(2):
        p = f"class{c}_"
        nodes += [
            node("Gather", ["scores", f"c{c}"], [p + "column"], axis=1),
            node("Greater", [p + "column", "threshold"], [p + "keep"]),
            node("NonZero", [p + "keep"], [p + "where"]),
            node("Transpose", [p + "where"], [p + "where_t"], perm=[1, 0]),
            node("GatherND", [p + "column", p + "where_t"], [p + "kept"]),
            node("Shape", [p + "kept"], [p + "count"]),
            node("Concat", ["top", p + "count"], [p + "bounds"], axis=0),
            node("ReduceMin", [p + "bounds"], [p + "k0"], keepdims=0),
            node("Reshape", [p + "k0", "one"], [p + "k"]),
            node("TopK", [p + "kept", p + "k"], [p + "best", p + "order"]),
            node("Shape", [p + "best"], [p + "best_shape"]),
            node(
                "ConstantOfShape",
                [p + "best_shape"],
                [p + "label"],
                value=helper.make_tensor("value", TensorProto.INT64, [1], [c + 1]),
            ),
        ]
        scores.append(p + "best")
        labels.append(p + "label")
    nodes += [
        node("Concat", scores, ["best_scores"], axis=0),
        node("Concat", labels, ["labels"], axis=0),
    ]
    return _model(
        "detection_labels",
        nodes,
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 2])],
        [
            helper.make_tensor_value_info("best_scores", TensorProto.FLOAT, [None]),
            helper.make_tensor_value_info("labels", TensorProto.INT64, [None]),
        ],
        {
            "c0": np.int64(0),
            "c1": np.int64(1),
            "threshold": np.float32(0.5),
            "top": np.array([3], np.int64),
            "one": np.array([1], np.int64),
        },
    )


def _fills_of_shape_input() -> onnx.ModelProto:
    """ConstantOfShape and a rank-raising Expand sized by a shape input's elements, each
    concatenated with another of its kind."""
    nodes = []
    for i in range(2):
        nodes += [
            node("Slice", ["sizes", f"at{i}", f"end{i}"], [f"size{i}"]),
            node(
                "ConstantOfShape",
                [f"size{i}"],
                [f"fill{i}"],
                value=helper.make_tensor("value", TensorProto.FLOAT, [1], [i + 0.5]),
            ),
            node("Concat", [f"size{i}", "one"], [f"target{i}"], axis=0),
            node("Expand", ["row", f"target{i}"], [f"grid{i}"]),
        ]
    nodes += [
        node("Concat", ["fill0", "fill1"], ["fills"], axis=0),
        node("Concat", ["grid0", "grid1"], ["grids"], axis=0),
    ]
    return _model(
        "fills_of_shape_input",
        nodes,
        [helper.make_tensor_value_info("sizes", TensorProto.INT64, [2])],
        [
            helper.make_tensor_value_info("fills", TensorProto.FLOAT, [None]),
            helper.make_tensor_value_info("grids", TensorProto.FLOAT, [None, 1]),
        ],
        {
            "at0": np.array([0], np.int64),
            "end0": np.array([1], np.int64),
            "at1": np.array([1], np.int64),
            "end1": np.array([2], np.int64),
            "one": np.array([1], np.int64),
            "row": np.array([2.5], np.float32),
        },
    )


@pytest.fixture(scope="module")
def detection_labels(tmp_path_factory):
    model = _detection_labels()
    return model, compile_onnx(model, tmp_path_factory.mktemp("sizes"), "detection_labels")


@pytest.mark.parametrize("rows", [1, 6, 40])
def test_topk_of_nonzero_labels_concatenated_match_onnxruntime(detection_labels, rows: int) -> None:
    model, vm_module = detection_labels
    scores = np.random.default_rng(rows).random((rows, 2)).astype(np.float32)
    scores[0] = [0.1, 0.9]  # class 0 may keep nothing, class 1 keeps at least one
    [(best, labels)] = assert_matches_onnxruntime(
        vm_module, model, [{"scores": scores}], function="detection_labels", rtol=0, atol=0
    )
    assert labels.shape == best.shape
    assert set(labels.tolist()) <= {1, 2}


def test_fills_sized_by_a_shape_input_concatenated_match_onnxruntime(tmp_path) -> None:
    model = _fills_of_shape_input()
    vm_module = compile_onnx(model, tmp_path, "fills_of_shape_input")
    feeds = [{"sizes": np.array(sizes, np.int64)} for sizes in [(2, 3), (0, 4), (5, 0)]]
    results = assert_matches_onnxruntime(
        vm_module, model, feeds, function="fills_of_shape_input", rtol=0, atol=0
    )
    assert [fills.shape for fills, _ in results] == [(5,), (4,), (5,)]
