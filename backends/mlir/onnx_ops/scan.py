"""Scan (opset 9+) as an `scf.for` over the statically known sequence length.

The body region's entry block takes the N state values and one slice of each of the M scan
inputs; its Yield gives the N new states and K scan-output slices. The loop carries the
states and the K stacked outputs (each slice written with `tensor.insert_slice` at the
iteration's position), and reads each scan input slice with a rank-reducing
`tensor.extract_slice`; `scan_*_directions` 1 walks that input or output backwards. A scan
axis other than 0 is handled by a transpose that brings it to the front before the loop (scan
inputs) or moves it back after it (scan outputs). With dynamic dims the first iteration is
peeled to size the scan outputs (`_lower_dynamic_scan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from niro.ir import UnknownOp

from ..bindings import arith, mlir_ir, scf, tensor
from ..builders import (
    DYNAMIC,
    assert_true,
    cast_to,
    dim_size,
    empty,
    generic,
    index_constant,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_type
from .common import attribute, static_shape
from .indexing import cmp, sub

__all__: list[str] = []


def _flags(ctx: LoweringRuleContext, name: str, count: int, allowed: tuple[int, ...]) -> list[int]:
    values = attribute(ctx, name)
    values = [0] * count if values is None else [int(v) for v in values]
    if len(values) != count:
        raise ctx.error(f"attribute '{name}' has {len(values)} values, expected {count}")
    if any(v not in allowed for v in values):
        raise ctx.error(f"supports {name} in {allowed} only, got {values}")
    return values


def _slice_type(type_: mlir_ir.Type) -> mlir_ir.RankedTensorType:
    ranked = mlir_ir.RankedTensorType(type_)
    return mlir_ir.RankedTensorType.get(list(ranked.shape)[1:], ranked.element_type)


@register_lowering("onnx.Scan", since=9)
def _lower_scan(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, UnknownOp), op
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        raise ctx.error("expects one body region with one block")
    block = op.regions[0].blocks[0]
    scan_inputs = int(attribute(ctx, "num_scan_inputs", 0))
    states = len(ctx.operands) - scan_inputs
    scan_outputs = len(ctx.niro_results) - states
    if scan_inputs < 1 or states < 0 or scan_outputs < 0:
        raise ctx.error("has inconsistent numbers of states, scan inputs and outputs")
    if len(block.arguments) != states + scan_inputs:
        raise ctx.error(
            f"body takes {len(block.arguments)} values, expected {states + scan_inputs}"
        )
    input_axes = _axes(ctx, "scan_input_axes", ctx.niro_operands[states:], 0)
    output_axes = _axes(ctx, "scan_output_axes", ctx.niro_results[states:], 0)
    input_reverse = _flags(ctx, "scan_input_directions", scan_inputs, (0, 1))
    output_reverse = _flags(ctx, "scan_output_directions", scan_outputs, (0, 1))
    scanned = [*ctx.niro_operands[states:], *ctx.niro_results[states:]]
    if any(None in ctx.ranked(value, f"scan value #{index}").shape for index, value in enumerate(scanned)):
        layout = _Layout(states, scan_outputs, input_axes, output_axes, input_reverse, output_reverse)
        return _lower_dynamic_scan(ctx, block, layout)
    lengths = {
        static_shape(ctx, value, f"scan input #{i}")[input_axes[i]]
        for i, value in enumerate(ctx.niro_operands[states:])
    }
    lengths |= {
        static_shape(ctx, value, f"scan output #{i}")[output_axes[i]]
        for i, value in enumerate(ctx.niro_results[states:])
    }
    if len(lengths) != 1:
        raise ctx.error(
            f"scan inputs and outputs disagree on the sequence length: {sorted(lengths)}"
        )
    length = lengths.pop()
    sources = [
        _permute(value, _axis_first(axis, mlir_ir.RankedTensorType(value.type).rank))
        for value, axis in zip(ctx.operands[states:], input_axes, strict=True)
    ]
    accumulators = []
    for type_, axis in zip(ctx.result_types[states:], output_axes, strict=True):
        ranked = mlir_ir.RankedTensorType(type_)
        shape = list(ranked.shape)
        order = _axis_first(axis, len(shape))
        accumulators.append(tensor.EmptyOp([shape[d] for d in order], ranked.element_type).result)
    loop = scf.ForOp(
        index_constant(0),
        index_constant(length),
        index_constant(1),
        [*ctx.operands[:states], *accumulators],
    )
    body = loop.body
    with mlir_ir.InsertionPoint(body):
        position = loop.induction_variable
        backwards = arith.SubIOp(index_constant(length - 1), position).result
        carried = list(loop.inner_iter_args)
        pieces = []
        for index in range(len(block.arguments) - states):
            source = sources[index]
            shape = list(mlir_ir.RankedTensorType(source.type).shape)
            offset = backwards if input_reverse[index] else position
            piece = tensor.ExtractSliceOp(
                _slice_type(source.type),
                source,
                [offset],
                [],
                [],
                [DYNAMIC] + [0] * (len(shape) - 1),
                [1, *shape[1:]],
                [1] * len(shape),
            ).result
            pieces.append(piece)

    def finish(yield_ctx: LoweringRuleContext) -> None:
        yielded = list(yield_ctx.operands)
        if len(yielded) != states + scan_outputs:
            raise ctx.error(f"body yields {len(yielded)} values, expected {states + scan_outputs}")
        stacked = []
        for index, (piece, accumulator) in enumerate(
            zip(yielded[states:], carried[states:], strict=True)
        ):
            shape = list(mlir_ir.RankedTensorType(accumulator.type).shape)
            offset = backwards if output_reverse[index] else position
            stacked.append(
                tensor.InsertSliceOp(
                    piece,
                    accumulator,
                    [offset],
                    [],
                    [],
                    [DYNAMIC] + [0] * (len(shape) - 1),
                    [1, *shape[1:]],
                    [1] * len(shape),
                ).result
            )
        new_states = [cast_to(value, old.type) for value, old in zip(yielded[:states], carried[:states], strict=True)]
        scf.YieldOp([*new_states, *stacked])

    ctx.lower_block(block, body, [*carried[:states], *pieces], yield_builder=finish)
    results = list(loop.results)
    for index, axis in enumerate(output_axes):
        if axis:
            rank = mlir_ir.RankedTensorType(results[states + index].type).rank
            results[states + index] = _permute(results[states + index], _axis_back(axis, rank))
    for index in range(states):  # a state's type may be less static than the Scan's result
        results[index] = cast_to(results[index], ctx.result_types[index])
    return results


@dataclass(frozen=True)
class _Layout:
    """A Scan's attributes: how many states and scan outputs, each scan value's axis and
    direction (1: backwards)."""

    states: int
    scan_outputs: int
    input_axes: list[int]
    output_axes: list[int]
    input_reverse: list[int]
    output_reverse: list[int]


def _lower_dynamic_scan(ctx: LoweringRuleContext, block, layout: _Layout) -> list[mlir_ir.Value]:
    """Scan with dynamic dims: the sequence length is the scan inputs' (checked equal at run
    time) and the slices take their sizes with `tensor.dim`. The scan outputs' slice sizes are
    known only once the body has run, so the first iteration is peeled (an
    `scf.execute_region`): its yields size the stacked outputs, the loop runs the others. A
    run-time check makes the program fail on an empty sequence (its outputs' sizes are
    unknown)."""
    states = layout.states
    sources = [
        _permute(value, _axis_first(axis, mlir_ir.RankedTensorType(value.type).rank))
        for value, axis in zip(ctx.operands[states:], layout.input_axes, strict=True)
    ]
    static_lengths = {mlir_ir.RankedTensorType(source.type).shape[0] for source in sources} - {DYNAMIC}
    static_lengths |= {
        ctx.ranked(value, f"scan output #{index}").shape[axis]
        for index, (value, axis) in enumerate(zip(ctx.niro_results[states:], layout.output_axes, strict=True))
    } - {None}
    if len(static_lengths) > 1:
        raise ctx.error(
            f"scan inputs and outputs disagree on the sequence length: {sorted(static_lengths)}"
        )
    length = index_constant(static_lengths.pop()) if static_lengths else dim_size(sources[0], 0)
    valid = cmp("sge", length, 1)
    for source in sources:
        valid = arith.AndIOp(valid, cmp("eq", dim_size(source, 0), length)).result
    assert_true(
        valid,
        f"{ctx.niro_location}: 'onnx.Scan' op: the scan inputs must have one sequence length, at least 1",
    )
    last = sub(length, 1)

    def bind(position: mlir_ir.Value, carried: Sequence[mlir_ir.Value]) -> list[mlir_ir.Value]:
        """The values of the body's arguments at `position`: the states, then the slices."""
        backwards = sub(last, position)
        bound = []
        for argument, value in zip(block.arguments[:states], carried, strict=True):
            bound.append(cast_to(value, lower_type(argument.type)))
        for index, argument in enumerate(block.arguments[states:]):
            offset = backwards if layout.input_reverse[index] else position
            piece = _slice_at(ctx, sources[index], offset)
            bound.append(cast_to(piece, lower_type(argument.type)))
        return bound

    yield_types = [lower_type(value.type) for value in _yielded(block)]
    if len(yield_types) != states + layout.scan_outputs:
        raise ctx.error(f"body yields {len(yield_types)} values, expected {states + layout.scan_outputs}")
    first = scf.ExecuteRegionOp(yield_types)
    entry = first.region.blocks.append()
    with mlir_ir.InsertionPoint(entry):
        bound = bind(index_constant(0), ctx.operands[:states])

    def finish_first(yield_ctx: LoweringRuleContext) -> None:
        scf.YieldOp(list(yield_ctx.operands))

    ctx.lower_block(block, entry, bound, yield_builder=finish_first)
    peeled = list(first.results)
    accumulators = []
    for index, piece in enumerate(peeled[states:]):
        sizes = [length, *tensor_sizes(piece)]
        stacked = empty(sizes, mlir_ir.RankedTensorType(piece.type).element_type)
        offset = last if layout.output_reverse[index] else index_constant(0)
        accumulators.append(_insert_at(piece, stacked, offset))
    loop = scf.ForOp(
        index_constant(1), length, index_constant(1), [*peeled[:states], *accumulators]
    )
    body = loop.body
    with mlir_ir.InsertionPoint(body):
        position = loop.induction_variable
        carried = list(loop.inner_iter_args)
        bound = bind(position, carried[:states])

    def finish(yield_ctx: LoweringRuleContext) -> None:
        yielded = list(yield_ctx.operands)
        stacked = []
        for index, (piece, accumulator) in enumerate(zip(yielded[states:], carried[states:], strict=True)):
            offset = sub(last, position) if layout.output_reverse[index] else position
            stacked.append(_insert_at(piece, accumulator, offset))
        scf.YieldOp([*yielded[:states], *stacked])

    ctx.lower_block(block, body, bound, yield_builder=finish)
    results = list(loop.results)
    for index, axis in enumerate(layout.output_axes):
        value = results[states + index]
        if axis:
            value = _permute(value, _axis_back(axis, mlir_ir.RankedTensorType(value.type).rank))
        results[states + index] = cast_to(value, ctx.result_types[states + index])
    for index in range(states):
        results[index] = cast_to(results[index], ctx.result_types[index])
    return results


