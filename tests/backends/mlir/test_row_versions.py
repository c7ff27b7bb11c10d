"""A function's products of run-time rows choose their version once (backends/mlir/row_versions.py):
one `scf.if` at the top holds the body twice, the few-rows body with no versioned product left;
the numbers are onnxruntime's on both sides of the choice, and a single versioned product keeps
its own choice. Real iree-compile and onnxruntime."""

from __future__ import annotations

import iree.compiler as iree_compiler
import numpy as np
import onnx
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.backends.mlir.builders import VERSION_ATTRIBUTE
from niro.frontends.onnx import import_model
from onnx import helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

K = 512  # a 512x512 weight: the least a versioned product takes


def _model(products: int) -> onnx.ModelProto:
    """x [batch, seq, K] through `products` MatMuls by KxK weights with a Relu after each, and
    an Add of the last to a [batch2, seq2, K] input b (a size check on the way)."""
    rng = np.random.default_rng(5)
    nodes, weights, current = [], [], "x"
    for index in range(products):
        weight = f"w{index}"
        weights.append(
            numpy_helper.from_array((rng.standard_normal((K, K)) * 0.05).astype(np.float32), weight)
        )
        nodes += [
            helper.make_node("MatMul", [current, weight], [f"p{index}"]),
            helper.make_node("Relu", [f"p{index}"], [f"r{index}"]),
        ]
        current = f"r{index}"
    nodes.append(helper.make_node("Add", [current, "b"], ["y"]))
    inputs = [
        helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "seq", K]),
        helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, ["batch2", "seq2", K]),
    ]
    graph = helper.make_graph(
        nodes,
        "rows",
        inputs,
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _top_level(text: str) -> list[str]:
    """The lines of the function body at its own nesting level (4 spaces in)."""
    return [line for line in text.splitlines() if line.startswith("    ") and line[4] != " "]


def test_several_versioned_products_choose_once_at_the_top():
    text = lower_to_mlir(import_model(_model(3))).to_text()
    top = _top_level(text)
    branches = [line for line in top if "scf.if" in line]
    assert len(branches) == 1, "\n".join(top)
    few, many = text.split("} else {", 1)[0], text.split("} else {", 1)[1]
    assert VERSION_ATTRIBUTE not in few.split("scf.if", 1)[1]
    assert f"tensor<1x{K}x1x1xf32>" in few  # the static products of one row, in tiles
    assert many.count(VERSION_ATTRIBUTE) == 3  # the function as it was: each chooses
    assert text.index("cf.assert") < text.index("scf.if")  # the checks run once, before


def _chained_model() -> onnx.ModelProto:
    """x [rows, K] @ W0 @ W1: the second product's rows are the first one's result's, and no
    check resolves any size."""
    rng = np.random.default_rng(6)
    weights = [
        numpy_helper.from_array((rng.standard_normal((K, K)) * 0.05).astype(np.float32), name)
        for name in ("w0", "w1")
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["p"]),
        helper.make_node("MatMul", ["p", "w1"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "rows",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["rows", K])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_function_without_checks_chooses_once_too(tmp_path):
    """With no check, nothing else resolved the products' sizes: the second one's rows read
    the first one's result, which the choice resolves first (the sizes its versions yield)."""
    model = _chained_model()
    text = lower_to_mlir(import_model(model)).to_text()
    assert "cf.assert" not in text
    assert len([line for line in _top_level(text) if "scf.if" in line]) == 1, text
    module = compile_onnx(model, tmp_path, "rows")
    rng = np.random.default_rng(9)
    feeds = [{"x": rng.standard_normal((rows, K)).astype(np.float32)} for rows in (1, 5, 20)]
    assert_matches_onnxruntime(module, model, feeds, function="rows", rtol=1e-5, atol=1e-5)


def test_one_versioned_product_keeps_its_own_choice():
    """The only top-level scf.if is the product's own (its attribute closes it at the top
    level), not a choice holding the body twice."""
    text = lower_to_mlir(import_model(_model(1))).to_text()
    top = _top_level(text)
    assert len([line for line in top if "scf.if" in line]) == 1
    assert any(VERSION_ATTRIBUTE in line for line in top), "\n".join(top)
    assert text.count(VERSION_ATTRIBUTE) == 1


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    model = _model(3)
    return model, compile_onnx(model, tmp_path_factory.mktemp("rows"), "rows")


@pytest.mark.parametrize("shape", [(1, 1), (1, 3), (2, 4), (3, 3), (2, 16), (1, 40)], ids=str)
def test_both_bodies_match_onnxruntime(chosen, shape):
    """One row takes the few-rows body (its products in tiles of one row), more rows the
    other (theirs in tiles of 8 rows); both give onnxruntime's numbers."""
    model, module = chosen
    rng = np.random.default_rng(sum(shape))
    feeds = {
        "x": rng.standard_normal((*shape, K)).astype(np.float32),
        "b": rng.standard_normal((*shape, K)).astype(np.float32),
    }
    assert_matches_onnxruntime(module, model, [feeds], function="rows", rtol=1e-5, atol=1e-5)


def test_each_body_is_one_submission():
    """IREE makes one command submission of each body (the three versioned products each cut
    the function before: 4 submissions and more); in the other body it folds the products'
    own choices, which there all say "many", as the rows are one size."""
    text = lower_to_mlir(import_model(_model(3))).to_text()
    stream = iree_compiler.compile_str(
        text,
        target_backends=["llvm-cpu"],
        extra_args=["--iree-llvmcpu-target-cpu=host", "--compile-to=stream"],
    ).decode()
    main = stream[stream.index("util.func public @rows") :]
    assert main.count("stream.cmd.execute") == 2
    assert main.count("cf.cond_br") == 1


def _int4_model() -> onnx.ModelProto:
    """x [batch, seq, 64] through two MatMulNBits (int4, block 32, accuracy_level 4: int8
    block products, each versioned for one row in the body niroc calls) with a Relu between."""
    rng = np.random.default_rng(7)
    k = 64
    weights, nodes, current = [], [], "x"
    for index in range(2):
        names = [f"b{index}", f"s{index}"]
        weights += [
            numpy_helper.from_array(rng.integers(0, 256, (k, 2, 16), dtype=np.uint8), names[0]),
            numpy_helper.from_array((rng.random(k * 2) * 0.1 + 0.01).astype(np.float32), names[1]),
        ]
        nodes += [
            helper.make_node(
                "MatMulNBits",
                [current, *names],
                [f"p{index}"],
                domain="com.microsoft",
                K=k,
                N=k,
                bits=4,
                block_size=32,
                accuracy_level=4,
            ),  # fmt: skip
            helper.make_node("Relu", [f"p{index}"], [f"r{index}"]),
        ]
        current = f"r{index}"
    graph = helper.make_graph(
        nodes,
        "rows",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", "seq", k])],
        [helper.make_tensor_value_info(current, onnx.TensorProto.FLOAT, None)],
        weights,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def test_the_versions_of_called_bodies_are_chosen_once_too(tmp_path):
    """The int4 products' bodies are inlined where several of them are called (their calls
    would each cut the function), their versions chosen once at the top, the weights' unpacking
    above the choice (IREE evaluates it once at load time only outside an scf.if); numbers as
    onnxruntime's (its int8 products too) on both sides of the choice."""
    model = _int4_model()
    text = lower_to_mlir(import_model(model)).to_text()
    assert "func.func private @MatMulNBits" not in text and "call @MatMulNBits" not in text
    assert [line for line in _top_level(text) if "scf.if" in line] != []
    top = text.index(next(line for line in _top_level(text) if "scf.if" in line))
    few = text[top:].split("} else {", 1)[0]
    assert VERSION_ATTRIBUTE not in few.split("\n", 1)[1]
    assert "ml_program.global_load_const" not in few  # the weights are read above the choice
    module = compile_onnx(model, tmp_path, "rows")
    rng = np.random.default_rng(8)
    feeds = [
        {"x": rng.standard_normal(shape).astype(np.float32)} for shape in ((1, 1, 64), (2, 3, 64))
    ]
    assert_matches_onnxruntime(module, model, feeds, function="rows", rtol=1e-5, atol=1e-4)
