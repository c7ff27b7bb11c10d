"""Shape inference (inference.py): data propagation folds shape arithmetic, except in a model
with a long 1-D value, where ONNX's data propagation would materialise every element (a graph
input float[2**31] into a Mul hung niroc for minutes; found by the hostile-input fuzzing)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
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


@pytest.fixture
def passes(monkeypatch) -> list[bool]:
    """The data_prop flag of every ONNX inference pass, in order."""
    recorded: list[bool] = []
    real_infer = inference._infer

    def recording_infer(model, *, data_prop):
        recorded.append(data_prop)
        return real_infer(model, data_prop=data_prop)

    monkeypatch.setattr(inference, "_infer", recording_infer)
    return recorded


def test_a_long_vector_turns_data_propagation_off(passes) -> None:
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
    assert types.shaped_backwards == {"s"}  # (folding saw it without a shape)


def test_folding_says_whether_it_stopped_with_a_round_to_spare(monkeypatch) -> None:
    model = onnx.parser.parse_model(OPSET + f"g (float[2, 3] x) => (y) {{ {SHAPE_ARITHMETIC} }}")
    assert infer_types(model).spare_fold_round
    monkeypatch.setattr(inference, "FOLD_ROUNDS", 1)  # the Shape folds in the only round
    assert not infer_types(model).spare_fold_round


def test_backward_shapes_do_not_cross_ops_that_change_shapes() -> None:
    model = onnx.parser.parse_model(
        OPSET + " g (float[3, 2, 2] x, int64[1] axes) => (float[3, 1, 2] y) {"
        " s = ReduceSum <keepdims = 1> (x, axes)\n t = ReduceSum <keepdims = 1> (s, axes)\n y = Sqrt(t) }"
    )
    types = infer_types(model)
    assert _dims(types, "t") == [3, 1, 2]
    assert _dims(types, "s") is None


def test_strip_weights_copies_plain_nodes_whole_and_strips_tensor_attributes() -> None:
    big = onnx.numpy_helper.from_array(np.arange(2048, dtype=np.float32).reshape(64, 32))
    small = onnx.numpy_helper.from_array(np.array([2, 3], dtype=np.int64))
    nodes = [
        onnx.helper.make_node("Relu", ["x"], ["a"], name="plain0"),
        onnx.helper.make_node("Constant", [], ["w"], name="weight", value=big),
        onnx.helper.make_node("Constant", [], ["s"], name="shape", value=small),
        onnx.helper.make_node("Transpose", ["a"], ["b"], name="plain1", perm=[1, 0]),
        onnx.helper.make_node("MatMul", ["b", "w"], ["y"], name="plain2"),
    ]
    graph = onnx.helper.make_graph(
        nodes, "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [64, 32])], []
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    stripped = inference.strip_weights(model).graph.node
    assert [node.name for node in stripped] == ["plain0", "weight", "shape", "plain1", "plain2"]
    for position in (0, 2, 3, 4):  # no big tensor: copied as it is, attributes included
        assert stripped[position] == nodes[position]
    weight = stripped[1].attribute[0].t
    assert weight.data_location == onnx.TensorProto.EXTERNAL and not weight.HasField("raw_data")
    assert list(weight.dims) == [64, 32]
    assert model.graph.node[1].attribute[0].t.HasField("raw_data")  # the model is left untouched


def test_data_propagation_runs_only_where_shape_data_can_start(passes) -> None:
    float_only = "g (float[2, 3] x, float[3, 2] w) => (y) { m = MatMul(x, w)\n y = Relu(m) }"
    infer_types(onnx.parser.parse_model(OPSET + float_only))
    assert passes == [False]  # no Shape, Size, Constant, subgraph, integer weight or function
    sources = [
        f"g (float[2, 3] x) => (y) {{ {SHAPE_ARITHMETIC} }}",
        "g (float[2, 3] x) => (y) { s = Size(x)\n y = Cast <to = 1> (s) }",
        "g (float[6] x) => (y) { s = Constant <value_ints = [2, 3]> ()\n y = Reshape(x, s) }",
        "g (float[6] x) => (y) <int64[2] s = {2, 3}> { y = Reshape(x, s) }",
    ]
    for text in sources:
        passes.clear()
        infer_types(onnx.parser.parse_model(OPSET + text))
        assert passes[:2] == [False, True], text  # (then a pass per folding round)


def test_an_input_or_initializer_declared_in_value_info_keeps_its_own_dims() -> None:
    # PyTorch's dynamo exporter declares every initializer in value_info (onnx.utils'
    # extract_model the graph inputs); the import sets declared dims aside, but an
    # initializer's dims are the tensor's and an input's its own declaration's: the [1, 1] index
    # of a GatherND (Falcon's multi-query attention picks its one key head so), the [1, 8]
    # buffer of a Slice and the [3, B, 4] input must keep theirs, else the [1, B, 4] and [1, ?]
    # results lose their static dims.
    model = onnx.parser.parse_model(
        OPSET + " g (float[3, B, 4] x, int64[1] end) => (y, z)"
        " <int64[1, 1] index = {0}, int64[1, 8] positions = {0, 1, 2, 3, 4, 5, 6, 7},"
        " int64[1] zero = {0}, int64[1] axis = {1}> {"
        " y = GatherND(x, index)\n z = Slice(positions, zero, end, axis) }"
    )
    for name, element, dims in (
        ("index", onnx.TensorProto.INT64, [1, 1]),
        ("positions", onnx.TensorProto.INT64, [1, 8]),
        ("x", onnx.TensorProto.FLOAT, [3, "B", 4]),
    ):
        model.graph.value_info.append(onnx.helper.make_tensor_value_info(name, element, dims))
    types = infer_types(model)
    assert _dims(types, "x") == [3, None, 4]
    assert _dims(types, "y") == [1, None, 4]
    assert _dims(types, "z") == [1, None]


def test_an_output_declared_without_a_type_takes_its_value_info() -> None:
    # `niroc check` exposes an intermediate value as a graph output declared by name only; in a
    # dynamo export that value is declared in value_info too. ONNX inference then types the
    # value_info entry and leaves the output untyped ("element type is unknown"); the output
    # takes the entry's type. A Relu with no schema-derived type of its own (custom domain)
    # shows the declaration is not simply re-derived.
    model = onnx.parser.parse_model(
        OPSET.replace('["" : 17]', '["" : 17, "custom" : 1]')
        + " g (int64[N] x) => (z) { y = Cast<to = 9>(x)\n w = custom.Op(x)\n z = Not(y) }"
    )
    model.graph.output.extend([onnx.ValueInfoProto(name="y"), onnx.ValueInfoProto(name="w")])
    model.graph.value_info.extend(
        [
            onnx.helper.make_tensor_value_info("y", onnx.TensorProto.BOOL, ["N"]),
            onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT16, [3]),
        ]
    )
    types = infer_types(model)
    assert types.values["y"].tensor_type.elem_type == onnx.TensorProto.BOOL
    assert _dims(types, "y") == [None]
    assert types.values["w"].tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert _dims(types, "w") == [3]
