"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul and MatMulInteger on
inputs with dynamic dims, as onnxruntime's quantizer leaves them in PyTorch exports (a dynamic
batch and sequence length around every activation's Q/DQ pair); and the NaN an infinite scale
makes, which QuantizeLinear saturates to the low end of the range as onnx.reference and
onnxruntime do.

Each model is compiled once with iree-compile and run at two sizes against onnxruntime (its
quantization kernels are the reference users compare with; they agree with onnx.reference
here). Quantized outputs must match exactly: these single ops round once, in the same order.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx.reference
import pytest
from onnx import TensorProto, helper, numpy_helper

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx
from .dynamic_models import graph_model

RNG = np.random.default_rng(11)


def _quantize_dequantize(quantized: int, per_axis: bool) -> onnx.ModelProto:
    """x (batch, seq, 4) f32 -> QuantizeLinear -> DequantizeLinear, per tensor or per axis 2."""
    numpy_type = helper.tensor_dtype_to_np_dtype(quantized)
    shape = (4,) if per_axis else ()
    weights = {
        "scale": (np.linspace(0.02, 0.05, 4) if per_axis else np.array(0.03)).astype(np.float32),
        "zero": np.full(shape, 3, numpy_type),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"], axis=2),
        helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"], axis=2),
    ]
    return graph_model(
        nodes, ("batch", "seq", 4), weights, outputs={"q": quantized, "y": TensorProto.FLOAT}
    )


def _dynamic_quantize_matmul() -> onnx.ModelProto:
    """What quantize_dynamic makes of a Linear layer: DynamicQuantizeLinear on the activation,
    MatMulInteger with int8 weights, the scales multiplied back in f32."""
    weights = {
        "w": RNG.integers(-127, 127, (4, 3)).astype(np.int8),
        "w_scale": np.array(0.01, np.float32),
    }
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "x_scale", "x_zero"]),
        helper.make_node("MatMulInteger", ["xq", "w", "x_zero"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["acc_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x_scale", "w_scale"], ["s"]),
        helper.make_node("Mul", ["acc_f", "s"], ["y"]),
    ]
    return graph_model(
        nodes,
        ("batch", "seq", 4),
        weights,
        outputs={"xq": TensorProto.UINT8, "y": TensorProto.FLOAT},
    )


def _qlinear_matmul(per_column: bool = False) -> onnx.ModelProto:
    """Per tensor, or with a per-column b_scale and b_zero_point as onnxruntime's per-channel
    QOperator quantization makes them."""
    columns = (5,) if per_column else ()
    weights = {
        "a_scale": np.array(0.05, np.float32),
        "a_zero": np.array(120, np.uint8),
        "b": RNG.integers(0, 255, (4, 5)).astype(np.uint8),
        "b_scale": np.resize(np.linspace(0.01, 0.03, 5), columns).astype(np.float32),
        "b_zero": np.resize(np.arange(126, 131), columns).astype(np.uint8),
        "y_scale": np.array(0.5, np.float32),
        "y_zero": np.array(100, np.uint8),
    }
    node = helper.make_node("QLinearMatMul", ["x", *weights], ["y"])
    return graph_model(
        [node],
        ("batch", "seq", 4),
        weights,
        outputs={"y": TensorProto.UINT8},
        x_type=TensorProto.UINT8,
    )


CASES = {
    "quantize_dequantize_uint8": lambda: _quantize_dequantize(TensorProto.UINT8, False),
    "quantize_dequantize_int8_per_axis": lambda: _quantize_dequantize(TensorProto.INT8, True),
    "dynamic_quantize_matmul_integer": _dynamic_quantize_matmul,
    "qlinear_matmul": _qlinear_matmul,
    "qlinear_matmul_per_column": lambda: _qlinear_matmul(per_column=True),
}


@functools.cache
def _compiled(name: str, directory):
    model = CASES[name]()
    return model, compile_onnx(model, directory, name)


