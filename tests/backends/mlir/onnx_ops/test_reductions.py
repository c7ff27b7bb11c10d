"""Reductions, ArgMax/ArgMin, CumSum and TopK lowered and run end to end (iree-compile + IREE).

ONNX's node tests feed `axes`, `axis` and `K` as graph inputs; the lowering recovers them from
the static result shapes and guards them with a run-time check, which these tests also break.
The `one_node_case` models cover what real models do instead: constant axes (initializers),
f16 and integer inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

from .model_cases import one_node_case

NODE_TESTS = [
    "test_reduce_sum_keepdims_random",
    "test_reduce_sum_do_not_keepdims_example",  # axes picked at run time (axis 1 or 2)
    "test_reduce_sum_empty_axes_input_noop",
    "test_reduce_sum_empty_set",
    "test_reduce_mean_default_axes_keepdims_random",
    "test_reduce_max_bool_inputs",
    "test_reduce_max_empty_set",
    "test_reduce_l2_negative_axes_keep_dims_random",
    "test_reduce_log_sum_desc_axes",
    "test_reduce_log_sum_exp_empty_set",
    "test_argmax_negative_axis_keepdims_random_select_last_index",
    "test_cumsum_2d_negative_axis",
    "test_top_k_same_values_2d",
    "test_top_k_smallest",
]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


RNG = np.random.default_rng(7)


def _floats(*shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


MODEL_CASES = {
    "mean_constant_axes": lambda: one_node_case(
        "mean_constant_axes",
        "ReduceMean",
        {"x": _floats(2, 3, 4)},
        initializers={"axes": np.array([1], np.int64)},
        keepdims=0,
        opset=18,
    ),
    "sum_f16": lambda: one_node_case(
        "sum_f16",
        "ReduceSum",
        {"x": _floats(2, 3, 300, dtype=np.float16)},
        initializers={"axes": np.array([-1], np.int64)},
        opset=13,
    ),
    "log_sum_exp_large": lambda: one_node_case(
        "log_sum_exp_large",
        "ReduceLogSumExp",
        {"x": 100 * _floats(2, 5)},
        axes=[1],
        opset=13,
    ),
    "argmax_ties_last": lambda: one_node_case(
        "argmax_ties_last",
        "ArgMax",
        {"x": np.array([[1, 3, 3], [2, 2, 1]], np.float32)},
        axis=1,
        select_last_index=1,
    ),
    "topk_ties_int": lambda: one_node_case(
        "topk_ties_int",
        "TopK",
        {"x": np.array([[1, 3, 3, 2, 3]], np.int32)},
        ["v", "i"],
        initializers={"k": np.array([3], np.int64)},
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_runtime_axes_that_disagree_with_the_result_type_fail_the_run() -> None:
    case = node_test_case("test_reduce_sum_keepdims_random")  # compiled for axes = [1]
    ((inputs, expected),) = case.data_sets
    wrong = NodeTestCase(
        case.name, case.model, (((inputs[0], np.array([2], np.int64)), expected),), 1e-3, 1e-5
    )
    outcome = run_case(wrong)
    assert outcome.stage == "run"
    assert "the axes input disagrees with the static result shape" in outcome.message


def test_runtime_topk_k_that_disagrees_fails_the_run() -> None:
    case = node_test_case("test_top_k")
    ((inputs, expected),) = case.data_sets
    wrong = NodeTestCase(
        case.name, case.model, (((inputs[0], np.array([2], np.int64)), expected),), 1e-3, 1e-5
    )
    outcome = run_case(wrong)
    assert outcome.stage == "run"
    assert "K differs from the static result shape (K = 3)" in outcome.message


def test_noop_on_a_non_identity_reduction_is_refused() -> None:
    case = one_node_case(
        "l1_noop",
        "ReduceL1",
        {"x": _floats(2, 3), "axes": np.array([], np.int64)},
        noop_with_empty_axes=1,
        opset=18,
    )
    outcome = run_case(case)
    assert outcome.refused and outcome.stage == "lower"
    assert outcome.message.endswith(
        "'onnx.ReduceL1' op with noop_with_empty_axes and empty axes is not supported: the ONNX "
        "spec returns the input, the reference applies the op to each element"
    )


def test_runtime_axes_with_several_candidates_are_chosen_at_run_time() -> None:
    # 5 candidate axes of size 2 each reduce 2x2x2x2x2 to 2x2x2x2: the lowering dispatches on
    # the run-time axis among all five, and the node test's numbers come out right.
    case = one_node_case(
        "sum_ambiguous",
        "ReduceSum",
        {"x": _floats(2, 2, 2, 2, 2), "axes": np.array([3], np.int64)},
        keepdims=0,
        opset=13,
    )
    outcome = run_case(case)
    assert outcome.stage == "pass", outcome.message


# -- TopK with K read at run time -----------------------------------------------------------------


def _dynamic_case(name: str, nodes, inputs: dict, initializers: dict | None = None) -> NodeTestCase:
    """A model of `nodes` with symbolic input dims (`inputs`: name -> (value fed, declared
    shape)) and untyped outputs "v", "i", checked against onnxruntime."""
    import onnxruntime

    graph_inputs = [
        helper.make_tensor_value_info(key, helper.np_dtype_to_tensor_dtype(value.dtype), shape)
        for key, (value, shape) in inputs.items()
    ]
    tensors = [numpy_helper.from_array(value, key) for key, value in (initializers or {}).items()]
    untyped = [helper.make_value_info(output, onnx.TypeProto()) for output in ("v", "i")]
    model = helper.make_model(
        helper.make_graph(nodes, name, graph_inputs, untyped, tensors),
        opset_imports=[helper.make_opsetid("", 21)],
    )
    feeds = {key: value for key, (value, _) in inputs.items()}
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    outputs = [
        helper.make_tensor_value_info(output, helper.np_dtype_to_tensor_dtype(value.dtype), None)
        for output, value in zip(("v", "i"), expected, strict=True)
    ]
    model = helper.make_model(
        helper.make_graph(nodes, name, graph_inputs, outputs, tensors),
        opset_imports=[helper.make_opsetid("", 21)],
    )
    data = ((tuple(feeds.values()), tuple(np.asarray(value) for value in expected)),)
    return NodeTestCase(name, model, data, 1e-3, 1e-5)


def _runs(first: NodeTestCase, *more: NodeTestCase) -> NodeTestCase:
    """`first`'s model run once per case: the same graph fed other inputs (one compile)."""
    data = first.data_sets + tuple(data for case in more for data in case.data_sets)
    return NodeTestCase(first.name, first.model, data, first.rtol, first.atol)


