"""Generates the benchmark models (with fixed seeds) into testdata/generated/bench/.

    .venv/bin/python testdata/bench/generate.py [--only NAME ...] [--force]

| name | what | bound by |
| --- | --- | --- |
| `mlp_external` | 16 x (MatMul 4096x4096 + Add bias), 1.0 GiB of float32 weights in `weights.bin` | weights |
| `mlp_inline` | 25 x (MatMul 2048x2048 + Add bias), ~400 MiB of float32 weights inline (raw_data) | weights |
| `transformer` | 12-layer encoder, d=384, 6 heads, seq 128, vocab 8192: ~100 MiB, ~600 nodes | both |
| `bert` | BERT-style encoder as exporters write it: 4 layers, d=256, 4 heads, batch 1 x seq 128, 4-D attention with an additive mask from the ids, LayerNormalization, Erf Gelu | run time |
| `llama` | Llama-style decoder: 4 layers, d=256, 4 heads, batch 1 x seq 128, RMSNorm, rotary embeddings, causal mask, SiLU-gated MLP, tied-free LM head | run time |
| `llama_step` | the Llama-style decoder at one token (batch 1 x seq 1), d=512, 8 heads, MLP 1376, vocab 8192: matrix-vector products | run time |
| `mlp_rows` | 4 x (MatMul 1024x4096, Relu, MatMul 4096x1024, Add) on [rows, 1024], rows a run-time dim | run time |
| `scan_long` | one Scan over [seq, 256] (seq a run-time dim): a running sum as its state, a row per step (the sum times the step's input) stacked as its scan output | run time |
| `loop_long` | one Loop over the rows of [rows, 256] (a run-time trip count): a running sum carried, a row per iteration stacked as its scan output | run time |
| `small_nodes` | 20,000 nodes (Add, Mul, MatMul, Transpose, Relu) on 8x8 f32, ~6,500 initializers | nodes |
| `one_node` | one Add of two 2x2 inputs | start-up |
| `mlp_huge` | 17 x (MatMul 8192x8192 + Add bias), 4.25 GiB of float32 weights in `weights.bin` (only on request: `--only mlp_huge`) | weights past 4 GiB |

Weights are random normal numbers (never splats, which niroc would print as one literal), so the
output holds every byte of them. A model is generated only when its folder lacks it (or with
`--force`); the 1 GiB weights are written layer by layer, so the generator never holds them.
The output folder is gitignored: nothing here is committed but this script.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "testdata" / "generated" / "bench"
OPSET = [helper.make_opsetid("", 17)]
F32 = TensorProto.FLOAT

__all__ = ["MODELS", "ON_REQUEST", "OUT", "model_path", "generate"]


def _random(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 0.02) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)


def _save(model: onnx.ModelProto, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)


# -- MLPs --------------------------------------------------------------------------------------


def _mlp_nodes(layers: int, side: int) -> tuple[list, onnx.ValueInfoProto, onnx.ValueInfoProto]:
    nodes, previous = [], "x"
    for layer in range(layers):
        nodes.append(helper.make_node("MatMul", [previous, f"fc{layer}.weight"], [f"mm{layer}"], name=f"fc{layer}_matmul"))
        nodes.append(helper.make_node("Add", [f"mm{layer}", f"fc{layer}.bias"], [f"h{layer}"], name=f"fc{layer}_add"))
        previous = f"h{layer}"
    x = helper.make_tensor_value_info("x", F32, [1, side])
    y = helper.make_tensor_value_info(previous, F32, [1, side])
    return nodes, x, y


def _write_external_mlp(folder: Path, name: str, layers: int, side: int, seed: int) -> None:
    """`layers` MatMul+Add layers of side x side f32 in one side file, written layer by layer (the
    generator holds one layer at a time, whatever the total)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    initializers, offset = [], 0
    with open(folder / "weights.bin", "wb") as handle:
        for layer in range(layers):
            for tensor_name, shape in ((f"fc{layer}.weight", (side, side)), (f"fc{layer}.bias", (side,))):
                data = _random(rng, shape)
                data.tofile(handle)
                tensor = TensorProto(name=tensor_name, data_type=F32, dims=list(shape))
                tensor.data_location = TensorProto.EXTERNAL
                for key, value in (("location", "weights.bin"), ("offset", offset), ("length", data.nbytes)):
                    tensor.external_data.add(key=key, value=str(value))
                initializers.append(tensor)
                offset += data.nbytes
    nodes, x, y = _mlp_nodes(layers, side)
    graph = helper.make_graph(nodes, name, [x], [y], initializers)
    _save(helper.make_model(graph, opset_imports=OPSET), folder / "model.onnx")


