"""Shape arithmetic folded at import (folding.py): Shape/Size of static values and the small
integer computations on them become Consts, so shapes downstream are static; the model's own
numbers (float weights and their arithmetic) are never folded."""

from __future__ import annotations

import niro.ir as nir
import numpy as np
import onnx
from niro.frontends.onnx import folding
from niro.frontends.onnx.folding import FOLD_LIMIT

from .helpers import describe_block, import_text, import_verified, main_block

OPSET = '<ir_version: 8, opset_import: ["" : 18]>'


def _ops(text: str) -> list[str]:
    return describe_block(main_block(import_text(OPSET + text)))


def test_reshape_by_a_shape_becomes_static() -> None:
    ops = _ops("g (float[2, 3] x, float[3, 2] y) => (z) { s = Shape(x)\n z = Reshape(y, s) }")
    assert ops[0] == "niro.const() -> (tensor<2xi64>) @Shape_0"
    assert ops[1].startswith("onnx.Reshape(tensor<3x2xf32>, tensor<2xi64>) -> (tensor<2x3xf32>)")


def test_chains_fold_through_integer_ops_and_their_constants() -> None:
    text = (
        "g (float[2, 3, 4] x) => (z) {"
        " s = Shape(x)\n n = Size(x)\n k = Constant <value_ints = [0]> ()\n"
        " first = Gather(s, k)\n rest = Div(n, first)\n"
        " shape = Concat <axis = 0> (first, rest)\n z = Reshape(x, shape) }"
    )
    ops = _ops(text)[:-1]
    assert [op.split("(")[0] for op in ops] == ["niro.const"] * 6 + ["onnx.Reshape"]
    assert ops[-1].endswith("-> (tensor<2x12xf32>) @Reshape_6")


def test_the_folded_values_are_those_of_onnx_reference() -> None:
    text = "g (float[5, 7] x) => (r) { s = Shape <start = -1> (x)\n r = Range(s, s, s) }"
    imported = import_text(OPSET + text)
    consts = [op for op in main_block(imported).operations if type(op).__name__ == "Const"]
    assert np.frombuffer(bytes(consts[0].literal), np.int64).tolist() == [7]


def test_shape_of_a_dynamic_value_stays() -> None:
    ops = _ops("g (float[N, 3] x) => (s) { s = Shape(x) }")
    assert ops[0] == "onnx.Shape(tensor<?x3xf32>) -> (tensor<2xi64>) @Shape_0"


def test_float_weights_and_their_arithmetic_are_not_folded() -> None:
    text = "g (float[2] x) => (z) { a = Constant <value_floats = [1.0, 2.0]> ()\n b = Add(a, a)\n z = Mul(x, b) }"
    ops = _ops(text)
    assert ops[1].startswith("niro.add(")


def test_values_bigger_than_the_limit_are_not_folded() -> None:
    size = FOLD_LIMIT + 1
    text = f"g (float[{size}] x) => (z) {{ s = Shape(x)\n z = ConstantOfShape(s) }}"
    ops = _ops(text)
    assert ops[0].startswith("niro.const")  # the shape itself is small
    assert ops[1].startswith(f"onnx.ConstantOfShape(tensor<1xi64>) -> (tensor<{size}xf32>)")


def test_random_ops_are_not_folded() -> None:
    text = "g (float[2, 3] x) => (z) { s = Shape(x)\n z = RandomUniformLike <dtype = 1> (s) }"
    ops = _ops(text)
    assert ops[1].startswith("onnx.RandomUniformLike")


def test_subgraphs_fold_where_the_importer_meets_them() -> None:
    model = onnx.parser.parse_model(
        OPSET
        + "g (bool c, float[2, 3] x) => (z) { z = If(c) <"
        + " then_branch = g1 () => (int64[2] o1) { o1 = Shape(x) },"
        + " else_branch = g2 () => (int64[2] o2) { o2 = Shape(x) }> }"
    )
    block = main_block(import_verified(model))
    if_op = next(op for op in block.operations if isinstance(op, nir.If))
    # graph-level folding leaves subgraphs to the importer, which folds the Shape of the
    # captured static value when it converts the branch
    assert describe_block(if_op.then_region.blocks[0])[0].startswith("niro.const() -> (tensor<2xi64>)")


def test_integer_nodes_on_known_constants_fold_in_a_loop_body() -> None:
    model = onnx.parser.parse_model(
        OPSET
        + " g (int64 m, bool c, float[2, 3] x) => (out) {"
        + " out = Loop(m, c, x) < body = b (int64 i, bool ci, float[2, 3] xi) => (bool co, float[3, 2] xo) {"
        + " co = Identity(ci)\n s = Shape(xi)\n one = Constant <value_ints = [1, 0]> ()\n"
        + " t = Gather(s, one)\n xo = Reshape(xi, t) }> }"
    )
    block = main_block(import_verified(model))
    loop = next(op for op in block.operations if nir.op_name(op) == "onnx.Loop")
    body = describe_block(loop.regions[0].blocks[0])
    assert [line.split("(")[0] for line in body[:3]] == ["niro.const", "niro.const", "niro.const"]
    assert body[3].startswith("onnx.Reshape(tensor<2x3xf32>, tensor<2xi64>) -> (tensor<3x2xf32>)")


