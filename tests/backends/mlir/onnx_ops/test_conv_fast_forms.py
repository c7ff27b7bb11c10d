"""The forms Conv takes for IREE's sake, each compiled with iree-compile, run and compared with
onnxruntime: a convolution as a matrix product per image and group (the windows gathered by one
im2col copy, or a plain reshape for a 1x1 kernel of stride 1), with strides, dilations, pads,
groups, 1-D and 3-D kernels, and dynamic batch and spatial dims; a depthwise convolution
(one input channel per output) of a static input as one element-wise sum over its kernel taps
(f32, f16 and the integer one of ConvInteger; a strided one's taps cut from its input's stride
phases, also of dynamic size), or in place past `TAPS_LIMIT` taps or, of unit strides, when a
reshape makes its dynamic input; a small stride-1
convolution (at most 32 outputs, more than one tap) as IREE's named `linalg.conv_2d_nchw_fchw`;
ConvTranspose through the same forms.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx
from .dynamic_models import graph_model, random_weights


def _every_output(nodes, x_shape, weights):
    """A graph of `nodes` on `x` whose every node's (f32) output is a graph output."""
    outputs = {node.output[0]: TensorProto.FLOAT for node in nodes}
    return graph_model(nodes, x_shape, weights, outputs=outputs)


def _model(x_shape=(1, 8, 9, 10)):
    weights = random_weights(
        3,
        w1=(6, 8, 1, 1),
        b1=(6,),
        w2=(4, 8, 1, 1),
        w3=(5, 8, 1, 3),
        w4=(8, 2, 1, 1),
        b4=(8,),
        w5=(3, 8, 3, 3),
        w6=(6, 4, 3, 2),
        w7=(8, 1, 3, 3),
        w8=(4, 8, 2, 2),
        w9=(8, 3, 2, 2),
    )
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["strided_pointwise"], strides=[2, 2]),
        node("Conv", ["x", "w2"], ["padded_pointwise"], pads=[1, 0, 1, 2]),
        node("Conv", ["x", "w1"], ["pointwise"]),
        node("Conv", ["x", "w3"], ["row_strided"], strides=[2, 1], pads=[0, 1, 0, 1]),
        node("Conv", ["x", "w4", "b4"], ["grouped_pointwise"], group=4, strides=[3, 2]),
        node("Conv", ["x", "w5"], ["strided_3x3"], strides=[2, 2], pads=[1, 1, 1, 1]),
        node(
            "Conv", ["x", "w6"], ["grouped_dilated"], group=2, dilations=[2, 1], pads=[1, 0, 2, 1]
        ),
        node("Conv", ["x", "w7"], ["depthwise"], group=8, strides=[2, 1], auto_pad="SAME_UPPER"),
        node("Conv", ["x", "w8"], ["same_lower"], auto_pad="SAME_LOWER", strides=[1, 2]),
        node("ConvTranspose", ["x", "w9"], ["transposed"], strides=[2, 2], pads=[0, 1, 1, 0]),
    ]
    return _every_output(nodes, x_shape, weights)


def _small(x_shape=(1, 6, 9, 10)):
    """Stride-1 convolutions on both sides of the named form's bounds: 32 outputs and 3x3 or
    dilated 5x5 (named), 33 outputs or a 1x1 kernel (the product)."""
    weights = random_weights(7, w1=(8, 6, 3, 3), b1=(8,), w2=(32, 6, 5, 5), w3=(33, 6, 3, 3))
    weights.update(random_weights(8, w4=(4, 6, 1, 1), b4=(4,)))
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["padded_3x3"], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "w2"], ["dilated_5x5"], dilations=[1, 2], pads=[2, 4, 2, 4]),
        node("Conv", ["x", "w3"], ["wide_3x3"], pads=[0, 1, 2, 1]),
        node("Conv", ["x", "w4", "b4"], ["pointwise"]),
    ]
    return _every_output(nodes, x_shape, weights)


def _one_d():
    weights = random_weights(4, w=(5, 4, 3), b=(5,))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[3], pads=[1, 2])]
    return graph_model(nodes, (1, 4, 11), weights)


