"""onnxruntime's quantized contrib ops (com.microsoft QLinearAdd, ..., QGemm, op-set 1): one-node
models typed by niroc's frontend (ONNX has no schema for them), lowered, compiled once with
iree-compile and compared with onnxruntime, at two batch sizes where the batch is dynamic.

Tolerance: one quantization step of the output. niroc dequantizes each input in f32, computes
the float op, and divides by the output scale; onnxruntime folds the scales first (QLinearAdd
multiplies by a_scale / c_scale; the pools sum integers and scale once; QGemm multiplies by
a_scale * b_scale / y_scale) and Sigmoid uses its own exp approximation: a value within an f32
ulp of a .5 boundary may round the other way. Where no such boundary is near (exact ties of
small integers), both round half to even and agree exactly (`test_ties_round_half_to_even`).
"""

from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.frontends.onnx import OnnxImportError, import_model
from niro.ir import Module, ScalarType, TensorType, UnknownOp, Value, format_type, verify
from onnx import TensorProto, helper, numpy_helper

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx

RNG = np.random.default_rng(17)
U8, S8, F32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT


def _f(value) -> np.ndarray:
    return np.array(value, np.float32)


def _q(value, element: int) -> np.ndarray:
    return np.array(value, helper.tensor_dtype_to_np_dtype(element))


def _model(op, inputs, weights, x_shape, x_type=U8, y_type=U8, **attributes) -> onnx.ModelProto:
    """One com.microsoft `op` node on graph input `x` and initializers `weights` (an input
    named "" is absent); the output `y` declares its element type only."""
    node = helper.make_node(op, inputs, ["y"], domain="com.microsoft", name=op, **attributes)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", x_type, list(x_shape))],
        [helper.make_tensor_value_info("y", y_type, None)],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 9
    return model


