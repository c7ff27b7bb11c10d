"""The sequence rewrite (frontends/onnx/sequences.py): each rewritten model holds no sequence and
computes (on onnxruntime) what the original computes under onnx.reference; what has no tensor form is refused
with the node and the reason; a model without sequence ops is not touched."""

from __future__ import annotations

import re

import niro.ir as nir
import numpy as np
import onnx
import onnx.reference
import onnx_ir
import onnxruntime
import pytest
from niro.frontends.onnx import OnnxImportError, import_model
from niro.frontends.onnx.graph_typing import typed_model
from niro.frontends.onnx.sequences import SEQUENCE_OPS, has_sequences

HEADER = '<ir_version: 8, opset_import: ["" : {opset}]>'


def _model(text: str, opset: int = 17) -> onnx.ModelProto:
    return onnx.parser.parse_model(HEADER.replace("{opset}", str(opset)) + text)


def _no_sequences(graph: onnx.GraphProto) -> None:
    for node in graph.node:
        assert node.op_type not in SEQUENCE_OPS, node
        for attribute in node.attribute:
            for subgraph in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
                _no_sequences(subgraph)
    for value in (*graph.input, *graph.output, *graph.value_info):
        assert not value.type.HasField("sequence_type"), value.name


def _number_nodes(graph: onnx.GraphProto, count: list[int]) -> None:
    for node in graph.node:
        count[0] += 1
        node.name = f"{node.name}#{count[0]}"
        for attribute in node.attribute:
            for subgraph in (*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs):
                _number_nodes(subgraph, count)


def check(text: str, feeds: dict[str, np.ndarray], opset: int = 17) -> onnx.ModelProto:
    """Rewrite the model, check it holds no sequence, and compare the rewritten model's outputs
    with the original's under onnx.reference; the rewritten model."""
    model = _model(text, opset)
    assert has_sequences(onnx_ir.serde.deserialize_model(model))
    rewritten = onnx_ir.serde.serialize_model(typed_model(model, "m.onnx")[0])
    _no_sequences(rewritten.graph)
    onnx.checker.check_model(rewritten)
    expected = onnx.reference.ReferenceEvaluator(model).run(None, feeds)
    # NOTE: onnx.reference's Loop concatenates scan outputs of rank >= 2 (np.vstack) where the
    # spec and onnxruntime stack them along a new axis, so the rewritten model runs on onnxruntime
    # (which wants unique node names: the replacements of one node share its name)
    runnable = onnx.ModelProto()
    runnable.CopyFrom(rewritten)
    _number_nodes(runnable.graph, [0])
    session = onnxruntime.InferenceSession(runnable.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, feeds)
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_array_equal(have, want)
        assert have.shape == np.asarray(want).shape
    return rewritten


def refuse(text: str, message: str, opset: int = 17) -> None:
    with pytest.raises(OnnxImportError, match="^" + re.escape(f"m.onnx: {message}") + "$"):
        import_model(_model(text, opset), filename="m.onnx")


X = np.arange(24, dtype=np.float32).reshape(4, 6)


def test_construct_at_length_and_concat() -> None:
    check(
        """g (float[4,6] x, float[4,6] y) => (float[4,6] last, int64 n, float[4,12] wide, float[4,2,6] stack) {
          s = SequenceConstruct(x, y)
          minus = Constant <value_int = -1> ()
          last = SequenceAt(s, minus)
          n = SequenceLength(s)
          wide = ConcatFromSequence <axis = 1> (s)
          stack = ConcatFromSequence <axis = 1, new_axis = 1> (s)
        }""",
        {"x": X, "y": X + 100},
    )


def test_split_with_sizes_and_a_chunk_size() -> None:
    check(
        """g (float[4,6] x) => (float[4,4] second, int64 n, float[4,6] back, float[4,2] tail) {
          sizes = Constant <value_ints = [2, 4]> ()
          halves = SplitToSequence <axis = 1> (x, sizes)
          one = Constant <value_int = 1> ()
          second = SequenceAt(halves, one)
          four = Constant <value_int = 4> ()
          chunks = SplitToSequence <axis = -1> (x, four)
          n = SequenceLength(chunks)
          back = ConcatFromSequence <axis = 1> (chunks)
          tail = SequenceAt(chunks, one)
        }""",
        {"x": X},
    )


