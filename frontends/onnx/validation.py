"""Checks on the parsed protobuf that must run before anything else touches the model.

ONNX's C++ shape inference trusts its input: some ops' inference dereferences the type of a
missing or undefined input and crashes the whole process (found by tests/frontends/onnx/
test_fuzz.py). onnx_ir cannot read sparse tensors. So before either runs, `check_graph` walks
the protobuf and refuses, naming the node: inputs not defined before their node (in its graph or
an enclosing one), required inputs missing or too many inputs/outputs for the op's schema,
graph outputs nothing produces, sparse tensors, and malformed external-data offsets/lengths.

Raises `StructureError`; the importer adds the file name.
"""

from __future__ import annotations

from collections.abc import Container

import onnx
import onnx.defs

from .context import describe_node
from .external_data import ExternalDataError, check_external_fields

__all__ = ["StructureError", "check_graph", "check_text"]

_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single


class StructureError(ValueError):
    """A model whose structure the frontend refuses before reading it further."""


def check_text(value: str | bytes, what: str) -> None:
    """protobuf hands out a string field holding invalid UTF-8 as bytes; refuse it."""
    if not isinstance(value, str):
        raise StructureError(f"{what} {value!r} is not valid UTF-8")


def _check_node_text(node: onnx.NodeProto, index: int) -> None:
    for what, value in (("node name", node.name), ("op type", node.op_type), ("domain", node.domain)):
        check_text(value, f"node #{index}: {what}")
    for name in (*node.input, *node.output):
        check_text(name, f"node #{index}: value name")
    for attribute in node.attribute:
        check_text(attribute.name, f"node #{index}: attribute name")


def _check_arity(node: onnx.NodeProto, index: int, opsets: dict[str, int], local_functions: Container) -> None:
    """Required inputs present; no more inputs/outputs than the op's schema allows."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    if (node.domain, node.op_type, node.overload) in local_functions:
        return
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
    except Exception:  # no schema (a custom op, or an opset this onnx does not know): opaque
        return
    label = describe_node(node, index)
    for position, formal in enumerate(schema.inputs):
        if formal.option is _SINGLE and (position >= len(node.input) or not node.input[position]):
            raise StructureError(f"{label}: required input #{position} ('{formal.name}') is missing")
    if len(node.input) > schema.max_input:
        raise StructureError(f"{label}: has {len(node.input)} inputs, at most {schema.max_input} allowed")
    if len(node.output) > schema.max_output:
        raise StructureError(f"{label}: has {len(node.output)} outputs, at most {schema.max_output} allowed")


def _check_sparse(node: onnx.NodeProto, index: int, attribute: onnx.AttributeProto) -> None:
    if attribute.HasField("sparse_tensor") or attribute.sparse_tensors:
        what = "sparse constants" if node.op_type == "Constant" else f"attribute '{attribute.name}': sparse tensors"
        raise StructureError(f"{describe_node(node, index)}: {what} are not supported")


def check_graph(
    graph: onnx.GraphProto,
    what: str,
    opsets: dict[str, int],
    local_functions: Container,
    outer: frozenset[str] = frozenset(),
) -> None:
    """Check `graph` and its subgraphs (`outer`: the names visible from enclosing graphs)."""
    check_text(graph.name, "graph name")
    for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        check_text(value.name, f"graph '{graph.name}': value name")
    for tensor in graph.sparse_initializer:
        raise StructureError(f"initializer '{tensor.values.name}': sparse tensors are not supported")
    for tensor in graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            try:
                check_external_fields({entry.key: entry.value for entry in tensor.external_data})
            except ExternalDataError as error:
                raise StructureError(f"initializer '{tensor.name}': {error}") from None
    defined = set(outer)
    defined.update(value.name for value in graph.input)
    defined.update(tensor.name for tensor in graph.initializer)
    for index, node in enumerate(graph.node):
        _check_node_text(node, index)
        for name in node.input:
            if name and name not in defined:
                raise StructureError(f"{describe_node(node, index)}: input '{name}' is not defined before the node")
        _check_arity(node, index, opsets, local_functions)
        visible = frozenset(defined)
        for attribute in node.attribute:
            _check_sparse(node, index, attribute)
            subgraphs = [attribute.g] if attribute.HasField("g") else []
            for subgraph in [*subgraphs, *attribute.graphs]:
                check_graph(subgraph, f"graph '{subgraph.name}'", opsets, local_functions, visible)
        defined.update(name for name in node.output if name)
    for value in graph.output:
        if value.name not in defined:
            raise StructureError(f"{what}: output '{value.name}' is not produced by any node, input or initializer")