def _topk_k_input(rows: int, k: int) -> NodeTestCase:
    return _dynamic_case(
        "topk_k_at_run_time",
        [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0)],
        {"x": (_floats(rows, 5), ["N", 5]), "k": (np.array([k], np.int64), [1])},
    )


def _topk_detection(length: int) -> NodeTestCase:
    # As detection models pick their candidates: K = min(number of boxes, 3), from the shape.
    return _dynamic_case(
        "topk_k_from_shape",
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Min", ["s", "cap"], ["k"]),
            helper.make_node("TopK", ["x", "k"], ["v", "i"]),
        ],
        {"x": (_floats(length), ["N"])},
        {"cap": np.array([3], np.int64)},
    )


def test_topk_k_read_at_run_time() -> None:
    outcome = run_case(_runs(_topk_k_input(2, 2), _topk_k_input(3, 4)))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_topk_k_from_the_input_shape() -> None:
    outcome = run_case(_runs(_topk_detection(2), _topk_detection(7)))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_topk_run_time_k_beyond_the_axis_fails_the_run() -> None:
    case = _topk_k_input(2, 2)
    ((inputs, expected),) = case.data_sets
    wrong = NodeTestCase(case.name, case.model, (((inputs[0], np.array([6], np.int64)), expected),), 1e-3, 1e-5)
    outcome = run_case(wrong)
    assert outcome.stage == "run", outcome
    assert "'onnx.TopK' op: K is negative or exceeds the length of axis 1" in outcome.message, outcome.message
