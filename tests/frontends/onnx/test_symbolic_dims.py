"""Dims that are static in fact, proved by symbolic shape arithmetic (symbolic_dims.py): a
Reshape's -1 that is 1 (or 12) in every run gets that static size, so it broadcasts and
lowers statically; a dim that depends on a run-time size stays dynamic."""

from __future__ import annotations

import math

import niro.ir as nir
import numpy as np
import onnx
import onnxruntime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from niro.frontends.onnx import import_model_with_info
from niro.frontends.onnx.symbolic_dims import Dim
from onnx import helper, numpy_helper

from .helpers import describe_block, import_text, import_verified, main_block

OPSET = '<ir_version: 8, opset_import: ["" : 18]>'


def _expand_keeping_minus_ones(out: str, source: str, shape: str) -> str:
    """ONNX text: `out` = `source` expanded to the 3-element `shape` whose -1s keep a dim, as
    PyTorch exports `expand(..., -1, ...)`: Expand(source, Where(Equal(shape, -1), 1, shape))."""
    return (
        f" minus = Constant <value_ints = [-1, -1, -1]> ()\n unchanged = Equal({shape}, minus)\n"
        f" ones = Constant <value_ints = [1, 1, 1]> ()\n target = Where(unchanged, ones, {shape})\n"
        f" {out} = Expand({source}, target)\n"
    )


def _op(text: str, op_type: str) -> str:
    ops = describe_block(main_block(import_text(OPSET + text)))
    return next(op for op in ops if op.startswith(op_type))


def test_a_reshape_minus_one_that_is_one_becomes_static() -> None:
    # PyTorch's key-padding mask in nn.MultiheadAttention: the [b, t] mask is expanded per
    # head, flattened to [b * heads, 1, t] and viewed as [b, heads, -1, t]; the -1 is 1.
    text = (
        "g (float[B, 10] mask, float[B, 4, Q, 10] scores) => (z) {"
        " s = Shape(mask)\n zero = Constant <value_int = 0> ()\n b = Gather(s, zero)\n"
        " heads = Constant <value_int = 4> ()\n rows = Mul(b, heads)\n"
        " axis = Constant <value_ints = [0]> ()\n rows1 = Unsqueeze(rows, axis)\n b1 = Unsqueeze(b, axis)\n"
        " tail3 = Constant <value_ints = [1, 1, 10]> ()\n m4_shape = Concat <axis = 0> (b1, tail3)\n"
        " m4 = Reshape(mask, m4_shape)\n per_head = Constant <value_ints = [1, 4, 1, 1]> ()\n"
        " expanded = Expand(m4, per_head)\n one_t = Constant <value_ints = [1, 10]> ()\n"
        " flat_shape = Concat <axis = 0> (rows1, one_t)\n flat = Reshape(expanded, flat_shape)\n"
        " rest = Constant <value_ints = [4, -1, 10]> ()\n view_shape = Concat <axis = 0> (b1, rest)\n"
        " view = Reshape(flat, view_shape)\n z = Add(scores, view) }"
    )
    ops = describe_block(main_block(import_text(OPSET + text)))
    reshapes = [op for op in ops if op.startswith("onnx.Reshape")]
    assert reshapes[1].startswith("onnx.Reshape(tensor<?x4x1x10xf32>, tensor<3xi64>) -> (tensor<?x1x10xf32>)")
    assert reshapes[2].startswith("onnx.Reshape(tensor<?x1x10xf32>, tensor<4xi64>) -> (tensor<?x4x1x10xf32>)")
    add = next(op for op in ops if op.startswith("niro.add"))
    assert "tensor<?x4x1x10xf32>) -> (tensor<?x4x?x10xf32>)" in add