def mlp_external(folder: Path) -> None:
    """16 layers of 4096x4096 f32 (64 MiB each) in one side file."""
    _write_external_mlp(folder, "mlp_external", layers=16, side=4096, seed=7001)


def mlp_huge(folder: Path) -> None:
    """17 layers of 8192x8192 f32 (256 MiB each, 4.25 GiB): offsets and sizes past 32 bits."""
    _write_external_mlp(folder, "mlp_huge", layers=17, side=8192, seed=7003)


def mlp_inline(folder: Path) -> None:
    """25 layers of 2048x2048 f32 (16 MiB each, ~400 MiB) as raw_data in the model file."""
    layers, side = 25, 2048
    rng = np.random.default_rng(7002)
    initializers = []
    for layer in range(layers):
        initializers.append(numpy_helper.from_array(_random(rng, (side, side)), f"fc{layer}.weight"))
        initializers.append(numpy_helper.from_array(_random(rng, (side,)), f"fc{layer}.bias"))
    nodes, x, y = _mlp_nodes(layers, side)
    graph = helper.make_graph(nodes, "mlp_inline", [x], [y], initializers)
    _save(helper.make_model(graph, opset_imports=OPSET), folder / "model.onnx")


# -- transformer encoder -----------------------------------------------------------------------


class _GraphBuilder:
    """Nodes and initializers with generated names; `op` returns the output name."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.count = 0

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.02) -> str:
        return self.const(name, _random(self.rng, shape, scale))

    def op(self, op_type: str, inputs: list[str], prefix: str, **attributes) -> str:
        self.count += 1
        output = f"{prefix}.{op_type.lower()}{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output


def _layer_norm(graph: _GraphBuilder, x: str, prefix: str, d: int, eps: str, two: str) -> str:
    """LayerNorm decomposed as exporters write it: (x - mean) / sqrt(var + eps) * g + b."""
    mean = graph.op("ReduceMean", [x], prefix, axes=[-1], keepdims=1)
    centered = graph.op("Sub", [x, mean], prefix)
    squared = graph.op("Pow", [centered, two], prefix)
    variance = graph.op("ReduceMean", [squared], prefix, axes=[-1], keepdims=1)
    shifted = graph.op("Add", [variance, eps], prefix)
    deviation = graph.op("Sqrt", [shifted], prefix)
    normed = graph.op("Div", [centered, deviation], prefix)
    scaled = graph.op("Mul", [normed, graph.const(f"{prefix}.gamma", np.ones(d, np.float32) + _random(graph.rng, (d,)))], prefix)
    return graph.op("Add", [scaled, graph.weight(f"{prefix}.beta", (d,))], prefix)


def _linear(graph: _GraphBuilder, x: str, prefix: str, rows: int, cols: int) -> str:
    product = graph.op("MatMul", [x, graph.weight(f"{prefix}.weight", (rows, cols))], prefix)
    return graph.op("Add", [product, graph.weight(f"{prefix}.bias", (cols,))], prefix)


def transformer(folder: Path) -> None:
    """A BERT-like encoder: Gather embeddings, 12 x (LN, attention, LN, Erf-Gelu FFN)."""
    layers, d, heads, seq, vocab = 12, 384, 6, 128, 8192
    head = d // heads
    graph = _GraphBuilder(np.random.default_rng(7003))
    eps = graph.const("eps", np.array(1e-5, np.float32))
    two = graph.const("two", np.array(2.0, np.float32))
    one = graph.const("one", np.array(1.0, np.float32))
    half = graph.const("half", np.array(0.5, np.float32))
    sqrt2 = graph.const("sqrt2", np.array(np.sqrt(2.0), np.float32))
    scale = graph.const("attention_scale", np.array(1.0 / np.sqrt(head), np.float32))
    split = graph.const("split_heads", np.array([seq, heads, head], np.int64))
    merge = graph.const("merge_heads", np.array([seq, d], np.int64))
    embedded = graph.op("Gather", [graph.weight("embedding", (vocab, d)), "ids"], "embed", axis=0)
    hidden = graph.op("Add", [embedded, graph.weight("position", (seq, d))], "embed")
    for layer in range(layers):
        prefix = f"layer{layer}"
        normed = _layer_norm(graph, hidden, f"{prefix}.ln1", d, eps, two)
        q, k, v = (_linear(graph, normed, f"{prefix}.{name}", d, d) for name in "qkv")
        q_heads = graph.op("Transpose", [graph.op("Reshape", [q, split], prefix)], prefix, perm=[1, 0, 2])
        k_heads = graph.op("Transpose", [graph.op("Reshape", [k, split], prefix)], prefix, perm=[1, 2, 0])
        v_heads = graph.op("Transpose", [graph.op("Reshape", [v, split], prefix)], prefix, perm=[1, 0, 2])
        scores = graph.op("Mul", [graph.op("MatMul", [q_heads, k_heads], prefix), scale], prefix)
        weights = graph.op("Softmax", [scores], prefix, axis=-1)
        context = graph.op("MatMul", [weights, v_heads], prefix)
        merged = graph.op("Reshape", [graph.op("Transpose", [context], prefix, perm=[1, 0, 2]), merge], prefix)
        hidden = graph.op("Add", [hidden, _linear(graph, merged, f"{prefix}.out", d, d)], prefix)
        normed = _layer_norm(graph, hidden, f"{prefix}.ln2", d, eps, two)
        up = _linear(graph, normed, f"{prefix}.ffn_up", d, 4 * d)
        erf = graph.op("Erf", [graph.op("Div", [up, sqrt2], prefix)], prefix)
        gelu = graph.op("Mul", [graph.op("Mul", [up, graph.op("Add", [erf, one], prefix)], prefix), half], prefix)
        hidden = graph.op("Add", [hidden, _linear(graph, gelu, f"{prefix}.ffn_down", 4 * d, d)], prefix)
    output = _layer_norm(graph, hidden, "final_ln", d, eps, two)
    model = helper.make_graph(
        graph.nodes, "transformer",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [seq])],
        [helper.make_tensor_value_info(output, F32, [seq, d])],
        graph.initializers,
    )
    _save(helper.make_model(model, opset_imports=OPSET), folder / "model.onnx")


def _attention_4d(graph: _GraphBuilder, q: str, k: str, v: str, prefix: str, shapes: dict, mask: str, rope=None) -> str:
    """Multi-head attention on [1, seq, d] as exporters write it: Reshape to [1, seq, heads,
    head], Transpose to [1, heads, seq, head] (K to [1, heads, head, seq]), scores / sqrt(head)
    + mask, Softmax, x V, back to [1, seq, d]. `rope` rotates Q and K ([1, heads, seq, head])."""
    q_heads = graph.op("Transpose", [graph.op("Reshape", [q, shapes["split"]], prefix)], prefix, perm=[0, 2, 1, 3])
    k_heads = graph.op("Transpose", [graph.op("Reshape", [k, shapes["split"]], prefix)], prefix, perm=[0, 2, 1, 3])
    v_heads = graph.op("Transpose", [graph.op("Reshape", [v, shapes["split"]], prefix)], prefix, perm=[0, 2, 1, 3])
    if rope is not None:
        q_heads, k_heads = rope(q_heads), rope(k_heads)
    k_t = graph.op("Transpose", [k_heads], prefix, perm=[0, 1, 3, 2])
    scores = graph.op("Div", [graph.op("MatMul", [q_heads, k_t], prefix), shapes["scale"]], prefix)
    weights = graph.op("Softmax", [graph.op("Add", [scores, mask], prefix)], prefix, axis=-1)
    context = graph.op("Transpose", [graph.op("MatMul", [weights, v_heads], prefix)], prefix, perm=[0, 2, 1, 3])
    return graph.op("Reshape", [context, shapes["merge"]], prefix)


def _shapes(graph: _GraphBuilder, seq: int, d: int, heads: int) -> dict:
    head = d // heads
    return {
        "split": graph.const("split_heads", np.array([1, seq, heads, head], np.int64)),
        "merge": graph.const("merge_heads", np.array([1, seq, d], np.int64)),
        "scale": graph.const("attention_scale", np.array(np.sqrt(head), np.float32)),
    }


def bert(folder: Path) -> None:
    """A BERT-style encoder on [1, 128] ids: token + position embeddings, 4 x (attention with an
    additive padding mask from the ids (id 0 masked), Add & LayerNormalization, Erf-Gelu FFN,
    Add & LayerNormalization), a pooler-free [1, 128, d] output."""
    layers, d, heads, seq, vocab = 4, 256, 4, 128, 4096
    graph = _GraphBuilder(np.random.default_rng(7005))
    shapes = _shapes(graph, seq, d, heads)
    one = graph.const("one", np.array(1.0, np.float32))
    half = graph.const("half", np.array(0.5, np.float32))
    sqrt2 = graph.const("sqrt2", np.array(np.sqrt(2.0), np.float32))
    zero = graph.const("zero_id", np.array(0, np.int64))
    big = graph.const("mask_value", np.array(-10000.0, np.float32))
    padding = graph.op("Cast", [graph.op("Equal", ["ids", zero], "mask")], "mask", to=F32)
    mask = graph.op("Unsqueeze", [graph.op("Mul", [padding, big], "mask"), graph.const("mask_axes", np.array([1, 2], np.int64))], "mask")
    embedded = graph.op("Gather", [graph.weight("embedding", (vocab, d)), "ids"], "embed", axis=0)
    hidden = graph.op("Add", [embedded, graph.weight("position", (1, seq, d))], "embed")

    def layer_norm(x: str, prefix: str) -> str:
        gamma = graph.const(f"{prefix}.gamma", np.ones(d, np.float32) + _random(graph.rng, (d,)))
        return graph.op("LayerNormalization", [x, gamma, graph.weight(f"{prefix}.beta", (d,))], prefix, axis=-1, epsilon=1e-12)

    hidden = layer_norm(hidden, "embed_ln")
    for layer in range(layers):
        prefix = f"layer{layer}"
        q, k, v = (_linear(graph, hidden, f"{prefix}.{name}", d, d) for name in "qkv")
        attended = _attention_4d(graph, q, k, v, prefix, shapes, mask)
        hidden = layer_norm(graph.op("Add", [hidden, _linear(graph, attended, f"{prefix}.out", d, d)], prefix), f"{prefix}.ln1")
        up = _linear(graph, hidden, f"{prefix}.ffn_up", d, 4 * d)
        erf = graph.op("Erf", [graph.op("Div", [up, sqrt2], prefix)], prefix)
        gelu = graph.op("Mul", [graph.op("Mul", [up, graph.op("Add", [erf, one], prefix)], prefix), half], prefix)
        hidden = layer_norm(graph.op("Add", [hidden, _linear(graph, gelu, f"{prefix}.ffn_down", 4 * d, d)], prefix), f"{prefix}.ln2")
    model = helper.make_graph(
        graph.nodes, "bert",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])],
        [helper.make_tensor_value_info(hidden, F32, [1, seq, d])],
        graph.initializers,
    )
    _save(helper.make_model(model, opset_imports=OPSET), folder / "model.onnx")


def llama(folder: Path) -> None:
    """A Llama-style decoder on [1, 128] ids: 4 x (RMSNorm, attention with rotary embeddings
    (rotate-half form) and a causal mask, RMSNorm, SiLU-gated MLP), RMSNorm, LM head logits."""
    _llama(folder, seq=128, d=256, heads=4, ffn=688, vocab=4096, seed=7006)


def llama_step(folder: Path) -> None:
    """The Llama-style decoder at one token, d=512: a decode step's matrix-vector products
    (without a KV cache: the token attends to itself)."""
    _llama(folder, seq=1, d=512, heads=8, ffn=1376, vocab=8192, seed=7007)


def _llama(folder: Path, *, seq: int, d: int, heads: int, ffn: int, vocab: int, seed: int) -> None:
    layers = 4
    head = d // heads
    graph = _GraphBuilder(np.random.default_rng(seed))
    shapes = _shapes(graph, seq, d, heads)
    two = graph.const("two", np.array(2.0, np.float32))
    eps = graph.const("eps", np.array(1e-6, np.float32))
    causal = np.triu(np.full((seq, seq), -np.inf, np.float32), 1).reshape(1, 1, seq, seq)
    mask = graph.const("causal_mask", causal)
    angles = np.outer(np.arange(seq), 1.0 / 10000 ** (np.arange(0, head, 2) / head))
    angles = np.concatenate([angles, angles], -1).reshape(1, 1, seq, head)
    cos = graph.const("rope_cos", np.cos(angles).astype(np.float32))
    sin = graph.const("rope_sin", np.sin(angles).astype(np.float32))
    halves = [graph.const(f"rope_{name}", np.array([value], np.int64)) for name, value in (("start", 0), ("middle", head // 2), ("end", head), ("axis", 3))]

    def rope(x: str) -> str:
        first = graph.op("Slice", [x, halves[0], halves[1], halves[3]], "rope")
        second = graph.op("Slice", [x, halves[1], halves[2], halves[3]], "rope")
        rotated = graph.op("Concat", [graph.op("Neg", [second], "rope"), first], "rope", axis=3)
        return graph.op("Add", [graph.op("Mul", [x, cos], "rope"), graph.op("Mul", [rotated, sin], "rope")], "rope")

    def rms_norm(x: str, prefix: str) -> str:
        mean = graph.op("ReduceMean", [graph.op("Pow", [x, two], prefix)], prefix, axes=[-1], keepdims=1)
        scale = graph.op("Reciprocal", [graph.op("Sqrt", [graph.op("Add", [mean, eps], prefix)], prefix)], prefix)
        weight = graph.const(f"{prefix}.weight", np.ones(d, np.float32) + _random(graph.rng, (d,)))
        return graph.op("Mul", [graph.op("Mul", [x, scale], prefix), weight], prefix)

    def project(x: str, prefix: str, rows: int, cols: int) -> str:
        return graph.op("MatMul", [x, graph.weight(f"{prefix}.weight", (rows, cols))], prefix)

    hidden = graph.op("Gather", [graph.weight("embedding", (vocab, d)), "ids"], "embed", axis=0)
    for layer in range(layers):
        prefix = f"layer{layer}"
        normed = rms_norm(hidden, f"{prefix}.attn_norm")
        q, k, v = (project(normed, f"{prefix}.{name}", d, d) for name in "qkv")
        attended = _attention_4d(graph, q, k, v, prefix, shapes, mask, rope)
        hidden = graph.op("Add", [hidden, project(attended, f"{prefix}.o", d, d)], prefix)
        normed = rms_norm(hidden, f"{prefix}.mlp_norm")
        gate = project(normed, f"{prefix}.gate", d, ffn)
        silu = graph.op("Mul", [gate, graph.op("Sigmoid", [gate], prefix)], prefix)
        up = project(normed, f"{prefix}.up", d, ffn)
        hidden = graph.op("Add", [hidden, project(graph.op("Mul", [silu, up], prefix), f"{prefix}.down", ffn, d)], prefix)
    logits = project(rms_norm(hidden, "final_norm"), "lm_head", d, vocab)
    model = helper.make_graph(
        graph.nodes, "llama",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])],
        [helper.make_tensor_value_info(logits, F32, [1, seq, vocab])],
        graph.initializers,
    )
    _save(helper.make_model(model, opset_imports=OPSET), folder / "model.onnx")


def mlp_rows(folder: Path) -> None:
    """4 x (MatMul 1024x4096, Relu, MatMul 4096x1024, residual Add) on [rows, 1024], rows a
    run-time dim: products of a run-time number of rows by weight matrices."""
    graph = _GraphBuilder(np.random.default_rng(7008))
    hidden = "x"
    for layer in range(4):
        up = graph.op("MatMul", [hidden, graph.weight(f"layer{layer}.up", (1024, 4096))], f"layer{layer}")
        down = graph.op("Relu", [up], f"layer{layer}")
        down = graph.op("MatMul", [down, graph.weight(f"layer{layer}.down", (4096, 1024))], f"layer{layer}")
        hidden = graph.op("Add", [hidden, down], f"layer{layer}")
    model = helper.make_graph(
        graph.nodes, "mlp_rows",
        [helper.make_tensor_value_info("x", F32, ["rows", 1024])],
        [helper.make_tensor_value_info(hidden, F32, ["rows", 1024])],
        graph.initializers,
    )
    _save(helper.make_model(model, opset_imports=OPSET), folder / "model.onnx")


def scan_long(folder: Path) -> None:
    """One Scan over a run-time number of steps: a (256,) running sum, and a row stacked per
    step (a loop stacking its scan output)."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["sum", "step"], ["next"]),
            helper.make_node("Mul", ["next", "step"], ["row"]),
        ],
        "body",
        [helper.make_tensor_value_info(name, F32, [256]) for name in ("sum", "step")],
        [helper.make_tensor_value_info(name, F32, [256]) for name in ("next", "row")],
    )
    node = helper.make_node("Scan", ["start", "x"], ["total", "rows"], body=body, num_scan_inputs=1)
    graph = helper.make_graph(
        [node],
        "scan_long",
        [helper.make_tensor_value_info("start", F32, [256]), helper.make_tensor_value_info("x", F32, ["seq", 256])],
        [helper.make_tensor_value_info("total", F32, [256]), helper.make_tensor_value_info("rows", F32, ["seq", 256])],
    )
    _save(helper.make_model(graph, opset_imports=OPSET), folder / "model.onnx")


