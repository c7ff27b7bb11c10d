"""Element-wise ONNX ops (activations, unary math, arithmetic, comparisons, logic, Where, Cast)
lowered and run end to end (iree-compile + IREE runtime), compared with ONNX's reference.

ONNX's node tests are nearly all f32 and finite; the `one_node_case` models cover what they
miss: f16/f64 transcendental functions (computed in f32, see FloatMath.apply), NaN and inf,
unsigned division and comparison, IEEE pow special cases, float -> int truncation.
"""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import node_test_case

from .model_cases import one_node_case

NODE_TESTS = [
    "test_relu",
    "test_prelu_broadcast",
    "test_celu_float16",
    "test_sigmoid",
    "test_hardsigmoid",
    "test_softplus",
    "test_gelu_tanh_2",
    "test_mish",
    "test_swish",
    "test_sign",
    "test_round",
    "test_erf",
    "test_atanh_example",
    "test_isnan_float16",
    "test_sub_uint8",
    "test_div_int32_trunc",
    "test_div_uint64",
    "test_pow_types_int64_int64",
    "test_pow_types_float32_uint32",
    "test_mod_mixed_sign_int8",
    "test_mod_float_edge_cases_fmod_0_float32",
    "test_bitshift_right_int8_negative_input",
    "test_bitshift_left_uint16",
    "test_bitwise_xor_ui64_bcast_3v1d",
    "test_xor_bcast4v4d",
    "test_greater_equal_uint32",
    "test_where_long_example",
    "test_min_float16",
    "test_max_uint64",
    "test_mean_example",
    "test_clip_default_int8_min",
    "test_clip_min_greater_than_max",
    "test_cast_FLOAT_to_BFLOAT16",
    "test_castlike_DOUBLE_to_FLOAT16",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


_SPECIAL = np.array([-3.5, -1.0, -0.3, 0.0, 0.5, 2.5, 7.0, np.nan, np.inf, -np.inf])
_UNSIGNED = np.array([[0, 1, 7, 200, 255, 250]], dtype=np.uint8).T

MODEL_CASES = {
    # f64 transcendental functions IREE cannot compile in f64 (computed in f32).
    "tanh_f64": lambda: one_node_case("tanh_f64", "Tanh", {"x": _SPECIAL}),
    "asinh_special": lambda: one_node_case("asinh_special", "Asinh", {"x": _SPECIAL.astype(np.float32)}),
    "sign_nan": lambda: one_node_case("sign_nan", "Sign", {"x": _SPECIAL.astype(np.float32)}),
    "div_u8": lambda: one_node_case(
        "div_u8", "Div", {"a": _UNSIGNED, "b": np.array([1, 3, 255, 128], np.uint8)}
    ),
    "div_int32_by_zero": lambda: one_node_case(
        "div_int32_by_zero",
        "Div",
        {"a": np.array([7, -7, 5], np.int32), "b": np.array([0, 2, -1], np.int32)},
    ),
    "pow_ieee_special": lambda: one_node_case(
        "pow_ieee_special",
        "Pow",
        {
            "x": np.array([-2.0, -3.0, 0.0, np.nan, 1.0, -8.0], np.float32),
            "y": np.array([3.0, 0.5, 0.0, 0.0, np.nan, 1.0 / 3], np.float32),
        },
    ),
    # A constant exponent 2 (exporters' variance) is x * x: same numbers, NaN and inf included.
    "pow_constant_two": lambda: one_node_case(
        "pow_constant_two",
        "Pow",
        {"x": _SPECIAL.astype(np.float32).reshape(2, 5)},
        initializers={"y": np.array(2.0, np.float32)},
    ),
    "pow_constant_two_f16_broadcast": lambda: one_node_case(
        "pow_constant_two_f16_broadcast",
        "Pow",
        {"x": _SPECIAL.astype(np.float16)},
        initializers={"y": np.array([[2.0]], np.float16)},
    ),
    "pow_int_float": lambda: one_node_case(
        "pow_int_float",
        "Pow",
        {"x": np.array([2, -3, 5], np.int32), "y": np.array([0.5, 3.0, 1.5], np.float32)},
    ),
    "max_nan": lambda: one_node_case(
        "max_nan",
        "Max",
        {"a": _SPECIAL.astype(np.float32), "b": np.full(10, 1.0, np.float32)},
    ),
    "clip_attributes_opset6": lambda: one_node_case(
        "clip_attributes_opset6",
        "Clip",
        {"x": _SPECIAL.astype(np.float32)},
        opset=6,
        min=-1.0,
        max=2.0,
    ),
    "cast_f32_to_i8_truncates": lambda: one_node_case(
        "cast_f32_to_i8_truncates",
        "Cast",
        {"x": np.array([1.7, -2.5, 100.9, -0.3], np.float32)},
        to=3,  # INT8
    ),
    "cast_f16_to_bool": lambda: one_node_case(
        "cast_f16_to_bool",
        "Cast",
        {"x": np.array([0.0, -0.0, np.nan, -2.0], np.float16)},
        to=9,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_f64_mod_is_refused() -> None:
    case = one_node_case(
        "mod_f64", "Mod", {"a": np.array([5.0, -5.0]), "b": np.array([3.0, 3.0])}, fmod=1
    )
    outcome = run_case(case)
    assert (outcome.stage, outcome.refused) == ("lower", True)
    assert "'onnx.Mod' op does not support element type f64 (IREE's CPU backend has no f64 fmod)" in outcome.message


def test_legacy_axis_broadcast_is_refused() -> None:
    from niro.backends.mlir import lower_to_mlir
    from niro.frontends.onnx import import_model
    from onnx import TensorProto, helper

    node = helper.make_node("Sub", ["a", "b"], ["y"], broadcast=1, axis=0)
    graph = helper.make_graph(
        [node],
        "legacy",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 10
    with pytest.raises(LoweringError, match=r"'onnx.Sub' op legacy broadcasting with axis=0"):
        lower_to_mlir(import_model(model))
