"""A YOLOv8n-style detector, built node by node as ultralytics' dynamic ONNX export lays it out
(opset 17; batch, height and width dynamic; BatchNorm fused into the convolutions; SiLU as
x * Sigmoid(x)):

    backbone  Conv-SiLU blocks (3x3, stride 2), C2f blocks (1x1 Conv, Split in two, Bottlenecks
              of two 3x3 Convs with a residual Add, Concat of every piece, 1x1 Conv), SPPF (1x1
              Conv, three chained 5x5 MaxPools, Concat, 1x1 Conv)
    neck      nearest Resize x2 upsampling, Concat with the backbone's feature maps, C2f; strided
              Convs back down (a PAN)
    head      per level a box branch (two 3x3 Convs, 1x1 Conv to 4 x 16 bins) and a class branch,
              Concat, Reshape to [batch, 4 * 16 + classes, -1], Concat over the three levels,
              Split into boxes and classes; DFL: Reshape to [batch, 4, 16, -1], Transpose,
              Softmax over the bins, a 1x1 Conv with weights 0..15 (the expected bin), Reshape
              to [batch, 4, -1]; Sigmoid of the class scores; Concat.

`python testdata/realmodels/yolov8.py OUT.onnx [WIDTH]` writes the model; tests build it with
`yolov8_model()`. WIDTH scales the channels (yolov8n is 0.25 of the base 64..1024).
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BINS = 16
"""ultralytics' reg_max: each box side is a distribution over 16 bins."""


