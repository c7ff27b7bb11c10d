"""Does a literal fit a type? Used by Const and Global checks, and by the parser.

Scalars: BOOL takes a Python bool; integer types take an int (not a bool) within the type's
range; float types take a float or an int (not a bool) whose magnitude does not overflow the
type (inf and nan are allowed: they are values of every float type).
Tensors: a static shape, and a buffer of exactly element-count * byte-width packed bytes (sub-byte
types: element-count * bit-width bits, rounded up to a byte).

NOTE: float types accept ints because `Const(result=f32_value, literal=2)` means 2.0 without
ambiguity, and ONNX attributes often carry integral floats as ints. Integer types do not accept
floats (2.5 has no exact meaning there), and BOOL takes only True/False so that 1 never silently
means True.
NOTE: the bytes of a BOOL tensor are not scanned for values other than 0 and 1: that would cost a
pass over every weight, and the lowering reads them as `i1` (nonzero is true) anyway.
"""

from __future__ import annotations

from typing import Literal as TypingLiteral

from .attributes import buffer_nbytes, is_buffer
from .types import ScalarType, TensorType, format_type

__all__ = ["literal_problem", "classify_literal_problem", "LiteralProblemKind"]

LiteralProblemKind = TypingLiteral["kind", "static-shape", "size"]
"""kind: wrong Python kind or out of range; static-shape: tensor type not static; size: byte count."""

# Smallest magnitude that rounds to infinity under round-to-nearest-even (max + half an ulp).
_FLOAT_OVERFLOW = {
    ScalarType.F16: 65520.0,
    ScalarType.BF16: (2 - 2**-8) * 2.0**127,
    ScalarType.F32: (2 - 2**-24) * 2.0**127,
    ScalarType.F8E4M3FN: 464.0,
    ScalarType.F8E5M2: 61440.0,
    ScalarType.F8E4M3FNUZ: 248.0,
    ScalarType.F8E5M2FNUZ: 61440.0,
    ScalarType.F8E8M0FNU: 1.5 * 2.0**127,
    ScalarType.F4E2M1FN: 7.0,
}


def literal_problem(type_: object, literal: object) -> str | None:
    """Why `literal` does not match `type_`, or None when it does."""
    found = classify_literal_problem(type_, literal)
    return None if found is None else found[1]


def classify_literal_problem(
    type_: object, literal: object
) -> tuple[LiteralProblemKind, str] | None:
    """Like `literal_problem`, also saying which kind of problem (the verifier has one rule each)."""
    if isinstance(type_, ScalarType):
        problem = _scalar_problem(type_, literal)
        return None if problem is None else ("kind", problem)
    if isinstance(type_, TensorType):
        return _tensor_problem(type_, literal)
    return ("kind", f"{type_!r} is not a Niro type")


def _describe(literal: object) -> str:
    if is_buffer(literal):
        return f"a {type(literal).__name__} buffer of {buffer_nbytes(literal)} bytes"
    text = repr(literal)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(literal).__name__} {text}"


def _scalar_problem(scalar: ScalarType, literal: object) -> str | None:
    spelling = scalar.spelling
    if scalar.is_bool:
        if isinstance(literal, bool):
            return None
        return f"expected a bool literal for {spelling}, got {_describe(literal)}"
    if scalar.is_integer:
        if not isinstance(literal, int) or isinstance(literal, bool):
            return f"expected an int literal for {spelling}, got {_describe(literal)}"
        low, high = scalar.integer_range
        if not low <= literal <= high:
            return f"literal {literal} is out of range for {spelling} [{low}, {high}]"
        return None
    if scalar.is_float:
        if isinstance(literal, bool) or not isinstance(literal, (int, float)):
            return f"expected a float (or int) literal for {spelling}, got {_describe(literal)}"
        limit = _FLOAT_OVERFLOW.get(scalar)
        try:
            magnitude = abs(float(literal))
        except OverflowError:
            return f"literal {literal} is out of range for {spelling}"
        if limit is not None and magnitude != float("inf") and magnitude >= limit:
            return f"literal {literal!r} is out of range for {spelling}"
        return None
    raise AssertionError(f"unhandled scalar type {scalar!r}")


def _tensor_problem(tensor: TensorType, literal: object) -> tuple[LiteralProblemKind, str] | None:
    spelling = format_type(tensor)
    if not is_buffer(literal):
        return (
            "kind",
            f"expected a buffer of packed bytes for {spelling}, got {_describe(literal)}",
        )
    shape = tensor.static_shape
    if shape is None:
        return ("static-shape", f"a tensor literal needs a static shape, got {spelling}")
    count = 1
    for dim in shape:
        if dim < 0:
            return ("static-shape", f"{spelling} has a negative dimension")
        count *= dim
    element = tensor.element_type
    expected = element.buffer_size(count)
    got = buffer_nbytes(literal)
    if got != expected:
        size = f"{element.bit_width} bits" if element.is_sub_byte else f"{element.byte_width} bytes"
        return (
            "size",
            f"expected {expected} bytes for {spelling} ({count} elements of {size}), got {got}",
        )
    return None