def _three_d():
    weights = random_weights(6, w=(4, 3, 2, 3, 1))
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], strides=[1, 2, 1], pads=[0, 1, 0] * 2)]
    return graph_model(nodes, ("n", 3, 4, 5, 3), weights)


def _three_d_grouped(x_shape=(1, 4, 4, 5, 3)):
    """3-D grouped convolutions: the product with the output rows a batch dim, a row's
    positions (two axes) merged into one dim and split back."""
    weights = random_weights(13, w=(6, 2, 2, 1, 3), p=(4, 1, 1, 1, 1))
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w"], ["grouped"], group=2, pads=[1, 0, 1, 0, 0, 1]),
        node("Conv", ["x", "p"], ["pointwise"], group=4),
    ]
    return _every_output(nodes, x_shape, weights)


def _depthwise(x_shape=(1, 4, 11, 12)):
    """Depthwise convolutions: MobileNet's 5x5 (stride 1, bias) and 3x3 (stride 2), a depth
    multiplier of 2 with dilations, a 1x5 kernel, and a 9x9 kernel (81 taps, past
    `TAPS_LIMIT`: computed in place)."""
    weights = random_weights(
        9,
        w5=(4, 1, 5, 5),
        b5=(4,),
        w3=(4, 1, 3, 3),
        wm=(8, 1, 3, 3),
        wr=(4, 1, 1, 5),
        w9=(4, 1, 9, 9),
    )
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w5", "b5"], ["dw_5x5"], group=4, pads=[2, 2, 2, 2]),
        node("Conv", ["x", "w3"], ["dw_strided"], group=4, strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "wm"], ["multiplier"], group=4, dilations=[2, 1], pads=[2, 1, 1, 0]),
        node("Conv", ["x", "wr"], ["row"], group=4, strides=[1, 3], auto_pad="SAME_LOWER"),
        node("Conv", ["x", "w9"], ["dw_9x9"], group=4, pads=[4, 4, 4, 4]),
    ]
    return _every_output(nodes, x_shape, weights)


def _depthwise_f16():
    weights = {"w": random_weights(10, w=(6, 1, 3, 3))["w"].astype(np.float16)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], group=6, pads=[1, 1, 1, 1])]
    return graph_model(
        nodes,
        (2, 6, 7, 9),
        weights,
        x_type=TensorProto.FLOAT16,
        outputs={"y": TensorProto.FLOAT16},
    )


def _depthwise_integer(strides=(1, 1)):
    """ConvInteger of one channel per group: the tap sum on i32 with the zero points
    subtracted (strided: the direct form)."""
    rng = np.random.default_rng(11)
    weights = {
        "w": rng.integers(0, 255, (3, 1, 3, 3)).astype(np.uint8),
        "x_zero": np.array(120, np.uint8),
        "w_zero": np.array(130, np.uint8),
    }
    node = helper.make_node(
        "ConvInteger",
        ["x", "w", "x_zero", "w_zero"],
        ["y"],
        group=3,
        pads=[1, 1, 1, 1],
        strides=list(strides),
    )
    return graph_model(
        [node],
        (2, 3, 6, 7),
        weights,
        outputs={"y": TensorProto.INT32},
        x_type=TensorProto.UINT8,
    )


def _upsampling(x_shape=(1, 4, 5, 6)):
    """ConvTranspose whose strides equal its kernel (a UNet's upsampling): 2x2 with a bias, and
    3x2 in two groups; one with pads (the general form) beside them."""
    weights = random_weights(12, w1=(4, 3, 2, 2), b1=(3,), w2=(4, 2, 3, 2), w3=(4, 3, 2, 2))
    node = helper.make_node
    nodes = [
        node("ConvTranspose", ["x", "w1", "b1"], ["up"], strides=[2, 2]),
        node("ConvTranspose", ["x", "w2"], ["grouped"], strides=[3, 2], group=2),
        node("ConvTranspose", ["x", "w3"], ["padded"], strides=[2, 2], pads=[0, 1, 1, 0]),
    ]
    return _every_output(nodes, x_shape, weights)


