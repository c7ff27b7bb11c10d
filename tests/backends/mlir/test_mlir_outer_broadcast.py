"""Element-wise ops whose operands broadcast along different dims (`s[:, :, None] - s[:, None, :]`,
Mamba-2's segment sums of a CumSum) on the result of a reduction: IREE 3.13 fuses such an op
into the reduction's dispatch and then computes only the elements where both reads coincide.
The element-wise lowering reads all operands but the first by a clamped `tensor.extract` so
that the reduction is materialized; these models computed wrong numbers before it did."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

N = helper.make_node
AXES = {
    "axis1": np.array(1, np.int64),
    "at1": np.array([1], np.int64),
    "at2": np.array([2], np.int64),
}


def _pairwise(
    first: onnx.NodeProto, x_shape: list, *, negate_one_side: bool = False
) -> onnx.ModelProto:
    """`first` makes `c` [b, t(, d)] from x [b, t, 4]; y = c[:, :, None] - c[:, None, :]
    (optionally with one side negated first, so the two operands are different values)."""
    left = "n" if negate_one_side else "c"
    nodes = [first]
    if negate_one_side:
        nodes.append(N("Neg", ["c"], ["n"]))
    nodes += [
        N("Unsqueeze", [left, "at2"], ["u1"]),
        N("Unsqueeze", ["c", "at1"], ["u2"]),
        N("Sub", ["u1", "u2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(value, name) for name, value in AXES.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


# IREE fuses only static reductions this way; the CumSum (two generics) goes wrong dynamic too.
MODELS = {
    "reducesum": lambda: _pairwise(N("ReduceSum", ["x", "at2"], ["c"], keepdims=0), [2, 5, 4]),
    "reducemax_one_side_negated": lambda: _pairwise(
        N("ReduceMax", ["x", "at2"], ["c"], keepdims=0), [2, 5, 4], negate_one_side=True
    ),
    "cumsum_segment_sums": lambda: _pairwise(N("CumSum", ["x", "axis1"], ["c"]), ["b", "t", 4]),
}
SHAPES = {
    "reducesum": [(2, 5, 4)],
    "reducemax_one_side_negated": [(2, 5, 4)],
    "cumsum_segment_sums": [(2, 5, 4), (1, 3, 4)],
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_pairwise_differences_of_a_reduction_match_onnxruntime(tmp_path, name) -> None:
    model = MODELS[name]()
    vm_module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(5)
    feeds_list = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in SHAPES[name]]
    assert_matches_onnxruntime(vm_module, model, feeds_list, function="g", rtol=1e-4, atol=1e-5)


def test_only_an_outer_product_reads_by_extract() -> None:
    text = lower_to_mlir(import_model(MODELS["reducesum"]())).to_text()
    assert text.count("tensor.extract %") == 1
    assert "arith.minui" in text
    # The reduction itself and a plain broadcast (a bias over the last dim) keep their `ins`.
    bias = helper.make_graph(
        [N("Add", ["x", "bias"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones(4, np.float32), "bias")],
    )
    model = helper.make_model(bias, opset_imports=[helper.make_opsetid("", 18)])
    assert "tensor.extract %" not in lower_to_mlir(import_model(model)).to_text()
