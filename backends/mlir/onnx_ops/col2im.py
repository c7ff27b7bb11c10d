"""Col2Im: the columns of an im2col (N, C * prod(block), L) summed back into an image.

Written as a gather so it is one `linalg.generic`: output (n, c, p...) sums, over the kernel
taps j of the block (a reduction loop of extent prod(block)), the input column whose
window put tap j on p: per spatial axis t = p + pad_begin - k*dilation must be a non-negative
multiple of the stride with t / stride inside the L_axis columns. `block_shape` and
`image_shape` may be graph inputs. The taps and channels come from the static shapes where
they tell (input channels / C), else at run time (prod(block), input channels / taps, checked
to divide); an image size the result type leaves dynamic is read from `image_shape`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    assert_true,
    cast_to,
    constant,
    dim,
    dim_size,
    filled,
    generic,
    i64_constant,
    read_int_scalars,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type

__all__: list[str] = []


@register_lowering("onnx.Col2Im", since=18)
def _lower_col2im(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x, x_niro = ctx.operands[0], ctx.niro_operands[0]
    scalar = element_type(x_niro)
    if not scalar.is_float:
        raise ctx.error(f"supports float inputs only, got {scalar.spelling}")
    x_shape = ctx.ranked(x_niro, "input").shape
    out_shape = ctx.ranked(ctx.niro_results[0], "the result").shape
    rank = len(out_shape) - 2
    if len(x_shape) != 3 or rank < 1:
        raise ctx.error(f"needs an input (N, C*prod(block), L) and an image, got {x_shape}")
    if None not in (x_shape[0], out_shape[0]) and x_shape[0] != out_shape[0]:
        raise ctx.error(f"input {x_shape} does not fit the result {out_shape}")
    ints = lambda name, default: tuple(int(v) for v in attribute(ctx, name, default))  # noqa: E731
    strides = ints("strides", (1,) * rank)
    dilations = ints("dilations", (1,) * rank)
    pads = ints("pads", (0,) * (2 * rank))
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ctx.error("strides, dilations and pads need one value (pads: two) per image axis")
    block_constant = ctx.constant_operand(2)
    if block_constant is not None and any(int(size) < 1 for size in block_constant):
        raise ctx.error(f"block_shape {tuple(block_constant)} needs sizes of at least 1")
    # A run-time block size below 1 stops the program with the op's location. Each size is used
    # as max(size, 1) all the same: the divisions below run whatever the checks say (the check
    # that the input's dim 1 divides by prod(block) computes that remainder itself), and an
    # integer division by zero kills the whole process (SIGFPE) instead of failing the call.
    blocks = _vector(ctx, 2, rank, "block_shape")
    for a, size in enumerate(blocks if block_constant is None else ()):
        assert_true(
            arith.CmpIOp(arith.CmpIPredicate.sge, size, i64_constant(1)).result,
            f"{ctx.niro_location}: 'onnx.Col2Im' op: block_shape needs sizes of at least 1",
        )
        blocks[a] = arith.MaxSIOp(size, i64_constant(1)).result
    # The taps (prod(block)) and channels from the static shapes where they tell (the MLIR of
    # a static model is as it was), else at run time from block_shape and the input's dim 1.
    taps: int | mlir_ir.Value
    channels: int | mlir_ir.Value
    if x_shape[1] is not None and out_shape[1] is not None:
        channels = out_shape[1]
        if x_shape[1] % channels:
            raise ctx.error(f"input {x_shape} does not fit the result {out_shape}")
        taps = x_shape[1] // channels
        if block_constant is not None and int(block_constant.prod()) != taps:
            raise ctx.error(f"block_shape {tuple(block_constant)} does not fit {taps} taps")
    elif x_shape[1] is not None and block_constant is not None:
        taps = int(block_constant.prod())
        if taps <= 0 or x_shape[1] % taps:
            raise ctx.error(f"block_shape {tuple(block_constant)} does not fit input {x_shape}")
        channels = x_shape[1] // taps
    else:
        product = blocks[0]
        for block in blocks[1:]:
            product = arith.MulIOp(product, block).result
        rows = as_i64(dim_size(x, 1))
        assert_true(
            arith.CmpIOp(
                arith.CmpIPredicate.eq, arith.RemSIOp(rows, product).result, i64_constant(0)
            ).result,
            f"{ctx.niro_location}: 'onnx.Col2Im' op: the input's dim 1 is not a multiple of "
            "prod(block_shape)",
        )
        taps, channels = as_index(product), as_index(arith.DivSIOp(rows, product).result)
    image_constant = ctx.constant_operand(1)
    if image_constant is not None and any(
        size is not None and size != int(value)
        for size, value in zip(out_shape[2:], image_constant, strict=False)
    ):
        raise ctx.error(
            f"image_shape {tuple(image_constant)} disagrees with the result {out_shape}"
        )
    image_values = [] if None not in out_shape[2:] else _vector(ctx, 1, rank, "image_shape")
    image: list[int | mlir_ir.Value] = [
        size if size is not None else as_index(image_values[a])
        for a, size in enumerate(out_shape[2:])
    ]
    sizes: list[int | mlir_ir.Value] = [
        out_shape[0] if out_shape[0] is not None else x_shape[0] if x_shape[0] is not None else dim_size(x, 0),
        channels,
        *image,
    ]
    taps_i64 = as_i64(taps)
    # columns per axis: (image + pads - (d * (block - 1) + 1)) / stride + 1, at run time
    columns = []
    for a in range(rank):
        span = arith.AddIOp(
            arith.MulIOp(
                i64_constant(dilations[a]), arith.SubIOp(blocks[a], i64_constant(1)).result
            ).result,
            i64_constant(1),
        ).result
        extent = image[a]
        padded = (
            i64_constant(extent + pads[a] + pads[rank + a])
            if isinstance(extent, int)
            else arith.AddIOp(as_i64(extent), i64_constant(pads[a] + pads[rank + a])).result
        )
        room = arith.SubIOp(padded, span).result
        columns.append(
            arith.AddIOp(
                arith.DivSIOp(room, i64_constant(strides[a])).result, i64_constant(1)
            ).result
        )
    element = lower_scalar_type(scalar)
    zero = constant(element, 0)

    def body(args):
        index = [linalg.IndexOp(a).result for a in range(3 + rank)]
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
            arith.MulIOp(as_i64(index[1]), taps_i64).result, as_i64(index[2 + rank])
        ).result
        value = tensor.ExtractOp(x, [index[0], as_index(channel), as_index(flat)]).result
        value = arith.SelectOp(valid, value, zero).result
        return arith.AddFOp(args[1], value).result

    window = tensor.EmptyOp([taps], element).result
    loops = [dim(a) for a in range(2 + rank)]
    result = generic(
        [(window, [dim(2 + rank)])],
        [(filled(sizes, element, zero), loops)],
        3 + rank,
        (2 + rank,),
        lambda args: [body(args)],
    )[0]
    return [cast_to(result, ctx.result_types[0])]


def _vector(ctx: LoweringRuleContext, position: int, count: int, what: str) -> list[mlir_ir.Value]:
    """ONNX input `position` (image_shape, block_shape) as `count` i64 values."""
    if ctx.ranked(ctx.niro_operands[position], what).shape not in ((count,), (None,)):
        raise ctx.error(f"needs {what} with {count} values")
    constant_value = ctx.constant_operand(position)
    if constant_value is not None:
        if len(constant_value) != count:
            raise ctx.error(f"needs {what} with {count} values")
        return [i64_constant(int(v)) for v in constant_value]
    return read_int_scalars(ctx.operands[position], count)
