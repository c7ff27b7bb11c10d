"""The typing step (graph_typing.py): the model is inferred once, and again only after a rewrite
that read its types changed it and could not type what it wrote; the Conv folds of half weights
type what they write, and so does the fp16/bf16 plan where it can (bodies included)."""

from __future__ import annotations

from collections.abc import Callable

import niro.ir as nir
import numpy as np
import onnx
import onnx_ir
import pytest
from niro.frontends.onnx import OnnxImportError, graph_typing, import_model
from niro.frontends.onnx.graph_typing import bound_types, typed_model
from niro.frontends.onnx.value_types import ValueTypes
from onnx import TensorProto, numpy_helper

from .test_half_precision import conv_fold_model, if_model

OPSET = '<ir_version: 8, opset_import: ["" : 17]>'


@pytest.fixture
def inferred(monkeypatch) -> list[list[str]]:
    """The op types of each model the typing step infers, in order."""
    recorded: list[list[str]] = []
    real_infer_types = graph_typing.infer_types

    def recording_infer_types(model, split_raw=None):
        recorded.append([node.op_type for node in model.graph.node])
        return real_infer_types(model, split_raw)

    monkeypatch.setattr(graph_typing, "infer_types", recording_infer_types)
    return recorded


class _Typed:
    """A model after the whole typing step: inferred, read, rewritten on onnx_ir and typed."""

    def __init__(
        self, model: onnx.ModelProto, read_half: Callable[[str], np.ndarray | None]
    ) -> None:
        self.model, self.types = typed_model(model, "m.onnx", read_half=read_half)
        self.graph = onnx_ir.serde.serialize_model(self.model).graph

    def value(self, name: str, graph: onnx_ir.Graph | None = None) -> onnx_ir.Value:
        """The value called `name` in `graph` (the main graph by default)."""
        graph = self.model.graph if graph is None else graph
        values = [*graph.inputs, *(value for node in graph for value in node.outputs)]
        return next(value for value in values if value.name == name)

    def type(self, name: str, graph: onnx_ir.Graph | None = None) -> onnx.TypeProto:
        found = self.types.type_of(self.value(name, graph))
        assert found is not None, name
        return found

    def folded_names(self) -> set[str]:
        return {tensor.name for tensors in self.types.folded.values() for tensor in tensors}

    def inferred_again(self) -> ValueTypes:
        """The types inference gives the model as rewritten."""
        return bound_types(
            self.model, graph_typing.infer_types(onnx_ir.serde.serialize_model(self.model))
        )


def _no_half(name: str) -> None:
    return None


def _elem_type(typed: _Typed, name: str) -> int:
    return typed.type(name).tensor_type.elem_type


def test_a_model_no_rewrite_changes_is_inferred_once_and_kept(inferred) -> None:
    model = onnx.parser.parse_model(OPSET + "g (float[2, 3] x) => (y) { y = Relu(x) }")
    typed = _Typed(model, _no_half)
    assert inferred == [["Relu"]]
    assert _elem_type(typed, "y") == TensorProto.FLOAT


def test_sequences_are_rewritten_from_the_first_types_and_the_result_typed_again(inferred) -> None:
    model = onnx.parser.parse_model(
        OPSET
        + "g (float[2, 3] x) => (y) { s = SequenceConstruct(x, x)\n y = ConcatFromSequence<axis = 0>(s) }"
    )
    typed = _Typed(model, _no_half)
    assert inferred == [["SequenceConstruct", "ConcatFromSequence"], ["Concat"]]
    assert [node.op_type for node in typed.graph.node] == ["Concat"]
    assert typed.type("y").tensor_type.shape.dim[0].dim_value == 4


def test_the_model_is_read_once_and_rewritten_in_place(inferred, monkeypatch) -> None:
    """Sequences and fp16 in one model: one read of the proto into onnx_ir, both rewrites on
    that model (the sequence rewrite typed again from a proto written of it, the plan typing
    what it writes), and the import converts that same model."""
    reads: list[onnx.ModelProto] = []
    real_deserialize = graph_typing.deserialize_model

    def recording_deserialize(model, display):
        reads.append(model)
        return real_deserialize(model, display)

    monkeypatch.setattr(graph_typing, "deserialize_model", recording_deserialize)
    model = onnx.parser.parse_model(
        OPSET
        + """g (float16[2, 3] x) => (float16[4, 3] y) {
            s = SequenceConstruct(x, x)
            c = ConcatFromSequence<axis = 0>(s)
            y = Sin(c)
        }"""
    )
    typed = _Typed(model, _no_half)
    assert reads == [model]
    assert inferred == [["SequenceConstruct", "ConcatFromSequence", "Sin"], ["Concat", "Sin"]]
    assert [node.op_type for node in typed.graph.node] == ["Concat", "Cast", "Sin", "Cast"]
    assert _elem_type(typed, "c") == TensorProto.FLOAT16
    assert _elem_type(typed, "y_f32") == TensorProto.FLOAT  # typed by the plan, not inferred
    module = import_model(model)
    assert [nir.op_name(op) for op in module.functions[0].first_block.operations].count(
        "onnx.Sin"
    ) == 1


