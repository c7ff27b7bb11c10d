"""Regenerate the PyTorch-exported models in this folder (needs torch, which niroc does not
depend on: `python -m venv /tmp/tvenv && /tmp/tvenv/bin/pip install torch==2.13.0 onnx
onnxscript && /tmp/tvenv/bin/python testdata/pytorch/export.py`).

Real exporter output, both exporters (TorchScript `dynamo=False`, opset 17, with dynamic axes;
`dynamo=True`, opset 18): a 2-layer bidirectional LSTM with a linear head (dynamic seq and
batch), a 2-layer TransformerEncoder over an Embedding (its TorchScript export bakes the traced
sizes into the attention reshapes, so it runs only at the traced shape), and a small CNN
(Conv, BatchNorm, GELU, MaxPool, strided Conv, SiLU, adaptive average pool, Linear, softmax)
with a dynamic batch. tests/backends/mlir/test_mlir_pytorch_exports.py compiles each with
niroc and compares IREE's results with onnxruntime's.
"""

import os

import torch
import torch.nn as nn

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


MODELS = [
    ("lstm", LSTMNet().eval(), (torch.randn(7, 2, 16),), {"x": {0: "seq", 1: "batch"}}),
    ("encoder", Encoder().eval(), (torch.randint(0, 100, (2, 9)),), {"ids": {0: "batch", 1: "seq"}}),
    ("convnet", ConvNet().eval(), (torch.randn(2, 3, 32, 32),), {"x": {0: "batch"}}),
]

for name, model, args, axes in MODELS:
    (input_name,) = axes
    torch.onnx.export(
        model, args, os.path.join(HERE, f"{name}.onnx"), input_names=[input_name],
        output_names=["out"], dynamic_axes=axes, dynamo=False, opset_version=17,
    )
    torch.onnx.export(
        model, args, os.path.join(HERE, f"{name}_dynamo.onnx"), input_names=[input_name],
        output_names=["out"], dynamic_shapes={input_name: {axis: torch.export.Dim.AUTO for axis in axes[input_name]}},
        dynamo=True, opset_version=18,
    )