def _input(model: onnx.ModelProto, shape: tuple[int, ...]) -> np.ndarray:
    if model.graph.input[0].type.tensor_type.elem_type == TensorProto.UINT8:
        return RNG.integers(0, 255, shape).astype(np.uint8)
    return (RNG.standard_normal(shape) * 2).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_dims_compile_once_and_match_onnxruntime(name, tmp_path_factory) -> None:
    model, vm_module = _compiled(name, tmp_path_factory.getbasetemp())
    shapes = ((1, 3, 4), (2, 5, 4))
    runs = assert_matches_onnxruntime(
        vm_module,
        model,
        [{"x": _input(model, shape)} for shape in shapes],
        function="g",
        rtol=1e-5,
        # NOTE: onnxruntime requantizes QLinearMatMul's i32 sums in f32, niroc in f64 as
        # onnx.reference does: a value near .5 may round one step the other way; the single
        # quantize ops round once, alike.
        atol=lambda reference: (
            (1 if name.startswith("qlinear_matmul") else 0)
            if reference.dtype.kind in "iu"
            else 1e-5
        ),
    )
    for shape, outputs in zip(shapes, runs, strict=True):
        assert outputs[0].shape[:2] == shape[:2]


@pytest.mark.parametrize("quantized", [TensorProto.UINT8, TensorProto.INT8])
def test_nan_and_infinities_saturate_as_onnxruntime_does(quantized, tmp_path) -> None:
    """x / inf is NaN for an infinite x: onnxruntime's calibration gives an attention mask of
    -inf an infinite scale, so quantized transformers (gpt) meet it. NaN -> the range's low end
    (as onnxruntime and onnx.reference give it), +inf -> its high end (as onnxruntime gives it;
    onnx.reference's numpy cast makes it INT_MIN, hence low). An undefined fptoui of NaN made
    IREE's result vary from one compilation to the next."""
    numpy_type = helper.tensor_dtype_to_np_dtype(quantized)
    scale = np.array([1.0, np.inf], np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["y"], axis=1)
    model = graph_model(
        [node], (3, 2), {"scale": scale, "zero": np.zeros(2, numpy_type)}, outputs={"y": quantized}
    )
    x = np.array([[np.nan, -np.inf], [np.inf, 2.0], [-np.inf, np.inf]], np.float32)
    low, high = np.iinfo(numpy_type).min, np.iinfo(numpy_type).max
    runs = assert_matches_onnxruntime(
        compile_onnx(model, tmp_path), model, [{"x": x}], function="g", rtol=0, atol=0
    )
    assert runs[0][0].tolist() == [[low, low], [high, 0], [low, low]]
    nan_only = onnx.reference.ReferenceEvaluator(model).run(None, {"x": x[:1, :1].repeat(2, 1)})[0]
    assert nan_only.tolist() == [[low, low]]


def test_a_per_axis_scale_along_a_dynamic_dim_is_checked_at_run_time(tmp_path) -> None:
    # scale of 3 values along axis 0, whose size is only known at run time: 3 rows match
    # onnxruntime; 2 rows stop the call (ONNX requires equal lengths): the generic's loop range
    # comes from the scale, so IREE checks the input's dim at the function boundary, never
    # reading the scale out of bounds
    initializers = [
        numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "scale"),
        numpy_helper.from_array(np.array([1, 2, 3], np.int8), "zero"),
    ]
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"], axis=0, name="dq")],
        "per_axis_dynamic",
        [helper.make_tensor_value_info("x", TensorProto.INT8, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    vm_module = compile_onnx(model, tmp_path)
    rows = np.arange(12, dtype=np.int8).reshape(3, 4)
    assert_matches_onnxruntime(vm_module, model, [{"x": rows}], function="per_axis_dynamic", rtol=0, atol=0)
    with pytest.raises(Exception, match=r"input0 shape dimension 0 mismatch; expected 3 but have 2"):
        call(vm_module, "per_axis_dynamic", rows[:2])
