"""frontends/onnx/half_precision.py: onnxruntime's CPU plan for fp16/bf16 models.

The kernel tables are checked against the installed onnxruntime's own registry, and each rule of
the plan (f32 between rounding points, isolated nodes, the Cast pairs onnxruntime removes, the
MatMul+Add fusion's Reshape) on a small model: onnxruntime running the rewritten model must give
the bits it gives for the model as written, and the rewrite must put its Casts where the rule
says. End to end through IREE: tests/backends/mlir/test_half_precision_models.py.
"""

from __future__ import annotations

import tempfile

import numpy as np
import onnx
import onnx_ir
import onnxruntime
import pytest
from niro.frontends.onnx.graph_typing import bound_types
from niro.frontends.onnx.half_conv_folds import fold_half_convs
from niro.frontends.onnx.half_precision import (
    BF16_KERNELS,
    F16_KERNELS,
    HalfPlan,
    plan_half_precision,
)
from niro.frontends.onnx.inference import infer_types
from niro.frontends.onnx.value_types import ValueTypes
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


def typed(model: onnx.ModelProto) -> tuple[onnx_ir.Model, ValueTypes]:
    """`model` read into onnx_ir, with its inferred types."""
    ir_model = onnx_ir.serde.deserialize_model(model)
    return ir_model, bound_types(ir_model, infer_types(model))


def planned_model(model: onnx.ModelProto) -> tuple[onnx.ModelProto, HalfPlan | None]:
    """`model` as the plan rewrites it (written back to a proto), and the plan."""
    ir_model, types = typed(model)
    plan = plan_half_precision(ir_model, types)
    if plan is not None:
        _assert_types_as_inferred(ir_model, plan)
    return onnx_ir.serde.serialize_model(ir_model), plan


def _plan(model):
    planned, plan = planned_model(model)
    assert plan is not None
    return planned


def _known(type_: onnx.TypeProto | None) -> bytes | None:
    """`type_` without the dim names ONNX inference makes up (numbered per run)."""
    if type_ is None:
        return None
    known = onnx.TypeProto()
    known.CopyFrom(type_)
    for dim in known.tensor_type.shape.dim:
        if dim.dim_param.startswith("unk__"):
            dim.ClearField("dim_param")
    return known.SerializeToString()


def _assert_types_as_inferred(model: onnx_ir.Model, planned: HalfPlan) -> None:
    """The types the plan gives the model it rewrote are those inference gives it, in its
    bodies too, and so are its folds."""
    if planned.types is None:
        return
    inferred = bound_types(model, infer_types(onnx_ir.serde.serialize_model(model)))
    for graph in (model.graph, *model.graph.subgraphs()):
        values = {*graph.inputs, *graph.outputs, *(value for node in graph for value in node.outputs)}
        for value in values:
            assert _known(planned.types.type_of(value)) == _known(inferred.type_of(value)), value.name
    assert planned.types.folded == inferred.folded


def _casts(model) -> list[tuple[str, str]]:
    return [(node.input[0], node.output[0]) for node in model.graph.node if node.op_type == "Cast"]


def _assert_onnxruntime_agrees(model, planned, *shapes):
    """onnxruntime gives the same bits for the model as written and as the plan rewrites it."""
    rng = np.random.default_rng(3)
    feeds = {
        value.name: (rng.standard_normal(shape) * 4).astype(np.float16)
        for value, shape in zip(model.graph.input, shapes, strict=True)
    }
    _assert_same_bits(model, planned, feeds)


def test_f32_models_are_left_alone():
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], ["y"], element=TensorProto.FLOAT
    )
    assert planned_model(model)[1] is None


