"""Edits of an ONNX graph that `niroc check` needs to find where two runtimes part ways.

`exposed(model, names)` adds values as graph outputs for the length of a `with` block (no copy
of the model: its weights may be gigabytes); `live_cut(graph, index)` lists the values that
carry the computation past a node; `single_node_model(...)` cuts one node out as a model of its
own, its inputs given as arrays. Only top-level nodes are considered: a node inside an If or
Loop body is part of its parent node here. Nothing here runs a model or knows about MLIR.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = [
    "exposed",
    "input_names",
    "live_cut",
    "node_inputs",
    "node_label",
    "produced_values",
    "single_node_model",
]

SHAPE_LIKE_LIMIT = 64
"""A small integer input of a cut-out node becomes an initializer rather than a graph input:
it is most likely a shape, axes or indices that the original model computed from constants,
and a lowering needs such values at compile time."""


def node_label(node: onnx.NodeProto, index: int) -> str:
    """The node's name, or `OpType_index` as the importer names unnamed nodes."""
    return node.name or f"{node.op_type}_{index}"


def node_inputs(node: onnx.NodeProto) -> list[str]:
    """The values a node reads: its inputs, then the outer values its subgraphs refer to."""
    names = [name for name in node.input if name]
    for attribute in node.attribute:
        for graph in _graphs_of(attribute):
            names.extend(name for name in _outer_references(graph) if name not in names)
    return names


def _graphs_of(attribute: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if attribute.type == onnx.AttributeProto.GRAPH:
        return [attribute.g]
    if attribute.type == onnx.AttributeProto.GRAPHS:
        return list(attribute.graphs)
    return []


def _outer_references(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph reads that it does not define itself (nested subgraphs included)."""
    defined = {value.name for value in graph.input}
    defined.update(initializer.name for initializer in graph.initializer)
    referenced: list[str] = []
    for node in graph.node:
        for name in node_inputs(node):
            if name not in defined and name not in referenced:
                referenced.append(name)
        defined.update(node.output)
    return referenced


def produced_values(graph: onnx.GraphProto) -> list[tuple[int, str]]:
    """(node index, value name) of every value a top-level node produces, in graph order.

    Constant nodes are left out: their values are what the model says, on either side."""
    return [
        (index, name)
        for index, node in enumerate(graph.node)
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx")
        for name in node.output
        if name
    ]


def live_cut(graph: onnx.GraphProto, index: int) -> list[str]:
    """The values produced by nodes 0..index that a later node or the graph's outputs read.

    What the rest of the graph computes depends only on these (and on the graph's inputs and
    initializers): if they agree between two runtimes, a difference in the outputs arises
    after node `index`."""
    last_use: dict[str, int] = {}
    for position, node in enumerate(graph.node):
        for name in node_inputs(node):
            last_use[name] = position
    for output in graph.output:
        last_use[output.name] = len(graph.node)
    return [
        name
        for position, name in produced_values(graph)
        if position <= index and last_use.get(name, -1) > index
    ]


@contextlib.contextmanager
def exposed(model: onnx.ModelProto, names: Iterable[str]) -> Iterator[list[str]]:
    """`model` with `names` appended to its graph's outputs inside the block (those not outputs
    already); yields the names of all outputs. The model is edited in place and restored."""
    graph = model.graph
    present = {output.name for output in graph.output}
    added = [name for name in dict.fromkeys(names) if name not in present]
    original = len(graph.output)
    graph.output.extend(onnx.ValueInfoProto(name=name) for name in added)
    try:
        yield [output.name for output in graph.output]
    finally:
        del graph.output[original:]


def single_node_model(
    model: onnx.ModelProto,
    index: int,
    inputs: Mapping[str, np.ndarray],
    outputs: Mapping[str, np.ndarray],
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Node `index` of `model`'s graph as a model of its own, and the feeds it takes.

    `inputs` holds the values the node read in the original run (those that are not
    initializers), `outputs` what it should produce (for the outputs' types). Initializers the
    node reads stay initializers, and so do Constant outputs and small integer values (see
    SHAPE_LIKE_LIMIT); everything else becomes a graph input."""
    graph = model.graph
    node = graph.node[index]
    initializers = {initializer.name: initializer for initializer in graph.initializer}
    constants = _constant_outputs(graph)
    graph_inputs: list[onnx.ValueInfoProto] = []
    kept: list[onnx.TensorProto] = []
    feeds: dict[str, np.ndarray] = {}
    for name in node_inputs(node):
        if name in initializers and name not in feeds:
            kept.append(initializers[name])
            continue
        value = np.asarray(inputs[name])
        if name in constants or _is_shape_like(value):
            kept.append(numpy_helper.from_array(value, name))
            continue
        graph_inputs.append(_value_info(name, value))
        feeds[name] = value
    graph_outputs = [_value_info(name, np.asarray(outputs[name])) for name in node.output if name]
    cut = helper.make_graph(
        [node], f"{graph.name or 'main'}_node", graph_inputs, graph_outputs, initializer=kept
    )
    single = helper.make_model(
        cut,
        opset_imports=list(model.opset_import),
        ir_version=model.ir_version,
        functions=list(model.functions),
    )
    return single, feeds


def _constant_outputs(graph: onnx.GraphProto) -> set[str]:
    return {
        name
        for node in graph.node
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx")
        for name in node.output
    }


def _is_shape_like(value: np.ndarray) -> bool:
    return value.dtype.kind in "iu" and value.size <= SHAPE_LIKE_LIMIT


def _value_info(name: str, value: np.ndarray) -> onnx.ValueInfoProto:
    element = helper.np_dtype_to_tensor_dtype(value.dtype)
    return helper.make_tensor_value_info(name, element, list(value.shape))


def input_names(graph: onnx.GraphProto) -> Sequence[str]:
    """The graph's inputs that are fed (old models list initializers among the inputs)."""
    initializers = {initializer.name for initializer in graph.initializer}
    return [value.name for value in graph.input if value.name not in initializers]