def test_a_rewritten_model_onnx_ir_cannot_write_is_refused_in_one_line(monkeypatch) -> None:
    """Typing again writes the onnx_ir model as a proto; what onnx_ir cannot write is named as
    a failure of inference, in one line."""

    def refusing_serialize(model):
        raise onnx_ir.serde.SerdeError("Error calling serialize_model_into") from TypeError(
            "Unsupported attribute type: UNDEFINED"
        )

    monkeypatch.setattr(onnx_ir.serde, "serialize_model", refusing_serialize)
    model = onnx.parser.parse_model(
        OPSET + "g (float[2, 3] x) => (y) { s = SequenceConstruct(x, x)\n y = ConcatFromSequence<axis = 0>(s) }"
    )
    with pytest.raises(OnnxImportError) as refusal:
        import_model(model, filename="m.onnx")
    assert str(refusal.value) == (
        "m.onnx: shape inference failed: the rewritten model cannot be written for inference: "
        "Unsupported attribute type: UNDEFINED"
    )


def test_half_conv_folds_and_the_plan_cost_no_inference(inferred) -> None:
    model = conv_fold_model()
    arrays = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    typed = _Typed(model, arrays.get)
    assert len(inferred) == 1  # the model as exported, once
    assert [node.op_type for node in typed.graph.node if node.op_type != "Cast"] == [
        "Conv",
        "Relu",
    ] * 4  # folded
    assert "Cast" in [node.op_type for node in typed.graph.node]  # then planned
    assert _elem_type(typed, "y") == TensorProto.FLOAT16  # the graph output keeps its half type
    widened = next(node.output[0] for node in typed.graph.node if node.op_type == "Conv")
    assert _elem_type(typed, widened) == TensorProto.FLOAT  # the Conv computes in f32


def test_an_f32_twin_of_a_declared_output_has_the_inferred_size(inferred) -> None:
    """Range's size is unknown to ONNX inference; its graph output takes the declared [2], its
    f32 twin (no graph output) the size inference gives, as inference of the planned model would."""
    model = onnx.parser.parse_model(
        OPSET
        + "g (float16 start, float16 limit, float16 delta) => (float16[2] y) { y = Range(start, limit, delta) }"
    )
    typed = _Typed(model, _no_half)
    assert inferred == [["Range"]]
    assert [node.op_type for node in typed.graph.node][-2:] == ["Range", "Cast"]
    wide = typed.type("y_f32").tensor_type
    assert wide.elem_type == TensorProto.FLOAT and not wide.shape.dim[0].HasField("dim_value")
    assert typed.type("y").tensor_type.shape.dim[0].dim_value == 2


def test_folds_of_what_the_plan_writes_cost_no_inference(inferred) -> None:
    """A shape value cast to fp16 (folded) read by an f32 Mul: the Cast to f32 the plan writes
    for it folds as inference's folding would fold it, and the planned model is not inferred
    again."""
    model = onnx.parser.parse_model(
        OPSET
        + """g (float16[2, 3] x) => (float16[2, 3] y) {
            shape = Shape<start = -1>(x)
            k = Cast<to = 10>(shape)
            y = Mul(x, k)
        }"""
    )
    typed = _Typed(model, _no_half)
    assert inferred == [["Shape", "Cast", "Mul"]]
    ops = [(node.op_type, list(node.input)) for node in typed.graph.node]
    assert ("Cast", ["k"]) in ops
    again = typed.inferred_again()
    assert typed.types.folded == again.folded
    assert "k_f32" in typed.folded_names()
    assert typed.type("y_f32") == again.type_of(typed.value("y_f32"))


def test_a_folded_node_computing_in_f32_is_folded_again(inferred) -> None:
    """The folded Sqrt of a shape value cast to fp16 computes in f32: the plan folds it again,
    from the f32 values, as inference's folding would; the planned model is not inferred again."""
    model = onnx.parser.parse_model(
        OPSET
        + """g (float16[2, 3] x) => (float16[2, 3] y) {
            shape = Shape<start = -1>(x)
            n = Cast<to = 10>(shape)
            k = Sqrt(n)
            y = Mul(x, k)
        }"""
    )
    typed = _Typed(model, _no_half)
    assert inferred == [["Shape", "Cast", "Sqrt", "Mul"]]
    again = typed.inferred_again()
    assert typed.types.folded == again.folded
    assert "k_f32" in typed.folded_names()


