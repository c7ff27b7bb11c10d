"""Loop stacking scan outputs over more iterations than a block (builders.blocks.BLOCK_STEPS).
A loop its body's condition may stop: an outer `scf.while` over blocks carries the scan
outputs, an inner one runs a block's iterations writing a slab of its own, inserted into the
scan outputs once per block. A loop that surely runs all max(M, 0) iterations (no cond, or a
constant true the body passes on): (count mod 8) single iterations, then blocks whose
iterations run 8 in a row (loop.py's `_unrolled`). Every model is compiled once and run against
onnxruntime at iteration counts that end inside the first block, at its edge, one past it and
inside a third block, with 0, 1 and 7 single iterations, and stopped early by the body's
condition at such counts, so that a slab's rows written at the wrong place, or a block that
loses the rows of a loop stopping inside it, shows.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest
from niro.backends.mlir.builders.blocks import BLOCK_STEPS

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx, load_vmfb

HEADER = '<ir_version: 8, opset_import: ["" : 17]>\n'
COUNTS = (1, 2, BLOCK_STEPS, BLOCK_STEPS + 1, 2 * BLOCK_STEPS + 21)
RNG = np.random.default_rng(65)

RUNNING_SUM = """
rows (float[4] start, float[n, 4] x) => (float[4] last, float[m, 4] sums) {
  shape = Shape <start = 0, end = 1> (x)
  count = Squeeze (shape)
  go = Constant <value = bool {1}> ()
  last, sums = Loop (count, go, start) <body = body (int64 i, bool c, float[4] acc)
      => (bool c_out, float[4] acc_out, float[4] row) {
    c_out = Identity (c)
    row_i = Gather <axis = 0> (x, i)
    acc_out = Add (acc, row_i)
    row = Mul (acc_out, row_i)
  }>
}
"""
"""A run-time M (the rows of x), a static loop-carried value."""

STOPPED_EARLY = """
rows (float[4] start, int64 stop) => (float[4] last, float[m, 4] sums) {
  m = Constant <value = int64 {200}> ()
  go = Constant <value = bool {1}> ()
  last, sums = Loop (m, go, start) <body = body (int64 i, bool c, float[4] acc)
      => (bool c_out, float[4] acc_out, float[4] row) {
    one = Constant <value = int64 {1}> ()
    next = Add (i, one)
    c_out = Less (next, stop)
    fi = Cast <to = 1> (i)
    acc_out = Add (acc, fi)
    row = Mul (acc_out, acc)
  }>
}
"""
"""A constant M of 200 that the body's condition stops after `stop` iterations."""

NOTHING_CARRIED = """
rows (float[n, 4] x) => (float[1, 1] total) {
  shape = Shape <start = 0, end = 1> (x)
  count = Squeeze (shape)
  go = Constant <value = bool {1}> ()
  doubled = Loop (count, go) <body = body (int64 i, bool c) => (bool c_out, float[4] row) {
    c_out = Identity (c)
    row_i = Gather <axis = 0> (x, i)
    row = Add (row_i, row_i)
  }>
  total = ReduceSum <keepdims = 1> (doubled)
}
"""
"""Scan outputs only, consumed in the function (as in the EmbeddingBag export): the form whose
slab, carried by one loop beside them, IREE 3.13 fails to run."""


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    return model


def _rows(count: int) -> dict[str, np.ndarray]:
    return {
        "start": RNG.standard_normal(4).astype(np.float32),
        "x": RNG.standard_normal((count, 4)).astype(np.float32),
    }


def test_a_run_time_trip_count_matches_onnxruntime(tmp_path) -> None:
    model = _model(RUNNING_SUM)
    vm_module = compile_onnx(model, tmp_path, "loop")
    feeds = [_rows(count) for count in COUNTS]
    assert_matches_onnxruntime(vm_module, model, feeds, function="rows", rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("driver", ["local-sync", "local-task"])
def test_a_loop_stopped_by_its_condition_matches_onnxruntime(tmp_path, driver: str) -> None:
    """The rows of the block the loop stops in are inserted; the rows never written are not
    returned. On both drivers, the module loaded afresh."""
    model = _model(STOPPED_EARLY)
    compile_onnx(model, tmp_path, "loop")
    vm_module = load_vmfb(tmp_path / "loop.vmfb", driver=driver)
    feeds = [
        {"start": RNG.standard_normal(4).astype(np.float32), "stop": np.array(stop, np.int64)}
        for stop in (*COUNTS, 200, 500)
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="rows", rtol=1e-5, atol=1e-3)


COUNTED = """
rows (float[4] start) => (float[4] last, float[m, 4] sums) {{
  m = Constant <value = int64 {{{count}}}> ()
  last, sums = Loop (m, , start) <body = body (int64 i, bool c, float[4] acc)
      => (bool c_out, float[4] acc_out, float[4] row) {{
    c_out = Constant <value = bool {{0}}> ()
    fi = Cast <to = 1> (i)
    acc_out = Add (acc, fi)
    row = Mul (acc_out, acc)
  }}>
}}
"""
"""A constant M and no cond: all M iterations run, whatever the body's condition says."""


@pytest.mark.parametrize("count", [2 * BLOCK_STEPS + 8, 2 * BLOCK_STEPS + 21])
def test_a_loop_without_a_condition_runs_every_iteration_on_the_task_driver(tmp_path, count) -> None:
    """Its count known when compiled: (count mod 8) single iterations (0 and 5 here) before the
    blocks; loaded afresh on `local-task` three times. onnxruntime stops where the body's
    condition is false, against the spec, so the expected rows are computed here."""
    model = _model(COUNTED.format(count=count))
    compile_onnx(model, tmp_path, "loop")
    start = RNG.standard_normal(4).astype(np.float32)
    acc, rows = start.copy(), []
    for i in range(count):
        new = acc + np.float32(i)
        rows.append(new * acc)
        acc = new
    expected = [acc, np.stack(rows)]

    def reference(_feeds):
        return expected

    for _ in range(3):
        vm_module = load_vmfb(tmp_path / "loop.vmfb", driver="local-task")
        assert_matches_onnxruntime(
            vm_module, reference, [{"start": start}], function="rows", rtol=1e-5, atol=1e-2
        )


def test_a_loop_carrying_only_its_scan_outputs_matches_onnxruntime(tmp_path) -> None:
    model = _model(NOTHING_CARRIED)
    compile_onnx(model, tmp_path, "loop")
    vm_module = load_vmfb(tmp_path / "loop.vmfb", driver="local-task")
    feeds = [{"x": RNG.standard_normal((count, 4)).astype(np.float32)} for count in COUNTS]
    assert_matches_onnxruntime(vm_module, model, feeds, function="rows", rtol=1e-5, atol=1e-3)