def test_split_into_rows_is_a_stack_read_at_run_time() -> None:
    rewritten = check(
        """g (float[4,6] x, int64 i) => (float[4] column, float[4,1] kept, int64 n, float[4,6] same, float[4,6] cat) {
          columns = SplitToSequence <axis = 1, keepdims = 0> (x)
          column = SequenceAt(columns, i)
          n = SequenceLength(columns)
          same = ConcatFromSequence <axis = -1, new_axis = 1> (columns)
          slabs = SplitToSequence <axis = 1> (x)
          kept = SequenceAt(slabs, i)
          cat = ConcatFromSequence <axis = 1> (slabs)
        }""",
        {"x": X, "i": np.array(-2, np.int64)},
    )
    assert {node.name for node in rewritten.graph.node} >= {"SplitToSequence_0", "SequenceAt_1"}


def test_insert_and_erase_at_constant_positions() -> None:
    check(
        """g (float[4,6] x, float[4,6] y) => (float[12,6] listed, float[4,6] stacked, float[3,4,6] erased) {
          zero = Constant <value_int = 0> ()
          minus2 = Constant <value_int = -2> ()
          s = SequenceConstruct(x)
          front = SequenceInsert(s, y, zero)
          back = SequenceInsert(front, x)
          listed = ConcatFromSequence <axis = 0> (back)
          rows = SplitToSequence <axis = 0> (x)
          more = SequenceInsert(rows, rows_extra, minus2)
          rows_extra = Slice(y, zero_1d, one_1d)
          zero_1d = Constant <value_ints = [0]> ()
          one_1d = Constant <value_ints = [1]> ()
          fewer = SequenceErase(more, zero)
          last_gone = SequenceErase(fewer)
          stacked_list = SequenceInsert(last_gone, rows_extra)
          stacked = ConcatFromSequence <axis = 0> (stacked_list)
          erased_list = SequenceErase(back, minus2)
          erased3 = SequenceInsert(erased_list, y)
          erased = ConcatFromSequence <axis = 0, new_axis = 1> (erased3)
        }""".replace(
            """          more = SequenceInsert(rows, rows_extra, minus2)
          rows_extra = Slice(y, zero_1d, one_1d)
          zero_1d = Constant <value_ints = [0]> ()
          one_1d = Constant <value_ints = [1]> ()
""",
            """          zero_1d = Constant <value_ints = [0]> ()
          one_1d = Constant <value_ints = [1]> ()
          rows_extra = Slice(y, zero_1d, one_1d)
          more = SequenceInsert(rows, rows_extra, minus2)
""",
        ),
        {"x": X, "y": X + 100},
    )


def test_insert_at_a_run_time_position_into_a_stack() -> None:
    check(
        """g (float[4,6] x, float[1,6] row, int64[1] at) => (float[5,6] y) {
          rows = SplitToSequence <axis = 0> (x)
          more = SequenceInsert(rows, row, at)
          y = ConcatFromSequence <axis = 0> (more)
        }""",
        {"x": X, "row": np.full((1, 6), -1, np.float32), "at": np.array([-1], np.int64)},
    )


def test_sequence_map_is_unrolled() -> None:
    check(
        """g (float[4,6] x, float[6] bias) => (float[4,6] y, int64[2,2] shapes) {
          two = Constant <value_ints = [1, 3]> ()
          s = SplitToSequence <axis = 0> (x, two)
          added, shape_seq = SequenceMap(s, bias) <body = body (float[N,6] row, float[6] b) => (float[N,6] out, int64[2] shape) {
            out = Add(row, b)
            shape = Shape(row)
          }>
          y = ConcatFromSequence <axis = 0> (added)
          shapes = ConcatFromSequence <axis = 0, new_axis = 1> (shape_seq)
        }""",
        {"x": X, "bias": np.arange(6, dtype=np.float32)},
    )


LOOP = """g (float[2,3] x, int64 m) => (float[?,3] rows, float[2,?,3] stacked, int64 n) {
      empty = SequenceEmpty <dtype = 1> ()
      true = Constant <value = bool {1}> ()
      grown = Loop(m, true, empty) <body = body (int64 i, bool c, seq(float) s) => (bool c_out, seq(float) s_out) {
        c_out = Identity(c)
        f = Cast <to = 1> (i)
        scaled = Mul(x, f)
        s_out = SequenceInsert(s, scaled)
      }>
      rows = ConcatFromSequence <axis = 0> (grown)
      stacked = ConcatFromSequence <axis = 1, new_axis = 1> (grown)
      n = SequenceLength(grown)
    }"""


