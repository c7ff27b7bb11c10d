"""ONNX Loop end to end: import -> verify -> lower (scf.while) -> iree-compile -> run -> compare.

The models are ONNX text; expected outputs come from onnx.reference, except where it departs
from the ONNX spec: it stacks scan outputs with `np.vstack`, wrong for slices of rank other than
1 (onnxruntime is the reference there), and it runs no iteration when `cond` is absent, where
the spec runs M iterations and ignores the body's condition (onnxruntime stops when the body's
condition is false: that case is checked against the spec's numbers, written out). The refusals
are checked with their exact messages.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest
from niro.backends.mlir.onnx_ops.loop import MAX_PREALLOCATED_ELEMENTS
from onnx.reference import ReferenceEvaluator

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

NODE_TESTS = (
    "test_loop11",
    "test_range_float_type_positive_delta_expanded",
    "test_range_int32_type_negative_delta_expanded",
)

HEADER = '<ir_version: 8, opset_import: ["" : 17]>\n'


def _expected(model: onnx.ModelProto, feeds: dict, reference: str) -> list:
    if reference == "onnx":
        return ReferenceEvaluator(model).run(None, feeds)
    import onnxruntime

    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def loop_case(
    name: str, text: str, feeds: list[dict], reference: str | list = "onnx"
) -> NodeTestCase:
    """A model in ONNX text with one data set per entry of `feeds`; the expected outputs come
    from `reference` ("onnx" or "onnxruntime"), or are given (a list, one tuple per feed)."""
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    names = [value.name for value in model.graph.input]
    expected = (
        reference
        if isinstance(reference, list)
        else [_expected(model, inputs, reference) for inputs in feeds]
    )
    data = tuple(
        (
            tuple(np.asarray(inputs[name]) for name in names),
            tuple(np.asarray(value) for value in outputs),
        )
        for inputs, outputs in zip(feeds, expected, strict=True)
    )
    return NodeTestCase(name, model, data, 1e-3, 1e-5)


def _f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


COUNTED = """
counted (int64 m, bool go, float[3] x) => (float[3] total, float[3] power) {
  zero = Constant <value = float[3] {0, 0, 0}> ()
  total, power = Loop (m, go, zero, x) <body = body (int64 i, bool c, float[3] t, float[3] p)
      => (bool c_out, float[3] t_out, float[3] p_out) {
    fi = Cast <to = 1> (i)
    step = Mul (x, fi)
    t_out = Add (t, step)
    p_out = Mul (p, x)
    c_out = Identity (c)
  }>
}
"""

WHILE = """
doubling (bool go, float[2] v0, float limit) => (float[2] v, int64 steps) {
  n0 = Constant <value = int64 {0}> ()
  v, steps = Loop (, go, v0, n0) <body = body (int64 i, bool c, float[2] a, int64 n)
      => (bool c_out, float[2] a_out, int64 n_out) {
    two = Constant <value = float {2}> ()
    a_out = Mul (a, two)
    s = ReduceSum <keepdims = 0> (a_out)
    c_out = Less (s, limit)
    one = Constant <value = int64 {1}> ()
    n_out = Add (n, one)
  }>
}
"""

SCAN_CONSTANT_M = """
rows (bool go, float[3] x, float limit) => (float[3] last, float[N, 3] rows, float[N, 2, 2] squares) {
  m = Constant <value = int64 {6}> ()
  last, rows, squares = Loop (m, go, x) <body = body (int64 i, bool c, float[3] v)
      => (bool c_out, float[3] v_out, float[3] row, float[2, 2] square) {
    fi = Cast <to = 1> (i)
    v_out = Add (v, fi)
    row = Mul (v_out, v)
    shape = Constant <value = int64[2] {2, 2}> ()
    zero = Constant <value = int64[1] {0}> ()
    two = Constant <value = int64[1] {2}> ()
    corner = Slice (v_out, zero, two)
    pair = Mul (corner, corner)
    both = Concat <axis = 0> (pair, corner)
    square = Reshape (both, shape)
    s = ReduceSum <keepdims = 0> (v_out)
    c_out = Less (s, limit)
  }>
}
"""

NO_CONDITION = """
counted (float[2] x) => (float[2] y, float[N, 2] ys) {
  m = Constant <value = int64 {3}> ()
  y, ys = Loop (m, , x) <body = body (int64 i, bool c, float[2] v) => (bool c_out, float[2] v_out, float[2] slice) {
    c_out = Constant <value = bool {0}> ()
    v_out = Add (v, x)
    slice = Identity (v_out)
  }>
}
"""

# M is known only when the loop starts: the scan outputs get M rows, all of them written
RUN_TIME_M = """
counted (int64 m, float[2] x) => (float[2] y, float[N, 2] ys) {
  go = Constant <value = bool {1}> ()
  y, ys = Loop (m, go, x) <body = body (int64 i, bool c, float[2] v) => (bool c_out, float[2] v_out, float[2] slice) {
    c_out = Identity (c)
    v_out = Add (v, x)
    slice = Identity (v)
  }>
}
"""

# a run-time M (computed before the loop) and a condition that may stop the loop earlier
RUN_TIME_M_EARLY_EXIT = """
early (int64[K] sizes, float[3] x, float limit) => (float[3] last, float[N, 3] rows, float[N, 2, 2] squares) {
  zero = Constant <value = int64 {0}> ()
  shape = Shape (sizes)
  m = Gather <axis = 0> (shape, zero)
  go = Constant <value = bool {1}> ()
  last, rows, squares = Loop (m, go, x) <body = body (int64 i, bool c, float[3] v)
      => (bool c_out, float[3] v_out, float[3] row, float[2, 2] square) {
    size = Gather <axis = 0> (sizes, i)
    fs = Cast <to = 1> (size)
    v_out = Add (v, fs)
    row = Mul (v_out, v)
    shape2 = Constant <value = int64[2] {2, 2}> ()
    start = Constant <value = int64[1] {0}> ()
    two = Constant <value = int64[1] {2}> ()
    corner = Slice (v_out, start, two)
    pair = Mul (corner, corner)
    both = Concat <axis = 0> (pair, corner)
    square = Reshape (both, shape2)
    s = ReduceSum <keepdims = 0> (v_out)
    c_out = Less (s, limit)
  }>
}
"""

# two such loops whose scan outputs are concatenated: the rows written are copied out by one
# dispatch (IREE failed to compile it when the row count was a bare index_cast of the loop's)
RUN_TIME_M_CONCATENATED = """
two (int64[K] sizes, float[3] x, float limit) => (float[N, 6] both) {
  zero = Constant <value = int64 {0}> ()
  shape = Shape (sizes)
  m = Gather <axis = 0> (shape, zero)
  go = Constant <value = bool {1}> ()
  a_last, a_rows = Loop (m, go, x) <body = body (int64 i, bool c, float[3] v)
      => (bool c_out, float[3] v_out, float[3] row) {
    size = Gather <axis = 0> (sizes, i)
    fs = Cast <to = 1> (size)
    v_out = Add (v, fs)
    row = Mul (v_out, v)
    s = ReduceSum <keepdims = 0> (v_out)
    c_out = Less (s, limit)
  }>
  b_last, b_rows = Loop (m, go, x) <body = body2 (int64 j, bool d, float[3] w)
      => (bool d_out, float[3] w_out, float[3] row2) {
    size2 = Gather <axis = 0> (sizes, j)
    fs2 = Cast <to = 1> (size2)
    w_out = Add (w, fs2)
    row2 = Sub (w_out, w)
    s2 = ReduceSum <keepdims = 0> (w_out)
    d_out = Less (s2, limit)
  }>
  both = Concat <axis = 1> (a_rows, b_rows)
}
"""

# a run-time M without a cond input: exactly max(M, 0) iterations, the body's condition ignored
RUN_TIME_M_NO_CONDITION = """
counted (int64 m, float[2] x) => (float[2] y, float[N, 2] ys) {
  y, ys = Loop (m, , x) <body = body (int64 i, bool c, float[2] v) => (bool c_out, float[2] v_out, float[2] slice) {
    c_out = Constant <value = bool {0}> ()
    v_out = Add (v, x)
    slice = Identity (v_out)
  }>
}
"""

# two loop-carried values with dynamic dims, each grown by a row per iteration (as torchvision's
# Keypoint R-CNN gathers its keypoints and scores): IREE packs both into one buffer per iteration
ROWS_OF_TWO = """
rows (int64 m, float[P, Q, R] x0, float[S, T] y0, float[5, 3, K] a, float[5, L] b) => (float[U, 3, K2] xs, float[V, L2] ys) {
  go = Constant <value = bool {1}> ()
  xs, ys = Loop (m, go, x0, y0) <body = body (int64 i, bool c, float[A, B, C] xa, float[D, E] ya)
      => (bool c_out, float[F, B2, C2] xa_out, float[G, E2] ya_out) {
    zero = Constant <value = int64[1] {0}> ()
    ai = Gather <axis = 0> (a, i)
    bi = Gather <axis = 0> (b, i)
    ai1 = Unsqueeze (ai, zero)
    bi1 = Unsqueeze (bi, zero)
    xa_out = Concat <axis = 0> (xa, ai1)
    ya_out = Concat <axis = 0> (ya, bi1)
    c_out = Identity (c)
  }>
}
"""


def _rows_of_two_feeds(x0_rows: int, y0_rows: int, width: int = 4) -> dict:
    generator = np.random.default_rng(0)
    return {
        "m": np.array(5),
        "x0": generator.random((x0_rows, 3, width), np.float32),
        "y0": generator.random((y0_rows, width), np.float32),
        "a": generator.random((5, 3, width), np.float32),
        "b": generator.random((5, width), np.float32),
    }


X3 = _f32(1.5, -2.0, 0.5)

MODEL_CASES = {
    # M and cond given at run time; two loop-carried values, one capturing `x` from outside
    "counted": lambda: loop_case(
        "loop_counted",
        COUNTED,
        [
            {"m": np.array(4), "go": np.array(True), "x": X3},
            {"m": np.array(0), "go": np.array(True), "x": X3},
            {"m": np.array(5), "go": np.array(False), "x": X3},
        ],
    ),
    # no M: the body's condition stops the loop (after 5 steps, 1 step, or none)
    "stops_by_condition": lambda: loop_case(
        "loop_stops_by_condition",
        WHILE,
        [
            {"go": np.array(True), "v0": _f32(1, 2), "limit": np.array(50, np.float32)},
            {"go": np.array(True), "v0": _f32(1, 2), "limit": np.array(1, np.float32)},
            {"go": np.array(False), "v0": _f32(1, 2), "limit": np.array(50, np.float32)},
        ],
    ),
    # constant M = 6 bounds the scan outputs; the condition may stop the loop earlier, so
    # the rows written are extracted: 6, 3, 1 or none (2-D slices too, hence onnxruntime)
    "scan_outputs_constant_m": lambda: loop_case(
        "loop_scan_outputs_constant_m",
        SCAN_CONSTANT_M,
        [
            {"go": np.array(True), "x": X3, "limit": np.array(1000, np.float32)},
            {"go": np.array(True), "x": X3, "limit": np.array(8, np.float32)},
            {"go": np.array(True), "x": X3, "limit": np.array(-100, np.float32)},
            {"go": np.array(False), "x": X3, "limit": np.array(1000, np.float32)},
        ],
        reference="onnxruntime",
    ),
    # without a cond input the loop runs M times and ignores the body's condition (false)
    "no_condition": lambda: loop_case(
        "loop_no_condition",
        NO_CONDITION,
        [{"x": _f32(1, -1)}],
        reference=[(_f32(4, -4), np.array([[2, -2], [3, -3], [4, -4]], np.float32))],
    ),
    # M given at run time bounds the scan outputs: 4 rows, 1, none for M = 0 or negative
    "scan_outputs_run_time_m": lambda: loop_case(
        "loop_scan_outputs_run_time_m",
        RUN_TIME_M,
        [
            {"m": np.array(4), "x": _f32(1, -2)},
            {"m": np.array(1), "x": _f32(1, -2)},
            {"m": np.array(0), "x": _f32(1, -2)},
            {"m": np.array(-3), "x": _f32(1, -2)},
        ],
        reference="onnxruntime",
    ),
    # M = the length of `sizes`, computed before the loop; the condition stops it after all 5
    # iterations, 2, 1, or none when M = 0 (2-D slices too, hence onnxruntime)
    "scan_outputs_run_time_m_early_exit": lambda: loop_case(
        "loop_scan_outputs_run_time_m_early_exit",
        RUN_TIME_M_EARLY_EXIT,
        [
            {"sizes": np.arange(5), "x": X3, "limit": np.array(1000, np.float32)},
            {"sizes": np.arange(5), "x": X3, "limit": np.array(5, np.float32)},
            {"sizes": np.arange(5), "x": X3, "limit": np.array(-100, np.float32)},
            {"sizes": np.arange(0), "x": X3, "limit": np.array(1000, np.float32)},
        ],
        reference="onnxruntime",
    ),
    # the rows two early-exit loops wrote, concatenated: 5, 3 or none
    "scan_outputs_run_time_m_concatenated": lambda: loop_case(
        "loop_scan_outputs_run_time_m_concatenated",
        RUN_TIME_M_CONCATENATED,
        [
            {"sizes": np.arange(5), "x": X3, "limit": np.array(1000, np.float32)},
            {"sizes": np.arange(5), "x": X3, "limit": np.array(5, np.float32)},
            {"sizes": np.arange(0), "x": X3, "limit": np.array(1000, np.float32)},
        ],
        reference="onnxruntime",
    ),
    # slices of run-time width K: the buffer is made at the first iteration, K wide
    "scan_outputs_dynamic_slices": lambda: loop_case(
        "loop_scan_outputs_dynamic_slices",
        DYNAMIC_SLICES,
        [{"x": _f32(1, 2, 3, 4), "k": np.array([2])}, {"x": _f32(1, 2, 3, 4), "k": np.array([4])}],
    ),
    # the same with a constant M (5): the count of rows run is clamped alike for IREE
    "scan_outputs_constant_m_concatenated": lambda: loop_case(
        "loop_scan_outputs_constant_m_concatenated",
        RUN_TIME_M_CONCATENATED.replace(
            "m = Gather <axis = 0> (shape, zero)", "m = Constant <value = int64 {5}> ()"
        ),
        [
            {"sizes": np.arange(5), "x": X3, "limit": np.array(1000, np.float32)},
            {"sizes": np.arange(5), "x": X3, "limit": np.array(5, np.float32)},
        ],
        reference="onnxruntime",
    ),
    # both grown values come out whole (the second read the first one's bytes without the dims
    # bounded for IREE), from empty and from non-empty first values
    "rows_of_two_dynamic_values": lambda: loop_case(
        "loop_rows_of_two_dynamic_values",
        ROWS_OF_TWO,
        [_rows_of_two_feeds(0, 0), _rows_of_two_feeds(1, 2)],
        reference="onnxruntime",
    ),
    # the same from first values of static shape (the body takes dynamic ones): IREE learns the
    # dims off the Concat axis from them (as torchvision Mask R-CNN's 0x320x320 pasted masks)
    "rows_from_static_first_values": lambda: loop_case(
        "loop_rows_from_static_first_values",
        ROWS_OF_TWO.replace("float[P, Q, R] x0, float[S, T] y0", "float[0, 3, 4] x0, float[0, 4] y0"),
        [_rows_of_two_feeds(0, 0)],
        reference="onnxruntime",
    ),
    # without a cond input a run-time M runs M times although the body's condition is false
    "scan_outputs_run_time_m_no_condition": lambda: loop_case(
        "loop_scan_outputs_run_time_m_no_condition",
        RUN_TIME_M_NO_CONDITION,
        [{"m": np.array(3), "x": _f32(1, -1)}, {"m": np.array(0), "x": _f32(1, -1)}],
        reference=[
            (_f32(4, -4), np.array([[2, -2], [3, -3], [4, -4]], np.float32)),
            (_f32(1, -1), np.zeros((0, 2), np.float32)),
        ],
    ),
}


@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_passes(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


WHILE_SCAN = """
whilescan (bool go, float[2] x) => (float[2] y, float[N, 2] ys) {
  y, ys = Loop (, go, x) <body = body (int64 i, bool c, float[2] v) => (bool c_out, float[2] v_out, float[2] slice) {
    s = ReduceSum <keepdims = 0> (v)
    limit = Constant <value = float {100}> ()
    c_out = Less (s, limit)
    v_out = Add (v, x)
    slice = Identity (v)
  }>
}
"""

# each slice has as many elements as the run-time `k` says
DYNAMIC_SLICES = """
dynamic (float[4] x, int64[1] k) => (float[N, K] ys) {
  m = Constant <value = int64 {3}> ()
  go = Constant <value = bool {1}> ()
  zero = Constant <value = int64[1] {0}> ()
  ys = Loop (m, go) <body = body (int64 i, bool c) => (bool c_out, float[K] slice) {
    c_out = Identity (c)
    slice = Slice (x, zero, k)
  }>
}
"""

HUGE_M = """
huge (float[2] x) => (float[2] y, float[N, 2] ys) {
  m = Constant <value = int64 {9223372036854775807}> ()
  go = Constant <value = bool {1}> ()
  y, ys = Loop (m, go, x) <body = body (int64 i, bool c, float[2] v) => (bool c_out, float[2] v_out, float[2] slice) {
    s = ReduceSum <keepdims = 0> (v)
    limit = Constant <value = float {100}> ()
    c_out = Less (s, limit)
    v_out = Add (v, x)
    slice = Identity (v)
  }>
}
"""

GROWING = """
growing (int64 m, float[2] x) => (float[N] y) {
  go = Constant <value = bool {1}> ()
  y = Loop (m, go, x) <body = body (int64 i, bool c, float[2] v) => (bool c_out, float[4] v_out) {
    c_out = Identity (c)
    v_out = Concat <axis = 0> (v, v)
  }>
}
"""

# the body does not declare its inputs: they take the first value's type (tensor<2xf32>)
GROWING_UNDECLARED = """
growing (int64 m, float[2] x) => (float[N] y) {
  go = Constant <value = bool {1}> ()
  y = Loop (m, go, x) <body = body (int64 i, bool c, v) => (c_out, v_out) {
    c_out = Identity (c)
    v_out = Concat <axis = 0> (v, v)
  }>
}
"""

ENDLESS = """
endless (float[2] x) => (float[2] y) {
  y = Loop (, , x) <body = body (int64 i, bool c, float[2] v) => (bool c_out, float[2] v_out) {
    c_out = Identity (c)
    v_out = Add (v, x)
  }>
}
"""

REFUSALS = {
    "while_scan": (
        WHILE_SCAN,
        "'onnx.Loop' op cannot bound the number of iterations to preallocate its scan outputs: "
        "the max trip count M is absent and the outputs' leading dims are dynamic",
    ),
    "huge_m": (
        HUGE_M,
        "'onnx.Loop' op cannot preallocate scan output #0 for the max trip count "
        "M = 9223372036854775807 (18446744073709551614 elements, more than 268435456); declare "
        "its leading dim to bound it",
    ),
    "growing": (
        GROWING,
        "'onnx.Loop' op loop-carried value #0 changes type across iterations: the body takes "
        "tensor<2xf32> and yields tensor<4xf32>",
    ),
    "growing_undeclared": (
        GROWING_UNDECLARED,
        "'onnx.Loop' op loop-carried value #0 changes type across iterations: the body takes "
        "tensor<2xf32> and yields tensor<4xf32>",
    ),
    "endless": (
        ENDLESS,
        "'onnx.Loop' op has neither a max trip count M nor a condition: the loop would never end",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_unsupported_loop_is_refused_clearly(name: str) -> None:
    text, message = REFUSALS[name]
    model = onnx.parser.parse_model(HEADER + text)
    outcome = run_case(NodeTestCase(name, model, (), 1e-3, 1e-5))
    assert (outcome.stage, outcome.refused) == ("lower", True), outcome.message
    assert outcome.message.endswith(message)


def test_sequence_carried_values_are_refused_at_import() -> None:
    outcome = run_case(node_test_case("test_loop13_seq"))
    assert (outcome.stage, outcome.refused) == ("import", True)
    assert outcome.message.endswith(
        "value 'seq_empty' (input of graph 'test_loop13_seq'): sequence types are not supported"
    )


def test_declared_scan_rows_are_checked_at_run_time() -> None:
    """test_loop11 declares 5 rows of scan output: a trip count of 3 stops the program with a
    message rather than returning rows that were never written."""
    case = node_test_case("test_loop11")
    (inputs, expected), *_ = case.data_sets
    short = ((np.array(3), *inputs[1:]), expected)
    outcome = run_case(NodeTestCase("loop11_short", case.model, (short,), 1e-3, 1e-5))
    assert outcome.stage == "run"
    assert "'onnx.Loop' op stops before 5 iterations" in outcome.message


def test_slices_changing_size_across_iterations_stop_the_program() -> None:
    """Slices of a dynamic dim must keep one size (onnxruntime refuses them too): the second
    iteration's wider slice stops the program with a message."""
    model = onnx.parser.parse_model(HEADER + DYNAMIC_SLICES.replace("slice = Slice (x, zero, k)", (
        "one = Constant <value = int64[1] {1}> ()\n    i1 = Unsqueeze (i, zero)\n    end = Add (i1, one)\n"
        "    slice = Slice (x, zero, end)"
    )))
    inputs = (_f32(1, 2, 3, 4), np.array([2]))
    expected = (np.zeros((3, 1), np.float32),)
    outcome = run_case(NodeTestCase("loop_growing_slices", model, ((inputs, expected),), 1e-3, 1e-5))
    assert outcome.stage == "run", outcome.message
    assert "'onnx.Loop' op: scan output #0's slices change size along dim 0 from one iteration to the next" in (
        outcome.message
    )


