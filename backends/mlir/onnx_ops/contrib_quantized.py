"""onnxruntime's quantized contrib ops (domain `com.microsoft`, op-set 1), as its quantizer
emits them in QOperator format: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
QLinearConcat, QLinearGlobalAveragePool, QLinearAveragePool, QLinearSoftmax and QGemm.

Semantics (onnxruntime's ContribOperators.md): dequantize each input, (x - zero_point) * scale,
compute the float op in f32, quantize with the output's scale and zero point,
saturate(round_half_even(y / scale) + zero_point); the element-wise ops do all of it in one
`linalg.generic` per element. The pools, QLinearSoftmax and QLinearConcat run the float op's
own lowering (`onnx.GlobalAveragePool`, `onnx.AveragePool`, `onnx.Softmax`, `onnx.Concat`: one
implementation of each) between the two. QGemm accumulates (A - a_zero_point)(B - b_zero_point) + C in
i32 as QLinearMatMul does, then scales by alpha * a_scale * b_scale (per column when b_scale is
1-D) in f32, and requantizes by y_scale, or returns the f32 product when y_scale is absent.

NOTE: onnxruntime computes some of these in another order (QLinearAdd scales each input by
a_scale / c_scale; the pools sum integers and scale once; Sigmoid uses its own exp
approximation), so a value a hair from a .5 boundary can round the other way: results agree
within one quantization step, not bit for bit. Scales and zero points must be per tensor
(onnxruntime's kernels require it too), except QGemm's b_scale / b_zero_point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from niro.ir import ScalarType, TensorType, Value, write_imported_op

from ..bindings import arith, mlir_ir
from ..builders import elementwise
from ..context import LoweringRuleContext
from ..registry import lowering_for, register_lowering
from ..types import lower_scalar_type
from .common import attribute, element_type, imported_op, input_value, required_input, static_shape
from .elementwise import FloatMath, _leaky_relu, _sigmoid
from .linalg_ops import integer_matmul
from .quantization import (
    dequantize_element,
    per_tensor_parameter,
    quantize_element,
    requantize,
    to_float,
)

__all__: list[str] = []

_QUANTIZED = (ScalarType.I8, ScalarType.U8)
Parameters = tuple[tuple[mlir_ir.Value, ScalarType], tuple[mlir_ir.Value, ScalarType] | None]
"""A per-tensor (scale, zero point or None), each as an extracted scalar and its type."""


def _parameters(ctx: LoweringRuleContext, scale_position: int, prefix: str) -> Parameters:
    """The per-tensor scale at `scale_position` and the optional zero point after it."""
    scale = per_tensor_parameter(ctx, scale_position, f"{prefix}_scale")
    if not scale[1].is_float:
        raise ctx.error(f"needs a float {prefix}_scale, got {scale[1].spelling}")
    if input_value(ctx, scale_position + 1) is None:
        return scale, None
    return scale, per_tensor_parameter(ctx, scale_position + 1, f"{prefix}_zero_point")


def _quantized_input(ctx: LoweringRuleContext, position: int, what: str) -> tuple[mlir_ir.Value, Value]:
    value, niro_value = required_input(ctx, position, what)
    scalar = element_type(niro_value)
    if scalar not in _QUANTIZED:
        raise ctx.error(f"supports int8/uint8 {what} only, got {scalar.spelling}")
    ctx.ranked(niro_value, f"input {what}")
    return value, niro_value


def _output_scalar(ctx: LoweringRuleContext) -> ScalarType:
    scalar = element_type(ctx.niro_results[0])
    if scalar not in _QUANTIZED:
        raise ctx.error(f"supports int8/uint8 outputs only, got {scalar.spelling}")
    return scalar


def _like(value: Value, element: ScalarType) -> Value:
    """A Niro value standing for an intermediate tensor of `value`'s shape (same id, another
    element type): what `elementwise` and the float rules read shapes and types from."""
    assert isinstance(value.type, TensorType)
    return Value(value.id, TensorType(element, value.type.shape))


# -- element-wise -----------------------------------------------------------------------------------


Kernel = Callable[..., mlir_ir.Value]
"""`kernel(ctx, kit, *elements)` as elementwise.py's: one f32 element from f32 elements."""


