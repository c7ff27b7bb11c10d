"""Convolutions and pools with a dynamic batch dim, as PyTorch exports CNNs
(`dynamic_axes={'x': {0: 'batch'}}`): X is (batch, C, spatial...) with the channel and spatial
dims static. Each model is compiled once with iree-compile and run at batch 1 and 3 against
onnxruntime. Also: the quantized convolutions with dynamic spatial dims, and what stays
refused (a pool's dynamic channel dim), with the exact messages; DeformConv whose X is dynamic
(its batch checked against the offsets').
"""

from __future__ import annotations

import functools
import re

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, cannot_lower, lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx
from .dynamic_models import graph_model, one_node_model, random_weights

BATCH = "batch"


def _cnn() -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Gelu (erf) -> MaxPool -> Conv(stride 2) -> SiLU ->
    GlobalAveragePool -> Flatten -> Gemm -> Softmax, as a small exported classifier."""
    rng = np.random.default_rng(7)
    weights = {
        "w1": rng.standard_normal((8, 3, 3, 3)) * 0.3,
        "b1": rng.standard_normal(8) * 0.1,
        "scale": rng.random(8) + 0.5,
        "shift": rng.standard_normal(8) * 0.1,
        "mean": rng.standard_normal(8) * 0.1,
        "var": rng.random(8) + 0.5,
        "w2": rng.standard_normal((16, 8, 3, 3)) * 0.2,
        "b2": rng.standard_normal(16) * 0.1,
        "fc": rng.standard_normal((5, 16)) * 0.3,
        "fc_b": rng.standard_normal(5) * 0.1,
        "sqrt2": np.array(np.sqrt(2.0)),
        "one": np.array(1.0),
        "half": np.array(0.5),
    }
    weights = {name: value.astype(np.float32) for name, value in weights.items()}
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c1", "scale", "shift", "mean", "var"], ["bn"]),
        node("Div", ["bn", "sqrt2"], ["d"]),
        node("Erf", ["d"], ["e"]),
        node("Add", ["e", "one"], ["e1"]),
        node("Mul", ["bn", "e1"], ["g2"]),
        node("Mul", ["g2", "half"], ["gelu"]),
        node("MaxPool", ["gelu"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Sigmoid", ["c2"], ["s"]),
        node("Mul", ["c2", "s"], ["silu"]),
        node("GlobalAveragePool", ["silu"], ["gap"]),
        node("Flatten", ["gap"], ["flat"]),
        node("Gemm", ["flat", "fc", "fc_b"], ["logits"], transB=1),
        node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    return graph_model(nodes, (BATCH, 3, 12, 12), weights, opset=17)


def _conv_integer(x_shape=(BATCH, 3, 6, 5)) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    weights = {
        "w": rng.integers(0, 255, (4, 3, 3, 3)).astype(np.uint8),
        "x_zero": np.array(128, np.uint8),
    }
    node = helper.make_node("ConvInteger", ["x", "w", "x_zero"], ["y"], pads=[1, 1, 1, 1])
    return graph_model(
        [node],
        x_shape,
        weights,
        outputs={"y": TensorProto.INT32},
        x_type=TensorProto.UINT8,
    )


def _qlinear_conv(x_shape=(BATCH, 4, 5, 6)) -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    weights = {
        "x_scale": np.array(0.05, np.float32),
        "x_zero": np.array(120, np.uint8),
        "w": rng.integers(0, 255, (4, 2, 3, 3)).astype(np.uint8),
        "w_scale": np.array(0.02, np.float32),
        "w_zero": np.array(130, np.uint8),
        "y_scale": np.array(2.0, np.float32),
        "y_zero": np.array(100, np.uint8),
        "bias": rng.integers(-500, 500, 4).astype(np.int32),
    }
    node = helper.make_node(
        "QLinearConv", ["x", *weights], ["y"], pads=[1, 1, 1, 1], strides=[2, 1], group=2
    )
    return graph_model(
        [node],
        x_shape,
        weights,
        outputs={"y": TensorProto.UINT8},
        x_type=TensorProto.UINT8,
    )


CASES = {
    "conv2d_bias_groups_strides_pads_dilations": lambda: one_node_model(
        "Conv",
        (BATCH, 4, 9, 8),
        random_weights(1, w=(6, 2, 3, 3), b=(6,)),
        group=2,
        strides=[2, 1],
        pads=[1, 0, 2, 1],
        dilations=[2, 1],
    ),
    "conv2d_depthwise_same_upper": lambda: one_node_model(
        "Conv",
        (BATCH, 3, 7, 7),
        random_weights(2, w=(3, 1, 3, 3)),
        group=3,
        auto_pad="SAME_UPPER",
        strides=[2, 2],
    ),
    "conv1d_same_lower_stride": lambda: one_node_model(
        "Conv",
        (BATCH, 3, 11),
        random_weights(3, w=(4, 3, 3), b=(4,)),
        auto_pad="SAME_LOWER",
        strides=[2],
    ),
    "conv3d_pads": lambda: one_node_model(
        "Conv", (BATCH, 2, 5, 6, 4), random_weights(4, w=(3, 2, 2, 3, 2)), pads=[1, 0, 1, 0, 1, 1]
    ),
    "conv_transpose2d_strides_groups_output_padding": lambda: one_node_model(
        "ConvTranspose",
        (BATCH, 4, 5, 4),
        random_weights(5, w=(4, 3, 3, 3), b=(6,)),
        group=2,
        strides=[2, 3],
        pads=[1, 0, 0, 1],
        output_padding=[1, 2],
    ),
    "conv_transpose1d_cropping_pads": lambda: one_node_model(
        "ConvTranspose", (BATCH, 2, 6), random_weights(6, w=(2, 3, 3)), strides=[2], pads=[3, 3]
    ),
    "max_pool2d_ceil_pads_dilations": lambda: one_node_model(
        "MaxPool",
        (BATCH, 3, 9, 8),
        kernel_shape=[3, 2],
        strides=[2, 2],
        pads=[1, 1, 1, 0],
        dilations=[1, 2],
        ceil_mode=1,
    ),
    "max_pool2d_with_indices": lambda: one_node_model(
        "MaxPool",
        (BATCH, 2, 6, 7),
        outputs=("y", "indices"),
        kernel_shape=[2, 3],
        strides=[2, 2],
        pads=[0, 1, 1, 1],
    ),
    "average_pool2d_count_include_pad": lambda: one_node_model(
        "AveragePool",
        (BATCH, 3, 7, 6),
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        count_include_pad=1,
    ),
    "average_pool1d_exclude_pad": lambda: one_node_model(
        "AveragePool", (BATCH, 2, 9), kernel_shape=[4], strides=[3], pads=[2, 2]
    ),
    "lp_pool2d": lambda: one_node_model(
        "LpPool", (BATCH, 2, 6, 6), kernel_shape=[2, 2], strides=[2, 2], p=2
    ),
    "global_average_pool": lambda: one_node_model("GlobalAveragePool", (BATCH, 5, 4, 3)),
    "global_max_pool_3d": lambda: one_node_model("GlobalMaxPool", (BATCH, 3, 2, 3, 4)),
    "conv_integer": _conv_integer,
    "qlinear_conv_groups": _qlinear_conv,
    "cnn": _cnn,
}


@functools.cache
def _compiled(name: str, directory):
    model = CASES[name]()
    return model, compile_onnx(model, directory, name)


def _input(model: onnx.ModelProto, batch: int, rng) -> np.ndarray:
    x = model.graph.input[0].type.tensor_type
    shape = (batch, *[d.dim_value for d in x.shape.dim[1:]])
    if x.elem_type == TensorProto.UINT8:
        return rng.integers(0, 255, shape).astype(np.uint8)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_dynamic_batch_compiles_once_and_matches_onnxruntime(name, tmp_path_factory) -> None:
    model, vm_module = _compiled(name, tmp_path_factory.getbasetemp())
    batches = (1, 3)
    runs = assert_matches_onnxruntime(
        vm_module,
        model,
        [{"x": _input(model, batch, np.random.default_rng(batch))} for batch in batches],
        function="g",
        rtol=1e-4,
        # NOTE: onnxruntime requantizes QLinearConv in f32, niroc in f64: a value near a .5
        # rounds the other way now and then.
        atol=lambda reference: 1 if reference.dtype == np.uint8 else 1e-5,
    )
    for batch, outputs in zip(batches, runs, strict=True):
        assert [value.shape[0] for value in outputs] == [batch] * len(outputs)


def test_the_batch_dim_is_dynamic_in_the_mlir() -> None:
    text = lower_to_mlir(import_model(CASES["cnn"](), expand_functions=cannot_lower)).to_text()
    assert re.search(r"func.func @g\(%arg0: tensor<\?x3x12x12xf32>.*-> \(tensor<\?x5xf32>", text)
    # the convolution's product runs over a run-time batch of images
    assert re.search(r"outs\(%\w+ : tensor<\?x1x16x9xf32>\) -> tensor<\?x1x16x9xf32>", text)
    assert re.search(r"tensor.collapse_shape .* into tensor<\?x16x3x3xf32>", text)


def _lower(model: onnx.ModelProto):
    return lower_to_mlir(import_model(model, expand_functions=cannot_lower))


def test_a_dynamic_channel_dim_is_taken_from_the_filter() -> None:
    # NOTE: run in test_conv_pool_dynamic_spatial.py; a pool's channels have no filter to
    # come from, so a pool still refuses them.
    model = one_node_model("Conv", (BATCH, "c", 5, 5), random_weights(1, w=(2, 3, 3, 3)))
    text = _lower(model).to_text()
    assert "tensor.cast %arg0 : tensor<?x?x5x5xf32> to tensor<?x3x5x5xf32>" in text
    pool = one_node_model("MaxPool", (BATCH, "c", 5, 5), kernel_shape=[2, 2])
    with pytest.raises(
        LoweringError,
        match=r"'onnx.MaxPool' op needs a static channel dim 1 for input X \(batch and spatial "
        r"dims may be dynamic\), got \(None, None, 5, 5\)",
    ):
        _lower(pool)


def test_quantized_convs_with_dynamic_spatial_dims_match_onnxruntime(tmp_path) -> None:
    """ConvInteger and QLinearConv take dynamic spatial dims as Conv does (run-time output
    sizes and pads), compiled once and run at two image sizes."""
    for name, model in (
        ("conv_integer_hw", _conv_integer((BATCH, 3, "h", 5))),
        ("qlinear_conv_hw", _qlinear_conv((BATCH, 4, "h", "w"))),
    ):
        vm_module = compile_onnx(model, tmp_path, name)
        channels = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
        rng = np.random.default_rng(5)
        feeds = [
            {"x": rng.integers(0, 255, (batch, channels, h, w)).astype(np.uint8)}
            for batch, h, w in ((1, 4, 5), (2, 9, 5 if name == "conv_integer_hw" else 7))
        ]
        # NOTE: onnxruntime requantizes QLinearConv's uint8 in f32, niroc in f64 (see above).
        assert_matches_onnxruntime(
            vm_module, model, feeds, function="g", rtol=0,
            atol=lambda reference: 1 if reference.dtype == np.uint8 else 0,
        )


def test_deform_conv_with_dynamic_batch_and_spatial_dims(tmp_path) -> None:
    """X's batch is the offsets' (checked at run time), its height and width stay dynamic:
    the result matches onnx.reference at two image sizes; X of another batch stops the run."""
    weights = random_weights(2, w=(2, 3, 2, 2), offset=(1, 8, 3, 3))
    node = helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], strides=[2, 2])
    model = graph_model([node], (BATCH, 3, "h", "w"), weights)
    vm_module = compile_onnx(model, tmp_path, "deform")
    reference = ReferenceEvaluator(model)
    for shape in ((1, 3, 6, 6), (1, 3, 7, 6)):  # each makes the offsets' 3x3 output
        x = np.random.default_rng(shape[2]).standard_normal(shape).astype(np.float32)
        (expected,) = reference.run(None, {"x": x})
        np.testing.assert_allclose(vm_module.g(x).to_host(), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(Exception, match=r"'onnx.DeformConv' op: dim 0 of input X is not 1"):
        vm_module.g(np.zeros((2, 3, 6, 6), np.float32))

