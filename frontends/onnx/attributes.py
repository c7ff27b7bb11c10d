"""ONNX node attributes -> Niro generic attributes (for UnknownOp).

ints, floats and strings stay themselves; lists become tuples; a tensor becomes
`{"dtype": "f32", "shape": (2, 3), "data": <packed little-endian bytes>}`. Graph attributes are
not converted here: the importer turns them into regions of the UnknownOp. Sparse tensors,
string tensors and attribute references outside a function have no Niro form: they raise
`AttributeConversionError`, which the caller prefixes with the node.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir
from niro.ir import Attribute, Buffer, TensorType

__all__ = ["AttributeConversionError", "generic_attribute"]

ReadTensor = Callable[[onnx_ir.TensorProtocol, str], tuple[TensorType, Buffer]]


class AttributeConversionError(ValueError):
    """An attribute with no generic-attribute form."""


def _tensor(tensor: onnx_ir.TensorProtocol, read_tensor: ReadTensor, what: str) -> dict[str, Attribute]:
    tensor_type, data = read_tensor(tensor, what)
    return {"dtype": tensor_type.element_type.spelling, "shape": tensor_type.shape, "data": data}


def generic_attribute(name: str, attribute: onnx_ir.Attr, read_tensor: ReadTensor) -> Attribute:
    """The generic attribute for a non-graph ONNX attribute."""
    if attribute.is_ref():
        raise AttributeConversionError(
            f"attribute '{name}' refers to function attribute '{attribute.ref_attr_name}' outside a function"
        )
    kind = attribute.type
    value = attribute.value
    what = f"attribute '{name}'"
    match kind:
        case onnx_ir.AttributeType.INT:
            return int(value)
        case onnx_ir.AttributeType.FLOAT:
            return float(value)
        case onnx_ir.AttributeType.STRING:
            return str(value)
        case onnx_ir.AttributeType.INTS:
            return tuple(int(item) for item in value)
        case onnx_ir.AttributeType.FLOATS:
            return tuple(float(item) for item in value)
        case onnx_ir.AttributeType.STRINGS:
            return tuple(str(item) for item in value)
        case onnx_ir.AttributeType.TENSOR:
            return _tensor(value, read_tensor, what)
        case onnx_ir.AttributeType.TENSORS:
            return tuple(
                _tensor(item, read_tensor, f"{what} #{position}") for position, item in enumerate(value)
            )
        case onnx_ir.AttributeType.TYPE_PROTO:
            return str(value)
        case onnx_ir.AttributeType.TYPE_PROTOS:
            return tuple(str(item) for item in value)
        case onnx_ir.AttributeType.SPARSE_TENSOR | onnx_ir.AttributeType.SPARSE_TENSORS:
            raise AttributeConversionError(f"{what}: sparse tensors are not supported")
        case _:
            raise AttributeConversionError(f"{what}: attribute kind {kind.name} is not supported")
