"""Tiny random-weight LLMs made the way users get their "-onnx" releases: a transformers model
saved locally, then onnxruntime-genai's model builder (`python -m onnxruntime_genai.models.builder
-i DIR -o OUT -p fp32|fp16|int4 -e cpu`).

    python testdata/llm/generate.py OUT_DIR [--precision fp32|fp16|int4] [--family llama] [--sizes bench]
    python testdata/llm/generate.py OUT_DIR --fused bart|bert|bert-int8|gpt2|vit

writes OUT_DIR/<family>-<precision>/model.onnx (+ model.onnx.data, genai_config.json, the
tokenizer); with --fused, OUT_DIR/<kind>-fused.onnx: a tiny BERT, GPT-2, BART or ViT exported by torch
and fused by `onnxruntime.transformers.optimizer` (EmbedLayerNormalization, Attention,
SkipLayerNormalization, BiasGelu; GPT-2: SkipLayerNormalization, FastGelu). The weights are random (seeded): the models exist to check numbers against
onnxruntime, not to say anything sensible. Needs torch, transformers and onnxruntime-genai
(`pip install -e '.[llm]'`); runs offline (the tokenizer is a word-level `tokenizers.Tokenizer`
made here, wrapped in transformers' PreTrainedTokenizerFast).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

VOCAB_SIZE = 256
_COMMON = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
FAMILIES = {
    # family: (transformers config class, model class, what the family adds to the common config)
    "llama": ("LlamaConfig", "LlamaForCausalLM", {"tie_word_embeddings": False}),
    # attention bias on Q/K/V; tied embeddings (int4: GatherBlockQuantized reads the LM head's
    # packed weights), larger random weights (else greedy decoding repeats the prompt's token)
    "qwen2": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        {"tie_word_embeddings": True, "initializer_range": 0.2},
    ),
    # fused QKV and gate/up projections; half the head rotated (partial rotary: onnxruntime
    # wants a multiple of 16 rotated, so heads of 32)
    "phi3": (
        "Phi3Config",
        "Phi3ForCausalLM",
        {
            "hidden_size": 128,
            "num_key_value_heads": 4,
            "pad_token_id": 0,
            "original_max_position_embeddings": 128,
            "tie_word_embeddings": False,
            "rope_parameters": {
                "rope_theta": 10000.0,
                "rope_type": "default",
                "partial_rotary_factor": 0.5,
            },
        },
    ),
    # embeddings scaled by sqrt(hidden), (1 + weight) RMS norms, tanh-Gelu MLP (untied: tied,
    # the scaled embedding makes greedy decoding repeat the prompt's last token)
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16, "tie_word_embeddings": False}),
    # a sliding window in its config, which the builder does not apply (no layer_types)
    "mistral": (
        "MistralConfig",
        "MistralForCausalLM",
        {"head_dim": 16, "sliding_window": 8, "tie_word_embeddings": False},
    ),
    # alternating sliding-window (local_window_size, windowed KV cache) and global layers,
    # attention and final logit softcapping
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 8,
            "tie_word_embeddings": False,
        },
    ),
}


def _tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"w{index}": index for index in range(3, VOCAB_SIZE)})
    core = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


BENCH_SIZES = {
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
}
"""`--sizes bench`: a model of real layer widths (4 layers of a 1B-class Llama) for the run-time
benchmark (tests/bench/bench_run.py), where the tiny tests' widths time nothing but overhead."""


def _model(family: str, sizes: dict | None = None):
    import torch
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}, expected one of {sorted(FAMILIES)}")
    config_class, model_class, extra = FAMILIES[family]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**{**_COMMON, **extra, **(sizes or {})})
    model = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        # transformers initialises biases to 0 (which the builder then leaves out) and norm
        # weights to 1 or 0: random ones make them count
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    return model


