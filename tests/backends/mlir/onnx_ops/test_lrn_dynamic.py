"""LRN (GoogLeNet/AlexNet-era exports) with a dynamic batch, height and width, and with a
dynamic channel count: one compiled module run at several sizes against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from ..mlir_harness import assert_matches_onnxruntime, compile_onnx
from .dynamic_models import one_node_model


@pytest.mark.parametrize(
    ("x_shape", "shapes", "size"),
    [
        (("n", 6, "h", "w"), [(1, 6, 5, 5), (2, 6, 3, 7)], 3),
        (("n", "c", "h", 4), [(1, 5, 3, 4), (2, 8, 2, 4)], 5),
    ],
    ids=["dynamic-batch-hw", "dynamic-channels"],
)
def test_lrn_with_dynamic_dims_matches_onnxruntime(tmp_path, x_shape, shapes, size) -> None:
    model = one_node_model("LRN", x_shape, size=size, alpha=1e-3, beta=0.75, bias=1.0)
    vm_module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal(shape).astype(np.float32)} for shape in shapes]
    assert_matches_onnxruntime(vm_module, model, feeds, function="g", rtol=1e-4, atol=1e-5)