def test_a_huge_range_on_constants_is_not_evaluated(monkeypatch) -> None:
    # in a Loop body, where the importer folds: the result's size must be known small before
    # anything is evaluated (numpy would try to allocate it)
    evaluated = []
    real_evaluate = folding._evaluate
    monkeypatch.setattr(folding, "_evaluate", lambda node, *rest: evaluated.append(node.op_type) or real_evaluate(node, *rest))
    model = onnx.parser.parse_model(
        OPSET
        + " g (int64 n, bool c, float[2] x) => (out) {"
        + " out = Loop(n, c, x) < body = b (int64 i, bool ci, float[2] xi) => (bool co, float[2] xo) {"
        + " co = Identity(ci)\n start = Constant <value_int = 0> ()\n"
        + " limit = Constant <value_int = 4000000000000> ()\n delta = Constant <value_int = 1> ()\n"
        + " r = Range(start, limit, delta)\n xo = Identity(xi) }> }"
    )
    block = main_block(import_verified(model))
    loop = next(op for op in block.operations if nir.op_name(op) == "onnx.Loop")
    names = [nir.op_name(op) for op in loop.regions[0].blocks[0].operations]
    assert "onnx.Range" in names
    assert "Range" not in evaluated


def test_may_fold_rules_out_nodes_from_their_operands_alone() -> None:
    # per input: None absent, "" not a known constant, else the constant's numpy kind
    assert folding.may_fold("Add", ["i", "i"])
    assert folding.may_fold("Concat", ["i", None, "b", "u"])
    assert not folding.may_fold("Add", ["i", ""])  # an operand that is not a constant
    assert not folding.may_fold("Add", ["f", "f"])  # float weights are never folded
    assert not folding.may_fold("Add", [None, None])  # nothing to compute from
    assert not folding.may_fold("RandomUniformLike", ["i"])
    assert folding.may_fold("Shape", [""])  # Shape and Size need a type, not data
    assert not folding.may_fold("Size", [])


def test_a_node_on_a_float_constant_and_an_integer_one_is_not_folded() -> None:
    text = (
        "g (float[2] x) => (z) { a = Constant <value_floats = [1.0, 2.0]> ()\n"
        " i = Constant <value_ints = [1, 2]> ()\n f = Cast <to = 1> (i)\n b = Add(a, f)\n z = Mul(x, b) }"
    )
    ops = _ops(text)
    assert ops[2].startswith("niro.const() -> (tensor<2xf32>) @Cast_2")  # integer input: folded
    assert ops[3].startswith("niro.add(")  # float operands: kept


def test_static_dims_picked_out_of_a_dynamic_shape_fold() -> None:
    # x.shape[-1] and x.shape[1:2] of an [N, 7] value, as PyTorch exports `torch.sort` (TopK
    # with K = Gather(Shape(x), 1)): the picked dim is static, so K is a constant and TopK's
    # results get their static width (ONNX inference does not evaluate K otherwise).
    text = (
        "g (float[N, 7] x) => (values, last) {"
        " s = Shape(x)\n one = Constant <value_int = 1> ()\n k = Gather(s, one)\n"
        " zero = Constant <value_ints = [0]> ()\n k1 = Unsqueeze(k, zero)\n"
        " values, indices = TopK <axis = -1> (x, k1)\n"
        " starts = Constant <value_ints = [-1]> ()\n ends = Constant <value_ints = [2]> ()\n"
        " last = Slice(s, starts, ends) }"
    )
    ops = _ops(text)
    topk = next(op for op in ops if op.startswith("onnx.TopK"))
    assert topk.startswith("onnx.TopK(tensor<?x7xf32>, tensor<1xi64>) -> (tensor<?x7xf32>, tensor<?x7xi64>)")
    assert not any(op.startswith(("onnx.Gather", "onnx.Unsqueeze", "onnx.Slice")) for op in ops)
    assert ops[0] == "onnx.Shape(tensor<?x7xf32>) -> (tensor<2xi64>) @Shape_0"


def test_a_dynamic_dim_picked_out_of_a_shape_stays() -> None:
    text = (
        "g (float[N, 7] x) => (n) {"
        " s = Shape(x)\n zero = Constant <value_int = 0> ()\n n = Gather(s, zero) }"
    )
    ops = _ops(text)
    assert any(op.startswith("onnx.Gather(tensor<2xi64>, tensor<i64>) -> (tensor<i64>)") for op in ops)
