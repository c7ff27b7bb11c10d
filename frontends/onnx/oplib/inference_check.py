"""Result types checked against ONNX's own node-level shape inference.

For an op whose operands are all tensors and whose attributes can be rebuilt cheaply, a
NodeProto is made from the UnknownOp (inputs `in0`, `in1`, ..., outputs `out0`, ...; absent
ones empty) and `onnx.shape_inference.infer_node_outputs` types its outputs from the operand
types. A declared result type must be compatible with the inferred one: the same element type,
and where both know the rank, the same rank and the same size wherever both dims are static.
Operand values are not given to inference (the rule sees one op), so shapes that depend on a
constant operand come back unknown and are not checked here.

Skipped (nothing reported): ops with regions or type attributes, tensor attributes over
`MAX_TENSOR_ATTRIBUTE_BYTES`, schemas without an inference function, and any failure of ONNX
other than its shape-inference verdict, which becomes `onnx-shape`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple, cast

import onnx
import onnx.shape_inference
from niro.ir import (
    OPSET_ATTRIBUTE,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    as_memoryview,
    buffer_nbytes,
    format_type,
)

from ..node_inference import inferred_outputs
from ..onnx_types import type_proto_from_niro
from ..tensors import SCALAR_TYPES
from .schemas import AttributeKind, FormalParameter, OpSignature, kind_value

__all__ = ["MAX_TENSOR_ATTRIBUTE_BYTES", "Bound", "check_inferred_types", "compatible"]

MAX_TENSOR_ATTRIBUTE_BYTES = 4096
"""Tensor attributes larger than this are not copied into a NodeProto: the op is not inferred."""

_DATA_TYPES = {scalar: code for code, scalar in SCALAR_TYPES.items()}
_NOT_REBUILT = frozenset(
    {
        AttributeKind.GRAPH,
        AttributeKind.GRAPHS,
        AttributeKind.TYPE_PROTO,
        AttributeKind.TYPE_PROTOS,
        AttributeKind.SPARSE_TENSOR,
        AttributeKind.SPARSE_TENSORS,
    }
)

Binding = tuple[int, FormalParameter, Value]


class Bound(NamedTuple):
    """The inputs (or outputs) of an op bound to their ONNX positions."""

    bindings: list[Binding]
    width: int
    """How many positions the node lists, absent ones included."""


def check_inferred_types(
    signature: OpSignature,
    op: UnknownOp,
    inputs: Bound,
    outputs: Bound,
    report: Callable[..., None],
    cache_key: tuple | None = None,
) -> None:
    """Report results whose types contradict ONNX shape inference (`onnx-result-type`), or
    operands ONNX's inference rejects (`onnx-shape`).

    `cache_key`, when given, must determine the inference (op name, operand types, result
    count, attributes): ops that share it share one call into ONNX.
    """
    if op.regions or not outputs.bindings or not signature.schema.has_type_and_shape_inference_function:
        return
    if not all(isinstance(value.type, TensorType) for _, _, value in inputs.bindings):
        return
    inferred = _INFERRED.get(cache_key) if cache_key is not None else None
    if inferred is None:
        inferred = _infer(signature, op, inputs, outputs)
        if cache_key is not None:
            if len(_INFERRED) >= _INFERRED_LIMIT:
                _INFERRED.clear()
            _INFERRED[cache_key] = inferred
    if isinstance(inferred, str):
        report("onnx-shape", f"ONNX shape inference rejects the op: {inferred}")
        return
    for position, formal, value in outputs.bindings:
        expected = inferred.get(position)
        if expected is not None and not compatible(value.type, expected):
            report(
                "onnx-result-type",
                f"output #{position} '{formal.name}' has type {format_type(value.type)}, but ONNX "
                f"shape inference gives {format_type(expected)}",
                value,
            )


Inferred = dict[int, TensorType] | str
"""The inferred type of each output position ONNX could type, or ONNX's rejection message."""

_INFERRED: dict[tuple, Inferred] = {}
_INFERRED_LIMIT = 1 << 14


def _misread_by_onnx(signature: OpSignature, inputs: list[Binding]) -> bool:
    """Whether ONNX's inference function would reject this valid op for a dynamic operand
    length it cannot see.

    NOTE: ONNX (1.23) Resize's inference reads a `sizes` input (#3) whose length it does not
    know (a graph input `int64[n]`, not an initializer) as 0 elements and rejects the op
    ("Number of elements of input 'sizes' (0) must be same as rank of input 'X'"), while
    onnxruntime runs it. Such an op is not checked here (the MLIR lowering refuses a `sizes`
    of unknown length, naming it)."""
    if signature.domain not in ("", "ai.onnx") or signature.schema.name != "Resize":
        return False
    for position, _, value in inputs:
        if position == 3:
            shape = value.type.shape if isinstance(value.type, TensorType) else None
            return shape is None or len(shape) != 1 or shape[0] is None
    return False


