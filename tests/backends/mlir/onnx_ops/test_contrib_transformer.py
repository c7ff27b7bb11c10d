"""onnxruntime's transformer contrib ops (frontends/onnx/contrib_functions.py): one-node models,
imported as calls of their bodies, compiled once with iree-compile (dynamic batch and sequence
dims) and compared with onnxruntime's CPU kernels at several shapes; refusals name the node and
the reason."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from niro.frontends.onnx import OnnxImportError, import_model
from onnx import TensorProto, helper, numpy_helper

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx, from_abi

RNG = np.random.default_rng(23)
F32, U8, I32, I64 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT32, TensorProto.INT64
I8 = TensorProto.INT8
MS = "com.microsoft"


def _model(nodes, inputs, outputs, weights=None) -> onnx.ModelProto:
    """`nodes` on graph `inputs` ((name, element, shape)) and initializers `weights`; the
    `outputs` ((name, element)) declare their element type only, as niroc must type them."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, element, shape) for name, element, shape in inputs],
        [helper.make_tensor_value_info(name, element, None) for name, element in outputs],
        [numpy_helper.from_array(value, name) for name, value in (weights or {}).items()],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def _f(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- MatMulNBits -----------------------------------------------------------------------------------


def _matmul_nbits(bits, block, k, n, zero_points, bias=False, g_idx=False, level=0):
    blocks = -(-k // block)
    packed = RNG.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    weights = {"B": packed, "scales": (RNG.random(n * blocks) * 0.1 + 0.01).astype(np.float32)}
    names = ["A", "B", "scales", "", "", ""]
    if zero_points == "packed":
        weights["zp"] = RNG.integers(0, 256, n * (-(-blocks * bits // 8)), dtype=np.uint8)
        names[3] = "zp"
    elif zero_points == "float":
        weights["zp"] = (RNG.random(n * blocks) * 15).astype(np.float32)
        names[3] = "zp"
    if g_idx:
        weights["g_idx"] = np.sort(RNG.integers(0, blocks, k)).astype(np.int32)
        names[4] = "g_idx"
    if bias:
        weights["bias"] = _f(n)
        names[5] = "bias"
    while names[-1] == "":
        names.pop()
    node = helper.make_node(
        "MatMulNBits", names, ["y"], domain=MS, name="mm",
        K=k, N=n, bits=bits, block_size=block, accuracy_level=level,
    )  # fmt: skip
    return _model([node], [("A", F32, ["b", "s", k])], [("y", F32)], weights)


@pytest.mark.parametrize(
    "bits, block, k, n, zero_points, bias, g_idx",
    [
        (4, 32, 64, 24, None, False, False),
        (4, 16, 40, 8, "packed", True, False),
        (8, 128, 200, 12, "packed", False, False),
        (4, 64, 128, 16, "float", True, False),
        (4, 32, 96, 8, "float", False, True),
        (4, 32, 96, 8, None, True, True),
        (8, 256, 256, 4, None, True, False),
    ],
)
def test_matmul_nbits_matches_onnxruntime(tmp_path, bits, block, k, n, zero_points, bias, g_idx):
    model = _matmul_nbits(bits, block, k, n, zero_points, bias, g_idx)
    module = compile_onnx(model, tmp_path)
    feeds = [{"A": _f(1, 3, k)}, {"A": _f(2, 5, k)}]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "bits, block, k, n, zero_points, bias",
    [
        (4, 32, 1024, 64, None, False),
        (4, 16, 40, 8, "packed", True),
        (4, 32, 1000, 24, "packed", False),
        (4, 128, 256, 16, None, True),
        (8, 32, 256, 12, "packed", False),
        (8, 64, 200, 12, None, True),
    ],
)
def test_matmul_nbits_at_level_4_quantizes_a_as_onnxruntime_does(
    tmp_path, bits, block, k, n, zero_points, bias
):
    """accuracy_level 4 (the builder's CPU default): onnxruntime quantizes A to int8 per block,
    ~1e-1 off the f32 product on these sizes; niroc computes the same quantized product, so it
    matches onnxruntime's run of the model as built to f32 rounding. A zero row (a zero block
    scale) included."""
    model = _matmul_nbits(bits, block, k, n, zero_points, bias, level=4)
    module = compile_onnx(model, tmp_path)
    rows = _f(2, 5, k)
    rows[1, 2] = 0.0
    feeds = [{"A": _f(1, 1, k)}, {"A": rows}]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-5, atol=1e-4)


def test_matmul_nbits_at_level_4_reads_fp16_a_as_onnxruntime_does(tmp_path):
    """An fp16 A (and fp16 scales) at level 4: widened to f32, quantized per block, the f32
    product rounded back to fp16, as onnxruntime's CPU kernel."""
    model = _matmul_nbits(4, 32, 128, 16, None, level=4)
    graph = model.graph
    graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT16
    scales = next(tensor for tensor in graph.initializer if tensor.name == "scales")
    scales.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scales).astype(np.float16), "scales"))
    module = compile_onnx(model, tmp_path)
    feeds = [{"A": _f(1, 1, 128).astype(np.float16)}, {"A": _f(2, 3, 128).astype(np.float16)}]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("zero_points, g_idx", [("float", False), (None, True)])