def test_a_loop_appending_to_a_sequence_yields_a_scan_output() -> None:
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    rewritten = check(LOOP, {"x": base, "m": np.array(3, np.int64)})
    (loop,) = [node for node in rewritten.graph.node if node.op_type == "Loop"]
    assert loop.name == "Loop_2" and len(loop.input) == 2 and len(loop.output) == 1


def test_a_counting_loop_without_max_trip_count_is_bounded_by_its_counter() -> None:
    """PyTorch's dynamo exporter: `while index < n`, the sequence appended once per iteration."""
    rewritten = check(
        """g (float[2,3] x, int64 n) => (float[?,3] rows) {
          empty = SequenceEmpty <dtype = 1> ()
          zero = Constant <value_int = 0> ()
          one = Constant <value_int = 1> ()
          go = Less(zero, n)
          grown, last = Loop("", go, empty, zero) <body = body (int64 i, bool c, seq(float) s, int64 k) => (bool c_out, seq(float) s_out, int64 k_out) {
            f = Cast <to = 1> (k)
            scaled = Mul(x, f)
            s_out = SequenceInsert(s, scaled)
            step = CastLike(one, k)
            k_out = Add(k, step)
            c_out = Less(k_out, n)
          }>
          rows = ConcatFromSequence <axis = 0> (grown)
        }""",
        {"x": np.ones((2, 3), np.float32), "n": np.array(4, np.int64)},
    )
    (loop,) = [node for node in rewritten.graph.node if node.op_type == "Loop"]
    assert loop.input[0] != "" and loop.name == "Loop_4"


def test_a_loop_appending_to_a_sequence_that_starts_with_elements() -> None:
    check(
        """g (float[2,3] x, int64 m) => (float[?,2,3] stacked) {
          first = SequenceConstruct(x, x)
          true = Constant <value = bool {1}> ()
          grown = Loop(m, true, first) <body = body (int64 i, bool c, seq(float) s) => (bool c_out, seq(float) s_out) {
            c_out = Identity(c)
            f = Cast <to = 1> (i)
            scaled = Mul(x, f)
            s_out = SequenceInsert(s, scaled)
          }>
          stacked = ConcatFromSequence <axis = 0, new_axis = 1> (grown)
        }""",
        {"x": np.ones((2, 3), np.float32), "m": np.array(2, np.int64)},
    )


def test_a_sequence_read_inside_an_if_branch_and_passed_through_a_loop() -> None:
    check(
        """g (float[4,6] x, bool flag, int64 m) => (float[4,6] y, float[4,6] z) {
          s = SequenceConstruct(x, x)
          zero = Constant <value_int = 0> ()
          y = If(flag) <then_branch = t () => (float[4,6] a) { a = SequenceAt(s, zero) },
                        else_branch = e () => (float[4,6] b) { b0 = SequenceAt(s, zero)
                                                             b = Neg(b0) }>
          kept, total = Loop(m, flag, s, x) <body = body (int64 i, bool c, seq(float) q, float[4,6] acc) => (bool c_out, seq(float) q_out, float[4,6] acc_out) {
            c_out = Identity(c)
            q_out = Identity(q)
            one = Constant <value_int = 1> ()
            item = SequenceAt(q, one)
            acc_out = Add(acc, item)
          }>
          z = Add(total, total)
        }""",
        {"x": X, "flag": np.array(True), "m": np.array(2, np.int64)},
    )


def test_the_rewritten_model_imports_with_the_users_node_names() -> None:
    module = import_model(
        _model(
            """g (float[4,6] x) => (float[4,6] y) {
              s = SplitToSequence <axis = 1> (x)
              y = ConcatFromSequence <axis = 1> (s)
            }"""
        )
    )
    locations = {op.loc for op in module.functions[0].first_block.operations}
    assert locations <= {"SplitToSequence_0", "ConcatFromSequence_1", None}


def test_a_model_without_sequence_ops_is_returned_untouched() -> None:
    model = _model("g (float[4] x) => (float[4] y) { y = Relu(x) }")
    assert not has_sequences(onnx_ir.serde.deserialize_model(model))


