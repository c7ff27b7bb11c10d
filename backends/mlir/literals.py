"""Niro literals and generic attributes -> MLIR attributes, and the module's resource blobs.

Tensor data (Const literals, Global initializers) becomes a `dense_resource` blob built straight
from the Niro buffer with `DenseResourceElementsAttr.get_from_buffer`: MLIR keeps a reference to
the buffer, never a copy, and no per-element Python object is made. One-element and splat
tensors become `DenseElementsAttr` splats instead (resources mishandle 0-d tensors and splats
read better), and so do BOOL tensors (see `tensor_data_attr`). Every blob is also recorded in a `ResourceTable`, so the text writer can stream
it in hex chunks rather than let MLIR build the whole hex string in memory.

Blob names are derived from the symbol that owns them (a Global's name, or the function and a
counter for Consts), sanitised to MLIR keyword characters and made unique in a fixed order, so
the same Niro module gives the same bytes every time.
"""

from __future__ import annotations

import mmap
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from niro.ir import Literal as NiroLiteral
from niro.ir import ScalarType, TensorType, as_memoryview, buffer_nbytes, is_buffer

from .bindings import mlir_ir
from .builders.elements import SMALL_VECTOR
from .types import lower_scalar_type, lower_type

__all__ = [
    "ResourceBlob",
    "ResourceTable",
    "scalar_attr",
    "tensor_data_attr",
    "generic_attr",
    "read_only_mappings",
    "release_pages",
]

_SPLAT_CHECK_CHUNK = 1 << 20
RELEASE_EVERY_BYTES = 64 << 20
"""Blob bytes read (splat checks, writers) between two `release_mapped_pages`."""
"""Elements compared per step when looking for a splat (bounded temporary memory)."""


@dataclass(frozen=True, slots=True)
class ResourceBlob:
    """One `dense_resource` blob: its key in `dialect_resources`, the bytes, their alignment,
    and the attribute that holds it (the bytecode writer swaps it for a placeholder)."""

    name: str
    data: memoryview
    alignment: int
    attribute: mlir_ir.Attribute | None = None


@dataclass(slots=True)
class ResourceTable:
    """The blobs of one lowered module, in creation order; keeps their buffers alive.

    Owned by the LoweredModule: MLIR's blobs point into these buffers.
    """

    blobs: list[ResourceBlob] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)
    _unreleased: int = 0

    def unique_name(self, base: str) -> str:
        """`base` made a bare MLIR keyword (letters, digits, `_`, `.`) and unique in this table."""
        name = re.sub(r"[^A-Za-z0-9_.]", "_", base) or "blob"
        if not (name[0].isalpha() or name[0] == "_"):
            name = "_" + name
        candidate, suffix = name, 0
        while candidate in self._names:
            suffix += 1
            candidate = f"{name}_{suffix}"
        self._names.add(candidate)
        return candidate

    def add(self, base: str, data: memoryview, alignment: int, type_: mlir_ir.Type) -> mlir_ir.Attribute:
        name = self.unique_name(base)
        attribute = mlir_ir.DenseResourceElementsAttr.get_from_buffer(
            data, name, type_, alignment=alignment
        )
        # NOTE: get_from_buffer may rename on a collision inside the context; ours are unique
        # in a fresh context, so the name we record is the name MLIR prints.
        self.blobs.append(ResourceBlob(name, data, alignment, attribute))
        self._unreleased += data.nbytes  # the splat check may have read all of it
        if self._unreleased >= RELEASE_EVERY_BYTES:
            self.release_mapped_pages()
        return attribute

    def mapped_read_only(self) -> list[mmap.mmap]:
        """The distinct read-only file mappings the blobs' buffers live in."""
        return read_only_mappings([blob.data for blob in self.blobs])

    def release_mapped_pages(self, mappings: list[mmap.mmap] | None = None) -> None:
        """Drop this process's resident pages of the blobs' read-only file mappings
        (`release_pages`)."""
        self._unreleased = 0
        release_pages(self.mapped_read_only() if mappings is None else mappings)

    @property
    def total_bytes(self) -> int:
        return sum(blob.data.nbytes for blob in self.blobs)


def read_only_mappings(buffers: list[memoryview]) -> list[mmap.mmap]:
    """The distinct read-only file mappings that `buffers` are views of."""
    found: dict[int, mmap.mmap] = {}
    for data in buffers:
        owner = data.obj
        if isinstance(owner, mmap.mmap) and id(owner) not in found and not owner.closed:
            with memoryview(owner) as whole:
                if whole.readonly:  # ACCESS_READ: shared, never privately modified
                    found[id(owner)] = owner
    return list(found.values())


