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


def _bag_rows() -> onnx.ModelProto:
    """As PyTorch's dynamo exports EmbeddingBag: a Loop whose counter i (carried, declared
    without a shape) cuts `offsets[i:i+1]`, and that one element scales a row (a broadcast
    that needs the cut typed as length 1: ONNX leaves it unknown)."""

    def const(output, values, dtype=np.int64):
        return helper.make_node(
            "Constant", [], [output], value=numpy_helper.from_array(np.array(values, dtype))
        )

    unranked_int = helper.make_tensor_value_info("i", onnx.TensorProto.INT64, None)
    body = helper.make_graph(
        [
            helper.make_node("Reshape", ["i", "flat"], ["start"]),
            helper.make_node("CastLike", ["one", "start"], ["one_cast"]),
            helper.make_node("Add", ["start", "one_cast"], ["end"]),
            helper.make_node("Slice", ["offsets", "start", "end"], ["cut"], name="bag_cut"),
            helper.make_node("Mul", ["weights", "cut"], ["row"]),
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Add", ["i", "one"], ["next"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("iteration", onnx.TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []),
            unranked_int,
        ],
        [
            helper.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
            helper.make_tensor_value_info("next", onnx.TensorProto.INT64, None),
            helper.make_tensor_value_info("row", onnx.TensorProto.FLOAT, None),
        ],
    )
    nodes = [
        const("flat", [-1]),
        const("one", 1),
        const("zero", 0),
        const("weights", [1.0, 2.0, 3.0, 4.0], np.float32),
        const("true", True, np.bool_),
        helper.make_node("Loop", ["count", "true", "zero"], ["last", "rows"], body=body),
    ]
    graph = helper.make_graph(
        nodes,
        "bag_rows",
        [
            helper.make_tensor_value_info("offsets", onnx.TensorProto.FLOAT, ["L"]),
            helper.make_tensor_value_info("count", onnx.TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("rows", onnx.TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


@pytest.fixture(scope="module")
def bag_rows(tmp_path_factory):
    return compile_onnx(_bag_rows(), tmp_path_factory.mktemp("bag_rows"))


def test_a_one_element_cut_at_a_run_time_index_in_a_loop_is_typed_as_one(bag_rows) -> None:
    offsets = np.array([0.5, 2.0, -1.0, 3.0, 7.0], np.float32)
    feeds = [{"offsets": offsets, "count": np.array(count, np.int64)} for count in (1, 3, 5)]
    assert_matches_onnxruntime(bag_rows, _bag_rows(), feeds, function="bag_rows", rtol=0, atol=0)


def test_a_one_element_cut_past_the_end_stops_with_the_reason(bag_rows) -> None:
    with pytest.raises(
        Exception, match=r"\[node 'bag_cut'\]: 'onnx.Slice' op: axis 0 of the input is shorter"
    ):
        call(bag_rows, "bag_rows", np.zeros(2, np.float32), np.array(3, np.int64))
