"""The NN op family (conv, deformable conv, pooling, resize, grid sampling, quantization, Dropout, LRN, Col2Im,
RoiAlign, Scan) end to end.

Each case goes through import -> verify -> lower -> iree-compile -> run -> compare with the
reference outputs (tests/conformance/pipeline.py). ONNX's own node tests cover most attribute
combinations; the one-node models below add what they miss (constant weights as real models
have them, depthwise groups, f16, signed integers, non-uniform average divisors, constant
scales for antialiased Resize) and the refusals, with their exact messages.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.backends.mlir.mlir_harness import assert_matches_onnxruntime, compile_onnx
from tests.backends.mlir.onnx_ops.model_cases import one_node_case
from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import node_test_case

NODE_TESTS = (
    # Conv / ConvTranspose / ConvInteger
    "test_basic_conv_with_padding",
    "test_conv_with_autopad_same",
    "test_conv_with_strides_and_asymmetric_padding",
    "test_convtranspose",
    "test_convtranspose_1d",
    "test_convtranspose_3d",
    "test_convtranspose_dilations",
    "test_convtranspose_group_2_image_3",
    "test_convtranspose_output_shape",
    "test_convtranspose_pads",
    "test_convinteger_with_padding",
    "test_deform_conv_with_multiple_offset_groups",
    # pooling
    "test_maxpool_1d_default",
    "test_maxpool_2d_ceil",
    "test_maxpool_2d_dilations",
    "test_maxpool_2d_same_lower",
    "test_maxpool_3d_dilations_use_ref_impl",
    "test_averagepool_2d_ceil_last_window_starts_on_pad",
    "test_averagepool_2d_pads_count_include_pad",
    "test_averagepool_2d_precomputed_same_upper",
    "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True",
    "test_maxpool_with_argmax_2d_precomputed_strides",
    "test_lppool_2d_pads",
    "test_globalaveragepool",
    "test_globalmaxpool_precomputed",
    # Dropout, LRN
    "test_dropout_default_mask_ratio",
    "test_lrn",
    # Resize / Upsample
    "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
    "test_resize_downsample_scales_linear_half_pixel_symmetric",
    "test_resize_downsample_sizes_linear_antialias",
    "test_resize_downsample_sizes_nearest_not_larger",
    "test_resize_tf_crop_and_resize_axes_3_2",
    "test_resize_upsample_scales_cubic_align_corners",
    "test_resize_upsample_sizes_nearest_ceil_half_pixel",
    "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
    "test_upsample_nearest",
    # GridSample
    "test_gridsample_bicubic_align_corners_0_additional_1",
    "test_gridsample_reflection_padding",
    "test_gridsample_volumetric_bilinear_align_corners_1",
    # Col2Im, RoiAlign, Scan
    "test_col2im_pads",
    "test_roialign_mode_max",
    "test_scan9_multi_state",
    # quantization
    "test_quantizelinear_axis",
    "test_quantizelinear_blocked_asymmetric",
    "test_dequantizelinear_uint16",
    "test_dynamicquantizelinear_min_adjusted",
    "test_qlinearconv",
    "test_qlinearmatmul_3D_int8_float16",
)


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(7)


def _normal(*shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


MODEL_CASES = {
    # a depthwise conv with constant weights and bias, strides and dilations
    "conv_depthwise_constant": lambda: one_node_case(
        "conv_depthwise_constant",
        "Conv",
        {"x": _normal(2, 4, 9, 9)},
        initializers={"w": _normal(4, 1, 3, 3), "b": _normal(4)},
        group=4,
        strides=[2, 1],
        dilations=[1, 2],
        pads=[1, 0, 2, 1],
    ),
    "conv_groups_f16": lambda: one_node_case(
        "conv_groups_f16",
        "Conv",
        {"x": _normal(1, 4, 6, 6, dtype=np.float16)},
        initializers={"w": _normal(6, 2, 2, 2, dtype=np.float16)},
        group=2,
    ),
    "conv_1d_same_lower": lambda: one_node_case(
        "conv_1d_same_lower",
        "Conv",
        {"x": _normal(1, 3, 10), "w": _normal(5, 3, 4)},
        auto_pad="SAME_LOWER",
        strides=[3],
    ),
    "maxpool_int8": lambda: one_node_case(
        "maxpool_int8",
        "MaxPool",
        {"x": RNG.integers(-128, 127, (1, 2, 5, 5)).astype(np.int8)},
        kernel_shape=[2, 2],
        pads=[1, 1, 1, 1],
        reference="onnxruntime",
    ),
    # Indices in column-major order (storage_order=1), ties resolved to the first in the window
    "maxpool_indices_column_major": lambda: one_node_case(
        "maxpool_indices_column_major",
        "MaxPool",
        {"x": RNG.integers(0, 3, (2, 2, 5, 4)).astype(np.float32)},
        ["values", "indices"],
        kernel_shape=[3, 2],
        strides=[2, 1],
        pads=[1, 0, 1, 1],
        storage_order=1,
        reference="onnxruntime",
    ),
    "averagepool_uneven_divisor": lambda: one_node_case(
        "averagepool_uneven_divisor",
        "AveragePool",
        {"x": _normal(1, 2, 7, 6)},
        kernel_shape=[3, 2],
        strides=[2, 2],
        pads=[1, 0, 1, 1],
        count_include_pad=0,
    ),
    "resize_linear_antialias_constant_scales": lambda: one_node_case(
        "resize_linear_antialias_constant_scales",
        "Resize",
        {"x": _normal(1, 1, 8, 8), "": None},
        initializers={"scales": np.array([1, 1, 0.6, 0.5], dtype=np.float32)},
        mode="linear",
        antialias=1,
    ),
    # a scale of 2.6: output column 19 maps to x = 19.5 / 2.6 - 0.5 = 7.0000005 in f32, where
    # x + 1 rounds to 8.0; the taps must start from floor(x), as the coefficients do (Mask
    # R-CNN's mask paste)
    "resize_linear_f32_rounding": lambda: one_node_case(
        "resize_linear_f32_rounding",
        "Resize",
        {"x": _normal(1, 1, 30, 30), "": None},
        initializers={"scales": np.array([1, 1, 2, 2.6], dtype=np.float32)},
        mode="linear",
    ),
    "resize_nearest_int32": lambda: one_node_case(
        "resize_nearest_int32",
        "Resize",
        {"x": RNG.integers(-100, 100, (1, 2, 3, 3)).astype(np.int32), "": None},
        initializers={"scales": np.array([1, 1, 2, 1.5], dtype=np.float32)},
        mode="nearest",
        coordinate_transformation_mode="half_pixel",
    ),
    "quantize_int8_per_axis_constant": lambda: one_node_case(
        "quantize_int8_per_axis_constant",
        "QuantizeLinear",
        {"x": _normal(2, 3, 4) * 50},
        initializers={
            "scale": np.array([0.5, 0.25, 1.0], dtype=np.float32),
            "zero": np.array([-3, 0, 7], dtype=np.int8),
        },
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


REFUSALS = {
    "test_training_dropout": (
        "'onnx.Dropout' op needs training_mode to be a compile-time constant "
        "(training-mode dropout is random)"
    ),
    "test_resize_downsample_scales_linear_antialias": (
        "'onnx.Resize' op antialias needs the scales to be compile-time constants"
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_unsupported_case_is_refused_clearly(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert (outcome.stage, outcome.refused) == ("lower", True)
    assert outcome.message.endswith(REFUSALS[name])


def test_training_dropout_with_nonzero_constant_ratio_is_refused() -> None:
    case = one_node_case(
        "dropout_training_constant",
        "Dropout",
        {"x": _normal(2, 3)},
        initializers={"ratio": np.array(0.5, dtype=np.float32), "training": np.array(True)},
        reference="onnxruntime",
    )
    outcome = run_case(case)
    assert outcome.refused
    assert outcome.message.endswith(
        "'onnx.Dropout' op in training mode with ratio 0.5 draws random numbers; only inference "
        "(or ratio 0) is supported"
    )


# -- GridSample with dynamic dims -----------------------------------------------------------------


def _grid_sample_model(mode: str, padding_mode: str, align_corners: int):
    """GridSample on X (n, 2, h, w) and a grid (n, gh, gw, 2), every dim but the channels and
    the coordinate pair dynamic, as a spatial transformer exported with dynamic axes has it."""
    node = helper.make_node(
        "GridSample",
        ["x", "grid"],
        ["y"],
        mode=mode,
        padding_mode=padding_mode,
        align_corners=align_corners,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, "h", "w"]),
            helper.make_tensor_value_info("grid", TensorProto.FLOAT, ["n", "gh", "gw", 2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize(
    ("mode", "padding_mode", "align_corners"),
    [("linear", "zeros", 0), ("nearest", "border", 1), ("cubic", "reflection", 0)],
)
def test_grid_sample_with_dynamic_dims_matches_onnxruntime(
    tmp_path, mode, padding_mode, align_corners
) -> None:
    model = _grid_sample_model(mode, padding_mode, align_corners)
    vm_module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(3)
    feeds_list = [
        {"x": _normal(n, 2, h, w), "grid": rng.uniform(-1.3, 1.3, (n, gh, gw, 2)).astype("f4")}
        for n, h, w, gh, gw in [(1, 5, 7, 3, 4), (2, 8, 4, 6, 6)]
    ]
    assert_matches_onnxruntime(vm_module, model, feeds_list, function="g", rtol=1e-4, atol=1e-5)


def test_col2im_run_time_block_of_zero_fails_the_call_instead_of_the_process(tmp_path) -> None:
    """Col2Im's block_shape read at run time: a size of 0 stops the call with Col2Im's message;
    without the check an integer division by it killed the whole process (SIGFPE)."""
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="col2im")],
            "g",
            [
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4]),
                helper.make_tensor_value_info("image", TensorProto.INT64, [2]),
                helper.make_tensor_value_info("block", TensorProto.INT64, [2]),
            ],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        ),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    module = compile_onnx(model, tmp_path)
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    image = np.array([3, 3], dtype=np.int64)
    good = module.g(x, image, np.array([2, 2], dtype=np.int64)).to_host()
    assert good.shape == (1, 1, 3, 3)
    with pytest.raises(Exception, match="block_shape needs sizes of at least 1"):
        module.g(x, image, np.array([0, 2], dtype=np.int64))
