"""The forms Conv takes for IREE's sake, each compiled with iree-compile, run and compared with
onnxruntime: a strided axis of kernel size 1 subsampled by a strided `tensor.extract_slice`
before the convolution (which then has stride 1 there), and a 1x1 convolution of one image as
`linalg.matmul` on collapsed operands (with or without padding, bias, after a subsample), beside
the forms that keep the convolution op (grouped, a kernel of 1 on one axis only, a dynamic batch).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx
from .dynamic_models import graph_model, random_weights


def _model(x_shape=(1, 8, 9, 10)):
    weights = random_weights(
        3,
        w1=(6, 8, 1, 1),
        b1=(6,),
        w2=(4, 8, 1, 1),
        w3=(5, 8, 1, 3),
        w4=(8, 2, 1, 1),
        b4=(8,),
        w5=(3, 8, 3, 3),
    )
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["strided_pointwise"], strides=[2, 2]),
        node("Conv", ["x", "w2"], ["padded_pointwise"], pads=[1, 0, 1, 2]),
        node("Conv", ["x", "w3"], ["row_subsampled"], strides=[2, 1], pads=[0, 1, 0, 1]),
        node("Conv", ["x", "w4", "b4"], ["grouped"], group=4, strides=[3, 2]),
        node("Conv", ["x", "w5"], ["strided_3x3"], strides=[2, 2], pads=[1, 1, 1, 1]),
    ]
    names = [n.output[0] for n in nodes]
    return graph_model(nodes, x_shape, weights, outputs={n: TensorProto.FLOAT for n in names})


def _one_d():
    weights = random_weights(4, w=(5, 4, 1), b=(5,))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[3])]
    return graph_model(nodes, (1, 4, 11), weights)


def _text(model) -> str:
    out = io.BytesIO()
    lower_to_mlir(import_model(model)).write_text(out)
    return out.getvalue().decode()


CASES = {
    "2d": (_model, [(1, 8, 9, 10)]),
    "1d": (_one_d, [(1, 4, 11)]),
    "dynamic_batch": (lambda: _model(("batch", 8, 9, 10)), [(1, 8, 9, 10), (2, 8, 9, 10)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_conv_forms_match_onnxruntime(name, tmp_path) -> None:
    build, shapes = CASES[name]
    model = build()
    vm_module = compile_onnx(model, tmp_path, name)
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in shapes]
    assert_matches_onnxruntime(
        vm_module, model, feeds, function=model.graph.name, rtol=1e-4, atol=1e-5
    )


def test_the_forms_are_in_the_mlir() -> None:
    text = _text(_model())
    # the 1x1 convolutions of one image are matmuls (the strided one after its subsample)
    assert text.count("linalg.matmul") == 2
    assert "[1, 1, 2, 2]" in text  # the strided subsample of `strided_pointwise`
    assert "[1, 1, 2, 1]" in text  # the row subsample of `row_subsampled`
    # the 3x3 keeps its stride; the others have none left
    assert text.count("strides = dense<2>") == 1
    dynamic = _text(_model(("batch", 8, 9, 10)))
    assert "linalg.matmul" not in dynamic  # a dynamic batch keeps the convolution op