def test_an_f32_graph_with_half_values_only_in_a_body_is_planned():
    """The plan looks for half values in every graph, not only the main one: an If branch
    that computes Sin (no fp16 kernel) on an fp16 Cast of an outer f32 value is planned."""
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x, bool c) => (float[2] y) {
            y = If (c) <
                then_branch = t () => (float[2] a) {
                    h = Cast <to = 10> (x)
                    s = Sin (h)
                    a = Cast <to = 1> (s)
                },
                else_branch = e () => (float[2] b) { b = Identity (x) }
            >
        }"""
    )
    planned = _plan(model)
    [branch] = [attribute.g for attribute in planned.graph.node[0].attribute if attribute.name == "then_branch"]
    assert "Sin" in [node.op_type for node in branch.node]
    assert any(node.op_type == "Cast" and node.output[0] not in ("h", "a") for node in branch.node)


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


def _body_casts(node) -> list[list[tuple[str, str]]]:
    """The (source, result) of the Casts in each body of `node`."""
    return [
        [(inner.input[0], inner.output[0]) for inner in body.node if inner.op_type == "Cast"]
        for attribute in node.attribute
        for body in ([attribute.g] if attribute.HasField("g") else attribute.graphs)
    ]


def _assert_same_bits(model, planned, feeds):
    runs = [
        onnxruntime.InferenceSession(
            case.SerializeToString(), providers=["CPUExecutionProvider"]
        ).run(None, feeds)
        for case in (model, planned)
    ]
    for written, rewritten in zip(*runs, strict=True):
        np.testing.assert_array_equal(written.view(np.uint16), rewritten.view(np.uint16))


def _fp16(*shape, seed):
    return (np.random.default_rng(seed).standard_normal(shape) * 4).astype(np.float16)


def if_model() -> onnx.ModelProto:
    """Exp(x) read by an If on `c` whose branches compute op(e, x) + x then * e, in fp16."""

    def branch(name, op):
        nodes = [
            helper.make_node(op, ["e", "x"], [f"{name}_m"]),
            helper.make_node("Add", [f"{name}_m", "x"], [f"{name}_a"]),
            helper.make_node("Mul", [f"{name}_a", "e"], [name]),
        ]
        return helper.make_graph(
            nodes, name, [], [helper.make_tensor_value_info(name, TensorProto.FLOAT16, None)]
        )

    nodes = [
        helper.make_node("Exp", ["x"], ["e"]),
        helper.make_node(
            "If", ["c"], ["y"], then_branch=branch("t", "Mul"), else_branch=branch("f", "Sub")
        ),
    ]
    model = _model(nodes, [("x", [256])], ["y"])
    model.graph.input.insert(0, helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    return model


def if_feeds(condition: bool) -> dict[str, np.ndarray]:
    return {"c": np.array(condition), "x": _fp16(256, seed=4)}


def loop_model() -> onnx.ModelProto:
    """A Loop of `n` iterations carrying an fp16 value: acc * b + c from a."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["acc", "b"], ["m"]),
            helper.make_node("Add", ["m", "c"], ["next"]),
            helper.make_node("Identity", ["go"], ["go_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("go", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", TensorProto.FLOAT16, None),
        ],
        [
            helper.make_tensor_value_info("go_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("next", TensorProto.FLOAT16, None),
        ],
    )
    nodes = [helper.make_node("Loop", ["n", "", "a"], ["y"], body=body)]
    model = _model(nodes, [("a", [256]), ("b", [256]), ("c", [256])], ["y"])
    model.graph.input.insert(0, helper.make_tensor_value_info("n", TensorProto.INT64, []))
    return model


def loop_feeds() -> dict[str, np.ndarray]:
    return {
        "n": np.array(3, np.int64),
        "a": _fp16(256, seed=5),
        "b": _fp16(256, seed=6) / 4,
        "c": _fp16(256, seed=7),
    }


def test_if_branches_are_planned_as_onnxruntime_plans_subgraphs():
    """onnxruntime casts each branch on its own: the branch reads the outer fp16 values (an f32
    node's result rounded for it, a graph input) through Casts, computes in f32 and rounds its
    output once."""
    model = if_model()
    planned = _plan(model)
    assert [result for _, result in _casts(planned)].count("e") == 1  # rounded for the If
    [if_node] = [node for node in planned.graph.node if node.op_type == "If"]
    for casts in _body_casts(if_node):
        assert {source for source, _ in casts} >= {"e", "x"}
        assert len(casts) == 3  # e and x widened, the output rounded: nothing between
    for condition in (True, False):
        _assert_same_bits(model, planned, if_feeds(condition))


