"""MLIR lowerings of the ONNX ops that reshape or describe a tensor: Reshape, Flatten, Squeeze,
Unsqueeze, Shape, Size, ConstantOfShape, Range, EyeLike, Expand, Tile, Trilu, DepthToSpace,
SpaceToDepth.

Reshapes become `tensor.collapse_shape` / `tensor.expand_shape` (static shapes, or unit dims
added and removed) or `tensor.reshape` with a computed shape (dynamic). Ops that move elements
around become gather-form `linalg.generic`s (see `indexing.py`). Shape and Size of a static input
are constants. Where ONNX's shape inference left a result dynamic and the lowering cannot compute
its size, the op is refused with the reason; nothing is guessed.
"""

from __future__ import annotations

import struct
from typing import Final, Literal

import numpy as np
from niro.ir import ScalarType, format_type, op_name, static_element_count

from ..bindings import arith, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    assert_true,
    cast_to,
    constant,
    convert,
    dim_size,
    empty_tensor,
    fill,
    i64_tensor,
    index_constant,
    read_int_scalars,
    small_elements,
)
from ..context import LoweringRuleContext
from ..literals import scalar_attr
from ..registry import register_lowering
from ..types import RankedTensorType, lower_scalar_type, lower_type
from .common import attribute, element_type, input_value, normalize_axes, opset
from .indexing import (
    HOST_SCALARS,
    add,
    cmp,
    collapse,
    constant_input,
    data_size,
    expand,
    floordiv,
    from_index,
    gather_generic,
    mod,
    mul,
    projection,
    required_constant,
    reshape,
    scalar_input,
    scalar_reader,
    select,
    sub,
    to_index,
    unit_groups,
)

__all__: list[str] = []


def _result(ctx: LoweringRuleContext, index: int = 0) -> RankedTensorType:
    return ctx.ranked(ctx.niro_results[index], "result")


def _source(ctx: LoweringRuleContext, index: int = 0, what: str = "input") -> RankedTensorType:
    return ctx.ranked(ctx.niro_operands[index], what)


def _size(ctx: LoweringRuleContext, value: mlir_ir.Value, type_: RankedTensorType, axis: int) -> mlir_ir.Value:
    """The size of dim `axis` as an index value (a constant when static)."""
    dim = type_.shape[axis]
    return index_constant(dim) if dim is not None else dim_size(value, axis)


def _count(ctx: LoweringRuleContext, value: mlir_ir.Value, type_: RankedTensorType) -> mlir_ir.Value:
    total = index_constant(1)
    for axis in range(len(type_.shape)):
        total = mul(total, _size(ctx, value, type_, axis))
    return total


# -- Reshape, Flatten, Squeeze, Unsqueeze --------------------------------------------------------