def test_a_name_onnx_made_up_for_a_reshape_resolves_later() -> None:
    # y is [3b, 4] (ONNX names the first dim unk__N); Relu carries the name on; reshaping
    # to [b, -1] divides 12b by b: 12.
    text = (
        "g (float[B, 3, 4] x) => (z) {"
        " s = Shape(x)\n zero = Constant <value_int = 0> ()\n b = Gather(s, zero)\n"
        " three = Constant <value_int = 3> ()\n rows = Mul(b, three)\n axis = Constant <value_ints = [0]> ()\n"
        " rows1 = Unsqueeze(rows, axis)\n four = Constant <value_ints = [4]> ()\n"
        " shape = Concat <axis = 0> (rows1, four)\n y = Reshape(x, shape)\n r = Relu(y)\n"
        " b1 = Unsqueeze(b, axis)\n minus = Constant <value_ints = [-1]> ()\n"
        " back = Concat <axis = 0> (b1, minus)\n z = Reshape(r, back) }"
    )
    assert _op(text, "onnx.Reshape(tensor<?x4xf32>").endswith("-> (tensor<?x12xf32>) @Reshape_14")


def test_a_minus_one_that_depends_on_a_run_time_size_stays_dynamic() -> None:
    # [b, t] viewed as [t, -1]: the -1 is b, unknown until run time.
    text = (
        "g (float[B, T] x) => (z) {"
        " s = Shape(x)\n one = Constant <value_ints = [1]> ()\n t = Gather(s, one)\n"
        " minus = Constant <value_ints = [-1]> ()\n shape = Concat <axis = 0> (t, minus)\n z = Reshape(x, shape) }"
    )
    assert "-> (tensor<?x?xf32>)" in _op(text, "onnx.Reshape")


def test_an_inexact_division_is_not_taken_for_a_size() -> None:
    # [b, 6] viewed as [4, -1]: 6b / 4 is a size only for even b; nothing is claimed.
    text = "g (float[B, 6] x) => (z) { shape = Constant <value_ints = [4, -1]> ()\n z = Reshape(x, shape) }"
    assert "-> (tensor<4x?xf32>)" in _op(text, "onnx.Reshape")


def test_a_zero_in_the_target_copies_the_input_dim() -> None:
    # [b, 2, 6] viewed as [2b, 0, -1]: the 0 is x's 2, and -1 = 12b / (2b * 2) = 3.
    text = (
        "g (float[B, 2, 6] x) => (z) {"
        " s = Shape(x)\n zero = Constant <value_ints = [0]> ()\n b = Gather(s, zero)\n"
        " two = Constant <value_ints = [2]> ()\n rows = Mul(b, two)\n"
        " tail = Constant <value_ints = [0, -1]> ()\n shape = Concat <axis = 0> (rows, tail)\n"
        " z = Reshape(x, shape) }"
    )
    assert "-> (tensor<?x2x3xf32>)" in _op(text, "onnx.Reshape")


def test_an_expand_by_minus_one_keeps_the_dim() -> None:
    # PyTorch's `cls.expand(b, -1, -1)`: the target [b, -1, -1] has its -1s replaced by
    # Where(Equal(shape, -1), 1, shape); b is a dim, never -1, so the target is [b, 1, 1] and
    # the class token concatenated to 16 patches gives 17 rows.
    text = (
        "g (float[B, 16, 32] x) => (z) <float[1, 1, 32] cls = {"
        + ", ".join(["0.5"] * 32)
        + "}> { s = Shape(x)\n first = Constant <value_ints = [0]> ()\n b = Gather(s, first)\n"
        " keep = Constant <value_ints = [-1, -1]> ()\n shape = Concat <axis = 0> (b, keep)\n"
        + _expand_keeping_minus_ones("token", "cls", "shape")
        + " z = Concat <axis = 1> (token, x) }"
    )
    assert "-> (tensor<?x1x32xf32>)" in _op(text, "onnx.Expand")
    assert "-> (tensor<?x17x32xf32>)" in _op(text, "onnx.Concat(tensor<?x1x32xf32>")


