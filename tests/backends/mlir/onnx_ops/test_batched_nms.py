"""torchvision's detection post-processing (per-class score filter and top-k, concatenated, then
batched_nms: boxes shifted by label * (largest coordinate + 1), one NonMaxSuppression) lowers
without the slices that made IREE 3.13's BubbleUpExpandShapesPass take time exponential in the
class count (SSDlite's 90 classes: a 45-minute iree-compile).

The pass moves a `tensor.extract_slice` up through the element-wise generic that makes its
input and bounds the slice's size with an integer-set solver; the size of anything cut from the
concatenation is a sum of one clamped top-k count per class. Two such slices were no-ops:
`offsets[:, None]`, exported as `Slice(offsets, 0, INT64_MAX)`, and NonMaxSuppression's slice of
batch 0 out of [1, boxes, 4]. The tests check the emitted form (no such slice: a compile-time
test would be a slow and flaky timing) and the numbers of the whole pattern against
onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper, numpy_helper

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx

INT64_MAX = 2**63 - 1


def _ints(output: str, values: list[int]) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [output], value=numpy_helper.from_array(np.array(values, np.int64))
    )


def _model(name: str, nodes, inputs, outputs, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(key, kind, shape) for key, kind, shape in inputs],
        [helper.make_tensor_value_info(output, kind, None) for output, kind in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _mlir(model: onnx.ModelProto) -> str:
    return lower_to_mlir(import_model(model)).to_text()


def _slice_model(start: int, end: int) -> onnx.ModelProto:
    nodes = [
        _ints("starts", [start]),
        _ints("ends", [end]),
        _ints("axes", [0]),
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["cut"]),
        helper.make_node("Relu", ["cut"], ["y"]),
    ]
    return _model(
        "slice", nodes, [("x", TensorProto.FLOAT, ["N", 3])], [("y", TensorProto.FLOAT)]
    )


def test_a_slice_that_keeps_a_dynamic_axis_whole_is_no_extract_slice() -> None:
    assert "tensor.extract_slice" not in _mlir(_slice_model(0, INT64_MAX))
    assert "tensor.extract_slice" in _mlir(_slice_model(0, 2))  # a real cut stays one


def _nms_model(batches: int | str) -> onnx.ModelProto:
    nodes = [
        _ints("most", [10]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "most"], ["selected"]),
    ]
    return _model(
        "nms",
        nodes,
        [
            ("boxes", TensorProto.FLOAT, [batches, "N", 4]),
            ("scores", TensorProto.FLOAT, [batches, 1, "N"]),
        ],
        [("selected", TensorProto.INT64)],
    )


def test_non_max_suppression_of_one_batch_takes_its_boxes_without_a_slice() -> None:
    text = _mlir(_nms_model(1))
    assert "tensor<1x?x4xf32> to tensor<?x4xf32>" not in text  # no extract_slice of batch 0
    assert "tensor.collapse_shape" in text
    # several batches: the slice at the batch the walk is at
    assert "tensor<?x?x4xf32> to tensor<?x4xf32>" in _mlir(_nms_model("B"))


CLASSES = 6
THRESHOLD = 0.3
TOP = 4


def _batched_nms_model() -> onnx.ModelProto:
    """boxes [N, 4] and scores [N, CLASSES] -> the kept boxes, scores and labels, as
    torchvision's SSD post-processing exports them (TorchScript, opset 17)."""
    nodes = [
        _ints("zero", [0]),
        _ints("one", [1]),
        _ints("top", [TOP]),
        _ints("end", [INT64_MAX]),
        helper.make_node(
            "Constant", [], ["threshold"], value=numpy_helper.from_array(np.float32(THRESHOLD))
        ),
    ]
    parts: dict[str, list[str]] = {"boxes": [], "scores": [], "labels": []}
    for label in range(CLASSES):
        p = f"c{label}_"
        nodes += [
            _ints(p + "label", [label]),
            helper.make_node("Gather", ["scores", p + "label"], [p + "column"], axis=1),
            helper.make_node("Squeeze", [p + "column", "one"], [p + "score"]),
            helper.make_node("Greater", [p + "score", "threshold"], [p + "passes"]),
            helper.make_node("NonZero", [p + "passes"], [p + "where"]),
            helper.make_node("Transpose", [p + "where"], [p + "rows"], perm=[1, 0]),
            helper.make_node("GatherND", [p + "score", p + "rows"], [p + "kept"]),
            helper.make_node("GatherND", ["boxes", p + "rows"], [p + "kept_boxes"]),
            helper.make_node("Shape", [p + "kept"], [p + "count"]),
            helper.make_node("Concat", ["top", p + "count"], [p + "bounds"], axis=0),
            helper.make_node("ReduceMin", [p + "bounds"], [p + "k"], keepdims=1),
            helper.make_node("TopK", [p + "kept", p + "k"], [p + "best", p + "order"]),
            helper.make_node("Gather", [p + "kept_boxes", p + "order"], [p + "best_boxes"]),
            helper.make_node("Shape", [p + "best"], [p + "best_count"]),
            helper.make_node(
                "ConstantOfShape",
                [p + "best_count"],
                [p + "labels"],
                value=numpy_helper.from_array(np.array([label], np.int64)),
            ),
        ]
        parts["boxes"].append(p + "best_boxes")
        parts["scores"].append(p + "best")
        parts["labels"].append(p + "labels")
    nodes += [
        helper.make_node("Concat", parts["boxes"], ["all_boxes"], axis=0),
        helper.make_node("Concat", parts["scores"], ["all_scores"], axis=0),
        helper.make_node("Concat", parts["labels"], ["all_labels"], axis=0),
        # batched_nms: boxes + labels * (largest coordinate + 1), offsets[:, None]
        helper.make_node("ReduceMax", ["all_boxes"], ["largest"], keepdims=0),
        helper.make_node("Cast", ["all_labels"], ["label_values"], to=TensorProto.FLOAT),
        helper.make_node(
            "Constant", [], ["unit"], value=numpy_helper.from_array(np.float32(1.0))
        ),
        helper.make_node("Add", ["largest", "unit"], ["stride"]),
        helper.make_node("Mul", ["label_values", "stride"], ["offsets"]),
        helper.make_node("Slice", ["offsets", "zero", "end", "zero", "one"], ["offsets_all"]),
        helper.make_node("Unsqueeze", ["offsets_all", "one"], ["offsets_column"]),
        helper.make_node("Add", ["all_boxes", "offsets_column"], ["shifted"]),
        helper.make_node("Unsqueeze", ["shifted", "zero"], ["nms_boxes"]),
        _ints("zero_one", [0, 1]),
        helper.make_node("Unsqueeze", ["all_scores", "zero_one"], ["nms_scores"]),
        _ints("most", [INT64_MAX]),
        helper.make_node(
            "Constant", [], ["iou"], value=numpy_helper.from_array(np.array([0.5], np.float32))
        ),
        helper.make_node(
            "NonMaxSuppression", ["nms_boxes", "nms_scores", "most", "iou"], ["selected"]
        ),
        _ints("two", [2]),
        helper.make_node("Gather", ["selected", "two"], ["keep_column"], axis=1),
        helper.make_node("Squeeze", ["keep_column", "one"], ["keep"]),
        helper.make_node("Gather", ["all_boxes", "keep"], ["kept_boxes"], axis=0),
        helper.make_node("Gather", ["all_scores", "keep"], ["kept_scores"], axis=0),
        helper.make_node("Gather", ["all_labels", "keep"], ["kept_labels"], axis=0),
    ]
    return _model(
        "batched_nms",
        nodes,
        [
            ("boxes", TensorProto.FLOAT, ["N", 4]),
            ("scores", TensorProto.FLOAT, ["N", CLASSES]),
        ],
        [
            ("kept_boxes", TensorProto.FLOAT),
            ("kept_scores", TensorProto.FLOAT),
            ("kept_labels", TensorProto.INT64),
        ],
    )


