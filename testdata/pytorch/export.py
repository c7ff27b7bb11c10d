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
as in diffusion UNets) with a dynamic batch, height and width.

`MORE`, built from a fresh seed after those: `mobilenet_hw` (MobileNetV3 inverted residual with
hardswish, depthwise Conv, squeeze-excite with a hardsigmoid gate, then an EfficientNet MBConv
with SiLU and a sigmoid SE; eval BatchNorm with trained-looking statistics; dynamic batch, height,
width), `resnet` (BasicBlocks, residual adds, AdaptiveAvgPool2d, flatten, Linear; dynamic batch),
`llama` (RMSNorm, rotary sin/cos tables sliced by the sequence length, rotate_half, grouped-query
attention by repeat_interleave, triu causal mask, SwiGLU; dynamic batch and sequence), `whisper`
(Conv1d, strided Conv1d, GELU, sinusoidal positions sliced to the frame count, Whisper's own
attention code; dynamic batch and frames), `t5` (bucketed relative position bias: log, min,
where, Embedding; dynamic batch and sequence), `yolo_hw` (nearest upsample, concat, sigmoid, box
decode against a meshgrid of the feature-map size; dynamic batch, height, width), `gru`
(Embedding, 2-layer bidirectional batch-first GRU, tanh bridge of the final states; dynamic
batch and sequence), `misc2` (einsum, flip, roll, one_hot, masked_fill, floor_divide, remainder,
scatter_add of an argsort, reflect pad, mish/softplus/elu/celu/leaky_relu, atan2, cdist, erf,
bilinear align_corners and bicubic upsampling, var_mean, norm, unfold on [batch, 6, 8]),
`boolindex` (x[x > 0], mask-selected rows, masked assignment, nonzero; also by dynamo, whose
export flattens a dynamic mask by a Reshape to [-1]), `ssd` (Mamba-2's segment sums: pairwise
differences of a CumSum, which IREE 3.13 miscompiled when fused), `padded_encoder` (a
TransformerEncoder with `src_key_padding_mask = ids == 0`: the mask's reshape to
[b, heads, -1, t] needs symbolic dims; the TorchScript export bakes the traced length 10 into
it, so it runs at that length, any batch). `detr_hw` (DETR's sine position
embedding: `y[:, -1:, :]` of a dynamic dim, typed 1 by symbolic dims). `logmel` (+ dynamo;
Whisper's log-mel front end on [batch, samples] audio, both dynamic: ONNX's shape inference
leaves STFT of a dynamic-length signal untyped, symbolic dims types it; the TorchScript export
feeds STFT the rank-2 signal, which onnxruntime and niroc read as real). `embedding_bag`
(nn.EmbeddingBag with offsets and 2-D, sum/mean/max: a Loop over the bags whose trip count is
known only at run time; dynamic batch and bag size; + dynamo, whose Loops append each bag's row
to a sequence, SequenceEmpty before and ConcatFromSequence after). `bert_embeddings` (Hugging
Face's BERT-family embeddings: `position_ids[:, :seq]` of a [1, max_positions] buffer added to
the token embeddings; dynamic batch and sequence; + dynamo, which declares every initializer
in value_info). `convnext_hf_dynamo`: Hugging Face's ConvNextModel (one stage of one block,
random weights) as the default dynamo exporter writes it (opset 20, dynamic batch); needs
transformers.

tests/backends/mlir/test_mlir_pytorch_exports.py compiles each with niroc and compares IREE's
results with onnxruntime's. `export.py NAME...` exports only the named models.
"""

import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ONLY = set(sys.argv[1:])
"""Names to export (all when none is given); every model is still built, so the weights of the
others stay as they were."""
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


class PaddedEncoder(nn.Module):
    """A BERT-style encoder whose padding mask comes from the ids (pad id 0), passed as
    `src_key_padding_mask`: the export reshapes the [b, t] mask to [b * heads, 1, t] and views
    it as [b, heads, -1, t], whose -1 (1 in fact) only symbolic dims can tell."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0
        )
        self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.emb = nn.Embedding(40, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, ids):
        return self.out(self.enc(self.emb(ids), src_key_padding_mask=ids == 0))


