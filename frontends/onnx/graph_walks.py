"""Walks of an onnx_ir graph that the rewrites and the typing share: the bodies of a node, the
names a new value must not take, the values a graph's nodes read (subgraphs included)."""

from __future__ import annotations

import onnx_ir

__all__ = ["node_bodies", "value_names", "values_read"]


def node_bodies(node: onnx_ir.Node) -> list[tuple[str, int, onnx_ir.Graph]]:
    """The graphs of `node`'s graph attributes (If branches, Loop and Scan bodies): (attribute
    name, position, graph), in attribute order."""
    bodies = []
    for name, attribute in node.attributes.items():
        if attribute.is_ref():
            continue
        if attribute.type is onnx_ir.AttributeType.GRAPH:
            bodies.append((name, 0, attribute.value))
        elif attribute.type is onnx_ir.AttributeType.GRAPHS:
            bodies.extend((name, position, graph) for position, graph in enumerate(attribute.value))
    return bodies


def value_names(graph: onnx_ir.Graph) -> set[str]:
    """Every value name in `graph` and its subgraphs, at any depth: what a name a rewrite makes
    must not be."""
    names: set[str] = set()
    for current in (graph, *graph.subgraphs()):
        names.update(value.name or "" for value in (*current.inputs, *current.outputs))
        names.update(current.initializers)
        for node in current:
            names.update(value.name or "" for value in node.inputs if value is not None)
            names.update(value.name or "" for value in node.outputs)
    return names


def values_read(graph: onnx_ir.Graph) -> set[onnx_ir.Value]:
    """Every value the nodes of `graph` and its subgraphs read, at any depth."""
    return {
        value
        for current in (graph, *graph.subgraphs())
        for node in current
        for value in node.inputs
        if value is not None
    }
