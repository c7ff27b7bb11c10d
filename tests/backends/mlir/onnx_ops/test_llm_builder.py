"""Transformers as users deploy them. onnxruntime-genai's model builder output: a tiny random-weight Llama
(testdata/llm/generate.py), fp32 and int4 (MatMulNBits), compiled once by niroc + iree-compile
with its dynamic batch / sequence / past dims, against onnxruntime:

- a prompt step (several tokens, empty past) at two batch sizes and lengths, then decode steps
  (one token, the present KV cache fed back as past): logits and every present KV tensor;
- greedy generation: 16 tokens from the compiled module, the KV cache carried between calls,
  are the tokens onnxruntime generates from the same prompt.

int4 is compared with onnxruntime running the same model with accuracy_level=1 (f32 A, the
exact computation niroc compiles): the builder's accuracy_level=4 quantizes A to int8.

And BERT / GPT-2 exported by torch and fused by onnxruntime's transformer optimizer, at two
(batch, sequence) shapes, BERT with a right-padded attention mask.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx, from_abi

_GENERATOR = Path(__file__).parents[4] / "testdata" / "llm" / "generate.py"


def _generate_module():
    spec = importlib.util.spec_from_file_location("llm_generate", _GENERATOR)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _exact_reference(model_path: Path) -> Path:
    """The same model with every MatMulNBits at accuracy_level 1, beside it (same weights file)."""
    model = onnx.load(str(model_path), load_external_data=False)
    for node in model.graph.node:
        for attribute in node.attribute:
            if node.op_type == "MatMulNBits" and attribute.name == "accuracy_level":
                attribute.i = 1
    exact = model_path.with_name("model_exact.onnx")
    onnx.save(model, str(exact))
    return exact


def _feeds(inputs, ids, total, cache):
    """Graph inputs in order: token ids, an all-ones attention mask of the total length, and
    the past KV tensors (`cache`: past name -> array)."""
    given = {"input_ids": ids, "attention_mask": np.ones((ids.shape[0], total), np.int64), **cache}
    return {name: given[name] for name in inputs}


def _empty_cache(inputs, batch):
    return {
        name: np.zeros((batch, 2, 0, 16), np.float32) for name in inputs if name.startswith("past")
    }


def _next_cache(outputs, results):
    return {
        name.replace("present", "past_key_values"): value
        for name, value in zip(outputs, results, strict=True)
        if name.startswith("present")
    }


@pytest.mark.parametrize("precision", ["fp32", "int4"])
def test_builder_llama_matches_onnxruntime(tmp_path, precision):
    """One model per test (built and compiled once: the checks share it, and pytest-xdist's
    workers build no second copy)."""
    model_path = _generate_module().generate(tmp_path, "llama", precision)
    reference = model_path if precision == "fp32" else _exact_reference(model_path)
    session = onnxruntime.InferenceSession(str(reference), providers=["CPUExecutionProvider"])
    vm_module = compile_onnx(model_path, tmp_path)
    inputs = [entry.name for entry in session.get_inputs()]
    outputs = [entry.name for entry in session.get_outputs()]
    for batch, length in ((1, 6), (2, 3)):
        _check_prompt_and_decode(vm_module, session, inputs, outputs, batch, length)
    _check_greedy_generation(vm_module, session, inputs, outputs)


def _check_prompt_and_decode(vm_module, session, inputs, outputs, batch, length):
    """A prompt of `length` tokens on an empty past, then two decode steps on the present KV."""
    rng = np.random.default_rng(batch)
    ids = rng.integers(3, 256, (batch, length)).astype(np.int64)
    feeds = _feeds(inputs, ids, length, _empty_cache(inputs, batch))
    for step in range(3):
        (results,) = assert_matches_onnxruntime(
            vm_module, session, [feeds], function="main_graph", rtol=1e-4, atol=1e-5
        )
        assert results[1].shape[2] == length + step  # present KV: past + new tokens
        tokens = results[0][:, -1].argmax(-1)[:, None].astype(np.int64)
        feeds = _feeds(inputs, tokens, length + step + 1, _next_cache(outputs, results))


def _check_greedy_generation(vm_module, session, inputs, outputs):
    """16 greedy tokens from one prompt, the KV cache carried between calls."""
    prompt = np.array([[5, 17, 42, 99, 3]], np.int64)

    def generate(run) -> list[int]:
        ids, cache, total, tokens = prompt, _empty_cache(inputs, 1), prompt.shape[1], []
        for _ in range(16):
            results = run(_feeds(inputs, ids, total, cache))
            token = int(results[0][0, -1].argmax())
            tokens.append(token)
            ids, cache, total = (
                np.array([[token]], np.int64),
                _next_cache(outputs, results),
                total + 1,
            )
        return tokens

    def compiled(feeds):  # every output (logits, present KV) is f32
        return [
            from_abi(value, np.float32(0))
            for value in call(vm_module, "main_graph", *feeds.values())
        ]

    reference = generate(lambda feeds: session.run(None, feeds))
    assert generate(compiled) == reference
    assert len(set(reference)) > 1  # random weights still give a sequence that tests something


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_optimizer_fused_model_matches_onnxruntime(tmp_path, kind):
    model_path = _generate_module().export_fused(tmp_path, kind)
    contrib = {
        node.op_type
        for node in onnx.load(str(model_path)).graph.node
        if node.domain == "com.microsoft"
    }
    expected = {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}
    assert contrib == (expected if kind == "bert" else {"SkipLayerNormalization", "FastGelu"})
    session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    vm_module = compile_onnx(model_path, tmp_path)
    names = [entry.name for entry in session.get_inputs()]
    rng = np.random.default_rng(3)
    feeds = []
    for batch, length in ((1, 8), (2, 5)):
        given = {
            "input_ids": rng.integers(0, 128, (batch, length)).astype(np.int64),
            "attention_mask": np.ones((batch, length), np.int64),
            "token_type_ids": rng.integers(0, 2, (batch, length)).astype(np.int64),
        }
        if kind == "bert":
            given["attention_mask"][-1, -2:] = 0  # right padding: Attention's mask_index
        feeds.append({name: given[name] for name in names})
    assert_matches_onnxruntime(
        vm_module, session, feeds, function="main_graph", rtol=1e-4, atol=1e-4
    )