class BertEmbeddings(nn.Module):
    """Hugging Face's BERT-family embeddings (DistilBERT, ALBERT, ELECTRA, MobileBERT, DeBERTa
    as transformers writes them): the position ids are a [1, max_positions] buffer sliced to the
    sequence length, `position_ids[:, :seq]`, whose embeddings [1, seq, d] are added to the
    [batch, seq, d] token embeddings; then LayerNorm and a Linear head. ONNX's inference of that
    Slice (run-time end) leaves both dims unknown, the 1 among them."""

    def __init__(self, vocab=40, d=32, positions=64):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.position = nn.Embedding(positions, d)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)))
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, 10)

    def forward(self, ids):
        position_ids = self.position_ids[:, : ids.size(1)]
        return self.out(self.norm(self.word(ids) + self.position(position_ids)))


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


class SqueezeExcite(nn.Module):
    def __init__(self, c, r, act, gate):
        super().__init__()
        self.fc1 = nn.Conv2d(c, r, 1)
        self.fc2 = nn.Conv2d(r, c, 1)
        self.act, self.gate = act, gate

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class MobileNetV3(nn.Module):
    """Stem, an inverted-residual block with hardswish, a depthwise conv, squeeze-excite with a
    hardsigmoid gate, and an EfficientNet MBConv block (SiLU, SE with a sigmoid gate)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(32, 32, 5, padding=2, groups=32, bias=False), nn.BatchNorm2d(32), nn.Hardswish())
        self.se = SqueezeExcite(32, 8, nn.ReLU(), nn.Hardsigmoid())
        self.project = nn.Sequential(nn.Conv2d(32, 16, 1, bias=False), nn.BatchNorm2d(16))
        self.mb_expand = nn.Sequential(nn.Conv2d(16, 48, 1, bias=False), nn.BatchNorm2d(48), nn.SiLU())
        self.mb_dw = nn.Sequential(nn.Conv2d(48, 48, 3, stride=2, padding=1, groups=48, bias=False), nn.BatchNorm2d(48), nn.SiLU())
        self.mb_se = SqueezeExcite(48, 4, nn.SiLU(), nn.Sigmoid())
        self.mb_project = nn.Sequential(nn.Conv2d(48, 24, 1, bias=False), nn.BatchNorm2d(24))
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.se(self.dw(self.expand(x))))
        x = self.mb_project(self.mb_se(self.mb_dw(self.mb_expand(x))))
        return self.head(F.hardswish(x.mean((2, 3))))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 32, 1))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def trained_batchnorm(model):
    """Eval-mode BatchNorm with non-trivial running statistics, as a trained net has."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(v + self.eps))


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Llama(nn.Module):
    """One Llama decoder layer: RMSNorm, rotary embeddings from sin/cos tables sliced by the
    sequence length, grouped-query attention (4 query heads, 2 KV heads, repeat_interleave),
    an explicit triu causal mask, SwiGLU MLP."""

    def __init__(self, vocab=64, d=32, heads=4, kv_heads=2, max_len=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.n1, self.n2, self.nf = RMSNorm(d), RMSNorm(d), RMSNorm(d)
        hd = d // heads
        self.heads, self.kv_heads, self.hd = heads, kv_heads, hd
        self.q = nn.Linear(d, heads * hd, bias=False)
        self.k = nn.Linear(d, kv_heads * hd, bias=False)
        self.v = nn.Linear(d, kv_heads * hd, bias=False)
        self.o = nn.Linear(heads * hd, d, bias=False)
        self.gate = nn.Linear(d, 64, bias=False)
        self.up = nn.Linear(d, 64, bias=False)
        self.down = nn.Linear(64, d, bias=False)
        self.lm = nn.Linear(d, vocab, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.outer(torch.arange(max_len).float(), inv)
        emb = torch.cat((freqs, freqs), -1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        h = self.n1(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        cos, sin = self.cos[:t][None, None], self.sin[:t][None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        s = q @ k.transpose(-2, -1) / math.sqrt(self.hd) + mask
        a = torch.softmax(s, -1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        h = self.n2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return self.lm(self.nf(x))


class WhisperEncoder(nn.Module):
    """Whisper's audio encoder on [batch, mels, frames]: Conv1d, GELU, Conv1d stride 2, GELU,
    sinusoidal positions sliced to the frame count, one pre-norm block with attention written as
    Whisper's own code does (view(*q.shape[:2], heads, -1), scale split over q and k), GELU MLP."""

    def __init__(self, mels=16, d=32, heads=4, max_frames=64):
        super().__init__()
        self.heads = heads
        self.c1 = nn.Conv1d(mels, d, 3, padding=1)
        self.c2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        pos = torch.arange(max_frames).float()[:, None] / (10000 ** (torch.arange(0, d, 2).float() / d))
        self.register_buffer("pos", torch.cat([pos.sin(), pos.cos()], 1), persistent=False)
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.lnf = nn.LayerNorm(d)

    def forward(self, mel):
        x = F.gelu(self.c2(F.gelu(self.c1(mel)))).permute(0, 2, 1)
        x = x + self.pos[: x.shape[1]]
        h = self.ln1(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        scale = (q.shape[-1] // self.heads) ** -0.25
        q = q.view(*q.shape[:2], self.heads, -1).permute(0, 2, 1, 3) * scale
        k = k.view(*k.shape[:2], self.heads, -1).permute(0, 2, 3, 1) * scale
        v = v.view(*v.shape[:2], self.heads, -1).permute(0, 2, 1, 3)
        w = (q @ k).float().softmax(-1)
        x = x + self.o((w @ v).permute(0, 2, 1, 3).flatten(start_dim=2))
        x = x + self.mlp(self.ln2(x))
        return self.lnf(x)


class T5Attention(nn.Module):
    """T5 self-attention with a bucketed relative position bias (bidirectional buckets: sign,
    exact small offsets, log-spaced large ones, clamp, where, Embedding) over a dynamic length."""

    def __init__(self, d=32, heads=4, buckets=16, max_distance=32):
        super().__init__()
        self.heads, self.buckets, self.max_distance = heads, buckets, max_distance
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.rel = nn.Embedding(buckets, heads)

    def bucket(self, rel):
        n = self.buckets // 2
        ret = (rel > 0).to(torch.long) * n
        rel = torch.abs(rel)
        exact = n // 2
        small = rel < exact
        large = exact + (
            torch.log(rel.float() / exact) / math.log(self.max_distance / exact) * (n - exact)
        ).to(torch.long)
        large = torch.min(large, torch.full_like(large, n - 1))
        return ret + torch.where(small, rel, large)

    def forward(self, x):
        b, t, d = x.shape
        ctx = torch.arange(t, dtype=torch.long)[:, None]
        mem = torch.arange(t, dtype=torch.long)[None, :]
        bias = self.rel(self.bucket(mem - ctx)).permute(2, 0, 1).unsqueeze(0)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).chunk(3, -1))
        s = q @ k.transpose(-1, -2) + bias
        a = torch.softmax(s.float(), -1) @ v
        return self.o(a.transpose(1, 2).reshape(b, t, d))


class YoloHead(nn.Module):
    """A two-scale YOLO neck and head: strided backbone, nearest upsample + concat, 1x1 heads,
    sigmoid, and box decoding against a grid from meshgrid/arange of the feature-map size."""

    def __init__(self, anchors=2, classes=3):
        super().__init__()
        self.b1 = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU())
        self.b2 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.SiLU())
        self.lat = nn.Conv2d(16, 8, 1)
        self.fuse = nn.Sequential(nn.Conv2d(16, 8, 3, 1, 1), nn.SiLU())
        self.no = 5 + classes
        self.na = anchors
        self.h1 = nn.Conv2d(8, anchors * self.no, 1)
        self.h2 = nn.Conv2d(16, anchors * self.no, 1)
        self.register_buffer("anchor", torch.tensor([[10.0, 13.0], [16.0, 30.0]]))

    def decode(self, p, stride):
        b, _, h, w = p.shape
        p = p.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        yv, xv = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, 1, h, w, 2).float()
        xy = (p[..., :2] * 2 - 0.5 + grid) * stride
        wh = (p[..., 2:4] * 2) ** 2 * self.anchor.view(1, self.na, 1, 1, 2)
        return torch.cat((xy, wh, p[..., 4:]), -1).view(b, -1, self.no)

    def forward(self, x):
        f1 = self.b1(x)
        f2 = self.b2(f1)
        up = F.interpolate(self.lat(f2), scale_factor=2.0, mode="nearest")
        p1 = self.h1(self.fuse(torch.cat([f1, up], 1)))
        p2 = self.h2(f2)
        return torch.cat([self.decode(p1, 2.0), self.decode(p2, 4.0)], 1)


class GRUEncoder(nn.Module):
    """A seq2seq GRU encoder: Embedding, 2-layer bidirectional GRU (batch first), a tanh bridge
    from the final hidden states to the decoder's initial state."""

    def __init__(self, vocab=40, d=16, hidden=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.bridge = nn.Linear(2 * hidden, hidden)

    def forward(self, ids):
        out, h = self.gru(self.emb(ids))
        state = torch.tanh(self.bridge(torch.cat([h[-2], h[-1]], -1)))
        return out, state


class LogMel(nn.Module):
    """Whisper's log-mel front end from the waveform (STFT, power, mel matmul, log10 with the
    dynamic-range clamp), real-valued STFT output for the TorchScript exporter."""

    def __init__(self, n_fft=64, hop=16, mels=16):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("filters", torch.rand(mels, n_fft // 2 + 1) * 0.1)

    def forward(self, audio):
        spec = torch.stft(audio, self.n_fft, self.hop, window=self.window, center=False, return_complex=False)
        mag = spec[..., :-1, :].pow(2).sum(-1)
        logmel = torch.clamp(self.filters @ mag, min=1e-10).log10()
        logmel = torch.maximum(logmel, logmel.max() - 8.0)
        return (logmel + 4.0) / 4.0


class DetrPos(nn.Module):
    """DETR's sine position embedding from a padding mask (cumsum, normalize, dim_t power,
    stack of sin/cos on even/odd channels, flatten), added to a small backbone's features."""

    def __init__(self, c=16, feats=8):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.ReLU())
        self.feats = feats
        self.proj = nn.Conv2d(c, 2 * feats, 1)

    def forward(self, x):
        f = self.backbone(x)
        mask = f[:, 0] > -1.0
        y = mask.cumsum(1, dtype=torch.float32)
        xe = mask.cumsum(2, dtype=torch.float32)
        y = y / (y[:, -1:, :] + 1e-6) * 2 * math.pi
        xe = xe / (xe[:, :, -1:] + 1e-6) * 2 * math.pi
        dim_t = torch.arange(self.feats, dtype=torch.float32)
        dim_t = 10000 ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / self.feats)
        px = xe[:, :, :, None] / dim_t
        py = y[:, :, :, None] / dim_t
        px = torch.stack((px[:, :, :, 0::2].sin(), px[:, :, :, 1::2].cos()), dim=4).flatten(3)
        py = torch.stack((py[:, :, :, 0::2].sin(), py[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos = torch.cat((py, px), dim=3).permute(0, 3, 1, 2)
        return (self.proj(f) + pos).flatten(2).transpose(1, 2)


class SSD(nn.Module):
    """A Mamba-2 style scan in its quadratic form on [batch, seq, 16]: causal depthwise Conv1d,
    segment sums of the log decays (cumsum, cs[:, :, None] - cs[:, None, :]), a tril mask of
    -inf, exp, a gated output."""

    def __init__(self, d=16):
        super().__init__()
        self.inp = nn.Linear(d, 3 * d)
        self.conv = nn.Conv1d(d, d, 4, groups=d, padding=3)
        self.A = nn.Parameter(-torch.rand(d))
        self.out = nn.Linear(d, d)

    def forward(self, x):
        t = x.shape[1]
        u, z, dt = self.inp(x).chunk(3, -1)
        u = F.silu(self.conv(u.transpose(1, 2))[..., :t].transpose(1, 2))
        cs = (F.softplus(dt) * self.A).cumsum(1)
        segments = cs[:, :, None, :] - cs[:, None, :, :]
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool))[None, :, :, None]
        decay = torch.exp(segments.masked_fill(~causal, float("-inf")))
        return self.out((decay * u[:, None, :, :]).sum(2) * F.silu(z))


class BoolIndex(nn.Module):
    """Boolean-mask indexing on [batch, 7]: x[x > 0], rows selected by a mask, an in-place
    masked assignment (index_put), nonzero; data-dependent lengths throughout."""

    def forward(self, x):
        pos = x[x > 0]
        rows = x[x.sum(1) > 0]
        y = x.clone()
        y[y < -1] = 0.0
        return pos.sum().reshape(1) + rows.sum(), y, torch.nonzero(x > 1.0)


class Misc2(nn.Module):
    """Ops found in real models on a [batch, 6, 8] input."""

    def forward(self, x):
        idx = x.argmax(-1)
        return (
            torch.einsum("bij,bkj->bik", x, x),
            torch.flip(x, [1]),
            torch.roll(x, 2, 2),
            F.one_hot(idx, 8).float(),
            x.masked_fill(torch.tril(torch.ones(6, 8, dtype=torch.bool)), -1.0),
            torch.floor_divide(idx, 3) + torch.remainder(idx, 3),
            torch.zeros_like(x).scatter_add(2, x.argsort(-1), x),
            F.pad(x, (2, 2), mode="reflect"),
            F.mish(x) + F.softplus(x) + F.elu(x) + F.celu(x, 0.5) + F.leaky_relu(x, 0.2),
            torch.atan2(x, x.flip(2)),
            torch.cdist(x, x),
            torch.erf(x),
            F.interpolate(x[:, None], scale_factor=2.0, mode="bilinear", align_corners=True),
            F.interpolate(x[:, None], scale_factor=2.0, mode="bicubic", align_corners=False),
            torch.var_mean(x, dim=2)[0],
            x.norm(dim=-1),
            F.unfold(x[:, None], (2, 3)),
        )


class EmbeddingBags(nn.Module):
    """`nn.EmbeddingBag` as recommendation models (DLRM) use it, on [batch, bag] ids: flat ids
    with offsets (bags of uneven sizes, some empty when bag = 1; sum) and the 2-D form (mean,
    max). The TorchScript export loops over the bags with a run-time trip count."""

    def __init__(self):
        super().__init__()
        self.flat = nn.EmbeddingBag(40, 8, mode="sum")
        self.mean = nn.EmbeddingBag(40, 8, mode="mean")
        self.max = nn.EmbeddingBag(40, 8, mode="max")

    def forward(self, ids):
        offsets = torch.arange(ids.shape[0]) * ids.shape[1] // 2
        flat = self.flat(ids.reshape(-1), offsets)
        return torch.cat([flat, self.mean(ids), self.max(ids)], 1)


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

MULTI_OUTPUT = {"misc", "misc2", "gru", "boolindex"}
"""Models whose outputs keep the exporter's names (the others' one output is `out`)."""


def export_torchscript(name, model, args, axes):
    (input_name,) = axes
    torch.onnx.export(
        model, args, os.path.join(HERE, f"{name}.onnx"), input_names=[input_name],
        output_names=None if name in MULTI_OUTPUT else ["out"], dynamic_axes=axes, dynamo=False,
        opset_version=17,
    )


def export_dynamo(name, model, args, axes, external_data):
    (input_name,) = axes
    torch.onnx.export(
        model, args, os.path.join(HERE, f"{name}_dynamo.onnx"), input_names=[input_name],
        output_names=None if name in MULTI_OUTPUT else ["out"],
        dynamic_shapes={input_name: {axis: torch.export.Dim.AUTO for axis in axes[input_name]}},
        dynamo=True, opset_version=18, external_data=external_data,
    )


for name, model, args, axes in MODELS:
    if not ONLY or name in ONLY:
        export_torchscript(name, model, args, axes)
        export_dynamo(name, model, args, axes, external_data=True)

for name, model, args, axes in TORCHSCRIPT_ONLY:
    if not ONLY or name in ONLY:
        export_torchscript(name, model, args, axes)

# Built after the models above, from a fresh seed, so that adding them left those as they were.
torch.manual_seed(0)
MORE = [
    ("mobilenet_hw", trained_batchnorm(MobileNetV3().eval()), (torch.randn(2, 3, 32, 32),), {"x": {0: "batch", 2: "h", 3: "w"}}),
    ("resnet", trained_batchnorm(ResNet().eval()), (torch.randn(2, 3, 32, 32),), {"x": {0: "batch"}}),
    ("llama", Llama().eval(), (torch.randint(0, 64, (2, 12)),), {"ids": {0: "batch", 1: "seq"}}),
    ("whisper", WhisperEncoder().eval(), (torch.randn(2, 16, 40),), {"mel": {0: "batch", 2: "frames"}}),
    ("t5", T5Attention().eval(), (torch.randn(2, 10, 32),), {"x": {0: "batch", 1: "seq"}}),
    ("yolo_hw", YoloHead().eval(), (torch.randn(1, 3, 32, 32),), {"x": {0: "batch", 2: "h", 3: "w"}}),
    ("gru", GRUEncoder().eval(), (torch.randint(0, 40, (2, 9)),), {"ids": {0: "batch", 1: "seq"}}),
    ("logmel", LogMel().eval(), (torch.randn(2, 640),), {"audio": {0: "batch", 1: "samples"}}),
    ("detr_hw", DetrPos().eval(), (torch.randn(2, 3, 24, 32),), {"x": {0: "batch", 2: "h", 3: "w"}}),
    ("misc2", Misc2().eval(), (torch.randn(3, 6, 8),), {"x": {0: "batch"}}),
    ("boolindex", BoolIndex().eval(), (torch.randn(5, 7),), {"x": {0: "batch"}}),
    ("ssd", SSD().eval(), (torch.randn(2, 9, 16),), {"x": {0: "batch", 1: "seq"}}),
    ("padded_encoder", PaddedEncoder().eval(), (torch.randint(1, 40, (2, 10)),), {"ids": {0: "batch", 1: "seq"}}),
    ("embedding_bag", EmbeddingBags().eval(), (torch.randint(0, 40, (3, 4)),), {"ids": {0: "batch", 1: "bag"}}),
    ("bert_embeddings", BertEmbeddings().eval(), (torch.randint(0, 40, (2, 9)),), {"ids": {0: "batch", 1: "seq"}}),
]
DYNAMO_TOO = {"logmel", "boolindex", "embedding_bag", "bert_embeddings"}
"""The ones also exported by dynamo (it keeps their dynamic dims); one file each, no .data."""

for name, model, args, axes in MORE:
    if not ONLY or name in ONLY:
        export_torchscript(name, model, args, axes)
        if name in DYNAMO_TOO:
            export_dynamo(name, model, args, axes, external_data=False)


def export_hf_convnext():
    """Hugging Face's ConvNextModel, one stage of one block (16 channels), random weights, by the
    dynamo exporter at its default opset: its 7x7 depthwise convolution of a dynamic batch is
    what made IREE 3.13 compile a dispatch past its 64 push constants (`windows.py`)."""
    import transformers

    torch.manual_seed(0)
    config = transformers.ConvNextConfig(hidden_sizes=[16], depths=[1], num_stages=1)
    inner = transformers.ConvNextModel(config).eval()

    class LastHiddenState(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = inner

        def forward(self, x):
            return self.model(pixel_values=x, return_dict=True).last_hidden_state

    torch.onnx.export(
        LastHiddenState().eval(), (torch.randn(2, 3, 64, 64),),
        os.path.join(HERE, "convnext_hf_dynamo.onnx"), input_names=["pixel_values"],
        output_names=["out"], dynamic_shapes={"x": {0: torch.export.Dim.AUTO}}, dynamo=True,
        external_data=False,
    )


if not ONLY or "convnext_hf" in ONLY:
    export_hf_convnext()
