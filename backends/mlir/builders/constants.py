"""Scalar and small tensor constants: `arith.constant` of a value in an MLIR type.

Integers are signless in MLIR: a value is stored as its two's-complement bit pattern at the
type's width (255 in i8 is the same bits as -1), so every integer constant wraps here, once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from niro.ir import ScalarType

from ..bindings import arith, mlir_ir
from ..types import index_type, lower_scalar_type

__all__ = ["constant", "index_constant", "i64_constant", "i64_elements", "dense_constant", "identity_value"]


def _wrapped(value: int, width: int) -> int:
    """`value` as the signed integer with the same low `width` bits (i1 stays 0 or 1)."""
    value = int(value) & ((1 << width) - 1)
    if width > 1 and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def constant(element: mlir_ir.Type, value: float | int) -> mlir_ir.Value:
    """A scalar constant of an integer or float MLIR type (integers wrap to the type's width)."""
    if isinstance(element, mlir_ir.IntegerType):
        wrapped = _wrapped(int(value), element.width)
        return arith.ConstantOp(element, mlir_ir.IntegerAttr.get(element, wrapped)).result
    return arith.ConstantOp(element, mlir_ir.FloatAttr.get(element, float(value))).result


def index_constant(value: int) -> mlir_ir.Value:
    """An `index` constant (a size, an axis, a position)."""
    return arith.ConstantOp(index_type(), mlir_ir.IntegerAttr.get(index_type(), int(value))).result


def i64_constant(value: int) -> mlir_ir.Value:
    """An i64 constant (ONNX's integer type of indices and shapes)."""
    return constant(mlir_ir.IntegerType.get_signless(64), value)


def i64_elements(values: Sequence[int]) -> mlir_ir.Attribute:
    """A 1-D i64 elements attribute (a named op's strides and dilations)."""
    return mlir_ir.DenseElementsAttr.get(np.array(values, dtype=np.int64))


def dense_constant(array: np.ndarray, scalar: ScalarType) -> mlir_ir.Value:
    """A small constant tensor (tables computed at compile time) as `arith.constant dense<>`."""
    element = lower_scalar_type(scalar)
    type_ = mlir_ir.RankedTensorType.get(list(array.shape), element)
    if scalar.is_float:
        values = [mlir_ir.FloatAttr.get(element, float(item)) for item in array.reshape(-1)]
    else:
        values = [
            mlir_ir.IntegerAttr.get(element, _wrapped(int(item), element.width))
            for item in array.reshape(-1)
        ]
    return arith.ConstantOp(type_, mlir_ir.DenseElementsAttr.get(values, type=type_)).result


def identity_value(scalar: ScalarType, kind: str) -> float | int:
    """The identity of a combining function over `scalar` elements ("max": the lowest value,
    "min": the highest), as ONNX defines an empty max/min: -inf/+inf, or the integer extremes."""
    if scalar.is_float:
        return float("-inf") if kind == "max" else float("inf")
    low, high = scalar.integer_range
    return low if kind == "max" else high
