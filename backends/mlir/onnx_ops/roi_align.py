"""RoiAlign (avg and max): one `linalg.generic` over (roi, channel, bin y, bin x) with the
sampling grid of each bin as two reduction loops.

Each sample point of a bin is read by bilinear interpolation of its four neighbours in the
image of the roi's batch index, computed in the input's float type as onnxruntime and the
spec's reference do (coordinates clamped at 0, the last row/column repeated, points more than
one pixel outside the image contributing 0). `avg` sums the interpolated samples and divides by
the grid size; `max` takes, per sample, the largest of the four weighted neighbours and the
maximum over samples (ONNX's definition).

Detection models (torchvision's Faster/Mask/Keypoint R-CNN) feed RoiAlign the boxes NMS and
TopK kept, so the roi count is known only at run time, as are the feature map's H and W; the
roi count comes from `rois` and the channels and H/W from `X` by `tensor.dim`, and every result
dim the result type declares static while its source is dynamic is checked at run time.

`sampling_ratio` 0 asks for an adaptive grid, ceil(roi size / output size) samples per bin on
each axis, different for every roi. linalg's loop bounds are uniform, so the grid loops run
to the largest grid of any roi (one reduction over the rois first) and each roi masks the
samples past its own grid; the final division uses the roi's own count (a roi with an empty
grid gives 0, as onnxruntime's does).

Invalid inputs (a batch index out of range, a NaN or infinite roi coordinate: undefined in
onnxruntime) read somewhere inside X rather than outside it: the indices are clamped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from niro.ir import ScalarType, format_type, op_name

from ..bindings import arith, linalg, math, mlir_ir, tensor
from ..builders import (
    as_i64,
    as_index,
    assert_true,
    constant,
    empty,
    fill,
    generic,
    index_constant,
    index_value,
    tensor_size,
    tensor_sizes,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type, opset

__all__: list[str] = []


@dataclass(frozen=True)
class _Attributes:
    """The op's attributes, checked: `sampling` 0 means the adaptive grid."""

    mode: str
    half_pixel: bool
    sampling: int
    spatial_scale: float
    pooled: tuple[int, int]


def _attributes(ctx: LoweringRuleContext) -> _Attributes:
    mode = attribute(ctx, "mode", "avg")
    if mode not in ("avg", "max"):
        raise ctx.error(f"does not support mode '{mode}' (expected 'avg' or 'max')")
    default_coordinates = "half_pixel" if opset(ctx) >= 16 else "output_half_pixel"
    coordinates = attribute(ctx, "coordinate_transformation_mode", default_coordinates)
    if coordinates not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(
            f"does not support coordinate_transformation_mode '{coordinates}' "
            "(expected 'half_pixel' or 'output_half_pixel')"
        )
    sampling = int(attribute(ctx, "sampling_ratio", 0))
    if sampling < 0:
        raise ctx.error(f"expects sampling_ratio >= 0, got {sampling}")
    pooled = (int(attribute(ctx, "output_height", 1)), int(attribute(ctx, "output_width", 1)))
    if min(pooled) < 1:
        raise ctx.error(
            f"expects output_height and output_width >= 1, got {pooled[0]} and {pooled[1]}"
        )
    return _Attributes(
        mode,
        coordinates == "half_pixel",
        sampling,
        float(attribute(ctx, "spatial_scale", 1.0)),
        pooled,
    )


def _check_types(ctx: LoweringRuleContext, pooled: tuple[int, int]) -> None:
    """Refuses, in MLIR terms, operand and result types RoiAlign cannot have."""
    x_niro, rois_niro, indices_niro = ctx.niro_operands
    result_niro = ctx.niro_results[0]
    scalar = element_type(x_niro)
    if scalar not in (ScalarType.F32, ScalarType.F64) or element_type(rois_niro) is not scalar:
        raise ctx.error(
            "supports f32/f64 input X with rois of the same type only, got "
            f"{format_type(x_niro.type)} and {format_type(rois_niro.type)}"
        )
    expected = (
        ("input X", x_niro, 4, "[N, C, H, W]"),
        ("rois", rois_niro, 2, "[num_rois, 4]"),
        ("batch_indices", indices_niro, 1, "[num_rois]"),
        ("the result", result_niro, 4, "[num_rois, C, output_height, output_width]"),
    )
    for what, value, rank, layout in expected:
        if len(ctx.ranked(value, what).shape) != rank:
            raise ctx.error(f"expects {what} of shape {layout}, got {format_type(value.type)}")
    if ctx.ranked(rois_niro, "rois").shape[1] not in (None, 4):
        raise ctx.error(f"expects rois of shape [num_rois, 4], got {format_type(rois_niro.type)}")
    declared = tuple(ctx.ranked(result_niro, "the result").shape[2:])
    if any(size is not None and size != want for size, want in zip(declared, pooled, strict=True)):
        raise ctx.error(
            f"declares result {format_type(result_niro.type)}, but output_height and "
            f"output_width are {pooled[0]} and {pooled[1]}"
        )