def _many_outputs(x_shape=(1, 6, 14, 14)):
    """Convolutions of at least `weight_layout.TILED_FEATURES` outputs, whose im2col product
    is in tiles (`conv._tiles_pay`): 3x3 with a bias at 14x14 (196 positions, 208 in the
    tiles), strided and padded (91 positions), dilated with 130 outputs (144 in the tiles), 1x1
    of 64 outputs (its input packed as it is, transposed), a 1-D one; beside them ones that
    stay one product: 48 outputs, strided to 6x6 (36 positions, 48 in tiles), two groups."""
    weights = random_weights(
        16,
        w1=(128, 6, 3, 3),
        b1=(128,),
        w2=(128, 6, 3, 3),
        w3=(130, 6, 2, 3),
        w4=(48, 6, 3, 3),
        w5=(128, 6, 3, 3),
        w6=(128, 3, 3, 3),
        w7=(64, 6, 1, 1),
        b7=(64,),
    )
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["tiled"], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "w2"], ["strided"], strides=[2, 1], pads=[0, 1, 2, 0]),
        node("Conv", ["x", "w3"], ["dilated"], dilations=[2, 2], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "w7", "b7"], ["pointwise"]),
        node("Conv", ["x", "w4"], ["few_outputs"], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "w5"], ["few_positions"], strides=[2, 2]),
        node("Conv", ["x", "w6"], ["grouped"], group=2, pads=[1, 1, 1, 1]),
    ]
    return _every_output(nodes, x_shape, weights)


def _many_outputs_1d():
    weights = random_weights(17, w=(144, 5, 7), b=(144,))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2], pads=[3, 3])]
    return graph_model(nodes, (1, 5, 400), weights)


def _padded_then_strided(x_shape=(1, 4, 9, 10)):
    """ONNX Pad, then a strided depthwise convolution without pads of its own (as
    TorchScript exports torchvision's MobileNet v1 and v2 with padding the 'same' way): the
    phases' grid is the Pad's result, whose padding is built in its region."""
    weights = random_weights(18, w=(4, 1, 3, 3))
    weights["pads"] = np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)
    node = helper.make_node
    nodes = [
        node("Pad", ["x", "pads"], ["padded"]),
        node("Conv", ["padded", "w"], ["y"], group=4, strides=[2, 2]),
    ]
    return graph_model(nodes, x_shape, weights)


def _text(model) -> str:
    out = io.BytesIO()
    lower_to_mlir(import_model(model)).write_text(out)
    return out.getvalue().decode()