@register_lowering("onnx.Reshape", since=5)
def _lower_reshape(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source, target = _source(ctx, 0, "data"), _result(ctx)
    sizes: list[mlir_ir.Value | None] = [None] * len(target.shape)
    if not target.is_static:
        sizes = _reshape_sizes(ctx, source, target)
    return [reshape(ctx, ctx.operands[0], source, target, sizes)]


def _reshape_sizes(ctx: LoweringRuleContext, source: RankedTensorType, target: RankedTensorType) -> list:
    """The index values of the result's dims from the run-time `shape` input: 0 copies the
    input dim (unless allowzero), -1 takes what is left of the element count."""
    data = ctx.operands[0]
    shape_value, shape_niro = ctx.operands[1], ctx.niro_operands[1]
    shape_type = ctx.ranked(shape_niro, "shape")
    if shape_type.shape != (len(target.shape),):
        raise ctx.error(
            f"has a shape input {format_type(shape_type)} for a result {format_type(target)}"
        )
    allowzero = bool(attribute(ctx, "allowzero", 0))
    # a constant shape (a Reshape in an If branch, whose result ONNX types with a run-time dim)
    # is read at compile time, host arithmetic, not a device read of its constant
    elements = small_elements(shape_value, ctx.constant_operand(1))
    requested = []
    for axis in range(len(target.shape)):
        element = (
            elements[axis]
            if elements is not None
            else tensor.ExtractOp(shape_value, [index_constant(axis)]).result
        )
        raw = to_index(element, shape_type.element_type)
        if not allowzero and axis < len(source.shape):
            raw = select(cmp("eq", raw, 0), _size(ctx, data, source, axis), raw)
        requested.append(raw)
    known, none_inferred = index_constant(1), None
    for raw in requested:
        known = mul(known, select(cmp("eq", raw, -1), 1, raw))
        not_inferred = cmp("ne", raw, -1)
        none_inferred = (
            not_inferred
            if none_inferred is None
            else arith.AndIOp(none_inferred, not_inferred).result
        )
    # A 0 in the shape (allowzero, or a copied input dim that is 0) makes the product of the
    # other dims 0: a -1 beside it has no single value, and dividing by it would trap.
    known_is_zero = cmp("eq", known, 0)
    assert_true(
        arith.OrIOp(none_inferred, cmp("ne", known, 0)).result,
        f"{ctx.niro_location}: '{op_name(ctx.op)}' op: the shape has a -1 beside a 0 dim, so the -1 has no single value",
    )
    inferred = floordiv(_count(ctx, data, source), select(known_is_zero, 1, known))
    return [
        None if dim is not None else _bounded(ctx, axis, select(cmp("eq", raw, -1), inferred, raw))
        for axis, (dim, raw) in enumerate(zip(target.shape, requested, strict=True))
    ]


_LARGEST_DIM = 2**31 - 1


def _bounded(ctx: LoweringRuleContext, axis: int, size: mlir_ir.Value) -> mlir_ir.Value:
    """`size`, checked at run time to lie in [0, 2**31 - 1], then clamped to that range (the
    same value) so that the compiler can bound it. Every result dim sized from run-time data
    goes through here: Reshape's, ConstantOfShape's, Range's, Expand's and Tile's.

    NOTE: IREE (3.13) miscomputes buffer sizes from a dim read from data that it cannot bound:
    its int-range optimization folds the aligned byte size of (such a dim) x (a size coming
    out of an `scf.if` with a loop in a branch, e.g. NonMaxSuppression inside If) to 0, and
    the result then shares memory with the function's other results (torchvision RetinaNet's
    boxes came out as its scores, or the heap was corrupted; boxes tiled by repeats read from
    data: an OUT_OF_RANGE read at run time)."""
    fits = arith.AndIOp(cmp("sge", size, 0), cmp("sle", size, _LARGEST_DIM)).result
    assert_true(
        fits,
        f"{ctx.niro_location}: '{op_name(ctx.op)}' op: result dim {axis} is negative or above {_LARGEST_DIM}",
    )
    return data_size(size, _LARGEST_DIM)


@register_lowering("onnx.Flatten", since=1)
def _lower_flatten(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source, result = _source(ctx), _result(ctx)
    rank = len(source.shape)
    axis = attribute(ctx, "axis", 1)
    if not -rank <= axis <= rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    value = ctx.operands[0]
    if 0 < axis < rank:
        target = RankedTensorType(
            source.element_type, (_product(source.shape[:axis]), _product(source.shape[axis:]))
        )
        return [
            cast_to(
                collapse(value, target, [list(range(axis)), list(range(axis, rank))]),
                ctx.result_types[0],
            )
        ]
    if source.is_static:
        return [reshape(ctx, value, source, result, [None, None])]
    # Rank r with a dynamic dim, axis 0 or r: one collapse into a single dim, then a unit dim.
    flat = RankedTensorType(source.element_type, (_product(source.shape),))
    value = collapse(value, flat, [list(range(rank))])
    shape = (1, flat.shape[0]) if axis == 0 else (flat.shape[0], 1)
    target = RankedTensorType(source.element_type, shape)
    size = dim_size(value, 0) if flat.shape[0] is None else None
    sizes = [None, size] if axis == 0 else [size, None]
    return [cast_to(expand(value, target, [[0, 1]], sizes), ctx.result_types[0])]


def _product(dims) -> int | None:
    if any(dim is None for dim in dims):
        return None
    return int(np.prod(dims, dtype=np.int64))


def _axes(
    ctx: LoweringRuleContext, rank: int, *, since_input: int
) -> tuple[int, ...] | Literal["run time"] | None:
    """The `axes` of Squeeze/Unsqueeze: an attribute before opset `since_input`, input #1 from
    it (None when absent)."""
    if opset(ctx) < since_input:
        axes = attribute(ctx, "axes")
        return None if axes is None else normalize_axes(ctx, axes, rank)
    if input_value(ctx, 1) is None:
        return None
    if constant_input(ctx, 1) is None:
        return _RUN_TIME
    return normalize_axes(ctx, required_constant(ctx, 1, "axes").reshape(-1).tolist(), rank)


_RUN_TIME: Final = "run time"
"""What `_axes` returns for an axes input known only at run time."""


def _run_time_units(ctx: LoweringRuleContext, rank: int, what: str) -> list[mlir_ir.Value]:
    """For each of `rank` axes, an i1 true when the run-time `axes` input (of static length)
    lists it; a run-time check makes the program fail unless the axes are distinct and in
    [-rank, rank) (then exactly `len(axes)` of the rank's positions are listed)."""
    type_ = ctx.ranked(ctx.niro_operands[1], "axes")
    if len(type_.shape) != 1 or type_.shape[0] is None:
        raise ctx.error(f"needs a constant axes input or a static 1-D one, got {format_type(type_)}")
    read = read_int_scalars(ctx.operands[1], type_.shape[0])
    axes = [select(cmp("slt", axis, 0), add(axis, rank), axis) for axis in (to_index(value, ScalarType.I64) for value in read)]
    units = []
    listed_count: mlir_ir.Value | int = 0
    for position in range(rank):
        listed = arith.ConstantOp(mlir_ir.IntegerType.get_signless(1), 0).result
        for axis in axes:
            hit = cmp("eq", axis, position)
            listed = arith.OrIOp(listed, hit).result
            listed_count = add(listed_count, select(hit, 1, 0))
        units.append(listed)
    assert_true(
        cmp("eq", listed_count, len(axes)),
        f"{ctx.niro_location}: '{op_name(ctx.op)}' op: the axes to {what} must be distinct and in [-{rank}, {rank})",
    )
    return units


def _reshape_checked(ctx: LoweringRuleContext, source: RankedTensorType, result: RankedTensorType, sizes: list[mlir_ir.Value]) -> mlir_ir.Value:
    """The operand reshaped to `sizes` (the run-time extent of every result dim; the row-major
    order is kept), each static dim of the result checked against its extent."""
    for axis, (dim, size) in enumerate(zip(result.shape, sizes, strict=True)):
        if dim is not None:
            assert_true(cmp("eq", size, dim), f"{ctx.niro_location}: '{op_name(ctx.op)}' op: result dim {axis} is not {dim}")
    dynamic = RankedTensorType(result.element_type, (None,) * len(result.shape))
    return cast_to(reshape(ctx, ctx.operands[0], source, dynamic, sizes), ctx.result_types[0])


def _squeeze_run_time(ctx: LoweringRuleContext, source: RankedTensorType, result: RankedTensorType) -> mlir_ir.Value:
    """Squeeze by run-time axes: a reshape to the dims not listed, each listed dim checked to
    be 1."""
    rank = len(source.shape)
    units = _run_time_units(ctx, rank, "squeeze")
    dims = [dim_size(ctx.operands[0], axis) for axis in range(rank)]
    ones = arith.ConstantOp(mlir_ir.IntegerType.get_signless(1), 1).result
    kept: list[mlir_ir.Value] = []  # each source axis's position among the kept ones, -1 if squeezed
    before: mlir_ir.Value | int = 0
    for unit, dim in zip(units, dims, strict=True):
        ones = arith.AndIOp(ones, arith.SelectOp(unit, cmp("eq", dim, 1), ones).result).result
        kept.append(select(unit, -1, before))
        before = add(before, select(unit, 0, 1))
    assert_true(ones, f"{ctx.niro_location}: 'onnx.Squeeze' op: a squeezed dim is not 1")
    sizes = []
    for position in range(len(result.shape)):
        size = index_constant(1)
        for index, dim in zip(kept, dims, strict=True):
            size = select(cmp("eq", index, position), dim, size)
        sizes.append(size)
    return _reshape_checked(ctx, source, result, sizes)


def _unsqueeze_run_time(ctx: LoweringRuleContext, source: RankedTensorType, result: RankedTensorType) -> mlir_ir.Value:
    """Unsqueeze by run-time axes: a reshape with a 1 at each listed axis and the source's
    dims, in order, elsewhere."""
    units = _run_time_units(ctx, len(result.shape), "unsqueeze")
    dims = [dim_size(ctx.operands[0], axis) for axis in range(len(source.shape))]
    sizes = []
    inserted: mlir_ir.Value | int = 0
    for position, unit in enumerate(units):
        dim = index_constant(1)
        taken = sub(position, inserted)  # the source axis this position shows, if not listed
        for axis, extent in enumerate(dims):
            dim = select(cmp("eq", taken, axis), extent, dim)
        sizes.append(select(unit, 1, dim))
        inserted = add(inserted, select(unit, 1, 0))
    return _reshape_checked(ctx, source, result, sizes)


@register_lowering("onnx.Squeeze", since=1)
def _lower_squeeze(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source = _source(ctx, 0, "data")
    if source.is_static and _result(ctx).is_static:
        # Removing unit dims keeps the row-major order: a reshape, whichever 1s go.
        return [reshape(ctx, ctx.operands[0], source, _result(ctx), [])]
    rank = len(source.shape)
    axes = _axes(ctx, rank, since_input=13)
    if axes == _RUN_TIME:
        return [_squeeze_run_time(ctx, source, _result(ctx))]
    if axes is None:
        if any(dim is None for dim in source.shape):
            raise ctx.error(
                f"cannot tell which dims of {format_type(source)} are 1 without 'axes' "
                "(a dynamic dim may or may not be squeezed)"
            )
        axes = tuple(axis for axis, dim in enumerate(source.shape) if dim == 1)
    for axis in axes:
        if source.shape[axis] not in (1, None):
            raise ctx.error(f"cannot squeeze axis {axis} of size {source.shape[axis]}")
    value = ctx.operands[0]
    # A dynamic dim being squeezed must be 1: say so with a (run-time checked) cast.
    pinned = RankedTensorType(
        source.element_type,
        tuple(1 if axis in axes else dim for axis, dim in enumerate(source.shape)),
    )
    value = cast_to(value, lower_type(pinned))
    target = RankedTensorType(
        source.element_type, tuple(dim for axis, dim in enumerate(source.shape) if axis not in axes)
    )
    return [cast_to(collapse(value, target, unit_groups(rank, axes)), ctx.result_types[0])]


@register_lowering("onnx.Unsqueeze", since=1)
def _lower_unsqueeze(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source = _source(ctx, 0, "data")
    result = _result(ctx)
    if source.is_static and result.is_static:
        return [reshape(ctx, ctx.operands[0], source, result, [])]
    rank = len(result.shape)
    axes = _axes(ctx, rank, since_input=13)
    if axes == _RUN_TIME:
        return [_unsqueeze_run_time(ctx, source, result)]
    if axes is None:
        raise ctx.error("needs 'axes'")
    if rank != len(source.shape) + len(axes):
        raise ctx.error(
            f"cannot insert {len(axes)} axes into {format_type(source)} giving {format_type(result)}"
        )
    dims = iter(enumerate(source.shape))
    shape: list[int | None] = []
    sizes: list[mlir_ir.Value | None] = []
    for axis in range(rank):
        if axis in axes:
            shape.append(1)
            sizes.append(None)
        else:
            index, dim = next(dims)
            shape.append(dim)
            sizes.append(None if dim is not None else dim_size(ctx.operands[0], index))
    target = RankedTensorType(source.element_type, tuple(shape))
    return [
        cast_to(
            expand(ctx.operands[0], target, unit_groups(rank, axes), sizes), ctx.result_types[0]
        )
    ]


# -- Shape, Size, ConstantOfShape, Range, EyeLike ----------------------------------------------


@register_lowering("onnx.Shape", since=1)
def _lower_shape(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source = _source(ctx, 0, "data")
    rank = len(source.shape)
    start, end = attribute(ctx, "start", 0), attribute(ctx, "end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    dims = [
        source.shape[axis] if source.shape[axis] is not None else dim_size(ctx.operands[0], axis)
        for axis in range(start, max(start, end))
    ]
    return [i64_tensor(dims, ctx.result_types[0])]


@register_lowering("onnx.Size", since=1)
def _lower_size(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source = _source(ctx, 0, "data")
    count: mlir_ir.Value | int = (
        static_element_count(source) if source.is_static else _count(ctx, ctx.operands[0], source)
    )
    return [i64_tensor([count], ctx.result_types[0])]


def _attribute_scalar(ctx: LoweringRuleContext, name: str, element: ScalarType):
    """The one element of a tensor attribute (ConstantOfShape's `value`) as a Python number."""
    value = attribute(ctx, name)
    if value is None:
        return 0
    if not isinstance(value, dict) or "data" not in value:
        raise ctx.error(f"expected a tensor attribute '{name}'")
    spelling = value["dtype"]
    raw = bytes(value["data"])
    if spelling == "bf16":
        return struct.unpack("<f", b"\x00\x00" + raw[:2])[0]
    dtype = np.dtype(ScalarType.from_spelling(spelling).numpy_name).newbyteorder("<")
    array = np.frombuffer(raw, dtype=dtype)
    if array.size != 1:
        raise ctx.error(
            f"expected a one-element tensor attribute '{name}', got {array.size} elements"
        )
    item = array[0].item()
    return bool(item) if element is ScalarType.BOOL else item


def _fill(ctx: LoweringRuleContext, result: RankedTensorType, sizes, scalar: mlir_ir.Value) -> mlir_ir.Value:
    init = empty_tensor(ctx, result, sizes)
    return fill(init, scalar)


@register_lowering("onnx.ConstantOfShape", since=9)
def _lower_constant_of_shape(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    result = _result(ctx)
    literal = _attribute_scalar(ctx, "value", result.element_type)
    element = scalar_attr(result.element_type, literal)
    if result.is_static:
        type_ = ctx.result_types[0]
        return [arith.ConstantOp(type_, mlir_ir.DenseElementsAttr.get_splat(type_, element)).result]
    shape_type = _source(ctx, 0, "shape")
    sizes = [
        None
        if dim is not None
        else _bounded(
            ctx,
            axis,
            to_index(
                tensor.ExtractOp(ctx.operands[0], [index_constant(axis)]).result,
                shape_type.element_type,
            ),
        )
        for axis, dim in enumerate(result.shape)
    ]
    scalar = arith.ConstantOp(lower_scalar_type(result.element_type), element).result
    return [_fill(ctx, result, sizes, scalar)]


@register_lowering("onnx.Range", since=11)
def _lower_range(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    result = _result(ctx)
    if len(result.shape) != 1:
        raise ctx.error(f"expected a 1-D result, got {format_type(result)}")
    element = result.element_type
    readers = [
        scalar_reader(ctx, ctx.operands[index], ctx.niro_operands[index]) for index in range(3)
    ]
    i64 = mlir_ir.IntegerType.get_signless(64)
    narrow = element in (ScalarType.F16, ScalarType.BF16)
    wide = mlir_ir.F64Type.get() if element is ScalarType.F64 else mlir_ir.F32Type.get()

    def read(index: int) -> mlir_ir.Value:
        value = readers[index]()
        return arith.ExtFOp(wide, value).result if narrow else value

    sizes: list[mlir_ir.Value | None] = [None]
    if result.shape[0] is None:
        if element not in HOST_SCALARS:
            raise ctx.error(
                f"has a data-dependent length ({format_type(result)}); niroc computes it at run "
                "time only for i32, i64, f32 and f64 ranges"
            )
        start, limit, delta = read(0), read(1), read(2)
        # max(ceil((limit - start) / delta), 0), computed at run time.
        if element.is_float:
            ratio = arith.DivFOp(arith.SubFOp(limit, start).result, delta).result
            truncated = arith.FPToSIOp(i64, ratio).result
            below = arith.CmpFOp(
                arith.CmpFPredicate.OLT, arith.SIToFPOp(wide, truncated).result, ratio
            ).result
            count = as_index(truncated)
            count = select(below, add(count, 1), count)
        else:
            span = to_index(arith.SubIOp(limit, start).result, element)
            count = arith.CeilDivSIOp(span, to_index(delta, element)).result
        # an empty range (count < 0) is valid: clamped to 0 before the bound's check
        sizes = [_bounded(ctx, 0, data_size(count))]

    def body(indices, _):
        # start + i * delta, as ONNX defines it (f16/bf16 computed in f32, then rounded).
        start, delta = read(0), read(2)
        if not element.is_float:
            position = from_index(indices[0], element)
            return arith.AddIOp(start, arith.MulIOp(position, delta).result).result
        position = arith.SIToFPOp(wide, as_i64(indices[0])).result
        value = arith.AddFOp(start, arith.MulFOp(position, delta).result).result
        return convert(value, lower_scalar_type(element)) if narrow else value

    return [gather_generic(ctx, result, sizes, body)]


@register_lowering("onnx.EyeLike", since=9)
def _lower_eye_like(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    result = _result(ctx)
    if len(result.shape) != 2:
        raise ctx.error(f"needs a 2-D input, got {format_type(result)}")
    k = attribute(ctx, "k", 0)
    sizes = [
        None if dim is not None else dim_size(ctx.operands[0], axis)
        for axis, dim in enumerate(result.shape)
    ]
    element = lower_scalar_type(result.element_type)
    one = arith.ConstantOp(element, scalar_attr(result.element_type, 1)).result
    zero = arith.ConstantOp(element, scalar_attr(result.element_type, 0)).result

    def body(indices, _):
        on_diagonal = cmp("eq", sub(indices[1], indices[0]), k)
        return arith.SelectOp(on_diagonal, one, zero).result

    return [gather_generic(ctx, result, sizes, body)]


# -- Expand, Tile, Trilu --------------------------------------------------------------------------


@register_lowering("onnx.Expand", since=8)
def _lower_expand(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source, result = _source(ctx), _result(ctx)
    rank = len(result.shape)
    offset = rank - len(source.shape)
    if offset < 0:
        raise ctx.error(
            f"cannot expand {format_type(source)} to the lower-rank {format_type(result)}"
        )
    sizes: list[mlir_ir.Value | None] = [None] * rank
    if not result.is_static:
        shape_type = _source(ctx, 1, "shape")
        for axis, dim in enumerate(result.shape):
            if dim is not None:
                continue
            requested = to_index(
                tensor.ExtractOp(ctx.operands[1], [index_constant(axis)]).result,
                shape_type.element_type,
            )
            if axis >= offset:
                # The broadcast of the input dim and the requested one: whichever is not 1.
                own = _size(ctx, ctx.operands[0], source, axis - offset)
                requested = select(cmp("eq", requested, 1), own, requested)
            sizes[axis] = _bounded(ctx, axis, requested)
    data = ctx.operands[0]
    dynamic = [axis for axis, dim in enumerate(source.shape) if dim is None]
    if not dynamic:
        exprs = [
            mlir_ir.AffineConstantExpr.get(0)
            if dim == 1 and result.shape[axis + offset] != 1
            else mlir_ir.AffineDimExpr.get(axis + offset)
            for axis, dim in enumerate(source.shape)
        ]
        input_map = mlir_ir.AffineMap.get(rank, 0, exprs)
        return [
            gather_generic(
                ctx,
                result,
                sizes,
                lambda _, elements: elements[0],
                [(data, input_map, source.element_type)],
            )
        ]
    # A dynamic input dim may be 1 at run time and broadcast: read index 0 there.
    extents = {axis: dim_size(data, axis) for axis in dynamic}

    def body(indices, _):
        position = []
        for axis, dim in enumerate(source.shape):
            index = indices[axis + offset]
            if dim == 1:
                index = index_constant(0)
            elif dim is None:
                index = select(cmp("eq", extents[axis], 1), 0, index)
            position.append(index)
        return tensor.ExtractOp(data, position).result

    return [gather_generic(ctx, result, sizes, body)]


@register_lowering("onnx.Tile", since=6)
def _lower_tile(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source, result = _source(ctx), _result(ctx)
    rank = len(source.shape)
    if len(result.shape) != rank:
        raise ctx.error(
            f"result {format_type(result)} does not have the rank of {format_type(source)}"
        )
    data = ctx.operands[0]
    sizes: list[mlir_ir.Value | None] = [None] * rank
    if not result.is_static:
        given = constant_input(ctx, 1)
        if given is not None:
            repeats = given.reshape(-1).tolist()
            for axis, dim in enumerate(result.shape):
                if dim is None:
                    sizes[axis] = mul(dim_size(data, axis), int(repeats[axis]))
        else:
            sizes = _runtime_tile_sizes(ctx, source, result)
    extents = [_size(ctx, data, source, axis) for axis in range(rank)]

    def body(indices, _):
        position = [
            index
            if source.shape[axis] is not None and source.shape[axis] == result.shape[axis]
            else mod(index, extents[axis])
            for axis, index in enumerate(indices)
        ]
        return tensor.ExtractOp(data, position).result

    return [gather_generic(ctx, result, sizes, body)]


def _runtime_tile_sizes(
    ctx: LoweringRuleContext, source: RankedTensorType, result: RankedTensorType
) -> list[mlir_ir.Value | None]:
    """The dynamic result dims of a Tile whose `repeats` is computed at run time: the input
    dim times repeats[axis], read with `tensor.extract`; a `cf.assert` fails the program on a
    negative repeat (ONNX asks for non-negative ones), and `_bounded` on a product past 2**31 - 1."""
    repeats_type = _source(ctx, 1, "repeats")
    sizes: list[mlir_ir.Value | None] = [None] * len(result.shape)
    for axis, dim in enumerate(result.shape):
        if dim is not None:
            continue
        read = tensor.ExtractOp(ctx.operands[1], [index_constant(axis)]).result
        count = to_index(read, repeats_type.element_type)
        assert_true(
            cmp("sge", count, 0),
            f"{ctx.niro_location}: '{op_name(ctx.op)}' op: repeats[{axis}] is negative",
        )
        sizes[axis] = _bounded(ctx, axis, mul(_size(ctx, ctx.operands[0], source, axis), count))
    return sizes


@register_lowering("onnx.Trilu", since=14)
def _lower_trilu(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source, result = _source(ctx), _result(ctx)
    rank = len(source.shape)
    if rank < 2:
        raise ctx.error(f"needs a tensor of rank 2 or more, got {format_type(source)}")
    upper = bool(attribute(ctx, "upper", 1))
    k_input = input_value(ctx, 1)
    k: mlir_ir.Value | int = 0
    if k_input is not None:
        k = to_index(scalar_input(ctx, *k_input), element_type(k_input[1]))
    data = ctx.operands[0]
    sizes = [
        None if dim is not None else dim_size(data, axis) for axis, dim in enumerate(result.shape)
    ]
    zero = constant(lower_scalar_type(result.element_type), 0)
    identity = projection(rank, range(rank))

    def body(indices, elements):
        offset = sub(indices[-1], indices[-2])
        keep = cmp("sge", offset, k) if upper else cmp("sle", offset, k)
        return arith.SelectOp(keep, elements[0], zero).result

    return [gather_generic(ctx, result, sizes, body, [(data, identity, source.element_type)])]


# -- DepthToSpace, SpaceToDepth -------------------------------------------------------------------


def _blocks(ctx: LoweringRuleContext) -> tuple[RankedTensorType, RankedTensorType, int, str]:
    source, result = _source(ctx), _result(ctx)
    if len(source.shape) != 4 or len(result.shape) != 4:
        raise ctx.error(f"needs a 4-D input, got {format_type(source)}")
    block = attribute(ctx, "blocksize")
    if not isinstance(block, int) or block < 1:
        raise ctx.error(f"needs a positive 'blocksize', got {block!r}")
    mode = attribute(ctx, "mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ctx.error(f"does not support mode '{mode}'")
    return source, result, block, mode


@register_lowering("onnx.DepthToSpace", since=1)
def _lower_depth_to_space(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source, result, b, mode = _blocks(ctx)
    data = ctx.operands[0]
    channels = (
        _size(ctx, data, source, 1) if result.shape[1] is None else index_constant(result.shape[1])
    )
    if result.shape[1] is None:
        channels = floordiv(channels, b * b)
    sizes = [
        None
        if dim is not None
        else (
            mul(dim_size(data, axis), b)
            if axis >= 2
            else channels
            if axis == 1
            else dim_size(data, 0)
        )
        for axis, dim in enumerate(result.shape)
    ]

    def body(indices, _):
        n, c, h, w = indices
        y, x = mod(h, b), mod(w, b)
        if mode == "DCR":
            depth = add(mul(add(mul(y, b), x), channels), c)
        else:
            depth = add(mul(c, b * b), add(mul(y, b), x))
        return tensor.ExtractOp(data, [n, depth, floordiv(h, b), floordiv(w, b)]).result

    return [gather_generic(ctx, result, sizes, body)]


@register_lowering("onnx.SpaceToDepth", since=1)
def _lower_space_to_depth(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    source, result, b, mode = _blocks(ctx)
    data = ctx.operands[0]
    channels = _size(ctx, data, source, 1)
    sizes = [
        None
        if dim is not None
        else (
            floordiv(dim_size(data, axis), b)
            if axis >= 2
            else mul(channels, b * b)
            if axis == 1
            else dim_size(data, 0)
        )
        for axis, dim in enumerate(result.shape)
    ]

    def body(indices, _):
        n, depth, h, w = indices
        if mode == "DCR":
            block, c = floordiv(depth, channels), mod(depth, channels)
        else:
            c, block = floordiv(depth, b * b), mod(depth, b * b)
        y, x = floordiv(block, b), mod(block, b)
        return tensor.ExtractOp(data, [n, c, add(mul(h, b), y), add(mul(w, b), x)]).result

    return [gather_generic(ctx, result, sizes, body)]
