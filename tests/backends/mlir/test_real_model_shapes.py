"""Real models' declared shapes, end to end (niroc's CLI or import_model, iree-compile, a run,
onnxruntime): `--dim`/`--input-shape` making a dynamic model static, PaddlePaddle's `-1` dims,
and a voice-activity detector whose If yields a different rank when there is one frame."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, cannot_lower, find_tool, lower_to_mlir
from niro.frontends.onnx import OnnxImportError, import_model
from onnx import TensorProto, helper, numpy_helper

from testdata.realmodels.vad import vad_model

from .mlir_harness import IREE_COMPILE_FLAGS, assert_matches_onnxruntime, compile_module, load_vmfb

NIROC = Path(sys.executable).with_name("niroc")


def _niroc_compile(model: onnx.ModelProto, directory: Path, *flags: str) -> tuple[str, str]:
    """Run the niroc CLI on `model`; returns the MLIR text and stderr."""
    source, target = directory / "model.onnx", directory / "model.mlir"
    onnx.save(model, source)
    done = subprocess.run(
        [str(NIROC), str(source), "-o", str(target), *flags], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return target.read_text(), done.stderr


def _iree_compile(mlir: Path, directory: Path):
    vmfb = directory / "model.vmfb"
    done = subprocess.run(
        [find_tool("iree-compile"), *IREE_COMPILE_FLAGS, str(mlir), "-o", str(vmfb)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return load_vmfb(vmfb)


def _signature(mlir: str, function: str) -> str:
    match = re.search(rf"func\.func @{function}\((.*?)\) -> \((.*?)\) \{{", mlir)
    assert match is not None, mlir[:2000]
    return match.group(0)


def _classifier(batch, height, width) -> onnx.ModelProto:
    """Conv, BatchNorm, Relu, global pool, Gemm: a small image classifier with the given dims."""
    rng = np.random.default_rng(7)
    weights = {
        "w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3,
        "scale": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "bias": rng.standard_normal(4).astype(np.float32) * 0.1,
        "mean": rng.standard_normal(4).astype(np.float32) * 0.1,
        "var": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "fc": rng.standard_normal((4, 5)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, height, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 5])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_dim_makes_a_dynamic_batch_static_and_matches_onnxruntime(tmp_path) -> None:
    model = _classifier("batch", 8, 8)
    mlir, _ = _niroc_compile(model, tmp_path, "--dim", "batch=1")
    assert "tensor<1x3x8x8xf32>" in _signature(mlir, "classifier")
    assert "tensor<1x5xf32>" in _signature(mlir, "classifier")
    assert "?" not in _signature(mlir, "classifier")
    vm_module = _iree_compile(tmp_path / "model.mlir", tmp_path)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    assert_matches_onnxruntime(
        vm_module, model, [{"x": x}], function="classifier", rtol=1e-4, atol=1e-5
    )


def test_input_shape_makes_unnamed_dims_static(tmp_path) -> None:
    model = _classifier(None, None, None)
    mlir, _ = _niroc_compile(model, tmp_path, "--input-shape", "x=2x3x6x10")
    assert "(%arg0: tensor<2x3x6x10xf32>" in _signature(mlir, "classifier")
    vm_module = _iree_compile(tmp_path / "model.mlir", tmp_path)
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 10)).astype(np.float32)
    assert_matches_onnxruntime(
        vm_module, model, [{"x": x}], function="classifier", rtol=1e-4, atol=1e-5
    )


def test_paddle_style_negative_dims_are_dynamic_and_match_onnxruntime(tmp_path) -> None:
    """paddle2onnx declares its dynamic dims as -1; onnxruntime runs such a model at any size."""
    model = _classifier(-1, -1, -1)
    mlir, stderr = _niroc_compile(model, tmp_path)
    assert (
        "input 'x' declares shape [-1, 3, -1, -1]: negative dims read as unknown (dynamic)"
        in stderr
    )
    assert "output 'y' declares shape [-1, 5]: negative dims read as unknown (dynamic)" in stderr
    assert "(%arg0: tensor<?x3x?x?xf32>" in _signature(mlir, "classifier")
    vm_module = _iree_compile(tmp_path / "model.mlir", tmp_path)
    rng = np.random.default_rng(2)
    feeds = [
        {"x": rng.standard_normal(shape).astype(np.float32)}
        for shape in ((1, 3, 8, 8), (3, 3, 5, 11))
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="classifier", rtol=1e-4, atol=1e-5)


def test_negative_dims_that_are_data_are_still_refused() -> None:
    model = _classifier(-1, 8, 8)
    model.graph.initializer[0].dims[0] = -4
    with pytest.raises(
        OnnxImportError, match=r"initializer .w.: has a negative dimension in \[-4, 3, 3, 3\]"
    ):
        import_model(model)


def test_the_callers_model_is_left_as_it_was() -> None:
    model = _classifier(-1, "h", "w")
    before = model.SerializeToString()
    import_model(model, dims={"h": 8, "w": 8})
    assert model.SerializeToString() == before


# -- an If whose branches differ in rank ------------------------------------------------------


def test_vad_with_a_dynamic_length_is_refused_with_the_way_out() -> None:
    with pytest.raises(LoweringError) as raised:
        lower_to_mlir(import_model(vad_model(), expand_functions=cannot_lower))
    messages = [str(refusal) for refusal in raised.value.refusals]
    first = messages[0]
    assert "[node 'if_single_frame']" in first
    assert "cannot be compiled while its condition is only known at run time" in first
    assert "then_branch: tensor<?x128xf32>; else_branch: tensor<?x128x?xf32>" in first
    assert "its condition reads dim -1 of 'features' (output of node 'conv')" in first
    assert "graph input 'input' [batch, samples]" in first
    assert "--input-shape INPUT=DIMS, --dim NAME=SIZE" in first


@pytest.mark.parametrize("samples", [512, 64], ids=["frames", "one-frame"])
def test_vad_with_static_shapes_folds_the_condition_and_matches_onnxruntime(
    tmp_path, samples
) -> None:
    """At 64 samples there is one frame: the then_branch (Squeeze) is taken, then the second If
    unsqueezes it back; at 512 both Ifs take their else_branch."""
    model = vad_model()
    module = import_model(
        model,
        input_shapes={"input": (1, samples), "state": (2, 1, 128)},
        expand_functions=cannot_lower,
    )
    vm_module = load_vmfb(compile_module(lower_to_mlir(module), tmp_path))
    rng = np.random.default_rng(samples)
    feeds = {
        "input": rng.standard_normal((1, samples)).astype(np.float32),
        "state": rng.standard_normal((2, 1, 128)).astype(np.float32),
    }
    assert_matches_onnxruntime(vm_module, model, [feeds], function="vad", rtol=1e-4, atol=1e-5)


def test_vad_with_the_length_given_by_dim_name(tmp_path) -> None:
    """Only the length is static (`--dim samples=512`): the batch may stay dynamic."""
    model = vad_model()
    module = import_model(model, dims={"samples": 512}, expand_functions=cannot_lower)
    vm_module = load_vmfb(compile_module(lower_to_mlir(module), tmp_path))
    rng = np.random.default_rng(3)
    feeds = [
        {
            "input": rng.standard_normal((batch, 512)).astype(np.float32),
            "state": rng.standard_normal((2, batch, 128)).astype(np.float32),
        }
        for batch in (1, 3)
    ]
    assert_matches_onnxruntime(vm_module, model, feeds, function="vad", rtol=1e-4, atol=1e-5)
