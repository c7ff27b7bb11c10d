"""Convolutions, pools and Resize with dynamic spatial dims, as PyTorch exports segmentation
and detection models (`dynamic_axes={'x': {0: 'batch', 2: 'h', 3: 'w'}}`): X is
(batch, C, h, w) with only the channel dim static. Output sizes (and SAME pads, AveragePool
divisors) are computed at run time. Each model is compiled once with iree-compile and run at
two or more image sizes against onnxruntime. Also: what stays refused, with the exact messages.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, cannot_lower, lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import helper

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx
from .dynamic_models import graph_model, one_node_model, random_weights


def _conv_resize(mode: str, *, to_input_size: bool, **attributes) -> onnx.ModelProto:
    """Conv (stride 2) -> Resize back: to X's own h, w given at run time as `sizes` (as
    `F.interpolate(y, size=x.shape[-2:])` exports) or by constant `scales` of 2."""
    weights = random_weights(10, w=(6, 4, 3, 3), b=(6,))
    node = helper.make_node
    nodes = [node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1])]
    if to_input_size and "axes" in attributes:
        nodes += [
            node("Shape", ["x"], ["hw"], start=2),
            node("Resize", ["c", "", "", "hw"], ["y"], mode=mode, **attributes),
        ]
    elif to_input_size:
        nodes += [
            node("Shape", ["x"], ["hw"], start=2),
            node("Shape", ["c"], ["nc"], end=2),
            node("Concat", ["nc", "hw"], ["sizes"], axis=0),
            node("Resize", ["c", "", "", "sizes"], ["y"], mode=mode, **attributes),
        ]
    else:
        weights["scales"] = np.array([1, 1, 2, 2], np.float32)
        nodes.append(node("Resize", ["c", "", "scales"], ["y"], mode=mode, **attributes))
    return graph_model(nodes, HW, weights)


def _pad_at_run_time_conv() -> onnx.ModelProto:
    """Pad by pads computed at run time (1 on h, w: min(Shape(x) twice, [0, 0, 1, 1] twice)),
    then Conv: shape inference gives the Pad, so the Conv's X, no dim at all (torchvision's
    detection models)."""
    node = helper.make_node
    nodes = [
        node("Shape", ["x"], ["s"]),
        node("Concat", ["s", "s"], ["ss"], axis=0),
        node("Min", ["ss", "most"], ["pads"]),
        node("Pad", ["x", "pads"], ["p"]),
        node("Conv", ["p", "w", "b"], ["y"], strides=[2, 2]),
    ]
    weights = random_weights(13, w=(5, 4, 3, 3), b=(5,))
    weights["most"] = np.array([0, 0, 1, 1] * 2, np.int64)
    return graph_model(nodes, NCHW, weights)


HW = ("n", 4, "h", "w")
NCHW = ("n", "c", "h", "w")

CASES = {
    "conv2d_bias_groups_strides_pads_dilations": (
        lambda: one_node_model(
            "Conv",
            HW,
            random_weights(1, w=(6, 2, 3, 3), b=(6,)),
            group=2,
            strides=[2, 1],
            pads=[1, 0, 2, 1],
            dilations=[2, 1],
        ),
        [(1, 4, 9, 8), (2, 4, 12, 15)],
    ),
    "conv2d_named_h_only_dynamic": (
        lambda: one_node_model(
            "Conv", ("n", 4, "h", 6), random_weights(2, w=(3, 4, 2, 3)), pads=[1, 1, 0, 1]
        ),
        [(1, 4, 5, 6), (2, 4, 8, 6)],
    ),
    "conv1d_strides_pads": (
        lambda: one_node_model(
            "Conv", ("n", 3, "t"), random_weights(3, w=(4, 3, 3), b=(4,)), strides=[2], pads=[2, 1]
        ),
        [(1, 3, 11), (2, 3, 20)],
    ),
    "conv3d_valid": (
        lambda: one_node_model(
            "Conv", ("n", 2, "d", "h", "w"), random_weights(4, w=(3, 2, 2, 3, 2)), auto_pad="VALID"
        ),
        [(1, 2, 5, 6, 4), (2, 2, 3, 7, 5)],
    ),
    "conv2d_depthwise_same_upper_stride": (
        lambda: one_node_model(
            "Conv",
            HW,
            random_weights(5, w=(4, 1, 3, 3)),
            group=4,
            auto_pad="SAME_UPPER",
            strides=[2, 2],
        ),
        [(1, 4, 7, 7), (2, 4, 10, 9)],
    ),
    "conv1d_same_lower_even_kernel": (
        lambda: one_node_model(
            "Conv",
            ("n", 3, "t"),
            random_weights(6, w=(2, 3, 4)),
            auto_pad="SAME_LOWER",
            strides=[2],
        ),
        [(1, 3, 11), (2, 3, 6)],
    ),
    # NOTE: every dim of X dynamic, as after a Pad with run-time pads (torchvision's detection
    # models): the channels come from W (C = W.shape[1] * group; ConvTranspose: W.shape[0]).
    "conv2d_all_dims_dynamic_channels_from_the_filter": (
        lambda: one_node_model(
            "Conv",
            NCHW,
            random_weights(11, w=(6, 2, 3, 3), b=(6,)),
            group=2,
            strides=[2, 1],
            pads=[1, 1, 1, 1],
        ),
        [(1, 4, 7, 8), (2, 4, 10, 5)],
    ),
    "pad_at_run_time_conv2d_channels_from_the_filter": (
        _pad_at_run_time_conv,
        [(1, 4, 7, 8), (2, 4, 10, 5)],
    ),
    "conv_transpose2d_all_dims_dynamic_channels_from_the_filter": (
        lambda: one_node_model(
            "ConvTranspose", NCHW, random_weights(12, w=(4, 3, 2, 2), b=(3,)), strides=[2, 2]
        ),
        [(1, 4, 4, 6), (2, 4, 7, 3)],
    ),
    "conv_transpose2d_strides_groups_output_padding": (
        lambda: one_node_model(
            "ConvTranspose",
            HW,
            random_weights(7, w=(4, 3, 3, 3), b=(6,)),
            group=2,
            strides=[2, 3],
            pads=[1, 0, 0, 1],
            output_padding=[1, 2],
        ),
        [(1, 4, 5, 4), (2, 4, 7, 9)],
    ),
    "conv_transpose1d_cropping_pads_dilations": (
        lambda: one_node_model(
            "ConvTranspose",
            ("n", 2, "t"),
            random_weights(8, w=(2, 3, 3)),
            strides=[2],
            pads=[3, 3],
            dilations=[2],
        ),
        [(1, 2, 6), (2, 2, 9)],
    ),
    "conv_transpose2d_unet_up": (
        lambda: one_node_model(
            "ConvTranspose", HW, random_weights(9, w=(4, 2, 2, 2), b=(2,)), strides=[2, 2]
        ),
        [(1, 4, 4, 6), (2, 4, 7, 3)],
    ),
    "max_pool2d_pads_strides": (
        lambda: one_node_model(
            "MaxPool", HW, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
        ),
        [(1, 4, 9, 8), (2, 4, 12, 15)],
    ),
    "max_pool2d_ceil_dilations": (
        lambda: one_node_model(
            "MaxPool",
            HW,
            kernel_shape=[3, 2],
            strides=[2, 2],
            pads=[1, 1, 1, 0],
            dilations=[1, 2],
            ceil_mode=1,
        ),
        [(1, 4, 9, 8), (2, 4, 10, 7), (1, 4, 4, 5)],
    ),
    "max_pool2d_same_upper": (
        lambda: one_node_model(
            "MaxPool", HW, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"
        ),
        [(1, 4, 7, 8), (2, 4, 10, 5)],
    ),
    "average_pool2d_count_include_pad": (
        lambda: one_node_model(
            "AveragePool",
            HW,
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            count_include_pad=1,
        ),
        [(1, 4, 7, 6), (2, 4, 10, 11)],
    ),
    "average_pool2d_exclude_pad": (
        lambda: one_node_model(
            "AveragePool", HW, kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]
        ),
        [(1, 4, 7, 6), (2, 4, 10, 11)],
    ),
    "average_pool1d_ceil_include_pad": (
        lambda: one_node_model(
            "AveragePool",
            ("n", 4, "t"),
            kernel_shape=[3],
            strides=[2],
            pads=[1, 1],
            ceil_mode=1,
            count_include_pad=1,
        ),
        [(1, 4, 8), (2, 4, 11)],
    ),
    "average_pool2d_same_lower": (
        lambda: one_node_model(
            "AveragePool", HW, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER"
        ),
        [(1, 4, 7, 6), (2, 4, 10, 11)],
    ),
    "lp_pool2d": (
        lambda: one_node_model("LpPool", HW, kernel_shape=[2, 2], strides=[2, 2], p=2),
        [(1, 4, 6, 6), (2, 4, 9, 7)],
    ),
    "global_average_pool": (
        lambda: one_node_model("GlobalAveragePool", HW),
        [(1, 4, 6, 6), (2, 4, 9, 7)],
    ),
    "global_max_pool": (
        lambda: one_node_model("GlobalMaxPool", HW),
        [(1, 4, 6, 6), (2, 4, 9, 7)],
    ),
    "conv_resize_linear_to_input_size": (
        lambda: _conv_resize("linear", to_input_size=True),
        [(1, 4, 8, 8), (2, 4, 17, 23)],
    ),
    # NOTE: with `axes` the batch axis is not resized; sizes for all 4 axes at run time would
    # resample the dynamic batch axis too (4^3 cubic taps, minutes in iree-compile).
    "conv_resize_cubic_align_corners_axes_to_input_size": (
        lambda: _conv_resize(
            "cubic", to_input_size=True, coordinate_transformation_mode="align_corners", axes=[2, 3]
        ),
        [(1, 4, 8, 8), (2, 4, 11, 6)],
    ),
    "conv_resize_nearest_scales": (
        lambda: _conv_resize("nearest", to_input_size=False),
        [(1, 4, 8, 8), (2, 4, 9, 14)],
    ),
}


@functools.cache
def _compiled(name: str, directory):
    model = CASES[name][0]()
    return model, compile_onnx(model, directory, name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_spatial_dims_compile_once_and_match_onnxruntime(name, tmp_path_factory) -> None:
    model, vm_module = _compiled(name, tmp_path_factory.getbasetemp())
    feeds_list = [
        {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}
        for seed, shape in enumerate(CASES[name][1])
    ]
    runs = assert_matches_onnxruntime(
        vm_module, model, feeds_list, function="g", rtol=1e-4, atol=1e-5
    )
    assert [len(outputs) for outputs in runs] == [1] * len(feeds_list)


def test_the_spatial_dims_are_dynamic_in_the_mlir() -> None:
    text = _lower(CASES["conv2d_named_h_only_dynamic"][0]())
    assert re.search(
        r"func.func @g\(%arg0: tensor<\?x4x\?x6xf32>.*-> \(tensor<\?x3x\?x6xf32>", text
    )
    # three outputs: a small convolution, IREE's named one, over the run-time height (the im2col
    # form at dynamic spatial dims is pinned by test_conv_fast_forms' small_dynamic case)
    assert re.search(
        r"linalg.conv_2d_nchw_fchw .* ins\(%\w+, %\w+ : tensor<\?x4x\?x8xf32>, tensor<3x4x2x3xf32>\)"
        r" outs\(%\w+ : tensor<\?x3x\?x6xf32>\)",
        text,
    )


def _lower(model: onnx.ModelProto) -> str:
    return lower_to_mlir(import_model(model, expand_functions=cannot_lower)).to_text()


REFUSED = {
    "MaxPool with a dynamic channel dim": (
        lambda: one_node_model("MaxPool", NCHW, kernel_shape=[2, 2]),
        r"'onnx.MaxPool' op needs a static channel dim 1 for input X \(batch and spatial dims "
        r"may be dynamic\), got \(None, None, None, None\)",
    ),
    "MaxPool indices": (
        lambda: graph_model(
            [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])], HW, None
        ),
        r"'onnx.MaxPool' op supports the Indices output with static spatial dims only, got "
        r"input X \(None, 4, None, None\)",
    ),
    "ConvTranspose SAME": (
        lambda: one_node_model(
            "ConvTranspose",
            HW,
            random_weights(2, w=(4, 2, 3, 3)),
            strides=[2, 2],
            auto_pad="SAME_UPPER",
        ),
        r"'onnx.ConvTranspose' op needs static spatial dims of input X with auto_pad SAME_UPPER, "
        r"got \(None, 4, None, None\)",
    ),
    "ConvTranspose output_shape": (
        lambda: one_node_model(
            "ConvTranspose",
            HW,
            random_weights(3, w=(4, 2, 3, 3)),
            strides=[2, 2],
            output_shape=[9, 9],
        ),
        r"'onnx.ConvTranspose' op needs static spatial dims of input X with attribute "
        r"'output_shape', got \(None, 4, None, None\)",
    ),
    "Resize antialias": (
        lambda: graph_model(
            [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1)],
            HW,
            {"scales": np.array([1, 1, 0.5, 0.5], np.float32)},
        ),
        r"'onnx.Resize' op antialias needs a static input size on axis 2",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_stays_refused(name) -> None:
    make, message = REFUSED[name]
    with pytest.raises(LoweringError, match=message):
        _lower(make())


def test_an_image_smaller_than_the_window_stops_with_the_reason(tmp_path_factory) -> None:
    # The same model runs at 9x8 in the test above; at 1x8 a 3-tall dilated window (extent 5)
    # with 1 + 2 rows of padding has no position: a static 1x8 is refused when compiling, a
    # dynamic one must not make a negative size at run time.
    name = "conv2d_bias_groups_strides_pads_dilations"
    _, vm_module = _compiled(name, tmp_path_factory.getbasetemp())
    x = np.zeros((1, 4, 1, 8), np.float32)
    with pytest.raises(RuntimeError, match=r"'onnx.Conv' op: spatial axis 0 of input X is smaller"):
        call(vm_module, "g", x)


def test_the_channels_of_an_all_dynamic_input_come_from_the_filter() -> None:
    text = _lower(CASES["conv2d_all_dims_dynamic_channels_from_the_filter"][0]())
    assert "tensor.cast %arg0 : tensor<?x?x?x?xf32> to tensor<?x4x?x?xf32>" in text
    assert re.search(r"cf.assert .*run-time channel count \(dim 1\) other than the 4", text)


def test_a_wrong_run_time_channel_count_stops_with_the_reason(tmp_path_factory) -> None:
    # NOTE: behind the Pad; on the function argument itself IREE moves the cast into its own
    # input check (`input0 shape dimension 1 mismatch; expected 4 but have 5`).
    _, vm_module = _compiled(
        "pad_at_run_time_conv2d_channels_from_the_filter", tmp_path_factory.getbasetemp()
    )
    x = np.zeros((1, 5, 6, 6), np.float32)
    with pytest.raises(
        RuntimeError,
        match=r"'onnx.Conv' op: input X has a run-time channel count \(dim 1\) other than the "
        r"4 its filter W needs",
    ):
        call(vm_module, "g", x)


def _fpn_last_level() -> onnx.ModelProto:
    """torchvision's FPN last level: Conv -> Conv (f); f feeds LastLevelMaxPool (kernel 1,
    stride 2) and the RPN head (Conv -> Relu -> Conv)."""
    weights = random_weights(
        21, wa=(8, 4, 1, 1), wb=(8, 8, 3, 3), wc=(8, 8, 3, 3), wd=(3, 8, 1, 1), bd=(3,)
    )
    weights["zero"] = np.zeros(8, np.float32)  # one bias shared by three convs, as exported
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "wa", "zero"], ["a"], kernel_shape=[1, 1]),
        node("Conv", ["a", "wb", "zero"], ["f"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("MaxPool", ["f"], ["pool"], kernel_shape=[1, 1], strides=[2, 2]),
        node("Conv", ["f", "wc", "zero"], ["h"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["h"], ["r"]),
        node("Conv", ["r", "wd", "bd"], ["y"], kernel_shape=[1, 1]),
    ]
    outputs = {"y": onnx.TensorProto.FLOAT, "pool": onnx.TensorProto.FLOAT}
    return graph_model(nodes, HW, weights, outputs=outputs)


def test_a_strided_pool_beside_a_conv_of_the_same_input_matches_onnxruntime(tmp_path) -> None:
    # The pool's input is cut to the rows its windows read (10 -> 9): IREE computed the head's
    # conv wrong when the uncut input fed both (windows.pad_for_window).
    model = _fpn_last_level()
    vm_module = compile_onnx(model, tmp_path, "fpn_last_level")
    feeds_list = [
        {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}
        for seed, shape in enumerate([(1, 4, 10, 10), (1, 4, 10, 13)])
    ]
    assert_matches_onnxruntime(vm_module, model, feeds_list, function="g", rtol=1e-4, atol=1e-5)
