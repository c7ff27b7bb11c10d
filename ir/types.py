"""Niro IR types: scalars and tensors.

Types are immutable values compared by content. This module knows nothing of ONNX or MLIR; the
spelling here (`f32`, `tensor<?x4xf32>`) is Niro's own assembly syntax, which happens to follow
MLIR's because our users read both.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union, cast

__all__ = [
    "ScalarType",
    "TensorType",
    "Type",
    "Shape",
    "Dim",
    "format_type",
    "element_type_of",
    "static_element_count",
]


class ScalarType(enum.Enum):
    """A single non-tensor value's type.

    The spec's initial five (BOOL, I32, I64, F32, F64) plus the element types real models need
    (docs/design.md), down to the 8-bit floats (FP8), the 4-bit float (FP4, MX's E2M1) and the 4- and
    2-bit integers of quantized models. The enum value is the assembly spelling (MLIR's).

    A tensor of a sub-byte type (I4, U4, I2, U2, F4E2M1FN) is stored packed, as ONNX stores it:
    two (or four) elements per byte, the first in the low bits; `buffer_size` says how many bytes.
    """

    BOOL = "i1"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    U8 = "ui8"
    U16 = "ui16"
    U32 = "ui32"
    U64 = "ui64"
    I4 = "i4"
    U4 = "ui4"
    I2 = "i2"
    U2 = "ui2"
    F8E4M3FN = "f8E4M3FN"
    F8E5M2 = "f8E5M2"
    F8E4M3FNUZ = "f8E4M3FNUZ"
    F8E5M2FNUZ = "f8E5M2FNUZ"
    F8E8M0FNU = "f8E8M0FNU"
    F4E2M1FN = "f4E2M1FN"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"

    @property
    def spelling(self) -> str:
        return self.value

    @property
    def bit_width(self) -> int:
        """Bits one element occupies in a packed tensor buffer (BOOL takes a whole byte)."""
        return _BIT_WIDTHS[self]

    @property
    def byte_width(self) -> int:
        """Bytes one element occupies in a packed tensor buffer (BOOL takes one byte); a
        sub-byte type has none (ValueError): use `buffer_size`."""
        bits = _BIT_WIDTHS[self]
        if bits < 8:
            raise ValueError(
                f"{self.spelling} is a sub-byte type: its tensors pack {8 // bits} elements a byte"
            )
        return bits // 8

    @property
    def is_sub_byte(self) -> bool:
        """I4, U4, I2, U2 and F4E2M1FN: tensors pack several elements into a byte."""
        return _BIT_WIDTHS[self] < 8

    def buffer_size(self, count: int) -> int:
        """Bytes of a packed buffer of `count` elements (sub-byte types round up to a byte)."""
        return (count * _BIT_WIDTHS[self] + 7) // 8

    @property
    def numpy_name(self) -> str:
        """The numpy dtype name of one element (`bfloat16`, `float8_e4m3fn`, `int4`... need the
        ml_dtypes package, whose sub-byte dtypes take one byte an element, unpacked)."""
        return _NUMPY_NAMES[self]

    @property
    def is_bool(self) -> bool:
        return self is ScalarType.BOOL

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_narrow_float(self) -> bool:
        """The FP8 and FP4 types: storage and conversion formats, with no arithmetic of their own
        in ONNX (Cast, QuantizeLinear/DequantizeLinear and data movement only)."""
        return self in _NARROW_FLOATS

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer; BOOL is not an integer here."""
        return self in _SIGNED or self in _UNSIGNED

    @property
    def is_signed_integer(self) -> bool:
        return self in _SIGNED

    @property
    def is_unsigned_integer(self) -> bool:
        return self in _UNSIGNED

    @property
    def integer_range(self) -> tuple[int, int]:
        """Inclusive (min, max) an integer literal of this type may hold."""
        if self is ScalarType.BOOL:
            return (0, 1)
        bits = _BIT_WIDTHS[self]
        if self in _SIGNED:
            return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if self in _UNSIGNED:
            return (0, (1 << bits) - 1)
        raise ValueError(f"{self.name} is not an integer type")

    @classmethod
    def from_spelling(cls, spelling: str) -> ScalarType:
        try:
            return _BY_SPELLING[spelling]
        except KeyError:
            raise ValueError(f"unknown scalar type '{spelling}'") from None

    def __repr__(self) -> str:
        return f"ScalarType.{self.name}"


_BIT_WIDTHS = {
    ScalarType.BOOL: 8,
    ScalarType.I8: 8,
    ScalarType.I16: 16,
    ScalarType.I32: 32,
    ScalarType.I64: 64,
    ScalarType.U8: 8,
    ScalarType.U16: 16,
    ScalarType.U32: 32,
    ScalarType.U64: 64,
    ScalarType.I4: 4,
    ScalarType.U4: 4,
    ScalarType.I2: 2,
    ScalarType.U2: 2,
    ScalarType.F8E4M3FN: 8,
    ScalarType.F8E5M2: 8,
    ScalarType.F8E4M3FNUZ: 8,
    ScalarType.F8E5M2FNUZ: 8,
    ScalarType.F8E8M0FNU: 8,
    ScalarType.F4E2M1FN: 4,
    ScalarType.F16: 16,
    ScalarType.BF16: 16,
    ScalarType.F32: 32,
    ScalarType.F64: 64,
}
_NUMPY_NAMES = {
    ScalarType.BOOL: "bool",
    ScalarType.I8: "int8",
    ScalarType.I16: "int16",
    ScalarType.I32: "int32",
    ScalarType.I64: "int64",
    ScalarType.U8: "uint8",
    ScalarType.U16: "uint16",
    ScalarType.U32: "uint32",
    ScalarType.U64: "uint64",
    ScalarType.I4: "int4",
    ScalarType.U4: "uint4",
    ScalarType.I2: "int2",
    ScalarType.U2: "uint2",
    ScalarType.F8E4M3FN: "float8_e4m3fn",
    ScalarType.F8E5M2: "float8_e5m2",
    ScalarType.F8E4M3FNUZ: "float8_e4m3fnuz",
    ScalarType.F8E5M2FNUZ: "float8_e5m2fnuz",
    ScalarType.F8E8M0FNU: "float8_e8m0fnu",
    ScalarType.F4E2M1FN: "float4_e2m1fn",
    ScalarType.F16: "float16",
    ScalarType.BF16: "bfloat16",
    ScalarType.F32: "float32",
    ScalarType.F64: "float64",
}
_NARROW_FLOATS = frozenset(
    {
        ScalarType.F8E4M3FN,
        ScalarType.F8E5M2,
        ScalarType.F8E4M3FNUZ,
        ScalarType.F8E5M2FNUZ,
        ScalarType.F8E8M0FNU,
        ScalarType.F4E2M1FN,
    }
)
_FLOATS = (
    frozenset({ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64}) | _NARROW_FLOATS
)
_SIGNED = frozenset(
    {ScalarType.I2, ScalarType.I4, ScalarType.I8, ScalarType.I16, ScalarType.I32, ScalarType.I64}
)
_UNSIGNED = frozenset(
    {ScalarType.U2, ScalarType.U4, ScalarType.U8, ScalarType.U16, ScalarType.U32, ScalarType.U64}
)
_BY_SPELLING = {scalar.value: scalar for scalar in ScalarType}

Dim = Union[int, None]
"""A tensor dimension: a size, or None when dynamic."""

Shape = Union[tuple[Dim, ...], None]
"""A tensor shape: a tuple of dims, or None for unknown rank."""


@dataclass(frozen=True, slots=True)
class TensorType:
    """A tensor of `element_type` with `shape` (None = unranked, () = rank zero).

    Construction accepts any shape so that the verifier, not the constructor, reports a negative
    dimension with a location; only the field types are checked here.
    """

    element_type: ScalarType
    shape: Shape
    dim_names: tuple[str | None, ...] | None = field(default=None, compare=False, repr=False)
    """Per dim, a name shared with every other dynamic dim known to have the same run-time
    size (an ONNX dim_param the importer trusts), or None. Not part of the type's identity:
    equality, hashing and the spelling ignore it, so a type built without names is the same
    type and only loses the knowledge (a lowering then checks equality at run time)."""

    def __post_init__(self) -> None:
        if not isinstance(self.element_type, ScalarType):
            raise TypeError(
                f"TensorType element_type must be a ScalarType, got {self.element_type!r}"
            )
        if self.shape is not None:
            if not isinstance(self.shape, tuple):
                object.__setattr__(self, "shape", tuple(self.shape))
            for dim in self.shape:
                if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool)):
                    raise TypeError(f"TensorType dims must be int or None, got {dim!r}")
        if self.dim_names is not None and (
            self.shape is None or len(self.dim_names) != len(self.shape)
        ):
            raise TypeError("TensorType dim_names needs one entry per dim of a ranked shape")

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_ranked(self) -> bool:
        return self.shape is not None

    def dim_name(self, axis: int) -> str | None:
        """The name of dynamic dim `axis` (see `dim_names`), or None."""
        if self.dim_names is None or self.shape is None or self.shape[axis] is not None:
            return None
        return self.dim_names[axis]

    @property
    def is_static(self) -> bool:
        """Ranked with every dim known."""
        return self.shape is not None and all(dim is not None for dim in self.shape)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape when every dim is known (`is_static`), else None."""
        if self.shape is None or None in self.shape:
            return None
        return cast(tuple[int, ...], self.shape)

    def __str__(self) -> str:
        return format_type(self)


Type = Union[ScalarType, TensorType]


def format_type(type_: Type) -> str:
    """The assembly spelling: `f32`, `tensor<*xf32>`, `tensor<f32>`, `tensor<?x4xf32>`."""
    if isinstance(type_, ScalarType):
        return type_.spelling
    if isinstance(type_, TensorType):
        element = type_.element_type.spelling
        if type_.shape is None:
            return f"tensor<*x{element}>"
        dims = "".join(("?" if dim is None else str(dim)) + "x" for dim in type_.shape)
        return f"tensor<{dims}{element}>"
    raise TypeError(f"not a Niro type: {type_!r}")


def element_type_of(type_: Type) -> ScalarType:
    """The scalar type itself, or a tensor's element type."""
    return type_ if isinstance(type_, ScalarType) else type_.element_type


def static_element_count(tensor: TensorType) -> int:
    """Number of elements of a static-shaped tensor (1 for rank zero)."""
    shape = tensor.static_shape
    if shape is None:
        raise ValueError(f"{format_type(tensor)} has no static element count")
    count = 1
    for dim in shape:
        count *= dim
    return count
