"""LRN (GoogLeNet/AlexNet-era exports): of a static input, one element-wise op summing the
squares of `size` channel-shifted slices of the padded input; with a dynamic batch, height and
width, or a dynamic channel count, a reduction over the window. Each compiled and run against
onnxruntime."""

from __future__ import annotations

import io

import numpy as np
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx
from .dynamic_models import one_node_model


def _lrn(x_shape, size):
    return one_node_model("LRN", x_shape, size=size, alpha=1e-3, beta=0.75, bias=1.0)


@pytest.mark.parametrize(
    ("x_shape", "shapes", "size"),
    [
        ((1, 7, 5, 6), [(1, 7, 5, 6)], 5),
        ((2, 3, 4, 3), [(2, 3, 4, 3)], 7),
        ((1, 6, 2, 5), [(1, 6, 2, 5)], 1),
        (("n", 6, "h", "w"), [(1, 6, 5, 5), (2, 6, 3, 7)], 3),
        (("n", "c", "h", 4), [(1, 5, 3, 4), (2, 8, 2, 4)], 5),
    ],
    ids=[
        "static",
        "static-window-past-channels",
        "static-size-1",
        "dynamic-batch-hw",
        "dynamic-channels",
    ],
)
def test_lrn_matches_onnxruntime(tmp_path, x_shape, shapes, size) -> None:
    model = _lrn(x_shape, size)
    vm_module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in shapes]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-4, atol=1e-5)


def _text(model) -> str:
    out = io.BytesIO()
    lower_to_mlir(import_model(model)).write_text(out)
    return out.getvalue().decode()


def test_a_static_lrn_sums_shifted_slices_in_one_elementwise_op() -> None:
    """Size 5 (2 channels before, 2 after; onnxruntime takes odd sizes and 4-D inputs only): one pad, five slices of it shifted by 0-4
    channels, one element-wise generic of six operands and no reduction; dynamic, the window
    is reduced."""
    text = _text(_lrn((1, 7, 5, 6), 5))
    assert text.count("tensor.pad") == 1 and "low[0, 2, 0, 0] high[0, 2, 0, 0]" in text
    for channel in range(5):
        assert f"[0, {channel}, 0, 0] [1, 7, 5, 6] [1, 1, 1, 1]" in text
    assert '"reduction"' not in text and text.count("linalg.generic") == 1
    assert '"reduction"' in _text(_lrn(("n", 7, "h", "w"), 5))
