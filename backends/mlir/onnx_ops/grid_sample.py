"""GridSample (2-D and 3-D): a gather `linalg.generic` over the output, as the spec computes it.

For output (n, c, o...) the grid gives normalized coordinates in [-1, 1] (last grid axis:
x, y[, z], i.e. the spatial axes reversed). Each is denormalized (`align_corners` decides
whether -1/1 are pixel centres or edges), rounded half to even for nearest, brought back
inside the borders for `padding_mode` border (clamp) or reflection (mirror, repeatedly), and
the input is read around it: 1 tap (nearest), 2 (linear) or 4 (cubic, Keys with a = -0.75)
per spatial axis, each tap read with the padding rule (zeros outside, clamped, or reflected
index). Arithmetic is f32, as in the reference, except the reflection, done in f64 as the
reference's Python floats are.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, ir, linalg, math, tensor
from ..context import LoweringRuleContext, register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type
from .windows import PARALLEL, dim, generic, scalar_constant, static_shape

__all__: list[str] = []

MODES = {
    "nearest": "nearest",
    "linear": "linear",
    "bilinear": "linear",
    "cubic": "cubic",
    "bicubic": "cubic",
}


class _Float:
    """Scalar float arithmetic of one MLIR float type (constants folded in as Python floats)."""

    def __init__(self, type_: ir.Type) -> None:
        self.type = type_

    def v(self, value):
        return scalar_constant(self.type, value) if isinstance(value, (int, float)) else value

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


def _i64(value: int) -> ir.Value:
    return scalar_constant(ir.IntegerType.get_signless(64), value)


def _reflect(f64: _Float, x: ir.Value, low: float, high: float) -> ir.Value:
    """The spec's reflection of x into [low, high] (f64 in, f64 out)."""
    span = high - low

    def fold(distance, near, far):
        turns = arith.FPToSIOp(ir.IntegerType.get_signless(64), f64.div(distance, span)).result
        rest = f64.sub(distance, f64.mul(arith.SIToFPOp(f64.type, turns).result, span))
        even = arith.CmpIOp(
            arith.CmpIPredicate.eq, arith.AndIOp(turns, _i64(1)).result, _i64(0)
        ).result
        toward = f64.add(near, rest) if near == low else f64.sub(near, rest)
        away = f64.sub(far, rest) if far == high else f64.add(far, rest)
        return f64.select(even, toward, away)

    below = fold(f64.sub(low, x), low, high)
    above = fold(f64.sub(x, high), high, low)
    return f64.select(f64.lt(x, low), below, f64.select(f64.gt(x, high), above, x))


@register_lowering("onnx.GridSample", since=16)
def _lower_grid_sample(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
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
    x_shape = static_shape(ctx, x_niro, "input X")
    grid_shape = static_shape(ctx, grid_niro, "grid")
    spatial = x_shape[2:]
    rank = len(spatial)
    if rank not in (2, 3) or grid_shape[-1] != rank or len(grid_shape) != rank + 2:
        raise ctx.error(
            f"supports 2-D and 3-D sampling only, got X {x_shape} and grid {grid_shape}"
        )
    out_shape = (x_shape[0], x_shape[1], *grid_shape[1:-1])
    if static_shape(ctx, ctx.niro_results[0], "the result") != out_shape:
        raise ctx.error(f"result shape differs from the computed {out_shape}")
    element = lower_scalar_type(scalar)
    f32 = _Float(ir.F32Type.get())
    f64 = _Float(ir.F64Type.get())
    grid_scalar = element_type(grid_niro)
    borders = [(0.0, size - 1.0) if align else (-0.5, size - 0.5) for size in spatial]

    def to32(value, scalar_):
        if scalar_ is ScalarType.F32:
            return value
        if scalar_ is ScalarType.F64:
            return arith.TruncFOp(f32.type, value).result
        return arith.ExtFOp(f32.type, value).result

    def index_of(value_i64, size):
        return arith.IndexCastOp(ir.IndexType.get(), value_i64).result, size

    def tap(index_i64, axis):
        """(clamped in-range index, inside flag or None) of an integer tap on one axis."""
        size = spatial[axis]
        if padding_mode == "reflection":
            low, high = borders[axis]
            as_f64 = arith.SIToFPOp(f64.type, index_i64).result
            index_i64 = arith.FPToSIOp(
                ir.IntegerType.get_signless(64), _reflect(f64, as_f64, low, high)
            ).result
        inside = None
        if padding_mode == "zeros":
            inside = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.sge, index_i64, _i64(0)).result,
                arith.CmpIOp(arith.CmpIPredicate.slt, index_i64, _i64(size)).result,
            ).result
        clamped = arith.MaxSIOp(index_i64, _i64(0)).result
        clamped = arith.MinSIOp(clamped, _i64(size - 1)).result
        return arith.IndexCastOp(ir.IndexType.get(), clamped).result, inside

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
        indices = [linalg.IndexOp(axis).result for axis in range(len(out_shape))]
        grid_prefix = [indices[0], *indices[2:]]
        reads = []  # per spatial axis: [(index, inside flag or None, coefficient or None)]
        for axis in range(rank):
            component = ctx.index_constant(rank - 1 - axis)
            normalized = to32(tensor.ExtractOp(grid, [*grid_prefix, component]).result, grid_scalar)
            size = float(spatial[axis])
            if align:
                coordinate = f32.mul(f32.div(f32.add(normalized, 1.0), 2.0), size - 1)
            else:
                coordinate = f32.div(f32.sub(f32.mul(f32.add(normalized, 1.0), size), 1.0), 2.0)
            if mode == "nearest":
                coordinate = math.RoundEvenOp(coordinate).result
            low, high = borders[axis]
            if padding_mode == "border":
                outside = arith.OrIOp(f32.lt(coordinate, low), f32.gt(coordinate, high)).result
                clamped = arith.MinimumFOp(
                    arith.MaximumFOp(coordinate, f32.v(0.0)).result, f32.v(size - 1)
                ).result
                coordinate = f32.select(outside, clamped, coordinate)
            elif padding_mode == "reflection":
                wide = arith.ExtFOp(f64.type, coordinate).result
                coordinate = arith.TruncFOp(f32.type, _reflect(f64, wide, low, high)).result
            i64 = ir.IntegerType.get_signless(64)
            if mode == "nearest":
                index, inside = tap(arith.FPToSIOp(i64, coordinate).result, axis)
                reads.append([(index, inside, None)])
                continue
            base = f32.floor(coordinate)
            fraction = f32.sub(coordinate, base)
            base_i64 = arith.FPToSIOp(i64, base).result
            if mode == "linear":
                offsets, coefficients = (0, 1), [f32.sub(1.0, fraction), fraction]
            else:
                offsets, coefficients = (-1, 0, 1, 2), cubic(fraction)
            axis_reads = []
            for offset, coefficient in zip(offsets, coefficients, strict=True):
                index, inside = tap(arith.AddIOp(base_i64, _i64(offset)).result, axis)
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
        return arith.TruncFOp(element, total).result

    loops = [dim(axis) for axis in range(len(out_shape))]
    init = tensor.EmptyOp(list(out_shape), element).result
    return [
        generic(
            ir.RankedTensorType.get(list(out_shape), element),
            [],
            init,
            [loops],
            [PARALLEL] * len(out_shape),
            body,
        )
    ]