def loop_long(folder: Path) -> None:
    """One Loop over the rows of x (its trip count read from x's shape at run time): a (256,)
    running sum carried, and a row stacked per iteration."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["going"], ["going_on"]),
            helper.make_node("Gather", ["x", "i"], ["step"], axis=0),
            helper.make_node("Add", ["sum", "step"], ["next"]),
            helper.make_node("Mul", ["next", "step"], ["row"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("going", TensorProto.BOOL, []),
            helper.make_tensor_value_info("sum", F32, [256]),
        ],
        [
            helper.make_tensor_value_info("going_on", TensorProto.BOOL, []),
            helper.make_tensor_value_info("next", F32, [256]),
            helper.make_tensor_value_info("row", F32, [256]),
        ],
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], start=0, end=1),
        helper.make_node("Squeeze", ["shape"], ["count"]),
        helper.make_node("Constant", [], ["true"], value=helper.make_tensor("true", TensorProto.BOOL, [], [True])),
        helper.make_node("Loop", ["count", "true", "start"], ["total", "rows"], body=body),
    ]
    graph = helper.make_graph(
        nodes,
        "loop_long",
        [helper.make_tensor_value_info("start", F32, [256]), helper.make_tensor_value_info("x", F32, ["rows", 256])],
        [helper.make_tensor_value_info("total", F32, [256]), helper.make_tensor_value_info("rows", F32, ["rows", 256])],
    )
    _save(helper.make_model(graph, opset_imports=OPSET), folder / "model.onnx")


# -- node-bound graph and start-up --------------------------------------------------------------


def small_nodes(folder: Path) -> None:
    """20,000 nodes on 8x8 f32: a chain where about a third of the binary ops read a fresh
    initializer and the rest an earlier value, so the graph is wide as well as long."""
    count, side = 20_000, 8
    rng = np.random.default_rng(7004)
    kinds = ("Add", "Mul", "MatMul", "Transpose", "Relu")
    nodes, initializers, values = [], [], ["x"]
    for index in range(count):
        kind = kinds[int(rng.integers(len(kinds)))]
        current = values[-1]
        if kind in ("Transpose", "Relu"):
            inputs = [current]
        elif rng.random() < 0.54:
            name = f"w{len(initializers)}"
            initializers.append(numpy_helper.from_array(_random(rng, (side, side), 0.3), name))
            inputs = [current, name]
        else:
            inputs = [current, values[int(rng.integers(max(0, len(values) - 64), len(values)))]]
        output = f"v{index}"
        nodes.append(helper.make_node(kind, inputs, [output], name=f"n{index}"))
        values.append(output)
    x = helper.make_tensor_value_info("x", F32, [side, side])
    y = helper.make_tensor_value_info(values[-1], F32, [side, side])
    graph = helper.make_graph(nodes, "small_nodes", [x], [y], initializers)
    _save(helper.make_model(graph, opset_imports=OPSET), folder / "model.onnx")


def one_node(folder: Path) -> None:
    x = helper.make_tensor_value_info("x", F32, [2, 2])
    y = helper.make_tensor_value_info("y", F32, [2, 2])
    z = helper.make_tensor_value_info("z", F32, [2, 2])
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"], name="add")], "one_node", [x, y], [z])
    _save(helper.make_model(graph, opset_imports=OPSET), folder / "model.onnx")


MODELS: dict[str, Callable[[Path], None]] = {
    "mlp_external": mlp_external,
    "mlp_inline": mlp_inline,
    "transformer": transformer,
    "bert": bert,
    "llama": llama,
    "llama_step": llama_step,
    "mlp_rows": mlp_rows,
    "scan_long": scan_long,
    "loop_long": loop_long,
    "small_nodes": small_nodes,
    "one_node": one_node,
    "mlp_huge": mlp_huge,
}


ON_REQUEST = ("mlp_huge",)
"""Models made only when named (`--only`): too big to write on every benchmark run."""


def model_path(name: str) -> Path:
    return OUT / name / "model.onnx"


def generate(names: list[str] | None = None, force: bool = False) -> None:
    for name in names or [name for name in MODELS if name not in ON_REQUEST]:
        folder = OUT / name
        if model_path(name).exists() and not force:
            continue
        started = time.perf_counter()
        MODELS[name](folder)
        size = sum(path.stat().st_size for path in folder.iterdir())
        print(f"generated {name}: {size / 2**20:.1f} MiB in {time.perf_counter() - started:.1f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(MODELS), help="generate these models only")
    parser.add_argument("--force", action="store_true", help="regenerate even if present")
    options = parser.parse_args()
    generate(options.only, options.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
