"""frontends/onnx/half_precision.py: onnxruntime's CPU plan for fp16/bf16 models.

The kernel tables are checked against the installed onnxruntime's own registry, and each rule of
the plan (f32 between rounding points, isolated nodes, the Cast pairs onnxruntime removes, the
MatMul+Add fusion's Reshape) on a small model: onnxruntime running the rewritten model must give
the bits it gives for the model as written, and the rewrite must put its Casts where the rule
says. End to end through IREE: tests/backends/mlir/test_half_precision_models.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from niro.frontends.onnx.half_precision import BF16_KERNELS, F16_KERNELS, plan_half_precision
from niro.frontends.onnx.inference import infer_types
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

_OPEN = 2**31 - 1


def _registered(type_name: str) -> dict[tuple[str, str], tuple[tuple[int, int | None], ...]]:
    """onnxruntime's CPU kernels for `type_name`, as (domain, op) -> merged opset ranges."""
    ranges: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for kernel in ort_state.get_all_opkernel_def():
        if kernel.provider != "CPUExecutionProvider" or kernel.domain not in (
            "",
            "ai.onnx",
            "com.microsoft",
        ):
            continue
        if any(f"tensor({type_name})" in types for types in kernel.type_constraints.values()):
            domain = "com.microsoft" if kernel.domain == "com.microsoft" else ""
            ranges.setdefault((domain, kernel.op_name), []).append(kernel.version_range)
    merged: dict[tuple[str, str], tuple[tuple[int, int | None], ...]] = {}
    for key, spans in ranges.items():
        joined: list[list[int]] = []
        for first, last in sorted(spans):
            if joined and first <= joined[-1][1] + 1:
                joined[-1][1] = max(joined[-1][1], last)
            else:
                joined.append([first, last])
        merged[key] = tuple((first, None if last >= _OPEN else last) for first, last in joined)
    return merged


@pytest.mark.parametrize(
    ("table", "type_name"), [(F16_KERNELS, "float16"), (BF16_KERNELS, "bfloat16")]
)
def test_kernel_tables_are_onnxruntimes(table, type_name):
    assert dict(table) == _registered(type_name)


def _model(
    nodes, inputs, outputs, initializers=(), opset=17, element=TensorProto.FLOAT16
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, element, shape) for name, shape in inputs],
        [helper.make_tensor_value_info(name, element, None) for name in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _weight(name, *shape, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float16)
    return numpy_helper.from_array(values, name)


def _plan(model):
    planned = plan_half_precision(model, infer_types(model))
    assert planned is not None
    return planned


def _casts(model) -> list[tuple[str, str]]:
    return [(node.input[0], node.output[0]) for node in model.graph.node if node.op_type == "Cast"]


def _assert_onnxruntime_agrees(model, planned, *shapes):
    """onnxruntime gives the same bits for the model as written and as the plan rewrites it."""
    rng = np.random.default_rng(3)
    feeds = {
        value.name: (rng.standard_normal(shape) * 4).astype(np.float16)
        for value, shape in zip(model.graph.input, shapes, strict=True)
    }
    runs = [
        onnxruntime.InferenceSession(
            case.SerializeToString(), providers=["CPUExecutionProvider"]
        ).run(None, feeds)
        for case in (model, planned)
    ]
    for written, rewritten in zip(*runs, strict=True):
        np.testing.assert_array_equal(written.view(np.uint16), rewritten.view(np.uint16))


def test_f32_models_are_left_alone():
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], ["y"], element=TensorProto.FLOAT
    )
    assert plan_half_precision(model, infer_types(model)) is None


def test_a_chain_without_half_kernels_is_rounded_once():
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm: all in f32, one Cast back at the output;
    Flatten has an fp16 kernel but sits between f32 nodes (isolated)."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "v"], ["y"], transB=1),
    ]
    model = _model(
        nodes, [("x", [2, 3, 8, 8])], ["y"], [_weight("w", 4, 3, 3, 3), _weight("v", 5, 36, seed=1)]
    )
    planned = _plan(model)
    assert _casts(planned) == [("x", "x_f32"), ("w", "w_f32"), ("v", "v_f32"), ("y_f32", "y")]
    _assert_onnxruntime_agrees(model, planned, [2, 3, 8, 8])


def test_half_kernels_between_f32_nodes_round_where_onnxruntime_does():
    """MatMul -> Add -> Split -> Reshape -> Transpose -> MatMul: the Split reads a value its
    Reshape readers keep in fp16, so the Add's result is rounded; the Transpose is read back in
    f32. LayerNormalization on a graph input keeps its fp16 kernel."""
    nodes = [
        helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Split", ["a"], ["s0", "s1"], axis=-1, num_outputs=2),
        helper.make_node("Reshape", ["s0", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["t", "s1"], ["y"]),
    ]
    initializers = [
        _weight("scale", 8),
        _weight("bias", 8, seed=1),
        _weight("w", 8, 8, seed=2),
        _weight("b", 8, seed=3),
        numpy_helper.from_array(np.array([2, 4, 4], np.int64), "shape"),
    ]
    model = _model(nodes, [("x", [2, 4, 8])], ["y"], initializers, opset=18)
    planned = _plan(model)
    assert ("a_f32", "a") in _casts(planned)
    assert ("t", "t_f32") in _casts(planned)
    assert ("n", "n_f32") in _casts(planned)
    _assert_onnxruntime_agrees(model, planned, [2, 4, 8])


def test_cast_pairs_onnxruntime_removes_are_read_in_f32():
    """Exp -> Cast(f32) -> Sqrt and Cast(f16) of that -> Log: onnxruntime drops both roundings."""
    nodes = [
        helper.make_node("Exp", ["x"], ["e"]),
        helper.make_node("Cast", ["e"], ["wide"], to=TensorProto.FLOAT),
        helper.make_node("Sqrt", ["wide"], ["s"]),
        helper.make_node("Cast", ["s"], ["narrow"], to=TensorProto.FLOAT16),
        helper.make_node("Log", ["narrow"], ["y"]),
    ]
    model = _model(nodes, [("x", [16])], ["y"])
    planned = _plan(model)
    kinds = [(node.op_type, list(node.input)) for node in planned.graph.node]
    assert ("Identity", ["e_f32"]) in kinds
    assert ("Log", ["s"]) in kinds
    _assert_onnxruntime_agrees(model, planned, [16])


def test_a_matmul_onnxruntime_fuses_keeps_its_input_in_fp16():
    """Add -> LayerNormalization -> MatMul(+Add bias) on rank 3: onnxruntime reads the MatMul's
    input through an fp16 Reshape, so the LayerNormalization is not isolated and rounds."""
    nodes = [
        helper.make_node("Add", ["x", "x"], ["d"]),
        helper.make_node("LayerNormalization", ["d", "scale", "bias"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    initializers = [
        _weight("scale", 8),
        _weight("bias", 8, seed=1),
        _weight("w", 8, 6, seed=2),
        _weight("b", 6, seed=3),
    ]
    model = _model(nodes, [("x", [2, 4, 8])], ["y"], initializers)
    planned = _plan(model)
    assert ("d_f32", "d") in _casts(planned) and ("n", "n_f32") in _casts(planned)
    _assert_onnxruntime_agrees(model, planned, [2, 4, 8])
