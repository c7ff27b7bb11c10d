"""Shape inference (inference.py): data propagation folds shape arithmetic, except in a model
with a long 1-D value, where ONNX's data propagation would materialise every element (a graph
input float[2**31] into a Mul hung niroc for minutes; found by the hostile-input fuzzing)."""

from __future__ import annotations

import onnx
from niro.frontends.onnx import inference
from niro.frontends.onnx.inference import DATA_PROPAGATION_LIMIT, infer_types

OPSET = '<ir_version: 8, opset_import: ["" : 17]>'
SHAPE_ARITHMETIC = "s = Shape(x)\n y = Reshape(x, s)"


def _dims(types, name: str) -> list[int] | None:
    tensor = types.values[name].tensor_type
    if not tensor.HasField("shape"):
        return None
    return [dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim]


def test_data_propagation_folds_shape_arithmetic() -> None:
    model = onnx.parser.parse_model(OPSET + f"g (float[2, 3] x) => (y) {{ {SHAPE_ARITHMETIC} }}")
    assert _dims(infer_types(model), "y") == [2, 3]


def test_a_long_vector_turns_data_propagation_off(monkeypatch) -> None:
    passes = []
    real_infer = inference._infer

    def recording_infer(model, *, data_prop):
        passes.append(data_prop)
        return real_infer(model, data_prop=data_prop)

    monkeypatch.setattr(inference, "_infer", recording_infer)
    length = DATA_PROPAGATION_LIMIT + 1
    model = onnx.parser.parse_model(
        OPSET + f"g (float[2, 3] x, float[{length}] v) => (y, w) {{ {SHAPE_ARITHMETIC}\n w = Mul(v, v) }}"
    )
    types = infer_types(model)
    assert _dims(types, "w") == [length]  # still typed
    assert True not in passes  # ONNX's data propagation never ran...
    assert _dims(types, "y") == [2, 3]  # ...and niroc's own folding still typed the Reshape


def test_a_vector_of_2_pow_31_elements_is_typed_without_materialising_it() -> None:
    model = onnx.parser.parse_model(OPSET + "g (float[2147483648] v) => (w) { w = Mul(v, v) }")
    assert _dims(infer_types(model), "w") == [2**31]


def test_stft_without_onesided_is_typed_one_sided() -> None:
    # ONNX 1.23's own inference says 16 bins (two-sided); the schema default onesided=1 gives 9
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[1, 64, 1] s) => (y) {'
        " step = Constant <value_int = 8> ()\n len = Constant <value_int = 16> ()\n y = STFT(s, step, , len) }"
    )
    assert _dims(infer_types(model), "y") == [1, 7, 9, 2]


def test_a_shape_preserving_op_gives_its_input_its_output_shape() -> None:
    # ReduceL2's body: ONNX cannot type ReduceSum with run-time axes; the Sqrt after it ends in
    # the declared graph output, and a unary element-wise op's input has its output's shape
    model = onnx.parser.parse_model(
        OPSET + " g (float[3, 2, 2] x, int64[1] axes) => (float[3, 1, 2] y) {"
        " s = ReduceSum <keepdims = 1> (x, axes)\n y = Sqrt(s) }"
    )
    types = infer_types(model)
    assert _dims(types, "s") == [3, 1, 2]
    assert _dims(types, "axes") == [1]  # graph inputs keep their declared types


def test_backward_shapes_do_not_cross_ops_that_change_shapes() -> None:
    model = onnx.parser.parse_model(
        OPSET + " g (float[3, 2, 2] x, int64[1] axes) => (float[3, 1, 2] y) {"
        " s = ReduceSum <keepdims = 1> (x, axes)\n t = ReduceSum <keepdims = 1> (s, axes)\n y = Sqrt(t) }"
    )
    types = infer_types(model)
    assert _dims(types, "t") == [3, 1, 2]
    assert _dims(types, "s") is None