def test_matmul_nbits_at_level_4_stays_f32_where_onnxruntime_does(tmp_path, zero_points, g_idx):
    """onnxruntime computes level 4 in f32 when the zero points are floats or g_idx is given."""
    model = _matmul_nbits(4, 32, 96, 8, zero_points, g_idx=g_idx, level=4)
    module = compile_onnx(model, tmp_path)
    feeds = [{"A": _f(2, 3, 96)}]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "level, k, zero_points, bias",
    [(0, 64, "packed", False), (1, 64, None, True), (0, 80, None, False)],
    ids=["level0-packed", "level1-bias", "level0-padded-k"],
)
def test_matmul_nbits_below_level_4_reads_int8_weights(tmp_path, level, k, zero_points, bias):
    """Below accuracy_level 4 the f32 product reads B as int8 values (q - zero_point, which
    iree-compile keeps at compile time) widened in its loop, per block, scaled after
    (`_f32_block_product`): no f32 copy of the N x K weights is made, at run time either. One
    row takes the product in tiles of one row, more rows tiles of 8; both match onnxruntime."""
    from niro.backends.mlir import lower_to_mlir

    model = _matmul_nbits(4, 32, k, 32, zero_points, bias, level=level)
    blocks = -(-k // 32)
    text = lower_to_mlir(import_model(model)).to_text(elide_weights=True)
    assert f"tensor<{blocks}x2x32x16x1xi8>" in text and text.count("linalg.batch_mmt4d") == 2
    assert not re.search(rf"tensor<({blocks}x32x32|32x{k}|{k}x32)xf32>", text), text
    module = compile_onnx(model, tmp_path)
    feeds = [{"A": _f(1, 1, k)}, {"A": _f(1, 3, k)}, {"A": _f(2, 5, k)}]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-4, atol=1e-4)


def test_matmul_nbits_keeps_weights_packed():
    """The module holds B as packed bytes: no f32 global of the weight's N x K elements."""
    from niro.backends.mlir import lower_to_mlir

    text = lower_to_mlir(import_model(_matmul_nbits(4, 32, 64, 24, "packed"))).to_text(
        elide_weights=True
    )
    globals_ = re.findall(r"ml_program.global private @(\w+)\(.*?: (tensor<[^>]*>)", text)
    assert ("B", "tensor<24x2x16xi8>") in globals_, globals_
    assert not any("f32" in type_ and "24x64" in type_ for _, type_ in globals_), globals_


# -- GroupQueryAttention -----------------------------------------------------------------------------


def _gqa(packed=False, rotary=True, interleaved=False, bias=False, element=F32, **attributes):
    heads, kv_heads, head = 4, 2, 16
    inputs = [("query", element, ["b", "s", (heads + 2 * kv_heads) * head if packed else heads * head])]
    names = ["query", "", ""]
    if not packed:
        inputs += [
            ("key", element, ["b", "s", kv_heads * head]),
            ("value", element, ["b", "s", kv_heads * head]),
        ]
        names = ["query", "key", "value"]
    inputs += [
        ("past_key", element, ["b", kv_heads, "p", head]),
        ("past_value", element, ["b", kv_heads, "p", head]),
        ("seqlens_k", I32, ["b"]),
        ("total_sequence_length", I32, [1]),
    ]
    names += ["past_key", "past_value", "seqlens_k", "total_sequence_length"]
    weights = {}
    if rotary:
        angles = np.arange(32)[:, None] * (1.0 / 10000 ** (np.arange(0, head, 2) / head))[None, :]
        array_type = helper.tensor_dtype_to_np_dtype(element)
        weights = {"cos": np.cos(angles).astype(array_type), "sin": np.sin(angles).astype(array_type)}
        names += ["cos", "sin"]
    if bias:  # per head, shared by the batch
        inputs.append(("attention_bias", element, [1, heads, "s", "t"]))
        names += [""] * (9 - len(names)) + ["", "attention_bias"]
    node = helper.make_node(
        "GroupQueryAttention",
        names,
        ["out", "present_key", "present_value"],
        domain=MS,
        name="gqa",
        num_heads=heads,
        kv_num_heads=kv_heads,
        do_rotary=int(rotary),
        rotary_interleaved=int(interleaved),
        **attributes,
    )
    outputs = [("out", element), ("present_key", element), ("present_value", element)]
    return _model([node], inputs, outputs, weights), packed


