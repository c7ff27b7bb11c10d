"""Concat lowered to `tensor.concat` where its operands are typed less statically than its
result, as in a Loop that rebuilds its carried tensor row by row (`x[:i]`, a new row,
`x[i+1:]`: torchvision's Keypoint R-CNN writes its keypoints this way). The concat's own type is
the one MLIR infers from its operands; declaring the Niro result's more static type on it made
iree-compile break the Loop's carried type ('scf.while' successor operand type mismatch)."""

from __future__ import annotations

import numpy as np
import onnx

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

ROW_BY_ROW = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N,17] x, int64 n) => (float[M,17] y) {
  t = Constant <value = bool {1}> ()
  y = Loop(n, t, x) <body = body (int64 i, bool c, float[A,17] s) => (bool c_out, float[B,17] s_out) {
    c_out = Identity(c)
    zero = Constant <value_ints = [0]> ()
    one = Constant <value_ints = [1]> ()
    i1 = Unsqueeze(i, zero)
    ip1 = Add(i1, one)
    big = Constant <value_ints = [1000000]> ()
    before = Slice(s, zero, i1, zero)
    row = Slice(s, i1, ip1, zero)
    f = Cast <to = 1> (i)
    newrow = Add(row, f)
    after = Slice(s, ip1, big, zero)
    s_out = Concat <axis = 0> (before, newrow, after)
  }>
}"""


def test_a_loop_rebuilding_its_state_by_concat_matches_onnxruntime(tmp_path) -> None:
    model = onnx.parser.parse_model(ROW_BY_ROW)
    vm = compile_onnx(model, tmp_path)
    rows = np.arange(5 * 17, dtype=np.float32).reshape(5, 17)
    feeds = [{"x": rows[:count], "n": np.array(steps, dtype=np.int64)} for count, steps in ((3, 3), (5, 2), (1, 1))]
    assert_matches_onnxruntime(vm, model, feeds, function="g", rtol=0, atol=0)
