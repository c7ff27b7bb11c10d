"""The typing step's result as the conversion reads it: types by onnx_ir value, folds by node.

`graph_typing.typed_model` types the proto (ONNX shape inference, folding, symbolic dims, in
rounds: `inference.infer_types`), which answers in the proto's terms: a table of types by value
name per graph, the tables of subgraphs by (node index, attribute, position), folded outputs by
node index. `bind_types` ties that answer to the onnx_ir graph the conversion walks, once, so
the rewrites on onnx_ir (`sequences`, `half_precision`) and the conversion ask about a Value or
a Node and never about a name or a position.

Each value is typed in the table of the graph that defines it (its inputs, initializers and node
outputs): inference typed each graph with its own names, so a value a subgraph captures from an
enclosing graph is not in the subgraph's table (the conversion treats it as a value inference
did not type there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import onnx
import onnx_ir

from .graph_walks import node_bodies
from .inference import GraphTypes

__all__ = ["ValueTypes", "bind_types"]


@dataclass
class ValueTypes:
    """Inferred types of the values of every graph typed so far, and the folded nodes."""

    graphs: dict[onnx_ir.Graph, dict[onnx_ir.Value, onnx.TypeProto]] = field(default_factory=dict)
    """Per graph, the inferred type of each value it defines (absent: inference gave none)."""
    folded: dict[onnx_ir.Node, tuple[onnx.TensorProto, ...]] = field(default_factory=dict)
    """Nodes whose outputs `folding` computed: the conversion emits these constants."""

    dim_names: dict[onnx_ir.Graph, frozenset[str]] = field(default_factory=dict)
    """Per graph, the dim names its Niro types keep (`inference.GraphTypes.dim_names`)."""

    before_declared: dict[onnx_ir.Value, onnx.TypeProto] = field(default_factory=dict)
    """Main-graph outputs given their declared size where inference left a dim unknown, with
    the type inference gave them (`inference.GraphTypes.before_declared`)."""
    shaped_backwards: set[onnx_ir.Value] = field(default_factory=set)
    """The values `inference._refine_backwards` gave a shape (folding saw them without one)."""
    spare_fold_round: bool = False
    """Whether inference's folding had a round to spare (`inference.GraphTypes.spare_fold_round`)."""

    def of_graph(self, graph: onnx_ir.Graph) -> Mapping[onnx_ir.Value, onnx.TypeProto]:
        return self.graphs.get(graph) or {}

    def type_of(self, value: onnx_ir.Value) -> onnx.TypeProto | None:
        """The inferred type of `value`, from the table of the graph that defines it."""
        graph = value.graph
        return None if graph is None else self.of_graph(graph).get(value)

    def add(self, other: ValueTypes) -> None:
        """Add the tables of `other` (another model's graphs, a function body's) to these."""
        self.graphs.update(other.graphs)
        self.folded.update(other.folded)
        self.dim_names.update(other.dim_names)

    def names_of(self, graph: onnx_ir.Graph) -> frozenset[str]:
        return self.dim_names.get(graph, frozenset())


def bind_types(graph: onnx_ir.Graph, types: GraphTypes, into: ValueTypes) -> None:
    """Add `types` (inferred for the proto `graph` was read from, node for node) to `into`,
    for `graph` and each subgraph in it."""
    named = types.values
    table: dict[onnx_ir.Value, onnx.TypeProto] = {}
    into.graphs[graph] = table
    into.dim_names[graph] = types.dim_names
    for value in graph.inputs:
        found = named.get(value.name or "")
        if found is not None:
            table[value] = found
    for name, value in graph.initializers.items():
        found = named.get(name)
        if found is not None:
            table[value] = found
    folded = types.folded
    subgraphs = types.subgraphs
    for index, node in enumerate(graph):
        for output in node.outputs:
            if output.name:
                found = named.get(output.name)
                if found is not None:
                    table[output] = found
        if folded:
            outputs = folded.get(index)
            if outputs is not None:
                into.folded[node] = outputs
        if subgraphs:
            for name, position, subgraph in node_bodies(node):
                bind_types(subgraph, types.subgraph(index, name, position), into)
    if types.before_declared:
        into.before_declared.update(
            (value, types.before_declared[value.name])
            for value in graph.outputs
            if value.name in types.before_declared
        )
    if types.shaped_backwards:
        into.shaped_backwards.update(
            value for value in table if value.name in types.shaped_backwards
        )
    into.spare_fold_round = into.spare_fold_round or types.spare_fold_round
