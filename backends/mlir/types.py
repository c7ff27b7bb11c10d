"""Niro types -> MLIR types.

MLIR's arith and linalg ops work on signless integers, so U8..U64 lower to signless i8..i64 like
I8..I64. Unsignedness lives on in the Niro types only: every op this backend lowers (add, mul,
matmul with same-width accumulation, extract, transpose) computes the same bits for signed and
unsigned operands, so no op choice depends on it yet. A lowering for a sign-sensitive op
(division, comparison, widening) must look at the Niro element type, not at the MLIR one.
"""

from __future__ import annotations

from niro.ir import ScalarType, Type

from .bindings import ir

__all__ = ["lower_scalar_type", "lower_type", "index_type"]


def lower_scalar_type(scalar: ScalarType) -> ir.Type:
    """BOOL -> i1, I*/U* -> signless i*, F16/BF16/F32/F64 -> f16/bf16/f32/f64 (needs a context)."""
    match scalar:
        case ScalarType.BOOL:
            return ir.IntegerType.get_signless(1)
        case ScalarType.I8 | ScalarType.U8:
            return ir.IntegerType.get_signless(8)
        case ScalarType.I16 | ScalarType.U16:
            return ir.IntegerType.get_signless(16)
        case ScalarType.I32 | ScalarType.U32:
            return ir.IntegerType.get_signless(32)
        case ScalarType.I64 | ScalarType.U64:
            return ir.IntegerType.get_signless(64)
        case ScalarType.F16:
            return ir.F16Type.get()
        case ScalarType.BF16:
            return ir.BF16Type.get()
        case ScalarType.F32:
            return ir.F32Type.get()
        case ScalarType.F64:
            return ir.F64Type.get()
    raise AssertionError(f"unhandled scalar type {scalar!r}")


def lower_type(type_: Type) -> ir.Type:
    """A scalar, `tensor<...>` with `?` for dynamic dims, or `tensor<*x...>` when unranked."""
    if isinstance(type_, ScalarType):
        return lower_scalar_type(type_)
    element = lower_scalar_type(type_.element_type)
    if type_.shape is None:
        return ir.UnrankedTensorType.get(element)
    dynamic = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get(
        [dynamic if dim is None else dim for dim in type_.shape], element
    )


def index_type() -> ir.Type:
    return ir.IndexType.get()
