"""Index arithmetic and the gather-form `linalg.generic` the ONNX shape ops are built from.

Most data-movement ops (Slice with steps, Tile, Pad in edge/reflect/wrap mode, DepthToSpace,
Gather and friends) have one honest form in upstream dialects: a `linalg.generic` over the
*result* whose body computes, from the result position (`linalg.index`), the source position and
reads it with `tensor.extract`. `gather_generic` builds that; the small helpers here spell the
index arithmetic (`arith` on `index` values) so each op reads like its ONNX definition.

Also here: reading ONNX inputs that must be compile-time constants (axes, pads, starts...), and
the reshape helpers (`collapse`, `expand`, `reshape`) shared by Reshape, Flatten, Squeeze and
Unsqueeze.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from niro.ir import ScalarType, TensorType, Value, format_type, op_name, static_element_count

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    as_index,
    assert_true,
    cast_to,
    dim_size,
    empty_tensor,
    expand_shape,
    generic,
    index_constant,
    index_value,
    reassociation,
)
from ..context import LoweringRuleContext
from ..types import RankedTensorType, index_type, lower_scalar_type, lower_type
from .common import input_index

__all__ = [
    "constant_input",
    "required_constant",
    "to_index",
    "from_index",
    "add",
    "sub",
    "mul",
    "floordiv",
    "mod",
    "clamp",
    "data_size",
    "cmp",
    "select",
    "gather_generic",
    "collapse",
    "expand",
    "reshape",
    "unit_groups",
    "scalar_input",
]

UNSIGNED = frozenset({ScalarType.U8, ScalarType.U16, ScalarType.U32, ScalarType.U64})


# -- constant inputs ----------------------------------------------------------------------------


def constant_input(ctx: LoweringRuleContext, position: int) -> np.ndarray | None:
    """ONNX input `position` as a numpy array when it is a compile-time constant, else None
    (also None when the input is absent)."""
    index = input_index(ctx, position)
    if index is None:
        return None
    return ctx.constant_operand(index)


def required_constant(ctx: LoweringRuleContext, position: int, what: str) -> np.ndarray:
    """ONNX input `position` as a numpy array; a clear refusal when it is computed at run time."""
    value = constant_input(ctx, position)
    if value is None:
        raise ctx.error(
            f"needs its '{what}' input (input #{position}) to be a compile-time constant "
            "(a Constant or an initializer); it is computed at run time"
        )
    return value


# -- index arithmetic ---------------------------------------------------------------------------


def add(a: mlir_ir.Value | int, b: mlir_ir.Value | int) -> mlir_ir.Value:
    return arith.AddIOp(index_value(a), index_value(b)).result


def sub(a: mlir_ir.Value | int, b: mlir_ir.Value | int) -> mlir_ir.Value:
    return arith.SubIOp(index_value(a), index_value(b)).result


def mul(a: mlir_ir.Value | int, b: mlir_ir.Value | int) -> mlir_ir.Value:
    return arith.MulIOp(index_value(a), index_value(b)).result


def floordiv(a: mlir_ir.Value | int, b: mlir_ir.Value | int) -> mlir_ir.Value:
    return arith.FloorDivSIOp(index_value(a), index_value(b)).result


def mod(a: mlir_ir.Value | int, b: mlir_ir.Value | int) -> mlir_ir.Value:
    """`a mod b` with the sign of `b` (Python's %), for wrapping indices."""
    return sub(a, mul(floordiv(a, b), b))


def cmp(predicate: str, a: mlir_ir.Value | int, b: mlir_ir.Value | int) -> mlir_ir.Value:
    """`arith.cmpi` with a predicate name (`slt`, `eq`, ...) on two index or integer values."""
    return arith.CmpIOp(getattr(arith.CmpIPredicate, predicate), index_value(a), index_value(b)).result


def select(
    condition: mlir_ir.Value, true_value: mlir_ir.Value | int, false_value: mlir_ir.Value | int
) -> mlir_ir.Value:
    return arith.SelectOp(condition, index_value(true_value), index_value(false_value)).result


def clamp(value: mlir_ir.Value, low: mlir_ir.Value | int, high: mlir_ir.Value | int) -> mlir_ir.Value:
    """`min(max(value, low), high)` on index values (signed)."""
    return arith.MinSIOp(arith.MaxSIOp(value, index_value(low)).result, index_value(high)).result


def data_size(size: mlir_ir.Value, high: mlir_ir.Value | int | None = None) -> mlir_ir.Value:
    """A result size read from an input's data (an `index`: an element of a shape input, a
    run-time depth or K) as the size the result is built with: `max(size, 0)`, and
    `min(.., high)` when the op bounds it (K <= the axis length). Every such size goes through
    here: the clamp is a no-op on a valid size, but it is what IREE needs. IREE (3.13) clones
    `arith.index_cast` and `tensor.extract` into each dispatch that uses a size, so a bare
    `index_cast(extract(t))` size is recomputed inside the dispatch from a tensor read instead
    of being passed in as its workload; where the dispatch is not one IREE recognises as having
    a data-dependent shape (e.g. a ConstantOfShape fill copied into a Concat) compilation then
    fails with "failed to resolve workgroup count hint in terms of workload ordinals".
    `arith.maxsi`/`arith.minsi` are not cloned, so the size stays a host value (onnx.Loop's
    trip count is clamped the same way, by its row bound)."""
    bounded = arith.MaxSIOp(size, index_constant(0)).result
    return bounded if high is None else arith.MinSIOp(bounded, index_value(high)).result


def to_index(value: mlir_ir.Value, element: ScalarType) -> mlir_ir.Value:
    """An integer (or float, truncated toward zero) element as an `index` (unsigned kept)."""
    if element in (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64):
        value = arith.FPToSIOp(mlir_ir.IntegerType.get_signless(64), value).result
        return as_index(value)
    if element is ScalarType.BOOL:
        return arith.IndexCastUIOp(index_type(), value).result
    if element in UNSIGNED:
        return arith.IndexCastUIOp(index_type(), value).result
    return as_index(value)


def from_index(value: mlir_ir.Value, element: ScalarType) -> mlir_ir.Value:
    """An `index` as an integer element of `element`'s width."""
    return arith.IndexCastOp(lower_scalar_type(element), value).result


def scalar_input(ctx: LoweringRuleContext, value: mlir_ir.Value, niro: Value) -> mlir_ir.Value:
    """The single element of a 0-d or one-element tensor operand (or the scalar itself)."""
    type_ = niro.type
    if not isinstance(type_, TensorType):
        return value
    if type_.shape is None or any(dim != 1 for dim in type_.shape):
        raise ctx.error(f"expected a scalar or one-element tensor, got {format_type(type_)}")
    return tensor.ExtractOp(value, [index_constant(0) for _ in type_.shape]).result


def scalar_reader(ctx: LoweringRuleContext, value: mlir_ir.Value, niro: Value) -> Callable[[], mlir_ir.Value]:
    """Like `scalar_input`, but the `tensor.extract` is built when the returned function is
    called: inside a `linalg.generic` body. IREE's host-side VM has no f16/bf16/i8/i16 scalars,
    so a data-typed scalar must be read inside the dispatch, not before it."""
    type_ = niro.type
    if not isinstance(type_, TensorType):
        return lambda: value
    if type_.shape is None or any(dim != 1 for dim in type_.shape):
        raise ctx.error(f"expected a scalar or one-element tensor, got {format_type(type_)}")
    rank = len(type_.shape)
    return lambda: tensor.ExtractOp(value, [index_constant(0) for _ in range(rank)]).result


__all__.append("scalar_reader")

HOST_SCALARS = frozenset(
    {ScalarType.I32, ScalarType.I64, ScalarType.U32, ScalarType.U64, ScalarType.F32, ScalarType.F64}
)
"""Element types IREE's host VM holds as scalars (a `tensor.extract` outside a dispatch)."""

__all__.append("HOST_SCALARS")


# -- the gather-form generic --------------------------------------------------------------------


def gather_generic(
    ctx: LoweringRuleContext,
    result: RankedTensorType,
    sizes: Sequence[mlir_ir.Value | None],
    body: Callable[[list[mlir_ir.Value], list[mlir_ir.Value]], mlir_ir.Value],
    inputs: Sequence[tuple[mlir_ir.Value, mlir_ir.AffineMap, ScalarType]] = (),
    reduction_dims: int = 0,
    init: mlir_ir.Value | None = None,
) -> mlir_ir.Value:
    """A `linalg.generic` writing every element of `result`: `body(indices, elements)` gets the
    result position as `index` values (`linalg.index`) and the elements of `inputs` (each read
    through its affine map) and returns the element.

    With `reduction_dims` > 0 the iteration space has that many extra trailing reduction dims
    (their sizes come from the inputs' maps), `body` also gets the running value as the last
    element and `init` (default: an empty tensor) seeds it.
    """
    rank = len(result.shape)
    total = rank + reduction_dims
    if init is None:
        init = empty_tensor(ctx, result, sizes)

    def gather(arguments: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        indices = [linalg.IndexOp(axis).result for axis in range(total)]
        elements = arguments if reduction_dims else arguments[: len(inputs)]
        return [body(indices, elements)]

    return generic(
        [(value, list(map_.results)) for value, map_, _ in inputs],
        [(init, list(range(rank)))],
        total,
        range(rank, total),
        gather,
    )[0]


def projection(total: int, dims: Sequence[int]) -> mlir_ir.AffineMap:
    """The affine map `(d0..d{total-1}) -> (d{dims[0]}, ...)`."""
    return mlir_ir.AffineMap.get(total, 0, [mlir_ir.AffineDimExpr.get(dim) for dim in dims])


__all__.append("projection")


# -- casts and reshapes -------------------------------------------------------------------------


def collapse(value: mlir_ir.Value, target: RankedTensorType, groups: Sequence[Sequence[int]]) -> mlir_ir.Value:
    """`tensor.collapse_shape` of `value` into `target` (each target dim is one group)."""
    return tensor.CollapseShapeOp(lower_type(target), value, reassociation(groups)).result


def expand(
    value: mlir_ir.Value,
    target: RankedTensorType,
    groups: Sequence[Sequence[int]],
    sizes: Sequence[mlir_ir.Value | None],
) -> mlir_ir.Value:
    """`tensor.expand_shape` of `value` into `target`; `sizes[i]` is the index value of dynamic
    target dim i."""
    dynamic = [size for dim, size in zip(target.shape, sizes, strict=True) if dim is None]
    if any(size is None for size in dynamic):
        raise ValueError(f"expand_shape to {format_type(target)} needs every dynamic size")
    return expand_shape(value, lower_type(target), groups, dynamic)


def _reshape_to_vector(
    ctx: LoweringRuleContext,
    value: mlir_ir.Value,
    source: RankedTensorType,
    target: RankedTensorType,
    sizes: Sequence[mlir_ir.Value | None],
) -> mlir_ir.Value:
    """A dynamic reshape into rank 1 (or 0) as a collapse of every dim (+ `tensor.cast`).

    NOTE: iree-compile rejects a `tensor.reshape` whose shape tensor has one element (its
    tensor<1xindex> shape is put inside a dispatch: "index types must not cross the dispatch
    boundary"), so flattening a dynamic tensor, as PyTorch's `x.reshape(-1)` and boolean-mask
    indexing export, goes this way. The requested size, when known, is checked at run time."""
    element = source.element_type
    rank = len(source.shape)
    count = static_element_count(source) if source.is_static else None
    flat = value
    if rank == 0:
        flat = expand(value, RankedTensorType(element, (1,)), [], [None])
        count = 1
    elif rank > 1:
        flat = collapse(value, RankedTensorType(element, (count,)), [list(range(rank))])
    where = f"{ctx.niro_location}: '{op_name(ctx.op)}' op"
    if not target.shape:  # a dynamic source of one element
        assert_true(
            arith.CmpIOp(arith.CmpIPredicate.eq, dim_size(flat, 0), index_constant(1)).result,
            f"{where}: a scalar result needs one element",
        )
        one = cast_to(flat, lower_type(RankedTensorType(element, (1,))))
        return collapse(one, target, [])
    wanted = sizes[0] if target.shape[0] is None else index_constant(target.shape[0])
    if wanted is not None and (count is None or target.shape[0] is None):
        assert_true(
            arith.CmpIOp(arith.CmpIPredicate.eq, dim_size(flat, 0), wanted).result,
            f"{where}: the requested size differs from the element count",
        )
    return cast_to(flat, lower_type(target))


def unit_groups(rank: int, unit_axes: Sequence[int]) -> list[list[int]]:
    """The reassociation between a rank-`rank` shape and the same shape without `unit_axes`:
    each kept dim forms one group with the unit dims around it (leading units join the first)."""
    kept = [axis for axis in range(rank) if axis not in unit_axes]
    if not kept:
        return []
    groups: list[list[int]] = [[] for _ in kept]
    current = 0
    for axis in range(rank):
        if axis not in unit_axes:
            current = kept.index(axis)
        groups[current].append(axis)
    return groups


def reshape(
    ctx: LoweringRuleContext,
    value: mlir_ir.Value,
    source: RankedTensorType,
    target: RankedTensorType,
    sizes: Sequence[mlir_ir.Value | None],
) -> mlir_ir.Value:
    """`value` (of `source`) with the shape of `target`, elements kept in row-major order.

    Static shapes go through a 1-D collapse and an expand (folded by MLIR's canonicalizer);
    dynamic ones through `tensor.reshape` with a shape tensor of `sizes` (index values of the
    target's dynamic dims). Equal types are the same shape only when no size is given: two
    `?` dims need not be the same length."""
    if source.shape == target.shape and all(size is None for size in sizes):
        return value
    if source.is_static and target.is_static:
        count = static_element_count(source)
        if count != static_element_count(target):
            raise ctx.error(
                f"cannot reshape {format_type(source)} into {format_type(target)}: "
                "the element counts differ"
            )
        flat = RankedTensorType(source.element_type, (count,))
        if len(source.shape) == 0:
            value = expand(value, flat, [], [None])
        elif len(source.shape) > 1:
            value = collapse(value, flat, [list(range(len(source.shape)))])
        if len(target.shape) == 0:
            return collapse(value, target, [])
        if len(target.shape) == 1:
            return value
        return expand(value, target, [list(range(len(target.shape)))], [None] * len(target.shape))
    if len(target.shape) <= 1:
        return _reshape_to_vector(ctx, value, source, target, sizes)
    extents = []
    for dim, size in zip(target.shape, sizes, strict=True):
        if dim is not None:
            extents.append(index_constant(dim))
        elif size is None:
            raise ctx.error(f"cannot find the size of a dynamic dim of {format_type(target)}")
        else:
            extents.append(size)
    shape_type = mlir_ir.RankedTensorType.get([len(extents)], index_type())
    shape = tensor.FromElementsOp(shape_type, extents).result
    return tensor.ReshapeOp(lower_type(target), value, shape).result