# -- refusals ----------------------------------------------------------------------------------


def test_a_sequence_graph_output_is_refused() -> None:
    refuse(
        "g (float[4] x) => (seq(float) s) { s = SequenceConstruct(x, x) }",
        "value 's' (output of graph 'g'): a sequence output has no tensor form (niroc rewrites only "
        "sequences used inside the model into tensor ops)",
    )


def test_a_sequence_graph_input_is_refused_by_its_type() -> None:
    refuse(
        "g (seq(float[4]) s) => (float[4] y) { zero = Constant <value_int = 0> ()\n y = SequenceAt(s, zero) }",
        "value 's' (input of graph 'g'): sequence types are not supported",
    )


def test_an_if_yielding_a_sequence_is_refused() -> None:
    refuse(
        """g (float[4] x, bool c) => (float[4] y) {
          s = If(c) <then_branch = t () => (seq(float) a) { a = SequenceConstruct(x) },
                     else_branch = e () => (seq(float) b) { b = SequenceConstruct(x, x) }>
          zero = Constant <value_int = 0> ()
          y = SequenceAt(s, zero)
        }""",
        "value 'a' (output of graph 't' (attribute 'then_branch' of node 'If_0' (If))): a sequence "
        "output has no tensor form (niroc rewrites only sequences used inside the model into tensor ops)",
    )


def test_run_time_split_sizes_are_refused() -> None:
    refuse(
        """g (float[4,6] x, int64[2] sizes) => (float[4,6] y) {
          s = SplitToSequence <axis = 1> (x, sizes)
          y = ConcatFromSequence <axis = 1> (s)
        }""",
        "node 'SplitToSequence_0' (SplitToSequence): its split sizes are not constant: the sequence "
        "length would depend on run-time data",
    )


def test_an_axis_that_is_no_int_is_refused() -> None:
    """The rewrite reads its attributes before the verifier: a float axis is named, not a crash."""
    refuse(
        """g (float[4,6] x) => (float[4,6] y) {
          s = SplitToSequence <axis = 1.5> (x)
          y = ConcatFromSequence <axis = 1> (s)
        }""",
        "node 'SplitToSequence_0' (SplitToSequence): attribute 'axis' must be an int, got FLOAT",
    )


def test_a_run_time_position_into_differently_shaped_elements_is_refused() -> None:
    refuse(
        """g (float[4,6] x, float[2,6] z, int64 i) => (float[?,6] y) {
          s = SequenceConstruct(x, z)
          y = SequenceAt(s, i)
        }""",
        "node 'SequenceAt_1' (SequenceAt): needs its sequence as one stacked tensor, but the elements (and "
        "the tensor inserted) are not known to share one static shape",
    )


def test_inserting_a_differently_shaped_tensor_into_a_stack_is_refused() -> None:
    refuse(
        """g (float[4,6] x) => (float[8,6] y) {
          rows = SplitToSequence <axis = 0> (x)
          more = SequenceInsert(rows, x)
          y = ConcatFromSequence <axis = 0> (more)
        }""",
        "node 'SequenceInsert_1' (SequenceInsert): needs its sequence as one stacked tensor, but the "
        "elements (and the tensor inserted) are not known to share one static shape",
    )


def test_an_insert_at_a_position_inside_a_loop_is_refused() -> None:
    text = LOOP.replace("s_out = SequenceInsert(s, scaled)", "s_out = SequenceInsert(s, scaled, i)")
    refuse(
        text,
        "node 'SequenceInsert_3' (SequenceInsert): inserts into sequence 's' carried by node 'Loop_2' "
        "(Loop) at a position input; only appending one tensor per iteration can become a scan output",
    )


def test_a_loop_reading_the_sequence_it_grows_is_refused() -> None:
    text = LOOP.replace(
        "s_out = SequenceInsert(s, scaled)",
        "n_in = SequenceLength(s)\n s_out = SequenceInsert(s, scaled)",
    )
    refuse(
        text,
        "node 'SequenceLength_3' (SequenceLength): reads sequence 's' carried by node 'Loop_2' (Loop) "
        "inside its body; only a sequence the body appends to and never reads can become a scan output",
    )


