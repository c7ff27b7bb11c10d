"""DFT (opsets 17 and 20) and STFT (opset 17) as direct O(n^2) transforms.

A transform of static length n along one axis is one reduction `linalg.generic`: each output
element sums, over the input positions j along the axis, the input times a cos and a sin table
indexed (j, k). The tables are `arith.constant`s computed here in float64 (f64 inputs compute in
f64, every other float type in f32), with the inverse's 1/n and the IRFFT's conjugate-symmetric
weights folded in, so one body covers the forward DFT, the inverse, the one-sided forward (RFFT:
only bins k <= n/2 are produced) and the one-sided inverse (IRFFT: a real signal from n/2+1
bins). `dft_length` shorter than the axis reads only its first n values; longer zero-pads (the
tables just have fewer rows than n). Semantics follow onnx/reference/ops/op_dft.py and
op_stft.py, numpy's fft and irfft.

STFT gathers the frames (sample f * frame_step + t of frame f, times the window) in one
`linalg.generic` and transforms them along the frame axis. Its batch and signal length may be
dynamic (the frame count (length - n) // frame_step + 1 is then computed at run time, and a
signal shorter than a frame stops the program with that reason); a rank-2 signal
[batch, length] is read as real, as onnxruntime reads it (the spec asks for [batch, length, 1];
PyTorch's TorchScript exporter feeds rank 2).

DFT shapes must be static (a dynamic dim is refused), and so must STFT's bins. `axis`
(DFT-20), `dft_length`, `frame_step` and `frame_length` are inputs: a compile-time constant is
used as it is. ONNX's node tests feed them as graph inputs; then, as reductions.py does for
`axes`, the values the static operand and result shapes allow are compiled (one `scf.if`
branch each when several do) and a `cf.assert` stops the program when the run-time value is
none of them; `frame_step` is used at run time directly. When no value fits the shapes the op
is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from niro.ir import Value, format_type, op_name

from ..bindings import arith, linalg, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    assert_true,
    constant,
    convert,
    crop,
    empty,
    fill,
    generic,
    index_constant,
    read_int_scalars,
    tensor_size,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type, input_index, opset, static_shape
from .reductions import RuntimeAxes, dispatch

__all__: list[str] = []


# -- the transform along one axis ---------------------------------------------------------------


def _tables(taps: int, bins: int, n: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The (cos, sin) tables, shape (2, taps, bins), such that for input x = xr + i*xi
    read at rows j < taps, real = sum_j xr*cos + xi*sin and imag = sum_j xi*cos - xr*sin.

    Forward: e^(-2*pi*i*j*k/n). Inverse: e^(+2*pi*i*j*k/n) / n (the sin table negated). IRFFT
    (inverse and onesided): row j is bin j, column k the output sample, each bin but the DC and
    (n even) Nyquist weighted twice for its conjugate twin; numpy ignores those two bins'
    imaginary parts, and so do these tables (sin 0 = sin(pi*k) = 0)."""
    rows = np.arange(taps, dtype=np.int64)[:, None]
    columns = np.arange(bins, dtype=np.int64)[None, :]
    angle = 2.0 * np.pi * ((rows * columns) % n) / n  # reduced first: exact angles
    cos, sin = np.cos(angle), np.sin(angle)
    if inverse:
        cos, sin = cos / n, -sin / n
        if onesided:
            weights = np.where((rows == 0) | (2 * rows == n), 1.0, 2.0)
            cos, sin = cos * weights, sin * weights
    return np.stack([cos, sin])


def _table_constant(array: np.ndarray, compute: mlir_ir.Type) -> mlir_ir.Value:
    dtype = np.float64 if isinstance(compute, mlir_ir.F64Type) else np.float32
    data = np.ascontiguousarray(array, dtype=dtype)
    type_ = mlir_ir.RankedTensorType.get(list(data.shape), compute)
    return arith.ConstantOp(type_, mlir_ir.DenseElementsAttr.get(data, type=compute)).result


