"""Model-local functions (FunctionProto) specialised into standalone graphs.

A call site fixes what an ONNX function leaves open: its input types, its attribute values
(`ref_attr_name` references), and which optional inputs are absent. `specialize` builds a small
ModelProto whose graph is the function body with all three fixed; the importer types it with
shape inference and imports it like the main graph, as its own Niro Function. The importer keeps
one Niro Function per distinct `SpecializationKey`; every call site becomes a Call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx
from niro.ir import TensorType

from .inference import copy_fields
from .onnx_types import type_proto_from_niro

__all__ = ["FunctionKey", "specialize", "specialization_key"]

FunctionKey = tuple[str, str, str]
"""(domain, name, overload), as ONNX identifies a function."""


def specialization_key(
    function: FunctionKey,
    input_types: Sequence[TensorType | None],
    attributes: Mapping[str, onnx.AttributeProto],
) -> tuple:
    """What makes two call sites share one Niro Function."""
    attribute_bytes = tuple(
        (name, attributes[name].SerializeToString(deterministic=True)) for name in sorted(attributes)
    )
    return (function, tuple(input_types), attribute_bytes)


def _resolve_graph(
    graph: onnx.GraphProto, values: Mapping[str, onnx.AttributeProto], renames: Mapping[str, str]
) -> onnx.GraphProto:
    copy = onnx.GraphProto()
    copy_fields(graph, copy, frozenset({"node"}))
    copy.node.extend(_resolve_nodes(graph.node, values, renames))
    return copy


def _resolve_nodes(
    nodes: Sequence[onnx.NodeProto],
    values: Mapping[str, onnx.AttributeProto],
    renames: Mapping[str, str],
) -> list[onnx.NodeProto]:
    """Copies of `nodes` with attribute references replaced by `values` (dropped when a
    reference has no value) and inputs renamed by `renames` (absent inputs become '')."""
    resolved = []
    for node in nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        del copy.input[:]
        copy.input.extend(renames.get(name, name) for name in node.input)
        del copy.attribute[:]
        for attribute in node.attribute:
            if attribute.ref_attr_name:
                found = values.get(attribute.ref_attr_name)
                if found is None:
                    continue
                replacement = onnx.AttributeProto()
                replacement.CopyFrom(found)
                replacement.name = attribute.name
                copy.attribute.append(replacement)
                continue
            replacement = onnx.AttributeProto()
            replacement.CopyFrom(attribute)
            if attribute.HasField("g"):
                replacement.g.CopyFrom(_resolve_graph(attribute.g, values, renames))
            if attribute.graphs:
                del replacement.graphs[:]
                replacement.graphs.extend(_resolve_graph(graph, values, renames) for graph in attribute.graphs)
            copy.attribute.append(replacement)
        resolved.append(copy)
    return resolved


def specialize(
    model: onnx.ModelProto,
    function: onnx.FunctionProto,
    input_types: Sequence[TensorType | None],
    call_attributes: Mapping[str, onnx.AttributeProto],
) -> onnx.ModelProto:
    """A model whose graph is `function`'s body for one call site.

    `input_types[i]` is None for an input the call site leaves absent: the body then sees ''.
    Attribute values come from the call site, else from the function's defaults.
    """
    values: dict[str, onnx.AttributeProto] = {attribute.name: attribute for attribute in function.attribute_proto}
    values.update(call_attributes)
    renames = {
        name: "" for name, type_ in zip(function.input, input_types, strict=False) if type_ is None
    }
    for name in function.input[len(input_types) :]:
        renames[name] = ""
    specialized = onnx.ModelProto()
    specialized.ir_version = model.ir_version
    opsets = {entry.domain: entry.version for entry in model.opset_import}
    opsets.update({entry.domain: entry.version for entry in function.opset_import})
    for domain, version in opsets.items():
        specialized.opset_import.add(domain=domain, version=version)
    specialized.functions.extend(model.functions)
    graph = specialized.graph
    graph.name = function.name
    for name, type_ in zip(function.input, input_types, strict=False):
        if type_ is not None:
            graph.input.add(name=name).type.CopyFrom(type_proto_from_niro(type_))
    for name in function.output:
        graph.output.add(name=name)
    graph.node.extend(_resolve_nodes(function.node, values, renames))
    return specialized