def _result_init(ctx: LoweringRuleContext, element: mlir_ir.Type, pooled: tuple[int, int]):
    """`tensor.empty` of the result type, its dynamic dims from the operands: the roi count
    from `rois`, the channels from `X`. Where the result type declares a dim static but its
    source is dynamic (or rois and batch_indices both are), a `cf.assert` checks they agree:
    the extracts would read out of bounds otherwise."""
    x, rois, batch_indices = ctx.operands
    result_type = mlir_ir.RankedTensorType(ctx.result_types[0])
    where = f"{ctx.niro_location}: '{op_name(ctx.op)}' op"
    sources = [(rois, 0, "rois"), (x, 1, "input X")]
    sizes: list[int | mlir_ir.Value] = []
    for axis, (source, source_axis, what) in enumerate(sources):
        size = tensor_size(source, source_axis)
        if result_type.is_dynamic_dim(axis):
            sizes.append(size)
            continue
        sizes.append(result_type.shape[axis])
        if isinstance(size, mlir_ir.Value):
            _assert_equal(
                size,
                index_constant(result_type.shape[axis]),
                f"{where}: {what} has a run-time dim {source_axis} other than the "
                f"{result_type.shape[axis]} its result type declares at axis {axis}",
            )
    roi_count, index_count = (
        tensor_size(rois, 0),
        tensor_size(batch_indices, 0),
    )
    if isinstance(roi_count, mlir_ir.Value) or isinstance(index_count, mlir_ir.Value):
        _assert_equal(
            index_value(roi_count),
            index_value(index_count),
            f"{where}: rois and batch_indices have different run-time roi counts",
        )
    sizes += list(pooled)
    return empty(sizes, element)


def _assert_equal(a: mlir_ir.Value, b: mlir_ir.Value, message: str) -> None:
    assert_true(arith.CmpIOp(arith.CmpIPredicate.eq, a, b).result, message)