def test_a_broadcast_of_an_arange_lookup_keeps_the_sequence_dim() -> None:
    # GPT's embeddings: tok [b, seq, 32] + pos.weight[arange(seq)]. ONNX names the lookup's
    # dim afresh and their sum's dim afresh again; computed, both are seq, so viewing the sum
    # as [b, seq, 4, -1] splits 32 into heads of 8.
    weights = ", ".join(["0.5"] * 16 * 32)
    text = (
        f"g (int64[B, S] ids) => (z) <float[16, 32] tok = {{{weights}}}, float[16, 32] pos = {{{weights}}}> {{"
        " t = Gather(tok, ids)\n s = Shape(ids)\n one = Constant <value_int = 1> ()\n seq = Gather(s, one)\n"
        " zero = Constant <value_int = 0> ()\n step = Constant <value_int = 1> ()\n"
        " positions = Range(zero, seq, step)\n p = Gather(pos, positions)\n h = Add(t, p)\n"
        " b = Gather(s, zero)\n axis = Constant <value_ints = [0]> ()\n b1 = Unsqueeze(b, axis)\n"
        " seq1 = Unsqueeze(seq, axis)\n heads = Constant <value_ints = [4, -1]> ()\n"
        " shape = Concat <axis = 0> (b1, seq1, heads)\n z = Reshape(h, shape) }"
    )
    assert "-> (tensor<?x?x4x8xf32>)" in _op(text, "onnx.Reshape")


def test_the_last_k_of_a_dynamic_axis_are_static_a_cut_from_the_front_is_not() -> None:
    # DETR's `y[:, -1:, :]`: 1 element, taking the dynamic axis to be long enough (the Slice
    # lowering checks that at run time: test_mlir_slice_check.py). `x[:, :3]` stays dynamic:
    # it caps a count that may be smaller at run time (a detector's `keep[:100]`).
    text = (
        "g (float[B, H, W] y) => (last, first3) {"
        " minus = Constant <value_ints = [-1]> ()\n end = Constant <value_ints = [9223372036854775807]> ()\n"
        " axis = Constant <value_ints = [1]> ()\n last = Slice(y, minus, end, axis)\n"
        " zero = Constant <value_ints = [0]> ()\n three = Constant <value_ints = [3]> ()\n"
        " two = Constant <value_ints = [2]> ()\n first3 = Slice(y, zero, three, two) }"
    )
    ops = describe_block(main_block(import_text(OPSET + text)))
    slices = [op for op in ops if op.startswith("onnx.Slice")]
    assert "-> (tensor<?x1x?xf32>)" in slices[0]
    assert "-> (tensor<?x?x?xf32>)" in slices[1]


def test_a_slice_at_run_time_positions_keeps_the_axes_it_does_not_cut() -> None:
    # Hugging Face's BERT-family embeddings: `position_ids[:, :seq]` of a [1, 64] buffer, the
    # end read from the ids' shape. ONNX leaves both dims unknown; axis 0 is not cut, so it
    # stays 1 and the sum with the [B, S, 8] token embeddings broadcasts statically.
    table = ", ".join(["0.5"] * 64 * 8)
    positions = ", ".join(str(i) for i in range(64))
    text = (
        f"g (int64[B, S] ids, float[B, S, 8] tokens) => (z, first) <float[64, 8] table = {{{table}}},"
        f" int64[1, 64] position_ids = {{{positions}}}> {{"
        " s = Shape(ids)\n one = Constant <value_int = 1> ()\n seq = Gather(s, one)\n"
        " axis0 = Constant <value_ints = [0]> ()\n end = Unsqueeze(seq, axis0)\n"
        " zero = Constant <value_ints = [0]> ()\n axis1 = Constant <value_ints = [-1]> ()\n"
        " sliced = Slice(position_ids, zero, end, axis1)\n p = Gather(table, sliced)\n"
        " z = Add(tokens, p)\n first = Slice(tokens, zero, end) }"
    )
    ops = describe_block(main_block(import_text(OPSET + text)))
    slices = [op for op in ops if op.startswith("onnx.Slice")]
    assert "-> (tensor<1x?xi64>)" in slices[0]
    assert "-> (tensor<?x?x8xf32>)" in slices[1]  # axes absent: the starts' length, axis 0
    add = next(op for op in ops if op.startswith("niro.add"))
    assert "(tensor<?x?x8xf32>, tensor<1x?x8xf32>)" in add