def _feeds(count: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 20, (count, 2))
    size = rng.uniform(2, 8, (count, 2))
    boxes = np.concatenate([corner, corner + size], axis=1).astype(np.float32)
    return {"boxes": boxes, "scores": rng.random((count, CLASSES)).astype(np.float32)}


@pytest.fixture(scope="module")
def batched_nms(tmp_path_factory):
    return compile_onnx(_batched_nms_model(), tmp_path_factory.mktemp("batched_nms"))


def test_batched_nms_lowers_without_a_slice_of_the_concatenation() -> None:
    """The extract_slices left are of i64 index lists (each class's NonZero, the NMS result's
    rows); the two f32 ones of the concatenated boxes and scores (`offsets[:, None]`, the NMS
    batch) are gone."""
    text = _mlir(_batched_nms_model())
    slices = [line for line in text.splitlines() if "tensor.extract_slice" in line]
    assert len(slices) == CLASSES + 1
    assert not [line for line in slices if "f32>" in line]


def test_batched_nms_gives_onnxruntime_numbers(batched_nms) -> None:
    feeds = [_feeds(count, seed) for seed, count in enumerate((40, 13))]
    assert_matches_onnxruntime(
        batched_nms, _batched_nms_model(), feeds, function="batched_nms", rtol=0, atol=0
    )
