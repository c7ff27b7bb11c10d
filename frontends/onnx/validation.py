"""Checks on the parsed protobuf that must run before anything else touches the model.

ONNX's C++ shape inference trusts its input: some ops' inference dereferences the type of a
missing or undefined input and crashes the whole process (found by tests/frontends/onnx/
test_fuzz.py). onnx_ir cannot read sparse tensors. So before either runs, `check_graph` walks
the protobuf and refuses, naming the node: inputs not defined before their node (in its graph or
an enclosing one), required inputs missing or too many inputs/outputs for the op's schema,
graph outputs nothing produces, sparse tensors, and malformed external-data offsets/lengths.
It also makes the checks the ONNX checker leaves out, each a model that would otherwise import
into something wrong: a name declared twice (graph inputs, initializers, node outputs: the
graph would silently use one of them), declared types with negative dims (a backstop: the importer
reads them as unknown first, see `input_shapes`), element counts past int64
or element types that are no ONNX type, element-type attributes (`Cast to=9999`) naming no type
Niro has, Loop and Scan bodies whose signature does not fit the node, tensors (initializers and
Constant values) that hold their data in more than one field (raw_data and float_data: which one
holds the weights?), opset versions outside the range this onnx knows (`check_opsets`) and an
IR version newer than it knows (`check_ir_version`).

Raises `StructureError`; the importer adds the file name.
"""

from __future__ import annotations

import functools
from collections.abc import Container
from itertools import chain

import onnx
import onnx.defs

from .context import describe_node
from .external_data import ExternalDataError, check_external_fields
from .tensors import SCALAR_TYPES, element_type_name

__all__ = ["StructureError", "check_graph", "check_ir_version", "check_opsets", "check_text"]

_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single
_ELEMENT_TYPES = frozenset(onnx.TensorProto.DataType.values())
_MAX_ELEMENTS = 2**63 - 1
"""Element counts past int64 overflow every consumer (numpy, MLIR's shaped types, IREE)."""

_TYPED_DATA_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")
"""The fields of a TensorProto besides raw_data that can hold its elements; ONNX's checker
allows one field of all these."""

ELEMENT_TYPE_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("", "Cast"): "to",
    ("", "EyeLike"): "dtype",
    ("", "RandomNormal"): "dtype",
    ("", "RandomNormalLike"): "dtype",
    ("", "RandomUniform"): "dtype",
    ("", "RandomUniformLike"): "dtype",
    ("", "Multinomial"): "dtype",
    ("", "Bernoulli"): "dtype",
}
"""(domain, op type) -> its attribute that names an element type (a TensorProto.DataType)."""


class StructureError(ValueError):
    """A model whose structure the frontend refuses before reading it further."""


def check_text(value: str | bytes, what: str) -> None:
    """protobuf hands out a string field holding invalid UTF-8 as bytes; refuse it."""
    if not isinstance(value, str):
        raise StructureError(f"{what} {value!r} is not valid UTF-8")


_ONLY_TEXT = frozenset({str})


def _all_text(values) -> bool:
    return set(map(type, values)) <= _ONLY_TEXT


def _check_node_text(node: onnx.NodeProto, index: int) -> tuple[list[str], list[str]]:
    """Check that every string of the node is text; return its input and output names.

    NOTE: the common case (all text) is decided a group of fields at a time, in the order the
    detailed checks below read them (a check_text call per string cost ~5 us a node); the
    names are returned so the caller reads them once (each read of a repeated field copies)."""
    if _all_text((node.name, node.op_type, node.domain)):
        inputs, outputs = node.input[:], node.output[:]
        if _all_text(inputs) and _all_text(outputs):
            if not node.attribute or _all_text([attribute.name for attribute in node.attribute]):
                return inputs, outputs
    for what, value in (("node name", node.name), ("op type", node.op_type), ("domain", node.domain)):
        check_text(value, f"node #{index}: {what}")
    for name in (*node.input, *node.output):
        check_text(name, f"node #{index}: value name")
    for attribute in node.attribute:
        check_text(attribute.name, f"node #{index}: attribute name")
    raise AssertionError("unreachable: a string above is not text")