def release_pages(mappings: list[mmap.mmap]) -> None:
    """Drop this process's resident pages of read-only file mappings.

    Memory then stays bounded by what is read between two calls, not by the weights: the
    pages stay in the page cache, and a later read maps them again (MADV_DONTNEED on a
    read-only shared file mapping loses nothing). Writable or private mappings, whose pages
    may hold changes, and ordinary memory are never passed here.
    """
    if not hasattr(mmap, "MADV_DONTNEED"):
        return
    for mapping in mappings:
        mapping.madvise(mmap.MADV_DONTNEED)


def _signless(value: int, bits: int) -> int:
    """An integer as the signed two's-complement number with the same low `bits` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def scalar_attr(scalar: ScalarType, literal: bool | int | float) -> mlir_ir.Attribute:
    """A typed IntegerAttr/FloatAttr holding one literal (unsigned values wrap to signless)."""
    mlir_type = lower_scalar_type(scalar)
    if scalar is ScalarType.F4E2M1FN:  # stored as its 4-bit code in an i8 (see types.py)
        return mlir_ir.IntegerAttr.get(
            mlir_type, int(sub_byte_codes(pack_elements_f4(literal), scalar, 1)[0])
        )
    if scalar.is_float:
        return mlir_ir.FloatAttr.get(mlir_type, float(literal))
    if scalar.is_sub_byte:
        return mlir_ir.IntegerAttr.get(mlir_type, int(literal))  # the value itself, in an i8
    bits = 1 if scalar.is_bool else scalar.bit_width
    value = int(bool(literal)) if scalar.is_bool else int(literal)
    return mlir_ir.IntegerAttr.get(mlir_type, _signless(value, bits) if bits > 1 else value)


_UNPACK = {
    ScalarType.F16: "<e",
    ScalarType.F32: "<f",
    ScalarType.F64: "<d",
}


def pack_elements_f4(value: float) -> bytes:
    """One FP4 value as its packed byte (round to nearest even, saturating, as ml_dtypes)."""
    import ml_dtypes

    return (
        np.array([value], dtype=np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8).tobytes()
    )


def sub_byte_codes(data: memoryview | bytes, scalar: ScalarType, count: int) -> np.ndarray:
    """A packed sub-byte buffer (ONNX's layout: first element in the low bits) unpacked to one
    int8 an element: the value for I4/I2 (sign-extended) and U4/U2, the code for FP4."""
    bits = scalar.bit_width
    per_byte = 8 // bits
    packed = np.frombuffer(data, dtype=np.uint8)
    shifts = (np.arange(per_byte, dtype=np.uint8) * bits).astype(np.uint8)
    codes = ((packed[:, None] >> shifts[None, :]) & np.uint8((1 << bits) - 1)).reshape(-1)[:count]
    if scalar.is_signed_integer:
        sign = np.uint8(1 << (bits - 1))
        return ((codes ^ sign).astype(np.int8) - np.int8(sign)).astype(np.int8)
    return codes.astype(np.int8)


def _decode_element(scalar: ScalarType, raw: bytes) -> bool | int | float:
    """One packed little-endian element as a Python number (for a splat attribute)."""
    if scalar.is_narrow_float and not scalar.is_sub_byte:
        import ml_dtypes  # noqa: F401  (registers the FP8 dtypes)

        return float(np.frombuffer(raw, dtype=np.dtype(scalar.numpy_name))[0])
    if scalar.is_bool:
        return raw != b"\x00"
    if scalar.is_integer:
        return int.from_bytes(raw, "little", signed=True)
    if scalar is ScalarType.BF16:
        return struct.unpack("<f", b"\x00\x00" + raw)[0]
    return struct.unpack(_UNPACK[scalar], raw)[0]


def _is_splat(data: memoryview, width: int) -> bool:
    """Whether every `width`-byte element equals the first.

    Chunks grow from 64 elements to `_SPLAT_CHECK_CHUNK`: real weights differ within the first
    few elements, so the common answer costs microseconds and touches one page of the weight
    (a fixed 1M-element first chunk cost ~3 ms per weight, 0.14 s on a 400 MB model).
    """
    if data[:width] != data[width : 2 * width]:
        return False  # NOTE: most weights differ at their second element: no numpy (10x faster)
    elements = np.frombuffer(data, dtype=np.uint8).reshape(-1, width)
    first = elements[0]
    start, size = 0, 64
    while start < elements.shape[0]:
        if not (elements[start : start + size] == first).all():
            return False
        start += size
        size = min(size * 4, _SPLAT_CHECK_CHUNK)
    return True


def tensor_data_attr(
    tensor: TensorType, literal: NiroLiteral, *, resources: ResourceTable, name: str
) -> mlir_ir.Attribute:
    """The elements attribute of a static tensor: a splat, or a blob named after `name`.

    `literal` is a buffer of packed elements (a scalar literal is accepted as a splat). The
    caller checks the shape is static; the byte count is checked here because a wrong count
    would make MLIR read past the buffer.
    """
    mlir_type = lower_type(tensor)
    element = tensor.element_type
    if not is_buffer(literal):
        return mlir_ir.DenseElementsAttr.get_splat(mlir_type, scalar_attr(element, literal))
    shape = tensor.static_shape
    assert shape is not None, f"tensor_data_attr needs a static shape, got {tensor}"
    count = 1
    for dim in shape:
        count *= dim
    data = as_memoryview(literal)
    if element.is_sub_byte:
        if buffer_nbytes(literal) != element.buffer_size(count):
            raise ValueError(
                f"{tensor} needs {element.buffer_size(count)} bytes of data, got {buffer_nbytes(literal)}"
            )
        # one element a byte, as the sub-byte types lower (types.py)
        data = sub_byte_codes(data, element, count).data.cast("B")
        if count == 0 or count == 1 or _is_splat(data, 1):
            code = int(np.frombuffer(data, dtype=np.int8)[0]) if count else 0
            return mlir_ir.DenseElementsAttr.get_splat(
                mlir_type, mlir_ir.IntegerAttr.get(lower_scalar_type(element), code)
            )
        return resources.add(name, data, 1, mlir_type)
    width = element.byte_width
    if buffer_nbytes(literal) != count * width:
        raise ValueError(
            f"{tensor} needs {count * width} bytes of data, got {buffer_nbytes(literal)}"
        )
    if count == 0:
        return mlir_ir.DenseElementsAttr.get_splat(mlir_type, scalar_attr(element, 0))
    if count == 1 or _is_splat(data, width):
        value = _decode_element(element, bytes(data[:width]))
        return mlir_ir.DenseElementsAttr.get_splat(mlir_type, scalar_attr(element, value))
    if element.is_bool:
        # NOTE: i1 blobs are ambiguous in MLIR (IREE crashes iterating a `dense_resource` of
        # i1), so BOOL tensors become a bit-packed DenseElementsAttr: the numpy view is free and
        # MLIR's packed copy is 1/8 of the buffer.
        flags = np.frombuffer(data, dtype=np.bool_).reshape(shape)
        return mlir_ir.DenseElementsAttr.get(flags, type=lower_scalar_type(element))
    if element in (ScalarType.I32, ScalarType.I64) and len(shape) == 1 and count <= SMALL_VECTOR:
        # NOTE: IREE 3.13 crashes ("ElementsAttr does not provide iteration facilities") when a
        # folder iterates a `dense_resource`: a tensor.extract of a constant shape, as torch's
        # padded TransformerEncoder export made with `--iree-opt-const-eval=false`. Shape
        # vectors, axes and pads (1-D) are written inline: the lowering then reads their
        # elements at compile time (`builders.small_elements`), and a reader sees them.
        values = np.frombuffer(data, dtype=f"<i{width}").reshape(shape)
        return mlir_ir.DenseElementsAttr.get(values, type=lower_scalar_type(element))
    return resources.add(name, data, width, mlir_type)


def generic_attr(value: object, *, resources: ResourceTable, name: str) -> mlir_ir.Attribute:
    """An UnknownOp attribute as an MLIR attribute.

    None -> unit, bool -> BoolAttr, int -> i64, float -> f64, str -> string, buffer -> a
    `dense_resource` of `tensor<Nxi8>` (empty: `dense<> : tensor<0xi8>`), tuple -> array,
    dict -> dictionary. `name` seeds the blob names of buffers.
    """
    if value is None:
        return mlir_ir.UnitAttr.get()
    if isinstance(value, bool):
        return mlir_ir.BoolAttr.get(value)
    if isinstance(value, int):
        if not -(1 << 63) <= value < 1 << 63:
            raise ValueError(f"integer attribute {value} does not fit in i64")
        return mlir_ir.IntegerAttr.get(mlir_ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return mlir_ir.FloatAttr.get(mlir_ir.F64Type.get(), value)
    if isinstance(value, str):
        return mlir_ir.StringAttr.get(value)
    if is_buffer(value):
        data = as_memoryview(value)
        byte_tensor = mlir_ir.RankedTensorType.get([data.nbytes], mlir_ir.IntegerType.get_signless(8))
        if data.nbytes == 0:
            return mlir_ir.DenseElementsAttr.get_splat(
                byte_tensor, mlir_ir.IntegerAttr.get(mlir_ir.IntegerType.get_signless(8), 0)
            )
        return resources.add(name, data, 1, byte_tensor)
    if isinstance(value, tuple):
        return mlir_ir.ArrayAttr.get(
            [
                generic_attr(item, resources=resources, name=f"{name}.{index}")
                for index, item in enumerate(value)
            ]
        )
    if isinstance(value, Mapping):
        return mlir_ir.DictAttr.get(
            {
                key: generic_attr(item, resources=resources, name=f"{name}.{key}")
                for key, item in value.items()
            }
        )
    raise ValueError(f"{type(value).__name__} is not a generic attribute kind")