def _binary(op: str, element: int) -> onnx.ModelProto:
    """x (batch, 4, 3, 3) with a per-channel-broadcast constant b (4, 1, 1)."""
    low, high = (0, 255) if element == U8 else (-128, 127)
    weights = {
        "a_scale": _f(0.05),
        "a_zero": _q(128 if element == U8 else 3, element),
        "b": RNG.integers(low, high, (4, 1, 1)).astype(helper.tensor_dtype_to_np_dtype(element)),
        "b_scale": _f(0.03),
        "b_zero": _q(100 if element == U8 else -5, element),
        "y_scale": _f(0.07 if op == "QLinearAdd" else 0.1),
        "y_zero": _q(120 if element == U8 else 0, element),
    }
    inputs = ["x", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"]
    return _model(op, inputs, weights, ("batch", 4, 3, 3), element, element)


def _unary(op: str, element: int, **attributes) -> onnx.ModelProto:
    weights = {
        "x_scale": _f(0.04),
        "x_zero": _q(128 if element == U8 else 0, element),
        "y_scale": _f(1 / 256 if op == "QLinearSigmoid" else 0.03),
        "y_zero": _q(0 if op == "QLinearSigmoid" or element == S8 else 60, element),
    }
    return _model(op, ["x", *weights], weights, ("batch", 5, 7), element, element, **attributes)


def _add_without_output_zero_point() -> onnx.ModelProto:
    """C_zero_point is optional (0; the output takes the inputs' type). NOTE: onnxruntime's
    own type inference rejects the A/B zero points absent, so they are given."""
    weights = {"a_scale": _f(0.05), "a_zero": _q(3, U8), "b": _q([[10, 200, 30]], U8)}
    weights |= {"b_scale": _f(0.02), "b_zero": _q(7, U8), "y_scale": _f(0.08)}
    return _model("QLinearAdd", ["x", *weights], weights, ("batch", 3))


def _softmax(element: int, version: int, **attributes) -> onnx.ModelProto:
    """Before op-set 13 (attribute `opset`) Softmax sees the input as 2-D at `axis`."""
    weights = {"x_scale": _f(0.08), "x_zero": _q(128 if element == U8 else 0, element)}
    weights |= {"y_scale": _f(1 / 256), "y_zero": _q(0 if element == U8 else -128, element)}
    return _model(
        "QLinearSoftmax",
        ["x", *weights],
        weights,
        ("batch", 3, 4),
        element,
        element,
        opset=version,
        **attributes,
    )


def _concat() -> onnx.ModelProto:
    """x twice along axis 1 with other parameters, and a constant with the output's own."""
    weights = {
        "y_scale": _f(0.05),
        "y_zero": _q(128, U8),
        "x_scale": _f(0.04),
        "x_zero": _q(120, U8),
        "x2_scale": _f(0.09),
        "x2_zero": _q(10, U8),
    }
    inputs = ["y_scale", "y_zero", "x", "x_scale", "x_zero", "x", "x2_scale", "x2_zero"]
    return _model("QLinearConcat", inputs, weights, ("batch", 3, 4), axis=1)


def _global_average_pool() -> onnx.ModelProto:
    weights = {"x_scale": _f(0.05), "x_zero": _q(128, U8), "y_scale": _f(0.01)}
    weights["y_zero"] = _q(128, U8)
    return _model(
        "QLinearGlobalAveragePool", ["x", *weights], weights, ("batch", 3, 5, 5), channels_last=0
    )


def _average_pool() -> onnx.ModelProto:
    weights = {"x_scale": _f(0.05), "x_zero": _q(0, S8), "y_scale": _f(0.02), "y_zero": _q(-4, S8)}
    return _model(
        "QLinearAveragePool",
        ["x", *weights],
        weights,
        ("batch", 2, 7, 7),
        S8,
        S8,
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        count_include_pad=0,
    )


def _qgemm() -> onnx.ModelProto:
    """What QOperator quantization makes of a Linear layer, per channel: B (N, K) int8 with
    transB=1, per-column b_scale, an int32 bias C.

    NOTE: B in 7 bits, as onnxruntime's quantizer makes it with reduce_range: onnxruntime
    1.32's u8s8 kernel on AVX2 without VNNI saturates pair sums of u8*s8 products in int16
    (vpmaddubsw), so with full-range weights its result is off by a few steps on such CPUs
    (seen: 78 for 80) while niroc's sums are exact."""
    weights = {
        "a_scale": _f(0.05),
        "a_zero": _q(128, U8),
        "b": RNG.integers(-64, 63, (5, 6), endpoint=True).astype(np.int8),
        "b_scale": np.linspace(0.01, 0.03, 5).astype(np.float32),
        "b_zero": np.zeros(5, np.int8),
        "c": RNG.integers(-3000, 3000, (5,)).astype(np.int32),
        "y_scale": _f(0.3),
        "y_zero": _q(100, U8),
    }
    return _model("QGemm", ["x", *weights], weights, ("batch", 6), transB=1)


def _qgemm_float() -> onnx.ModelProto:
    """No y_scale: a float output; A transposed (K, M), alpha, a C of (M, 1)."""
    weights = {
        "a_scale": _f(0.05),
        "a_zero": _q(3, S8),
        "b": RNG.integers(-127, 127, (6, 4)).astype(np.int8),
        "b_scale": _f(0.02),
        "b_zero": _q(0, S8),
        "c": RNG.integers(-300, 300, (3, 1)).astype(np.int32),
    }
    return _model("QGemm", ["x", *weights], weights, (6, 3), S8, F32, transA=1, alpha=0.5)


CASES = {
    "qlinear_add_uint8": lambda: _binary("QLinearAdd", U8),
    "qlinear_add_no_output_zero_point": _add_without_output_zero_point,
    "qlinear_mul_int8": lambda: _binary("QLinearMul", S8),
    "qlinear_sigmoid_uint8": lambda: _unary("QLinearSigmoid", U8),
    "qlinear_leaky_relu_int8": lambda: _unary("QLinearLeakyRelu", S8, alpha=0.2),
    "qlinear_softmax_uint8": lambda: _softmax(U8, 13),
    "qlinear_softmax_int8_opset12_axis1": lambda: _softmax(S8, 12, axis=1),
    "qlinear_concat": _concat,
    "qlinear_global_average_pool": _global_average_pool,
    "qlinear_average_pool_int8": _average_pool,
    "qgemm_per_column": _qgemm,
    "qgemm_float_output": _qgemm_float,
}


def _contrib_result_type(module: Module) -> str:
    """The type of the (one) contrib op's result in an imported one-node model."""
    (function,) = module.functions
    (op,) = [op for op in function.body.blocks[0].operations if isinstance(op, UnknownOp)]
    return format_type(op.results[0].type)


@functools.cache
def _compiled(name: str, directory):
    model = CASES[name]()
    return model, compile_onnx(model, directory, name)


def _input(model: onnx.ModelProto, batch: int) -> np.ndarray:
    tensor_type = model.graph.input[0].type.tensor_type
    shape = [dim.dim_value if dim.dim_value else batch for dim in tensor_type.shape.dim]
    dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("name", sorted(CASES))
def test_contrib_op_matches_onnxruntime(name: str, tmp_path_factory) -> None:
    model, vm_module = _compiled(name, tmp_path_factory.getbasetemp())
    output_scale = {init.name: init for init in model.graph.initializer}.get("y_scale")
    runs = assert_matches_onnxruntime(
        vm_module,
        model,
        [{"x": _input(model, batch)} for batch in (1, 3)],
        function="g",
        rtol=0 if output_scale is not None else 1e-5,
        atol=1 if output_scale is not None else 1e-4,
    )
    assert all(outputs[0].size for outputs in runs)


def test_ties_round_half_to_even_as_onnxruntime(tmp_path) -> None:
    """x / 2 for x = 0..15 (scale 1 in, 2 out): every odd x is a tie, and both sides make
    0, 0, 1, 2, 2, 2, 3, 4, ... exactly."""
    scales = {"one": _f(1.0), "zero": _q(0, U8), "b": _q([0], U8), "two": _f(2.0)}
    model = _model(
        "QLinearAdd", ["x", "one", "zero", "b", "one", "zero", "two", "zero"], scales, (1, 16)
    )
    x = np.arange(16, dtype=np.uint8).reshape(1, 16)
    (outputs,) = assert_matches_onnxruntime(
        compile_onnx(model, tmp_path), model, [{"x": x}], function="g", rtol=0, atol=0
    )
    assert outputs[0].tolist() == [[0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6, 6, 7, 8]]


def test_types_come_from_the_inputs() -> None:
    """The frontend types each output like its float counterpart on the data inputs."""
    names = (
        "qlinear_add_uint8",
        "qlinear_concat",
        "qlinear_average_pool_int8",
        "qgemm_float_output",
    )
    found = {name: _contrib_result_type(import_model(CASES[name]())) for name in names}
    assert found == {
        "qlinear_add_uint8": "tensor<?x4x3x3xui8>",
        "qlinear_concat": "tensor<?x6x4xui8>",
        "qlinear_average_pool_int8": "tensor<?x2x4x4xi8>",
        "qgemm_float_output": "tensor<3x4xf32>",
    }


def test_channels_last_pool_is_typed_but_refused_by_the_backend() -> None:
    weights = {"x_scale": _f(0.05), "x_zero": _q(128, U8), "y_scale": _f(0.01)}
    weights["y_zero"] = _q(128, U8)
    model = _model(
        "QLinearGlobalAveragePool", ["x", *weights], weights, ("batch", 5, 5, 3), channels_last=1
    )
    module = import_model(model)
    assert _contrib_result_type(module) == "tensor<?x1x1x3xui8>"
    with pytest.raises(
        LoweringError,
        match=re.escape(
            "'com.microsoft.QLinearGlobalAveragePool' op supports channels_last=0 (NCHW) only"
        ),
    ):
        lower_to_mlir(module)


def test_qgemm_without_b_scale_is_refused_naming_the_op() -> None:
    """b_scale is required; ONNX has no schema for QGemm to check that at import, so the
    lowering refuses the op naming the input (not an internal error about unpacking None)."""
    weights = {"a_scale": _f(0.05), "a_zero": _q(128, U8), "b": _q([[1, 2], [3, 4]], S8)}
    model = _model("QGemm", ["x", "a_scale", "a_zero", "b", ""], weights, (3, 2), U8, F32)
    module = import_model(model)
    with pytest.raises(
        LoweringError, match=re.escape("'com.microsoft.QGemm' op needs input b_scale")
    ):
        lower_to_mlir(module)


def test_mismatched_shapes_are_an_import_error_naming_the_node() -> None:
    weights = {"s": _f(0.1), "z": _q(0, U8), "b": _q([1, 2, 3], U8)}
    model = _model("QLinearMul", ["x", "s", "z", "b", "s", "z", "s", "z"], weights, (2, 4))
    with pytest.raises(
        OnnxImportError,
        match=r"node 'QLinearMul' \(com\.microsoft\.QLinearMul\): cannot type its outputs: "
        r"its inputs do not fit Mul: ",
    ):
        import_model(model)


def test_an_untyped_contrib_op_names_the_ones_niroc_compiles() -> None:
    """QLinearWhere (not compiled by niroc) into an Identity: its output has no type; the
    message lists the com.microsoft ops niroc types and those it compiles as bodies."""
    weights = {"c": np.array([True, False, True, False]), "s": _f(0.1), "z": _q(0, U8)}
    inputs = ["c", "x", "s", "z", "x", "s", "z", "s", "z"]
    model = _model("QLinearWhere", inputs, weights, (2, 4))
    model.graph.node[0].output[0] = "t"
    model.graph.node.append(helper.make_node("Identity", ["t"], ["y"]))
    with pytest.raises(
        OnnxImportError,
        match=re.escape(
            "value 't' (output of node 'QLinearWhere' (com.microsoft.QLinearWhere)): element "
            "type is unknown (ONNX shape inference has no schema for domain 'com.microsoft' and "
            "the model declares no type for it in value_info; the com.microsoft ops niroc "
            "compiles are Attention, BiasAdd, BiasGelu, DequantizeLinear, DynamicQuantizeMatMul, "
            "EmbedLayerNormalization, FastGelu, FusedConv, FusedGemm, FusedMatMul, "
            "GatherBlockQuantized, "
            "Gelu, GroupQueryAttention, "
            "MatMulIntegerToFloat, MatMulNBits, MultiHeadAttention, QAttention, "
            "QEmbedLayerNormalization, QGemm, QLinearAdd, QLinearAveragePool, QLinearConcat, "
            "QLinearGlobalAveragePool, QLinearLeakyRelu, QLinearMul, QLinearSigmoid, "
            "QLinearSoftmax, QuantizeLinear, QuickGelu, RotaryEmbedding, "
            "SimplifiedLayerNormalization, SkipLayerNormalization, "
            "SkipSimplifiedLayerNormalization)"
        ),
    ):
        import_model(model)


def test_verify_checks_a_contrib_result_against_its_operands() -> None:
    """The frontend's typing is also the type rule niro.ir.verify runs on these ops."""
    module = import_model(CASES["qlinear_add_uint8"]())
    assert verify(module) == []
    operations = module.functions[0].body.blocks[0].operations
    index = next(i for i, op in enumerate(operations) if isinstance(op, UnknownOp))
    wrong = Value(operations[index].results[0].id, TensorType(ScalarType.I8, (None, 4, 3, 3)))
    operations[index] = dataclasses.replace(operations[index], results=(wrong,))
    found = [(d.rule, d.message) for d in verify(module) if d.rule == "contrib-result-type"]
    assert found == [
        (
            "contrib-result-type",
            "'com.microsoft.QLinearAdd' op result #0 has type tensor<?x4x3x3xi8>, but its "
            "operands give tensor<?x4x3x3xui8>",
        )
    ]


_QDQ_TYPES = {
    "int16": TensorProto.INT16,
    "uint16": TensorProto.UINT16,
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
}


def _qdq_model(element: int, zero_points: bool) -> onnx.ModelProto:
    """What onnxruntime's quantizer writes for 16- and 4-bit types below opset 21 (ONNX's own
    ops lack them there): x [batch, 8] through com.microsoft QuantizeLinear / DequantizeLinear
    (per tensor), times a weight [8, 4] of the same type dequantized per column (axis 1)."""
    rng = np.random.default_rng(element)
    bits = 16 if element in (TensorProto.INT16, TensorProto.UINT16) else 4
    signed = element in (TensorProto.INT16, TensorProto.INT4)
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    weight = rng.integers(low, high, (8, 4), endpoint=True)
    initializers = [
        helper.make_tensor("w", element, [8, 4], weight.flatten().tolist()),
        numpy_helper.from_array(_f(0.02 if bits == 4 else 2e-4), "x_scale"),
        numpy_helper.from_array(rng.uniform(0.05, 0.2, 4).astype(np.float32), "w_scale"),
    ]
    ms = "com.microsoft"
    x_inputs, w_inputs = ["x_q", "x_scale"], ["w", "w_scale"]
    if zero_points:
        middle = 0 if signed else (1 << (bits - 1))
        initializers += [
            helper.make_tensor("x_zero", element, [], [middle + (1 if signed else -3)]),
            helper.make_tensor("w_zero", element, [4], [middle, middle + 1, middle - 1, middle]),
        ]
        x_inputs.append("x_zero")
        w_inputs.append("w_zero")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", *x_inputs[1:]], ["x_q"], domain=ms, name="q"),
        helper.make_node("DequantizeLinear", x_inputs, ["a"], domain=ms, name="dq_x"),
        helper.make_node("DequantizeLinear", w_inputs, ["b"], domain=ms, name="dq_w", axis=1),
        helper.make_node("MatMul", ["a", "b"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F32, ["batch", 8])],
        [helper.make_tensor_value_info("y", F32, None)],
        initializers,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


@pytest.mark.parametrize("zero_points", [True, False])
@pytest.mark.parametrize("name", sorted(_QDQ_TYPES))
def test_contrib_quantize_dequantize_match_onnxruntime(tmp_path, name, zero_points) -> None:
    """com.microsoft QuantizeLinear / DequantizeLinear are ONNX's ops (opset 21) by another
    name, compiled as such: exact agreement (the MatMul's f32 sum aside)."""
    model = _qdq_model(_QDQ_TYPES[name], zero_points)
    vm_module = compile_onnx(model, tmp_path)
    feeds = [{"x": RNG.uniform(-1, 1, (batch, 8)).astype(np.float32)} for batch in (1, 5)]
    # rtol: int16 values make products of ~1e4, whose f32 sum differs from onnxruntime's in the
    # last bits (2.3e-6 relative seen, on the inputs the shared RNG gave in another test order)
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-6)


