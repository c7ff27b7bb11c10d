"""Niro types -> MLIR types.

MLIR's arith and linalg ops work on signless integers, so U8..U64 lower to signless i8..i64 like
I8..I64. Unsignedness lives on in the Niro types only: every op this backend lowers (add, mul,
matmul with same-width accumulation, extract, transpose) computes the same bits for signed and
unsigned operands, so no op choice depends on it yet. A lowering for a sign-sensitive op
(division, comparison, widening) must look at the Niro element type, not at the MLIR one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

from niro.ir import Dim, ScalarType, TensorType, Type

from .bindings import mlir_ir

__all__ = [
    "RankedTensorType",
    "as_ranked",
    "lower_scalar_type",
    "lower_type",
    "index_type",
    "type_key",
]

if TYPE_CHECKING:

    @dataclass(frozen=True, slots=True)
    class RankedTensorType(TensorType):
        """A Niro `TensorType` known to be ranked: its `shape` is a tuple, never None.

        A refinement for the type checker only, as MLIR's `RankedTensorType` refines its
        `TensorType`: at run time the name is `TensorType` itself, so a value is never built or
        compared as anything else (equality, hashing and spelling are TensorType's) and
        `isinstance` cannot tell ranked from unranked. A lowering gets one from
        `LoweringRuleContext.ranked` (which refuses an unranked tensor with the op's name) or
        from `as_ranked`; building one with a tuple shape, `RankedTensorType(element, shape)`,
        builds a plain TensorType.
        """

        shape: tuple[Dim, ...]

        @property
        def rank(self) -> int: ...

else:
    RankedTensorType = TensorType


def as_ranked(type_: TensorType) -> RankedTensorType:
    """`type_`, which the caller knows is ranked (it was checked, or built with a shape), as a
    `RankedTensorType`; an unranked one here is niroc's bug."""
    assert type_.shape is not None, f"expected a ranked tensor type, got {type_}"
    return cast(RankedTensorType, type_)

# NOTE: IREE 3.13 cannot hold sub-byte tensors of every shape: a tensor whose element count
# times the bit width is not a whole number of bytes fails in iree-compile ("stream.tensor.sizeof
# op failed to calculate total byte count: 'tensor<3x5xi4>' does not have integral number of
# total bytes"), a `dense_resource` of i4 fails to serialize ("unhandled integer element bit
# width 4"), and its Python runtime has no buffer element type for ml_dtypes' int4 arrays. So
# the sub-byte types (I4, U4, I2, U2, F4E2M1FN) lower to i8 tensors holding one element a
# byte: the integer's value (sign-extended for I4/I2, zero-extended for U4/U2) or FP4's 4-bit
# code. Data movement works unchanged on bytes; the conversions (Cast, Quantize/Dequantize)
# read and write the values. ml_dtypes' own arrays have this layout (one element a byte).
# tests/backends/mlir/test_element_types.py compiles the i4 forms that fail.


def lower_scalar_type(scalar: ScalarType) -> mlir_ir.Type:
    """BOOL -> i1, I*/U* -> signless i*, floats -> MLIR's float of that name, the sub-byte types
    -> i8 (see the note above) (needs a context)."""
    try:
        build = _SCALAR_BUILDERS[scalar]
    except KeyError:
        raise AssertionError(f"unhandled scalar type {scalar!r}") from None
    return build()


# NOTE: a table rather than a `match`: this runs for every operand of every op (a 20,000-node
# model asks ~85,000 times), and the match's case-by-case comparison cost 6x the lookup.
_SCALAR_BUILDERS: dict[ScalarType, Callable[[], mlir_ir.Type]] = {
    ScalarType.BOOL: partial(mlir_ir.IntegerType.get_signless, 1),
    ScalarType.I8: partial(mlir_ir.IntegerType.get_signless, 8),
    ScalarType.U8: partial(mlir_ir.IntegerType.get_signless, 8),
    ScalarType.I16: partial(mlir_ir.IntegerType.get_signless, 16),
    ScalarType.U16: partial(mlir_ir.IntegerType.get_signless, 16),
    ScalarType.I32: partial(mlir_ir.IntegerType.get_signless, 32),
    ScalarType.U32: partial(mlir_ir.IntegerType.get_signless, 32),
    ScalarType.I64: partial(mlir_ir.IntegerType.get_signless, 64),
    ScalarType.U64: partial(mlir_ir.IntegerType.get_signless, 64),
    ScalarType.I4: partial(mlir_ir.IntegerType.get_signless, 8),
    ScalarType.U4: partial(mlir_ir.IntegerType.get_signless, 8),
    ScalarType.I2: partial(mlir_ir.IntegerType.get_signless, 8),
    ScalarType.U2: partial(mlir_ir.IntegerType.get_signless, 8),
    ScalarType.F4E2M1FN: partial(mlir_ir.IntegerType.get_signless, 8),
    ScalarType.F8E4M3FN: mlir_ir.Float8E4M3FNType.get,
    ScalarType.F8E5M2: mlir_ir.Float8E5M2Type.get,
    ScalarType.F8E4M3FNUZ: mlir_ir.Float8E4M3FNUZType.get,
    ScalarType.F8E5M2FNUZ: mlir_ir.Float8E5M2FNUZType.get,
    ScalarType.F8E8M0FNU: mlir_ir.Float8E8M0FNUType.get,
    ScalarType.F16: mlir_ir.F16Type.get,
    ScalarType.BF16: mlir_ir.BF16Type.get,
    ScalarType.F32: mlir_ir.F32Type.get,
    ScalarType.F64: mlir_ir.F64Type.get,
}
if set(_SCALAR_BUILDERS) != set(ScalarType):  # pragma: no cover - a new ScalarType fails at import
    raise AssertionError("lower_scalar_type misses a ScalarType")


def lower_type(type_: Type) -> mlir_ir.Type:
    """A scalar, `tensor<...>` with `?` for dynamic dims, or `tensor<*x...>` when unranked."""
    if isinstance(type_, ScalarType):
        return lower_scalar_type(type_)
    element = lower_scalar_type(type_.element_type)
    if type_.shape is None:
        return mlir_ir.UnrankedTensorType.get(element)
    dynamic = mlir_ir.ShapedType.get_dynamic_size()
    return mlir_ir.RankedTensorType.get(
        [dynamic if dim is None else dim for dim in type_.shape], element
    )


def index_type() -> mlir_ir.Type:
    return mlir_ir.IndexType.get()


def type_key(type_: Type) -> Hashable:
    """A dict key that is equal for equal Niro types and cheap to hash, for memos of lowered
    types and attributes: the element type's identity (ScalarTypes are enum singletons) and the
    shape. NOTE: not the type itself: each Niro value has its own TensorType object, whose
    dataclass hash and == are Python calls (three per lookup, most of a memo's cost)."""
    if isinstance(type_, TensorType):
        return (id(type_.element_type), type_.shape)
    return id(type_)
