"""ONNX `TypeProto` <-> Niro types.

ONNX values are tensors; Niro keeps them tensors (a rank-0 ONNX tensor is `tensor<f32>`, never a
scalar). Symbolic dims (`dim_param`) and missing dims become dynamic (None), a trusted
`dim_param` kept as the dim's name; a missing shape
becomes an unknown rank. Sequence, map, optional and sparse types have no Niro type: they raise
`UnsupportedTypeError` with the reason, which the caller prefixes with the value's name.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import onnx.defs
import onnx_ir
from niro.ir import ScalarType, TensorType, Value

from .tensors import SCALAR_TYPES, TensorDataError, scalar_type_for

__all__ = [
    "UnsupportedTypeError",
    "niro_type_from_proto",
    "schema_element_type",
    "type_proto_from_niro",
]

_ONNX_CODES = {scalar: code for code, scalar in SCALAR_TYPES.items()}

_UNSUPPORTED_KINDS = {
    "sequence_type": "sequence types are not supported",
    "map_type": "map types are not supported",
    "optional_type": "optional types are not supported",
    "sparse_tensor_type": "sparse tensor types are not supported",
}


class UnsupportedTypeError(ValueError):
    """A value whose ONNX type has no Niro type."""


def niro_type_from_proto(
    type_proto: onnx.TypeProto | None, trusted_names: frozenset[str] = frozenset()
) -> TensorType | None:
    """The Niro tensor type of `type_proto`; None when not even the element type is known.

    A dynamic dim whose `dim_param` is in `trusted_names` keeps it as its `dim_names` entry
    (see `inference.GraphTypes.dim_names` for which names are trusted, and why)."""
    if type_proto is None:
        return None
    kind = type_proto.WhichOneof("value")
    if kind is None:
        return None
    if kind != "tensor_type":
        raise UnsupportedTypeError(_UNSUPPORTED_KINDS.get(kind, f"{kind} values are not supported"))
    tensor = type_proto.tensor_type
    if tensor.elem_type == onnx.TensorProto.UNDEFINED:
        return None
    try:
        element = scalar_type_for(tensor.elem_type)
    except TensorDataError as error:
        raise UnsupportedTypeError(str(error)) from None
    if not tensor.HasField("shape"):
        return TensorType(element, None)
    dims = tuple(
        dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None
        for dim in tensor.shape.dim
    )
    names = tuple(
        dim.dim_param if size is None and dim.dim_param in trusted_names else None
        for size, dim in zip(dims, tensor.shape.dim, strict=True)
    )
    return TensorType(element, dims, names if any(names) else None)


def type_proto_from_niro(tensor_type: TensorType) -> onnx.TypeProto:
    """The ONNX type of a Niro tensor type (dynamic dims stay unnamed)."""
    type_proto = onnx.TypeProto()
    tensor = type_proto.tensor_type
    tensor.elem_type = _ONNX_CODES[tensor_type.element_type]
    if tensor_type.shape is not None:
        shape = tensor.shape
        shape.SetInParent()
        for dim in tensor_type.shape:
            entry = shape.dim.add()
            if dim is not None:
                entry.dim_value = dim
    return type_proto


_SCHEMA_TYPE_STRINGS = {
    "tensor(bool)": ScalarType.BOOL,
    "tensor(int8)": ScalarType.I8,
    "tensor(int16)": ScalarType.I16,
    "tensor(int32)": ScalarType.I32,
    "tensor(int64)": ScalarType.I64,
    "tensor(uint8)": ScalarType.U8,
    "tensor(uint16)": ScalarType.U16,
    "tensor(uint32)": ScalarType.U32,
    "tensor(uint64)": ScalarType.U64,
    "tensor(float16)": ScalarType.F16,
    "tensor(bfloat16)": ScalarType.BF16,
    "tensor(float)": ScalarType.F32,
    "tensor(double)": ScalarType.F64,
    "tensor(int4)": ScalarType.I4,
    "tensor(uint4)": ScalarType.U4,
    "tensor(int2)": ScalarType.I2,
    "tensor(uint2)": ScalarType.U2,
    "tensor(float8e4m3fn)": ScalarType.F8E4M3FN,
    "tensor(float8e5m2)": ScalarType.F8E5M2,
    "tensor(float8e4m3fnuz)": ScalarType.F8E4M3FNUZ,
    "tensor(float8e5m2fnuz)": ScalarType.F8E5M2FNUZ,
    "tensor(float8e8m0)": ScalarType.F8E8M0FNU,
    "tensor(float4e2m1)": ScalarType.F4E2M1FN,
}
"""Type strings of op schemas (`tensor(float)`) -> Niro element types."""


def schema_element_type(
    node: onnx_ir.Node, output_index: int, inputs: Sequence[Value | None], opset: int
) -> ScalarType | None:
    """The element type of a node output by the op's schema, when shape inference has none.

    Either the output's type constraint allows a single type (`Shape` -> int64), or it shares
    its constraint with an input whose type is known (`Dropout`'s mask, `T` like its data).
    """
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # no schema: a custom domain, or an op this onnx does not know
        return None
    outputs = schema.outputs
    if not outputs:
        return None
    formal = outputs[min(output_index, len(outputs) - 1)]
    constraints = {
        constraint.type_param_str: tuple(constraint.allowed_type_strs)
        for constraint in schema.type_constraints
    }
    allowed = constraints.get(formal.type_str, (formal.type_str,))
    if len(allowed) == 1:
        return _SCHEMA_TYPE_STRINGS.get(allowed[0])
    for position, value in enumerate(inputs):
        formal_inputs = schema.inputs
        if not formal_inputs or value is None or not isinstance(value.type, TensorType):
            continue
        if formal_inputs[min(position, len(formal_inputs) - 1)].type_str == formal.type_str:
            return value.type.element_type
    return None