def test_run_time_m_too_large_to_preallocate_stops_the_program() -> None:
    """A run-time M whose rows would exceed MAX_PREALLOCATED_ELEMENTS (2 elements a slice here)
    stops the program with a message instead of failing to allocate."""
    model = onnx.parser.parse_model(HEADER + RUN_TIME_M)
    inputs = (np.array(MAX_PREALLOCATED_ELEMENTS // 2 + 1), _f32(1, -2))
    expected = (_f32(0, 0), np.zeros((0, 2), np.float32))
    case = NodeTestCase("loop_huge_run_time_m", model, ((inputs, expected),), 1e-3, 1e-5)
    outcome = run_case(case)
    assert outcome.stage == "run"
    assert (
        "'onnx.Loop' op max trip count M is more than 134217728, too many iterations to "
        "preallocate its scan outputs" in outcome.message
    )


def test_carried_dims_beyond_the_bound_stop_the_program() -> None:
    """A loop-carried value's dynamic dims are bounded so that IREE can bound its byte size
    (`_bounded_dims`): a dim above the bound stops the program with a message (here an empty
    first value, 0 x 3 x 700000, so the test allocates nothing)."""
    model = onnx.parser.parse_model(HEADER + ROWS_OF_TWO)
    feeds = _rows_of_two_feeds(0, 0)
    feeds["x0"] = np.zeros((0, 3, 700_000), np.float32)
    inputs = tuple(feeds[value.name] for value in model.graph.input)
    expected = (np.zeros((5, 3, 4), np.float32), np.zeros((5, 4), np.float32))
    outcome = run_case(NodeTestCase("loop_carried_dims", model, ((inputs, expected),), 1e-3, 1e-5))
    assert outcome.stage == "run", outcome.message
    assert (
        "'onnx.Loop' op: dim 2 of loop-carried value #0 is above 660560, the most a loop-carried "
        "tensor<?x?x?xf32> may take" in outcome.message
    )