def test_outputs_of_contrib_calls_exposed_by_name_keep_their_consumers_typed() -> None:
    """`niroc check` exposes intermediate values as graph outputs declared by name only. ONNX
    inference gives such an output an empty type when its producer has no schema (the
    com.microsoft dequantizations of a Conv's input and weight); taken as a type, it hid that
    the conversion typed the operands better than inference, and the Conv was left without the
    static channel dim it needs."""
    ms = "com.microsoft"
    weight = RNG.integers(-300, 300, (3, 2, 3, 3))
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["x_q"], domain=ms),
        helper.make_node("DequantizeLinear", ["x_q", "s", "z"], ["a"], domain=ms),
        helper.make_node("DequantizeLinear", ["w", "s", "z"], ["b"], domain=ms),
        helper.make_node("Conv", ["a", "b"], ["y"], name="conv"),
        helper.make_node("Relu", ["y"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F32, ["batch", 2, 5, 5])],
        [helper.make_tensor_value_info("out", F32, None)],
        [
            helper.make_tensor("w", TensorProto.INT16, [3, 2, 3, 3], weight.flatten().tolist()),
            numpy_helper.from_array(_f(1e-3), "s"),
            helper.make_tensor("z", TensorProto.INT16, [], [0]),
        ],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    # declared as onnxruntime's quant_pre_process declares it (the declared dims are set
    # aside, so typing knows its rank only)
    model.graph.value_info.append(helper.make_tensor_value_info("y", F32, ["batch", 3, 3, 3]))
    model.graph.output.extend([onnx.ValueInfoProto(name="a"), onnx.ValueInfoProto(name="b")])
    module = import_model(model)
    operations = module.functions[0].body.blocks[0].operations
    (conv,) = [op for op in operations if isinstance(op, UnknownOp) and op.name == "onnx.Conv"]
    assert format_type(conv.results[0].type) == "tensor<?x3x3x3xf32>"
    lower_to_mlir(module)


