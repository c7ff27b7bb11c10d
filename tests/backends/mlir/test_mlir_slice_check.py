"""A Slice that cuts a fixed length out of a dynamic axis (`x[:, -1:]`, `x[:, :3]`) is typed
with that static length at import (symbolic_dims), taking the axis to be long enough; the
lowering checks that at run time, so a shorter axis stops the program with the op's location
instead of reading out of bounds."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, call, compile_onnx


def _first_three() -> onnx.ModelProto:
    def ints(name, values):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64)))

    nodes = [
        ints("starts", [0]),
        ints("ends", [3]),
        ints("axes", [1]),
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["cut"], name="first_three"),
        helper.make_node("Relu", ["cut"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "first_three",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "L"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_onnx(_first_three(), tmp_path_factory.mktemp("slice_check"))


def test_a_long_enough_axis_gives_onnxruntime_numbers(compiled) -> None:
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in ((2, 3), (1, 7))]
    assert_matches_onnxruntime(compiled, _first_three(), feeds, function="first_three", rtol=0, atol=0)


def test_a_shorter_axis_stops_with_the_reason(compiled) -> None:
    with pytest.raises(Exception, match=r"\[node 'first_three'\]: 'onnx.Slice' op: axis 1 of the input is shorter"):
        call(compiled, "first_three", np.zeros((2, 2), np.float32))
