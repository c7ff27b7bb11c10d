"""Shape arithmetic on the host: the sizes an exporter computes from Shape's elements with
element-wise ops (torch's MultiheadAttention: `bsz * num_heads`, `embed_dim // num_heads` with
its Casts) are computed on scalars, so iree-compile's module reads no tensor back from the
device to size a Reshape (each read is a wait for the device and a new submission). Compiled
once with dynamic batch and sequence dims, run at several sizes and compared with
onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from .mlir_harness import assert_matches_onnxruntime, compile_onnx, stream_ir

D = 8

HEAD_SPLIT = """
<ir_version: 8, opset_import: ["" : 17]>
head_split (float[seq, batch, width] x) => (float[seq, batch, width] y)
<int64 zero = {0}, int64 one = {1}, int64 two = {2}, int64 heads = {2}, int64[1] axis0 = {0},
 float[4] scale = {0.5, 0.75, 1.25, 1.5}>
{
  shape = Shape(x)
  seq = Gather <axis = 0> (shape, zero)
  batch = Gather <axis = 0> (shape, one)
  width = Gather <axis = 0> (shape, two)
  rows = Mul(batch, heads)
  head_width = Div(width, heads)
  head_width32 = Cast <to = 6> (head_width)
  head_width64 = Cast <to = 7> (head_width32)
  seq1 = Unsqueeze(seq, axis0)
  rows1 = Unsqueeze(rows, axis0)
  head1 = Unsqueeze(head_width64, axis0)
  split = Concat <axis = 0> (seq1, rows1, head1)
  heads_view = Reshape(x, split)
  heads_first = Transpose <perm = [1, 0, 2]> (heads_view)
  scaled = Mul(heads_first, scale)
  back = Transpose <perm = [1, 0, 2]> (scaled)
  y = Reshape(back, shape)
}
"""
"""x [seq, batch, width] viewed as [seq, batch * 2 heads, width / 2], as torch's MHA export
does it (Mul of a Gather; Div, then Casts to int32 and back), heads first, scaled per head
column (so width is 8 at run time), and merged back by the shape read from x."""


def _head_split() -> onnx.ModelProto:
    model = onnx.parser.parse_model(HEAD_SPLIT)
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    model = _head_split()
    return model, compile_onnx(model, tmp_path_factory.mktemp("shape_arithmetic"), "head_split")


@pytest.mark.parametrize(("seq", "batch"), [(1, 1), (3, 2), (9, 1)])
def test_sizes_computed_from_shape_elements_match_onnxruntime(compiled, seq: int, batch: int):
    model, vm_module = compiled
    x = np.random.default_rng(seq * 10 + batch).standard_normal((seq, batch, D)).astype(np.float32)
    assert_matches_onnxruntime(
        vm_module, model, [{"x": x}], function="head_split", rtol=1e-6, atol=1e-6
    )


def test_no_tensor_is_read_back_to_size_a_reshape(tmp_path):
    """iree-compile's stream-level module: one submission, no load of a device tensor. With
    the Mul and Div as device generics it read both results back (2 `stream.resource.load`s
    and 3 submissions)."""
    stream = stream_ir(_head_split(), tmp_path, "head_split")
    assert stream.count("stream.resource.load") == 0, "a tensor is read back to the host"
    assert stream.count("stream.cmd.execute") == 1


SHAPE_TEST = """
<ir_version: 8, opset_import: ["" : 17]>
shape_test (float[n, 3] x) => (float[n, 3] y)
<int64[1] four = {4}, float zero = {0}>
{
  n = Shape <start = 0, end = 1> (x)
  is_four = Equal(n, four)
  y = Where(is_four, x, zero)
}
"""
"""x where it has 4 rows, else zeros: a comparison of a Shape element (on the host) read by a
device op."""


@pytest.mark.parametrize("rows", [4, 3])
def test_a_comparison_of_shape_elements_read_by_a_device_op(tmp_path, rows: int):
    """The comparison stays a device op: as a host `tensor.from_elements` of i1, iree-compile
    (3.13) failed ("'tensor.from_elements' op failed to verify that operand types match result
    element type")."""
    model = onnx.parser.parse_model(SHAPE_TEST)
    onnx.checker.check_model(model)
    vm_module = compile_onnx(model, tmp_path, "shape_test")
    x = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32)
    assert_matches_onnxruntime(
        vm_module, model, [{"x": x}], function="shape_test", rtol=0, atol=0
    )

