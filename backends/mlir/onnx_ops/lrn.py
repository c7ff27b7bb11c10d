"""LRN (local response normalization) across channels.

LRN sums squares over a window of channels: the squares are zero-padded on the channel axis and
summed by a window `linalg.generic`, then y = x / (bias + alpha / size * sum) ** beta. Any dim
may be dynamic.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, ir, math, tensor
from ..context import LoweringRuleContext, register_lowering
from ..types import lower_scalar_type
from . import structured
from .common import attribute, element_type
from .windows import (
    PARALLEL,
    REDUCTION,
    dim,
    filled,
    generic,
    pad,
    scalar_constant,
    tensor_type,
)

__all__: list[str] = []

FLOATS = (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64)


@register_lowering("onnx.LRN")
def _lower_lrn(ctx: LoweringRuleContext) -> Sequence[ir.Value]:
    x, x_niro = ctx.operands[0], ctx.niro_operands[0]
    scalar = element_type(x_niro)
    if scalar not in FLOATS:
        raise ctx.error(f"supports float tensors only, got {scalar.spelling}")
    rank = len(ctx.ranked(x_niro, "input X").shape)
    if rank < 3:
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got {x_niro.type}")
    # NOTE: any dim may be dynamic (a dynamic batch or image size): the channel window is a
    # reduction over a padded channel axis, sized at run time like the rest
    shape = structured.tensor_sizes(x)
    size = attribute(ctx, "size")
    if not isinstance(size, int) or size < 1:
        raise ctx.error(f"needs a positive 'size' attribute, got {size!r}")
    alpha = float(attribute(ctx, "alpha", 0.0001))
    beta = float(attribute(ctx, "beta", 0.75))
    bias = float(attribute(ctx, "bias", 1.0))
    element = lower_scalar_type(scalar)
    loops = [dim(a) for a in range(rank)]
    result_type = tensor_type(shape, element)

    squares = generic(
        result_type,
        [x],
        structured.empty(shape, element),
        [loops, loops],
        [PARALLEL] * rank,
        lambda args: arith.MulFOp(args[0], args[0]).result,
    )
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = pad(
        ctx,
        squares,
        [0, before] + [0] * (rank - 2),
        [0, after] + [0] * (rank - 2),
        ctx.zero(element),
    )
    window = tensor.EmptyOp([size], element).result
    k = dim(rank)
    zero = ctx.zero(element)
    sums = generic(
        result_type,
        [padded, window],
        filled(ctx, shape, element, zero),
        [[loops[0], loops[1] + k, *loops[2:]], [k], loops],
        [PARALLEL] * rank + [REDUCTION],
        lambda args: arith.AddFOp(args[2], args[0]).result,
    )
    scale = scalar_constant(element, alpha / size)
    offset = scalar_constant(element, bias)
    power = scalar_constant(element, beta)

    def body(args):
        base = arith.AddFOp(offset, arith.MulFOp(scale, args[1]).result).result
        return arith.DivFOp(args[0], math.PowFOp(base, power).result).result

    return [
        generic(
            result_type,
            [x, sums],
            structured.empty(shape, element),
            [loops, loops, loops],
            [PARALLEL] * rank,
            body,
        )
    ]
