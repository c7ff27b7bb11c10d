"""Element types and scalars: where to accumulate, float conversions, reading small integer
tensors as scalars (ONNX inputs such as `axes` that are graph inputs)."""

from __future__ import annotations

from niro.ir import ScalarType

from ..bindings import arith, ir, tensor
from ..types import lower_scalar_type
from .constants import index_constant

__all__ = ["is_float", "accumulator_type", "convert", "read_int_scalars"]


def is_float(element: ir.Type) -> bool:
    """Whether an MLIR element type is a float (not an integer, not an index)."""
    return not isinstance(element, (ir.IntegerType, ir.IndexType))


def accumulator_type(scalar: ScalarType) -> ir.Type:
    """Where to accumulate sums of `scalar`: f32 for f16/bf16 (precision), else the type."""
    if scalar in (ScalarType.F16, ScalarType.BF16):
        return ir.F32Type.get()
    return lower_scalar_type(scalar)


def convert(value: ir.Value, target: ir.Type) -> ir.Value:
    """Float widening/narrowing between float types (identity when the types agree)."""
    source = value.type
    if source == target:
        return value
    if ir.FloatType(source).width < ir.FloatType(target).width:
        return arith.ExtFOp(target, value).result
    return arith.TruncFOp(target, value).result


def read_int_scalars(value: ir.Value, count: int) -> list[ir.Value]:
    """The `count` elements of a rank-0 or rank-1 integer tensor, as i64 scalars (sign-extended)."""
    shaped = ir.RankedTensorType(value.type)
    i64 = ir.IntegerType.get_signless(64)
    scalars = []
    for position in range(count):
        indices = [] if shaped.rank == 0 else [index_constant(position)]
        element = tensor.ExtractOp(value, indices).result
        if ir.IntegerType(element.type).width < 64:
            element = arith.ExtSIOp(i64, element).result
        scalars.append(element)
    return scalars
