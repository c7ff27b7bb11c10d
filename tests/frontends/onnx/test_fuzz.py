"""Property: whatever the model, the importer returns a module that verifies or raises
OnnxImportError, never another exception. Models are ONNX node tests, mutated: ops swapped for
the ones Niro models (so converters meet odd arities and types), inputs renamed or dropped,
types and dims corrupted, attributes removed, tensor data truncated."""

from __future__ import annotations

import niro.ir as nir
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from niro.frontends.onnx import OnnxImportError, import_model

from ...onnx_node_cases import node_test_cases

MODELLED = ["Add", "Mul", "MatMul", "Gemm", "Transpose", "Identity", "Constant", "If", "Loop"]


def _mutate(model: onnx.ModelProto, data: st.DataObject) -> None:
    graph = model.graph
    kind = data.draw(st.sampled_from(["op", "input", "drop_node", "type", "dim", "attribute", "tensor", "output"]))
    if kind == "op" and graph.node:
        node = graph.node[data.draw(st.integers(0, len(graph.node) - 1))]
        node.op_type = data.draw(st.sampled_from(MODELLED))
    elif kind == "input" and graph.node:
        node = graph.node[data.draw(st.integers(0, len(graph.node) - 1))]
        if node.input:
            node.input[data.draw(st.integers(0, len(node.input) - 1))] = data.draw(
                st.sampled_from(["", "undefined", *[value.name for value in graph.input]])
            )
    elif kind == "drop_node" and graph.node:
        del graph.node[data.draw(st.integers(0, len(graph.node) - 1))]
    elif kind == "type" and graph.input:
        value = graph.input[data.draw(st.integers(0, len(graph.input) - 1))]
        if data.draw(st.booleans()):
            value.type.tensor_type.elem_type = data.draw(st.integers(0, 30))
        else:
            value.type.tensor_type.ClearField("shape")
    elif kind == "dim" and graph.input:
        value = graph.input[data.draw(st.integers(0, len(graph.input) - 1))]
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[data.draw(st.integers(0, len(dims) - 1))].dim_value = data.draw(st.integers(-2, 3))
    elif kind == "attribute" and graph.node:
        node = graph.node[data.draw(st.integers(0, len(graph.node) - 1))]
        if node.attribute:
            del node.attribute[data.draw(st.integers(0, len(node.attribute) - 1))]
    elif kind == "tensor":
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.HasField("t") and attribute.t.raw_data:
                    attribute.t.raw_data = attribute.t.raw_data[: data.draw(st.integers(0, 3))]
                    return
    elif kind == "output" and graph.output:
        graph.output[data.draw(st.integers(0, len(graph.output) - 1))].name = data.draw(
            st.sampled_from(["", "undefined", *[value.name for value in graph.input]])
        )


def _non_onnx_diagnostics(module) -> list:
    """verify()'s diagnostics, less those of the ONNX operator library's rules (`onnx-*`): a
    mutation may leave a model the importer takes but ONNX rejects (a BatchNormalization that
    lost `training_mode` yet keeps 3 outputs), and saying so is their job."""
    return [
        diagnostic for diagnostic in nir.verify(module) if not diagnostic.rule.startswith("onnx-")
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_importer_never_crashes(data: st.DataObject) -> None:
    cases = node_test_cases()
    case = cases[data.draw(st.integers(0, len(cases) - 1))]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    for _ in range(data.draw(st.integers(1, 3))):
        _mutate(model, data)
    try:
        module = import_model(model, filename=case.name)
    except OnnxImportError as error:
        assert "\n" not in str(error)
        return
    assert _non_onnx_diagnostics(module) == []


@settings(
    max_examples=150, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_corrupted_model_files_never_crash(tmp_path_factory, data: st.DataObject) -> None:
    """Bytes flipped in a serialized node test model (read through the file path, so the
    raw_data splitter in `wire` meets them too)."""
    cases = node_test_cases()
    case = cases[data.draw(st.integers(0, len(cases) - 1))]
    blob = bytearray(case.model.SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path_factory.mktemp("fuzz") / "model.onnx"
    path.write_bytes(bytes(blob))
    try:
        module = import_model(path)
    except OnnxImportError as error:
        assert "\n" not in str(error)
        return
    assert _non_onnx_diagnostics(module) == []
