"""Sizes, empty tensors and the shape-changing tensor ops (pad, slice, expand, collapse, cast).

A size is "mixed": an int when static, an `index` value when known only at run time
(`tensor_size` builds a `tensor.dim` only for a dynamic dim, so a static lowering builds
nothing extra). `DYNAMIC` is MLIR's `?` in a shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from niro.ir import TensorType, format_type

from ..bindings import arith, linalg, mlir_ir, tensor
from ..types import index_type
from .constants import i64_constant, index_constant

if TYPE_CHECKING:
    from ..context import LoweringRuleContext

__all__ = [
    "DYNAMIC",
    "ranked_result",
    "tensor_type",
    "dim_size",
    "index_value",
    "as_index",
    "as_i64",
    "i64_tensor",
    "tensor_size",
    "tensor_sizes",
    "empty",
    "empty_like",
    "empty_tensor",
    "reassociation",
    "expand_shape",
    "expand_dim",
    "collapse_dims",
    "pad",
    "crop",
    "extract_slice",
    "cast_to",
    "producer",
]

DYNAMIC = mlir_ir.ShapedType.get_dynamic_size()
"""MLIR's marker of a dynamic size in a shape (`?`)."""


def tensor_type(sizes: Sequence[int | mlir_ir.Value], element: mlir_ir.Type) -> mlir_ir.RankedTensorType:
    """The ranked tensor type of mixed `sizes` (an index value is a dynamic `?` dim)."""
    shape = [size if isinstance(size, int) else DYNAMIC for size in sizes]
    return mlir_ir.RankedTensorType.get(shape, element)


def index_value(size: int | mlir_ir.Value) -> mlir_ir.Value:
    """A mixed size (or position) as a value: an int becomes an index constant, a value stays
    as it is (`indexing`'s arithmetic takes i64 values too; `as_index` casts them)."""
    return index_constant(size) if isinstance(size, int) else size


def as_index(size: int | mlir_ir.Value) -> mlir_ir.Value:
    """A mixed size (or position) as an index value: an int becomes an index constant, an
    integer value is cast (signed) to index, an index value stays."""
    if isinstance(size, int):
        return index_constant(size)
    if isinstance(size.type, mlir_ir.IndexType):
        return size
    return arith.IndexCastOp(index_type(), size).result


def as_i64(size: int | mlir_ir.Value) -> mlir_ir.Value:
    """A mixed size (or position) as an i64 value, ONNX's integer of shapes and indices: an int
    becomes an i64 constant, an index value is cast (signed) to i64, an i64 value stays."""
    if isinstance(size, int):
        return i64_constant(size)
    if isinstance(size.type, mlir_ir.IndexType):
        return arith.IndexCastOp(mlir_ir.IntegerType.get_signless(64), size).result
    return size


def i64_tensor(sizes: Sequence[int | mlir_ir.Value], type_: mlir_ir.Type) -> mlir_ir.Value:
    """Mixed sizes as the i64 tensor `type_` (1-D, or 0-d for one size): ONNX's shape tensor.
    All static: one dense constant; else `tensor.from_elements` of their i64 values."""
    if all(isinstance(size, int) for size in sizes):
        if not sizes:
            return tensor.EmptyOp([0], mlir_ir.IntegerType.get_signless(64)).result
        array = np.asarray(sizes, dtype=np.int64).reshape(mlir_ir.RankedTensorType(type_).shape)
        return arith.ConstantOp(type_, mlir_ir.DenseElementsAttr.get(array, type=type_)).result
    return tensor.FromElementsOp(type_, [as_i64(size) for size in sizes]).result


def dim_size(value: mlir_ir.Value, axis: int) -> mlir_ir.Value:
    """`tensor.dim` of a ranked tensor value, as an index (also for a static dim)."""
    return tensor.DimOp(value, index_constant(axis)).result


def tensor_size(value: mlir_ir.Value, axis: int) -> int | mlir_ir.Value:
    """Dim `axis` of a ranked tensor value: its static size, or a `tensor.dim` when dynamic."""
    shaped = mlir_ir.RankedTensorType(value.type)
    if not shaped.is_dynamic_dim(axis):
        return shaped.shape[axis]
    return dim_size(value, axis)


def tensor_sizes(value: mlir_ir.Value) -> list[int | mlir_ir.Value]:
    """Each dim of a ranked tensor value, as `tensor_size` gives it."""
    return [tensor_size(value, axis) for axis in range(mlir_ir.RankedTensorType(value.type).rank)]


def empty(sizes: Sequence[int | mlir_ir.Value], element: mlir_ir.Type) -> mlir_ir.Value:
    """`tensor.empty` of mixed `sizes`."""
    return tensor.EmptyOp(list(sizes), element).result


def ranked_result(ctx: LoweringRuleContext, index: int = 0) -> mlir_ir.RankedTensorType:
    """The MLIR type of result `index`, refused clearly when it is not a ranked tensor (e.g.
    ONNX shape inference could not find its rank)."""
    ctx.ranked(ctx.niro_results[index], f"result #{index}")
    return mlir_ir.RankedTensorType(ctx.result_types[index])