def _lower_elementwise(
    ctx: LoweringRuleContext,
    inputs: Sequence[tuple[int, str]],
    output: tuple[int, str],
    kernel: Kernel,
) -> list[mlir_ir.Value]:
    """One broadcasting generic: dequantize the inputs (ONNX position of each data tensor and
    its name; its scale and zero point follow it), `kernel` in f32, quantize by the output
    parameters (position of the output scale, the output's name)."""
    out_scalar = _output_scalar(ctx)
    operands, parameters = [], []
    for position, what in inputs:
        value, niro_value = _quantized_input(ctx, position, what)
        operands.append((value, niro_value))
        parameters.append((element_type(niro_value), *_parameters(ctx, position + 1, what)))
    out_scale, out_zero = _parameters(ctx, *output)
    kit = FloatMath(ScalarType.F32)

    def body(elements: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
        values = [
            dequantize_element(element, scalar, scale, zero, lower_scalar_type(ScalarType.F32))
            for element, (scalar, scale, zero) in zip(elements, parameters, strict=True)
        ]
        return quantize_element(ctx, kernel(ctx, kit, *values), out_scale, out_zero, out_scalar)

    return [elementwise(ctx, body, operands)]


@register_lowering("com.microsoft.QLinearAdd", since=1)
def _lower_qlinear_add(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_elementwise(
        ctx, ((0, "A"), (3, "B")), (6, "C"), lambda ctx, kit, a, b: kit.add(a, b)
    )


@register_lowering("com.microsoft.QLinearMul", since=1)
def _lower_qlinear_mul(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_elementwise(
        ctx, ((0, "A"), (3, "B")), (6, "C"), lambda ctx, kit, a, b: kit.mul(a, b)
    )


@register_lowering("com.microsoft.QLinearSigmoid", since=1)
def _lower_qlinear_sigmoid(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_elementwise(ctx, ((0, "X"),), (3, "Y"), _sigmoid)


@register_lowering("com.microsoft.QLinearLeakyRelu", since=1)
def _lower_qlinear_leaky_relu(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_elementwise(ctx, ((0, "X"),), (3, "Y"), _leaky_relu)  # reads `alpha` (0.01)


# -- through the float op -------------------------------------------------------------------------


def _dequantized(ctx: LoweringRuleContext, position: int, what: str) -> tuple[mlir_ir.Value, Value]:
    """Input `position` dequantized by the parameters after it, as an f32 tensor."""
    value, niro_value = _quantized_input(ctx, position, what)
    scalar = element_type(niro_value)
    scale, zero = _parameters(ctx, position + 1, what)
    result = _like(niro_value, ScalarType.F32)

    def body(elements: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
        return dequantize_element(elements[0], scalar, scale, zero, lower_scalar_type(ScalarType.F32))

    return elementwise(ctx, body, [(value, niro_value)], result), result


def _quantized(
    ctx: LoweringRuleContext,
    value: mlir_ir.Value,
    niro_value: Value,
    parameters: Parameters,
    result: Value,
) -> mlir_ir.Value:
    """The f32 tensor `value` quantized by `parameters` into `result`'s type."""
    scale, zero = parameters
    out_scalar = element_type(result)

    def body(elements: Sequence[mlir_ir.Value]) -> mlir_ir.Value:
        return quantize_element(ctx, elements[0], scale, zero, out_scalar)

    return elementwise(ctx, body, [(value, niro_value)], result)


def _float_rule(
    ctx: LoweringRuleContext,
    name: str,
    inputs: Sequence[tuple[mlir_ir.Value, Value]],
    result: Value,
    attributes: dict | None = None,
    opset: int | None = None,
) -> mlir_ir.Value:
    """The lowering of ONNX op `name` run on `inputs` for `result`, with this op's attributes
    updated by `attributes` and its opset replaced by `opset` (its errors name this op)."""
    rule = lowering_for(name)
    assert rule is not None, name
    outer = imported_op(ctx)
    op = write_imported_op(
        dataclasses.replace(
            outer,
            inputs=tuple(niro for _, niro in inputs),
            outputs=(result,),
            attributes={**outer.attributes, **(attributes or {})},
            opset=outer.opset if opset is None else opset,
        )
    )
    inner = dataclasses.replace(
        ctx,
        op=op,
        operands=tuple(value for value, _ in inputs),
        niro_operands=tuple(niro for _, niro in inputs),
        niro_results=(result,),
        result_types=(ctx.mlir_type(result.type),),
    )
    (lowered,) = rule(inner)
    return lowered


def _channels_first(ctx: LoweringRuleContext) -> None:
    if attribute(ctx, "channels_last", 0):
        raise ctx.error("supports channels_last=0 (NCHW) only")


def _lower_through_float(
    ctx: LoweringRuleContext,
    float_op: str,
    attributes: dict | None = None,
    opset: int | None = None,
) -> list[mlir_ir.Value]:
    """Input 0 dequantized, `float_op` on it, quantized by the parameters at 3 and 4."""
    _output_scalar(ctx)
    x, x_niro = _dequantized(ctx, 0, "X")
    float_niro = _like(ctx.niro_results[0], ScalarType.F32)
    computed = _float_rule(ctx, float_op, [(x, x_niro)], float_niro, attributes, opset)
    return [_quantized(ctx, computed, float_niro, _parameters(ctx, 3, "y"), ctx.niro_results[0])]


def _lower_pool(ctx: LoweringRuleContext, float_op: str) -> list[mlir_ir.Value]:
    _channels_first(ctx)
    return _lower_through_float(ctx, float_op)


@register_lowering("com.microsoft.QLinearGlobalAveragePool", since=1)
def _lower_qlinear_global_average_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_pool(ctx, "onnx.GlobalAveragePool")


@register_lowering("com.microsoft.QLinearAveragePool", since=1)
def _lower_qlinear_average_pool(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _lower_pool(ctx, "onnx.AveragePool")


@register_lowering("com.microsoft.QLinearSoftmax", since=1)
def _lower_qlinear_softmax(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """onnx.Softmax at the op-set the attribute `opset` names (before 13 the input is 2-D at
    `axis`), `axis` -1 by default at any op-set."""
    version = attribute(ctx, "opset")
    if not isinstance(version, int):
        raise ctx.error("needs the int attribute 'opset' (the Softmax semantics it follows)")
    axis = attribute(ctx, "axis", -1)
    return _lower_through_float(ctx, "onnx.Softmax", {"axis": axis}, opset=version)


@register_lowering("com.microsoft.QLinearConcat", since=1)
def _lower_qlinear_concat(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Each (tensor, scale, zero point) triple requantized to (Y_scale, Y_zero_point) (exact
    when its parameters are the output's), then concatenated as onnx.Concat does."""
    out_scalar = _output_scalar(ctx)
    count = len(ctx.niro_operands)
    if imported_op(ctx).absent_inputs or count < 5 or (count - 2) % 3:
        raise ctx.error("expects Y_scale, Y_zero_point and (tensor, scale, zero point) triples")
    output = _parameters(ctx, 0, "Y")
    parts = []
    for position in range(2, count, 3):
        what = f"input #{position}"
        value, niro_value = _quantized_input(ctx, position, what)
        if element_type(niro_value) is not out_scalar:
            raise ctx.error(
                f"{what} is {element_type(niro_value).spelling}, the output {out_scalar.spelling}"
            )
        scalar = element_type(niro_value)
        scale, zero = _parameters(ctx, position + 1, what)
        result = _like(niro_value, out_scalar)

        def body(elements, scalar=scalar, scale=scale, zero=zero) -> mlir_ir.Value:
            dequantized = dequantize_element(elements[0], scalar, scale, zero, lower_scalar_type(ScalarType.F32))
            return quantize_element(ctx, dequantized, *output, out_scalar)

        parts.append((elementwise(ctx, body, [(value, niro_value)], result), result))
    return [_float_rule(ctx, "onnx.Concat", parts, ctx.niro_results[0])]


# -- QGemm ----------------------------------------------------------------------------------------


def _result_map(ctx: LoweringRuleContext, niro_value: Value, what: str) -> list[int | None]:
    """The indexing map (over the (M, N) result's dims) of an operand that broadcasts to it."""
    shape = static_shape(ctx, niro_value, what)
    if len(shape) > 2:
        raise ctx.error(f"{what} of shape {shape} does not broadcast to (M, N)")
    result = ctx.ranked(ctx.niro_results[0], "result").shape
    axes = range(2 - len(shape), 2)
    for axis, size in zip(axes, shape, strict=True):
        if size != 1 and result[axis] not in (size, None):
            raise ctx.error(f"{what} of shape {shape} does not broadcast to {result}")
    return [None if size == 1 else axis for axis, size in zip(axes, shape, strict=True)]


@register_lowering("com.microsoft.QGemm", since=1)
def _lower_qgemm(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Y = alpha * a_scale * b_scale * ((A' - a_zero_point)(B' - b_zero_point) + C), A' and B'
    transposed as transA / transB say, quantized by (y_scale, y_zero_point) when given."""
    transposed_a, transposed_b = int(attribute(ctx, "transA", 0)), int(attribute(ctx, "transB", 0))
    for position, what in ((0, "A"), (3, "B")):
        shape = ctx.ranked(_quantized_input(ctx, position, what)[1], f"input {what}").shape
        if len(shape) != 2:
            raise ctx.error(f"needs a 2-D {what}, got shape {shape}")
    labels = (
        ["k", "m"] if transposed_a else ["m", "k"],
        ["n", "k"] if transposed_b else ["k", "n"],
        ["m", "n"],
    )
    alpha = float(attribute(ctx, "alpha", 1.0))
    a_scale = per_tensor_parameter(ctx, 1, "a_scale")
    finish_operands: list = []
    b_scale_value, b_scale_niro = required_input(ctx, 4, "b_scale")
    b_scale_map = _result_map(ctx, b_scale_niro, "b_scale")
    b_scale_type = element_type(b_scale_niro)
    if 0 in b_scale_map:
        raise ctx.error("needs a per-tensor or per-column (N) b_scale")
    finish_operands.append((b_scale_value, b_scale_map))
    bias = input_value(ctx, 6)
    if bias is not None:
        if element_type(bias[1]) is not ScalarType.I32:
            raise ctx.error(f"needs an int32 C, got {element_type(bias[1]).spelling}")
        finish_operands.append((bias[0], _result_map(ctx, bias[1], "C")))
    has_y_scale = input_value(ctx, 7) is not None
    y_scale = per_tensor_parameter(ctx, 7, "y_scale") if has_y_scale else None
    y_zero = (
        per_tensor_parameter(ctx, 8, "y_zero_point") if input_value(ctx, 8) is not None else None
    )
    out_scalar = element_type(ctx.niro_results[0])
    if has_y_scale and out_scalar not in _QUANTIZED:
        raise ctx.error(f"supports int8/uint8 outputs with y_scale, got {out_scalar.spelling}")
    if not has_y_scale and out_scalar is not ScalarType.F32:
        raise ctx.error(f"supports a float32 output without y_scale, got {out_scalar.spelling}")
    f32 = lower_scalar_type(ScalarType.F32)

    def finish(acc: mlir_ir.Value, b_scale: mlir_ir.Value, *rest: mlir_ir.Value) -> mlir_ir.Value:
        # NOTE: as onnxruntime: the i32 sum plus C, times one f32 multiplier per column,
        # alpha * a_scale * b_scale (/ y_scale), rounded half to even.
        if rest:
            acc = arith.AddIOp(acc, rest[0]).result
        multiplier = arith.MulFOp(
            arith.MulFOp(to_float(*a_scale, f32), to_float(b_scale, b_scale_type, f32)).result,
            arith.ConstantOp(f32, mlir_ir.FloatAttr.get(f32, alpha)).result,
        ).result
        if y_scale is not None:
            multiplier = arith.DivFOp(multiplier, to_float(*y_scale, f32)).result
        if y_scale is None:
            return arith.MulFOp(arith.SIToFPOp(f32, acc).result, multiplier).result
        return requantize(ctx, acc, multiplier, y_zero, out_scalar)

    return [integer_matmul(ctx, (0, 3, 2, 5), finish, finish_operands, labels)]