def _check_arity(
    node: onnx.NodeProto,
    index: int,
    inputs: list[str],
    outputs: list[str],
    opsets: dict[str, int],
    local_functions: Container,
) -> None:
    """Required inputs present; no more inputs/outputs than the op's schema allows."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    op_type = node.op_type
    if local_functions and (node.domain, op_type, node.overload) in local_functions:
        return
    arity = _arity(op_type, opsets.get(domain, 1), domain)
    if arity is None:  # no schema (a custom op, or an opset this onnx does not know): opaque
        return
    required, max_input, max_output = arity
    for position, name in required:
        if position >= len(inputs) or not inputs[position]:
            raise StructureError(f"{describe_node(node, index)}: required input #{position} ('{name}') is missing")
    if len(inputs) > max_input:
        raise StructureError(f"{describe_node(node, index)}: has {len(inputs)} inputs, at most {max_input} allowed")
    if len(outputs) > max_output:
        raise StructureError(f"{describe_node(node, index)}: has {len(outputs)} outputs, at most {max_output} allowed")


@functools.cache
def _arity(op_type: str, version: int, domain: str) -> tuple[tuple[tuple[int, str], ...], int, int] | None:
    """(required input positions and names, max inputs, max outputs) of an op's schema, or None.

    NOTE: cached: a schema lookup and its formal parameters cost ~50 us a node in Python."""
    try:
        schema = onnx.defs.get_schema(op_type, version, domain)
    except Exception:
        return None
    required = tuple(
        (position, formal.name) for position, formal in enumerate(schema.inputs) if formal.option is _SINGLE
    )
    return required, schema.max_input, schema.max_output


def _check_sparse(node: onnx.NodeProto, index: int, attribute: onnx.AttributeProto) -> None:
    if attribute.HasField("sparse_tensor") or attribute.sparse_tensors:
        what = "sparse constants" if node.op_type == "Constant" else f"attribute '{attribute.name}': sparse tensors"
        raise StructureError(f"{describe_node(node, index)}: {what} are not supported")


def check_opsets(opset_imports, what: str) -> None:
    """Refuse an opset version of a domain onnx knows that lies outside the versions it knows:
    a future opset (`"": 99`) would be read with today's op semantics."""
    known = onnx.defs.C.schema_version_map()
    for entry in opset_imports:
        domain = "" if entry.domain == "ai.onnx" else entry.domain
        if domain not in known:
            continue
        low, high = known[domain]
        if not low <= entry.version <= high:
            label = "the default ONNX domain" if not domain else f"domain '{domain}'"
            raise StructureError(
                f"{what}: opset {entry.version} of {label} is not supported "
                f"(this niroc knows opsets {low} to {high})"
            )


def check_ir_version(version: int) -> None:
    """Refuse a model whose IR version is newer than this onnx knows: it may use fields this
    protobuf schema drops unseen (onnxruntime refuses such a model too)."""
    if version > onnx.IR_VERSION:
        raise StructureError(
            f"ir_version {version} is newer than this niroc knows (IR versions up to {onnx.IR_VERSION})"
        )


def _check_data_fields(tensor: onnx.TensorProto, what: str, raw_elsewhere: bool = False) -> None:
    """One field holds a tensor's data: with two (raw_data and float_data), readers disagree on
    which one is the tensor (the ONNX checker refuses it). `raw_elsewhere`: its raw_data was
    split out of the message (`wire.split_raw_data`)."""
    fields = ["raw_data"] if raw_elsewhere or tensor.HasField("raw_data") else []
    fields += [name for name in _TYPED_DATA_FIELDS if len(getattr(tensor, name))]
    if len(fields) > 1:
        raise StructureError(f"{what}: sets both {' and '.join(fields)}; a tensor holds its data in one field")


