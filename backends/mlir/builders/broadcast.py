"""Element-wise ops with NumPy broadcasting: one `linalg.generic` over the result, or scalar
ops on the host for a small integer vector whose operands are there already (shape arithmetic).

ONNX broadcasts its element-wise operands as NumPy does (right-aligned, a size-1 dim stretched);
`elementwise` builds that from the Niro types of the operands and the result, checks at run
time what only the run time knows (a dynamic dim), and takes the per-type parts (maps,
iterators, block types) from a plan made once per type signature.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from niro.ir import TensorType, Value, format_type, op_name

from ..bindings import arith, linalg, mlir_ir, tensor
from ..types import type_key
from .checks import assert_true
from .constants import index_constant
from .elements import SMALL_VECTOR, element_scalars, small_element_sources
from .shapes import dim_size, empty_tensor

if TYPE_CHECKING:
    from ..context import LoweringRuleContext

__all__ = ["elementwise"]


def elementwise(
    ctx: LoweringRuleContext,
    body: Callable[[Sequence[mlir_ir.Value]], mlir_ir.Value],
    inputs: Sequence[tuple[mlir_ir.Value, Value]] | None = None,
    result: Value | None = None,
) -> mlir_ir.Value:
    """A broadcasting element-wise `linalg.generic`: `body(elements)` computes one element.

    `inputs` pairs each MLIR value with its Niro value (default: the op's operands); `result`
    is the Niro result (default: the op's only result). Shapes broadcast as in NumPy,
    right-aligned; a static size-1 dim against a larger result dim reads index 0. A small
    integer vector computed from scalars the host has is built from scalars (`_on_host`).

    A *dynamic* operand dim is 1 or the result dim at run time (a run-time check says so, so
    a mismatch stops the program with a message naming the op instead of reading out of
    bounds), and ONNX broadcasts a 1. Against a result dim known to be a static N > 1 (the
    result's type, or another operand's static dim) such an operand is read by a clamped
    `tensor.extract` (`_extract_broadcast`: index min(i, size - 1) is 0 for a 1). Two or more
    operands dynamic on a dim no static size fixes must be equal there at run time (checked).

    NOTE: not broadcast there by clamped reads: with IREE 3.13 that form made GPT-style
    exports 2.7x slower (every residual and mask Add read element by element) and failed to
    compile a GroupQueryAttention with interleaved rotary and softcap ("LLVM Translation failed
    ... unrealized_conversion_cast", test_contrib_transformer.py). Static shapes never take
    these paths: their MLIR is the same.

    NOTE: an outer-product-like op (operands broadcast along different dims, as in
    `s[:, :, None] - s[:, None, :]`) reads all its operands but the first with
    `tensor.extract` in the body, not as `ins`: IREE (3.13) fuses such an op into the
    dispatch of a reduction that produces both operands (a ReduceSum, a CumSum) and then
    computes only the elements where the two reads coincide, the rest wrong.
    """
    if inputs is None:
        inputs = tuple(zip(ctx.operands, ctx.niro_operands, strict=True))
    result = ctx.niro_results[0] if result is None else result
    plan = ctx.shared_object(
        ("broadcast", type_key(result.type), *[type_key(niro.type) for _, niro in inputs]),
        lambda: _broadcast_plan(ctx, inputs, result),
    )
    on_host = _on_host(ctx, body, inputs, plan) if plan.is_static else None
    if on_host is not None:
        return on_host
    if plan.is_static:
        init = mlir_ir.Operation.create("tensor.empty", results=[plan.result_type]).result
    else:
        result_type = ctx.ranked(result, "result")
        sizes = [
            None if dim is not None else _broadcast_size(axis, inputs, plan.shapes)
            for axis, dim in enumerate(result_type.shape)
        ]
        init = empty_tensor(ctx, result_type, sizes)
        _assert_dynamic_dims_match(ctx, inputs, plan.shapes, result_type, sizes)
    lasts = {
        index: _last_indices(inputs[index][0], plan.shapes[index][1]) for index in plan.extracted
    }
    # NOTE: the generic builder (see structured.py) with the plan's attributes, made once.
    generic = mlir_ir.Operation.create(
        "linalg.generic",
        results=[plan.result_type],
        operands=[
            *[value for index, (value, _) in enumerate(inputs) if index not in plan.extracted],
            init,
        ],
        attributes=plan.attributes,
        regions=1,
    )
    block = generic.regions[0].blocks.append(*plan.block_types)
    with mlir_ir.InsertionPoint(block):
        arguments = iter(block.arguments)
        elements = [
            _extract_broadcast(value, plan, index, lasts[index])
            if index in plan.extracted
            else next(arguments)
            for index, (value, _) in enumerate(inputs)
        ]
        element = body(elements)
        mlir_ir.Operation.create("linalg.yield", operands=[element])
    return generic.result


def _on_host(
    ctx: LoweringRuleContext,
    body: Callable[[Sequence[mlir_ir.Value]], mlir_ir.Value],
    inputs: Sequence[tuple[mlir_ir.Value, Value]],
    plan: _BroadcastPlan,
) -> mlir_ir.Value | None:
    """The op computed on scalars, one `body` per element, joined by `tensor.from_elements`,
    when its result is a small integer vector (`small_elements`) and every operand's elements
    are scalars on the host already (or constants); else None.

    Why: exporters compute shapes with Mul, Div, Add, Cast... of Shape's elements, then
    Reshape by the result. As a `linalg.generic` each is a device dispatch whose result the
    host reads back to size the Reshape: a wait for the device and a new submission per read.
    The bench's 2-layer torch TransformerEncoder export (dynamic dims, 9 tokens) read 2 sizes
    back per call in 5 submissions, 0.26-0.33 ms a call; on the host, 1 submission, 0.10-0.11
    ms (iree-benchmark-module, local-task).

    NOTE: a boolean result (a comparison, And, Not...) stays a device op: IREE 3.13 cannot
    compile a `tensor.from_elements` of i1 that a dispatch reads ("'tensor.from_elements' op
    failed to verify that operand types match result element type": its i1 -> i8 storage
    rewrite changes the result type, not the elements), e.g. Where(Equal(Shape(x)[0], 4), x, 0)
    (tests/backends/mlir/test_shape_arithmetic.py)."""
    result_type = mlir_ir.RankedTensorType(plan.result_type)
    element = result_type.element_type
    if not isinstance(element, mlir_ir.IntegerType) or element.width == 1 or result_type.rank > 1:
        return None
    count = 1 if result_type.rank == 0 else result_type.shape[0]
    if not 1 <= count <= SMALL_VECTOR:
        return None
    sources = []
    for value, niro in inputs:
        found = small_element_sources(value, ctx.constant_value(niro), on_host=True)
        if found is None or len(found) not in (1, count):
            return None  # nothing built yet
        sources.append(found)
    operands = [
        element_scalars(value, found) for (value, _), found in zip(inputs, sources, strict=True)
    ]
    elements = [
        body([each[0] if len(each) == 1 else each[position] for each in operands])
        for position in range(count)
    ]
    return tensor.FromElementsOp(result_type, elements).result


def _extract_broadcast(
    value: mlir_ir.Value, plan: _BroadcastPlan, index: int, lasts: list[mlir_ir.Value]
) -> mlir_ir.Value:
    """Operand `index`'s element at the current position, read by `tensor.extract` (inside
    the body) with the indices its broadcasting map would give, each clamped to the dim's
    last index (`lasts`, made outside the body).

    NOTE: the clamp (a no-op) keeps IREE from raising the read back into an `ins` operand
    with an indexing map, which would bring back the miscompile `elementwise` avoids."""
    offset, shape = plan.shapes[index]
    result_shape = mlir_ir.RankedTensorType(plan.result_type).shape
    indices = []
    for axis, dim in enumerate(shape):
        if dim == 1 and result_shape[offset + axis] != 1:
            indices.append(index_constant(0))
            continue
        position = linalg.IndexOp(offset + axis).result
        indices.append(arith.MinUIOp(position, lasts[axis]).result)
    return tensor.ExtractOp(value, indices).result


def _last_indices(value: mlir_ir.Value, shape: tuple) -> list[mlir_ir.Value]:
    """Per dim of `value`, its last index (size - 1) as an index value."""
    lasts = []
    for axis, dim in enumerate(shape):
        if dim is not None:
            lasts.append(index_constant(max(dim - 1, 0)))
        else:
            one = index_constant(1)
            lasts.append(arith.SubIOp(dim_size(value, axis), one).result)
    return lasts


def _broadcast_plan(
    ctx: LoweringRuleContext, inputs: Sequence[tuple[mlir_ir.Value, Value]], result: Value
) -> _BroadcastPlan:
    """What `elementwise` builds from the Niro types alone (checked here, once per type
    signature per lowering; the errors name the operand)."""
    result_type = ctx.ranked(result, "result")
    rank = len(result_type.shape)
    shapes = []
    operand_types: list[TensorType] = []
    for index, (_, niro_value) in enumerate(inputs):
        operand_type = ctx.ranked(niro_value, f"operand #{index}")
        operand_types.append(operand_type)
        shape = operand_type.shape
        if len(shape) > rank:
            raise ctx.error(
                f"operand #{index} {format_type(niro_value.type)} has a higher rank than the "
                f"result {format_type(result_type)}"
            )
        shapes.append((rank - len(shape), shape))
    parallel = mlir_ir.Attribute.parse("#linalg.iterator_type<parallel>")
    extents = _static_extents(result_type.shape, shapes)
    extracted = _outer_operands(result_type.shape, shapes) | {
        index
        for index, (offset, shape) in enumerate(shapes)
        if any(
            dim is None and extents[offset + axis] not in (None, 1)
            for axis, dim in enumerate(shape)
        )
    }
    kept = [index for index in range(len(inputs)) if index not in extracted]
    return _BroadcastPlan(
        shapes=tuple(shapes),
        result_type=ctx.mlir_type(result_type),
        block_types=(
            *[ctx.mlir_type(operand_types[index].element_type) for index in kept],
            ctx.mlir_type(result_type.element_type),
        ),
        attributes={
            "indexing_maps": _broadcast_maps(result_type.shape, [shapes[index] for index in kept]),
            "iterator_types": mlir_ir.ArrayAttr.get([parallel] * rank),
            "operandSegmentSizes": mlir_ir.DenseI32ArrayAttr.get([len(kept), 1]),
        },
        extracted=extracted,
        is_static=result_type.is_static and all(None not in shape for _, shape in shapes),
    )


def _assert_dynamic_dims_match(
    ctx: LoweringRuleContext, inputs, shapes, result_type, sizes
) -> None:
    """A run-time check per dynamic operand dim that it equals the result dim it maps to,
    or is 1 where that dim is a static N > 1 (broadcast, see `elementwise`). None where the
    dim has the name of the operand dim the result's size is read from (`_broadcast_size`):
    the frontend named both after one ONNX dim, so they are equal (`TensorType.dim_names`)."""
    extents = _static_extents(result_type.shape, shapes)
    for index, ((value, niro_value), (offset, shape)) in enumerate(
        zip(inputs, shapes, strict=True)
    ):
        for axis, dim in enumerate(shape):
            if dim is not None:
                continue
            result_axis = offset + axis
            name = niro_value.type.dim_name(axis)
            if name is not None and sizes[result_axis] is not None:
                if name == _size_source_name(result_axis, inputs, shapes):
                    continue
            expected = sizes[result_axis]
            if expected is None:
                expected = index_constant(result_type.shape[result_axis])
            size = dim_size(value, axis)
            equal = arith.CmpIOp(arith.CmpIPredicate.eq, size, expected).result
            extent = extents[result_axis]
            if extent is not None and extent != 1:
                one = arith.CmpIOp(arith.CmpIPredicate.eq, size, index_constant(1)).result
                assert_true(
                    arith.OrIOp(equal, one).result,
                    f"{ctx.niro_location}: '{op_name(ctx.op)}' op: dynamic dim {axis} of "
                    f"operand #{index} is neither 1 nor the result dim {extent}",
                )
                continue
            assert_true(
                equal,
                f"{ctx.niro_location}: '{op_name(ctx.op)}' op: dynamic dim {axis} of operand "
                f"#{index} differs from the result dim (a run-time size 1 is not broadcast)",
            )


def _broadcast_size(axis, inputs, shapes) -> mlir_ir.Value | None:
    """The index value of dynamic result dim `axis`: a static non-1 operand size, else that
    of the first operand dynamic there (the others must equal it: checked)."""
    dynamic_source = None
    for (value, _), (offset, shape) in zip(inputs, shapes, strict=True):
        if axis < offset:
            continue
        dim = shape[axis - offset]
        if dim is not None and dim != 1:
            return index_constant(dim)
        if dim is None and dynamic_source is None:
            dynamic_source = (value, axis - offset)
    return None if dynamic_source is None else dim_size(*dynamic_source)


def _size_source_name(axis, inputs, shapes) -> str | None:
    """The name of the operand dim `_broadcast_size` reads dynamic result dim `axis` from
    (the first operand dynamic there), or None (a static size, or an unnamed dim)."""
    dynamic = []
    for (_, niro_value), (offset, shape) in zip(inputs, shapes, strict=True):
        if axis < offset:
            continue
        dim = shape[axis - offset]
        if dim is not None and dim != 1:
            return None
        if dim is None:
            dynamic.append(niro_value.type.dim_name(axis - offset))
    return dynamic[0] if dynamic else None


def _static_extents(result_shape: tuple, shapes) -> list[int | None]:
    """Per result dim, its size when the types fix it: the result's static dim, else a static
    non-1 operand dim there (ONNX's broadcast makes every other operand 1 or that size)."""
    extents = list(result_shape)
    for offset, shape in shapes:
        for axis, dim in enumerate(shape):
            if extents[offset + axis] is None and dim is not None and dim != 1:
                extents[offset + axis] = dim
    return extents


def _outer_operands(result_shape: tuple, shapes: list[tuple[int, tuple]]) -> frozenset[int]:
    """The operands an element-wise op reads by `tensor.extract` (see `elementwise`): when two
    operands broadcast along different dims (each lacks a result dim the other has), all but
    the first; else none."""
    rank = len(result_shape)
    missing = [
        frozenset(
            axis
            for axis in range(rank)
            if result_shape[axis] != 1 and (axis < offset or shape[axis - offset] == 1)
        )
        for offset, shape in shapes
    ]
    outer = any(
        missing[i] - missing[j] and missing[j] - missing[i]
        for i in range(len(missing))
        for j in range(i + 1, len(missing))
    )
    return frozenset(range(1, len(shapes))) if outer else frozenset()


def _broadcast_maps(result_shape: tuple, shapes: list[tuple[int, tuple]]) -> mlir_ir.ArrayAttr:
    """The indexing maps of a broadcasting `linalg.generic`: per operand (right-aligned at
    `offset`), a dim that is a static 1 against a larger result dim reads index 0; then the
    result's identity map."""
    rank = len(result_shape)
    maps = []
    for offset, shape in shapes:
        exprs = [
            mlir_ir.AffineConstantExpr.get(0)
            if dim == 1 and result_shape[offset + axis] != 1
            else mlir_ir.AffineDimExpr.get(offset + axis)
            for axis, dim in enumerate(shape)
        ]
        maps.append(mlir_ir.AffineMap.get(rank, 0, exprs))
    maps.append(mlir_ir.AffineMap.get_identity(rank))
    return mlir_ir.ArrayAttr.get([mlir_ir.AffineMapAttr.get(map_) for map_ in maps])


@dataclass(frozen=True, slots=True)
class _BroadcastPlan:
    """The parts of an element-wise `linalg.generic` that depend only on the Niro types of its
    operands and result, made once per type signature: a 20,000-node model has a handful.

    `shapes` is (offset, shape) per operand, right-aligned against the result; `block_types`
    the body's argument types (operand elements, then the result's); `attributes` the op's
    indexing maps, parallel iterators and operand segments; `is_static` says no dim anywhere is
    dynamic (no sizes to compute, nothing to check at run time); `extracted` the operands read
    by `tensor.extract` in the body instead of as `ins` (no map, no block argument)."""

    shapes: tuple[tuple[int, tuple[int | None, ...]], ...]
    result_type: mlir_ir.Type
    block_types: tuple[mlir_ir.Type, ...]
    attributes: dict[str, mlir_ir.Attribute]
    is_static: bool
    extracted: frozenset[int]
