"""Scan (opset 9+) as an `scf.for` over the statically known sequence length.

The body region's entry block takes the N state values and one slice of each of the M scan
inputs; its Yield gives the N new states and K scan-output slices. The loop carries the
states and the K stacked outputs (each slice written with `tensor.insert_slice` at the
iteration's position), and reads each scan input slice with a rank-reducing
`tensor.extract_slice`; `scan_*_directions` 1 walks that input or output backwards. A scan
axis other than 0 is handled by a transpose that brings it to the front before the loop (scan
inputs) or moves it back after it (scan outputs). Sequence lengths must be static.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import UnknownOp

from ..bindings import arith, ir, scf, tensor
from ..context import LoweringRuleContext, register_lowering
from .common import attribute
from .structured import generic
from .windows import static_shape

__all__: list[str] = []


def _flags(ctx: LoweringRuleContext, name: str, count: int, allowed: tuple[int, ...]) -> list[int]:
    values = attribute(ctx, name)
    values = [0] * count if values is None else [int(v) for v in values]
    if len(values) != count:
        raise ctx.error(f"attribute '{name}' has {len(values)} values, expected {count}")
    if any(v not in allowed for v in values):
        raise ctx.error(f"supports {name} in {allowed} only, got {values}")
    return values


def _slice_type(type_: ir.Type) -> ir.RankedTensorType:
    ranked = ir.RankedTensorType(type_)
    return ir.RankedTensorType.get(list(ranked.shape)[1:], ranked.element_type)


@register_lowering("onnx.Scan", since=9)
def _lower_scan(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    op: UnknownOp = ctx.op  # type: ignore[assignment]
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
        _permute(value, _axis_first(axis, ir.RankedTensorType(value.type).rank))
        for value, axis in zip(ctx.operands[states:], input_axes, strict=True)
    ]
    accumulators = []
    for type_, axis in zip(ctx.result_types[states:], output_axes, strict=True):
        ranked = ir.RankedTensorType(type_)
        shape = list(ranked.shape)
        order = _axis_first(axis, len(shape))
        accumulators.append(tensor.EmptyOp([shape[d] for d in order], ranked.element_type).result)
    loop = scf.ForOp(
        ctx.index_constant(0),
        ctx.index_constant(length),
        ctx.index_constant(1),
        [*ctx.operands[:states], *accumulators],
    )
    dynamic = ir.ShapedType.get_dynamic_size()
    body = loop.body
    with ir.InsertionPoint(body):
        position = loop.induction_variable
        backwards = arith.SubIOp(ctx.index_constant(length - 1), position).result
        carried = list(loop.inner_iter_args)
        for argument, value in zip(block.arguments[:states], carried[:states], strict=True):
            ctx.lowering.values[argument.id] = value
        for index, argument in enumerate(block.arguments[states:]):
            source = sources[index]
            shape = list(ir.RankedTensorType(source.type).shape)
            offset = backwards if input_reverse[index] else position
            piece = tensor.ExtractSliceOp(
                _slice_type(source.type),
                source,
                [offset],
                [],
                [],
                [dynamic] + [0] * (len(shape) - 1),
                [1, *shape[1:]],
                [1] * len(shape),
            ).result
            ctx.lowering.values[argument.id] = piece

    def finish(yield_ctx: LoweringRuleContext) -> None:
        yielded = list(yield_ctx.operands)
        if len(yielded) != states + scan_outputs:
            raise ctx.error(f"body yields {len(yielded)} values, expected {states + scan_outputs}")
        stacked = []
        for index, (piece, accumulator) in enumerate(
            zip(yielded[states:], carried[states:], strict=True)
        ):
            shape = list(ir.RankedTensorType(accumulator.type).shape)
            offset = backwards if output_reverse[index] else position
            stacked.append(
                tensor.InsertSliceOp(
                    piece,
                    accumulator,
                    [offset],
                    [],
                    [],
                    [dynamic] + [0] * (len(shape) - 1),
                    [1, *shape[1:]],
                    [1] * len(shape),
                ).result
            )
        scf.YieldOp([*yielded[:states], *stacked])

    ctx.lowering.lower_single_block(
        block, body, ctx.niro_location.path + ("region#0", "^bb0"), yield_builder=finish
    )
    results = list(loop.results)
    for index, axis in enumerate(output_axes):
        if axis:
            rank = ir.RankedTensorType(results[states + index].type).rank
            results[states + index] = _permute(results[states + index], _axis_back(axis, rank))
    return results


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


def _permute(value: ir.Value, order: Sequence[int]) -> ir.Value:
    """`value` with dim k of the result read from dim `order[k]` (static shapes)."""
    if list(order) == list(range(len(order))):
        return value
    ranked = ir.RankedTensorType(value.type)
    shape = list(ranked.shape)
    init = tensor.EmptyOp([shape[dim] for dim in order], ranked.element_type).result
    spec = [list(order).index(dim) for dim in range(len(order))]
    return generic([(value, spec)], [(init, list(range(len(order))))], len(order), (), lambda a: [a[0]])[0]
