"""MLIR lowering of ONNX MaxUnpool: each element of X goes to the position its index in I names.

The semantics are ONNX's reference (and its node tests): I indexes the row-major flattening of
the *inferred* output, (N, C, (S - 1) * stride - pad_begin - pad_end + kernel per spatial axis);
that tensor is zero everywhere else and is placed at the start of a larger `output_shape` when
one is given. When several elements name one position, the last (in X's row-major order) wins.

A scatter has no honest form in upstream linalg, so the result is built in gather form: each
output position looks only at the X elements whose pooling window covers it (at most
ceil(kernel / stride) per spatial axis) and takes the one whose index names it. That is exact
when every index lies in its own element's window, as MaxPool's indices do; a run-time check
(`cf.assert`) over I fails the program otherwise, rather than dropping such an element.

X and I need static shapes (a dim may be dynamic in one of them: it is checked to be the
other's size at run time), and so does the result unless `output_shape` is a constant (its
rank must be known). X must be a float tensor (ONNX's T1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from niro.ir import ScalarType, format_type

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    assert_all,
    assert_true,
    cast_to,
    checked_cast,
    constant,
    empty,
    fill,
    generic,
    index_constant,
    read_int_scalars,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from .common import element_type, input_index, input_value, ints_attribute
from .indexing import clamp, cmp, floordiv

__all__: list[str] = []


def _all(conditions: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
    result = conditions[0]
    for condition in conditions[1:]:
        result = arith.AndIOp(result, condition).result
    return result


@register_lowering("onnx.MaxUnpool", since=9)
def _lower_max_unpool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    scalar = element_type(ctx.niro_operands[0])
    if not scalar.is_float:
        raise ctx.error(f"does not support element type {scalar.spelling} (expected a float type)")
    if element_type(ctx.niro_operands[1]) is not ScalarType.I64:
        raise ctx.error(f"expects int64 indices, got {element_type(ctx.niro_operands[1]).spelling}")
    x_shape = _shape_of_both(ctx)
    if len(x_shape) < 3:
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got {x_shape}")
    spatial = len(x_shape) - 2
    kernel = ints_attribute(ctx, "kernel_shape", (), spatial)
    strides = ints_attribute(ctx, "strides", (1,) * spatial, spatial)
    pads = ints_attribute(ctx, "pads", (0,) * (2 * spatial), 2 * spatial)
    if any(value < 1 for value in (*kernel, *strides)) or any(value < 0 for value in pads):
        raise ctx.error("needs positive kernel_shape and strides and non-negative pads")
    inferred = (
        *x_shape[:2],
        *(
            (size - 1) * stride - pads[axis] - pads[spatial + axis] + extent
            for axis, (size, stride, extent) in enumerate(
                zip(x_shape[2:], strides, kernel, strict=True)
            )
        ),
    )
    if any(size <= 0 for size in (*x_shape, *inferred)):
        raise ctx.error(f"has an empty input or inferred output shape {inferred}")
    result_shape = _output_shape(ctx, inferred)
    where = f"{ctx.niro_location}: 'onnx.MaxUnpool' op"
    x, indices = (
        checked_cast(value, mlir_ir.RankedTensorType.get(list(x_shape), element), where, what)
        for value, what, element in (
            (ctx.operands[0], "input X", mlir_ir.RankedTensorType(ctx.operands[0].type).element_type),
            (ctx.operands[1], "indices I", mlir_ir.IntegerType.get_signless(64)),
        )
    )
    _check_indices_in_windows(ctx, indices, x_shape, inferred, kernel, strides, pads[:spatial])
    values = _unpool(x, indices, x_shape, inferred, result_shape, kernel, strides, pads[:spatial])
    return [cast_to(values, ctx.result_types[0])]


def _shape_of_both(ctx) -> tuple[int, ...]:
    """The static shape X and I share: a dim one of them leaves dynamic takes the other's size
    (checked at run time when they are cast to it); a dim both leave dynamic is refused."""
    x = ctx.ranked(ctx.niro_operands[0], "input X").shape
    i = ctx.ranked(ctx.niro_operands[1], "indices I").shape
    if len(x) != len(i) or any(a is not None and b is not None and a != b for a, b in zip(x, i, strict=True)):
        raise ctx.error(f"expects indices I of the shape of X {x}, got {i}")
    shape = tuple(a if a is not None else b for a, b in zip(x, i, strict=True))
    if None in shape:
        raise ctx.error(f"needs a static shape for input X or indices I, got {x} and {i}")
    return shape


def _output_shape(ctx, inferred: tuple[int, ...]) -> tuple:
    """The shape of the result: the inferred shape, or `output_shape` when given, which must be
    no smaller (ONNX's reference cannot place the inferred tensor otherwise). A constant
    `output_shape` decides it; a run-time one gives the result's dynamic dims as index values
    (`_run_time_shape`). The result type must agree where it is known."""
    given = input_value(ctx, 2)
    result_type = ctx.ranked(ctx.niro_results[0], "result")  # IREE returns no unranked tensor
    known = result_type.shape
    if given is None:
        target = inferred
    else:
        shape_type = ctx.ranked(given[1], "output_shape")
        if shape_type.shape != (len(inferred),):
            raise ctx.error(f"expects a 1-D output_shape of {len(inferred)} values")
        constant_shape = ctx.constant_operand(input_index(ctx, 2))
        if constant_shape is None:
            return _run_time_shape(ctx, given[0], known, inferred)
        target = tuple(int(size) for size in constant_shape)
        if any(out < size for out, size in zip(target, inferred, strict=True)):
            raise ctx.error(
                f"output_shape {target} is smaller than the inferred output shape {inferred}"
            )
    if len(known) != len(target) or any(
        dim is not None and dim != size for dim, size in zip(known, target, strict=True)
    ):
        source = "inferred output shape" if given is None else "output_shape"
        raise ctx.error(f"result {format_type(result_type)} differs from the {source} {target}")
    return target


def _run_time_shape(ctx, shape: mlir_ir.Value, known, inferred: tuple[int, ...]) -> tuple:
    """The result sizes a run-time `output_shape` gives: a dim the result type fixes must be
    that size, any other at least the inferred size (both checked at run time); those others
    are index values."""
    if len(known) != len(inferred):
        raise ctx.error(f"expects a result of rank {len(inferred)}, got {len(known)}")
    i64 = mlir_ir.IntegerType.get_signless(64)
    target: list = []
    holds = []
    for size, dim, least in zip(read_int_scalars(shape, len(inferred)), known, inferred, strict=True):
        if dim is not None:
            holds.append(arith.CmpIOp(arith.CmpIPredicate.eq, size, constant(i64, dim)).result)
            target.append(dim)
        else:
            holds.append(arith.CmpIOp(arith.CmpIPredicate.sge, size, constant(i64, least)).result)
            target.append(as_index(size))
    assert_true(
        _all(holds),
        f"{ctx.niro_location}: MaxUnpool's output_shape differs from the result shape "
        f"{tuple(known)} or is smaller than the inferred output shape {inferred}",
    )
    return tuple(target)


def _check_indices_in_windows(ctx, indices, x_shape, inferred, kernel, strides, pads_begin) -> None:
    """A run-time check that every index names a position of its own (n, c) plane inside its
    element's pooling window: what makes the gather form exact."""
    i64 = mlir_ir.IntegerType.get_signless(64)
    rank = len(x_shape)
    total = math.prod(inferred)

    def in_window(elements):
        (index,) = elements
        ok = [
            arith.CmpIOp(arith.CmpIPredicate.sge, index, constant(i64, 0)).result,
            arith.CmpIOp(arith.CmpIPredicate.slt, index, constant(i64, total)).result,
        ]
        rest = arith.MaxSIOp(index, constant(i64, 0)).result
        coordinates = []
        for size in reversed(inferred):
            coordinates.append(arith.RemSIOp(rest, constant(i64, size)).result)
            rest = arith.DivSIOp(rest, constant(i64, size)).result
        coordinates.reverse()
        for axis in range(rank):
            here = as_i64(linalg.IndexOp(axis).result)
            if axis < 2:
                ok.append(arith.CmpIOp(arith.CmpIPredicate.eq, coordinates[axis], here).result)
                continue
            a = axis - 2
            low = arith.SubIOp(
                arith.MulIOp(here, constant(i64, strides[a])).result, constant(i64, pads_begin[a])
            ).result
            offset = arith.SubIOp(coordinates[axis], low).result
            ok.append(arith.CmpIOp(arith.CmpIPredicate.sge, offset, constant(i64, 0)).result)
            ok.append(
                arith.CmpIOp(arith.CmpIPredicate.slt, offset, constant(i64, kernel[a])).result
            )
        return _all(ok)

    assert_all(
        [(indices, list(range(rank)))],
        rank,
        in_window,
        f"{ctx.niro_location}: a MaxUnpool index does not name a position in its element's "
        "pooling window (niroc unpools only indices as MaxPool makes them)",
    )


def _unpool(x, indices, x_shape, inferred, result_shape, kernel, strides, pads_begin) -> mlir_ir.Value:
    """out[q] = the last X element (row-major) among those whose window covers q and whose index
    is q's row-major position in the inferred shape; 0 when none, or q is outside that shape."""
    rank, spatial = len(x_shape), len(x_shape) - 2
    element = mlir_ir.RankedTensorType(x.type).element_type
    i64 = mlir_ir.IntegerType.get_signless(64)
    candidates = [-(-extent // stride) for extent, stride in zip(kernel, strides, strict=True)]
    loops = rank + spatial
    anchor = tensor.EmptyOp(candidates, mlir_ir.IntegerType.get_signless(8)).result
    values_init = fill(empty(list(result_shape), element), constant(element, 0.0))
    best_init = fill(empty(list(result_shape), i64), constant(i64, -1))
    identity = list(range(rank))

    def body(arguments):
        _, current, best = arguments
        position = [linalg.IndexOp(loop).result for loop in range(loops)]
        out, steps = position[:rank], position[rank:]
        valid = [cmp("slt", out[axis], inferred[axis]) for axis in range(rank)]
        flat = as_i64(out[0])
        for axis in range(1, rank):
            flat = arith.AddIOp(
                arith.MulIOp(flat, constant(i64, inferred[axis])).result, as_i64(out[axis])
            ).result
        source = [clamp(out[axis], 0, x_shape[axis] - 1) for axis in range(2)]
        order = index_constant(0)
        for a in range(spatial):
            shifted = arith.AddIOp(out[2 + a], index_constant(pads_begin[a])).result
            window = arith.SubIOp(floordiv(shifted, strides[a]), steps[a]).result
            start = arith.MulIOp(window, index_constant(strides[a])).result
            valid += [
                cmp("sge", window, 0),
                cmp("slt", window, x_shape[2 + a]),
                cmp("slt", arith.SubIOp(shifted, start).result, kernel[a]),
            ]
            clamped = clamp(window, 0, x_shape[2 + a] - 1)
            source.append(clamped)
            order = arith.AddIOp(
                arith.MulIOp(order, index_constant(x_shape[2 + a])).result, clamped
            ).result
        named = tensor.ExtractOp(indices, source).result
        valid.append(arith.CmpIOp(arith.CmpIPredicate.eq, named, flat).result)
        order = as_i64(order)
        later = arith.CmpIOp(arith.CmpIPredicate.sgt, order, best).result
        take = arith.AndIOp(_all(valid), later).result
        value = tensor.ExtractOp(x, source).result
        return [
            arith.SelectOp(take, value, current).result,
            arith.SelectOp(take, order, best).result,
        ]

    values, _ = generic(
        [(anchor, list(range(rank, loops)))],
        [(values_init, identity), (best_init, identity)],
        loops,
        tuple(range(rank, loops)),
        body,
    )
    return values