CASES = {
    "2d": (_model, [(1, 8, 9, 10)]),
    "1d": (_one_d, [(1, 4, 11)]),
    "3d_dynamic_batch": (_three_d, [(1, 3, 4, 5, 3), (2, 3, 4, 5, 3)]),
    "3d_grouped": (_three_d_grouped, [(1, 4, 4, 5, 3)]),
    "dynamic_batch": (lambda: _model(("batch", 8, 9, 10)), [(1, 8, 9, 10), (2, 8, 9, 10)]),
    "dynamic_spatial": (
        lambda: _model(("batch", 8, "h", "w")),
        [(1, 8, 9, 10), (2, 8, 7, 12), (1, 8, 4, 5)],
    ),
    "small": (_small, [(1, 6, 9, 10)]),
    "depthwise": (_depthwise, [(1, 4, 11, 12)]),
    "upsampling": (_upsampling, [(1, 4, 5, 6)]),
    "upsampling_dynamic": (
        lambda: _upsampling(("batch", 4, "h", "w")),
        [(2, 4, 5, 6), (1, 4, 3, 7)],
    ),
    "depthwise_dynamic": (
        lambda: _depthwise(("batch", 4, "h", "w")),
        [(2, 4, 11, 12), (1, 4, 9, 16)],
    ),
    "small_dynamic": (lambda: _small(("batch", 6, "h", "w")), [(2, 6, 9, 10), (1, 6, 5, 11)]),
    "padded_then_strided": (_padded_then_strided, [(1, 4, 9, 10)]),
    "padded_then_strided_dynamic": (
        lambda: _padded_then_strided(("batch", 4, "h", "w")),
        [(1, 4, 9, 10), (2, 4, 8, 7)],
    ),
    "many_outputs": (_many_outputs, [(1, 6, 14, 14)]),
    "many_outputs_1d": (_many_outputs_1d, [(1, 5, 400)]),
    "many_outputs_batch": (lambda: _many_outputs((2, 6, 14, 14)), [(2, 6, 14, 14)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_conv_forms_match_onnxruntime(name, tmp_path) -> None:
    build, shapes = CASES[name]
    model = build()
    vm_module = compile_onnx(model, tmp_path, name)
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in shapes]
    assert_matches_onnxruntime(
        vm_module, model, feeds, function=model.graph.name, rtol=1e-4, atol=1e-5
    )


def test_depthwise_f16_and_integer_tap_sums_match_onnxruntime(tmp_path) -> None:
    rng = np.random.default_rng(6)
    half = _depthwise_f16()
    integer = _depthwise_integer()
    for model in (half, integer):
        assert DIRECT not in _text(model)
        assert "tensor.extract_slice" in _text(model)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float16)} for shape in [(2, 6, 7, 9)]]
    assert_matches_onnxruntime(
        compile_onnx(half, tmp_path, "half"), half, feeds, function="g", rtol=1e-2, atol=1e-2
    )
    feeds = [{"x": rng.integers(0, 255, (2, 3, 6, 7)).astype(np.uint8)}]
    assert_matches_onnxruntime(
        compile_onnx(integer, tmp_path, "integer"), integer, feeds, function="g", rtol=0, atol=0
    )
    strided = _depthwise_integer(strides=(2, 1))
    assert DIRECT not in _text(strided) and PHASES in _text(strided)
    assert_matches_onnxruntime(
        compile_onnx(strided, tmp_path, "strided"), strided, feeds, function="g", rtol=0, atol=0
    )


def test_depthwise_convolutions_are_tap_sums() -> None:
    text = _text(_depthwise())
    # four of them are one element-wise generic over (n, g, m, h, w) whose operands are a
    # unit-stride slice and a filter column per tap: 25, 9, 9 and 5 taps; the two strided ones
    # (3x3 and 1x5) slice their input's stride phases (one copy each, `windows.phase_taps`)
    assert (
        text.count('iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}')
        == 4
    )
    assert text.count("to tensor<4x1x1xf32>") == 25 + 9 + 5
    assert text.count("to tensor<4x2x1xf32>") == 9
    assert text.count(PHASES) == 2
    assert "[1, 1, 2, 2]" not in text and "[1, 1, 1, 3]" not in text
    # the 9x9 one (81 taps) reduces over the unit channel and the taps in place
    assert text.count(DIRECT) == 1
    # with a dynamic batch (of an input no reshape makes) the same forms
    dynamic = _text(_depthwise(("batch", 4, 11, 12)))
    assert dynamic.count(DIRECT) == 1
    assert dynamic.count(PHASES) == 2
    # each of the five pads its input once, static or not: the strided ones' pads reach their
    # whole stride phases (14 rows and 15 columns where the windows read 13 and 14), no second pad
    spatial = _text(_depthwise(("batch", 4, "h", "w")))
    for text_of_shape in (text, dynamic, spatial):
        assert text_of_shape.count("tensor.pad") == 5
    assert "high[0, 0, 2, 1]" in text and "high[0, 0, 0, 2]" in text
    # a static pad of whole phases is reshaped into them; of run-time spatial sizes it is grown
    # by stride - 1 and its phases read through strided maps (no cut of it, which IREE copies)
    assert STRIDED_PHASES not in text and STRIDED_PHASES not in dynamic
    assert STRIDED_PHASES in spatial and "(d0, d1, d2 + d4, d5 * 3 + d3)" in spatial
    grown = re.search(r"(%\S+) = tensor.pad %arg0 low\[0, 0, 1, 1\] high\[0, 0, 2, 2\]", spatial)
    assert grown is not None
    name = grown.group(1)
    assert f"ins({name} :" in spatial and f"extract_slice {name}[" not in spatial


