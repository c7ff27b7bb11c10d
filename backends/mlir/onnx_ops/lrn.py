"""LRN (local response normalization) across channels.

LRN sums squares over a window of channels: the squares are zero-padded on the channel axis and
summed by a window `linalg.generic`, then y = x / (bias + alpha / size * sum) ** beta. Any dim
may be dynamic.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, math, mlir_ir, tensor
from ..builders import constant, dim, empty, filled, generic, pad, tensor_sizes
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type

__all__: list[str] = []

FLOATS = (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64)


@register_lowering("onnx.LRN")
def _lower_lrn(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = ctx.operands[0], ctx.niro_operands[0]
    scalar = element_type(x_niro)
    if scalar not in FLOATS:
        raise ctx.error(f"supports float tensors only, got {scalar.spelling}")
    rank = len(ctx.ranked(x_niro, "input X").shape)
    if rank < 3:
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got {x_niro.type}")
    # NOTE: any dim may be dynamic (a dynamic batch or image size): the channel window is a
    # reduction over a padded channel axis, sized at run time like the rest
    shape = tensor_sizes(x)
    size = attribute(ctx, "size")
    if not isinstance(size, int) or size < 1:
        raise ctx.error(f"needs a positive 'size' attribute, got {size!r}")
    alpha = float(attribute(ctx, "alpha", 0.0001))
    beta = float(attribute(ctx, "beta", 0.75))
    bias = float(attribute(ctx, "bias", 1.0))
    element = lower_scalar_type(scalar)
    loops = [dim(a) for a in range(rank)]

    squares = generic(
        [(x, loops)],
        [(empty(shape, element), loops)],
        rank,
        (),
        lambda args: [arith.MulFOp(args[0], args[0]).result],
    )[0]
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = pad(
        squares, [0, before] + [0] * (rank - 2), [0, after] + [0] * (rank - 2), constant(element, 0)
    )
    window = tensor.EmptyOp([size], element).result
    k = dim(rank)
    zero = constant(element, 0)
    sums = generic(
        [(padded, [loops[0], loops[1] + k, *loops[2:]]), (window, [k])],
        [(filled(shape, element, zero), loops)],
        rank + 1,
        (rank,),
        lambda args: [arith.AddFOp(args[2], args[0]).result],
    )[0]
    scale = constant(element, alpha / size)
    offset = constant(element, bias)
    power = constant(element, beta)

    def body(args):
        base = arith.AddFOp(offset, arith.MulFOp(scale, args[1]).result).result
        return arith.DivFOp(args[0], math.PowFOp(base, power).result).result

    return [
        generic(
            [(x, loops), (sums, loops)],
            [(empty(shape, element), loops)],
            rank,
            (),
            lambda args: [body(args)],
        )[0]
    ]
