"""ONNX element types and tensor data -> Niro scalar types and packed little-endian buffers.

A tensor's bytes stay where they are whenever possible: `raw_data` becomes a memoryview over the
protobuf's bytes, external data a memoryview into a mapped file (see `external_data`). Only the
typed repeated fields (`float_data`, `int32_data`, ...) need packing, which numpy does in one
vectorised copy. Nothing here expands a tensor into a Python list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from niro.ir import Buffer, ScalarType, TensorType, format_type
from onnx import TensorProto

__all__ = [
    "SCALAR_TYPES",
    "TensorDataError",
    "element_type_name",
    "pack_scalar",
    "pack_tensor_proto",
    "scalar_type_for",
]

SCALAR_TYPES: dict[int, ScalarType] = {
    TensorProto.BOOL: ScalarType.BOOL,
    TensorProto.INT8: ScalarType.I8,
    TensorProto.INT16: ScalarType.I16,
    TensorProto.INT32: ScalarType.I32,
    TensorProto.INT64: ScalarType.I64,
    TensorProto.UINT8: ScalarType.U8,
    TensorProto.UINT16: ScalarType.U16,
    TensorProto.UINT32: ScalarType.U32,
    TensorProto.UINT64: ScalarType.U64,
    TensorProto.FLOAT16: ScalarType.F16,
    TensorProto.BFLOAT16: ScalarType.BF16,
    TensorProto.FLOAT: ScalarType.F32,
    TensorProto.DOUBLE: ScalarType.F64,
    TensorProto.INT4: ScalarType.I4,
    TensorProto.UINT4: ScalarType.U4,
    TensorProto.INT2: ScalarType.I2,
    TensorProto.UINT2: ScalarType.U2,
    TensorProto.FLOAT8E4M3FN: ScalarType.F8E4M3FN,
    TensorProto.FLOAT8E5M2: ScalarType.F8E5M2,
    TensorProto.FLOAT8E4M3FNUZ: ScalarType.F8E4M3FNUZ,
    TensorProto.FLOAT8E5M2FNUZ: ScalarType.F8E5M2FNUZ,
    TensorProto.FLOAT8E8M0: ScalarType.F8E8M0FNU,
    TensorProto.FLOAT4E2M1: ScalarType.F4E2M1FN,
}
"""ONNX `TensorProto.DataType` -> Niro element type; anything else has no Niro type."""

# numpy dtypes for packing; BF16 and the FP8 types have none in numpy, their bits travel as
# unsigned integers. Sub-byte types are packed bytes (see `_from_int32_data`).
_NUMPY_DTYPES: dict[ScalarType, str] = {
    ScalarType.BOOL: "u1",
    ScalarType.I8: "i1",
    ScalarType.I16: "<i2",
    ScalarType.I32: "<i4",
    ScalarType.I64: "<i8",
    ScalarType.U8: "u1",
    ScalarType.U16: "<u2",
    ScalarType.U32: "<u4",
    ScalarType.U64: "<u8",
    ScalarType.F16: "<f2",
    ScalarType.BF16: "<u2",
    ScalarType.F32: "<f4",
    ScalarType.F64: "<f8",
    ScalarType.F8E4M3FN: "u1",
    ScalarType.F8E5M2: "u1",
    ScalarType.F8E4M3FNUZ: "u1",
    ScalarType.F8E5M2FNUZ: "u1",
    ScalarType.F8E8M0FNU: "u1",
}


class TensorDataError(ValueError):
    """A tensor's data is missing, of the wrong size, or of an unsupported type (the caller
    names the tensor)."""


def element_type_name(data_type: int) -> str:
    """ONNX's spelling of an element type code (`FLOAT8E4M3FN`), for messages."""
    try:
        return TensorProto.DataType.Name(data_type)
    except ValueError:
        return f"#{data_type}"


def scalar_type_for(data_type: int) -> ScalarType:
    """The Niro element type of an ONNX element type code; TensorDataError if it has none."""
    scalar = SCALAR_TYPES.get(data_type)
    if scalar is None:
        if data_type == TensorProto.UNDEFINED:
            raise TensorDataError("element type is UNDEFINED")
        raise TensorDataError(f"element type {element_type_name(data_type)} is not supported")
    return scalar


def _element_count(dims: Sequence[int]) -> int:
    count = 1
    for dim in dims:
        count *= dim
    return count


def _int32_field_length(count: int, scalar: ScalarType) -> int:
    """How many int32_data entries hold `count` elements: one each, except that sub-byte types
    keep one packed byte an entry (as ONNX's helper writes them)."""
    return scalar.buffer_size(count) if scalar.is_sub_byte else count


def _from_int32_data(field, count: int, scalar: ScalarType) -> np.ndarray:
    values = np.fromiter(field, dtype="<i4", count=count)
    if scalar.is_sub_byte:
        return values.astype("u1")  # already packed, a byte an entry
    if scalar is ScalarType.BOOL:
        return (values != 0).astype("u1")
    if scalar in (ScalarType.F16, ScalarType.BF16):
        # NOTE: int32_data holds f16/bf16 bit patterns in the low 16 bits, not values
        return values.astype("<u2")
    if scalar.is_narrow_float:
        return values.astype("u1")  # FP8 bit patterns in the low 8 bits
    return values.astype(_NUMPY_DTYPES[scalar])


