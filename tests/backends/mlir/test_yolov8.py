"""A YOLOv8n-style detector with dynamic batch, height and width (testdata/realmodels/yolov8.py):
its neck upsamples by a nearest x2 Resize and convolves the result, which IREE 3.13 compiled
only once the Resize's dynamic result dims were index arithmetic (see resize.py's `_dim_index`).

The whole detector (~2 minutes of iree-compile) runs in `make zoo`
(tests/backends/mlir/test_real_models_zoo.py); here the smallest failing form: a Resize by a
constant scale with dynamic H/W, then a padded 3x3 Conv."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

CHANNELS = 8


def _upsample_conv(
    scale: float, dims=("batch", CHANNELS, "height", "width"), op: str = "Resize"
) -> onnx.ModelProto:
    """`op` (Resize-17, or Upsample-9 as YOLOv3-era exports have it) by `scale` on H and W, then
    a padded 3x3 Conv."""
    rng = np.random.default_rng(5)
    weights = {
        "w": rng.standard_normal((CHANNELS, CHANNELS, 3, 3)).astype(np.float32) * 0.2,
        "b": rng.standard_normal(CHANNELS).astype(np.float32) * 0.1,
        "scales": np.array([1, 1, scale, scale], np.float32),
    }
    nodes = [
        helper.make_node(
            "Resize",
            ["x", "", "scales"],
            ["up"],
            name="upsample",
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )
        if op == "Resize"
        else helper.make_node("Upsample", ["x", "scales"], ["up"], name="upsample", mode="nearest"),
        helper.make_node(
            "Conv", ["up", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "neck",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    opset = 17 if op == "Resize" else 9
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize(
    ("op", "scale"),
    [("Resize", 2.0), ("Resize", 3.0), ("Resize", 1.5), ("Resize", 0.5), ("Upsample", 2.0)],
)
def test_conv_after_constant_scale_resize_with_dynamic_hw_compiles_and_matches(
    tmp_path, op, scale
) -> None:
    """Upsample-9 (YOLOv3-era exports) took static shapes only; it shares Resize's dynamic path."""
    model = _upsample_conv(scale, op=op)
    vm_module = compile_onnx(model, tmp_path)
    rng = np.random.default_rng(0)
    feeds = [
        {"x": rng.standard_normal(shape).astype(np.float32)}
        for shape in ((1, CHANNELS, 4, 4), (2, CHANNELS, 3, 5))
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="neck", rtol=1e-4, atol=1e-5)