def _yielded(block) -> list:
    """The values the body block's terminator yields (its operands)."""
    return list(block.operations[-1].operands)


def _slice_at(ctx: LoweringRuleContext, source: mlir_ir.Value, offset: mlir_ir.Value) -> mlir_ir.Value:
    """Slice `offset` of an axis-first tensor, without the axis (dynamic sizes allowed)."""
    shape = list(mlir_ir.RankedTensorType(source.type).shape)
    dynamic_sizes = [dim_size(source, dim) for dim in range(1, len(shape)) if shape[dim] == DYNAMIC]
    return tensor.ExtractSliceOp(
        _slice_type(source.type),
        source,
        [offset],
        dynamic_sizes,
        [],
        [DYNAMIC] + [0] * (len(shape) - 1),
        [1, *shape[1:]],
        [1] * len(shape),
    ).result


def _insert_at(piece: mlir_ir.Value, stacked: mlir_ir.Value, offset: mlir_ir.Value) -> mlir_ir.Value:
    """`piece` written at `offset` of the leading axis of `stacked` (dynamic sizes allowed)."""
    shape = list(mlir_ir.RankedTensorType(piece.type).shape)
    dynamic_sizes = [size for size in tensor_sizes(piece) if not isinstance(size, int)]
    return tensor.InsertSliceOp(
        piece,
        stacked,
        [offset],
        dynamic_sizes,
        [],
        [DYNAMIC] + [0] * len(shape),
        [1, *shape],
        [1] * (len(shape) + 1),
    ).result