@pytest.mark.parametrize(
    "op, weight_type, per_column, bias",
    [
        ("DynamicQuantizeMatMul", S8, False, True),
        ("DynamicQuantizeMatMul", U8, False, False),
        ("MatMulIntegerToFloat", S8, False, True),
        ("MatMulIntegerToFloat", U8, True, False),
    ],
)
def test_fused_integer_products_match_onnxruntime(tmp_path, op, weight_type, per_column, bias):
    """com.microsoft DynamicQuantizeMatMul and MatMulIntegerToFloat (what onnxruntime's graph
    optimizer fuses a dynamically quantized MatMul into, in a model saved optimized): the
    integer product of 8-bit operands, scaled, plus a bias; A [batch, 3, 8] by B [8, 5]."""
    dtype = helper.tensor_dtype_to_np_dtype(weight_type)
    low, high = (0, 255) if weight_type == U8 else (-127, 127)
    columns = 5 if per_column else 1
    scales = RNG.uniform(0.01, 0.05, columns).astype(np.float32)
    zeros = RNG.integers(low, high, columns).astype(dtype)
    weights = {
        "B": RNG.integers(low, high, (8, 5)).astype(dtype),
        "b_scale": scales if per_column else scales.reshape(()),
        "b_zero_point": zeros if per_column else zeros.reshape(()),
    }
    if bias:
        weights["bias"] = _f(RNG.standard_normal(5))
    if op == "DynamicQuantizeMatMul":
        names = ["x", "B", "b_scale", "b_zero_point", "bias" if bias else ""]
        x_type = F32
    else:
        weights |= {"a_scale": _f(0.03), "a_zero_point": _q(7 if weight_type == S8 else 130, U8)}
        names = ["x", "B", "a_scale", "b_scale", "a_zero_point", "b_zero_point"]
        names += ["bias"] if bias else []
        x_type = U8
    model = _model(op, names, weights, ("batch", 3, 8), x_type, F32)
    vm_module = compile_onnx(model, tmp_path)

    def x(batch):
        if x_type == F32:
            return RNG.standard_normal((batch, 3, 8)).astype(np.float32)
        return RNG.integers(0, 256, (batch, 3, 8)).astype(np.uint8)

    assert_matches_onnxruntime(
        vm_module, model, [{"x": x(1)}, {"x": x(4)}], function="g", rtol=1e-5, atol=1e-5
    )
