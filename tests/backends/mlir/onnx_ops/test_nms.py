"""NonMaxSuppression runs end to end against onnx.reference: ONNX's node tests (their result
types declare the row count, checked at run time), and models whose result row count is
dynamic, with dynamic batch/class/box dims, without a score threshold, with no or a negative
box limit, and random boxes in both box formats."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import TensorProto, helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

from .test_shape_ops import graph_case

NODE_TESTS = [  # the others are in tests/conformance/subset.py
    "test_nonmaxsuppression_identical_boxes",
    "test_nonmaxsuppression_single_box",
    "test_nonmaxsuppression_suppress_by_IOU",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(23)


def _corners(batches: int, count: int) -> np.ndarray:
    """[y1, x1, y2, x2] boxes, some corners flipped, overlapping often."""
    origin = RNG.uniform(0, 6, (batches, count, 2))
    size = RNG.uniform(0.5, 4, (batches, count, 2))
    boxes = np.concatenate([origin, origin + size], -1)
    flip = RNG.random((batches, count)) < 0.3
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


def _centers(batches: int, count: int) -> np.ndarray:
    """[x_center, y_center, width, height] boxes."""
    middle = RNG.uniform(0, 6, (batches, count, 2))
    size = RNG.uniform(0.5, 4, (batches, count, 2))
    return np.concatenate([middle, size], -1).astype(np.float32)


def _nms_case(name, boxes, scores, extra, *, symbolic=False, **attributes) -> NodeTestCase:
    """`extra` lists the optional inputs (max, iou, score threshold) in order; None leaves the
    input out. With `symbolic`, boxes and scores are declared with dim names only."""
    inputs = {
        "boxes": (boxes, ["B", "N", 4] if symbolic else list(boxes.shape)),
        "scores": (scores, ["B", "C", "N"] if symbolic else list(scores.shape)),
    }
    names = ["boxes", "scores"]
    for key, value in zip(("max", "iou", "threshold"), extra, strict=True):
        if value is not None:
            inputs[key] = (value, list(value.shape))
        names.append(key if value is not None else "")
    while names[-1] == "":
        names.pop()
    node = helper.make_node("NonMaxSuppression", names, ["y"], **attributes)
    return graph_case(name, [node], inputs, opset=11)


def _limits(most: int, iou: float, score: float | None):
    return (
        np.array([most], np.int64),
        np.array([iou], np.float32),
        None if score is None else np.array([score], np.float32),
    )


MODEL_CASES = {
    "corners_two_batches_three_classes": lambda: _nms_case(
        "corners_two_batches_three_classes",
        _corners(2, 10),
        RNG.random((2, 3, 10)).astype(np.float32),
        _limits(6, 0.3, 0.2),
    ),
    "centers_dynamic_dims": lambda: _nms_case(
        "centers_dynamic_dims",
        _centers(2, 9),
        RNG.random((2, 2, 9)).astype(np.float32),
        _limits(5, 0.25, 0.1),
        symbolic=True,
        center_point_box=1,
    ),
    "no_score_threshold_tied_scores": lambda: _nms_case(
        "no_score_threshold_tied_scores",
        _corners(1, 8),
        np.round(RNG.random((1, 2, 8)), 1).astype(np.float32),
        _limits(8, 0.1, None),
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def _selects_nothing(name: str, node_inputs: list[str], extra: tuple[np.ndarray, ...]):
    """A model whose expected result is empty, computed here: onnx.reference cannot run a
    negative or absent box limit (it calls `.size` on the int it clamps the limit to)."""
    node = helper.make_node("NonMaxSuppression", node_inputs, ["y"])
    graph = helper.make_graph(
        [node],
        name,
        [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4]),
        ]
        + [
            helper.make_tensor_value_info(key, helper.np_dtype_to_tensor_dtype(value.dtype), [1])
            for key, value in zip(node_inputs[2:], extra, strict=True)
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["K", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    feeds = (_corners(1, 4), RNG.random((1, 1, 4)).astype(np.float32), *extra)
    case = NodeTestCase(name, model, ((feeds, (np.zeros((0, 3), np.int64),)),), 1e-3, 1e-5)
    outcome = run_case(case)
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_absent_box_limit_selects_nothing() -> None:
    # ONNX: max_output_boxes_per_class defaults to 0.
    _selects_nothing("absent_limit", ["boxes", "scores"], ())


def test_negative_box_limit_selects_nothing() -> None:
    _selects_nothing("negative_limit", ["boxes", "scores", "max"], (np.array([-3], np.int64),))


def test_declared_row_count_that_disagrees_fails_the_run() -> None:
    case = node_test_case("test_nonmaxsuppression_limit_output_size")
    ((inputs, expected),) = case.data_sets
    boxes, scores, _, iou, threshold = inputs
    more = np.array([3], np.int64)  # three boxes survive, the result type declares two rows
    wrong = NodeTestCase(
        case.name, case.model, (((boxes, scores, more, iou, threshold), expected),), 1e-3, 1e-5
    )
    outcome = run_case(wrong)
    assert outcome.stage == "run"
    assert (
        "NonMaxSuppression selected a number of boxes other than the 2 rows its result type "
        "declares" in outcome.message
    )


def _module(attributes: str, boxes: str = "tensor<1x3x4xf32>") -> str:
    return f"""
niro.func @main({boxes} {{name = "b"}}, tensor<1x1x3xf32> {{name = "s"}}, tensor<1xi64> {{name = "m"}}) -> (tensor<?x3xi64> {{name = "y"}}) {{
^bb0(%0: {boxes}, %1: tensor<1x1x3xf32>, %2: tensor<1xi64>):
  %3 = "onnx.NonMaxSuppression"(%0, %1, %2) {{{attributes}niro.opset = 11}} : ({boxes}, tensor<1x1x3xf32>, tensor<1xi64>) -> tensor<?x3xi64> loc("NonMaxSuppression_0")
  niro.return %3 : tensor<?x3xi64>
}}
"""


def test_unknown_box_format_is_refused() -> None:
    with pytest.raises(
        LoweringError,
        match=r"'onnx\.NonMaxSuppression' op expects center_point_box 0 or 1, got 2$",
    ):
        lower_to_mlir(parse_module(_module("center_point_box = 2, ")))


def test_boxes_without_four_coordinates_are_refused() -> None:
    with pytest.raises(
        LoweringError,
        match=r"'onnx\.NonMaxSuppression' op expects boxes of shape \[batches, boxes, 4\], got "
        r"tensor<1x3x5xf32>$",
    ):
        lower_to_mlir(parse_module(_module("", boxes="tensor<1x3x5xf32>")))