def _check_element_type(code: int, what: str) -> None:
    if code not in _ELEMENT_TYPES:
        raise StructureError(f"{what}: element type #{code} is not an ONNX element type")


def _check_declared_type(value: onnx.ValueInfoProto, what: str, *, interface: bool) -> None:
    """A declared tensor type: a real element type; for the graph's inputs and outputs (its
    interface) also no negative dim and an element count within int64. A value_info entry is
    only a hint (some exporters write -1 for an unknown dim there): its dims are not checked."""
    if value.type.WhichOneof("value") != "tensor_type":
        return
    tensor = value.type.tensor_type
    label = f"value '{value.name}' ({what})"
    _check_element_type(tensor.elem_type, label)
    if not interface:
        return
    count = 1
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            if dim.dim_value < 0:
                raise StructureError(f"{label}: dimension {dim.dim_value} is negative")
            count *= dim.dim_value
    if count > _MAX_ELEMENTS:
        dims = [dim.dim_value if dim.HasField("dim_value") else dim.dim_param or "?" for dim in tensor.shape.dim]
        raise StructureError(f"{label}: shape {dims} has more elements than int64 can count")


def _check_unique(names, what: str, kind: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise StructureError(f"{what}: {kind} '{name}' is declared twice")
        seen.add(name)


def _check_declarations(graph: onnx.GraphProto, what: str, raw_elsewhere: Container[str]) -> None:
    _check_unique((value.name for value in graph.input), what, "input")
    _check_unique((tensor.name for tensor in graph.initializer), what, "initializer")
    # NOTE: a graph output listed twice is no redefinition (the ONNX checker allows it; a Loop
    # body may yield one value as a carried value and a scan output): it stays valid
    for role, values in (("input", graph.input), ("output", graph.output), ("value_info", graph.value_info)):
        for value in values:
            _check_declared_type(value, f"{role} of {what}", interface=role != "value_info")
    for tensor in graph.initializer:
        _check_element_type(tensor.data_type, f"initializer '{tensor.name}'")
        _check_data_fields(tensor, f"initializer '{tensor.name}'", tensor.name in raw_elsewhere)


def _check_element_type_attribute(node: onnx.NodeProto, index: int) -> None:
    name = ELEMENT_TYPE_ATTRIBUTES.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
    if name is None:
        return
    for attribute in node.attribute:
        if attribute.name != name or attribute.type != onnx.AttributeProto.INT:
            continue
        label = f"{describe_node(node, index)}: attribute '{name}'"
        if attribute.i not in _ELEMENT_TYPES:
            raise StructureError(f"{label} is {attribute.i}, which is no ONNX element type")
        if attribute.i not in SCALAR_TYPES:
            raise StructureError(f"{label}: element type {element_type_name(attribute.i)} is not supported")


def _body(node: onnx.NodeProto) -> onnx.GraphProto | None:
    for attribute in node.attribute:
        if attribute.name == "body" and attribute.HasField("g"):
            return attribute.g
    return None


def _check_loop_signature(node: onnx.NodeProto, index: int, opset: int) -> None:
    """Loop(M, cond, v...) -> (v_final..., scan...) has body (iter, cond, v...) -> (cond, v...,
    scan...); Scan(state..., scan_in...) -> (state_final..., scan_out...) has body (state...,
    scan_in...) -> (state..., scan_out...), with `num_scan_inputs` scan inputs (Scan-8 takes a
    sequence_lens input first). ONNX leaves these to shape inference, which skips a node it
    cannot type when not strict: the node would then reach a backend with a body that cannot fit.
    A node may use fewer outputs than its body yields."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("Loop", "Scan"):
        return
    body = _body(node)
    if body is None:
        return
    label = describe_node(node, index)
    inputs, outputs = len(body.input), len(body.output)
    if node.op_type == "Loop":
        carried = max(len(node.input) - 2, 0)
        if inputs != carried + 2:
            raise StructureError(
                f"{label}: body takes {inputs} inputs, expected {carried + 2} "
                f"(iteration number, condition, {carried} loop-carried values)"
            )
        if outputs < carried + 1 or len(node.output) > outputs - 1:
            raise StructureError(
                f"{label}: body yields {outputs} outputs, expected the condition, {carried} "
                f"loop-carried values and a scan output for each of the node's other outputs"
            )
        return
    operands = len(node.input) - (1 if opset < 9 else 0)
    scan_inputs = next((attribute.i for attribute in node.attribute if attribute.name == "num_scan_inputs"), None)
    if scan_inputs is None or not 0 < scan_inputs <= operands:
        raise StructureError(f"{label}: num_scan_inputs {scan_inputs} does not fit its {operands} state and scan inputs")
    if inputs != operands:
        raise StructureError(
            f"{label}: body takes {inputs} inputs, expected {operands} "
            f"({operands - scan_inputs} state values, {scan_inputs} scan inputs)"
        )
    if outputs < operands - scan_inputs or len(node.output) > outputs:
        raise StructureError(
            f"{label}: body yields {outputs} outputs, expected {operands - scan_inputs} state values "
            f"and a scan output for each of the node's other outputs"
        )


def _check_attributes(
    node: onnx.NodeProto, index: int, opsets: dict[str, int], local_functions: Container, defined: set[str]
) -> None:
    """The checks of a node's attributes, its subgraphs included (`defined`: the names visible
    at the node)."""
    _check_element_type_attribute(node, index)
    _check_loop_signature(node, index, opsets.get("", 1))
    # NOTE: the snapshot of visible names is taken only for a node that has subgraphs;
    # one per node made this walk quadratic (20,000 nodes: 25 s).
    visible: frozenset[str] | None = None
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.UNDEFINED:
            raise StructureError(f"{describe_node(node, index)}: attribute '{attribute.name}' has no type")
        _check_sparse(node, index, attribute)
        for tensor in [attribute.t] if attribute.HasField("t") else attribute.tensors:
            _check_data_fields(tensor, f"{describe_node(node, index)}: attribute '{attribute.name}'")
        subgraphs = [attribute.g] if attribute.HasField("g") else []
        for subgraph in [*subgraphs, *attribute.graphs]:
            if visible is None:
                visible = frozenset(defined)
            check_graph(subgraph, f"graph '{subgraph.name}'", opsets, local_functions, visible)


def check_graph(
    graph: onnx.GraphProto,
    what: str,
    opsets: dict[str, int],
    local_functions: Container,
    outer: frozenset[str] = frozenset(),
    raw_elsewhere: Container[str] = frozenset(),
) -> None:
    """Check `graph` and its subgraphs (`outer`: the names visible from enclosing graphs;
    `raw_elsewhere`: the initializers whose raw_data the loader split out of the message)."""
    check_text(graph.name, "graph name")
    for value in chain(graph.input, graph.output, graph.value_info, graph.initializer):
        check_text(value.name, f"graph '{graph.name}': value name")
    _check_declarations(graph, what, raw_elsewhere)
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
    local = {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer}
    for index, node in enumerate(graph.node):
        inputs, outputs = _check_node_text(node, index)
        for name in inputs:
            if name and name not in defined:
                raise StructureError(f"{describe_node(node, index)}: input '{name}' is not defined before the node")
        _check_arity(node, index, inputs, outputs, opsets, local_functions)
        if node.attribute:  # the checks below look at attributes only
            _check_attributes(node, index, opsets, local_functions, defined)
        for name in outputs:
            if name in local:
                raise StructureError(f"{describe_node(node, index)}: output '{name}' is already defined in {what}")
            if name:
                local.add(name)
                defined.add(name)
    for value in graph.output:
        if value.name not in defined:
            raise StructureError(f"{what}: output '{value.name}' is not produced by any node, input or initializer")