DIRECT = '"parallel", "parallel", "reduction", "reduction", "reduction"]'
PHASES = "iterator_types = [" + ", ".join(['"parallel"'] * 6) + "]}"
"""The copy of a 2-D input into its stride phases (n, c, p_h, p_w, q_h, q_w)."""
STRIDED_PHASES = "(d0, d1, d4 * 2 + d2, d5 * 2 + d3)"
"""The phases of 2x2 strides read from a grid longer than them."""
PRODUCT = 'iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]'
SPATIAL_PRODUCT = "iterator_types = [" + '"parallel", ' * 5 + '"reduction"]'
"""A 2-D convolution's product with the output rows a batch dim (grouped, few positions) or over
its dynamic spatial dims."""
IM2COL = "iterator_types = [" + ", ".join(['"parallel"'] * 7) + "]"


def test_the_forms_are_in_the_mlir() -> None:
    text = _text(_model())
    # only the ConvTranspose (3 outputs, stride 1 after the rewrite, 2x2 taps) is IREE's named
    # convolution: IREE 3.13 runs the larger or strided ones 1.2-10x slower than a product
    assert text.count("linalg.conv_") == 1
    assert text.count("linalg.conv_2d_nchw_fchw {") == 1
    # every other convolution but the depthwise one is a contraction over (n, g, m, p, k),
    # its filter operand first (IREE then compiles it as a matmul); the two grouped ones over
    # (n, g, r, m, q, k), the output rows r a batch dim
    assert text.count(PRODUCT) == 6
    assert text.count(SPATIAL_PRODUCT) == 2
    assert _text(_three_d_grouped()).count(SPATIAL_PRODUCT) == 1
    # with dynamic spatial dims the two small 1x1 convolutions of stride 1 are over (n, g, m,
    # o_h, o_w, k): no reshape of the positions (`conv.SPATIAL_PRODUCT_WEIGHTS`); the others keep
    # the (n, g, m, p, k) product; the depthwise one, strided, sums taps of its phases
    dynamic = _text(_model(("batch", 8, "h", "w")))
    assert dynamic.count(SPATIAL_PRODUCT) == 2 and dynamic.count(PRODUCT) == 6
    assert DIRECT not in dynamic and dynamic.count(PHASES) == 1
    # the depthwise one is strided: a sum of taps of its input's stride phases
    # (`test_depthwise_convolutions_are_tap_sums`)
    assert DIRECT not in text and text.count(PHASES) == 1
    # the two 1x1 convolutions of stride 1 read the input as it is: 6 im2col copies, one per
    # other contraction (pure parallel generics over n, g, c, k_h, k_w, o_h, o_w)
    assert text.count(IM2COL) == 6


def test_convolutions_of_many_outputs_are_products_in_tiles() -> None:
    """The three convolutions of 128-130 outputs at 14x14 positions, the 1x1 one of 64 and the
    1-D one of 144 multiply their filter rows by their windows' rows in tiles of 16
    (`linalg.mmt4d`, both packed); the others stay one product: 48 outputs, 36 positions (12
    of 48 padding), two groups, and with two images every one."""
    text = _text(_many_outputs())
    assert text.count("linalg.mmt4d") == 4
    # the windows' rows packed for each; the filters written in tiles (the 130 rows of the
    # dilated one are no whole tiles: packed with padding)
    assert text.count("linalg.pack") == 5 and text.count("linalg.unpack") == 4
    # the windows gathered once, position by position: (1, 1, 14, 14, 6, 3, 3), then rows
    assert "tensor<1x1x14x14x6x3x3xf32>" in text and "tensor<196x54xf32>" in text
    # 128 filter rows of 54 in 8 tiles; 196 window rows in 13, the strided one's 7 x 13 in 6
    assert "tensor<8x54x16x1xf32>" in text and "tensor<13x54x16x1xf32>" in text
    assert "tensor<6x54x16x1xf32>" in text
    # the dilated one: 130 filter rows of 6 x 2 x 3 in 9 tiles, 14 x 12 window rows in 11
    assert "tensor<9x36x16x1xf32>" in text and "tensor<11x36x16x1xf32>" in text
    # the 1x1 one: no im2col copy; its [6, 196] input packed transposed into 13 tiles
    assert "outer_dims_perm = [1, 0] inner_dims_pos = [1, 0] inner_tiles = [16, 1]" in text
    assert "tensor<6x196xf32> -> tensor<13x6x16x1xf32>" in text
    assert "tensor<4x6x16x1xf32>" in text
    # 48 outputs and 36 positions: one product each; two groups: the product over rows
    assert text.count(PRODUCT) == 2 and text.count(SPATIAL_PRODUCT) == 1
    assert "linalg.mmt4d" in _text(_many_outputs_1d())
    assert "linalg.mmt4d" not in _text(_many_outputs((2, 6, 14, 14)))