class _Builder:
    """Nodes and weights of one graph, with unique names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: dict[str, np.ndarray] = {}
        self.count = 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def weight(self, kind: str, value: np.ndarray) -> str:
        name = self.name(kind)
        self.weights[name] = value
        return name

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attributes) -> list[str]:
        name = self.name(op.lower())
        results = [f"{name}_out{index}" for index in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, results, name=name, **attributes))
        return results

    def conv(
        self, x: str, c_in: int, c_out: int, kernel: int = 1, stride: int = 1, act: bool = True
    ) -> str:
        """Conv (BatchNorm folded into its weight and bias, as the export does) + SiLU."""
        scale = np.sqrt(2.0 / (c_in * kernel * kernel))
        w = self.weight(
            "w",
            (self.rng.standard_normal((c_out, c_in, kernel, kernel)) * scale).astype(np.float32),
        )
        b = self.weight("b", (self.rng.standard_normal(c_out) * 0.1).astype(np.float32))
        pad = kernel // 2
        (y,) = self.node(
            "Conv",
            [x, w, b],
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
        )
        if not act:
            return y
        (gate,) = self.node("Sigmoid", [y])
        return self.node("Mul", [y, gate])[0]

    def c2f(self, x: str, c_in: int, c_out: int, blocks: int, shortcut: bool) -> str:
        hidden = c_out // 2
        y = self.conv(x, c_in, 2 * hidden)
        split = self.weight("split", np.array([hidden, hidden], np.int64))
        pieces = self.node("Split", [y, split], outputs=2, axis=1)
        for _ in range(blocks):
            inner = self.conv(self.conv(pieces[-1], hidden, hidden, 3), hidden, hidden, 3)
            pieces.append(self.node("Add", [pieces[-1], inner])[0] if shortcut else inner)
        (joined,) = self.node("Concat", pieces, axis=1)
        return self.conv(joined, (2 + blocks) * hidden, c_out)

    def sppf(self, x: str, c_in: int, c_out: int) -> str:
        hidden = c_in // 2
        y = self.conv(x, c_in, hidden)
        pooled = [y]
        for _ in range(3):
            pooled.append(
                self.node(
                    "MaxPool", [pooled[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]
                )[0]
            )
        (joined,) = self.node("Concat", pooled, axis=1)
        return self.conv(joined, 4 * hidden, c_out)

    def upsample(self, x: str) -> str:
        scales = self.weight("scales", np.array([1, 1, 2, 2], np.float32))
        return self.node(
            "Resize",
            [x, "", scales],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )[0]

    def concat(self, values: list[str], axis: int = 1) -> str:
        return self.node("Concat", values, axis=axis)[0]


def yolov8_model(
    width: float = 0.25, classes: int = 80, seed: int = 0, dims=("batch", "height", "width")
) -> onnx.ModelProto:
    c1, c2, c3, c4, c5 = (max(8, int(base * width)) for base in (64, 128, 256, 512, 1024))
    net = _Builder(seed)
    x = net.conv("images", 3, c1, 3, 2)  # P1/2
    x = net.conv(x, c1, c2, 3, 2)  # P2/4
    x = net.c2f(x, c2, c2, 1, True)
    x = net.conv(x, c2, c3, 3, 2)  # P3/8
    p3 = net.c2f(x, c3, c3, 2, True)
    x = net.conv(p3, c3, c4, 3, 2)  # P4/16
    p4 = net.c2f(x, c4, c4, 2, True)
    x = net.conv(p4, c4, c5, 3, 2)  # P5/32
    x = net.c2f(x, c5, c5, 1, True)
    p5 = net.sppf(x, c5, c5)
    n4 = net.c2f(net.concat([net.upsample(p5), p4]), c5 + c4, c4, 1, False)
    n3 = net.c2f(net.concat([net.upsample(n4), p3]), c4 + c3, c3, 1, False)  # out P3
    d4 = net.c2f(net.concat([net.conv(n3, c3, c3, 3, 2), n4]), c3 + c4, c4, 1, False)  # out P4
    d5 = net.c2f(net.concat([net.conv(d4, c4, c4, 3, 2), p5]), c4 + c5, c5, 1, False)  # out P5
    box_width, class_width = max(16, c3 // 4, 4 * BINS), max(c3, min(classes, 100))
    levels = []
    flat_shape = net.weight("shape", np.array([0, 4 * BINS + classes, -1], np.int64))
    for feature, channels in ((n3, c3), (d4, c4), (d5, c5)):
        box = net.conv(net.conv(feature, channels, box_width, 3), box_width, box_width, 3)
        box = net.conv(box, box_width, 4 * BINS, 1, act=False)
        cls = net.conv(net.conv(feature, channels, class_width, 3), class_width, class_width, 3)
        cls = net.conv(cls, class_width, classes, 1, act=False)
        levels.append(net.node("Reshape", [net.concat([box, cls]), flat_shape])[0])
    joined = net.concat(levels, axis=2)
    split = net.weight("split", np.array([4 * BINS, classes], np.int64))
    box, cls = net.node("Split", [joined, split], outputs=2, axis=1)
    bins_shape = net.weight("shape", np.array([0, 4, BINS, -1], np.int64))
    (bins,) = net.node("Reshape", [box, bins_shape])
    (bins,) = net.node("Transpose", [bins], perm=[0, 2, 1, 3])
    (probabilities,) = net.node("Softmax", [bins], axis=1)
    expected_bin = net.weight("dfl", np.arange(BINS, dtype=np.float32).reshape(1, BINS, 1, 1))
    (distance,) = net.node("Conv", [probabilities, expected_bin], kernel_shape=[1, 1])
    sides_shape = net.weight("shape", np.array([0, 4, -1], np.int64))
    (distance,) = net.node("Reshape", [distance, sides_shape])
    (scores,) = net.node("Sigmoid", [cls])
    net.nodes.append(
        helper.make_node("Concat", [distance, scores], ["output0"], name="output", axis=1)
    )
    batch, height, width_dim = dims
    graph = helper.make_graph(
        net.nodes,
        "yolov8",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, height, width_dim])],
        [
            helper.make_tensor_value_info(
                "output0", TensorProto.FLOAT, [batch, 4 + classes, "anchors"]
            )
        ],
        [numpy_helper.from_array(value, name) for name, value in net.weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    width = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    onnx.save(yolov8_model(width), sys.argv[1])
