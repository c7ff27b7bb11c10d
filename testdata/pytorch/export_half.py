"""Export fp16 and bf16 models the way users get them: a PyTorch module cast with `.half()` /
`.to(torch.bfloat16)`, then `torch.onnx.export` with both exporters (TorchScript `dynamo=False`
at opset 17, and `dynamo=True`). Seeded random weights.

    python testdata/pytorch/export_half.py OUT_DIR

writes OUT_DIR/{lenet,block}_{f16,bf16}_{script,dynamo}.onnx (dynamo's weights in a `.data`
file beside). `lenet`: LeNet-5 style CNN, two Conv+ReLU+MaxPool stages and three Linear layers on
[4, 1, 28, 28]. `block`: a pre-norm transformer block on [2, 8, 32]: LayerNorm, 4-head self
attention (one qkv Linear, split, softmax(q k^T / sqrt(d)) v), residual, LayerNorm, Linear,
exact GELU, Linear, residual. tests/backends/mlir/test_half_precision_models.py makes them at
test time (torch and onnxscript are in the `llm` extra). Takes ~10 s idle (importing torch).
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(256, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


class Block(nn.Module):
    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        batch, length, width = x.shape
        head = width // self.heads
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        q, k, v = (t.reshape(batch, length, self.heads, head).transpose(1, 2) for t in (q, k, v))
        attention = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(head), dim=-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(batch, length, width))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


MODELS = {"lenet": (LeNet, (4, 1, 28, 28)), "block": (Block, (2, 8, 32))}


def export_all(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    for name, (make, shape) in MODELS.items():
        for tag, dtype in DTYPES.items():
            torch.manual_seed(0)
            module = make().eval().to(dtype)
            example = (torch.randn(*shape, dtype=dtype),)
            torch.onnx.export(
                module,
                example,
                folder / f"{name}_{tag}_script.onnx",
                dynamo=False,
                opset_version=17,
            )
            torch.onnx.export(
                module, example, folder / f"{name}_{tag}_dynamo.onnx", dynamo=True, verbose=False
            )


if __name__ == "__main__":
    export_all(Path(sys.argv[1]))