def _axes(ctx: LoweringRuleContext, name: str, values, rank_offset: int) -> list[int]:
    """Attribute `name` (one axis per scan input or output; default 0), made non-negative."""
    found = attribute(ctx, name)
    axes = [0] * len(values) if found is None else [int(axis) for axis in found]
    if len(axes) != len(values):
        raise ctx.error(f"attribute '{name}' has {len(axes)} values, expected {len(values)}")
    normalized = []
    for index, (axis, value) in enumerate(zip(axes, values, strict=True)):
        rank = len(ctx.ranked(value, f"scan value #{index}").shape) + rank_offset
        if not -rank <= axis < rank:
            raise ctx.error(f"attribute '{name}' has axis {axis} out of range for rank {rank}")
        normalized.append(axis % rank)
    return normalized


def _axis_first(axis: int, rank: int) -> list[int]:
    """The dims of a tensor, scan axis first (the others in order)."""
    return [axis, *(dim for dim in range(rank) if dim != axis)]


def _axis_back(axis: int, rank: int) -> list[int]:
    """For each dim of a result whose scan axis is `axis`, the dim of the axis-first tensor."""
    return [dim + 1 if dim < axis else 0 if dim == axis else dim for dim in range(rank)]


def _permute(value: mlir_ir.Value, order: Sequence[int]) -> mlir_ir.Value:
    """`value` with dim k of the result read from dim `order[k]`."""
    if list(order) == list(range(len(order))):
        return value
    ranked = mlir_ir.RankedTensorType(value.type)
    sizes = tensor_sizes(value)
    init = empty([sizes[dim] for dim in order], ranked.element_type)
    spec = [list(order).index(dim) for dim in range(len(order))]
    return generic([(value, spec)], [(init, list(range(len(order))))], len(order), (), lambda a: [a[0]])[0]
