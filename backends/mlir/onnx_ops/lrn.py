"""LRN (local response normalization) across channels.

LRN sums squares over a window of `size` channels: y = x / (bias + alpha / size * sum) ** beta,
the input zero-padded on the channel axis. Of a static input the window is `size` slices of
the padded input shifted along the channels, squared and summed in the one element-wise
`linalg.generic` that computes y; of a dynamic one (any dim may be), the squares are summed by
a generic reducing over the window, then y computed from the sums.

NOTE: IREE 3.13 compiles the window reduction as a pooling-like op that runs at about 1
GFLOP/s on CPU (Inception v1's LRN of 192 x 55 x 55, size 5: 2.7 ms a call, the second slowest
op of the net); the sum of shifted slices is one element-wise op it vectorizes (as a depthwise
convolution's taps, `windows.window_taps`).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType

from ..bindings import arith, math, mlir_ir, tensor
from ..builders import constant, dim, empty, extract_slice, filled, generic, pad, tensor_sizes
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type
from .windows import TAPS_LIMIT

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
    shape = tensor_sizes(x)
    size = attribute(ctx, "size")
    if not isinstance(size, int) or size < 1:
        raise ctx.error(f"needs a positive 'size' attribute, got {size!r}")
    alpha = float(attribute(ctx, "alpha", 0.0001))
    beta = float(attribute(ctx, "beta", 0.75))
    bias = float(attribute(ctx, "bias", 1.0))
    element = lower_scalar_type(scalar)
    loops = [dim(a) for a in range(rank)]
    scale = constant(element, alpha / size)
    offset = constant(element, bias)
    power = constant(element, beta)

    def normalized(x_element: mlir_ir.Value, sum_of_squares: mlir_ir.Value) -> mlir_ir.Value:
        base = arith.AddFOp(offset, arith.MulFOp(scale, sum_of_squares).result).result
        return arith.DivFOp(x_element, math.PowFOp(base, power).result).result

    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    zero = constant(element, 0)
    if mlir_ir.RankedTensorType(x.type).has_static_shape and size <= TAPS_LIMIT:
        padded = pad(x, [0, before] + [0] * (rank - 2), [0, after] + [0] * (rank - 2), zero)
        taps = [extract_slice(padded, [0, k] + [0] * (rank - 2), shape) for k in range(size)]

        def tap_body(args: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
            total = arith.MulFOp(args[1], args[1]).result
            for tap in args[2 : 1 + size]:
                total = arith.AddFOp(total, arith.MulFOp(tap, tap).result).result
            return [normalized(args[0], total)]

        return generic(
            [(x, loops), *((tap, loops) for tap in taps)],
            [(empty(shape, element), loops)],
            rank,
            (),
            tap_body,
        )
    # NOTE: any dim may be dynamic (a dynamic batch or image size): the channel window is a
    # reduction over a padded channel axis, sized at run time like the rest
    squares = generic(
        [(x, loops)],
        [(empty(shape, element), loops)],
        rank,
        (),
        lambda args: [arith.MulFOp(args[0], args[0]).result],
    )[0]
    padded = pad(squares, [0, before] + [0] * (rank - 2), [0, after] + [0] * (rank - 2), zero)
    window = tensor.EmptyOp([size], element).result
    k = dim(rank)
    sums = generic(
        [(padded, [loops[0], loops[1] + k, *loops[2:]]), (window, [k])],
        [(filled(shape, element, zero), loops)],
        rank + 1,
        (rank,),
        lambda args: [arith.AddFOp(args[2], args[0]).result],
    )[0]
    return generic(
        [(x, loops), (sums, loops)],
        [(empty(shape, element), loops)],
        rank,
        (),
        lambda args: [normalized(args[0], args[1])],
    )
