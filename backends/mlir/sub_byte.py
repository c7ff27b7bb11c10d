"""Sub-byte tensor constants (I4, U4, I2, U2, F4E2M1FN) stored packed, unpacked where loaded.

A Global or Const of a sub-byte type keeps its Niro buffer, ONNX's packing (two or four
elements a byte, the first in the low bits), as a `tensor<Bxi8>` blob of B = its packed bytes:
a 4-bit weight costs half a byte an element in the module, once. Where a GetGlobal or the Const
reads it, one `linalg.generic` unpacks it into the i8-per-element form the sub-byte types lower
to (backends/mlir/types.py): element i is bits [(i mod k) * w, +w) of byte i div k (k elements of
w bits a byte, i the row-major index), sign-extended for I4/I2. Tensors of one element or none
need no unpacking and stay ordinary constants.

BF16 tensor constants of two or more elements are stored the same way, as their 16-bit words
(`tensor<...xi16>`, same shape) and read back by one `arith.bitcast`.
NOTE: IREE 3.13 folds a bf16 `dense_resource` global widened to f32 by itself (what an fp16/bf16
model's f32 compute makes of every bf16 weight, frontends/onnx/half_precision.py) into an
`arith.constant` whose value stays bf16 and whose type is f32, and iree-compile fails ("'arith.
constant' op failed to verify that all of {value, result} have same type"); an i16 blob bitcast
after the load compiles (tests/backends/mlir/test_half_precision_models.py).
"""

from __future__ import annotations

from niro.ir import ScalarType, TensorType

from .bindings import arith, linalg, mlir_ir, tensor
from .builders import constant, generic, index_constant
from .types import lower_type

__all__ = ["is_packed", "packed_type", "unpack"]


def is_packed(type_: object) -> bool:
    """Whether a constant of `type_` is stored in another form (a static sub-byte or BF16 tensor
    of two or more elements)."""
    if not isinstance(type_, TensorType):
        return False
    shape = type_.static_shape
    if shape is None:
        return False
    if not type_.element_type.is_sub_byte and type_.element_type is not ScalarType.BF16:
        return False
    count = 1
    for dim in shape:
        count *= dim
    return count > 1


def packed_type(type_: TensorType) -> TensorType:
    """The `tensor<Bxui8>` holding `type_`'s packed bytes (BF16: the `tensor<...xi16>` of its
    words)."""
    if type_.element_type is ScalarType.BF16:
        return TensorType(ScalarType.I16, type_.shape)
    count = 1
    for dim in _static_shape(type_):
        count *= dim
    return TensorType(ScalarType.U8, (type_.element_type.buffer_size(count),))


def _static_shape(type_: TensorType) -> tuple[int, ...]:
    """The shape of a packed constant's type: static, as `is_packed` requires."""
    shape = type_.static_shape
    assert shape is not None, f"a packed constant has a static shape, got {type_}"
    return shape


def unpack(packed: mlir_ir.Value, type_: TensorType) -> mlir_ir.Value:
    """The packed bytes `packed` (a `tensor<Bxi8>`) as a tensor of `type_`, one element an i8
    (BF16: its words reinterpreted)."""
    if type_.element_type is ScalarType.BF16:
        return arith.BitcastOp(lower_type(type_), packed).result
    shape = list(_static_shape(type_))
    rank = len(shape)
    element = type_.element_type
    bits = element.bit_width
    per_byte = 8 // bits
    i8 = mlir_ir.IntegerType.get_signless(8)
    init = tensor.EmptyOp(shape, i8).result

    def body(arguments: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        def byte(number: int) -> mlir_ir.Value:
            return constant(i8, number)

        linear = index_constant(0)
        stride = 1
        for axis in reversed(range(rank)):
            term = arith.MulIOp(linalg.IndexOp(axis).result, index_constant(stride)).result
            linear = arith.AddIOp(linear, term).result
            stride *= shape[axis]
        position = arith.DivUIOp(linear, index_constant(per_byte)).result
        word = tensor.ExtractOp(packed, [position]).result
        slot = arith.RemUIOp(linear, index_constant(per_byte)).result
        shift = arith.MulIOp(
            arith.IndexCastOp(i8, slot).result, byte(bits)
        ).result  # 0, w, 2w...: an i8 shift
        code = arith.AndIOp(arith.ShRUIOp(word, shift).result, byte((1 << bits) - 1)).result
        if element.is_signed_integer:
            spare = byte(8 - bits)
            code = arith.ShRSIOp(arith.ShLIOp(code, spare).result, spare).result
        return [code]

    return generic([], [(init, list(range(rank)))], rank, (), body)[0]
