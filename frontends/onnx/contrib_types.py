"""Output types of onnxruntime's quantized contrib ops (domain `com.microsoft`), which ONNX
shape inference has no schema for.

onnxruntime's quantizer (`quantize_static(..., quant_format=QuantFormat.QOperator)`) turns
Add, Mul, Sigmoid, LeakyRelu, Concat, GlobalAveragePool, AveragePool, Softmax and Gemm into
`com.microsoft.QLinearAdd`, ... `QGemm`. Each has the shape of its float counterpart on the
same data inputs (onnxruntime's ContribOperators.md), so the shape comes from ONNX's own
inference of that counterpart (broadcasting, pooling windows, Gemm's transposes: one
implementation, ONNX's), run on the data inputs typed as f32; the element type is the output
zero point's (the input's when the zero point is absent), or f32 for a QGemm without y_scale.
`channels_last` pools see NHWC: the shape goes to NCHW for inference and back.

The same typing is the type rule `niro.ir.verify` runs on these UnknownOps
(`register_contrib_type_rules`: `contrib-operands`, `contrib-result-type`). It only types:
which of these ops the MLIR backend lowers is the backend's registry. The importer types an
op's outputs with it during the conversion (`refinements`), not in graph typing: it reads the
Niro types the conversion gave the op's operands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import onnx
import onnx.shape_inference
from niro.ir import (
    ABSENT_INPUTS_ATTRIBUTE,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    absent_positions,
    by_position,
    element_type_of,
    format_type,
    register_op_type_rule_source,
)

from .node_inference import inferred_outputs
from .onnx_types import type_proto_from_niro
from .oplib.inference_check import compatible

__all__ = [
    "CONTRIB_DOMAIN",
    "ContribTypeError",
    "contrib_op_types",
    "contrib_result_types",
    "register_contrib_type_rules",
]

CONTRIB_DOMAIN = "com.microsoft"
_COUNTERPART_OPSET = 17  # every counterpart's semantics here is unchanged since (or before) 17
_QUANTIZED = (ScalarType.I8, ScalarType.U8)


class ContribTypeError(ValueError):
    """The node's inputs or attributes do not make a well-typed contrib op (message says why)."""


@dataclass(frozen=True)
class _Counterpart:
    """How to type one contrib op: the float ONNX op of the same shape semantics."""

    op_type: str
    data: tuple[int, ...] | None
    """Input positions of the data tensors handed to `op_type`; None: every third input from 2
    (QLinearConcat's (tensor, scale, zero point) triples)."""
    zero_point: int
    """Input position of the output zero point (its element type is the output's)."""
    attributes: tuple[str, ...] = ()
    """Attributes passed on to `op_type` (those that shape the output)."""
    channels_last: bool = False
    """Whether the op takes a `channels_last` attribute (NHWC data when 1)."""


_COUNTERPARTS: dict[str, _Counterpart] = {
    "QLinearAdd": _Counterpart("Add", (0, 3), 7),
    "QLinearMul": _Counterpart("Mul", (0, 3), 7),
    "QLinearSigmoid": _Counterpart("Sigmoid", (0,), 4),
    "QLinearLeakyRelu": _Counterpart("LeakyRelu", (0,), 4),
    "QLinearConcat": _Counterpart("Concat", None, 1, ("axis",)),
    "QLinearGlobalAveragePool": _Counterpart("GlobalAveragePool", (0,), 4, channels_last=True),
    "QLinearAveragePool": _Counterpart(
        "AveragePool",
        (0,),
        4,
        ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"),
        channels_last=True,
    ),
    "QLinearSoftmax": _Counterpart("Softmax", (0,), 4, ("axis",)),
    "QGemm": _Counterpart("Gemm", (0, 3), 8, ("transA", "transB")),
}


def contrib_op_types() -> tuple[str, ...]:
    """The com.microsoft op types niroc types itself, sorted."""
    return tuple(sorted(_COUNTERPARTS))


def contrib_result_types(
    domain: str, op_type: str, inputs: Sequence[Value | None], attributes: Mapping[str, object]
) -> dict[int, TensorType] | None:
    """The output types of contrib op `op_type` of `domain` (output position -> type) from its
    inputs' Niro types (None where absent) and its attributes (plain values: int, float, str,
    sequence of ints); None when niroc does not type this op. ContribTypeError when it cannot
    be typed."""
    if domain != CONTRIB_DOMAIN:
        return None
    counterpart = _COUNTERPARTS.get(op_type)
    if counterpart is None:
        return None
    positions = counterpart.data
    if positions is None:
        if len(inputs) < 5 or (len(inputs) - 2) % 3:
            raise ContribTypeError(
                f"expects Y_scale, Y_zero_point and (tensor, scale, zero point) triples, got {len(inputs)} inputs"
            )
        positions = tuple(range(2, len(inputs), 3))
    data = [_tensor(inputs, position) for position in positions]
    channels_last = counterpart.channels_last and _int_attribute(attributes, "channels_last") == 1
    shapes = [
        _to_channels_first(tensor.shape) if channels_last else tensor.shape for tensor in data
    ]
    shape = _counterpart_shape(attributes, counterpart, shapes)
    if channels_last and shape is not None:
        shape = (shape[0], *shape[2:], shape[1])
    return {0: TensorType(_element_type(op_type, counterpart, inputs, data[0]), shape)}


