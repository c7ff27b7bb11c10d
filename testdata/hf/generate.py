"""Hugging Face models as users export them: tiny random-weight configs of transformers'
architectures, exported by torch with both exporters (TorchScript `dynamo=False` at opset 17
with named dynamic axes; the default dynamo exporter, with `Dim.AUTO` dims), offline.

    .venv/bin/python testdata/hf/generate.py [NAME ...]   # into testdata/generated/hf/

writes `<name>_ts.onnx` and `<name>_dynamo.onnx` (one file each, no external data). `MODELS` says
what each one is, its inputs, which of their dims are dynamic and the sizes the tests run it at
(tests/backends/mlir/test_hf_models.py, `make hf`). A model is exported only when its file is
missing. Needs torch and transformers (niroc's `llm` extra). The weights are random (seeded):
the models exist to check numbers against onnxruntime.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "testdata" / "generated" / "hf"
EXPORTERS = ("ts", "dynamo")

_SMALL = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
}
_TEXT = {**_SMALL, "vocab_size": 512, "max_position_embeddings": 128}
_STAGES = {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]}
_AUDIO = {
    **_SMALL,
    "conv_dim": (32, 32),
    "conv_stride": (5, 2),
    "conv_kernel": (10, 3),
    "num_feat_extract_layers": 2,
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 4,
}


@dataclass(frozen=True)
class Spec:
    """One architecture: `build(transformers)` makes the model; `kind` says its inputs (`text`:
    input_ids and attention_mask [batch, seq]; `image`: pixel_values [batch, 3, H, W] with
    `dynamic_image` making H and W dynamic too; `audio`: input_values [batch, samples]); `shapes`
    are the sizes the tests run it at ((batch, seq), (batch, H, W) or (batch, samples));
    `exporters` the exporters it is made with (the dynamo exporter fails on some)."""

    build: Callable
    kind: str
    shapes: tuple[tuple[int, ...], ...]
    dynamic_image: bool = False
    exporters: tuple[str, ...] = EXPORTERS


def _text(build: Callable) -> Spec:
    return Spec(build, "text", ((1, 5), (2, 16)))


def _image(build: Callable, size: int = 64, dynamic_image: bool = False) -> Spec:
    shapes = ((1, size, size), (3, size, size))
    if dynamic_image:
        shapes = ((1, size, size), (2, size - 16, size - 24))
    return Spec(build, "image", shapes, dynamic_image)


MODELS: dict[str, Spec] = {
    "distilbert": _text(
        lambda t: t.DistilBertModel(
            t.DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=512)
        )
    ),
    "roberta": _text(lambda t: t.RobertaModel(t.RobertaConfig(**_TEXT))),
    "deberta_v2": _text(lambda t: t.DebertaV2Model(t.DebertaV2Config(**_TEXT))),
    "albert": _text(lambda t: t.AlbertModel(t.AlbertConfig(embedding_size=32, **_TEXT))),
    "electra": _text(lambda t: t.ElectraModel(t.ElectraConfig(embedding_size=32, **_TEXT))),
    "mobilebert": _text(
        lambda t: t.MobileBertModel(
            t.MobileBertConfig(
                **_TEXT, embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32
            )
        )
    ),
    "bart": _text(
        lambda t: t.BartModel(
            t.BartConfig(
                d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                vocab_size=512, max_position_embeddings=128,
            )
        )
    ),
    "gpt_neox": _text(lambda t: t.GPTNeoXModel(t.GPTNeoXConfig(**_TEXT))),
    "falcon": _text(
        lambda t: t.FalconModel(
            t.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=512)
        )
    ),
    "bloom": _text(lambda t: t.BloomModel(t.BloomConfig(hidden_size=64, n_layer=2, n_head=4, vocab_size=512))),
    "opt": _text(
        lambda t: t.OPTModel(
            t.OPTConfig(
                hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                vocab_size=512, word_embed_proj_dim=64,
            )
        )
    ),
    "qwen2": _text(lambda t: t.Qwen2Model(t.Qwen2Config(num_key_value_heads=2, **_TEXT))),
    "phi": _text(lambda t: t.PhiModel(t.PhiConfig(**_TEXT))),
    "mistral": _text(lambda t: t.MistralModel(t.MistralConfig(num_key_value_heads=2, **_TEXT))),
    "clip_text": _text(lambda t: t.CLIPTextModel(t.CLIPTextConfig(**{**_TEXT, "max_position_embeddings": 32}))),
    "t5_encoder": Spec(
        lambda t: t.T5EncoderModel(
            t.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=512)
        ),
        "text",
        ((1, 5), (2, 16)),
        exporters=("ts",),  # the dynamo exporter fails to decompose it (torch 2.13)
    ),
    "convnext": _image(lambda t: t.ConvNextModel(t.ConvNextConfig(**_STAGES))),
    "swin": Spec(
        lambda t: t.SwinModel(
            t.SwinConfig(image_size=64, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4)
        ),
        "image",
        ((1, 64, 64), (3, 64, 64)),
        exporters=("ts",),  # the dynamo exporter fails to decompose it (torch 2.13)
    ),
    "segformer": _image(
        lambda t: t.SegformerForSemanticSegmentation(t.SegformerConfig(**_STAGES, decoder_hidden_size=32))
    ),
    "resnet": _image(lambda t: t.ResNetModel(t.ResNetConfig(**_STAGES, embedding_size=16))),
    "mobilevit": _image(
        lambda t: t.MobileViTModel(
            t.MobileViTConfig(
                image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 160]
            )
        )
    ),
    "deit": _image(lambda t: t.DeiTModel(t.DeiTConfig(image_size=64, patch_size=8, **_SMALL))),
    "beit": _image(lambda t: t.BeitModel(t.BeitConfig(image_size=64, patch_size=8, **_SMALL))),
    "poolformer": _image(lambda t: t.PoolFormerModel(t.PoolFormerConfig(**_STAGES))),
    "levit": _image(
        lambda t: t.LevitModel(
            t.LevitConfig(
                image_size=64, hidden_sizes=[32, 48, 64], num_attention_heads=[2, 2, 2],
                depths=[1, 1, 1], key_dim=[8, 8, 8],
            )
        )
    ),
    "clip_vision": _image(
        lambda t: t.CLIPVisionModel(t.CLIPVisionConfig(image_size=32, patch_size=8, **_SMALL)), size=32
    ),
    "dinov2": _image(lambda t: t.Dinov2Model(t.Dinov2Config(image_size=32, patch_size=8, **_SMALL)), size=32),
    "mobilenet_v2": _image(
        lambda t: t.MobileNetV2Model(t.MobileNetV2Config(image_size=32, depth_multiplier=0.25)), size=32
    ),
    "regnet": _image(
        lambda t: t.RegNetModel(
            t.RegNetConfig(hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1], embedding_size=16, groups_width=8)
        ),
        size=32,
    ),
    "resnet_hw": _image(lambda t: t.ResNetModel(t.ResNetConfig(**_STAGES, embedding_size=16)), dynamic_image=True),
    "segformer_hw": _image(
        lambda t: t.SegformerForSemanticSegmentation(t.SegformerConfig(**_STAGES, decoder_hidden_size=32)),
        dynamic_image=True,
    ),
    "convnext_hw": _image(lambda t: t.ConvNextModel(t.ConvNextConfig(**_STAGES)), dynamic_image=True),
    "bert": _text(lambda t: t.BertModel(t.BertConfig(**_TEXT))),
    "xlm_roberta": _text(lambda t: t.XLMRobertaModel(t.XLMRobertaConfig(**_TEXT))),
    "mpnet": _text(lambda t: t.MPNetModel(t.MPNetConfig(**_TEXT))),
    "gpt2": _text(
        lambda t: t.GPT2Model(t.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=128))
    ),
    "gptj": _text(
        lambda t: t.GPTJModel(
            t.GPTJConfig(n_embd=64, n_layer=2, n_head=4, vocab_size=512, rotary_dim=8, n_positions=128)
        )
    ),
    "llama": _text(lambda t: t.LlamaModel(t.LlamaConfig(num_key_value_heads=2, **_TEXT))),
    "gemma": _text(lambda t: t.GemmaModel(t.GemmaConfig(num_key_value_heads=2, head_dim=16, **_TEXT))),
    "stablelm": _text(lambda t: t.StableLmModel(t.StableLmConfig(num_key_value_heads=2, **_TEXT))),
    "vit": _image(lambda t: t.ViTModel(t.ViTConfig(image_size=32, patch_size=8, **_SMALL)), size=32),
    "swinv2": Spec(
        lambda t: t.Swinv2Model(
            t.Swinv2Config(image_size=64, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4)
        ),
        "image",
        ((1, 64, 64), (3, 64, 64)),
    ),
    "convnextv2": _image(lambda t: t.ConvNextV2Model(t.ConvNextV2Config(**_STAGES))),
    "yolos": _image(
        lambda t: t.YolosModel(
            t.YolosConfig(image_size=[32, 32], patch_size=8, num_detection_tokens=5, **_SMALL)
        ),
        size=32,
    ),
    "mobilenet_v1": _image(
        lambda t: t.MobileNetV1Model(t.MobileNetV1Config(image_size=32, depth_multiplier=0.25)), size=32
    ),
    "upernet": Spec(
        lambda t: t.UperNetForSemanticSegmentation(
            t.UperNetConfig(
                backbone_config=t.ConvNextConfig(
                    **_STAGES, out_features=["stage1", "stage2", "stage3", "stage4"]
                ),
                hidden_size=32,
                auxiliary_in_channels=64,
            )
        ),
        "image",
        ((1, 64, 64), (3, 64, 64)),
        exporters=("dynamo",),  # TorchScript cannot export its adaptive pooling (torch 2.13)
    ),
    "hubert": Spec(
        lambda t: t.HubertModel(
            t.HubertConfig(**_AUDIO)
        ),
        "audio",
        ((1, 1600), (2, 4000)),
    ),
    "wav2vec2": Spec(
        lambda t: t.Wav2Vec2Model(
            t.Wav2Vec2Config(**_AUDIO)
        ),
        "audio",
        ((1, 1600), (2, 4000)),
    ),
    # ALiBi: a [heads, 1, max] bias cut at run-time starts (the dynamo export's sym_max)
    "mpt": _text(lambda t: t.MptModel(t.MptConfig(d_model=64, n_layers=2, n_heads=4, vocab_size=512))),
    # relative attention whose token-type scores are split into one-column pieces; its
    # position indexing is the traced length's (onnxruntime fails at another), so 16 only
    "funnel": Spec(
        lambda t: t.FunnelModel(
            t.FunnelConfig(d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1], vocab_size=512)
        ),
        "text",
        ((1, 16), (3, 16)),
    ),
    "gemma2": _text(
        lambda t: t.Gemma2Model(t.Gemma2Config(num_key_value_heads=2, head_dim=16, sliding_window=8, **_TEXT))
    ),
    "phi3": _text(lambda t: t.Phi3Model(t.Phi3Config(num_key_value_heads=2, pad_token_id=0, **_TEXT))),
    "codegen": _text(
        lambda t: t.CodeGenModel(
            t.CodeGenConfig(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, vocab_size=512, n_positions=128)
        )
    ),
    "squeezebert": _text(lambda t: t.SqueezeBertModel(t.SqueezeBertConfig(embedding_size=64, **_TEXT))),
    "xlnet": Spec(
        lambda t: t.XLNetModel(t.XLNetConfig(d_model=64, n_layer=2, n_head=4, d_inner=128, vocab_size=512)),
        "text",
        ((1, 5), (2, 16)),
        exporters=("ts",),  # the dynamo exporter fails to decompose it (torch 2.13)
    ),
    "siglip_vision": _image(
        lambda t: t.SiglipVisionModel(t.SiglipVisionConfig(image_size=64, patch_size=8, **_SMALL))
    ),
    "dpt": _image(
        lambda t: t.DPTModel(t.DPTConfig(image_size=64, patch_size=8, backbone_out_indices=[0, 1], **_SMALL))
    ),
    "pvt_v2": _image(
        lambda t: t.PvtV2Model(
            t.PvtV2Config(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_attention_heads=[1, 2, 4, 8])
        )
    ),
}


def inputs(spec: Spec, shape: tuple[int, ...], rng) -> dict:
    """Random inputs of a `spec` model at one of its `shapes`, by input name (numpy arrays; the
    text models' first row right-padded, so the attention mask is real)."""
    import numpy as np

    if spec.kind == "text":
        batch, seq = shape
        mask = np.ones((batch, seq), np.int64)
        mask[0, seq - seq // 3 :] = 0
        return {"input_ids": rng.integers(1, 500, shape).astype(np.int64), "attention_mask": mask}
    if spec.kind == "image":
        batch, height, width = shape
        return {"pixel_values": rng.standard_normal((batch, 3, height, width)).astype(np.float32)}
    return {"input_values": rng.standard_normal(shape).astype(np.float32)}


def model_path(name: str, exporter: str) -> Path:
    return OUT / f"{name}_{exporter}.onnx"


def _wrapped(torch, model, kind: str):
    """The model behind a forward of plain tensors returning its first output (the last hidden
    state, or the segmentation logits), as an application calls it."""
    use_cache = "use_cache" in model.forward.__code__.co_varnames

    class Text(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            keywords = {"use_cache": False} if use_cache else {}
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, return_dict=True, **keywords
            )[0]

    class OneInput(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            keyword = "pixel_values" if kind == "image" else "input_values"
            return self.model(**{keyword: x}, return_dict=True)[0]

    return (Text() if kind == "text" else OneInput()).eval()


def export(name: str, exporter: str) -> Path:
    """Model `name` exported by `exporter` ("ts" or "dynamo"), unless its file exists."""
    path = model_path(name, exporter)
    if path.exists():
        return path
    import torch
    import transformers

    spec = MODELS[name]
    torch.manual_seed(0)
    model = _wrapped(torch, spec.build(transformers).eval(), spec.kind)
    if spec.kind == "text":
        args = (torch.randint(1, 500, (2, 16)), torch.ones(2, 16, dtype=torch.long))
        names, axes = ["input_ids", "attention_mask"], {0: "batch", 1: "seq"}
    elif spec.kind == "image":
        size = spec.shapes[0][1]
        args = (torch.randn(2, 3, size, size),)
        names, axes = ["pixel_values"], {0: "batch"}
        if spec.dynamic_image:
            axes = {0: "batch", 2: "height", 3: "width"}
    else:
        args = (torch.randn(2, spec.shapes[-1][1]),)
        names, axes = ["input_values"], {0: "batch", 1: "samples"}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if exporter == "ts":
                torch.onnx.export(
                    model, args, str(partial), input_names=names, output_names=["out"],
                    dynamic_axes={input_name: axes for input_name in names}, opset_version=17, dynamo=False,
                )
            else:
                auto = {axis: torch.export.Dim.AUTO for axis in axes}
                parameters = names if spec.kind == "text" else ["x"]
                torch.onnx.export(
                    model, args, str(partial), input_names=names, output_names=["out"],
                    dynamic_shapes={parameter: auto for parameter in parameters}, dynamo=True,
                    external_data=False,
                )
    except BaseException:
        partial.unlink(missing_ok=True)  # a failed export leaves no file behind
        raise
    partial.replace(path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="models to export (default: all)")
    names = parser.parse_args().names or list(MODELS)
    for name in names:
        for exporter in MODELS[name].exporters:
            print(export(name, exporter))
    return 0


if __name__ == "__main__":
    sys.exit(main())