def _gqa_feeds(packed, batch, sequence, past, seqlens, bias=False):
    heads, kv_heads, head = 4, 2, 16
    feeds = {
        "query": _f(batch, sequence, (heads + 2 * kv_heads) * head if packed else heads * head)
    }
    if not packed:
        feeds["key"] = _f(batch, sequence, kv_heads * head)
        feeds["value"] = _f(batch, sequence, kv_heads * head)
    feeds["past_key"] = _f(batch, kv_heads, past, head)
    feeds["past_value"] = _f(batch, kv_heads, past, head)
    feeds["seqlens_k"] = np.array(seqlens, np.int32)
    feeds["total_sequence_length"] = np.array([max(seqlens) + 1], np.int32)
    if bias:
        feeds["attention_bias"] = _f(1, heads, sequence, max(seqlens) + 1)
    return feeds


@pytest.mark.parametrize(
    "packed, rotary, interleaved, bias, attributes",
    [
        (True, True, False, False, {}),
        (False, True, True, False, {"softcap": 5.0, "scale": 0.3}),
        (False, False, False, False, {"local_window_size": 2}),
        (True, True, False, False, {"smooth_softmax": 1}),
        # attention bias added after softcap, before the causal mask (as the CPU kernel)
        (False, True, False, True, {"softcap": 3.0}),
        (True, False, False, False, {"causal": 0}),
    ],
)
def test_group_query_attention_matches_onnxruntime(
    tmp_path, packed, rotary, interleaved, bias, attributes
):
    """A prompt (empty past), decode steps on a past, and a batch whose second row is shorter
    (its new token written right after its own past): output and present KV."""
    model, packed = _gqa(packed, rotary, interleaved, bias, **attributes)
    module = compile_onnx(model, tmp_path)
    feeds = [
        _gqa_feeds(packed, 1, 5, 0, [4], bias),
        _gqa_feeds(packed, 2, 1, 5, [5, 5], bias),
        _gqa_feeds(packed, 2, 1, 6, [6, 3], bias),
        _gqa_feeds(packed, 1, 3, 4, [6], bias),
    ]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-4, atol=1e-5)


def test_group_query_attention_fp16_matches_onnxruntime(tmp_path):
    """fp16 query, KV cache and rotary caches (onnxruntime's CPU kernel has an fp16 version):
    a prompt and a decode step, compared at fp16's tolerance."""
    model, packed = _gqa(True, True, element=TensorProto.FLOAT16)
    module = compile_onnx(model, tmp_path)
    feeds = [
        {name: value.astype(np.float16) if value.dtype == np.float32 else value for name, value in step.items()}
        for step in (_gqa_feeds(packed, 1, 5, 0, [4]), _gqa_feeds(packed, 2, 1, 5, [5, 3]))
    ]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-2, atol=1e-2)


def test_group_query_attention_windowed_cache_matches_onnxruntime(tmp_path):
    """sliding_window_cache (Gemma 2's local layers): window 4 in a cache of capacity 6, so
    eviction frees 3 rows at once. A prompt longer than the window, decode steps past several
    evictions, a multi-token step, a batch at different lengths: the output and the resident
    rows of the present KV (onnxruntime leaves the others unspecified)."""
    window, capacity = 4, 6
    model, _ = _gqa(False, True, False, local_window_size=window, sliding_window_cache=1)
    module = compile_onnx(model, tmp_path)

    def resident(total):
        if total <= capacity:
            return total
        freed = capacity - window + 1
        return total - freed * -(-(total - capacity) // freed)

    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    steps = [(1, 5, [4]), (1, 1, [5]), (1, 1, [6]), (1, 1, [8]), (1, 3, [11]), (2, 1, [9, 12])]
    for batch, sequence, seqlens in steps:
        feeds = _gqa_feeds(False, batch, sequence, capacity, seqlens)
        expected = session.run(None, feeds)
        got = [
            from_abi(value, wanted)
            for value, wanted in zip(call(module, "g", *feeds.values()), expected, strict=True)
        ]
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)
        for row, total in enumerate(length + 1 for length in seqlens):
            rows = slice(0, resident(total))
            for index in (1, 2):
                np.testing.assert_allclose(
                    got[index][row, :, rows], expected[index][row, :, rows], rtol=1e-6, atol=1e-6
                )
            assert not got[1][row, :, resident(total) :].any()


