"""One-node ONNX models beyond ONNX's own node tests, with reference outputs from onnx.reference.

`one_node_case(...)` gives a `NodeTestCase` that `tests.conformance.pipeline.run_case` runs end to
end (import -> verify -> lower -> iree-compile -> run -> compare), so a family's unit tests can
check the cases the node tests miss: constant axes (initializers, as real models have them),
f16, integer types, broadcasting batch dims.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.onnx_node_cases import NodeTestCase

__all__ = ["one_node_case"]


def one_node_case(
    name: str,
    op_type: str,
    inputs: dict[str, np.ndarray],
    outputs: list[str] | int = 1,
    *,
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 21,
    reference: str = "onnx",
    domain: str = "",
    domain_version: int = 1,
    **attributes,
) -> NodeTestCase:
    """A model of one `op_type` node. `inputs` are graph inputs fed at run time; `initializers`
    are constants (they come after the inputs in the node's input list, in order). An input name
    "" is an absent optional input. Expected outputs (and the output types) come from
    onnx.reference, or from onnxruntime with `reference="onnxruntime"` (onnx.reference ignores
    the opset: e.g. it computes Softmax-11 with Softmax-13's semantics). A `domain` other than
    ONNX's default (e.g. "ai.onnx.ml") puts the node there, imported at `domain_version`."""
    initializers = initializers or {}
    output_names = (
        [f"out{index}" for index in range(outputs)] if isinstance(outputs, int) else outputs
    )
    node_inputs = list(inputs) + list(initializers)
    node = helper.make_node(
        op_type, node_inputs, output_names, name=f"{op_type}_0", domain=domain, **attributes
    )
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, domain_version)] if domain else [])
    feeds = {key: value for key, value in inputs.items() if key}
    evaluator_graph = _graph(name, node, feeds, initializers, output_names, None)
    model = helper.make_model(evaluator_graph, opset_imports=opsets)
    expected = _evaluate(model, feeds, reference)
    graph = _graph(name, node, feeds, initializers, output_names, expected)
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.checker.check_model(model)
    data = ((tuple(feeds.values()), tuple(np.asarray(value) for value in expected)),)
    return NodeTestCase(name, model, data, 1e-3, 1e-5)


def _evaluate(model: onnx.ModelProto, feeds: dict, reference: str) -> list:
    if reference == "onnx":
        return ReferenceEvaluator(model).run(None, feeds)
    import onnxruntime

    inferred = onnx.shape_inference.infer_shapes(model)
    session = onnxruntime.InferenceSession(
        inferred.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def _graph(name, node, feeds, initializers, output_names, expected):
    graph_inputs = [
        helper.make_tensor_value_info(
            key, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape
        )
        for key, value in feeds.items()
    ]
    if expected is None:
        graph_outputs = [
            helper.make_value_info(output, onnx.TypeProto()) for output in output_names
        ]
    else:
        graph_outputs = [
            helper.make_tensor_value_info(
                output,
                helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype),
                np.asarray(value).shape,
            )
            for output, value in zip(output_names, expected, strict=True)
        ]
    tensors = [numpy_helper.from_array(value, key) for key, value in initializers.items()]
    return helper.make_graph([node], name, graph_inputs, graph_outputs, initializer=tensors)