def _infer(signature: OpSignature, op: UnknownOp, inputs: Bound, outputs: Bound) -> Inferred:
    if _misread_by_onnx(signature, inputs.bindings):
        return {}
    node = _node_proto(signature, op, inputs, outputs)
    if node is None:
        return {}
    input_types = {f"in{position}": _type_proto(value.type) for position, _, value in inputs.bindings}
    opset_imports = [onnx.helper.make_opsetid(signature.domain, cast(int, op.attributes[OPSET_ATTRIBUTE]))]
    try:
        found = onnx.shape_inference.infer_node_outputs(
            signature.schema, node, input_types, opset_imports=opset_imports
        )
    except onnx.shape_inference.InferenceError as error:
        return _first_line(error)
    except Exception:  # NOTE: anything else is ONNX failing, not the op being wrong
        return {}
    return inferred_outputs(found, (position for position, _, _ in outputs.bindings))


def compatible(declared: object, inferred: TensorType) -> bool:
    """Whether a declared type can be the inferred one: same element type; where both ranks
    are known, the same rank; where both dims are static, the same size."""
    if not isinstance(declared, TensorType) or declared.element_type is not inferred.element_type:
        return False
    if declared.shape is None or inferred.shape is None:
        return True
    if len(declared.shape) != len(inferred.shape):
        return False
    return all(
        mine is None or theirs is None or mine == theirs
        for mine, theirs in zip(declared.shape, inferred.shape, strict=True)
    )


@functools.lru_cache(maxsize=1024)
def _type_proto(tensor_type: TensorType) -> onnx.TypeProto:
    return type_proto_from_niro(tensor_type)


def _node_proto(
    signature: OpSignature, op: UnknownOp, inputs: Bound, outputs: Bound
) -> onnx.NodeProto | None:
    node = onnx.NodeProto()
    node.op_type = signature.op_type
    node.domain = signature.domain
    present = {position for position, _, _ in inputs.bindings}
    node.input.extend(
        f"in{position}" if position in present else "" for position in range(inputs.width)
    )
    produced = {position for position, _, _ in outputs.bindings}
    node.output.extend(
        f"out{position}" if position in produced else "" for position in range(outputs.width)
    )
    for name, value in op.attributes.items():
        spec = signature.attributes.get(name)
        if spec is None:
            continue  # bookkeeping
        attribute = _attribute_proto(name, spec[0], value)
        if attribute is None:
            return None
        node.attribute.append(attribute)
    return node


def _attribute_proto(name: str, kind: AttributeKind, value) -> onnx.AttributeProto | None:
    if kind in _NOT_REBUILT:
        return None
    attribute = onnx.AttributeProto()
    attribute.name = name
    attribute.type = kind_value(kind)
    if kind is AttributeKind.INT:
        attribute.i = value
    elif kind is AttributeKind.FLOAT:
        attribute.f = value
    elif kind is AttributeKind.STRING:
        attribute.s = value.encode("utf-8", "surrogateescape")
    elif kind is AttributeKind.INTS:
        attribute.ints.extend(value)
    elif kind is AttributeKind.FLOATS:
        attribute.floats.extend(value)
    elif kind is AttributeKind.STRINGS:
        attribute.strings.extend(item.encode("utf-8", "surrogateescape") for item in value)
    elif kind is AttributeKind.TENSOR:
        tensor = _tensor_proto(value)
        if tensor is None:
            return None
        attribute.t.CopyFrom(tensor)
    elif kind is AttributeKind.TENSORS:
        tensors = [_tensor_proto(item) for item in value]
        if any(tensor is None for tensor in tensors):
            return None
        attribute.tensors.extend(tensors)
    else:
        return None
    return attribute


def _tensor_proto(value: dict) -> onnx.TensorProto | None:
    """The TensorProto of a tensor attribute `{dtype, shape, data}` (raw little-endian bytes,
    which is also ONNX's raw_data layout), or None when it is too big to copy."""
    data = value["data"]
    if buffer_nbytes(data) > MAX_TENSOR_ATTRIBUTE_BYTES:
        return None
    tensor = onnx.TensorProto()
    tensor.data_type = _DATA_TYPES[ScalarType(value["dtype"])]
    tensor.dims.extend(value["shape"])
    tensor.raw_data = as_memoryview(data).tobytes()
    return tensor


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