class _Builder:
    """The scalar arithmetic of one RoiAlign, shared by the bodies of its generics: the roi's
    geometry (start, bin size, grid size per axis) and the bilinear sample of one grid point."""

    def __init__(self, ctx: LoweringRuleContext, options: _Attributes, element: mlir_ir.Type):
        self.ctx = ctx
        self.options = options
        self.element = element
        self.i64 = mlir_ir.IntegerType.get_signless(64)
        x = ctx.operands[0]
        self.sizes = [tensor_size(x, axis) for axis in (2, 3)]

    # -- scalars ----------------------------------------------------------------------------------

    def c(self, value: float) -> mlir_ir.Value:
        return constant(self.element, value)

    def int_(self, value: int) -> mlir_ir.Value:
        return constant(self.i64, value)

    def add(self, a, b):
        return arith.AddFOp(a, b).result

    def sub(self, a, b):
        return arith.SubFOp(a, b).result

    def mul(self, a, b):
        return arith.MulFOp(a, b).result

    def div(self, a, b):
        return arith.DivFOp(a, b).result

    def to_float(self, value: mlir_ir.Value) -> mlir_ir.Value:
        """An i64 or index value as the element type."""
        if isinstance(value.type, mlir_ir.IndexType):
            value = as_i64(value)
        return arith.SIToFPOp(self.element, value).result

    def extent(self, axis: int) -> mlir_ir.Value:
        """H (axis 0) or W (axis 1) of X as i64: a constant when static, else `tensor.dim`
        (built inside the body: a generic body may use values from above)."""
        size = self.sizes[axis]
        if isinstance(size, int):
            return self.int_(size)
        return as_i64(size)

    # -- geometry ---------------------------------------------------------------------------------

    def geometry(self, roi_index: mlir_ir.Value):
        """Per axis (y, x): (start, bin size, grid size) of roi `roi_index` (an index). The grid
        size is an int for a fixed sampling_ratio, else an i64 value >= 0, as onnxruntime
        computes it: ceil(roi size / output size)."""
        options = self.options
        rois = self.ctx.operands[1]
        roi = [tensor.ExtractOp(rois, [roi_index, index_constant(k)]).result for k in range(4)]
        offset = self.c(0.5 if options.half_pixel else 0.0)
        scale = self.c(options.spatial_scale)
        start_w, start_h, end_w, end_h = (self.sub(self.mul(value, scale), offset) for value in roi)
        axes = []
        for start, end, pooled in (
            (start_h, end_h, options.pooled[0]),
            (start_w, end_w, options.pooled[1]),
        ):
            size = self.sub(end, start)
            if not options.half_pixel:  # malformed rois are forced to 1x1
                size = arith.MaximumFOp(size, self.c(1.0)).result
            bin_size = self.div(size, self.c(float(pooled)))
            grid: int | mlir_ir.Value = options.sampling
            if not grid:  # (maxnumf: a NaN roi gets an empty grid, not a poison size)
                rounded = arith.MaxNumFOp(math.CeilOp(bin_size).result, self.c(0.0)).result
                grid = arith.FPToSIOp(self.i64, rounded).result
            axes.append((start, bin_size, grid))
        return axes

    def grid_count(self, axes) -> mlir_ir.Value | int:
        """Samples per bin: the product of the two grid sizes."""
        (_, _, grid_h), (_, _, grid_w) = axes
        if isinstance(grid_h, int):
            return grid_h * grid_w
        return arith.MulIOp(grid_h, grid_w).result

    def axis_sample(self, start, bin_size, grid, bin_index, grid_index, axis):
        """(position, low index, high index, low weight, high weight) on one axis."""
        c = self.c
        grid_float = c(float(grid)) if isinstance(grid, int) else self.to_float(grid)
        position = self.add(
            self.add(start, self.mul(self.to_float(bin_index), bin_size)),
            self.div(self.mul(self.add(self.to_float(grid_index), c(0.5)), bin_size), grid_float),
        )
        # Clamped into [0, last] before the conversion (the same samples, as the last row is
        # repeated anyway): a NaN or infinite roi then reads inside X instead of anywhere.
        last = arith.SubIOp(self.extent(axis), self.int_(1)).result
        clamped = arith.MaxNumFOp(position, c(0.0)).result
        clamped = arith.MinNumFOp(clamped, self.to_float(last)).result
        low = arith.FPToSIOp(self.i64, clamped).result
        at_edge = arith.CmpIOp(arith.CmpIPredicate.sge, low, last).result
        low = arith.SelectOp(at_edge, last, low).result
        high = arith.SelectOp(at_edge, last, arith.AddIOp(low, self.int_(1)).result).result
        clamped = arith.SelectOp(at_edge, self.to_float(last), clamped).result
        fraction = self.sub(clamped, self.to_float(low))
        low_index = as_index(low)
        high_index = as_index(high)
        return position, low_index, high_index, self.sub(c(1.0), fraction), fraction

    def outside(self, position, axis) -> mlir_ir.Value:
        """Whether a sample lies more than one pixel outside the image on `axis`."""
        below = arith.CmpFOp(arith.CmpFPredicate.OLT, position, self.c(-1.0)).result
        extent = self.to_float(self.extent(axis))
        above = arith.CmpFOp(arith.CmpFPredicate.OGT, position, extent).result
        return arith.OrIOp(below, above).result


def _sampling_body(builder: _Builder, accumulator: mlir_ir.Value) -> mlir_ir.Value:
    """The main generic's body: one grid sample of one bin of one channel of one roi,
    accumulated (sum for avg, max for max); samples past an adaptive grid are skipped."""
    ctx, options, c = builder.ctx, builder.options, builder.c
    x, _, batch_indices = ctx.operands
    index = [linalg.IndexOp(a).result for a in range(6)]
    (start_h, bin_h, grid_h), (start_w, bin_w, grid_w) = builder.geometry(index[0])
    y, y_low, y_high, hy, ly = builder.axis_sample(start_h, bin_h, grid_h, index[2], index[4], 0)
    xx, x_low, x_high, hx, lx = builder.axis_sample(start_w, bin_w, grid_w, index[3], index[5], 1)
    outside = arith.OrIOp(builder.outside(y, 0), builder.outside(xx, 1)).result
    batch = tensor.ExtractOp(batch_indices, [index[0]]).result
    batch = as_index(batch)
    # An out-of-range batch index (an invalid model) reads a valid image rather than memory.
    images = tensor_size(x, 0)
    images = index_value(images)
    last_image = arith.SubIOp(images, index_constant(1)).result
    batch = arith.MinSIOp(arith.MaxSIOp(batch, index_constant(0)).result, last_image).result
    read = lambda row, col: tensor.ExtractOp(x, [batch, index[1], row, col]).result  # noqa: E731
    mul = builder.mul
    terms = [
        mul(mul(hy, hx), read(y_low, x_low)),
        mul(mul(hy, lx), read(y_low, x_high)),
        mul(mul(ly, hx), read(y_high, x_low)),
        mul(mul(ly, lx), read(y_high, x_high)),
    ]
    if options.mode == "avg":
        sample = builder.add(builder.add(builder.add(terms[0], terms[1]), terms[2]), terms[3])
    else:
        sample = terms[0]
        for term in terms[1:]:
            sample = arith.MaximumFOp(sample, term).result
    sample = arith.SelectOp(outside, c(0.0), sample).result
    if options.mode == "avg":
        updated = builder.add(accumulator, sample)
    else:
        updated = arith.MaximumFOp(accumulator, sample).result
    if isinstance(grid_h, int):
        return updated
    in_grid = arith.AndIOp(
        arith.CmpIOp(arith.CmpIPredicate.slt, as_i64(index[4]), grid_h).result,
        arith.CmpIOp(arith.CmpIPredicate.slt, as_i64(index[5]), grid_w).result,
    ).result
    return arith.SelectOp(in_grid, updated, accumulator).result


