"""MLIR lowerings of two `ai.onnx.ml` operators: Binarizer and ArrayFeatureExtractor.

Binarizer maps each element to 1 when it is greater than `threshold`, else 0 (NaN gives 0), in
the input's type; the comparison is made as ONNX's reference (NumPy) makes it: in the float
type of the input (the threshold rounded to it), and for integers in double precision.

ArrayFeatureExtractor picks, along the last axis of X, the elements at the positions Y lists
(Y of any shape, read flattened): Z = X[..., Y] with the last dim of size numel(Y); a 1-D X
gives a [1, numel(Y)] result (as onnxruntime and onnx.reference do). Negative positions count
from the end, as in NumPy; a position out of range is clamped into range (the gather rule of
`gather_scatter.py`: an invalid model reads a valid element, never arbitrary memory).
String tensors do not reach here (Niro IR has no string type).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import ScalarType, format_type

from ..bindings import arith, mlir_ir, tensor
from ..builders import dim_size, elementwise, index_constant
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import RankedTensorType, lower_scalar_type
from .common import attribute, element_type
from .gather_scatter import _flatten, _normalized, _size
from .indexing import gather_generic, projection, to_index

__all__: list[str] = []

_BINARIZER_TYPES = (ScalarType.F32, ScalarType.F64, ScalarType.I64, ScalarType.I32)


@register_lowering("ai.onnx.ml.Binarizer", since=1)
def _lower_binarizer(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    scalar = element_type(ctx.niro_operands[0])
    if scalar not in _BINARIZER_TYPES:
        raise ctx.error(
            f"expects a float, double, int64 or int32 input, got "
            f"{format_type(ctx.niro_operands[0].type)}"
        )
    threshold = attribute(ctx, "threshold", 0.0)
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool):
        raise ctx.error(f"expects a number for attribute 'threshold', got {threshold!r}")
    element = lower_scalar_type(scalar)
    compare = element if scalar.is_float else mlir_ir.F64Type.get()
    limit = arith.ConstantOp(compare, mlir_ir.FloatAttr.get(compare, float(threshold))).result
    if scalar.is_float:
        one = arith.ConstantOp(element, mlir_ir.FloatAttr.get(element, 1.0)).result
        zero = arith.ConstantOp(element, mlir_ir.FloatAttr.get(element, 0.0)).result
    else:
        one = arith.ConstantOp(element, mlir_ir.IntegerAttr.get(element, 1)).result
        zero = arith.ConstantOp(element, mlir_ir.IntegerAttr.get(element, 0)).result

    def body(elements):
        value = elements[0]
        if not scalar.is_float:
            value = arith.SIToFPOp(compare, value).result
        above = arith.CmpFOp(arith.CmpFPredicate.OGT, value, limit).result
        return arith.SelectOp(above, one, zero).result

    return [elementwise(ctx, body)]


@register_lowering("ai.onnx.ml.ArrayFeatureExtractor", since=1)
def _lower_array_feature_extractor(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    data_type = ctx.ranked(ctx.niro_operands[0], "input X")
    indices_type = ctx.ranked(ctx.niro_operands[1], "indices Y")
    result = ctx.ranked(ctx.niro_results[0], "result Z")
    data, indices = ctx.operands[0], ctx.operands[1]
    if indices_type.element_type is not ScalarType.I64:
        raise ctx.error(f"expects int64 indices Y, got {format_type(indices_type)}")
    rank = len(data_type.shape)
    if rank == 0:
        raise ctx.error(f"expects an input X of rank >= 1, got {format_type(data_type)}")
    flat, flat_type = _flatten(ctx, indices, indices_type)
    out_rank = max(rank, 2)
    expected = (1,) * (out_rank - rank) + tuple(data_type.shape[:-1]) + (flat_type.shape[0],)
    if len(result.shape) != out_rank or any(
        want is not None and got is not None and want != got
        for want, got in zip(expected, result.shape, strict=True)
    ):
        shape = "x".join("?" if dim is None else str(dim) for dim in expected)
        raise ctx.error(f"result {format_type(result)} differs from the expected shape {shape}")
    extent = _size(ctx, data, data_type, rank - 1)
    sources = [None] * (out_rank - rank) + [(data, axis) for axis in range(rank - 1)]
    sources.append((flat, 0))
    sizes = [
        None if dim is not None else index_constant(1) if source is None else dim_size(*source)
        for dim, source in zip(result.shape, sources, strict=True)
    ]
    picked = projection(out_rank, [out_rank - 1])

    def body(position, elements):
        chosen = _normalized(to_index(elements[0], ScalarType.I64), extent)
        return tensor.ExtractOp(data, [*position[out_rank - rank : out_rank - 1], chosen]).result

    gathered_type = RankedTensorType(result.element_type, result.shape)
    return [gather_generic(ctx, gathered_type, sizes, body, [(flat, picked, ScalarType.I64)])]
