"""ONNX models with dynamic dims for the dynamic-shape tests of convolutions and pools: one
input `x` whose str dims are dynamic, weights as initializers, outputs typed by ONNX's own
shape inference (strict), checked by onnx.checker."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["graph_model", "one_node_model", "random_weights"]


def graph_model(
    nodes: list[onnx.NodeProto],
    x_shape: tuple,
    weights: dict[str, np.ndarray] | None = None,
    *,
    outputs: dict[str, int] | None = None,
    opset: int = 19,
    x_type: int = TensorProto.FLOAT,
) -> onnx.ModelProto:
    """A graph of `nodes` with one input `x` of `x_shape` (str dims are dynamic), `weights` as
    initializers and `outputs` (name -> element type; default one f32 `y`)."""
    outputs = {"y": TensorProto.FLOAT} if outputs is None else outputs
    initializers = [numpy_helper.from_array(value, name) for name, value in (weights or {}).items()]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", x_type, list(x_shape))],
        [helper.make_tensor_value_info(name, kind, None) for name, kind in outputs.items()],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def one_node_model(op: str, x_shape: tuple, weights=None, outputs=("y",), **attributes):
    """`op` on `x` and the weights (in order); a MaxPool's second output is its int64 Indices."""
    weights = weights or {}
    node = helper.make_node(op, ["x", *weights], list(outputs), **attributes)
    kinds = {name: TensorProto.FLOAT for name in outputs}
    if op == "MaxPool" and len(outputs) == 2:
        kinds[outputs[1]] = TensorProto.INT64
    return graph_model([node], x_shape, weights, outputs=kinds)


def random_weights(seed: int, **shapes) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        name: (rng.standard_normal(shape) * 0.5).astype(np.float32)
        for name, shape in shapes.items()
    }