def _tensor(inputs: Sequence[Value | None], position: int) -> TensorType:
    value = inputs[position] if position < len(inputs) else None
    if value is None or not isinstance(value.type, TensorType):
        raise ContribTypeError(f"input #{position} must be a tensor")
    return value.type


def _element_type(
    op_type: str, counterpart: _Counterpart, inputs: Sequence[Value | None], first: TensorType
) -> ScalarType:
    zero_point = inputs[counterpart.zero_point] if counterpart.zero_point < len(inputs) else None
    if op_type == "QGemm":
        has_scale = len(inputs) > 7 and inputs[7] is not None
        if not has_scale:
            if zero_point is not None:
                raise ContribTypeError("has y_zero_point without y_scale")
            return ScalarType.F32  # no y_scale: the output is the float result
        if zero_point is None:
            raise ContribTypeError("needs y_zero_point with y_scale (it gives the output type)")
    element = element_type_of(zero_point.type) if zero_point is not None else first.element_type
    if element not in _QUANTIZED:
        raise ContribTypeError(f"supports int8/uint8 quantized values only, got {element.spelling}")
    return element


def _to_channels_first(shape: tuple[int | None, ...] | None) -> tuple[int | None, ...] | None:
    if shape is None:
        return None
    if len(shape) < 3:
        raise ContribTypeError(f"channels_last input needs rank >= 3, got shape {list(shape)}")
    return (shape[0], shape[-1], *shape[1:-1])


def _int_attribute(attributes: Mapping[str, object], name: str) -> int:
    found = attributes.get(name, 0)
    if not isinstance(found, int):
        raise ContribTypeError(f"attribute '{name}' must be an int, got {found!r}")
    return found


def _counterpart_shape(
    attributes: Mapping[str, object],
    counterpart: _Counterpart,
    shapes: list[tuple[int | None, ...] | None],
) -> tuple[int | None, ...] | None:
    """The output shape ONNX infers for the float counterpart on inputs of `shapes` (None: of
    unknown rank)."""
    proto = onnx.NodeProto()
    proto.op_type = counterpart.op_type
    input_types = {}
    for position, shape in enumerate(shapes):
        name = f"in{position}"
        proto.input.append(name)
        input_types[name] = type_proto_from_niro(TensorType(ScalarType.F32, shape))
    proto.output.append("out0")
    for name in counterpart.attributes:
        value = attributes.get(name)
        if value is None:
            continue
        if isinstance(value, Sequence) and not isinstance(value, str):
            value = list(value)
        try:
            proto.attribute.append(onnx.helper.make_attribute(name, value))
        except (TypeError, ValueError) as error:
            raise ContribTypeError(f"attribute '{name}' is malformed: {error}") from None
    schema = onnx.defs.get_schema(counterpart.op_type, _COUNTERPART_OPSET, "")
    try:
        found = onnx.shape_inference.infer_node_outputs(
            schema,
            proto,
            input_types,
            opset_imports=[onnx.helper.make_opsetid("", _COUNTERPART_OPSET)],
        )
    except Exception as error:  # noqa: BLE001 - ONNX's inference errors have no common type
        lines = str(error).strip().splitlines() or [type(error).__name__]
        raise ContribTypeError(f"its inputs do not fit {counterpart.op_type}: {lines[0]}") from None
    typed = inferred_outputs(found, (0,)).get(0)
    return None if typed is None else typed.shape


# -- the type rule niro.ir.verify runs on these ops ------------------------------------------------


def _contrib_rule_for(name: str):
    """The type rule of UnknownOp `name` when it is a contrib op typed here, else None."""
    domain, _, op_type = name.rpartition(".")
    if domain != CONTRIB_DOMAIN or op_type not in _COUNTERPARTS:
        return None

    def contrib_type_rule(op: UnknownOp, report) -> None:
        """`contrib-operands`: the operands make no well-typed op; `contrib-result-type`: the
        result contradicts the type its operands give."""
        absent = absent_positions(op.attributes.get(ABSENT_INPUTS_ATTRIBUTE, ()), len(op.operands))
        inputs = list(by_position(op.operands, absent or ()))
        try:
            types = contrib_result_types(domain, op_type, inputs, op.attributes) or {}
        except ContribTypeError as error:
            report("contrib-operands", f"cannot be typed: {error}", *op.operands)
            return
        expected = types.get(0)
        if op.results and expected is not None and not compatible(op.results[0].type, expected):
            report(
                "contrib-result-type",
                f"result #0 has type {format_type(op.results[0].type)}, but its operands give "
                f"{format_type(expected)}",
                op.results[0],
            )

    return contrib_type_rule


_RULES_REGISTERED: list[bool] = []


def register_contrib_type_rules() -> None:
    """Make niro.ir.verify check the contrib ops typed here; idempotent."""
    if not _RULES_REGISTERED:
        register_op_type_rule_source(_contrib_rule_for)
        _RULES_REGISTERED.append(True)
