"""RoiAlign with a run-time roi count, as detection models have it (the boxes NMS and TopK kept
go to `box_roi_pool`), and dynamic feature-map H/W (and channels): each model is compiled once
with iree-compile and run at two roi counts and image sizes against onnxruntime, in both
modes, both coordinate transformations, a fixed and the adaptive (sampling_ratio 0) grid.
ONNX's node tests (static shapes) are in test_nn.py and tests/conformance/subset.py. Also the
refusals, with their exact messages in MLIR terms.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import TensorProto, helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import node_test_case

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx

NODE_TESTS = ("test_roialign_aligned_false", "test_roialign_aligned_true")


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def _model(channels: int | str, roi_count_of_batch: str = "R", **attributes) -> onnx.ModelProto:
    """One RoiAlign over X (N, C, H, W) with rois (R, 4) and batch_indices (R,), every dim but
    the 4 coordinates (and C when an int) named, so dynamic. A different `roi_count_of_batch`
    leaves the two roi counts unproven equal, so RoiAlign itself checks them."""
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, "H", "W"]),
            helper.make_tensor_value_info("rois", TensorProto.FLOAT, ["R", 4]),
            helper.make_tensor_value_info("batch", TensorProto.INT64, [roi_count_of_batch]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


CASES = {
    "avg_output_half_pixel_sampling_2": dict(
        channels=3,
        mode="avg",
        coordinate_transformation_mode="output_half_pixel",
        sampling_ratio=2,
        output_height=3,
        output_width=4,
        spatial_scale=0.5,
    ),
    "max_half_pixel_sampling_3": dict(
        channels=3,
        mode="max",
        coordinate_transformation_mode="half_pixel",
        sampling_ratio=3,
        output_height=2,
        output_width=2,
        spatial_scale=0.5,
    ),
    "avg_half_pixel_adaptive_dynamic_channels": dict(
        channels="C",
        mode="avg",
        coordinate_transformation_mode="half_pixel",
        sampling_ratio=0,
        output_height=3,
        output_width=2,
        spatial_scale=0.25,
    ),
    "max_output_half_pixel_adaptive": dict(
        channels=3,
        mode="max",
        coordinate_transformation_mode="output_half_pixel",
        sampling_ratio=0,
        output_height=2,
        output_width=3,
        spatial_scale=0.5,
    ),
}


def _feeds(seed: int, rois: int, height: int, width: int, scale: float) -> dict[str, np.ndarray]:
    """Two images; rois in image coordinates (the feature map is `scale` of them), of very
    different sizes (so adaptive grids differ per roi), some reaching past the image and
    some malformed (x2 < x1 or y2 < y1)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, height, width)).astype(np.float32)
    extent = np.array([width, height]) / scale
    origin = rng.uniform(-0.1, 0.9, (rois, 2)) * extent
    size = rng.uniform(0.02, 0.8, (rois, 2)) * extent * rng.choice([1, 1, 1, -0.3], (rois, 1))
    boxes = np.concatenate([origin, origin + size], 1).astype(np.float32)
    batch = rng.integers(0, 2, rois).astype(np.int64)
    return {"x": x, "rois": boxes, "batch": batch}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_rois_compile_once_and_match_onnxruntime(name, tmp_path) -> None:
    attributes = dict(CASES[name])
    model = _model(attributes.pop("channels"), **attributes)
    assert [d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim][:1] == ["R"]
    vm_module = compile_onnx(model, tmp_path)
    scale = attributes["spatial_scale"]
    feeds = [_feeds(1, 7, 9, 11, scale), _feeds(2, 19, 13, 6, scale)]
    results = assert_matches_onnxruntime(
        vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-5
    )
    assert [outputs[0].shape[0] for outputs in results] == [7, 19]
    assert all(np.abs(outputs[0]).max() > 0.1 for outputs in results)  # not all empty grids


def _multi_scale_model() -> onnx.ModelProto:
    """torchvision's MultiScaleRoIAlign as its TorchScript export has it: the rois of each FPN
    level (given here by index lists, NonZero in the export) pooled from that level, then
    scattered into zeros at their positions, level after level (a chain of ScatterElements)."""
    node = helper.make_node
    nodes = [
        node("Shape", ["rois"], ["count"], end=1),
        node("Concat", ["count", "tail"], ["shape"], axis=0),
        node("ConstantOfShape", ["shape"], ["zeros"]),
    ]
    result = "zeros"
    for level, scale in ((0, 0.5), (1, 0.25)):
        i, r, b, y, e, out = (f"{name}{level}" for name in ("idx", "r", "b", "y", "e", "out"))
        nodes += [
            node("Gather", ["rois", i], [r], axis=0),
            node("Gather", ["batch", i], [b], axis=0),
            node(
                "RoiAlign",
                [f"feat{level}", r, b],
                [y],
                spatial_scale=scale,
                sampling_ratio=2,
                output_height=3,
                output_width=3,
                coordinate_transformation_mode="output_half_pixel",
            ),
            node("Reshape", [i, "column"], [f"{i}_column"]),
            node("Shape", [y], [f"{y}_shape"]),
            node("Expand", [f"{i}_column", f"{y}_shape"], [e]),
            node("ScatterElements", [result, e, y], [out], axis=0),
        ]
        result = out
    ints = lambda name, values: helper.make_tensor(name, TensorProto.INT64, [len(values)], values)  # noqa: E731
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("feat0", TensorProto.FLOAT, ["N", 3, "H0", "W0"]),
            helper.make_tensor_value_info("feat1", TensorProto.FLOAT, ["N", 3, "H1", "W1"]),
            helper.make_tensor_value_info("rois", TensorProto.FLOAT, ["R", 4]),
            helper.make_tensor_value_info("batch", TensorProto.INT64, ["R"]),
            helper.make_tensor_value_info("idx0", TensorProto.INT64, ["K0"]),
            helper.make_tensor_value_info("idx1", TensorProto.INT64, ["K1"]),
        ],
        [helper.make_tensor_value_info("out1", TensorProto.FLOAT, None)],
        [ints("tail", [3, 3, 3]), ints("column", [-1, 1, 1, 1])],
    )
    graph.node[2].attribute.append(
        helper.make_attribute("value", helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]))
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