def test_what_was_folded_from_a_node_computing_in_f32_may_fold_no_more(inferred) -> None:
    """A torch-script attention scale, `Cast(Div(c, Cast(Shape)))` in fp16, was folded; its Div
    computes in f32 from a Cast of the fp16 Constant c, which is no shape arithmetic and does
    not fold: neither do the Div nor the Cast after it, as in inference of the planned model."""
    model = onnx.parser.parse_model(
        OPSET
        + """g (float16[2, 3] x) => (float16[2, 3] y) {
            shape = Shape<start = -1>(x)
            n = Cast<to = 10>(shape)
            c = Constant<value = float16 {8}>()
            k = Div(c, n)
            scale = Cast<to = 10>(k)
            y = Mul(x, scale)
        }"""
    )
    typed = _Typed(model, _no_half)
    assert len(inferred) == 1
    again = typed.inferred_again()
    assert typed.types.folded == again.folded
    folded = typed.folded_names()
    assert "n" in folded and not {"k", "k_f32", "scale"} & folded


def test_a_comparison_folded_again_may_choose_between_floats(inferred) -> None:
    """An attention mask's pattern: a comparison of shape values cast to fp16, folded, computes
    in f32 and folds again; a Where reads it as its condition, which types nothing from its
    data: the planned model is not inferred again."""
    model = onnx.parser.parse_model(
        OPSET
        + """g (float16[2, 3] x) => (float16[2, 3] y) {
            shape = Shape<start = -1>(x)
            n = Cast<to = 10>(shape)
            m = ReduceMax<keepdims = 1>(n)
            masked = Equal(m, n)
            y = Where(masked, x, x)
        }"""
    )
    typed = _Typed(model, _no_half)
    assert len(inferred) == 1
    again = typed.inferred_again()
    assert typed.types.folded == again.folded
    assert "masked" in typed.folded_names()


def test_a_fold_no_longer_made_and_read_as_data_is_left_to_inference(inferred) -> None:
    """`Range(Div(c, Cast(Size(x))), ...)` folded to 8 values; in f32 the Div does not fold
    (c is no shape data), so inference no longer knows the Range's length: the planned model is
    inferred again rather than keep the length the fold gave."""
    model = onnx.parser.parse_model(
        OPSET
        + """g (float16[4] x) => (float16[?] y) {
            size = Size(x)
            n = Cast<to = 10>(size)
            c = Constant<value = float16 {8}>()
            start = Div(c, n)
            limit = Constant<value = float16 {10}>()
            delta = Constant<value = float16 {1}>()
            r = Range(start, limit, delta)
            y = Mul(r, x)
        }"""
    )
    typed = _Typed(model, _no_half)
    assert len(inferred) == 2
    assert not typed.type("r_f32").tensor_type.shape.dim[0].HasField("dim_value")


def test_a_fold_of_the_plan_read_as_data_is_left_to_inference(inferred) -> None:
    """Range's length is typed from its operands' data: a new fold it reads could type it,
    so the planned model is inferred again."""
    model = onnx.parser.parse_model(
        OPSET
        + """g (float16[4] x, float16 limit) => (float16[?] y) {
            shape = Shape(x)
            n = Cast<to = 10>(shape)
            start = ReduceMax<keepdims = 0>(n)
            delta = Constant<value = float16 {1}>()
            y = Range(start, limit, delta)
        }"""
    )
    typed = _Typed(model, _no_half)
    assert len(inferred) == 2 and "Range" in inferred[1]
    assert typed.type("y_f32").tensor_type.elem_type == TensorProto.FLOAT


def test_a_plan_of_subgraph_bodies_types_them_too(inferred) -> None:
    """A planned body reads its half values through Casts of its own and yields half values
    again: the plan types it like the main graph, and the model is inferred once."""
    typed = _Typed(if_model(), _no_half)
    assert inferred == [["Exp", "If"]]
    assert [node.op_type for node in typed.graph.node] == ["Cast", "Exp", "Cast", "If"]
    branch = list(typed.model.graph)[3].attributes["then_branch"].value
    assert (
        typed.type("x_f32_1", branch).tensor_type.elem_type == TensorProto.FLOAT
    )  # an outer value, widened
    assert (
        typed.type("t", branch).tensor_type.elem_type == TensorProto.FLOAT16
    )  # the branch's output


def test_a_function_body_keeps_per_op_rounding(inferred) -> None:
    """A specialised function body is typed only (`typed_model`): nothing is folded or planned."""
    model = conv_fold_model()
    ir_model, _ = typed_model(model, "m.onnx")
    assert [node.op_type for node in ir_model.graph] == [node.op_type for node in model.graph.node]
    assert len(inferred) == 1
