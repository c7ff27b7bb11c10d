"""Function arguments passed from the host are read on the host: a Function called with a size
computed from Shape (onnxruntime-genai's GroupQueryAttention body gets `total_sequence_length`
so) does its shape arithmetic on scalars, and the caller reads no tensor back to size the
function's results. Compiled once with a dynamic dim, run at several sizes against
onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from .mlir_harness import assert_matches_onnxruntime, compile_onnx, stream_ir

HOST_CALL = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
host_call (float[n, 4] x) => (float[m] y)
<int64 zero = {0}>
{
  shape = Shape(x)
  rows = Gather <axis = 0> (shape, zero)
  y = local.Spread(x, rows)
}
<domain: "local", opset_import: ["" : 17]>
Spread (x, rows) => (y)
{
  two = Constant <value = int64 {2}> ()
  one = Constant <value = int64 {1}> ()
  start = Constant <value = int64 {0}> ()
  doubled = Mul(rows, two)
  steps = Range(start, doubled, one)
  positions = Cast <to = 1> (steps)
  total = ReduceSum <keepdims = 0> (x)
  y = Mul(positions, total)
}
"""
"""A model-local function given x's row count (a Shape element, on the host): 2 * rows
positions, each times the sum of x. The Range's length is the Mul of the argument."""


def _host_call() -> onnx.ModelProto:
    model = onnx.parser.parse_model(HOST_CALL)
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    model = _host_call()
    return model, compile_onnx(model, tmp_path_factory.mktemp("host_arguments"), "host_call")


@pytest.mark.parametrize("rows", [1, 3, 6])
def test_a_function_sized_by_a_host_argument_matches_onnxruntime(compiled, rows: int):
    model, vm_module = compiled
    x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
    assert_matches_onnxruntime(
        vm_module, model, [{"x": x}], function="host_call", rtol=1e-6, atol=1e-6
    )


def test_the_caller_reads_no_tensor_back(tmp_path):
    """iree-compile's stream-level @host_call loads nothing from the device. With the argument
    read as a device tensor in the function, the Mul was a dispatch whose result the caller
    read back (1 `stream.resource.load`) to size the Range."""
    stream = stream_ir(_host_call(), tmp_path, "host_call")
    caller = stream.split("util.func public @host_call")[1].split("util.func")[0]
    assert caller.count("stream.resource.load") == 0, "a tensor is read back to the host"
