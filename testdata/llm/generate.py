"""Tiny random-weight LLMs made the way users get their "-onnx" releases: a transformers model
saved locally, then onnxruntime-genai's model builder (`python -m onnxruntime_genai.models.builder
-i DIR -o OUT -p fp32|int4 -e cpu`).

    python testdata/llm/generate.py OUT_DIR [--precision fp32|int4] [--family llama]

writes OUT_DIR/<family>-<precision>/model.onnx (+ model.onnx.data, genai_config.json, the
tokenizer). The weights are random (seeded): the models exist to check numbers against
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
FAMILIES = ("llama",)


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


def _model(family: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if family == "llama":
        config = LlamaConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            bos_token_id=1,
            eos_token_id=2,
            tie_word_embeddings=False,
        )
        return LlamaForCausalLM(config).eval()
    raise ValueError(f"unknown family {family!r}, expected one of {FAMILIES}")


def generate(out: Path, family: str = "llama", precision: str = "fp32") -> Path:
    """Build `family` at `precision` into out/<family>-<precision>; returns its model.onnx."""
    target = out / f"{family}-{precision}"
    model_path = target / "model.onnx"
    if model_path.exists():
        return model_path
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "hf"
        _model(family).save_pretrained(source)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--family", choices=FAMILIES, default="llama")
    parser.add_argument("--precision", choices=("fp32", "int4"), default="fp32")
    arguments = parser.parse_args()
    print(generate(arguments.out, arguments.family, arguments.precision))


if __name__ == "__main__":
    main()