def empty_tensor(
    ctx: LoweringRuleContext, result: TensorType, sizes: Sequence[mlir_ir.Value | None]
) -> mlir_ir.Value:
    """`tensor.empty` of the Niro type `result`; `sizes[i]` is the index value of dynamic dim i
    (else None). A dynamic dim without a size is refused, naming the op."""
    if result.shape is None:
        raise ctx.error(f"needs a ranked result, got {format_type(result)}")
    dynamic: list[mlir_ir.Value] = []
    for dim, size in zip(result.shape, sizes, strict=True):
        if dim is not None:
            continue
        if size is None:
            raise ctx.error(f"cannot find the size of a dynamic dim of {format_type(result)}")
        dynamic.append(size)
    # NOTE: the generic builder with the memoised result type: the `tensor.EmptyOp` wrapper
    # rebuilds the type from mixed sizes on every call (3x the time; same op).
    return mlir_ir.Operation.create(
        "tensor.empty", results=[ctx.mlir_type(result)], operands=dynamic
    ).result


def empty_like(value: mlir_ir.Value, element: mlir_ir.Type | None = None) -> mlir_ir.Value:
    """`tensor.empty` of `value`'s shape (its dynamic dims from `tensor.dim`), of `element` or
    `value`'s own element type."""
    element = mlir_ir.RankedTensorType(value.type).element_type if element is None else element
    return empty(tensor_sizes(value), element)


