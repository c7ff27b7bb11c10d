"""Whole third-party-style models too slow for `make test` (minutes of iree-compile each): run
by `make zoo`. Each is built by its generator in testdata/realmodels/, compiled once, run at
several shapes and compared with onnxruntime."""

from __future__ import annotations

import numpy as np

from testdata.realmodels.yolov8 import yolov8_model

from .mlir_harness import assert_matches_onnxruntime, compile_onnx


def test_yolov8n_with_dynamic_batch_height_width_matches_onnxruntime(tmp_path) -> None:
    """ultralytics' dynamic export layout: Conv-SiLU, C2f (Split/Concat), SPPF (MaxPools), nearest
    x2 Resize, a three-level head with the DFL Softmax; batch, height and width dynamic."""
    model = yolov8_model()
    vm_module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(1)
    feeds = [
        {"images": rng.random(shape).astype(np.float32)}
        for shape in ((1, 3, 64, 64), (2, 3, 96, 128))
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="yolov8", rtol=1e-3, atol=1e-3)