def _multi_scale_feeds(seed: int, rois: int, on_level_1: int) -> dict[str, np.ndarray]:
    one = _feeds(seed, rois, 12, 10, 0.5)
    two = _feeds(seed + 1, rois, 6, 5, 0.25)
    order = np.random.default_rng(seed).permutation(rois)
    return {
        "feat0": one["x"],
        "feat1": two["x"],
        "rois": one["rois"],
        "batch": one["batch"],
        "idx0": np.sort(order[on_level_1:]),
        "idx1": np.sort(order[:on_level_1]),
    }


def test_multi_scale_roi_align_matches_onnxruntime(tmp_path) -> None:
    # Also the case of a level without rois (nothing to scatter, nothing read).
    model = _multi_scale_model()
    vm_module = compile_onnx(model, tmp_path)
    feeds = [_multi_scale_feeds(5, 9, 4), _multi_scale_feeds(6, 14, 0)]
    results = assert_matches_onnxruntime(
        vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-5
    )
    assert [outputs[0].shape for outputs in results] == [(9, 3, 3, 3), (14, 3, 3, 3)]


def test_no_rois_give_an_empty_result(tmp_path) -> None:
    model = _model(3, sampling_ratio=0, output_height=2, output_width=2)
    vm_module = compile_onnx(model, tmp_path)
    feeds = _feeds(3, 0, 5, 5, 1.0)
    (result,) = call(vm_module, "g", *feeds.values())
    assert np.asarray(result).shape == (0, 3, 2, 2)


def test_disagreeing_roi_counts_stop_with_the_reason(tmp_path) -> None:
    model = _model(3, "B", sampling_ratio=2)
    vm_module = compile_onnx(model, tmp_path)
    feeds = _feeds(4, 3, 5, 5, 1.0)
    feeds["batch"] = feeds["batch"][:2]
    with pytest.raises(
        RuntimeError,
        match=r"'onnx.RoiAlign' op: rois and batch_indices have different run-time roi counts",
    ):
        call(vm_module, "g", *feeds.values())


def _niro(x: str = "tensor<1x3x8x8xf32>", rois: str = "tensor<?x4xf32>", attributes: str = ""):
    result = "tensor<?x3x2x2xf32>"
    return parse_module(f"""
niro.func @main({x} {{name = "x"}}, {rois} {{name = "r"}}, tensor<?xi64> {{name = "b"}}) -> ({result} {{name = "y"}}) {{
^bb0(%0: {x}, %1: {rois}, %2: tensor<?xi64>):
  %3 = "onnx.RoiAlign"(%0, %1, %2) {{{attributes}output_height = 2, output_width = 2, niro.opset = 16}} : ({x}, {rois}, tensor<?xi64>) -> {result} loc("RoiAlign_0")
  niro.return %3 : {result}
}}
""")


REFUSED = {
    "f16": (
        dict(x="tensor<1x3x8x8xf16>", rois="tensor<?x4xf16>"),
        r"'onnx\.RoiAlign' op supports f32/f64 input X with rois of the same type only, got "
        r"tensor<1x3x8x8xf16> and tensor<\?x4xf16>$",
    ),
    "rois_of_five": (
        dict(rois="tensor<?x5xf32>"),
        r"'onnx\.RoiAlign' op expects rois of shape \[num_rois, 4\], got tensor<\?x5xf32>$",
    ),
    "three_d_input": (
        dict(x="tensor<3x8x8xf32>"),
        r"'onnx\.RoiAlign' op expects input X of shape \[N, C, H, W\], got tensor<3x8x8xf32>$",
    ),
    "unranked_input": (
        dict(x="tensor<*xf32>"),
        r"'onnx\.RoiAlign' op needs a ranked tensor input X, got tensor<\*xf32>$",
    ),
    "unknown_mode": (
        dict(attributes='mode = "min", '),
        r"'onnx\.RoiAlign' op does not support mode 'min' \(expected 'avg' or 'max'\)$",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_is_refused(name: str) -> None:
    arguments, message = REFUSED[name]
    with pytest.raises(LoweringError, match=message):
        lower_to_mlir(_niro(**arguments))
