"""Models quantized as users quantize them: onnxruntime's own tool (`quantize_dynamic`, and
`quantize_static` with a calibration reader, in QDQ and QOperator formats, per-tensor and
per-channel, int8 and uint8; 16-bit activations and 4-bit weights, which below opset 21 it writes
as com.microsoft QuantizeLinear / DequantizeLinear), run at test time on small float models (built here, or the
PyTorch exports in testdata/pytorch) into tmp_path; each quantization takes well under a second.
Each result is compiled once by niroc and iree-compile and compared with onnxruntime running
the same quantized model, at several sizes of its dynamic dims.

Reference and tolerance. onnxruntime runs with its graph optimizations off: it then executes
every QuantizeLinear / DequantizeLinear / QLinear op as ONNX defines it, and agrees with
onnx.reference bit for bit on these models. Its default optimizer fuses DQ -> op -> Q chains
into integer kernels that round in another order, and deep models drift several quantization
steps from the ONNX semantics (3-4 steps on the exported encoder and ViT; measured with
/tmp/q/check.py during the survey). Quantized outputs (a final DequantizeLinear) are compared
within one step of the output scale: a value a hair from a .5 boundary may still round the
other way when niroc's f32 arithmetic and onnxruntime's differ in the last bit. Dynamically
quantized models end in float ops, compared within 1e-4 (their quantization is recomputed from
the data, so both sides round the same values).

QOperator models also use onnxruntime's com.microsoft contrib ops (QLinearAdd, QGemm, ...):
ONNX cannot type them; niroc's frontend types them and its backend lowers them (each compared
one by one in onnx_ops/test_contrib_quantized.py). The rest (DynamicQuantizeLSTM, ...) are
refused by name.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from niro.backends.mlir import LoweringError, cannot_lower, lower_to_mlir
from niro.frontends.onnx import import_model
from niro.ir import UnknownOp, format_type
from onnx import TensorProto, helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

quantization = pytest.importorskip("onnxruntime.quantization")
QuantFormat, QuantType = quantization.QuantFormat, quantization.QuantType

PYTORCH = Path(__file__).resolve().parents[3] / "testdata" / "pytorch"


def _weights(seed: int, **shapes) -> list[onnx.TensorProto]:
    rng = np.random.default_rng(seed)
    return [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
        for name, shape in shapes.items()
    ]


def _float_model(name, nodes, x_shape, y_shape, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _cnn() -> onnx.ModelProto:
    """Conv -> Relu -> Conv + skip Add -> Mul -> Sigmoid / LeakyRelu -> Concat -> MaxPool ->
    GlobalAveragePool -> Flatten -> Gemm, batch dynamic: QOperator makes every contrib op of it."""
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        node("Add", ["c2", "r1"], ["a1"], name="add1"),
        node("Mul", ["a1", "c1"], ["m1"], name="mul1"),
        node("Sigmoid", ["m1"], ["s1"], name="sigmoid1"),
        node("LeakyRelu", ["c2"], ["l1"], alpha=0.1, name="leaky1"),
        node("Concat", ["s1", "l1"], ["cat"], axis=1, name="concat1"),
        node("MaxPool", ["cat"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        node("GlobalAveragePool", ["mp"], ["gap"], name="gap1"),
        node("Flatten", ["gap"], ["flat"], name="flatten1"),
        node("Gemm", ["flat", "wg", "bg"], ["y"], transB=1, name="fc"),
    ]
    weights = _weights(1, w1=(4, 3, 3, 3), b1=(4,), w2=(4, 4, 3, 3), b2=(4,), wg=(5, 8), bg=(5,))
    return _float_model("cnn", nodes, ["batch", 3, 8, 8], ["batch", 5], weights)


def _conv_matmul() -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool -> Flatten -> MatMul: in QOperator format only standard ops
    (QLinearConv, QLinearMatMul) remain."""
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("MaxPool", ["r1"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Flatten", ["mp"], ["flat"]),
        node("MatMul", ["flat", "wm"], ["y"]),
    ]
    weights = _weights(2, w1=(4, 3, 3, 3), b1=(4,), wm=(64, 5))
    return _float_model("conv_matmul", nodes, ["batch", 3, 8, 8], ["batch", 5], weights)


def _mlp() -> onnx.ModelProto:
    """MatMul -> Add -> Relu -> MatMul on (batch, seq, 16), as a Transformer's feed-forward."""
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "w1"], ["h1"]),
        node("Add", ["h1", "b1"], ["h2"]),
        node("Relu", ["h2"], ["h3"]),
        node("MatMul", ["h3", "w2"], ["y"]),
    ]
    weights = _weights(3, w1=(16, 32), b1=(32,), w2=(32, 8))
    return _float_model("mlp", nodes, ["batch", "seq", 16], ["batch", "seq", 8], weights)


