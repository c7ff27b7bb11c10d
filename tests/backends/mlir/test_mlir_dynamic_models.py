"""A model exported the way PyTorch exports transformers, with dynamic batch and sequence dims:
the head split and merge reshape by shapes computed at run time (Shape -> Gather -> Unsqueeze
-> Concat), batched MatMuls, an additive mask [batch, 1, 1, seq], Softmax, LayerNormalization
and an Erf GELU. One compile; run at several sizes (batch 1, seq 1 included: dynamic dims that
are 1 at run time) and compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

D, HEADS = 16, 2


def _attention_block() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    initializers = []

    def weight(name, shape):
        initializers.append(
            numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
        )
        return name

    def const(name, array):
        initializers.append(numpy_helper.from_array(np.array(array), name))
        return name

    node = helper.make_node
    nodes = [
        node("Shape", ["x"], ["shape"]),
        node("Gather", ["shape", const("zero", np.int64(0))], ["batch"], axis=0),
        node("Gather", ["shape", const("one_index", np.int64(1))], ["seq"], axis=0),
        node("Unsqueeze", ["batch", const("axis0", np.array([0], np.int64))], ["batch1"]),
        node("Unsqueeze", ["seq", "axis0"], ["seq1"]),
        node(
            "Concat",
            ["batch1", "seq1", const("heads", np.array([HEADS, D // HEADS], np.int64))],
            ["split"],
            axis=0,
        ),
        node(
            "Concat", ["batch1", "seq1", const("width", np.array([D], np.int64))], ["merge"], axis=0
        ),
    ]
    for name in "qkv":
        perm = [0, 2, 3, 1] if name == "k" else [0, 2, 1, 3]
        nodes += [
            node("MatMul", ["x", weight(f"w_{name}", (D, D))], [f"{name}_mm"]),
            node("Add", [f"{name}_mm", weight(f"b_{name}", (D,))], [f"{name}_b"]),
            node("Reshape", [f"{name}_b", "split"], [f"{name}_split"]),
            node("Transpose", [f"{name}_split"], [f"{name}_heads"], perm=perm),
        ]
    nodes += [
        node("MatMul", ["q_heads", "k_heads"], ["scores"]),
        node("Mul", ["scores", const("scale", np.float32(1 / np.sqrt(D // HEADS)))], ["scaled"]),
        node("Add", ["scaled", "mask"], ["masked"]),
        node("Softmax", ["masked"], ["probs"], axis=-1),
        node("MatMul", ["probs", "v_heads"], ["context"]),
        node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
        node("Reshape", ["context_t", "merge"], ["attended"]),
        node("Add", ["attended", "x"], ["residual"]),
        node(
            "LayerNormalization",
            ["residual", weight("gamma", (D,)), weight("beta", (D,))],
            ["normed"],
            axis=-1,
        ),
        node("Div", ["normed", const("sqrt2", np.float32(np.sqrt(2)))], ["scaled_normed"]),
        node("Erf", ["scaled_normed"], ["erf"]),
        node("Add", ["erf", const("one", np.float32(1))], ["erf1"]),
        node("Mul", ["normed", "erf1"], ["gelu2"]),
        node("Mul", ["gelu2", const("half", np.float32(0.5))], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "attention_block",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", D]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 1, 1, "seq"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", D])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    model = _attention_block()
    return model, compile_onnx(model, tmp_path_factory.mktemp("dynamic"), "attention_block")


@pytest.mark.parametrize(("batch", "seq"), [(1, 1), (2, 5), (3, 7)])
def test_a_dynamic_shape_attention_block_matches_onnxruntime(
    compiled, batch: int, seq: int
) -> None:
    model, vm_module = compiled
    rng = np.random.default_rng(batch * 10 + seq)
    x = rng.standard_normal((batch, seq, D)).astype(np.float32)
    mask = np.where(rng.random((batch, 1, 1, seq)) < 0.2, -1e4, 0).astype(np.float32)
    [(got,)] = assert_matches_onnxruntime(
        vm_module, model, [{"x": x, "mask": mask}], function="attention_block", rtol=1e-4, atol=1e-5
    )
    assert got.shape == (batch, seq, D)
