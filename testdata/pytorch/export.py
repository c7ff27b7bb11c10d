"""Regenerate the PyTorch-exported models in this folder (needs torch, which niroc does not
depend on: `python -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch==2.13.0 onnx
onnxscript && /tmp/tvenv/bin/python testdata/pytorch/export.py`).

Real exporter output, both exporters (TorchScript `dynamo=False`, opset 17, with dynamic axes;
`dynamo=True`, opset 18): a 2-layer bidirectional LSTM with a linear head (dynamic seq and
batch), a 2-layer TransformerEncoder over an Embedding (its TorchScript export bakes the traced
sizes into the attention reshapes, so it runs only at the traced shape), and a small CNN
(Conv, BatchNorm, GELU, MaxPool, strided Conv, SiLU, adaptive average pool, Linear, softmax)
with a dynamic batch. TorchScript only: a GPT-style decoder (causal
`scaled_dot_product_attention`, tanh GELU, dynamic batch and sequence), a small UNet (MaxPool,
ConvTranspose, Concat skip; dynamic batch) and a ViT (patch Conv, class token, pre-norm
encoder; dynamic batch), and `misc`: topk, sort, cumsum, where, argmax + gather, normalize,
clamp + std, logsumexp on a [batch, 7] input (nine outputs; sort exports as TopK with
K = Shape(x)[1]); `unet_hw` and `seg_hw` (depthwise Conv, bilinear resize back to the input
size) and `diff_hw` (GroupNorm, InstanceNorm, nearest upsampling, average pooling, PixelShuffle,
as in diffusion UNets) with a dynamic batch, height and width. tests/backends/mlir/test_mlir_pytorch_exports.py compiles each with
niroc and compares IREE's results with onnxruntime's.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, bidirectional=True)
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0
        )
        self.enc = nn.TransformerEncoder(layer, num_layers=2)
        self.emb = nn.Embedding(100, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, ids):
        return self.out(self.enc(self.emb(ids)))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(16, 4),
        )

    def forward(self, x):
        return torch.softmax(self.body(x), -1)


class GPT(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, layers=2, ctx=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(dict(
                ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d),
                ln2=nn.LayerNorm(d), fc=nn.Linear(d, 4 * d), out=nn.Linear(4 * d, d),
            ))
            for _ in range(layers)
        )
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.heads = heads

    def forward(self, ids):
        b, t = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=-1)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + blk["proj"](y.transpose(1, 2).reshape(b, t, -1))
            x = x + blk["out"](F.gelu(blk["fc"](blk["ln2"](x)), approximate="tanh"))
        return self.head(self.lnf(x))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.d2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.u1 = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))

    def forward(self, x):
        a = self.d1(x)
        return self.u1(torch.cat([a, self.up(self.d2(a))], 1))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 32, 8, stride=8)
        self.cls = nn.Parameter(torch.zeros(1, 1, 32))
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        p = torch.cat([self.cls.expand(p.shape[0], -1, -1), p], 1)
        return self.head(self.enc(p)[:, 0])


class Seg(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU6(),
            nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Conv2d(8, 4, 1),
        )

    def forward(self, x):
        return F.interpolate(self.b(x), size=x.shape[-2:], mode="bilinear", align_corners=False)


class DiffusionBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 16, 3, padding=1)
        self.gn = nn.GroupNorm(4, 16)
        self.inorm = nn.InstanceNorm2d(16, affine=True)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)
        self.ps = nn.PixelShuffle(2)
        self.c3 = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        h = F.silu(self.gn(self.c1(x)))
        h = self.inorm(self.c2(h))
        h = F.avg_pool2d(F.interpolate(h, scale_factor=2.0, mode="nearest"), 2)
        return self.c3(self.ps(h)) + F.interpolate(x, scale_factor=2.0, mode="nearest")


class Misc(nn.Module):
    def forward(self, x):
        v, i = torch.topk(x, 3, dim=-1)
        am = torch.argmax(x, dim=-1, keepdim=True)
        return (
            v, i, torch.cumsum(x, dim=1), torch.where(x > 0, x, 0.1 * x), torch.gather(x, 1, am),
            F.normalize(x, dim=-1), torch.sort(x, dim=-1, descending=True).values,
            x.clamp(-0.5, 0.5).std(dim=1), torch.logsumexp(x, 1),
        )


TORCHSCRIPT_ONLY = [
    ("gpt", GPT().eval(), (torch.randint(0, 50, (2, 12)),), {"ids": {0: "batch", 1: "seq"}}),
    ("unet", UNet().eval(), (torch.randn(2, 3, 32, 32),), {"x": {0: "batch"}}),
    ("vit", ViT().eval(), (torch.randn(2, 3, 32, 32),), {"x": {0: "batch"}}),
    ("misc", Misc().eval(), (torch.randn(3, 7),), {"x": {0: "batch"}}),
    ("unet_hw", UNet().eval(), (torch.randn(2, 3, 32, 32),), {"x": {0: "batch", 2: "h", 3: "w"}}),
    ("seg_hw", Seg().eval(), (torch.randn(1, 3, 40, 56),), {"x": {0: "batch", 2: "h", 3: "w"}}),
    ("diff_hw", DiffusionBlock().eval(), (torch.randn(1, 4, 16, 16),), {"x": {0: "batch", 2: "h", 3: "w"}}),
]

MODELS = [
    ("lstm", LSTMNet().eval(), (torch.randn(7, 2, 16),), {"x": {0: "seq", 1: "batch"}}),
    ("encoder", Encoder().eval(), (torch.randint(0, 100, (2, 9)),), {"ids": {0: "batch", 1: "seq"}}),
    ("convnet", ConvNet().eval(), (torch.randn(2, 3, 32, 32),), {"x": {0: "batch"}}),
]

for name, model, args, axes in MODELS:
    (input_name,) = axes
    torch.onnx.export(
        model, args, os.path.join(HERE, f"{name}.onnx"), input_names=[input_name],
        output_names=None if name == "misc" else ["out"], dynamic_axes=axes, dynamo=False,
        opset_version=17,
    )
    torch.onnx.export(
        model, args, os.path.join(HERE, f"{name}_dynamo.onnx"), input_names=[input_name],
        output_names=["out"], dynamic_shapes={input_name: {axis: torch.export.Dim.AUTO for axis in axes[input_name]}},
        dynamo=True, opset_version=18,
    )

for name, model, args, axes in TORCHSCRIPT_ONLY:
    (input_name,) = axes
    torch.onnx.export(
        model, args, os.path.join(HERE, f"{name}.onnx"), input_names=[input_name],
        output_names=None if name == "misc" else ["out"], dynamic_axes=axes, dynamo=False,
        opset_version=17,
    )