def reassociation(groups: Sequence[Sequence[int]]) -> mlir_ir.ArrayAttr:
    """The `reassociation` attribute of tensor.expand_shape / collapse_shape: which dims of the
    larger-rank side each dim of the other side groups."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    return mlir_ir.ArrayAttr.get(
        [mlir_ir.ArrayAttr.get([mlir_ir.IntegerAttr.get(i64, axis) for axis in group]) for group in groups]
    )


def expand_shape(
    value: mlir_ir.Value,
    result: mlir_ir.RankedTensorType,
    groups: Sequence[Sequence[int]],
    dynamic: Sequence[mlir_ir.Value],
) -> mlir_ir.Value:
    """`tensor.expand_shape` of `value` into `result`: each dim of `value` splits into the result
    dims of its group; `dynamic` holds the index sizes of the result's dynamic dims, in order.
    Every expand_shape niroc builds goes through here.

    NOTE: IREE (3.13) miscompiles a `tensor.from_elements` of rank 2 or more, which is what it
    folds `expand_shape(from_elements)` into: its elements are written past the buffer, and
    iree-compile stops ("'stream.async.fill' op has invalid Write access range [32 to 56 for
    24] of resource with size 48"): 6 elements into 3x2, 6x1 or 1x6, 3 into 1x3 alike (only 1x1
    and, by chance, 2x1 compile). torchvision's image transform reshapes its pad vector, a
    Concat joined on the host, to 3x2 before a Pad, and every detection model failed to
    compile; an Unsqueeze of a shape vector into a row did too. Such a vector is read into
    the result element by element (`_read_by_position`), which keeps it 1-D."""
    if _built_on_host(value) and result.has_static_shape and math.prod(result.shape) > 1:
        return _read_by_position(value, result)
    shape = [DYNAMIC if result.is_dynamic_dim(axis) else size for axis, size in enumerate(result.shape)]
    return tensor.ExpandShapeOp(result, value, reassociation(groups), list(dynamic), shape).result


def producer(value: mlir_ir.Value) -> mlir_ir.Operation | mlir_ir.OpView | None:
    """The op that defines `value`; None for a block argument."""
    owner = value.owner
    return owner if isinstance(owner, (mlir_ir.Operation, mlir_ir.OpView)) else None


def _built_on_host(value: mlir_ir.Value) -> bool:
    """Whether `value` is a vector joined from scalars (`tensor.from_elements`, as Concat builds
    shape vectors); a block argument is not."""
    owner = producer(value)
    return owner is not None and owner.name == "tensor.from_elements"


def _read_by_position(value: mlir_ir.Value, result: mlir_ir.RankedTensorType) -> mlir_ir.Value:
    """The static 1-D `value` as `result` (same element count), each element read at its
    row-major position by a `linalg.generic`."""
    # NOTE: imported here: `structured` builds on this module's `empty`.
    from .structured import generic

    rank = result.rank
    strides = [math.prod(result.shape[axis + 1 :]) for axis in range(rank)]

    def body(_arguments: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        position = index_constant(0)
        for axis, stride in enumerate(strides):
            index = linalg.IndexOp(axis).result
            scaled = arith.MulIOp(index, index_constant(stride)).result
            position = arith.AddIOp(position, scaled).result
        return [tensor.ExtractOp(value, [position]).result]

    init = empty(list(result.shape), result.element_type)
    return generic([], [(init, list(range(rank)))], rank, (), body)[0]


def expand_dim(value: mlir_ir.Value, axis: int, sizes: Sequence[int | mlir_ir.Value]) -> mlir_ir.Value:
    """Split dim `axis` of `value` into `sizes` (tensor.expand_shape); a size may be an index
    value (a run-time size: `axis` is then dynamic), and the other dims may be dynamic (their
    sizes are passed on from `tensor.dim`)."""
    source = mlir_ir.RankedTensorType(value.type)
    shape = list(source.shape)
    split = [size if isinstance(size, int) else DYNAMIC for size in sizes]
    new_shape = shape[:axis] + split + shape[axis + 1 :]
    groups, position = [], 0
    for index in range(len(shape)):
        width = len(sizes) if index == axis else 1
        groups.append(list(range(position, position + width)))
        position += width
    result = mlir_ir.RankedTensorType.get(new_shape, source.element_type)
    dynamic: list[mlir_ir.Value] = []
    for index, size in enumerate(shape):
        if index == axis:
            dynamic += [part for part in sizes if not isinstance(part, int)]
        elif size == DYNAMIC:
            dynamic.append(tensor_size(value, index))
    return expand_shape(value, result, groups, dynamic)


def collapse_dims(value: mlir_ir.Value, first: int, count: int) -> mlir_ir.Value:
    """Merge `count` static dims of `value` starting at `first` (tensor.collapse_shape); the
    other dims may be dynamic."""
    source = mlir_ir.RankedTensorType(value.type)
    shape = list(source.shape)
    group = shape[first : first + count]
    merged = DYNAMIC if DYNAMIC in group else math.prod(group)
    new_shape = shape[:first] + [merged] + shape[first + count :]
    groups = [[index] for index in range(first)]
    groups.append(list(range(first, first + count)))
    groups += [[index] for index in range(first + count, len(shape))]
    result = mlir_ir.RankedTensorType.get(new_shape, source.element_type)
    return tensor.CollapseShapeOp(result, value, reassociation(groups)).result


def pad(
    value: mlir_ir.Value,
    low: Sequence[int | mlir_ir.Value],
    high: Sequence[int | mlir_ir.Value],
    padding: mlir_ir.Value,
) -> mlir_ir.Value:
    """`tensor.pad` of a tensor with a scalar `padding` (no-op when all 0); a dynamic dim stays
    dynamic (it may be padded too: the result size is then computed by MLIR). A `low`/`high`
    amount may be an index value (a pad computed at run time); its dim becomes dynamic."""
    dynamic_low = [amount for amount in low if not isinstance(amount, int)]
    dynamic_high = [amount for amount in high if not isinstance(amount, int)]
    if not dynamic_low and not dynamic_high and not any(low) and not any(high):
        return value
    source = mlir_ir.RankedTensorType(value.type)
    shape = [
        DYNAMIC
        if size == DYNAMIC or not isinstance(lo, int) or not isinstance(hi, int)
        else size + lo + hi
        for size, lo, hi in zip(source.shape, low, high, strict=True)
    ]
    result = mlir_ir.RankedTensorType.get(shape, source.element_type)

    def static(amounts: Sequence[int | mlir_ir.Value]) -> list[int]:
        return [amount if isinstance(amount, int) else DYNAMIC for amount in amounts]

    pad_op = tensor.PadOp(result, value, dynamic_low, dynamic_high, static(low), static(high))
    block = pad_op.regions[0].blocks.append(*([index_type()] * len(shape)))
    with mlir_ir.InsertionPoint(block):
        tensor.YieldOp(padding)
    return pad_op.result


def crop(value: mlir_ir.Value, sizes: Sequence[int | mlir_ir.Value]) -> mlir_ir.Value:
    """The leading `sizes` of every axis of a tensor (no-op when already that shape); a `sizes`
    entry of DYNAMIC keeps the whole (dynamic) axis, an index value cuts it at run time."""
    source = mlir_ir.RankedTensorType(value.type)
    if list(source.shape) == list(sizes):
        return value
    return extract_slice(value, [0] * len(sizes), sizes)


def extract_slice(
    value: mlir_ir.Value,
    offsets: Sequence[int],
    sizes: Sequence[int | mlir_ir.Value],
    strides: Sequence[int] | None = None,
) -> mlir_ir.Value:
    """`tensor.extract_slice` of static `offsets`, `sizes` and `strides` (default unit); a size
    of DYNAMIC takes the whole of a dynamic axis (its offset must be 0, its stride 1), its size
    from `tensor.dim`; an index value is a size computed at run time."""
    source = mlir_ir.RankedTensorType(value.type)
    static = [DYNAMIC if isinstance(size, mlir_ir.Value) else size for size in sizes]
    result = mlir_ir.RankedTensorType.get(static, source.element_type)
    dynamic = [
        size if isinstance(size, mlir_ir.Value) else tensor_size(value, axis)
        for axis, size in enumerate(sizes)
        if isinstance(size, mlir_ir.Value) or size == DYNAMIC
    ]
    return tensor.ExtractSliceOp(
        result, value, [], dynamic, [], list(offsets), static, list(strides or [1] * len(sizes))
    ).result


def cast_to(value: mlir_ir.Value, type_: mlir_ir.Type) -> mlir_ir.Value:
    """`value` as `type_` (a `tensor.cast` between compatible shapes) when the types differ."""
    if value.type == type_:
        return value
    return tensor.CastOp(type_, value).result