@pytest.mark.parametrize(
    "attributes, reason",
    [
        ({"qk_output": 1}, "supports qk_output=0 only"),
        (
            {"sliding_window_cache": 1},
            "needs local_window_size > 0 and past_key / past_value (the cache's capacity) "
            "with sliding_window_cache",
        ),
        (
            {"causal": 0, "local_window_size": 4},
            "needs causal 0 or 1, and local_window_size -1 when causal is 0; got 0, 4",
        ),
        ({"num_heads": 3}, "needs num_heads a positive multiple of kv_num_heads, got 3, 2"),
    ],
)
def test_group_query_attention_refusals(attributes, reason):
    model, _ = _gqa()
    (node,) = model.graph.node
    kept = [attribute for attribute in node.attribute if attribute.name not in attributes]
    del node.attribute[:]
    node.attribute.extend(kept)
    node.attribute.extend(helper.make_attribute(name, value) for name, value in attributes.items())
    with pytest.raises(
        OnnxImportError,
        match=re.escape(f"'gqa' (com.microsoft.GroupQueryAttention): cannot be compiled: {reason}"),
    ):
        import_model(model)


def test_matmul_nbits_refusals():
    model = _matmul_nbits(4, 32, 64, 8, None)
    (node,) = model.graph.node
    next(a for a in node.attribute if a.name == "bits").i = 2
    with pytest.raises(
        OnnxImportError,
        match=re.escape(
            "'mm' (com.microsoft.MatMulNBits): cannot be compiled: supports bits=4 or 8, got 2"
        ),
    ):
        import_model(model)
    with pytest.raises(
        OnnxImportError, match="does not implement g_idx with packed uint8 zero_points"
    ):
        import_model(_matmul_nbits(4, 32, 96, 8, "packed", False, True))


# -- RotaryEmbedding, normalizations, activations ----------------------------------------------------


@pytest.mark.parametrize(
    "rank, interleaved, element",
    [(3, False, np.float32), (4, True, np.float32), (3, False, np.float16), (4, False, np.float16)],
)
def test_rotary_embedding_matches_onnxruntime(tmp_path, rank, interleaved, element):
    """fp32, and fp16 as onnxruntime-genai's fp16 CPU models use it (input and caches fp16:
    the kernel widens both and rounds the result once)."""
    heads, head = 2, 8
    angles = np.arange(16)[:, None] * (1.0 / 10000 ** (np.arange(0, head, 2) / head))[None, :]
    weights = {"cos": np.cos(angles).astype(element), "sin": np.sin(angles).astype(element)}
    shape = ["b", "s", heads * head] if rank == 3 else ["b", heads, "s", head]
    positions = ["b", "s"] if rank == 3 else [1]
    node = helper.make_node(
        "RotaryEmbedding",
        ["x", "pos", "cos", "sin"],
        ["y"],
        domain=MS,
        interleaved=int(interleaved),
        **({"num_heads": heads} if rank == 3 else {}),
    )
    onnx_element = helper.np_dtype_to_tensor_dtype(np.dtype(element))
    model = _model(
        [node], [("x", onnx_element, shape), ("pos", I64, positions)], [("y", onnx_element)], weights
    )
    module = compile_onnx(model, tmp_path)

    def feeds(batch, sequence):
        x = _f(batch, sequence, heads * head) if rank == 3 else _f(batch, heads, sequence, head)
        pos = RNG.integers(0, 16, (batch, sequence)) if rank == 3 else np.array([3])
        return {"x": x.astype(element), "pos": pos.astype(np.int64)}

    tolerance = 1e-5 if element == np.float32 else 1e-3
    assert_matches_onnxruntime(
        module, model, [feeds(1, 4), feeds(2, 7)], function="g", rtol=tolerance, atol=tolerance
    )


def test_normalizations_match_onnxruntime(tmp_path):
    """SimplifiedLayerNormalization (default domain), SkipSimplifiedLayerNormalization and
    SkipLayerNormalization with their optional outputs."""
    nodes = [
        helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y0"], epsilon=1e-5, axis=-1),
        helper.make_node(
            "SkipSimplifiedLayerNormalization",
            ["y0", "skip", "g"],
            ["y1", "", "inv1", "sum1"],
            domain=MS,
            epsilon=1e-6,
        ),
        helper.make_node(
            "SkipLayerNormalization",
            ["y1", "skip", "g", "beta", "bias"],
            ["y2", "mean2", "inv2", "sum2"],
            domain=MS,
            epsilon=1e-5,
        ),
    ]
    weights = {"g": _f(16), "beta": _f(16), "bias": _f(16)}
    inputs = [("x", F32, ["b", "s", 16]), ("skip", F32, ["b", "s", 16])]
    outputs = [(name, F32) for name in ("y0", "y1", "inv1", "sum1", "y2", "mean2", "inv2", "sum2")]
    model = _model(nodes, inputs, outputs, weights)
    module = compile_onnx(model, tmp_path)
    feeds = [{"x": _f(1, 3, 16), "skip": _f(1, 3, 16)}, {"x": _f(2, 5, 16), "skip": _f(2, 5, 16)}]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-4, atol=1e-5)