def _compute_type(element: mlir_ir.Type) -> mlir_ir.Type:
    """Where a transform of `element`s sums: f64 for f64, f32 for every other float type."""
    return mlir_ir.F64Type.get() if isinstance(element, mlir_ir.F64Type) else mlir_ir.F32Type.get()


def _transform(
    x: mlir_ir.Value,
    out_shape: Sequence[int | mlir_ir.Value],
    axis: int,
    n: int,
    inverse: bool,
    onesided: bool,
    result_element: mlir_ir.Type,
) -> mlir_ir.Value:
    """The DFT of static length `n` of `x` (last dim 1: real or 2: complex; static along
    `axis`) along `axis`, into a tensor of `out_shape` (static along `axis`, last dim 2, or 1
    for the IRFFT; an index value is a run-time size) of `result_element`."""
    in_shape = list(mlir_ir.RankedTensorType(x.type).shape)
    rank = len(in_shape)
    element = mlir_ir.RankedTensorType(x.type).element_type
    compute = _compute_type(element)
    irfft = inverse and onesided
    taps = min(in_shape[axis], n // 2 + 1 if irfft else n)
    bins = out_shape[axis]
    x = crop(x, [taps if dim == axis else size for dim, size in enumerate(in_shape)])
    tables = _tables(taps, bins, n, inverse, onesided)
    cos, sin = (_table_constant(table, compute) for table in tables)
    row = rank  # the reduction loop: position j along the axis
    read = [row if dim == axis else dim for dim in range(rank - 1)]
    complex_input = in_shape[-1] == 2
    inputs = [(x, [*read, None])]
    if complex_input:
        inputs.append((x, [*read, mlir_ir.AffineConstantExpr.get(1)]))
    inputs += [(cos, [row, axis]), (sin, [row, axis])]
    init = fill(empty(list(out_shape), compute), constant(compute, 0.0))
    real_only = out_shape[-1] == 1

    def body(arguments: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        real = convert(arguments[0], compute)
        imag = convert(arguments[1], compute) if complex_input else None
        cos_j, sin_j, accumulated = arguments[-3:]
        value = arith.MulFOp(real, cos_j).result
        if imag is not None:
            value = arith.AddFOp(value, arith.MulFOp(imag, sin_j).result).result
        if not real_only:
            imaginary = arith.NegFOp(arith.MulFOp(real, sin_j).result).result
            if imag is not None:
                imaginary = arith.AddFOp(imaginary, arith.MulFOp(imag, cos_j).result).result
            component = linalg.IndexOp(rank - 1).result
            is_real = arith.CmpIOp(arith.CmpIPredicate.eq, component, index_constant(0)).result
            value = arith.SelectOp(is_real, value, imaginary).result
        return [arith.AddFOp(accumulated, value).result]

    (result,) = generic(inputs, [(init, list(range(rank)))], rank + 1, [row], body)
    return _narrow(result, result_element)


def _narrow(value: mlir_ir.Value, element: mlir_ir.Type) -> mlir_ir.Value:
    """`value` converted element-wise to the float type `element` (no-op when it is already)."""
    shaped = mlir_ir.RankedTensorType(value.type)
    if shaped.element_type == element:
        return value
    rank = shaped.rank
    init = empty(tensor_sizes(value), element)
    identity = list(range(rank))
    return generic(
        [(value, identity)], [(init, identity)], rank, [], lambda args: [convert(args[0], element)]
    )[0]


# -- run-time scalars -------------------------------------------------------------------------


def _int_input(ctx: LoweringRuleContext, position: int, what: str) -> int | mlir_ir.Value | None:
    """ONNX input `position` (a one-element integer tensor): an int when it is a compile-time
    constant, an i64 value read at run time when not, None when the input is absent."""
    index = input_index(ctx, position)
    if index is None:
        return None
    given = ctx.constant_operand(index)
    if given is not None:
        if given.size != 1:
            raise ctx.error(f"expects a scalar {what}, got {given.size} values")
        return int(given.reshape(-1)[0])
    type_ = ctx.ranked(ctx.niro_operands[index], what)
    if any(size != 1 for size in type_.shape):
        raise ctx.error(f"expects a scalar {what}, got {format_type(type_)}")
    return read_int_scalars(ctx.operands[index], 1)[0]


def _equals(value: mlir_ir.Value, option: int) -> mlir_ir.Value:
    i64 = mlir_ir.IntegerType.get_signless(64)
    return arith.CmpIOp(arith.CmpIPredicate.eq, value, constant(i64, option)).result


def _all(conditions: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
    """The i1 conjunction of `conditions` (true when there are none)."""
    if not conditions:
        return constant(mlir_ir.IntegerType.get_signless(1), 1)
    result = conditions[0]
    for condition in conditions[1:]:
        result = arith.AndIOp(result, condition).result
    return result


def _any(conditions: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
    """The i1 disjunction of a non-empty `conditions`."""
    result = conditions[0]
    for condition in conditions[1:]:
        result = arith.OrIOp(result, condition).result
    return result


def _select(
    ctx: LoweringRuleContext,
    options: Sequence[tuple[int, ...]],
    runtime: Sequence[mlir_ir.Value | None],
    extra: Sequence[mlir_ir.Value] | None,
    message: str,
) -> RuntimeAxes | None:
    """The `scf.if` selectors of `options` (tuples, one entry per parameter) on the run-time
    parameters (`runtime[i]` None: parameter i is static), with the `cf.assert` that one holds
    (`extra[i]`, when given, is a further condition on option i). None: nothing to check."""
    if all(value is None for value in runtime) and extra is None:
        return None
    selectors = tuple(
        _all(
            [
                _equals(value, entry)
                for value, entry in zip(runtime, option, strict=True)
                if value is not None
            ]
        )
        for option in options
    )
    checked = (
        selectors
        if extra is None
        else tuple(
            arith.AndIOp(selector, condition).result
            for selector, condition in zip(selectors, extra, strict=True)
        )
    )
    assert_true(_any(checked), f"{ctx.niro_location}: '{op_name(ctx.op)}' op: {message}")
    return RuntimeAxes(tuple(options), selectors)


# -- DFT ------------------------------------------------------------------------------------------


def _dft_fits(in_shape, out_shape, axis: int, n: int, inverse: bool, onesided: bool) -> bool:
    if n < 1:
        return False
    bins = n // 2 + 1 if onesided and not inverse else n
    return all(
        out_shape[dim] == (bins if dim == axis else in_shape[dim])
        for dim in range(len(in_shape) - 1)
    )


def _default_length(in_shape, axis: int, inverse: bool, onesided: bool) -> int:
    """ONNX's dft_length when the input is absent: the axis size, or 2 * (bins - 1) for the
    IRFFT (an even-length signal)."""
    return 2 * (in_shape[axis] - 1) if inverse and onesided else in_shape[axis]


def _dft_axis(ctx: LoweringRuleContext, rank: int) -> int | mlir_ir.Value:
    """The normalized DFT axis: the attribute (opset 17..19, default 1) or the input (opset 20+,
    default -2); a run-time input is normalized at run time."""
    if opset(ctx) < 20:
        axis = int(attribute(ctx, "axis", 1))
    else:
        given = _int_input(ctx, 2, "axis")
        axis = -2 if given is None else given
    if isinstance(axis, int):
        if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
            raise ctx.error(
                f"axis {axis} is out of range [{-rank}, -2] or [0, {rank - 2}] for an input of "
                f"rank {rank} (the last dim holds the real and imaginary parts)"
            )
        return axis + rank if axis < 0 else axis
    i64 = mlir_ir.IntegerType.get_signless(64)
    negative = arith.CmpIOp(arith.CmpIPredicate.slt, axis, constant(i64, 0)).result
    return arith.SelectOp(negative, arith.AddIOp(axis, constant(i64, rank)).result, axis).result


@register_lowering("onnx.DFT", since=17)
def _lower_dft(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    x_niro = ctx.niro_operands[0]
    scalar = element_type(x_niro)
    if not scalar.is_float:
        raise ctx.error(f"supports float inputs only, got {scalar.spelling}")
    in_shape = static_shape(ctx, x_niro, "the input")
    out_shape = static_shape(ctx, ctx.niro_results[0], "the result")
    rank = len(in_shape)
    inverse = bool(attribute(ctx, "inverse", 0))
    onesided = bool(attribute(ctx, "onesided", 0))
    if rank < 2 or in_shape[-1] not in (1, 2):
        raise ctx.error(
            "expects an input [..., 1] (real) or [..., 2] (complex), got "
            f"{format_type(x_niro.type)}"
        )
    parts = 1 if inverse and onesided else 2
    if len(out_shape) != rank or out_shape[-1] != parts:
        raise ctx.error(
            f"expects a result of rank {rank} with last dim {parts}, got "
            f"{format_type(ctx.niro_results[0].type)}"
        )
    axis = _dft_axis(ctx, rank)
    length = _int_input(ctx, 1, "dft_length")
    options = []
    for option_axis in [axis] if isinstance(axis, int) else range(rank - 1):
        if isinstance(length, int):
            lengths = [length]
        elif length is None:
            lengths = [_default_length(in_shape, option_axis, inverse, onesided)]
        elif onesided and not inverse:
            bins = out_shape[option_axis]
            lengths = sorted({2 * (bins - 1), 2 * bins - 1})
        else:
            lengths = [out_shape[option_axis]]
        options += [
            (option_axis, n)
            for n in lengths
            if _dft_fits(in_shape, out_shape, option_axis, n, inverse, onesided)
        ]
    shapes = f"input {format_type(x_niro.type)} and result {format_type(ctx.niro_results[0].type)}"
    if not options:
        if isinstance(axis, int) and not isinstance(length, mlir_ir.Value):
            n = _default_length(in_shape, axis, inverse, onesided) if length is None else length
            raise ctx.error(f"a DFT of length {n} along axis {axis} does not fit {shapes}")
        raise ctx.error(f"no axis and dft_length fit {shapes}")
    runtime = [
        None if isinstance(axis, int) else axis,
        length if isinstance(length, mlir_ir.Value) else None,
    ]
    dynamic = [position for position, value in enumerate(runtime) if value is not None]
    named = " and ".join(("axis", "dft_length")[position] for position in dynamic)
    allowed = sorted({tuple(option[position] for position in dynamic) for option in options})
    choice = _select(
        ctx,
        options,
        runtime,
        None,
        f"the run-time {named} must be one of "
        f"{', '.join(str(values[0] if len(values) == 1 else values) for values in allowed)} "
        f"to fit the static {shapes}",
    )
    element = lower_scalar_type(scalar)

    def build(option: tuple[int, ...]) -> mlir_ir.Value:
        option_axis, n = option
        return _transform(ctx.operands[0], out_shape, option_axis, n, inverse, onesided, element)

    if choice is None:
        return [build(options[0])]
    return [dispatch(ctx, choice, build)]


# -- STFT -----------------------------------------------------------------------------------------


def _frames(
    signal: mlir_ir.Value,
    window: mlir_ir.Value | None,
    step: int | mlir_ir.Value,
    sizes: Sequence[int | mlir_ir.Value],
    compute: mlir_ir.Type,
) -> mlir_ir.Value:
    """(batch, frames, n, parts) of `sizes`: sample f * step + t of frame f, times window[t], in
    `compute`. A rank-2 signal [batch, length] is real (parts 1)."""
    real_only = mlir_ir.RankedTensorType(signal.type).rank == 2
    i64 = mlir_ir.IntegerType.get_signless(64)
    step_value = constant(i64, step) if isinstance(step, int) else step
    inputs = [] if window is None else [(window, [2])]
    init = empty(list(sizes), compute)

    def body(arguments: list[mlir_ir.Value]) -> list[mlir_ir.Value]:
        b, f, t, part = (linalg.IndexOp(dim).result for dim in range(4))
        start = arith.MulIOp(as_i64(f), step_value).result
        position = arith.AddIOp(start, as_i64(t)).result
        position = as_index(position)
        indices = [b, position] if real_only else [b, position, part]
        value = convert(tensor.ExtractOp(signal, indices).result, compute)
        if window is not None:
            value = arith.MulFOp(value, convert(arguments[0], compute)).result
        return [value]

    return generic(inputs, [(init, [0, 1, 2, 3])], 4, [], body)[0]


def _frame_count(samples: int | mlir_ir.Value, step: int | mlir_ir.Value, n: int) -> int | mlir_ir.Value:
    """(samples - n) // step + 1: an int when both are static, else an index computed at run
    time (a non-positive run-time step divides by 1 instead: the run-time check refuses it)."""
    if isinstance(samples, int) and isinstance(step, int):
        return (samples - n) // step + 1
    divisor = as_index(step)
    if not isinstance(step, int):
        positive = arith.CmpIOp(arith.CmpIPredicate.sgt, divisor, index_constant(0)).result
        divisor = arith.SelectOp(positive, divisor, index_constant(1)).result
    room = arith.SubIOp(as_index(samples), index_constant(n)).result
    return arith.AddIOp(arith.FloorDivSIOp(room, divisor).result, index_constant(1)).result


def _stft_checks(
    samples: int | mlir_ir.Value,
    step: int | mlir_ir.Value,
    frames: int | None,
    n: int,
    count: int | mlir_ir.Value,
) -> list[mlir_ir.Value]:
    """The run-time conditions under which frame length `n` fits: a positive run-time step,
    a run-time signal length of at least n, and `count` frames where the result has a static
    number of `frames` (none when everything is static: the shapes were checked already)."""
    conditions = []
    if not isinstance(step, int):
        conditions.append(arith.CmpIOp(arith.CmpIPredicate.sgt, as_index(step), as_index(0)).result)
    if not isinstance(samples, int):
        conditions.append(arith.CmpIOp(arith.CmpIPredicate.sge, as_index(samples), as_index(n)).result)
    if frames is not None and not isinstance(count, int):
        conditions.append(arith.CmpIOp(arith.CmpIPredicate.eq, as_index(count), as_index(frames)).result)
    return conditions


@register_lowering("onnx.STFT", since=17)
def _lower_stft(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    signal_niro = ctx.niro_operands[0]
    scalar = element_type(signal_niro)
    if not scalar.is_float:
        raise ctx.error(f"supports float signals only, got {scalar.spelling}")
    in_shape = ctx.ranked(signal_niro, "the signal").shape
    result_type = ctx.ranked(ctx.niro_results[0], "the result")
    out_shape = result_type.shape
    # NOTE: a rank-2 signal [batch, length] is read as real, as onnxruntime reads it (the spec
    # asks for [batch, length, 1]; PyTorch's TorchScript exporter feeds rank 2).
    if len(in_shape) not in (2, 3) or (len(in_shape) == 3 and in_shape[-1] not in (1, 2)):
        raise ctx.error(
            "expects a signal [batch, length, 1] (real) or [batch, length, 2] (complex), got "
            f"{format_type(signal_niro.type)}"
        )
    batch, samples = in_shape[0], in_shape[1]
    if (
        len(out_shape) != 4
        or out_shape[2] is None
        or out_shape[3] != 2
        or None not in (batch, out_shape[0])
        and out_shape[0] != batch
    ):
        raise ctx.error(
            f"expects a result [{'batch' if batch is None else batch}, frames, bins, 2] with "
            f"static bins, got {format_type(ctx.niro_results[0].type)}"
        )
    frames, bins = out_shape[1], out_shape[2]
    onesided = bool(attribute(ctx, "onesided", 1))
    step = _int_input(ctx, 1, "frame_step")
    length = _int_input(ctx, 3, "frame_length")
    window_index = input_index(ctx, 2)
    window: tuple[mlir_ir.Value, Value] | None = None
    window_length = None
    if window_index is not None:
        window = ctx.operands[window_index], ctx.niro_operands[window_index]
        window_shape = static_shape(ctx, window[1], "the window")
        if len(window_shape) != 1:
            raise ctx.error(f"expects a 1-D window, got {format_type(window[1].type)}")
        window_length = window_shape[0]
    if isinstance(step, int) and step < 1:
        raise ctx.error(f"expects a positive frame_step, got {step}")
    if isinstance(length, int):
        lengths = [length]
    elif window_length is not None:
        lengths = [window_length]
    elif length is None:
        if samples is None:
            raise ctx.error(
                "needs a frame_length or a window when the signal length is dynamic, got "
                f"{format_type(signal_niro.type)}"
            )
        lengths = [samples]
    else:
        lengths = sorted({2 * (bins - 1), 2 * bins - 1}) if onesided else [bins]

    def gives_frames(n: int) -> bool:
        """Whether frames of length n give the result's frames (unknown until run time unless
        the samples, the frames and the step are all static)."""
        if samples is None or frames is None or not isinstance(step, int):
            return True
        return frames == (samples - n) // step + 1

    lengths = [
        n
        for n in lengths
        if 1 <= n
        and (samples is None or n <= samples)
        and (window_length is None or window_length == n)
        and bins == (n // 2 + 1 if onesided else n)
        and gives_frames(n)
    ]
    if not lengths:
        raise ctx.error(
            f"no frame_length fits signal {format_type(signal_niro.type)}, result "
            f"{format_type(ctx.niro_results[0].type)}"
            + ("" if window is None else f", window {format_type(window[1].type)}")
            + ("" if not isinstance(step, int) else f" and frame_step {step}")
        )
    signal = ctx.operands[0]
    length_size = tensor_size(signal, 1)
    counts = [_frame_count(length_size, step, n) for n in lengths]
    checks = [
        _stft_checks(length_size, step, frames, n, count)
        for n, count in zip(lengths, counts, strict=True)
    ]
    extra = None if not any(checks) else [_all(conditions) for conditions in checks]
    if batch is None and out_shape[0] is not None:
        same = arith.CmpIOp(
            arith.CmpIPredicate.eq, as_index(tensor_size(signal, 0)), as_index(out_shape[0])
        ).result
        extra = [
            same if condition is None else arith.AndIOp(condition, same).result
            for condition in extra or [None] * len(lengths)
        ]
    options = [(n,) for n in lengths]
    choice = _select(
        ctx,
        options,
        [length if isinstance(length, mlir_ir.Value) else None],
        extra,
        _stft_check_message(samples, step, length, frames, lengths, batch, out_shape[0]),
    )
    element = lower_scalar_type(scalar)
    compute = _compute_type(element)
    batch_size = out_shape[0] if out_shape[0] is not None else tensor_size(signal, 0)
    result = mlir_ir.RankedTensorType(ctx.result_types[0])

    def build(option: tuple[int, ...]) -> mlir_ir.Value:
        (n,) = option
        count = frames if frames is not None else counts[lengths.index(n)]
        framed = _frames(
            signal,
            None if window is None else window[0],
            step,
            [batch_size, count, n, 1 if len(in_shape) == 2 else in_shape[2]],
            compute,
        )
        value = _transform(framed, [batch_size, count, bins, 2], 2, n, False, onesided, element)
        return value if value.type == result else tensor.CastOp(result, value).result

    if choice is None:
        return [build(options[0])]
    return [dispatch(ctx, choice, build)]


def _stft_check_message(samples, step, length, frames, lengths, batch, result_batch) -> str:
    """What the run-time check of an STFT asks: the wording of the static-shape node tests
    (a run-time frame_step or frame_length) kept, the signal length and batch added when they
    are dynamic."""
    if samples is not None and batch is not None:
        return (
            f"the run-time frame_step and frame_length must give {frames} frames of a length in "
            f"{lengths} from {samples} samples"
        )
    wanted = []
    if batch is None and result_batch is not None:
        wanted.append(f"a batch of {result_batch}")
    if samples is None:
        wanted.append(f"a signal of at least {min(lengths)} samples")
    if isinstance(length, mlir_ir.Value):
        wanted.append(f"a frame_length in {lengths}")
    if not isinstance(step, int):
        wanted.append("a positive frame_step")
    if frames is not None:
        wanted.append(f"{frames} frames")
    return "needs at run time " + ", ".join(wanted)