def _largest_grid(builder: _Builder) -> list[mlir_ir.Value]:
    """The largest adaptive grid size (y, x) over all rois, as index values: one reduction over
    the rois (iterated through batch_indices, one element per roi)."""
    i64 = builder.i64
    init = fill(empty([], i64), builder.int_(0))

    def body(arguments):
        _, largest_h, largest_w = arguments
        (_, _, grid_h), (_, _, grid_w) = builder.geometry(linalg.IndexOp(0).result)
        return [arith.MaxSIOp(largest_h, grid_h).result, arith.MaxSIOp(largest_w, grid_w).result]

    batch_indices = builder.ctx.operands[2]
    largest = generic([(batch_indices, [0])], [(init, []), (init, [])], 1, (0,), body)
    # NOTE: `max(size, 0)` (a no-op here) keeps the size a host value: IREE clones a bare
    # `index_cast(extract(t))` into each dispatch that uses it, where it may fail to resolve
    # the workgroup count (indexing.data_size has the full story).
    return [
        arith.MaxSIOp(
            as_index(tensor.ExtractOp(value, []).result),
            index_constant(0),
        ).result
        for value in largest
    ]


def _finish(builder: _Builder, pooled: mlir_ir.Value) -> mlir_ir.Value:
    """avg: the sums divided by each roi's sample count (at least 1); max with an adaptive
    grid: 0 where a roi's grid is empty (onnxruntime's value), else the maximum."""
    options = builder.options
    loops = [0, 1, 2, 3]

    def body(arguments):
        (value, _) = arguments
        if options.sampling:
            return [builder.div(value, builder.c(float(options.sampling**2)))]
        count = builder.grid_count(builder.geometry(linalg.IndexOp(0).result))
        if options.mode == "avg":
            at_least_one = arith.MaxSIOp(count, builder.int_(1)).result
            return [builder.div(value, builder.to_float(at_least_one))]
        no_samples = arith.CmpIOp(arith.CmpIPredicate.sle, count, builder.int_(0)).result
        return [arith.SelectOp(no_samples, builder.c(0.0), value).result]

    init = empty(tensor_sizes(pooled), builder.element)
    return generic([(pooled, loops)], [(init, loops)], 4, (), body)[0]


@register_lowering("onnx.RoiAlign", since=10)
def _lower_roi_align(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    options = _attributes(ctx)
    _check_types(ctx, options.pooled)
    element = lower_scalar_type(element_type(ctx.niro_operands[0]))
    builder = _Builder(ctx, options, element)
    if options.sampling:
        grid: list[int | mlir_ir.Value] = [options.sampling, options.sampling]
    else:
        grid = list(_largest_grid(builder))
    initial = builder.c(0.0 if options.mode == "avg" else float("-inf"))
    init = fill(_result_init(ctx, element, options.pooled), initial)
    window = empty(grid, element)
    loops = [0, 1, 2, 3]
    pooled = generic(
        [(window, [4, 5])],
        [(init, loops)],
        6,
        (4, 5),
        lambda arguments: [_sampling_body(builder, arguments[1])],
    )[0]
    if options.mode == "avg" or not options.sampling:
        pooled = _finish(builder, pooled)
    if pooled.type != ctx.result_types[0]:  # a result type with dynamic output_height/width
        pooled = tensor.CastOp(ctx.result_types[0], pooled).result
    return [pooled]