def test_activations_match_onnxruntime(tmp_path):
    """FastGelu with bias, BiasGelu, Gelu and QuickGelu in one chain."""
    nodes = [
        helper.make_node("FastGelu", ["x", "bias"], ["a"], domain=MS),
        helper.make_node("BiasGelu", ["a", "bias"], ["b"], domain=MS),
        helper.make_node("Gelu", ["b"], ["c"], domain=MS),
        helper.make_node("QuickGelu", ["c"], ["d"], domain=MS, alpha=1.5),
    ]
    model = _model(
        nodes,
        [("x", F32, ["b", "s", 32])],
        [(name, F32) for name in "abcd"],
        {"bias": _f(32)},
    )
    module = compile_onnx(model, tmp_path)
    feeds = [{"x": _f(1, 2, 32) * 3}, {"x": _f(2, 4, 32) * 3}]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-4, atol=1e-5)


def test_bias_add_matches_its_definition(tmp_path):
    """BiasAdd (X + bias + skip; onnxruntime has it on CUDA only, so numpy is the reference)."""
    node = helper.make_node("BiasAdd", ["x", "bias", "skip"], ["y"], domain=MS)
    inputs = [("x", F32, ["b", "s", 32]), ("skip", F32, ["b", "s", 32])]
    model = _model([node], inputs, [("y", F32)], {"bias": _f(32)})
    bias = numpy_helper.to_array(model.graph.initializer[0])
    module = compile_onnx(model, tmp_path)

    def reference(feeds):
        return [feeds["x"] + bias + feeds["skip"]]

    feeds = [{"x": _f(1, 2, 32), "skip": _f(1, 2, 32)}, {"x": _f(3, 5, 32), "skip": _f(3, 5, 32)}]
    assert_matches_onnxruntime(module, reference, feeds, function="g", rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mask, unidirectional, past", [(2, 1, True), (1, 0, False), (3, 0, False)])
def test_attention_matches_onnxruntime(tmp_path, mask, unidirectional, past):
    """com.microsoft.Attention: a 2-D 0/1 mask over past + new keys with a causal mask and a
    past [2, B, N, P, H] (GPT-2's form, present returned), 1-D end positions (BERT's), 3-D."""
    heads, head, hidden = 2, 8, 16
    names = ["x", "w", "bias", "mask", "past" if past else ""]
    outputs = ["y", "present"] if past else ["y"]
    node = helper.make_node(
        "Attention", names, outputs, domain=MS, num_heads=heads, unidirectional=unidirectional
    )
    mask_shapes = {1: ["b"], 2: ["b", "t"], 3: ["b", "s", "s"]}
    inputs = [("x", F32, ["b", "s", hidden]), ("mask", I32, mask_shapes[mask])]
    if past:
        inputs.append(("past", F32, [2, "b", heads, "p", head]))
    weights = {"w": _f(hidden, 3 * hidden) * 0.5, "bias": _f(3 * hidden)}
    model = _model([node], inputs, [(name, F32) for name in outputs], weights)
    module = compile_onnx(model, tmp_path)

    def feeds(batch, sequence, past_length):
        total = sequence + past_length
        given = {"x": _f(batch, sequence, hidden)}
        if mask == 1:
            given["mask"] = RNG.integers(1, sequence + 1, batch).astype(np.int32)
        elif mask == 2:
            given["mask"] = (RNG.random((batch, total)) > 0.3).astype(np.int32)
            given["mask"][:, 0] = 1
        else:
            given["mask"] = (RNG.random((batch, sequence, sequence)) > 0.3).astype(np.int32)
            given["mask"][:, :, 0] = 1
        if past:
            given["past"] = _f(2, batch, heads, past_length, head)
        return given

    cases = [
        feeds(1, 4, 3 if past else 0),
        feeds(2, 1, 5 if past else 0),
        feeds(2, 3, 2 if past else 0),
    ]
    assert_matches_onnxruntime(module, model, cases, function="g", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "weight_type, per_column, zero_points, past",
    [(U8, False, True, False), (I8, True, True, True), (I8, True, False, False)],
)
def test_quantized_attention_matches_onnxruntime(
    tmp_path, weight_type, per_column, zero_points, past
):
    """com.microsoft.QAttention, as onnxruntime's quantize_dynamic writes it for a fused BERT:
    uint8 input (a DynamicQuantizeLinear's), 8-bit weights per tensor or per column, a 1-D
    mask of end positions, a past."""
    heads, head, hidden = 2, 8, 16
    weight_dtype = helper.tensor_dtype_to_np_dtype(weight_type)
    low, high = (0, 255) if weight_type == U8 else (-127, 127)
    columns = 3 * hidden if per_column else 1
    weights = {
        "w": RNG.integers(low, high, (hidden, 3 * hidden)).astype(weight_dtype),
        "bias": _f(3 * hidden),
        "input_scale": np.array(0.02, np.float32),
        "weight_scale": RNG.uniform(0.002, 0.01, columns).astype(np.float32),
    }
    if not per_column:
        weights["weight_scale"] = weights["weight_scale"].reshape(())
    names = ["x", "w", "bias", "input_scale", "weight_scale", "mask"]
    if zero_points:
        weights["input_zero_point"] = np.array(120, np.uint8)
        zero = RNG.integers(low, high, columns).astype(weight_dtype)
        weights["weight_zero_point"] = zero if per_column else zero.reshape(())
        names += ["input_zero_point", "weight_zero_point"]
    if past:
        names += [""] * (8 - len(names)) + ["past"]
    outputs = ["y", "present"] if past else ["y"]
    node = helper.make_node("QAttention", names, outputs, domain=MS, num_heads=heads)
    inputs = [("x", U8, ["b", "s", hidden]), ("mask", I32, ["b"])]
    if past:
        inputs.append(("past", F32, [2, "b", heads, "p", head]))
    model = _model([node], inputs, [(name, F32) for name in outputs], weights)
    module = compile_onnx(model, tmp_path)

    def feeds(batch, sequence, past_length):
        given = {
            "x": RNG.integers(0, 256, (batch, sequence, hidden)).astype(np.uint8),
            "mask": RNG.integers(1, sequence + past_length + 1, batch).astype(np.int32),
        }
        if past:
            given["past"] = _f(2, batch, heads, past_length, head)
        return given

    cases = [feeds(1, 4, 2 if past else 0), feeds(2, 3, 1 if past else 0)]
    assert_matches_onnxruntime(module, model, cases, function="g", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("past", [False, True])
def test_multi_head_attention_matches_onnxruntime(tmp_path, past):
    """com.microsoft.MultiHeadAttention: separate Q/K/V with bias, a [B, T] key padding mask,
    an attention bias; with past_key / past_value, the present KV returned."""
    heads, head, hidden = 2, 8, 16
    names = ["q", "k", "v", "bias", "mask", "attention_bias"] + (
        ["past_key", "past_value"] if past else []
    )
    outputs = ["y", "present_key", "present_value"] if past else ["y"]
    node = helper.make_node("MultiHeadAttention", names, outputs, domain=MS, num_heads=heads)
    inputs = [(name, F32, ["b", "s" if name == "q" else "l", hidden]) for name in "qkv"]
    inputs += [("mask", I32, ["b", "t"]), ("attention_bias", F32, [1, heads, "s", "t"])]
    if past:
        inputs += [(name, F32, ["b", heads, "p", head]) for name in ("past_key", "past_value")]
    model = _model([node], inputs, [(name, F32) for name in outputs], {"bias": _f(3 * hidden)})
    module = compile_onnx(model, tmp_path)

    def feeds(batch, sequence, kv_length, past_length):
        total = kv_length + past_length
        given = {
            "q": _f(batch, sequence, hidden),
            "k": _f(batch, kv_length, hidden),
            "v": _f(batch, kv_length, hidden),
        }
        given["mask"] = (RNG.random((batch, total)) > 0.3).astype(np.int32)
        given["mask"][:, 0] = 1
        given["attention_bias"] = _f(1, heads, sequence, total)
        if past:
            given["past_key"], given["past_value"] = (
                _f(batch, heads, past_length, head),
                _f(batch, heads, past_length, head),
            )
        return given

    cases = [feeds(1, 4, 4, 2 if past else 0), feeds(2, 1, 1 if past else 6, 5 if past else 0)]
    assert_matches_onnxruntime(module, model, cases, function="g", rtol=1e-4, atol=1e-5)


# -- GatherBlockQuantized ----------------------------------------------------------------------------


def _gather_block_quantized(element, shape, zero_points, bits=4, block=32, **axes):
    """A table of `shape` values ([rows, packed bytes] for uint8) gathered by graph input
    `ids`, scales of one entry a block along quantize_axis, zero points of `element` (packed
    along the last axis for uint8) or absent."""
    quantize_axis = axes.get("quantize_axis", 1)
    values = (8 // bits) if element == "uint8" else 1
    scale_shape = list(shape)
    scale_shape[quantize_axis] = -(-shape[quantize_axis] * values // block)
    weights = {"scales": (RNG.random(scale_shape) * 0.1 + 0.01).astype(np.float32)}
    if element == "uint8":
        weights["data"] = RNG.integers(0, 256, shape, dtype=np.uint8)
        zero_shape = scale_shape[:-1] + [-(-scale_shape[-1] * bits // 8)]
        zeros = RNG.integers(0, 256, zero_shape, dtype=np.uint8)
    else:
        dtype = ml_dtypes.int4 if element == "int4" else ml_dtypes.uint4
        low, high = (-8, 8) if element == "int4" else (0, 16)
        weights["data"] = RNG.integers(low, high, shape).astype(dtype)
        zeros = RNG.integers(low, high, scale_shape).astype(dtype)
    names = ["data", "ids", "scales"]
    if zero_points:
        weights["zero_points"] = zeros
        names.append("zero_points")
    node = helper.make_node(
        "GatherBlockQuantized",
        names,
        ["y"],
        domain=MS,
        name="gbq",
        bits=bits,
        block_size=block,
        **axes,
    )
    return _model([node], [("ids", I64, ["b", "s"])], [("y", F32)], weights)


@pytest.mark.parametrize(
    "element, shape, zero_points, bits, block, axes",
    [
        # the model builder's tied embeddings: uint8 rows of packed 4-bit values
        ("uint8", [20, 40], False, 4, 32, {"gather_axis": 0, "quantize_axis": 1}),
        ("uint8", [20, 40], True, 4, 16, {}),
        ("uint8", [12, 48], True, 8, 32, {}),
        ("uint8", [12, 20], True, 2, 16, {}),
        # onnxruntime's quantizer (op_types_to_quantize Gather): int4 / uint4 tables
        ("int4", [20, 48], False, 4, 16, {}),
        ("uint4", [20, 48], True, 4, 32, {}),
        ("uint4", [40, 20], True, 4, 16, {"gather_axis": 1, "quantize_axis": 0}),
        ("int4", [3, 40, 6], True, 4, 16, {"gather_axis": 1, "quantize_axis": 1}),
    ],
)
def test_gather_block_quantized_matches_onnxruntime(
    tmp_path, element, shape, zero_points, bits, block, axes
):
    """Indices negative and out of range (a row of zeros, as onnxruntime's kernel gives) too."""
    model = _gather_block_quantized(element, shape, zero_points, bits, block, **axes)
    module = compile_onnx(model, tmp_path)
    rows = shape[axes.get("gather_axis", 0)]
    feeds = [
        {"ids": np.array([[0, rows - 1, -1, -rows]], np.int64)},
        {"ids": RNG.integers(-rows - 2, rows + 2, (2, 5)).astype(np.int64)},
    ]
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=1e-6, atol=1e-6)


def test_gather_block_quantized_keeps_the_table_packed():
    """The module holds the uint8 table as its packed bytes: no f32 copy of the table."""
    from niro.backends.mlir import lower_to_mlir

    model = _gather_block_quantized("uint8", [20, 40], True, 4, 16)
    text = lower_to_mlir(import_model(model)).to_text(elide_weights=True)
    globals_ = re.findall(r"ml_program.global private @(\w+)\(.*?: (tensor<[^>]*>)", text)
    assert ("data", "tensor<20x40xi8>") in globals_, globals_
    assert not any("f32" in type_ and "20x80" in type_ for _, type_ in globals_), globals_


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"bits": 3}, "supports bits=2, 4 or 8 for uint8 data, got 3"),
        ({"block_size": 24}, "needs a block_size that is a power of 2 >= 16, got 24"),
        (
            {"gather_axis": 1, "quantize_axis": 0},
            "needs gather_axis 0 and quantize_axis the last axis for uint8 data, got 1 and 0",
        ),
    ],
)
def test_gather_block_quantized_refusals(change, reason):
    model = _gather_block_quantized("uint8", [20, 40], False, 4, 32)
    (node,) = model.graph.node
    kept = [attribute for attribute in node.attribute if attribute.name not in change]
    del node.attribute[:]
    node.attribute.extend(kept)
    node.attribute.extend(helper.make_attribute(name, value) for name, value in change.items())
    with pytest.raises(
        OnnxImportError,
        match=re.escape(
            f"'gbq' (com.microsoft.GatherBlockQuantized): cannot be compiled: {reason}"
        ),
    ):
        import_model(model)


@pytest.mark.parametrize("segments, positions", [(True, False), (False, True)])
def test_embed_layer_normalization_matches_onnxruntime(tmp_path, segments, positions):
    """Word + position (+ segment) embeddings normalized, with both optional outputs: the
    mask's count of ones per row (mask_index) and the sum before normalizing."""
    hidden = 16
    names = [
        "ids",
        "segment_ids" if segments else "",
        "word",
        "position",
        "segment" if segments else "",
        "gamma",
        "beta",
        "mask",
        "position_ids" if positions else "",
    ]
    while not names[-1]:
        names.pop()
    node = helper.make_node(
        "EmbedLayerNormalization", names, ["y", "mask_index", "sum"], domain=MS, epsilon=1e-5
    )
    weights = {"word": _f(30, hidden), "position": _f(12, hidden)}
    weights |= {"gamma": _f(hidden), "beta": _f(hidden)}
    inputs = [("ids", I32, ["b", "s"]), ("mask", I32, ["b", "s"])]
    if segments:
        weights["segment"] = _f(2, hidden)
        inputs.append(("segment_ids", I32, ["b", "s"]))
    if positions:
        inputs.append(("position_ids", I32, ["b", "s"]))
    outputs = [("y", F32), ("mask_index", I32), ("sum", F32)]
    model = _model([node], inputs, outputs, weights)
    module = compile_onnx(model, tmp_path)

    def feeds(batch, sequence):
        given = {
            "ids": RNG.integers(0, 30, (batch, sequence)).astype(np.int32),
            "mask": (RNG.random((batch, sequence)) > 0.3).astype(np.int32),
            "segment_ids": RNG.integers(0, 2, (batch, sequence)).astype(np.int32),
            "position_ids": RNG.integers(0, 12, (batch, sequence)).astype(np.int32),
        }
        return {name: given[name] for name, _, _ in inputs}

    assert_matches_onnxruntime(
        module, model, [feeds(1, 4), feeds(3, 7)], function="g", rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("element, segments, mask", [(U8, True, True), (I8, False, False)])
def test_quantized_embed_layer_normalization_matches_onnxruntime(
    tmp_path, element, segments, mask
):
    """com.microsoft.QEmbedLayerNormalization, as onnxruntime's quantize_dynamic writes it for
    a fused BERT: 8-bit word, position (and segment) tables, gamma and beta, each with a scalar
    scale and zero point; mask_index counts the mask's ones (zeros without a mask)."""
    hidden = 16
    dtype = helper.tensor_dtype_to_np_dtype(element)
    low, high = (0, 256) if element == U8 else (-128, 128)
    tables = {"word_embedding": (30, hidden), "position_embedding": (12, hidden)}
    if segments:
        tables["segment_embedding"] = (2, hidden)
    tables |= {"gamma": (hidden,), "beta": (hidden,)}
    weights = {}
    for name, shape in tables.items():
        weights[f"{name}_quant"] = RNG.integers(low, high, shape).astype(dtype)
        weights[f"{name}_scale"] = np.array(RNG.uniform(0.01, 0.05), np.float32)
        weights[f"{name}_zero_point"] = np.array(RNG.integers(low, high), dtype)

    order = ("word_embedding", "position_embedding", "segment_embedding", "gamma", "beta")

    def present(name: str) -> str:
        return name if name in weights else ""

    names = ["ids", "segment_ids" if segments else ""]
    names += [present(f"{name}_quant") for name in order] + ["mask" if mask else ""]
    for suffix in ("scale", "zero_point"):
        names += [present(f"{name}_{suffix}") for name in order]
    node = helper.make_node(
        "QEmbedLayerNormalization", names, ["y", "mask_index"], domain=MS, epsilon=1e-5
    )
    inputs = [("ids", I32, ["b", "s"])]
    if segments:
        inputs.append(("segment_ids", I32, ["b", "s"]))
    if mask:
        inputs.append(("mask", I32, ["b", "s"]))
    model = _model([node], inputs, [("y", F32), ("mask_index", I32)], weights)
    module = compile_onnx(model, tmp_path)

    def feeds(batch, sequence):
        given = {
            "ids": RNG.integers(0, 30, (batch, sequence)).astype(np.int32),
            "segment_ids": RNG.integers(0, 2, (batch, sequence)).astype(np.int32),
            "mask": RNG.integers(0, 3, (batch, sequence)).astype(np.int32),  # a 2 is not counted
        }
        return {name: given[name] for name, _, _ in inputs}

    assert_matches_onnxruntime(
        module, model, [feeds(1, 4), feeds(3, 7)], function="g", rtol=1e-4, atol=1e-5
    )