def _images(rng, batch):
    return {"x": rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)}


def _rows(rng, batch, seq):
    return {"x": rng.standard_normal((batch, seq, 16)).astype(np.float32)}


def _gpt_ids(rng, batch, seq):
    return {"ids": rng.integers(0, 50, (batch, seq)).astype(np.int64)}


def _lstm_input(rng, seq, batch):
    return {"x": rng.standard_normal((seq, batch, 16)).astype(np.float32)}


class _Calibration(quantization.CalibrationDataReader):
    def __init__(self, feeds):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


# name: (float model maker or testdata file, input maker, calibration size, run sizes,
#        quantization: "dynamic" or (format, activation type, weight type, per_channel[,
#        the quantizer's extra_options]))
U8, S8 = QuantType.QUInt8, QuantType.QInt8
CASES = {
    "mlp_dynamic_int8_per_channel": (_mlp, _rows, (2, 3), [(1, 1), (3, 5)], ("dynamic", S8, True)),
    "cnn_qdq_u8s8_per_channel": (
        _cnn,
        _images,
        (2,),
        [(1,), (3,)],
        (QuantFormat.QDQ, U8, S8, True),
    ),
    "cnn_qdq_s8s8": (_cnn, _images, (2,), [(1,), (3,)], (QuantFormat.QDQ, S8, S8, False)),
    # 16-bit activations and 4-bit weights: below opset 21 the quantizer writes
    # com.microsoft QuantizeLinear / DequantizeLinear (ONNX's ops lack these types there)
    "cnn_qdq_s16s8_contrib": (
        _cnn,
        _images,
        (2,),
        [(1,), (3,)],
        (QuantFormat.QDQ, QuantType.QInt16, S8, False, {"UseQDQContribOps": True}),
    ),
    "cnn_qdq_u8u4_per_channel": (
        _cnn,
        _images,
        (2,),
        [(1,), (3,)],
        (QuantFormat.QDQ, U8, QuantType.QUInt4, True),
    ),
    "mlp_qdq_u16s4": (
        _mlp,
        _rows,
        (2, 3),
        [(1, 1), (3, 5)],
        (QuantFormat.QDQ, QuantType.QUInt16, QuantType.QInt4, False),
    ),
    "conv_matmul_qoperator_u8s8_per_channel": (
        _conv_matmul,
        _images,
        (2,),
        [(1,), (3,)],
        (QuantFormat.QOperator, U8, S8, True),
    ),
    "conv_matmul_qoperator_u8u8": (
        _conv_matmul,
        _images,
        (2,),
        [(2,)],
        (QuantFormat.QOperator, U8, U8, False),
    ),
    "cnn_qoperator_u8s8": (
        _cnn,
        _images,
        (2,),
        [(1,), (3,)],
        (QuantFormat.QOperator, U8, S8, False),
    ),
    "cnn_qoperator_s8s8_per_channel": (
        _cnn,
        _images,
        (2,),
        [(2,)],
        (QuantFormat.QOperator, S8, S8, True),
    ),
    "gpt_qdq_u8s8": (
        "gpt.onnx",
        _gpt_ids,
        (2, 9),
        [(1, 1), (2, 12)],
        (QuantFormat.QDQ, U8, S8, False),
    ),
    "lstm_qdq_s8s8_per_channel": (
        "lstm.onnx",
        _lstm_input,
        (5, 2),
        [(1, 1), (7, 2)],
        (QuantFormat.QDQ, S8, S8, True),
    ),
}