def test_a_while_loop_growing_a_sequence_is_refused() -> None:
    refuse(
        """g (float[2,3] x, bool go) => (float[?,3] rows) {
          empty = SequenceEmpty <dtype = 1> ()
          grown = Loop("", go, empty) <body = body (int64 i, bool c, seq(float) s) => (bool c_out, seq(float) s_out) {
            s_out = SequenceInsert(s, x)
            c_out = Not(c)
          }>
          rows = ConcatFromSequence <axis = 0> (grown)
        }""",
        "node 'Loop_1' (Loop): appends to sequence 'empty' in a loop without a max trip count M whose "
        "condition is not a counter compared with a loop-invariant bound: the number of elements "
        "cannot be bounded to stack them",
    )


def test_concatenating_run_time_many_elements_of_dynamic_size_is_refused() -> None:
    refuse(
        """g (float[N,3] x, int64 m) => (float[?,3] rows) {
          empty = SequenceEmpty <dtype = 1> ()
          true = Constant <value = bool {1}> ()
          grown = Loop(m, true, empty) <body = body (int64 i, bool c, seq(float) s) => (bool c_out, seq(float) s_out) {
            c_out = Identity(c)
            s_out = SequenceInsert(s, x)
          }>
          rows = ConcatFromSequence <axis = -2> (grown)
        }""",
        "node 'ConcatFromSequence_3' (ConcatFromSequence): concatenates along axis 0 a sequence of run-time "
        "length whose elements' size along that axis is not static (it may differ from one element to the next)",
    )


def test_a_sequence_fed_to_another_op_is_refused() -> None:
    refuse(
        """g (float[4] x) => (bool y) {
          s = SequenceConstruct(x)
          o = Optional(s)
          y = OptionalHasElement(o)
        }""",
        "node 'Optional_1' (Optional): takes sequence 's' as input #0; niroc rewrites sequences into "
        "tensors only for the sequence ops, Identity and Loop",
    )


def test_a_sequence_op_inside_a_branch_is_found_and_rewritten() -> None:
    text = """g (float[4,6] x, bool c) => (float[4,6] y) {
      y = If(c) <then_branch = t () => (float[4,6] a) { s = SequenceConstruct(x, x)
                                                       one = Constant <value_int = 1> ()
                                                       a = SequenceAt(s, one) },
                 else_branch = e () => (float[4,6] b) { b = Neg(x) }>
    }"""
    assert has_sequences(onnx_ir.serde.deserialize_model(_model(text)))
    check(text, {"x": X, "c": np.array(True)})


def test_sequences_in_a_model_local_function_are_rewritten() -> None:
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
        g (float[4,6] x) => (float[4,6] y) { y = local.halves_back(x) }
        <domain: "local", opset_import: ["" : 17]>
        halves_back (a) => (b) {
          s = SplitToSequence <axis = 1> (a)
          b = ConcatFromSequence <axis = 1> (s)
        }"""
    )
    assert not has_sequences(onnx_ir.serde.deserialize_model(model))  # functions: when specialised
    module = import_model(model)
    names = {nir.op_name(op) for function in module.functions for op in function.first_block.operations}
    assert not {f"onnx.{op}" for op in SEQUENCE_OPS} & names
    assert len(module.functions) == 2


def _without_body(text: str, op_type: str) -> onnx.ModelProto:
    model = _model(text)
    (node,) = [node for node in model.graph.node if node.op_type == op_type]
    del node.attribute[:]
    return model


@pytest.mark.parametrize(
    ("op_type", "text"),
    [
        (
            "SequenceMap",
            """g (float[4] x) => (float[?] y) {
              s = SequenceConstruct(x, x)
              mapped = SequenceMap(s) <body = body (float[4] e) => (float[4] out) { out = Neg(e) }>
              y = ConcatFromSequence <axis = 0> (mapped)
            }""",
        ),
        ("Loop", LOOP),
    ],
)
def test_a_sequence_node_without_its_body_is_refused(op_type: str, text: str) -> None:
    """Found by `make fuzz` (a node's op_type mutated to SequenceMap): the rewrite, which runs
    before the verifier checks attributes, read the missing body with a bare `next()`."""
    model = _without_body(text, op_type)
    with pytest.raises(OnnxImportError, match=rf"^m\.onnx: node '{op_type}_\d' \({op_type}\): missing graph attribute 'body'$"):
        import_model(model, filename="m.onnx")
