"""One node re-typed from what the importer knows, where graph-level inference gave up.

ONNX shape inference types a subgraph without the data of the values it captures, so a Scan or
Loop body's `Unsqueeze(x, axes)` with `axes` a constant of the outer graph comes out of unknown
rank, and every op after it too; an op of unknown rank cannot be lowered. The importer knows
more: the (already refined) types of the node's operands and the data of those that are small
constants. `infer_node` runs ONNX's inference function of the node's op on exactly that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx.shape_inference
import onnx_ir
from niro.ir import TensorType, Value
from onnx import numpy_helper

from .onnx_types import UnsupportedTypeError, niro_type_from_proto, type_proto_from_niro

__all__ = ["constant_proto", "infer_node", "inferred_outputs"]

CONSTANT_LIMIT = 1024
"""Most elements of a constant whose data is handed to inference (shape data is small)."""

def constant_proto(tensor_type: TensorType, literal) -> onnx.TensorProto | None:
    """A small constant's data as a TensorProto (None when it is too big or not plain data)."""
    shape = tensor_type.static_shape
    if shape is None or int(np.prod(shape, dtype=np.int64)) > CONSTANT_LIMIT:
        return None
    try:
        array = np.frombuffer(literal, dtype=np.dtype(tensor_type.element_type.numpy_name)).reshape(shape)
    except (TypeError, ValueError):
        return None
    return numpy_helper.from_array(array)


def infer_node(
    node: onnx_ir.Node,
    inputs: Sequence[Value | None],
    constant_data: Callable[[Value], onnx.TensorProto | None],
    opset: int,
) -> dict[int, TensorType]:
    """The output types ONNX infers for `node` from `inputs`' Niro types and constant data
    (output position -> type); empty when the op has no schema or inference fails."""
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, domain)
    except onnx.defs.SchemaError:
        return {}
    if not schema.has_type_and_shape_inference_function:
        return {}
    node_proto = onnx.NodeProto()
    node_proto.op_type = node.op_type
    node_proto.domain = domain
    input_types: dict[str, onnx.TypeProto] = {}
    input_data: dict[str, onnx.TensorProto] = {}
    for position, value in enumerate(inputs):
        if value is None or not isinstance(value.type, TensorType):
            node_proto.input.append("")
            continue
        name = f"in{position}"
        node_proto.input.append(name)
        input_types[name] = type_proto_from_niro(value.type)
        data = constant_data(value)
        if data is not None:
            data.name = name
            input_data[name] = data
    node_proto.output.extend(f"out{position}" if output.name else "" for position, output in enumerate(node.outputs))
    for attribute in node.attributes.values():
        if attribute.type in (onnx_ir.AttributeType.GRAPH, onnx_ir.AttributeType.GRAPHS) or attribute.is_ref():
            return {}
        try:
            node_proto.attribute.append(onnx_ir.serde.serialize_attribute(attribute))
        except Exception:  # noqa: BLE001 - an attribute onnx_ir cannot write back: no retyping
            return {}
    try:
        found = onnx.shape_inference.infer_node_outputs(
            schema, node_proto, input_types, input_data, opset_imports=[onnx.helper.make_opsetid(domain, opset)]
        )
    except Exception:  # noqa: BLE001 - inference failing leaves the type as graph inference gave it
        return {}
    return inferred_outputs(found, range(len(node.outputs)))


def inferred_outputs(found: dict[str, onnx.TypeProto], positions) -> dict[int, TensorType]:
    """The Niro types of the outputs (named `out<position>`) that `infer_node_outputs` typed in
    a way Niro can hold, by position."""
    inferred: dict[int, TensorType] = {}
    for position in positions:
        type_proto = found.get(f"out{position}")
        if type_proto is None:
            continue
        try:
            tensor_type = niro_type_from_proto(type_proto)
        except (UnsupportedTypeError, ValueError):
            continue
        if isinstance(tensor_type, TensorType):
            inferred[position] = tensor_type
    return inferred