def test_a_shape_vector_keeps_its_known_elements_beside_a_dim_of_an_untyped_value() -> None:
    # onnxruntime's optimizer fuses BART's LayerNormalizations into com.microsoft ops, which
    # ONNX inference cannot type; the decoder then expands its cross-attention mask [B, 1, 8]
    # to Where(Equal(t, -1), 1, t) of t = [Shape(h)[0], -1, 8], h such an output. Its first
    # element is unknown, the 1 is not: the Expand stays [?, 1, 8] and broadcasts.
    text = (
        '<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>'
        " g (float[B, S, 8] x, float[B, 1, 8] mask) => (z) {"
        " h = com.microsoft.Gelu(x)\n s = Shape(h)\n zero = Constant <value_int = 0> ()\n"
        " b = Gather(s, zero)\n axis = Constant <value_ints = [0]> ()\n b1 = Unsqueeze(b, axis)\n"
        " rest = Constant <value_ints = [-1, 8]> ()\n t = Concat <axis = 0> (b1, rest)\n"
        + _expand_keeping_minus_ones("m", "mask", "t")
        + " z = Add(h, m) }"
    )
    ops = describe_block(main_block(import_text(text)))
    (expand,) = [op for op in ops if op.startswith("onnx.Expand")]
    assert "-> (tensor<?x1x8xf32>)" in expand


def test_a_slice_at_run_time_positions_keeps_a_1_it_cuts() -> None:
    # MPT's ALiBi bias [heads, 1, max] cut at [:, max(0, 1 - q):, max(0, max - k):] (the
    # dynamo exporter's sym_max of the sequence length) and added to [B, heads, S, S] scores:
    # the cut axis of size 1 stays 1 (the Slice lowering checks it is not empty), so it
    # broadcasts over the queries.
    bias = ", ".join(["0.5"] * 4 * 16)
    text = (
        f"g (float[B, 4, S, S] scores) => (z) <float[4, 1, 16] alibi = {{{bias}}}> {{"
        " s = Shape(scores)\n two = Constant <value_int = 2> ()\n q = Gather(s, two)\n"
        " one = Constant <value_int = 1> ()\n zero = Constant <value_int = 0> ()\n"
        " sixteen = Constant <value_int = 16> ()\n d1 = Sub(one, q)\n start1 = Max(d1, zero)\n"
        " d2 = Sub(sixteen, q)\n start2 = Max(d2, zero)\n axis = Constant <value_ints = [0]> ()\n"
        " b1 = Unsqueeze(start1, axis)\n b2 = Unsqueeze(start2, axis)\n starts = Concat <axis = 0> (b1, b2)\n"
        " ends = Constant <value_ints = [9223372036854775807, 9223372036854775807]> ()\n"
        " axes = Constant <value_ints = [1, 2]> ()\n cut = Slice(alibi, starts, ends, axes)\n"
        " z = Add(scores, cut) }"
    )
    ops = describe_block(main_block(import_text(OPSET + text)))
    (cut,) = [op for op in ops if op.startswith("onnx.Slice")]
    assert "-> (tensor<4x1x?xf32>)" in cut
    add = next(op for op in ops if op.startswith("niro.add"))
    assert "tensor<4x1x?xf32>" in add


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_dims_of_a_slice_at_run_time_positions_are_the_run_time_sizes(data: st.DataObject) -> None:
    # x [d, d, d] (each d named N or M, or 1 or 3) sliced on some axes (given as constant
    # axes, negative or not, or left out for the leading ones) from 0 to a run-time end read
    # from y's shape: every dim claimed static is the result's size in every valid run.
    dims = data.draw(st.lists(st.sampled_from(["N", "M", 1, 3]), min_size=3, max_size=3))
    count = data.draw(st.integers(1, 3))
    given_axes = data.draw(st.booleans())
    axes = (
        data.draw(st.permutations(range(3)))[:count] if given_axes else list(range(count))
    )
    axes = [axis - 3 if data.draw(st.booleans()) else axis for axis in axes]
    nodes = [
        helper.make_node("Shape", ["y"], ["s"]),
        helper.make_node("Concat", ["s"] * count, ["ends"], axis=0),
        _ints("starts", [0] * count),
        *([_ints("axes", axes)] if given_axes else []),
        helper.make_node("Slice", ["x", "starts", "ends", *(["axes"] if given_axes else [])], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "slice",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, dims),
            helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["E"]),
        ],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    block = main_block(import_verified(model))
    (claimed,) = [value.type.shape for value in next(op for op in block.operations if isinstance(op, nir.Return)).operands]
    cut = {axis % 3 for axis in axes}
    assert [claimed[axis] for axis in range(3) if axis not in cut] == [
        dim if isinstance(dim, int) else None for axis, dim in enumerate(dims) if axis not in cut
    ]
    session = onnxruntime.InferenceSession(model.SerializeToString())
    for sizes in ({"N": 1, "M": 3, "E": 2}, {"N": 3, "M": 1, "E": 5}):
        x = np.zeros([sizes.get(d, d) for d in dims], np.float32)
        (result,) = session.run(None, {"x": x, "y": np.zeros([sizes["E"]], np.float32)})
        for dim, size in zip(claimed, result.shape, strict=True):
            assert dim is None or dim == size, (dims, axes, sizes, claimed)