def test_loop_bodies_round_their_carried_values_each_iteration():
    """The Loop body computes acc * b + c in f32 from Casts of the carried value and the outer
    ones, and rounds the carried value at the end of each iteration, as onnxruntime does."""
    model = loop_model()
    planned = _plan(model)
    [casts] = _body_casts(planned.graph.node[0])
    assert {source for source, _ in casts} >= {"acc", "b", "c"}
    assert [result for _, result in casts].count("next") == 1 and len(casts) == 4
    _assert_same_bits(model, planned, loop_feeds())


def conv_fold_model() -> onnx.ModelProto:
    """Conv(+bias) -> BatchNormalization -> Relu -> Conv -> Mul -> Conv -> Add -> Conv (no
    bias) -> BatchNormalization, fp16, per-channel constants: every fold onnxruntime makes."""
    rng = np.random.default_rng(8)

    def values(name, *shape, low=None):
        array = rng.standard_normal(shape) if low is None else rng.random(shape) + low
        return numpy_helper.from_array(array.astype(np.float16), name)

    nodes, initializers, x = [], [], "x"
    for stage, (reader, bias) in enumerate(
        [("BatchNormalization", True), ("Mul", True), ("Add", False), ("BatchNormalization", False)]
    ):
        conv_inputs = [x, f"w{stage}"] + ([f"cb{stage}"] if bias else [])
        initializers.append(values(f"w{stage}", 4, 4 if stage else 3, 3, 3))
        if bias:
            initializers.append(values(f"cb{stage}", 4))
        nodes.append(helper.make_node("Conv", conv_inputs, [f"c{stage}"], pads=[1, 1, 1, 1]))
        if reader == "BatchNormalization":
            names = [f"{part}{stage}" for part in ("s", "b", "m", "v")]
            initializers += [values(names[0], 4, low=0.5), values(names[1], 4)]
            initializers += [values(names[2], 4), values(names[3], 4, low=0.1)]
            nodes.append(helper.make_node(reader, [f"c{stage}", *names], [f"n{stage}"]))
        else:
            initializers.append(values(f"k{stage}", 4, 1, 1))
            nodes.append(helper.make_node(reader, [f"c{stage}", f"k{stage}"], [f"n{stage}"]))
        nodes.append(helper.make_node("Relu", [f"n{stage}"], [f"r{stage}"]))
        x = f"r{stage}"
    nodes[-1].output[0] = "y"
    return _model(nodes, [("x", [1, 3, 8, 8])], ["y"], initializers)


def test_conv_folds_give_onnxruntimes_weights():
    """The folded weights and biases are onnxruntime's, bit for bit (its model after the basic
    rewrite rules), and the planned model computes what onnxruntime does."""
    model = conv_fold_model()
    arrays = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    ir_model, types = typed(model)
    assert fold_half_convs(ir_model, arrays.get, types)
    folded = onnx_ir.serde.serialize_model(ir_model)
    assert [node.op_type for node in folded.graph.node] == ["Conv", "Relu"] * 4
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    with tempfile.TemporaryDirectory() as folder:
        options.optimized_model_filepath = f"{folder}/basic.onnx"
        onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        basic = onnx.load(options.optimized_model_filepath)
    theirs = {tensor.name: numpy_helper.to_array(tensor) for tensor in basic.graph.initializer}
    ours = {tensor.name: numpy_helper.to_array(tensor) for tensor in folded.graph.initializer}
    widened = {node.output[0]: node.input[0] for node in basic.graph.node if node.op_type == "Cast"}
    their_convs = [node for node in basic.graph.node if node.op_type == "Conv"]
    our_convs = [node for node in folded.graph.node if node.op_type == "Conv"]
    assert len(their_convs) == len(our_convs) == 4
    for their, our in zip(their_convs, our_convs, strict=True):
        assert len(their.input) == len(our.input) == 3
        for their_name, our_name in zip(their.input[1:], our.input[1:], strict=True):
            expected = theirs[widened.get(their_name, their_name)]
            assert expected.dtype == np.float16
            np.testing.assert_array_equal(ours[our_name].view(np.uint16), expected.view(np.uint16))
    plan = plan_half_precision(ir_model, types)
    assert plan is not None and plan.types is not None
    _assert_types_as_inferred(ir_model, plan)
    _assert_onnxruntime_agrees(model, onnx_ir.serde.serialize_model(ir_model), [1, 3, 8, 8])
