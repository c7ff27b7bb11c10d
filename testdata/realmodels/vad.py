"""A voice-activity detector in the form of a popular published export: the run-time length of
a feature map decides the rank of a value.

    input: float[batch, samples]   state: float[2, batch, 128]
    features = Conv(Unsqueeze(input, 1))                 # [batch, 128, frames], frames = samples / 64
    squeezed = If(Shape(features)[-1] == 1,
                  then: Squeeze(features, [-1])          # rank 2 [batch, 128]
                  else: Relu(features))                  # rank 3 [batch, 128, frames]
    restored = If(Size(Shape(squeezed)) == 2,            # the rank, known once the If is typed
                  then: Unsqueeze(squeezed, [-1])        # [batch, 128, 1]
                  else: Identity(squeezed))              # [batch, 128, frames]
    level = ReduceMean(restored, [1, 2])                 # [batch, 1, 1]
    level = Reshape(level, [-1, 1])                      # [batch, 1]
    new_state = Tanh(state * 0.5 + level)                # [2, batch, 128]
    probability = Sigmoid(MatMul(new_state[-1], w))     # [batch, 1]

The Ifs' outputs are declared with an element type and no shape, as the exporter writes it:
ONNX cannot type a value whose rank differs by branch. With `samples` dynamic the condition is
unknown until run time; with the inputs given static shapes it folds.

`python testdata/realmodels/vad.py OUT.onnx` writes the model; tests build it with `vad_model()`.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FRAME = 64


def _branch(op: str, inputs: list[str], output: str, name: str) -> onnx.GraphProto:
    """An If branch of one node whose output is declared without a shape, as exporters do."""
    node = helper.make_node(op, inputs, [output], name=f"{name}_{op.lower()}")
    return helper.make_graph(
        [node], name, [], [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)]
    )


def vad_model(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    weights = {
        "conv_w": (rng.standard_normal((128, 1, FRAME)) * 0.1).astype(np.float32),
        "conv_b": (rng.standard_normal(128) * 0.1).astype(np.float32),
        "head_w": (rng.standard_normal((128, 1)) * 0.2).astype(np.float32),
        "half": np.array(0.5, np.float32),
        "one": np.array(1, np.int64),
        "last": np.array(-1, np.int64),
        "axis1": np.array([1], np.int64),
        "axis_last": np.array([-1], np.int64),
        "two": np.array(2, np.int64),
        "column": np.array([-1, 1], np.int64),
    }
    then_branch = _branch("Squeeze", ["features", "axis_last"], "squeezed_then", "squeeze_frames")
    else_branch = _branch("Relu", ["features"], "squeezed_else", "keep_frames")
    unsqueeze_branch = _branch(
        "Unsqueeze", ["squeezed", "axis_last"], "restored_then", "restore_frames"
    )
    identity_branch = _branch("Identity", ["squeezed"], "restored_else", "frames_kept")
    nodes = [
        helper.make_node("Unsqueeze", ["input", "axis1"], ["signal"], name="unsqueeze"),
        helper.make_node(
            "Conv", ["signal", "conv_w", "conv_b"], ["features"], name="conv", strides=[FRAME]
        ),
        helper.make_node("Shape", ["features"], ["features_shape"], name="shape"),
        helper.make_node("Gather", ["features_shape", "last"], ["frames"], name="gather", axis=0),
        helper.make_node("Equal", ["frames", "one"], ["single_frame"], name="equal"),
        helper.make_node(
            "If",
            ["single_frame"],
            ["squeezed"],
            name="if_single_frame",
            then_branch=then_branch,
            else_branch=else_branch,
        ),
        helper.make_node("Shape", ["squeezed"], ["squeezed_shape"], name="shape_squeezed"),
        helper.make_node("Size", ["squeezed_shape"], ["squeezed_rank"], name="rank"),
        helper.make_node("Equal", ["squeezed_rank", "two"], ["was_squeezed"], name="equal_rank"),
        helper.make_node(
            "If",
            ["was_squeezed"],
            ["restored"],
            name="if_squeezed",
            then_branch=unsqueeze_branch,
            else_branch=identity_branch,
        ),
        helper.make_node(
            "ReduceMean", ["restored"], ["mean"], name="mean", axes=[1, 2], keepdims=1
        ),
        helper.make_node("Reshape", ["mean", "column"], ["level"], name="reshape"),
        helper.make_node("Mul", ["state", "half"], ["decayed"], name="decay"),
        helper.make_node("Add", ["decayed", "level"], ["mixed"], name="mix"),
        helper.make_node("Tanh", ["mixed"], ["new_state"], name="tanh"),
        helper.make_node("Gather", ["new_state", "last"], ["top"], name="top", axis=0),
        helper.make_node("MatMul", ["top", "head_w"], ["logit"], name="head"),
        helper.make_node("Sigmoid", ["logit"], ["probability"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "vad",
        [
            helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", "samples"]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "batch", 128]),
        ],
        [
            helper.make_tensor_value_info("probability", TensorProto.FLOAT, ["batch", 1]),
            helper.make_tensor_value_info("new_state", TensorProto.FLOAT, [2, "batch", 128]),
        ],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
        value_info=[
            helper.make_tensor_value_info("squeezed", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("restored", TensorProto.FLOAT, None),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    onnx.save(vad_model(), sys.argv[1])
