"""Transformers as users deploy them. onnxruntime-genai's model builder output for tiny
random-weight Llama, Qwen2, Phi-3, Gemma, Mistral (fp32 and int4: MatMulNBits, and for Qwen2's
tied embeddings GatherBlockQuantized), Llama in fp16 (the builder's CPU form: MultiHeadAttention
and RotaryEmbedding on an fp16 KV cache) and Gemma 2 (fp32: sliding-window layers with a windowed
KV cache, softcapping) made by testdata/llm/generate.py, compiled once by niroc + iree-compile
with their dynamic batch / sequence / past dims, against onnxruntime:

- a prompt step (3 tokens, empty past, batch 2), then decode steps (one token, the present KV
  cache fed back as past): logits and every present KV tensor (of a windowed cache, the rows
  holding tokens: onnxruntime leaves the others unspecified);
- greedy generation: 16 tokens from the compiled module, the KV cache carried between calls,
  are the tokens onnxruntime generates from the same prompt.

int4 is compared with onnxruntime running the model as built: at the builder's
accuracy_level 4 both quantize A to int8 per block (`contrib_functions._int8_block_product`).

And BERT / GPT-2 / BART / ViT exported by torch and fused by onnxruntime's transformer
optimizer (BERT also quantized by its quantize_dynamic afterwards: QAttention,
QEmbedLayerNormalization), at two (batch, sequence) shapes (ViT: two batch sizes), BERT with a
right-padded attention mask.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from testdata.llm import generate as llm_models

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx, from_abi


@dataclass
class _Cache:
    """How a model's KV cache is fed: each past input's (kv heads, head size) and, for a
    layer with a windowed cache (GroupQueryAttention's sliding_window_cache), its capacity,
    which the caller chooses (at least the window; larger amortizes eviction)."""

    heads: dict[str, tuple[int, int]]
    windows: dict[str, int]
    dtype: type = np.float32
    """The cache's element type (fp16 for the builder's fp16 models)."""

    def capacity(self, past: str) -> int | None:
        window = self.windows.get(past)
        return None if window is None else window + 2

    @classmethod
    def of(cls, model_path: Path, session) -> _Cache:
        heads, windows, dtype = {}, {}, np.float32
        for node in onnx.load(str(model_path), load_external_data=False).graph.node:
            attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type == "GroupQueryAttention" and attributes.get("sliding_window_cache"):
                windows[node.input[3]] = windows[node.input[4]] = attributes["local_window_size"]
        config = json.loads((model_path.parent / "genai_config.json").read_text())["model"]
        head = config["decoder"]["head_size"]
        for entry in session.get_inputs():
            if entry.name.startswith("past"):
                heads[entry.name] = (entry.shape[1], head)
                dtype = np.float16 if entry.type == "tensor(float16)" else np.float32
        return cls(heads, windows, dtype)

    def empty(self, batch: int) -> dict[str, np.ndarray]:
        return {
            name: np.zeros((batch, heads, self.capacity(name) or 0, head), self.dtype)
            for name, (heads, head) in self.heads.items()
        }

    def resident(self, name: str, total: int) -> int:
        """How many rows of a present KV tensor hold tokens after `total` tokens (onnxruntime
        leaves the rest of a windowed cache unspecified)."""
        past = name.replace("present", "past_key_values")
        capacity = self.capacity(past)
        if capacity is None or total <= capacity:
            return total
        evicted = capacity - self.windows[past] + 1
        return total - evicted * -(-(total - capacity) // evicted)


def _feeds(inputs, ids, total, cache):
    """Graph inputs in order: token ids, an all-ones attention mask of the total length, the
    new tokens' positions where the model takes them, and the past KV tensors (`cache`: past
    name -> array)."""
    batch, length = ids.shape
    positions = np.tile(np.arange(total - length, total, dtype=np.int64), (batch, 1))
    given = {
        "input_ids": ids,
        "attention_mask": np.ones((batch, total), np.int64),
        "position_ids": positions,
        **cache,
    }
    return {name: given[name] for name in inputs}


def _next_cache(outputs, results):
    return {
        name.replace("present", "past_key_values"): value
        for name, value in zip(outputs, results, strict=True)
        if name.startswith("present")
    }


def _builder_cases():
    families = llm_models.FAMILIES
    cases = [(family, precision) for family in families for precision in ("fp32", "int4")]
    # fp16: the builder's CPU form (MultiHeadAttention, RotaryEmbedding in fp16, fp16 KV cache)
    return [case for case in cases if case != ("gemma2", "int4")] + [("llama", "fp16")]


# what each family's builder output must contain for the test to cover what it is there for
_EXPECTED = {
    ("qwen2", "int4"): {"GatherBlockQuantized"},  # tied embeddings, quantized and shared
    ("gemma2", "fp32"): {"sliding_window_cache", "softcap"},
}


@pytest.mark.parametrize("family, precision", _builder_cases())
def test_builder_model_matches_onnxruntime(tmp_path, family, precision):
    """One model per test (built and compiled once: the checks share it, and pytest-xdist's
    workers build no second copy)."""
    model_path = llm_models.generate(tmp_path, family, precision)
    found = set()
    for node in onnx.load(str(model_path), load_external_data=False).graph.node:
        found.add(node.op_type)
        found.update(
            a.name for a in node.attribute if onnx.helper.get_attribute_value(a) not in (0, -1, 0.0)
        )
    assert _EXPECTED.get((family, precision), set()) <= found
    assert ("MatMulNBits" in found) == (precision == "int4")
    options = onnxruntime.SessionOptions()
    if precision == "fp16":
        # the builder declares value_info shapes of the prompt (repeat_kv's [B, S, kv*H]) that a
        # decode step does not have; onnxruntime's buffer reuse trusts them and fails
        # ("Shape mismatch attempting to re-use buffer")
        options.enable_mem_pattern = options.enable_mem_reuse = False
    session = onnxruntime.InferenceSession(
        str(model_path), options, providers=["CPUExecutionProvider"]
    )
    vm_module = compile_onnx(model_path, tmp_path)
    inputs = [entry.name for entry in session.get_inputs()]
    outputs = [entry.name for entry in session.get_outputs()]
    cache = _Cache.of(model_path, session)
    _check_prompt_and_decode(vm_module, session, inputs, outputs, cache)
    _check_greedy_generation(vm_module, session, inputs, outputs, cache)


def _check_prompt_and_decode(vm_module, session, inputs, outputs, cache):
    """A prompt of 3 tokens on an empty past at batch 2, then two decode steps on the present
    KV: logits and the resident rows of every present KV tensor."""
    batch, length = 2, 3
    rng = np.random.default_rng(batch)
    ids = rng.integers(3, 256, (batch, length)).astype(np.int64)
    feeds = _feeds(inputs, ids, length, cache.empty(batch))
    for step in range(3):
        total = length + step
        expected = session.run(None, feeds)
        got = [
            from_abi(value, wanted)
            for value, wanted in zip(
                call(vm_module, "main_graph", *feeds.values()), expected, strict=True
            )
        ]
        for name, value, wanted in zip(outputs, got, expected, strict=True):
            assert value.shape == wanted.shape, (name, value.shape, wanted.shape)
            rows = slice(None) if name == "logits" else slice(0, cache.resident(name, total))
            tolerance = (1e-4, 1e-5) if wanted.dtype == np.float32 else (1e-2, 1e-2)
            np.testing.assert_allclose(
                value[:, :, rows],
                wanted[:, :, rows],
                rtol=tolerance[0],
                atol=tolerance[1],
                err_msg=name,
            )
        tokens = got[0][:, -1].argmax(-1)[:, None].astype(np.int64)
        feeds = _feeds(inputs, tokens, total + 1, _next_cache(outputs, got))


def _check_greedy_generation(vm_module, session, inputs, outputs, cache):
    """16 greedy tokens from one prompt, the KV cache carried between calls."""
    prompt = np.array([[5, 17, 42, 99, 3]], np.int64)

    def generate(run) -> list[int]:
        ids, past, total, tokens = prompt, cache.empty(1), prompt.shape[1], []
        for _ in range(16):
            results = run(_feeds(inputs, ids, total, past))
            token = int(results[0][0, -1].argmax())
            tokens.append(token)
            ids, past, total = (
                np.array([[token]], np.int64),
                _next_cache(outputs, results),
                total + 1,
            )
        return tokens

    def compiled(feeds):  # every output (logits, present KV) has the cache's element type
        return [
            from_abi(value, cache.dtype(0))
            for value in call(vm_module, "main_graph", *feeds.values())
        ]

    reference = generate(lambda feeds: session.run(None, feeds))
    assert generate(compiled) == reference
    assert len(set(reference)) > 1  # random weights still give a sequence that tests something


_FUSED_CONTRIB = {
    # LayerNormalizations fused into com.microsoft ops that ONNX cannot type: the decoder's
    # cross-attention mask is expanded to a shape read from one of their outputs
    "bart": {"SkipLayerNormalization", "BiasGelu"},
    "bert": {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"},
    "bert-int8": {"QEmbedLayerNormalization", "QAttention", "SkipLayerNormalization", "BiasGelu"},
    "gpt2": {"SkipLayerNormalization", "FastGelu"},
    # the optimizer's 'vit' fusions leave transformers' eager attention as MatMul / Softmax
    "vit": {"SkipLayerNormalization", "BiasGelu"},
}


@pytest.mark.parametrize("kind", sorted(_FUSED_CONTRIB))
def test_optimizer_fused_model_matches_onnxruntime(tmp_path, kind):
    model_path = llm_models.export_fused(tmp_path, kind)
    contrib = {
        node.op_type
        for node in onnx.load(str(model_path)).graph.node
        if node.domain == "com.microsoft"
    }
    assert contrib == _FUSED_CONTRIB[kind]
    session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    vm_module = compile_onnx(model_path, tmp_path)
    names = [entry.name for entry in session.get_inputs()]
    rng = np.random.default_rng(3)
    feeds = []
    for batch, length in ((1, 8), (2, 5)):
        if kind == "vit":  # images of one size, at two batch sizes
            feeds.append({"pixel_values": rng.standard_normal((batch + 1, 3, 32, 32), np.float32)})
            continue
        given = {
            "input_ids": rng.integers(0, 128, (batch, length)).astype(np.int64),
            "attention_mask": np.ones((batch, length), np.int64),
            "token_type_ids": rng.integers(0, 2, (batch, length)).astype(np.int64),
        }
        if kind.startswith("bert"):
            given["attention_mask"][-1, -2:] = 0  # right padding: Attention's mask_index
        feeds.append({name: given[name] for name in names})
    assert_matches_onnxruntime(
        vm_module, session, feeds, function="main_graph", rtol=1e-4, atol=1e-4
    )