def test_dims_multiply_and_divide_exactly() -> None:
    b, t = Dim(1, ("b",)), Dim(1, ("t",))
    assert (b * t * Dim(4)).exact_quotient(t * Dim(2)) == Dim(2, ("b",))
    assert (b * Dim(6)).exact_quotient(Dim(4)) is None
    assert b.exact_quotient(t) is None
    assert (b * t).exact_quotient(b * t) == Dim(1)


# -- soundness: every dim claimed static is that size in every run --------------------------------


def _reshape_chain(draw) -> tuple[onnx.ModelProto, int]:
    """x: [B, 2, 3, 2], then 1-3 Reshapes whose targets regroup B and the factors 2, 3, 2
    as PyTorch computes them: B from Shape(x), constants, one -1 or a 0 now and then. Each
    Reshape's result is a graph output. Also returns how many Reshapes there are."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Gather", ["s", "i0"], ["b"]),
    ]
    current, previous_dims, outputs = "x", ["B", 2, 3, 2], []
    for step in range(draw(st.integers(1, 3))):
        atoms = ["B", 2, 3, 2]
        order = draw(st.permutations(range(4)))
        cuts = sorted(draw(st.sets(st.integers(1, 3), max_size=3)))
        groups = [[atoms[i] for i in order[a:b]] for a, b in zip([0, *cuts], [*cuts, 4], strict=True)]
        minus = draw(st.sampled_from([None, *range(len(groups))]))
        pieces = []
        for position, group in enumerate(groups):
            size = math.prod(atom for atom in group if atom != "B")
            name = f"t{step}_{position}"
            if position == minus:
                nodes.append(_ints(name, [-1]))
            elif "B" in group:
                nodes.append(_ints(name + "k", [size]))
                nodes.append(helper.make_node("Mul", ["b", name + "k"], [name]))
            elif position < len(previous_dims) and previous_dims[position] == size and draw(st.booleans()):
                nodes.append(_ints(name, [0]))  # copy the dim from the input
            else:
                nodes.append(_ints(name, [size]))
            pieces.append(name)
        nodes.append(helper.make_node("Concat", pieces, [f"shape{step}"], axis=0))
        output = f"y{step}"
        nodes.append(helper.make_node("Reshape", [current, f"shape{step}"], [output]))
        outputs.append(helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, None))
        current = output
        previous_dims = ["B" if "B" in group else math.prod(group) for group in groups]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", 2, 3, 2])], outputs
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), len(outputs)


def _ints(name: str, values: list[int]) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_dims_claimed_static_are_the_run_time_sizes(data: st.DataObject) -> None:
    model, count = _reshape_chain(data.draw)
    block = main_block(import_verified(model))
    claimed = [value.type.shape for value in next(op for op in block.operations if isinstance(op, nir.Return)).operands]
    session = onnxruntime.InferenceSession(model.SerializeToString())
    for batch in (1, 2, 5):
        results = session.run(None, {"x": np.zeros((batch, 2, 3, 2), np.float32)})
        for shape, result in zip(claimed, results, strict=True):
            assert len(shape) == result.ndim
            for dim, size in zip(shape, result.shape, strict=True):
                assert dim is None or dim == size, (onnx.printer.to_text(model), claimed, batch)
    assert len(claimed) == count


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_broadcast_dims_claimed_static_are_the_run_time_sizes(data: st.DataObject) -> None:
    # a [d, d] + b [d, d] with each d a named dim (N, M: 1 or 3 at run time) or 1 or 3, the
    # sum viewed as [a's rows, -1] (so the -1 divides by a dim of another value): every dim
    # claimed static must be the size in every valid run.
    dim = st.sampled_from(["N", "M", 1, 3])
    a_dims, b_dims = data.draw(st.lists(dim, min_size=2, max_size=2)), data.draw(st.lists(dim, min_size=1, max_size=2))
    nodes = [
        helper.make_node("Add", ["a", "b"], ["z"]),
        helper.make_node("Shape", ["a"], ["s"], end=1),
        _ints("minus", [-1]),
        helper.make_node("Concat", ["s", "minus"], ["shape"], axis=0),
        helper.make_node("Reshape", ["z", "shape"], ["w"]),
    ]
    graph = helper.make_graph(
        nodes,
        "broadcast",
        [
            helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, a_dims),
            helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, b_dims),
        ],
        [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None) for name in ("z", "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    block = main_block(import_verified(model))
    claimed = [value.type.shape for value in next(op for op in block.operations if isinstance(op, nir.Return)).operands]
    session = onnxruntime.InferenceSession(model.SerializeToString())
    for sizes in ({"N": 1, "M": 1}, {"N": 1, "M": 3}, {"N": 3, "M": 1}, {"N": 3, "M": 3}):
        feeds = {
            name: np.zeros([sizes.get(d, d) for d in dims], np.float32) for name, dims in (("a", a_dims), ("b", b_dims))
        }
        try:
            results = session.run(None, feeds)
        except Exception:  # noqa: BLE001 - sizes that do not broadcast: not a valid run
            continue
        for shape, result in zip(claimed, results, strict=True):
            for dim, size in zip(shape, result.shape, strict=True):
                assert dim is None or dim == size, (a_dims, b_dims, sizes, claimed)


def test_an_stft_of_a_dynamic_length_signal_is_typed() -> None:
    # ONNX inference leaves the STFT of a dynamic-length signal untyped, not even ranked;
    # it is [batch, frames, bins, 2], bins = 64 // 2 + 1 from the frame_length (one-sided by
    # default), frames dynamic. TorchScript's torch.stft export feeds a rank-2 signal.
    text = (
        "g (float[B, L] s, float[64] w) => (z) { step = Constant <value_int = 16> ()\n"
        " n = Constant <value_int = 64> ()\n y = STFT(s, step, w, n)\n"
        " z = Transpose <perm = [0, 2, 1, 3]> (y) }"
    )
    assert "-> (tensor<?x?x33x2xf32>)" in _op(text, "onnx.STFT")


def test_a_two_sided_stft_takes_its_bins_from_the_window() -> None:
    text = (
        "g (float[B, L, 2] s, float[10] w) => (y) { step = Constant <value_int = 3> ()\n"
        " y = STFT <onesided = 0> (s, step, w) }"
    )
    assert "-> (tensor<?x?x10x2xf32>)" in _op(text, "onnx.STFT")


def test_an_attribute_of_another_type_than_its_schema_declares_is_left_to_the_verifier() -> None:
    """Found by test_fuzz.py: a Shape whose `start` says FLOAT (its int field still set) crashed
    the symbolic-dims pass with a TypeError. The pass reads a node's attributes only when they
    have the types its schema declares (as folding does); the verifier reports the node."""
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>'
        "g (float[a, 3] x) => (int64[1] y) { [shape] y = Shape <start = 0, end = 1> (x) }"
    )
    model.graph.node[0].attribute[0].type = onnx.AttributeProto.FLOAT
    diagnostics = nir.verify(import_model_with_info(model).module)
    assert [(d.rule, "[node 'shape']" in str(d)) for d in diagnostics] == [("onnx-attribute", True)]
    assert "attribute 'start' must be an int (INT in Shape-15), got float 0.0" in str(diagnostics[0])
