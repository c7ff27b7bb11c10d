"""Scan over more steps than a block (builders.blocks.BLOCK_STEPS), or over a run-time number
of steps: the steps that do not fill whole iterations of 8 run one by one, the others walk
blocks, each block's rows stacked in a slab of their own and inserted into the scan outputs at
the block's origin (forwards or backwards). Every model runs against onnxruntime at lengths
that end inside the first block, at its edge, one step past it and inside a third block, with
0, 1, 4 and 7 single steps, so that a wrong slot or origin of either direction shows."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from niro.backends.mlir.builders.blocks import BLOCK_STEPS
from onnx import TensorProto, helper

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx, load_vmfb

RNG = np.random.default_rng(64)
LENGTHS = (1, 2, BLOCK_STEPS, BLOCK_STEPS + 1, 2 * BLOCK_STEPS + 21)


def _body(batch) -> onnx.GraphProto:
    """state [batch, 4], a [batch, 4], b [batch, 4] -> state + a * b, rows (state + a * b) and
    (a - state)."""
    row = [batch, 4]
    return helper.make_graph(
        [
            helper.make_node("Mul", ["a", "b"], ["ab"]),
            helper.make_node("Add", ["state", "ab"], ["next"]),
            helper.make_node("Identity", ["next"], ["sum_row"]),
            helper.make_node("Sub", ["a", "state"], ["diff_row"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("state", TensorProto.FLOAT, row),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, row),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, row),
        ],
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, row)
            for name in ("next", "sum_row", "diff_row")
        ],
    )


def _model(length, batch) -> onnx.ModelProto:
    """A Scan over `length` steps of a [length, batch, 4] read forwards and b [batch, length, 4]
    read backwards along axis 1; its sums stacked forwards on axis 0, its differences
    backwards on axis 1."""
    node = helper.make_node(
        "Scan",
        ["state", "a", "b"],
        ["final", "sums", "diffs"],
        body=_body(batch),
        num_scan_inputs=2,
        scan_input_axes=[0, 1],
        scan_input_directions=[0, 1],
        scan_output_axes=[0, 1],
        scan_output_directions=[0, 1],
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [batch, 4]),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [length, batch, 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [batch, length, 4]),
        ],
        [
            helper.make_tensor_value_info("final", TensorProto.FLOAT, [batch, 4]),
            helper.make_tensor_value_info("sums", TensorProto.FLOAT, [length, batch, 4]),
            helper.make_tensor_value_info("diffs", TensorProto.FLOAT, [batch, length, 4]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    return model


def _feeds(length: int, batch: int) -> dict[str, np.ndarray]:
    return {
        "state": RNG.standard_normal((batch, 4)).astype(np.float32),
        "a": RNG.standard_normal((length, batch, 4)).astype(np.float32),
        "b": RNG.standard_normal((batch, length, 4)).astype(np.float32),
    }


@pytest.mark.parametrize(
    "length", [BLOCK_STEPS, BLOCK_STEPS + 1, 2 * BLOCK_STEPS + 8, 2 * BLOCK_STEPS + 21]
)
def test_a_static_scan_matches_onnxruntime(tmp_path, length: int) -> None:
    """A static Scan of at most BLOCK_STEPS steps is one loop; a longer one runs (length mod
    8) single steps (none at 2 * BLOCK_STEPS + 8), then walks blocks 8 steps an iteration."""
    model = _model(length, 3)
    vm_module = compile_onnx(model, tmp_path, "scan")
    assert_matches_onnxruntime(vm_module, model, [_feeds(length, 3)], function="g", rtol=1e-5, atol=1e-5)


def test_a_dynamic_scan_matches_onnxruntime_over_several_blocks(tmp_path) -> None:
    """A run-time length and batch: the first step is peeled, the others walk blocks; the
    state has a dynamic dim, so a block's first step reads the state the block starts from."""
    model = _model("t", "n")
    vm_module = compile_onnx(model, tmp_path, "scan")
    feeds = [_feeds(length, batch) for length, batch in zip(LENGTHS, (2, 1, 3, 2, 2), strict=True)]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-5)


def test_a_dynamic_scan_first_runs_on_the_task_driver(tmp_path) -> None:
    """The driver users run, with its asynchronous queue (the other tests run local-sync),
    loaded afresh for each length, so that a first call over several blocks is checked."""
    model = _model("t", "n")
    compile_onnx(model, tmp_path, "scan")
    for length in (BLOCK_STEPS + 1, 2 * BLOCK_STEPS + 21):
        vm_module = load_vmfb(tmp_path / "scan.vmfb", driver="local-task")
        feeds = [_feeds(length, 2)]
        assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-5, atol=1e-5)


def test_a_state_that_changes_size_stops_the_program() -> None:
    """A block's first step reads the state it starts from in the dims the state started
    with, so a state growing from one step to the next is refused at run time once the steps
    reach the blocks (12 steps: the peeled first, 3 single steps, a block of 8; onnxruntime
    refuses it too)."""
    body = helper.make_graph(
        [
            helper.make_node("Concat", ["state", "x"], ["next"], axis=0),
            helper.make_node("ReduceSum", ["next"], ["total"], keepdims=0),
        ],
        "body",
        [
            helper.make_tensor_value_info("state", TensorProto.FLOAT, ["k"]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("next", TensorProto.FLOAT, [None]),
            helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
        ],
    )
    node = helper.make_node("Scan", ["s", "xs"], ["final", "totals"], body=body, num_scan_inputs=1)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, ["k"]),
            helper.make_tensor_value_info("xs", TensorProto.FLOAT, ["t", 1]),
        ],
        [
            helper.make_tensor_value_info("final", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("totals", TensorProto.FLOAT, None),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    inputs = (np.ones(2, np.float32), np.ones((12, 1), np.float32))
    expected = (np.ones(14, np.float32), np.arange(3, 15, dtype=np.float32))
    outcome = run_case(NodeTestCase("scan_growing_state", model, ((inputs, expected),), 1e-5, 1e-5))
    assert outcome.stage == "run", outcome.message
    assert "'onnx.Scan' op: state #0 changes size along dim 0 from one iteration to the next" in (
        outcome.message
    )