def _float_path(source, folder: Path) -> Path:
    if isinstance(source, str):
        return PYTORCH / source
    path = folder / "float.onnx"
    onnx.save(source(), path)
    return path


def _quantize(source, make_input, calibration_size, how, folder: Path) -> Path:
    float_path = _float_path(source, folder)
    path = folder / "quantized.onnx"
    if how[0] == "dynamic":
        _, weight_type, per_channel = how
        quantization.quantize_dynamic(
            float_path,
            path,
            weight_type=weight_type,
            per_channel=per_channel,
            reduce_range=_reduce_range(QuantType.QUInt8, weight_type),
        )
        return path
    quant_format, activation_type, weight_type, per_channel, *extra = how
    rng = np.random.default_rng(5)
    quantization.quantize_static(
        float_path,
        path,
        _Calibration([make_input(rng, *calibration_size) for _ in range(4)]),
        quant_format=quant_format,
        activation_type=activation_type,
        weight_type=weight_type,
        per_channel=per_channel,
        reduce_range=_reduce_range(activation_type, weight_type),
        extra_options=extra[0] if extra else None,
    )
    return path


def _reduce_range(activation_type, weight_type) -> bool:
    """7-bit weights for u8 activations x s8 weights, as onnxruntime's quantizer recommends on
    CPUs without VNNI.

    NOTE: onnxruntime 1.32's u8s8 kernels on AVX2 without VNNI add pairs of u8*s8 products
    in int16 with saturation (vpmaddubsw), so with full-range weights its results are off by
    a few steps on such machines (seen: conv_matmul_qoperator_u8s8_per_channel,
    mlp_dynamic_int8_per_channel), while niroc computes the exact sums. With 7-bit weights a
    pair sum fits int16 and onnxruntime is exact on every x86 CPU."""
    return activation_type == QuantType.QUInt8 and weight_type == QuantType.QInt8


def _unoptimized_session(path: Path) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _output_scale(model: onnx.ModelProto) -> float | None:
    """The scale of the DequantizeLinear that makes the (one) graph output, if one does."""
    (output,) = model.graph.output
    producer = next(node for node in model.graph.node if output.name in node.output)
    if producer.op_type != "DequantizeLinear":
        return None
    scales = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    return float(np.max(scales[producer.input[1]]))


@pytest.mark.parametrize("name", sorted(CASES))
def test_quantized_model_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    source, make_input, calibration_size, sizes, how = CASES[name]
    path = _quantize(source, make_input, calibration_size, how, tmp_path)
    model = onnx.load(path)
    scale = _output_scale(model)
    assert (scale is None) == (how[0] == "dynamic")
    vm_module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(6)
    assert_matches_onnxruntime(
        vm_module,
        _unoptimized_session(path),
        [make_input(rng, *size) for size in sizes],
        function=model.graph.name,
        rtol=1e-4,
        atol=1e-4 if scale is None else scale * 1.0001,
    )


def _cnn_qoperator(folder: Path) -> Path:
    return _quantize(_cnn, _images, (2,), (QuantFormat.QOperator, U8, S8, False), folder)


CONTRIB_OPS = [
    "QLinearAdd",
    "QLinearMul",
    "QLinearSigmoid",
    "QLinearLeakyRelu",
    "QLinearConcat",
    "QLinearGlobalAveragePool",
    "QGemm",
]


