"""Constant-mode Pad whose pads crop (negative) or are known only at run time: a crop, then an
insert into a tensor filled with the constant (`slice_ops._cropped_and_padded`). ONNX's node
tests have no negative pads, so these models are the ones that run that path end to end:
niroc -> iree-compile -> iree.runtime, compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ..mlir_harness import assert_matches_onnxruntime, call, compile_onnx

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64
PADS = [1, -1, 0, -2, 2, 1]  # begin then end, per axis of a rank-3 input: crops and pads


def _pad_model(*, pads_at_run_time: bool, value_at_run_time: bool, dims) -> object:
    inputs = [helper.make_tensor_value_info("x", F32, dims)]
    initializers = []
    if pads_at_run_time:
        inputs.append(helper.make_tensor_value_info("pads", I64, [6]))
    else:
        initializers.append(helper.make_tensor("pads", I64, [6], PADS))
    if value_at_run_time:
        inputs.append(helper.make_tensor_value_info("value", F32, []))
    else:
        initializers.append(helper.make_tensor("value", F32, [], [-7.5]))
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("y", F32, None)], initializers
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize(
    "pads_at_run_time, value_at_run_time, dims",
    [
        (False, False, [4, 5, 6]),
        (False, False, ["a", "b", "c"]),
        (True, False, [4, 5, 6]),
        (True, True, ["a", "b", "c"]),
    ],
)
def test_cropping_pads_match_onnxruntime(tmp_path, pads_at_run_time, value_at_run_time, dims):
    model = _pad_model(
        pads_at_run_time=pads_at_run_time, value_at_run_time=value_at_run_time, dims=dims
    )
    module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(0)
    shapes = [(4, 5, 6)] if all(isinstance(dim, int) for dim in dims) else [(4, 5, 6), (3, 7, 4)]
    feeds = []
    for shape in shapes:
        feed = {"x": rng.standard_normal(shape).astype(np.float32)}
        if pads_at_run_time:
            feed["pads"] = np.array(PADS, np.int64)
        if value_at_run_time:
            feed["value"] = np.array(3.25, np.float32)
        feeds.append(feed)
    assert_matches_onnxruntime(module, model, feeds, function="g", rtol=0, atol=0)



def test_pads_cropping_more_than_the_axis_stop_the_program_naming_pad(tmp_path):
    module = compile_onnx(_pad_model(pads_at_run_time=True, value_at_run_time=False, dims=[4, 5, 6]), tmp_path)
    x = np.zeros((4, 5, 6), np.float32)
    pads = np.array([0, -4, 0, 0, -3, 0], np.int64)  # 7 of axis 1's 5
    with pytest.raises(Exception, match="'onnx.Pad' op: the pads crop more than axis 1 holds"):
        call(module, "g", x, pads)


def test_constant_pads_cropping_more_than_the_axis_are_refused_naming_it():
    from niro.backends.mlir import LoweringError, lower_to_mlir
    from niro.frontends.onnx import import_model

    model = _pad_model(pads_at_run_time=False, value_at_run_time=False, dims=[4, 5, 6])
    model.graph.initializer[0].CopyFrom(
        helper.make_tensor("pads", I64, [6], [0, -4, 0, 0, -3, 0])
    )
    with pytest.raises(LoweringError, match="pads crop 7 from axis 1 of size 5"):
        lower_to_mlir(import_model(model))
