"""onnxruntime's Conv folds of fp16/bf16 weights, made as onnxruntime makes them.

onnxruntime's basic-level Conv rewrite rules (ConvBNFusion, ConvMulFusion, ConvAddFusion) fold
a BatchNormalization, or a Mul or Add by a per-channel constant, into the weights and bias of a
Conv with constant fp16/bf16 weights whose only reader it is. They run before onnxruntime casts
anything (`half_precision`), in the initializers' own type with a rounding after every step
(`_fold_into_conv`), so the model it runs has other weights than the exported ones: a CNN
exported with BatchNormalization differs by up to ~1,800 ulp where the outputs cancel if the
fold is not done as it does it. `fold_half_convs` makes the same weights, in place, before the
fp16/bf16 plan (`graph_typing`).
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import onnx
import onnx_ir

from .graph_walks import value_names
from .half_plan_types import values_read_by_bodies
from .half_precision import HALF_TYPES, fresh_name
from .value_types import ValueTypes

__all__ = ["ReadInitializer", "fold_half_convs"]

ReadInitializer = Callable[[str], "np.ndarray | None"]
"""An initializer's values by name (fp16 as float16, bf16 as ml_dtypes' bfloat16), or None."""

_DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})
_HALF_ARRAYS = {
    np.dtype(np.float16): onnx.TensorProto.FLOAT16,
    np.dtype(ml_dtypes.bfloat16): onnx.TensorProto.BFLOAT16,
}


def fold_half_convs(model: onnx_ir.Model, read: ReadInitializer, types: ValueTypes) -> bool:
    """Apply onnxruntime's Conv folds to `model`'s main graph in place (module docstring);
    False when none applies (always for a model without fp16/bf16 Conv weights). A folded
    Conv yields the value its reader yielded, with that value's type in `types`; the folded
    weights replace the initializers no node reads any more, after the ones still read."""
    graph = model.graph
    half_weights = {
        value
        for value in graph.initializers.values()
        if value.const_value is not None and int(value.const_value.dtype) in HALF_TYPES
    }
    if not any(
        node.op_type == "Conv" and len(node.inputs) > 1 and node.inputs[1] in half_weights
        for node in graph
    ):
        return False
    taken = value_names(graph)
    overridable = set(graph.inputs)
    made: dict[onnx_ir.Value, np.ndarray] = {}

    def constant(value: onnx_ir.Value | None) -> np.ndarray | None:
        if value is None:
            return None
        if value in made:
            return made[value]
        if not value.is_initializer() or value.graph is not graph or value in overridable:
            return None
        return read(value.name or "")

    def initializer(like: onnx_ir.Value, array: np.ndarray) -> onnx_ir.Value:
        name = fresh_name(like.name or "", "folded", taken)
        tensor = onnx_ir.serde.TensorProtoTensor(_half_tensor(name, array))
        value = onnx_ir.Value(
            name=name,
            type=onnx_ir.TensorType(onnx_ir.DataType(_HALF_ARRAYS[array.dtype])),
            shape=onnx_ir.Shape(array.shape),
            const_value=tensor,
        )
        graph.register_initializer(value)
        made[value] = array
        return value

    table = types.graphs.setdefault(graph, {})
    inner_reads = values_read_by_bodies(graph)
    folded = True
    while folded:
        folded = False
        for conv in graph:
            if conv.op_type != "Conv" or conv.domain not in _DEFAULT_DOMAINS:
                continue
            result = conv.outputs[0]
            readers = [node for node in graph if result in node.inputs]
            if len(readers) != 1 or result.is_graph_output() or result in inner_reads:
                continue
            reader = readers[0]
            if reader.domain not in _DEFAULT_DOMAINS or list(reader.inputs).count(result) != 1:
                continue
            weights = _fold_into_conv(conv, reader, constant)
            if weights is None:
                continue
            weight, bias = weights
            weights_read = conv.inputs[1]
            assert weights_read is not None  # (_fold_into_conv read its array)
            inputs = [conv.inputs[0], initializer(weights_read, weight)]
            if bias is not None:
                inputs.append(initializer(result, bias))
            yielded = reader.outputs[0]
            output = onnx_ir.Value(name=yielded.name, type=yielded.type, shape=yielded.shape)
            replacement = onnx_ir.Node(
                conv.domain,
                "Conv",
                inputs,
                list(conv.attributes.values()),
                overload=conv.overload,
                outputs=[output],
                name=conv.name,
                doc_string=conv.doc_string,
            )
            graph.insert_before(conv, replacement)
            yielded.replace_all_uses_with(output, replace_graph_outputs=True)
            graph.remove([conv, reader], safe=True)
            if yielded in table:
                table[output] = table.pop(yielded)
            table.pop(result, None)
            folded = True
            break
    if not made:
        return False
    for name, value in list(graph.initializers.items()):
        if not value.uses() and not value.is_graph_input() and not value.is_graph_output():
            graph.initializers.pop(name)
    return True


def _fold_into_conv(
    conv: onnx_ir.Node,
    reader: onnx_ir.Node,
    constant: Callable[[onnx_ir.Value | None], np.ndarray | None],
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The Conv's new (weight, bias) when onnxruntime folds `reader` (its result's only reader,
    reading it first) into it, else None. Each step computes in f32 and rounds to the weights'
    type, as onnxruntime's `Initializer` arithmetic does on fp16/bf16."""
    weight = constant(conv.inputs[1])
    if weight is None or weight.dtype not in _HALF_ARRAYS or weight.ndim < 3:
        return None
    half = weight.dtype
    channels = weight.shape[0]
    rank = weight.ndim
    bias = None
    if len(conv.inputs) == 3:
        bias = constant(conv.inputs[2])
        if bias is None or bias.dtype != half or bias.shape != (channels,):
            return None

    def rounded(value) -> np.ndarray:
        return np.asarray(value, np.float32).astype(half)

    def wide(array: np.ndarray) -> np.ndarray:
        return array.astype(np.float32)

    def per_channel(array: np.ndarray) -> np.ndarray:
        return wide(array).reshape((-1,) + (1,) * (rank - 1))

    if reader.op_type == "BatchNormalization":
        if (
            reader.inputs[0] is not conv.outputs[0]
            or len([value for value in reader.outputs if value.name]) != 1
        ):
            return None
        parameters = [constant(value) for value in reader.inputs[1:5]]
        if any(
            array is None or array.dtype != half or array.shape != (channels,)
            for array in parameters
        ):
            return None
        scale, offset, mean, variance = (array for array in parameters if array is not None)
        found = reader.attributes.get("epsilon")
        if found is not None and found.type is not onnx_ir.AttributeType.FLOAT:
            return None  # (malformed: left as it is, not folded with a guessed epsilon)
        epsilon = np.float32(found.value if found is not None else np.float32(1e-5))
        deviation = rounded(np.sqrt(wide(rounded(wide(variance) + epsilon))))
        factor = rounded(wide(scale) / wide(deviation))
        weight = rounded(wide(weight) * per_channel(factor))
        if bias is not None:
            bias = rounded(wide(rounded(wide(bias) - wide(mean))) * wide(factor))
            return weight, rounded(wide(bias) + wide(offset))
        return weight, rounded(wide(offset) - wide(rounded(wide(mean) * wide(factor))))
    if reader.op_type not in ("Mul", "Add") or reader.inputs[0] is not conv.outputs[0]:
        return None
    operand = constant(reader.inputs[1])
    if operand is None or weight.ndim < 4:
        return None
    per_channel_shape = (
        operand.ndim == weight.ndim - 1 and operand.ndim > 0 and operand.shape[0] == channels
    )
    if per_channel_shape and any(dim != 1 for dim in operand.shape[1:]):
        return None
    if reader.op_type == "Mul":
        if operand.dtype != half or not (operand.ndim == 0 or per_channel_shape):
            return None
        factor = wide(operand) if operand.ndim == 0 else per_channel(operand)
        weight = rounded(wide(weight) * factor)
        if bias is None:
            return weight, None
        return weight, rounded(wide(bias) * wide(operand).reshape(-1))
    if not per_channel_shape or operand.dtype not in _HALF_ARRAYS:
        return None
    if bias is None:
        return weight, operand.reshape(channels)
    if operand.dtype != half:
        return None
    return weight, rounded(wide(bias) + wide(operand).reshape(channels))


def _half_tensor(name: str, array: np.ndarray) -> onnx.TensorProto:
    tensor = onnx.TensorProto()
    tensor.name = name
    tensor.data_type = _HALF_ARRAYS[array.dtype]
    tensor.dims.extend(array.shape)
    tensor.raw_data = np.ascontiguousarray(array).view(np.uint16).tobytes()
    return tensor