def generate(
    out: Path, family: str = "llama", precision: str = "fp32", sizes: dict | None = None
) -> Path:
    """Build `family` at `precision` into out/<family>-<precision> (-bench with `sizes`, which
    override the tiny widths); returns its model.onnx."""
    target = out / f"{family}-{precision}{'-bench' if sizes else ''}"
    model_path = target / "model.onnx"
    if model_path.exists():
        return model_path
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "hf"
        _model(family, sizes).save_pretrained(source)
        _tokenizer().save_pretrained(source)
        command = [
            sys.executable,
            "-m",
            "onnxruntime_genai.models.builder",
            "-i",
            str(source),
            "-o",
            str(target),
            "-p",
            precision,
            "-e",
            "cpu",
            "-c",
            str(Path(scratch) / "cache"),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not model_path.exists():
            raise RuntimeError(
                f"the model builder failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
            )
    return model_path


_TEXT_INPUTS = ["input_ids", "attention_mask"]
_FUSED_MODELS = {
    # kind: (transformers config class, model class, config sizes, inputs, outputs)
    "bert": (
        "BertConfig",
        "BertModel",
        {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "vocab_size": 128, "max_position_embeddings": 64},
        [*_TEXT_INPUTS, "token_type_ids"],
        ["last_hidden_state"],
    ),
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        {"n_embd": 32, "n_layer": 2, "n_head": 4, "vocab_size": 128, "n_positions": 64,
         "use_cache": False},
        _TEXT_INPUTS,
        ["logits"],
    ),
    "bart": (
        "BartConfig",
        "BartModel",
        {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
         "vocab_size": 128, "max_position_embeddings": 64},
        _TEXT_INPUTS,
        ["last_hidden_state"],
    ),
    "vit": (
        "ViTConfig",
        "ViTModel",
        {"image_size": 32, "patch_size": 8, "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 64},
        ["pixel_values"],
        ["last_hidden_state"],
    ),
}  # fmt: skip
FUSED = (*sorted(_FUSED_MODELS), "bert-int8")


def export_fused(out: Path, kind: str) -> Path:
    """A tiny random BERT (2 layers, hidden 32, 4 heads), GPT-2, BART (one encoder and one
    decoder layer; dynamic batch and sequence) or ViT (32x32 images in 8x8 patches, dynamic
    batch) exported by torch, fused by onnxruntime's transformer optimizer:
    out/<kind>-fused.onnx. `bert-int8`: the fused BERT then quantized by onnxruntime's
    `quantize_dynamic` (int8 weights: QAttention, QEmbedLayerNormalization, MatMulInteger),
    as onnxruntime's BERT quantization guide does it."""
    if kind.endswith("-int8"):
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        target = out / f"{kind}-fused.onnx"
        quantize_dynamic(
            export_fused(out, kind.removesuffix("-int8")),
            target,
            weight_type=QuantType.QInt8,
            # the fused ops' outputs have no ONNX type: the quantizer asks for a default
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        return target
    import torch
    import transformers
    from onnxruntime.transformers.optimizer import optimize_model

    if kind not in _FUSED_MODELS:
        raise ValueError(f"unknown model {kind!r}, expected one of {FUSED}")
    config_class, model_class, sizes, inputs, outputs = _FUSED_MODELS[kind]
    torch.manual_seed(0)
    # attn_implementation eager: the form the optimizer's fusions match
    config = getattr(transformers, config_class)(**sizes, attn_implementation="eager")
    model = getattr(transformers, model_class)(config)
    model.eval()

    class Positional(torch.nn.Module):
        """The model called with keyword inputs: what torch.onnx.export passes positionally."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *values):
            found = self.model(**dict(zip(inputs, values, strict=True)), return_dict=True)
            return tuple(found[name] for name in outputs)

    if kind == "vit":
        example = (torch.randn(1, 3, 32, 32),)
        dynamic_axes = {"pixel_values": {0: "batch"}}
    else:
        ids = torch.randint(0, 128, (1, 8))
        example = (ids, torch.ones_like(ids), torch.zeros_like(ids))[: len(inputs)]
        dynamic_axes = {name: {0: "batch", 1: "sequence"} for name in inputs}
    out.mkdir(parents=True, exist_ok=True)
    exported = out / f"{kind}.onnx"
    torch.onnx.export(
        Positional(),
        example,
        str(exported),
        input_names=inputs,
        output_names=outputs,
        dynamic_axes=dynamic_axes,
        opset_version=17,
        dynamo=False,
    )
    fused = optimize_model(str(exported), model_type=kind, num_heads=4, hidden_size=32)
    target = out / f"{kind}-fused.onnx"
    fused.save_model_to_file(str(target))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--family", choices=FAMILIES, default="llama")
    parser.add_argument("--precision", choices=("fp32", "fp16", "int4"), default="fp32")
    parser.add_argument("--fused", choices=FUSED, help="an optimizer-fused model instead")
    parser.add_argument(
        "--sizes", choices=("tiny", "bench"), default="tiny", help="bench: BENCH_SIZES' widths"
    )
    arguments = parser.parse_args()
    if arguments.fused:
        print(export_fused(arguments.out, arguments.fused))
    else:
        sizes = BENCH_SIZES if arguments.sizes == "bench" else None
        print(generate(arguments.out, arguments.family, arguments.precision, sizes))


if __name__ == "__main__":
    main()
