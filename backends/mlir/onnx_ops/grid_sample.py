"""GridSample (2-D and 3-D): a gather `linalg.generic` over the output, as the spec computes it.

For output (n, c, o...) the grid gives normalized coordinates in [-1, 1] (last grid axis:
x, y[, z], i.e. the spatial axes reversed). Each is denormalized (`align_corners` decides
whether -1/1 are pixel centres or edges), rounded half to even for nearest, brought back
inside the borders for `padding_mode` border (clamp) or reflection (mirror, repeatedly), and
the input is read around it: 1 tap (nearest), 2 (linear) or 4 (cubic, Keys with a = -0.75)
per spatial axis, each tap read with the padding rule (zeros outside, clamped, or reflected
index). Arithmetic is f32, as in the reference, except the reflection, done in f64 as the
reference's Python floats are. Any dim but the grid's last may be dynamic (a spatial transformer
exported with dynamic axes): the sizes the geometry needs are then read once, before the loops.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TypeAlias

from niro.ir import ScalarType

from ..bindings import arith, linalg, math, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    constant,
    convert,
    dim,
    dim_size,
    generic,
    index_constant,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type

__all__: list[str] = []

Scalar: TypeAlias = float | mlir_ir.Value
"""A size-derived number: a Python float when the size is static, else an MLIR value."""

MODES = {
    "nearest": "nearest",
    "linear": "linear",
    "bilinear": "linear",
    "cubic": "cubic",
    "bicubic": "cubic",
}


class _Float:
    """Scalar float arithmetic of one MLIR float type (constants folded in as Python floats)."""

    def __init__(self, type_: mlir_ir.Type) -> None:
        self.type = type_

    def v(self, value):
        return constant(self.type, value) if isinstance(value, (int, float)) else value

    def add(self, a, b):
        return arith.AddFOp(self.v(a), self.v(b)).result

    def sub(self, a, b):
        return arith.SubFOp(self.v(a), self.v(b)).result

    def mul(self, a, b):
        return arith.MulFOp(self.v(a), self.v(b)).result

    def div(self, a, b):
        return arith.DivFOp(self.v(a), self.v(b)).result

    def lt(self, a, b):
        return arith.CmpFOp(arith.CmpFPredicate.OLT, self.v(a), self.v(b)).result

    def gt(self, a, b):
        return arith.CmpFOp(arith.CmpFPredicate.OGT, self.v(a), self.v(b)).result

    def select(self, condition, a, b):
        return arith.SelectOp(condition, self.v(a), self.v(b)).result

    def floor(self, a):
        return math.FloorOp(self.v(a)).result


def _reflect(f64: _Float, x: mlir_ir.Value, low: Scalar, high: Scalar) -> mlir_ir.Value:
    """The spec's reflection of x into [low, high] (f64 in, f64 out; borders are Python floats
    or, for a dynamic spatial size, f64 values)."""
    span = high - low if isinstance(low, float) and isinstance(high, float) else f64.sub(high, low)

    def fold(distance, near, far, from_low: bool):
        turns = arith.FPToSIOp(mlir_ir.IntegerType.get_signless(64), f64.div(distance, span)).result
        rest = f64.sub(distance, f64.mul(arith.SIToFPOp(f64.type, turns).result, span))
        even = arith.CmpIOp(
            arith.CmpIPredicate.eq, arith.AndIOp(turns, as_i64(1)).result, as_i64(0)
        ).result
        toward = f64.add(near, rest) if from_low else f64.sub(near, rest)
        away = f64.sub(far, rest) if from_low else f64.add(far, rest)
        return f64.select(even, toward, away)

    below = fold(f64.sub(low, x), low, high, True)
    above = fold(f64.sub(x, high), high, low, False)
    return f64.select(f64.lt(x, low), below, f64.select(f64.gt(x, high), above, x))


@register_lowering("onnx.GridSample", since=16)
def _lower_grid_sample(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, grid = ctx.operands[0], ctx.operands[1]
    x_niro, grid_niro = ctx.niro_operands[0], ctx.niro_operands[1]
    scalar = element_type(x_niro)
    if scalar not in (ScalarType.F32, ScalarType.F64, ScalarType.F16):
        raise ctx.error(f"supports float inputs only, got {scalar.spelling}")
    mode = MODES.get(attribute(ctx, "mode", "linear"))
    if mode is None:
        raise ctx.error(f"does not support mode '{attribute(ctx, 'mode')}'")
    padding_mode = attribute(ctx, "padding_mode", "zeros")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ctx.error(f"does not support padding_mode '{padding_mode}'")
    align = bool(attribute(ctx, "align_corners", 0))
    x_shape = ctx.ranked(x_niro, "input X").shape
    grid_shape = ctx.ranked(grid_niro, "grid").shape
    rank = len(x_shape) - 2
    if rank not in (2, 3) or grid_shape[-1] != rank or len(grid_shape) != rank + 2:
        raise ctx.error(
            f"supports 2-D and 3-D sampling only, got X {x_shape} and grid {grid_shape}"
        )
    # Each result dim and where its size comes from: X's batch and channels, grid's spatial.
    sources = [(x, x_shape, 0), (x, x_shape, 1)]
    sources += [(grid, grid_shape, axis) for axis in range(1, rank + 1)]
    result_shape = ctx.ranked(ctx.niro_results[0], "the result").shape
    if len(result_shape) != len(sources):
        raise ctx.error(f"result rank {len(result_shape)} differs from the computed {len(sources)}")
    out_sizes: list[int | mlir_ir.Value] = []
    for declared, (value, shape, axis) in zip(result_shape, sources, strict=True):
        if shape[axis] is not None and declared is not None and shape[axis] != declared:
            raise ctx.error(
                f"result dim {len(out_sizes)} is {declared}, the inputs give {shape[axis]}"
            )
        size = shape[axis] if shape[axis] is not None else declared
        out_sizes.append(size if size is not None else dim_size(value, axis))
    element = lower_scalar_type(scalar)
    f32 = _Float(mlir_ir.F32Type.get())
    f64 = _Float(mlir_ir.F64Type.get())
    i64 = mlir_ir.IntegerType.get_signless(64)
    grid_scalar = element_type(grid_niro)
    # Spatial sizes: Python numbers when static, else values read once outside the loops.
    spatial: list[int | mlir_ir.Value] = []
    for axis in range(rank):
        if x_shape[2 + axis] is not None:
            spatial.append(x_shape[2 + axis])
        else:
            spatial.append(as_i64(dim_size(x, 2 + axis)))

    def as_float(size, f: _Float) -> Scalar:
        return float(size) if isinstance(size, int) else arith.SIToFPOp(f.type, size).result

    sizes32 = [as_float(size, f32) for size in spatial]
    lasts32 = [size - 1.0 if isinstance(size, float) else f32.sub(size, 1.0) for size in sizes32]
    borders = []
    for extent in (as_float(size, f64) for size in spatial):
        if isinstance(extent, float):
            borders.append((0.0, extent - 1.0) if align else (-0.5, extent - 0.5))
        else:
            borders.append((0.0, f64.sub(extent, 1.0)) if align else (-0.5, f64.sub(extent, 0.5)))
    borders32 = [
        (low, high if isinstance(high, float) else arith.TruncFOp(f32.type, high).result)
        for low, high in borders
    ]
    last64 = [
        size - 1 if isinstance(size, int) else arith.SubIOp(size, as_i64(1)).result
        for size in spatial
    ]

    def to32(value, scalar_):
        if scalar_ is ScalarType.F32:
            return value
        if scalar_ is ScalarType.F64:
            return arith.TruncFOp(f32.type, value).result
        return arith.ExtFOp(f32.type, value).result

    def tap(index_i64, axis):
        """(clamped in-range index, inside flag or None) of an integer tap on one axis."""
        size = spatial[axis]
        if padding_mode == "reflection":
            low, high = borders[axis]
            as_f64 = arith.SIToFPOp(f64.type, index_i64).result
            index_i64 = arith.FPToSIOp(
                mlir_ir.IntegerType.get_signless(64), _reflect(f64, as_f64, low, high)
            ).result
        inside = None
        if padding_mode == "zeros":
            inside = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.sge, index_i64, as_i64(0)).result,
                arith.CmpIOp(arith.CmpIPredicate.slt, index_i64, as_i64(size)).result,
            ).result
        clamped = arith.MaxSIOp(index_i64, as_i64(0)).result
        clamped = arith.MinSIOp(clamped, as_i64(last64[axis])).result
        return as_index(clamped), inside

    def cubic(t):
        a = -0.75
        t1, s, s1 = f32.add(t, 1.0), f32.sub(1.0, t), f32.sub(2.0, t)
        return [
            f32.sub(
                f32.mul(f32.add(f32.mul(f32.sub(f32.mul(a, t1), 5 * a), t1), 8 * a), t1), 4 * a
            ),
            f32.add(f32.mul(f32.mul(f32.sub(f32.mul(a + 2, t), a + 3), t), t), 1.0),
            f32.add(f32.mul(f32.mul(f32.sub(f32.mul(a + 2, s), a + 3), s), s), 1.0),
            f32.sub(
                f32.mul(f32.add(f32.mul(f32.sub(f32.mul(a, s1), 5 * a), s1), 8 * a), s1), 4 * a
            ),
        ]

    def body(args):
        indices = [linalg.IndexOp(axis).result for axis in range(len(out_sizes))]
        grid_prefix = [indices[0], *indices[2:]]
        reads = []  # per spatial axis: [(index, inside flag or None, coefficient or None)]
        for axis in range(rank):
            component = index_constant(rank - 1 - axis)
            normalized = to32(tensor.ExtractOp(grid, [*grid_prefix, component]).result, grid_scalar)
            size = sizes32[axis]
            if align:
                coordinate = f32.mul(f32.div(f32.add(normalized, 1.0), 2.0), lasts32[axis])
            else:
                coordinate = f32.div(f32.sub(f32.mul(f32.add(normalized, 1.0), size), 1.0), 2.0)
            if mode == "nearest":
                coordinate = math.RoundEvenOp(coordinate).result
            low, high = borders32[axis]
            if padding_mode == "border":
                outside = arith.OrIOp(f32.lt(coordinate, low), f32.gt(coordinate, high)).result
                clamped = arith.MinimumFOp(
                    arith.MaximumFOp(coordinate, f32.v(0.0)).result, f32.v(lasts32[axis])
                ).result
                coordinate = f32.select(outside, clamped, coordinate)
            elif padding_mode == "reflection":
                wide = arith.ExtFOp(f64.type, coordinate).result
                coordinate = arith.TruncFOp(f32.type, _reflect(f64, wide, *borders[axis])).result
            if mode == "nearest":
                index, inside = tap(arith.FPToSIOp(i64, coordinate).result, axis)
                reads.append([(index, inside, None)])
                continue
            base = f32.floor(coordinate)
            fraction = f32.sub(coordinate, base)
            base_i64 = arith.FPToSIOp(i64, base).result
            offsets: tuple[int, ...]
            if mode == "linear":
                offsets, coefficients = (0, 1), [f32.sub(1.0, fraction), fraction]
            else:
                offsets, coefficients = (-1, 0, 1, 2), cubic(fraction)
            axis_reads = []
            for offset, coefficient in zip(offsets, coefficients, strict=True):
                index, inside = tap(arith.AddIOp(base_i64, as_i64(offset)).result, axis)
                axis_reads.append((index, inside, coefficient))
            reads.append(axis_reads)
        total = None
        for combination in itertools.product(*reads):
            value = tensor.ExtractOp(
                x, [indices[0], indices[1], *(r[0] for r in combination)]
            ).result
            value = to32(value, scalar)
            flags = [r[1] for r in combination if r[1] is not None]
            if flags:
                inside = flags[0]
                for flag in flags[1:]:
                    inside = arith.AndIOp(inside, flag).result
                value = f32.select(inside, value, 0.0)
            for r in combination:
                if r[2] is not None:
                    value = f32.mul(value, r[2])
            total = value if total is None else f32.add(total, value)
        if scalar is ScalarType.F32:
            return total
        if scalar is ScalarType.F64:
            return arith.ExtFOp(element, total).result
        return convert(total, element)

    loops = [dim(axis) for axis in range(len(out_sizes))]
    init = tensor.EmptyOp(out_sizes, element).result
    return [generic([], [(init, loops)], len(out_sizes), (), lambda args: [body(args)])[0]]
