"""Dynamic dims the model names alike (one ONNX dim_param) are known equal: the element-wise
lowering checks nothing where they meet, and the function checks once, at its entry, that the
graph inputs sharing a name agree, so a call that breaks the declaration stops with a message
instead of reading out of bounds; dims with different names keep their per-op checks."""

from __future__ import annotations

import iree.compiler as iree_compiler
import iree.runtime as iree_runtime
import numpy as np
import onnx
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from niro.ir import ScalarType, TensorType, broadcast_names
from onnx import TensorProto, helper


def _model(path, x_dims, y_dims) -> str:
    """z = x + y, w = z * x, v = Transpose(w) - y^T: element-wise ops on values derived from
    two graph inputs, and a Transpose that carries the names."""
    nodes = [
        helper.make_node("Add", ["x", "y"], ["z"]),
        helper.make_node("Mul", ["z", "x"], ["w"]),
        helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[1, 0]),
        helper.make_node("Sub", ["wt", "yt"], ["v"]),
    ]
    graph = helper.make_graph(
        nodes,
        "names",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims),
        ],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    file = path / "model.onnx"
    onnx.save(model, file)
    return lower_to_mlir(import_model(str(file))).to_text()


def _run(text: str, *inputs: np.ndarray) -> np.ndarray:
    vmfb = iree_compiler.compile_str(
        text, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=host"]
    )
    module = iree_runtime.load_vm_flatbuffer(vmfb, driver="local-task")
    results = module.names(*inputs)  # the first output, when there are several
    return (results[0] if isinstance(results, tuple | list) else results).to_host()


def test_broadcast_names():
    named = TensorType(ScalarType.F32, (None, None), ("b", "s"))
    other = TensorType(ScalarType.F32, (None, None), ("c", "s"))
    row = TensorType(ScalarType.F32, (1, None), (None, "s"))
    unnamed = TensorType(ScalarType.F32, (None, None))
    assert broadcast_names((None, None), named, named) == ("b", "s")
    assert broadcast_names((None, None), named, row) == ("b", "s")  # a static 1 stretches
    assert broadcast_names((None, None), named, other) == (None, "s")  # two names: unknown
    assert broadcast_names((None, None), named, unnamed) is None
    assert broadcast_names((None, 4), named, named) == ("b", None)  # static dims: no name


def test_shared_names_checked_once_at_entry(tmp_path):
    text = _model(tmp_path, ["b", "s"], ["b", "s"])
    asserts = [line for line in text.splitlines() if "cf.assert" in line]
    assert len(asserts) == 2, asserts  # one per shared name, none in the element-wise ops
    assert all("are both" in line for line in asserts)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.full((3, 4), 0.5, np.float32)
    np.testing.assert_allclose(_run(text, x, y), ((x + y) * x).T - y.T)
    with pytest.raises(Exception, match=r"input 'x' dim 0 and input 'y' dim 0 are both 'b'"):
        _run(text, x, np.ones((1, 4), np.float32))


def test_different_names_keep_the_op_checks(tmp_path):
    text = _model(tmp_path, ["b", "s"], ["c", "t"])
    assert "are both" not in text
    assert text.count("'niro.add' op: dynamic dim") == 2
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(_run(text, x, x), ((x + x) * x).T - x.T)
    with pytest.raises(Exception, match=r"'niro.add' op: dynamic dim 0 of operand #1 differs"):
        _run(text, x, np.ones((1, 4), np.float32))


def test_matmul_batch_dims_of_one_name(tmp_path):
    """A batched MatMul whose batch dims share a name checks nothing; with two names it checks
    that they agree (a run-time 1 is not broadcast there)."""

    def lowered(a_dims, b_dims) -> str:
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["c"])],
            "names",
            [
                helper.make_tensor_value_info("a", TensorProto.FLOAT, a_dims),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, b_dims),
            ],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
        )
        file = tmp_path / "matmul.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), file)
        return lower_to_mlir(import_model(str(file))).to_text()

    shared = lowered(["n", 3, 4], ["n", 4, 2])
    assert "'onnx.MatMul' op: dynamic dim" not in shared
    assert shared.count("are both 'n'") == 1
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(16, dtype=np.float32).reshape(2, 4, 2)
    np.testing.assert_allclose(_run(shared, a, b), a @ b)
    assert "'onnx.MatMul' op: dynamic dim 0" in lowered(["n", 3, 4], ["m", 4, 2])


@pytest.mark.parametrize("declared_as", ["value_info", "output"])
def test_names_declared_past_the_inputs_are_not_trusted(tmp_path, declared_as):
    """A model whose value_info (or graph output) calls `Relu(y)`'s dim `b`, the name of `x`'s
    dim, when `y`'s dim is `c`: ONNX inference keeps the declared name, but only the inputs'
    names are checked on entry, so the Add of `x` and `Relu(y)` keeps its own check. A call
    with y of 1 row stops there with a message (without it, Add read past y's one row)."""
    lying = helper.make_tensor_value_info("t", TensorProto.FLOAT, ["b", 4])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["y"], ["t"]), helper.make_node("Add", ["x", "t"], ["z"])],
        "names",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["c", 4]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
        + ([lying] if declared_as == "output" else []),
        value_info=[lying] if declared_as == "value_info" else [],
    )
    file = tmp_path / "lying.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), file)
    text = lower_to_mlir(import_model(str(file))).to_text()
    assert "'niro.add' op: dynamic dim 0 of operand #1 differs" in text
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.arange(12, dtype=np.float32).reshape(3, 4) - 6
    np.testing.assert_allclose(_run(text, x, y), x + np.maximum(y, 0))
    with pytest.raises(Exception, match=r"'niro.add' op: dynamic dim 0 of operand #1 differs"):
        _run(text, x, np.ones((1, 4), np.float32))