def test_qoperator_contrib_ops_are_typed_by_the_frontend(tmp_path: Path) -> None:
    """ONNX types none of them; niroc does, like their float counterparts (batch dynamic)."""
    model = onnx.load(_cnn_qoperator(tmp_path))
    found = [node.op_type for node in model.graph.node if node.domain == "com.microsoft"]
    assert sorted(found) == sorted(CONTRIB_OPS)
    (function,) = import_model(model).functions
    types = {
        op.name: format_type(op.results[0].type)
        for op in function.body.blocks[0].operations
        if isinstance(op, UnknownOp) and op.name.startswith("com.microsoft.")
    }
    assert types == {
        "com.microsoft.QLinearAdd": "tensor<?x4x8x8xui8>",
        "com.microsoft.QLinearMul": "tensor<?x4x8x8xui8>",
        "com.microsoft.QLinearSigmoid": "tensor<?x4x8x8xui8>",
        "com.microsoft.QLinearLeakyRelu": "tensor<?x4x8x8xui8>",
        "com.microsoft.QLinearConcat": "tensor<?x8x8x8xui8>",
        "com.microsoft.QLinearGlobalAveragePool": "tensor<?x8x1x1xui8>",
        "com.microsoft.QGemm": "tensor<?x5xui8>",
    }


def test_declared_contrib_types_are_kept(tmp_path: Path) -> None:
    """With their types declared (value_info, as onnxruntime's symbolic shape inference or a
    user may add them, here static) the declared types win, and the model lowers."""
    model = onnx.load(_cnn_qoperator(tmp_path))
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    names = [node.output[0] for node in model.graph.node if node.domain == "com.microsoft"]
    exposed.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    feeds = _images(np.random.default_rng(0), 2)
    values = onnxruntime.InferenceSession(exposed.SerializeToString()).run(names, feeds)
    for name, value in zip(names, values, strict=True):
        element = helper.np_dtype_to_tensor_dtype(value.dtype)
        model.graph.value_info.append(helper.make_tensor_value_info(name, element, value.shape))
    module = import_model(model, expand_functions=cannot_lower)
    (function,) = module.functions
    gemm = next(
        op
        for op in function.body.blocks[0].operations
        if isinstance(op, UnknownOp) and op.loc == "fc_quant"
    )
    assert format_type(gemm.results[0].type) == "tensor<2x5xui8>"
    lower_to_mlir(module)


def test_dynamically_quantized_lstm_is_refused_by_name(tmp_path: Path) -> None:
    """quantize_dynamic turns an LSTM into com.microsoft.DynamicQuantizeLSTM (typed: its outputs
    keep the float LSTM's value_info)."""
    path = tmp_path / "lstm.onnx"
    quantization.quantize_dynamic(PYTORCH / "lstm.onnx", path, weight_type=S8)
    with pytest.raises(
        LoweringError,
        match=r"2 operations have no MLIR lowering: com\.microsoft\.DynamicQuantizeLSTM "
        r"\(x2, first at node '/lstm/LSTM_quant'\)",
    ):
        lower_to_mlir(import_model(path, expand_functions=cannot_lower))


def test_the_cli_names_the_contrib_op(tmp_path: Path) -> None:
    path = tmp_path / "lstm.onnx"
    quantization.quantize_dynamic(PYTORCH / "lstm.onnx", path, weight_type=S8)
    output = tmp_path / "out.mlir"
    niroc = Path(sys.executable).parent / "niroc"
    completed = subprocess.run(
        [str(niroc), str(path), "-o", str(output)], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 1
    assert completed.stderr.strip() == (
        f"error: {path}: 2 operations have no MLIR lowering: com.microsoft.DynamicQuantizeLSTM "
        "(x2, first at node '/lstm/LSTM_quant')\n"
        "note: pass --allow-unknown to keep them as generic MLIR ops"
    )
    assert not output.exists()
