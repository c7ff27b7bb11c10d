"""Element types and scalars: where to accumulate, float conversions, reading small integer
tensors as scalars (ONNX inputs such as `axes` that are graph inputs, shape vectors)."""

from __future__ import annotations

from niro.ir import ScalarType

from ..bindings import arith, mlir_ir, tensor
from ..types import lower_scalar_type
from .constants import constant, index_constant

__all__ = [
    "is_float",
    "accumulator_type",
    "convert",
    "element_scalars",
    "read_int_scalars",
    "small_element_sources",
    "small_elements",
]


def is_float(element: mlir_ir.Type) -> bool:
    """Whether an MLIR element type is a float (not an integer, not an index)."""
    return not isinstance(element, (mlir_ir.IntegerType, mlir_ir.IndexType))


def accumulator_type(scalar: ScalarType) -> mlir_ir.Type:
    """Where to accumulate sums of `scalar`: f32 for f16/bf16 (precision), else the type."""
    if scalar in (ScalarType.F16, ScalarType.BF16):
        return mlir_ir.F32Type.get()
    return lower_scalar_type(scalar)


def convert(value: mlir_ir.Value, target: mlir_ir.Type) -> mlir_ir.Value:
    """Float widening/narrowing between float types (identity when the types agree). An f32
    narrowed to bf16 is rounded first (`_bf16_rounded`), so that the rounding survives IREE."""
    source = value.type
    if source == target:
        return value
    if mlir_ir.FloatType(source).width < mlir_ir.FloatType(target).width:
        return arith.ExtFOp(target, value).result
    if isinstance(source, mlir_ir.F32Type) and isinstance(target, mlir_ir.BF16Type):
        value = _bf16_rounded(value)
    return arith.TruncFOp(target, value).result


def _bf16_rounded(value: mlir_ir.Value) -> mlir_ir.Value:
    """An f32 scalar rounded to the nearest bf16 (ties to even), still as an f32, by integer
    arithmetic on its bits; NaN kept. The `arith.truncf` after it is then exact.

    NOTE: IREE 3.13's CPU codegen (iree-convert-bf16-arith-to-f32) deletes an
    `arith.truncf` f32 -> bf16 whose result an `arith.extf` widens again in the same dispatch:
    the value is never rounded. That happens wherever a bf16 result is read by an op computed
    in f32 and IREE fuses the two (a bf16 LayerNormalization before its f32 MatMul), and the
    output then differs from onnxruntime's by many ulps. Integer ops are not touched by it.
    Test: test_bf16_rounding_inside_a_dispatch in tests/backends/mlir/test_element_types.py."""
    i32 = mlir_ir.IntegerType.get_signless(32)
    bits = arith.BitcastOp(i32, value).result
    lowest_kept = arith.AndIOp(
        arith.ShRUIOp(bits, constant(i32, 16)).result, constant(i32, 1)
    ).result
    bias = arith.AddIOp(constant(i32, 0x7FFF), lowest_kept).result
    kept = arith.AndIOp(arith.AddIOp(bits, bias).result, constant(i32, 0xFFFF0000)).result
    rounded = arith.BitcastOp(value.type, kept).result
    is_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
    return arith.SelectOp(is_nan, value, rounded).result


def read_int_scalars(value: mlir_ir.Value, count: int) -> list[mlir_ir.Value]:
    """The `count` elements of a rank-0 or rank-1 integer tensor, as i64 scalars (sign-extended)."""
    shaped = mlir_ir.RankedTensorType(value.type)
    i64 = mlir_ir.IntegerType.get_signless(64)
    small = small_elements(value)
    scalars = []
    for position in range(count):
        if small is not None:
            element = small[position]
        else:
            indices = [] if shaped.rank == 0 else [index_constant(position)]
            element = tensor.ExtractOp(value, indices).result
        if mlir_ir.IntegerType(element.type).width < 64:
            element = arith.ExtSIOp(i64, element).result
        scalars.append(element)
    return scalars


SMALL_VECTOR = 16  # elements: shape vectors, axes, the operands of shape arithmetic


def small_elements(
    value: mlir_ir.Value, known=None, *, on_host: bool = False
) -> list[mlir_ir.Value] | None:
    """The elements of a static integer tensor of rank <= 1 with at most SMALL_VECTOR elements,
    as scalars read through the `tensor.from_elements`, reshapes, slices and constants that
    made it (`known`: its contents when the caller knows them at compile time, e.g.
    `ctx.constant_operand`, for initializers); None for any other tensor. Any other small
    tensor's elements are read with `tensor.extract` (a read of the device's data), unless
    `on_host`: then None, for a caller that computes on the host only what is there already.

    Why: exporters compute shapes as tensors (Shape, Gather, Unsqueeze, Concat, then Reshape).
    Kept as scalars, that arithmetic stays on IREE's host side; as tensors, each Gather or
    Concat of them is a device dispatch whose result the host then reads back, one wait for
    the device (a submission) each."""
    sources = small_element_sources(value, known, on_host=on_host)
    return None if sources is None else element_scalars(value, sources)


def element_scalars(
    value: mlir_ir.Value, sources: list[mlir_ir.Value | int]
) -> list[mlir_ir.Value]:
    """`small_element_sources(value)` as scalars: each constant made in `value`'s element type."""
    element = mlir_ir.RankedTensorType(value.type).element_type
    return [
        arith.ConstantOp(element, mlir_ir.IntegerAttr.get(element, source)).result
        if isinstance(source, int)
        else source
        for source in sources
    ]


def small_element_sources(
    value: mlir_ir.Value, known=None, *, on_host: bool = False
) -> list[mlir_ir.Value | int] | None:
    """`small_elements` before any op is made: each element an existing scalar or a constant
    (an int), so a caller can see whether every operand has its elements before building
    anything. Only the device read (not `on_host`) makes ops here."""
    try:
        shaped = mlir_ir.RankedTensorType(value.type)
    except ValueError:
        return None
    count = 1 if shaped.rank == 0 else shaped.shape[0] if shaped.rank == 1 else -1
    if (
        not shaped.has_static_shape
        or not 0 <= count <= SMALL_VECTOR
        or not isinstance(shaped.element_type, mlir_ir.IntegerType)
    ):
        return None
    if known is not None:
        return [int(n) for n in known.reshape(-1)]
    owner = value.owner
    name = owner.name if isinstance(owner, (mlir_ir.Operation, mlir_ir.OpView)) else ""
    if name == "tensor.from_elements":
        return list(owner.operands)
    if name in ("tensor.expand_shape", "tensor.collapse_shape"):
        inner = small_element_sources(owner.operands[0], on_host=on_host)
        if inner is not None and len(inner) == count:
            return inner
    if name == "tensor.extract_slice" and len(owner.operands) == 1 and shaped.rank == 1:
        inner = small_element_sources(owner.operands[0], on_host=on_host)
        offset = list(mlir_ir.DenseI64ArrayAttr(owner.attributes["static_offsets"]))
        stride = list(mlir_ir.DenseI64ArrayAttr(owner.attributes["static_strides"]))
        if inner is not None and len(offset) == 1:
            return [inner[offset[0] + position * stride[0]] for position in range(count)]
    if name == "arith.constant" and isinstance(
        owner.attributes["value"], mlir_ir.DenseIntElementsAttr
    ):
        data = mlir_ir.DenseIntElementsAttr(owner.attributes["value"])
        return [data.get_splat_value().value] * count if data.is_splat else list(data)
    if on_host:
        return None
    return [
        tensor.ExtractOp(value, [] if shaped.rank == 0 else [index_constant(position)]).result
        for position in range(count)
    ]
