"""The typing step's answer bound to onnx_ir (value_types.py): each graph's inferred types by
Value, folded outputs by Node, a captured value absent from the subgraph's table."""

from __future__ import annotations

import onnx
import onnx_ir
from niro.frontends.onnx.inference import infer_types
from niro.frontends.onnx.value_types import ValueTypes, bind_types

MODEL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, bool c) => (float[6] y, int64[2] s) {
    s = Shape(x)
    n = Constant<value = int64[1] {6}>()
    flat = Reshape(x, n)
    y = If(c) <
        then_branch = t () => (float[6] a) { a = Relu(flat) },
        else_branch = e () => (float[6] b) { b = Neg(flat) }
    >
}
"""


def _bound() -> tuple[onnx_ir.Graph, ValueTypes]:
    model = onnx.parser.parse_model(MODEL)
    types = infer_types(model)
    graph = onnx_ir.serde.deserialize_model(model).graph
    bound = ValueTypes()
    bind_types(graph, types, bound)
    return graph, bound


def _dims(type_proto: onnx.TypeProto) -> list[int]:
    return [dim.dim_value for dim in type_proto.tensor_type.shape.dim]


def test_each_value_is_typed_in_the_graph_that_defines_it() -> None:
    graph, bound = _bound()
    table = bound.of_graph(graph)
    nodes = list(graph)
    assert _dims(table[graph.inputs[0]]) == [2, 3]
    assert _dims(table[nodes[2].outputs[0]]) == [6]  # the Reshape, by its onnx_ir Value
    branch = nodes[3].attributes["then_branch"].value
    inner = bound.of_graph(branch)
    relu = next(iter(branch))
    assert _dims(inner[relu.outputs[0]]) == [6]
    # `flat` is captured from the main graph: typed there, not in the branch's table
    assert relu.inputs[0] in table
    assert relu.inputs[0] not in inner


def test_folded_outputs_are_found_by_node() -> None:
    graph, bound = _bound()
    shape = next(node for node in graph if node.op_type == "Shape")
    assert shape in bound.folded
    (folded,) = bound.folded[shape]
    assert onnx.numpy_helper.to_array(folded).tolist() == [2, 3]
