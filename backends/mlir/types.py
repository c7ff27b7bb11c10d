"""Niro types -> MLIR types.

MLIR's arith and linalg ops work on signless integers, so U8..U64 lower to signless i8..i64 like
I8..I64. Unsignedness lives on in the Niro types only: every op this backend lowers (add, mul,
matmul with same-width accumulation, extract, transpose) computes the same bits for signed and
unsigned operands, so no op choice depends on it yet. A lowering for a sign-sensitive op
(division, comparison, widening) must look at the Niro element type, not at the MLIR one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import partial

from niro.ir import ScalarType, TensorType, Type

from .bindings import ir

__all__ = ["lower_scalar_type", "lower_type", "index_type", "type_key"]


def lower_scalar_type(scalar: ScalarType) -> ir.Type:
    """BOOL -> i1, I*/U* -> signless i*, F16/BF16/F32/F64 -> f16/bf16/f32/f64 (needs a context)."""
    try:
        build = _SCALAR_BUILDERS[scalar]
    except KeyError:
        raise AssertionError(f"unhandled scalar type {scalar!r}") from None
    return build()


# NOTE: a table rather than a `match`: this runs for every operand of every op (a 20,000-node
# model asks ~85,000 times), and the match's case-by-case comparison cost 6x the lookup.
_SCALAR_BUILDERS: dict[ScalarType, Callable[[], ir.Type]] = {
    ScalarType.BOOL: partial(ir.IntegerType.get_signless, 1),
    ScalarType.I8: partial(ir.IntegerType.get_signless, 8),
    ScalarType.U8: partial(ir.IntegerType.get_signless, 8),
    ScalarType.I16: partial(ir.IntegerType.get_signless, 16),
    ScalarType.U16: partial(ir.IntegerType.get_signless, 16),
    ScalarType.I32: partial(ir.IntegerType.get_signless, 32),
    ScalarType.U32: partial(ir.IntegerType.get_signless, 32),
    ScalarType.I64: partial(ir.IntegerType.get_signless, 64),
    ScalarType.U64: partial(ir.IntegerType.get_signless, 64),
    ScalarType.F16: ir.F16Type.get,
    ScalarType.BF16: ir.BF16Type.get,
    ScalarType.F32: ir.F32Type.get,
    ScalarType.F64: ir.F64Type.get,
}
if set(_SCALAR_BUILDERS) != set(ScalarType):  # pragma: no cover - a new ScalarType fails at import
    raise AssertionError("lower_scalar_type misses a ScalarType")


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


def type_key(type_: Type) -> Hashable:
    """A dict key that is equal for equal Niro types and cheap to hash, for memos of lowered
    types and attributes: the element type's identity (ScalarTypes are enum singletons) and the
    shape. NOTE: not the type itself: each Niro value has its own TensorType object, whose
    dataclass hash and == are Python calls (three per lookup, most of a memo's cost)."""
    if isinstance(type_, TensorType):
        return (id(type_.element_type), type_.shape)
    return id(type_)
