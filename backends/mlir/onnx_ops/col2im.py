"""Col2Im: the columns of an im2col (N, C * prod(block), L) summed back into an image.

Written as a gather so it is one `linalg.generic`: output (n, c, p...) sums, over the kernel
taps j of the block (a reduction loop of static extent prod(block)), the input column whose
window put tap j on p: per spatial axis t = p + pad_begin - k*dilation must be a non-negative
multiple of the stride with t / stride inside the L_axis columns. `block_shape` may be a
graph input (its product is static: input channels / C; its factors are read at run time),
`image_shape` must agree with the static result shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import constant, dim, filled, generic, i64_constant, index_constant
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type, static_shape

__all__: list[str] = []


@register_lowering("onnx.Col2Im", since=18)
def _lower_col2im(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = ctx.operands[0], ctx.niro_operands[0]
    scalar = element_type(x_niro)
    if not scalar.is_float:
        raise ctx.error(f"supports float inputs only, got {scalar.spelling}")
    x_shape = static_shape(ctx, x_niro, "input")
    out_shape = static_shape(ctx, ctx.niro_results[0], "the result")
    image = out_shape[2:]
    rank = len(image)
    if len(x_shape) != 3 or rank < 1:
        raise ctx.error(f"needs an input (N, C*prod(block), L) and an image, got {x_shape}")
    batch, channels = out_shape[0], out_shape[1]
    if x_shape[0] != batch or x_shape[1] % channels:
        raise ctx.error(f"input {x_shape} does not fit the result {out_shape}")
    taps = x_shape[1] // channels
    image_constant = ctx.constant_operand(1)
    if image_constant is not None and tuple(int(v) for v in image_constant) != tuple(image):
        raise ctx.error(
            f"image_shape {tuple(image_constant)} disagrees with the result {out_shape}"
        )
    ints = lambda name, default: tuple(int(v) for v in attribute(ctx, name, default))  # noqa: E731
    strides = ints("strides", (1,) * rank)
    dilations = ints("dilations", (1,) * rank)
    pads = ints("pads", (0,) * (2 * rank))
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ctx.error("strides, dilations and pads need one value (pads: two) per image axis")
    i64 = mlir_ir.IntegerType.get_signless(64)
    block_constant = ctx.constant_operand(2)
    if block_constant is not None:
        if len(block_constant) != rank or int(block_constant.prod()) != taps:
            raise ctx.error(f"block_shape {tuple(block_constant)} does not fit {taps} taps")
        blocks = [i64_constant(int(v)) for v in block_constant]
    else:
        if static_shape(ctx, ctx.niro_operands[2], "block_shape") != (rank,):
            raise ctx.error(f"needs block_shape with {rank} values")
        blocks = [
            tensor.ExtractOp(ctx.operands[2], [index_constant(a)]).result for a in range(rank)
        ]
    # columns per axis: (image + pads - (d * (block - 1) + 1)) / stride + 1, at run time
    columns = []
    for a in range(rank):
        span = arith.AddIOp(
            arith.MulIOp(
                i64_constant(dilations[a]), arith.SubIOp(blocks[a], i64_constant(1)).result
            ).result,
            i64_constant(1),
        ).result
        room = arith.SubIOp(i64_constant(image[a] + pads[a] + pads[rank + a]), span).result
        columns.append(
            arith.AddIOp(
                arith.DivSIOp(room, i64_constant(strides[a])).result, i64_constant(1)
            ).result
        )
    element = lower_scalar_type(scalar)
    zero = constant(element, 0)

    def body(args):
        index = [linalg.IndexOp(a).result for a in range(3 + rank)]
        as_i64 = lambda v: arith.IndexCastOp(i64, v).result  # noqa: E731
        rest = as_i64(index[2 + rank])
        kernel = [None] * rank
        for a in reversed(range(rank)):
            kernel[a] = arith.RemSIOp(rest, blocks[a]).result
            rest = arith.DivSIOp(rest, blocks[a]).result
        valid, flat = None, i64_constant(0)
        for a in range(rank):
            t = arith.SubIOp(
                arith.AddIOp(as_i64(index[2 + a]), i64_constant(pads[a])).result,
                arith.MulIOp(kernel[a], i64_constant(dilations[a])).result,
            ).result
            column = arith.DivSIOp(t, i64_constant(strides[a])).result
            checks = [
                arith.CmpIOp(arith.CmpIPredicate.sge, t, i64_constant(0)).result,
                arith.CmpIOp(
                    arith.CmpIPredicate.eq,
                    arith.RemSIOp(t, i64_constant(strides[a])).result,
                    i64_constant(0),
                ).result,
                arith.CmpIOp(arith.CmpIPredicate.slt, column, columns[a]).result,
            ]
            for check in checks:
                valid = check if valid is None else arith.AndIOp(valid, check).result
            flat = arith.AddIOp(arith.MulIOp(flat, columns[a]).result, column).result
        flat = arith.SelectOp(valid, flat, i64_constant(0)).result
        channel = arith.AddIOp(
            arith.MulIOp(as_i64(index[1]), i64_constant(taps)).result, as_i64(index[2 + rank])
        ).result
        to_index = lambda v: arith.IndexCastOp(mlir_ir.IndexType.get(), v).result  # noqa: E731
        value = tensor.ExtractOp(x, [index[0], to_index(channel), to_index(flat)]).result
        value = arith.SelectOp(valid, value, zero).result
        return arith.AddFOp(args[1], value).result

    window = tensor.EmptyOp([taps], element).result
    loops = [dim(a) for a in range(2 + rank)]
    return [
        generic(
            [(window, [dim(2 + rank)])],
            [(filled(out_shape, element, zero), loops)],
            3 + rank,
            (2 + rank,),
            lambda args: [body(args)],
        )[0]
    ]