def _pointwise_then_depthwise(features: int, x_shape=("batch", 8, "h", "w")):
    """A 1x1 convolution to `features` channels, then a 3x3 depthwise one: MobileNet's block."""
    weights = random_weights(14, p=(features, 8, 1, 1), d=(features, 1, 3, 3))
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "p"], ["pointwise"]),
        node("Relu", ["pointwise"], ["relu"]),
        node("Conv", ["relu", "d"], ["depthwise"], group=features, pads=[1, 1, 1, 1]),
    ]
    return graph_model(nodes, x_shape, weights, outputs={"depthwise": TensorProto.FLOAT})


@pytest.mark.parametrize("features", [16, 1024])
def test_a_dynamic_size_depthwise_convolution_sums_taps_unless_a_reshape_feeds_it(
    features, tmp_path
) -> None:
    """Of dynamic spatial dims, a depthwise convolution after a small 1x1 one (a product over
    the spatial dims as they are) sums its taps; after a large one, whose product is reshaped
    to (N, M, H, W), it reduces in place (`windows.window_taps`: IREE would copy each tap)."""
    model = _pointwise_then_depthwise(features)
    text = _text(model)
    small = features * 8 <= 4096
    assert (text.count(SPATIAL_PRODUCT), text.count(PRODUCT)) == ((1, 0) if small else (0, 1))
    assert (DIRECT in text) == (not small)
    assert (text.count("to tensor<?x" + str(features) + "x?x?xf32>") >= 9) == small
    rng = np.random.default_rng(15)
    feeds = [
        {"x": rng.standard_normal(shape).astype(np.float32)}
        for shape in [(1, 8, 9, 10), (2, 8, 6, 5)]
    ]
    assert_matches_onnxruntime(
        compile_onnx(model, tmp_path, "block"), model, feeds, function="g", rtol=1e-4, atol=1e-4
    )


def test_small_stride_one_convolutions_are_named() -> None:
    text = _text(_small())
    # 8 and 32 outputs: named; 33 outputs: im2col + product; 1x1: the product of a reshape
    assert text.count("linalg.conv_2d_nchw_fchw {") == 2
    assert "dilations = dense<[1, 2]> : tensor<2xi64>" in text
    assert text.count(PRODUCT) == 2
    assert text.count(IM2COL) == 1


def test_conv_transpose_of_stride_equal_to_kernel_is_one_product() -> None:
    for shape in [(1, 4, 5, 6), ("batch", 4, "h", "w")]:
        text = _text(_upsampling(shape))
        # the two patch-wise ones: a contraction over the input channels with the loops
        # n, g, m, (i, k) per axis, then c; the padded one stays zeros inserted + a convolution
        patches = "iterator_types = [" + '"parallel", ' * 7 + '"reduction"]'
        assert text.count(patches) == 2
        assert text.count("tensor.pad") == 2  # the padded one's zeros between and around


def test_a_grouped_convolution_in_place_builds_no_tap_slices(monkeypatch) -> None:
    """A grouped convolution whose gathered windows would pass `IM2COL_LIMIT` is computed in
    place; the per-tap slices only a depthwise one uses are not built (they were, unused)."""
    from niro.backends.mlir.onnx_ops import conv

    monkeypatch.setattr(conv, "IM2COL_LIMIT", 0)
    weights = random_weights(12, w=(6, 4, 3, 3))
    model = graph_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], group=2)], (1, 8, 9, 10), weights
    )
    text = _text(model)
    assert text.count(DIRECT) == 1
    assert "tensor.extract_slice" not in text