def _typed_field(
    proto: TensorProto, scalar: ScalarType
) -> tuple[str, Callable[[object, int], np.ndarray]]:
    """The typed repeated field that holds `proto`'s data, and how to pack it."""
    if scalar in (ScalarType.F32,):
        return "float_data", lambda field, n: np.fromiter(field, dtype="<f4", count=n)
    if scalar is ScalarType.F64:
        return "double_data", lambda field, n: np.fromiter(field, dtype="<f8", count=n)
    if scalar is ScalarType.I64:
        return "int64_data", lambda field, n: np.fromiter(field, dtype="<i8", count=n)
    if scalar in (ScalarType.U32, ScalarType.U64):
        dtype = _NUMPY_DTYPES[scalar]
        return "uint64_data", lambda field, n: np.fromiter(field, dtype="<u8", count=n).astype(
            dtype
        )
    return "int32_data", lambda field, n: _from_int32_data(field, n, scalar)


def pack_tensor_proto(
    proto: TensorProto, raw_view: memoryview | None = None
) -> tuple[TensorType, Buffer]:
    """The Niro type and packed bytes of an inline (not external) tensor.

    `raw_view` is the tensor's raw_data when it was split out of the message before parsing
    (see `wire`); otherwise `raw_data` is a memoryview over the copy protobuf hands out. Typed
    fields are packed with numpy. Raises TensorDataError when the data does not match the dims.
    """
    scalar = scalar_type_for(proto.data_type)
    dims = tuple(proto.dims)
    if any(dim < 0 for dim in dims):
        raise TensorDataError(f"has a negative dimension in {list(dims)}")
    tensor_type = TensorType(scalar, dims)
    count = _element_count(dims)
    expected = scalar.buffer_size(count)
    if raw_view is not None or proto.HasField("raw_data"):
        data = raw_view if raw_view is not None else memoryview(proto.raw_data)
        if data.nbytes != expected:
            raise TensorDataError(
                f"has {data.nbytes} bytes of raw data, expected {expected} for {format_type(tensor_type)}"
            )
        return tensor_type, data
    field_name, pack = _typed_field(proto, scalar)
    field = getattr(proto, field_name)
    entries = _int32_field_length(count, scalar) if field_name == "int32_data" else count
    if len(field) != entries:
        if count and not len(field):
            raise TensorDataError(
                f"has no data ({format_type(tensor_type)} needs {count} elements)"
            )
        raise TensorDataError(
            f"has {len(field)} elements in {field_name}, expected {entries} for {format_type(tensor_type)}"
        )
    if count == 0:
        return tensor_type, b""
    return tensor_type, pack(field, entries).data.cast("B")


def pack_scalar(value: float | int | bool, scalar: ScalarType) -> bytes:
    """One element of `scalar` as little-endian bytes (for a rank-0 tensor Const)."""
    if scalar is ScalarType.BF16:
        bits = int(np.array(value, dtype="<f4").view("<u4"))
        # round to nearest even on the 16 dropped bits (NaN stays NaN: its high bits are kept)
        if (bits & 0x7F800000) != 0x7F800000:
            bits += 0x7FFF + ((bits >> 16) & 1)
        return ((bits >> 16) & 0xFFFF).to_bytes(2, "little")
    if scalar.is_narrow_float or scalar.is_sub_byte:
        return pack_elements(np.array([value]), scalar)
    return np.array(value).astype(_NUMPY_DTYPES[scalar]).tobytes()


def pack_elements(values: np.ndarray, scalar: ScalarType) -> bytes:
    """Values of an FP8, FP4 or sub-byte integer type, converted as ml_dtypes does (round to
    nearest even) and packed as ONNX packs them: sub-byte elements low bits first."""
    import ml_dtypes  # noqa: F401  (registers the dtypes numpy_name spells)

    dtype = np.dtype(scalar.numpy_name)
    if scalar.is_float:
        codes = np.asarray(values, dtype=np.float32).astype(dtype).view(np.uint8)
    else:
        codes = np.asarray(values).astype(np.int64).astype(dtype).view(np.uint8)
    return pack_sub_byte(codes.ravel(), scalar.bit_width)


def pack_sub_byte(codes: np.ndarray, bits: int) -> bytes:
    """One code a byte (uint8, the low `bits` bits meaningful) -> packed bytes, first element in
    the low bits, the last byte padded with zeros; 8-bit codes come back as they are."""
    if bits == 8:
        return codes.tobytes()
    per_byte = 8 // bits
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, dtype=np.uint8)
    padded[: codes.size] = codes & ((1 << bits) - 1)
    grouped = padded.reshape(-1, per_byte)
    packed = np.zeros(grouped.shape[0], dtype=np.uint8)
    for slot in range(per_byte):
        packed |= grouped[:, slot] << np.uint8(bits * slot)
    return packed.tobytes()
