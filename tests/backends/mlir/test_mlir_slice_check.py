"""A Slice that keeps the last k elements of a dynamic axis (`x[:, -1:]`) is typed with that
static length at import (symbolic_dims), taking the axis to be long enough; the lowering checks
that at run time, so a shorter axis stops the program with the op's location instead of
reading out of bounds. A cut from the front (`x[:, :3]`) stays dynamic: on a shorter axis it
gives ONNX's shorter result (a detector's `keep[:100]` when fewer than 100 boxes survive)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, call, compile_onnx

INT64_MAX = 2**63 - 1


def _cut(name: str, start: int, end: int) -> onnx.ModelProto:
    def ints(output, values):
        return helper.make_node(
            "Constant", [], [output], value=numpy_helper.from_array(np.array(values, np.int64))
        )

    nodes = [
        ints("starts", [start]),
        ints("ends", [end]),
        ints("axes", [1]),
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["cut"], name=name),
        helper.make_node("Relu", ["cut"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "L"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _last_three() -> onnx.ModelProto:
    return _cut("last_three", -3, INT64_MAX)


def _first_three() -> onnx.ModelProto:
    return _cut("first_three", 0, 3)


@pytest.fixture(scope="module")
def last_three(tmp_path_factory):
    return compile_onnx(_last_three(), tmp_path_factory.mktemp("slice_check"))


def test_a_long_enough_axis_gives_onnxruntime_numbers(last_three) -> None:
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in ((2, 3), (1, 7))]
    assert_matches_onnxruntime(
        last_three, _last_three(), feeds, function="last_three", rtol=0, atol=0
    )


def test_a_shorter_axis_stops_with_the_reason(last_three) -> None:
    with pytest.raises(
        Exception,
        match=r"\[node 'last_three'\]: 'onnx.Slice' op: axis 1 of the input is shorter",
    ):
        call(last_three, "last_three", np.zeros((2, 2), np.float32))


def test_a_cut_from_the_front_of_a_shorter_axis_is_shorter(tmp_path) -> None:
    vm_module = compile_onnx(_first_three(), tmp_path)
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in ((2, 5), (2, 2))]
    runs = assert_matches_onnxruntime(
        vm_module, _first_three(), feeds, function="first_three", rtol=0, atol=0
    )
    assert [outputs[0].shape for outputs in runs] == [(2, 3), (2, 2)]
