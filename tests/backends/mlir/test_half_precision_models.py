"""fp16 and bf16 PyTorch exports (testdata/pytorch/export_half.py: a LeNet-style CNN and a
transformer block, both exporters), compiled by niroc and iree-compile, run with iree.runtime
and compared with onnxruntime within 2 ulp of the element type.

fp16: the reference is onnxruntime running the exported model as it is (CPU provider, default
session options). niroc computes where onnxruntime does (frontends/onnx/half_precision.py); with
per-op rounding these outputs were up to 98 ulp off.

bf16: onnxruntime's CPU provider has no bf16 Conv, MatMul or Gemm kernel and refuses the
exports. The reference is onnxruntime running the model as niroc's plan rewrites it (the ops it
has no bf16 kernel for in f32 between Casts, `plan_half_precision`), so it checks the
computation; the plan itself has no onnxruntime ground truth in bf16. The block's outputs cancel
(a residual sum near 0): a bf16 rounding IREE dropped inside a fused dispatch (NOTE in
`builders.elements`) made 126 of its 512 outputs differ, up to 64 ulp.

The models are exported once into testdata/generated/half_exports (~10 s idle; torch and
onnxscript come with the `llm` extra) and reused while the export script is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from ...frontends.onnx.test_half_precision import (
    conv_fold_model,
    if_feeds,
    if_model,
    loop_feeds,
    loop_model,
    planned_model,
)
from .mlir_harness import assert_within_ulps, call, compile_onnx

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "testdata" / "pytorch" / "export_half.py"
FOLDER = ROOT / "testdata" / "generated" / "half_exports"
ULPS = 2


@pytest.fixture(scope="module")
def exports() -> Path:
    """The exported models' folder, exported unless a copy made by this script is there (its
    hash in a stamp file). Made in a temporary folder and renamed, so parallel workers never
    read a half-written model."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    stamp = hashlib.sha256(SCRIPT.read_bytes()).hexdigest()
    target = FOLDER / stamp[:16]
    if not target.is_dir():
        FOLDER.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=FOLDER))
        subprocess.run([sys.executable, str(SCRIPT), str(scratch)], check=True, capture_output=True)
        try:
            os.rename(scratch, target)
        except OSError:  # another worker renamed its copy first
            shutil.rmtree(scratch)
    return target


def _feeds(model: onnx.ModelProto, dtype) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        value.name: rng.standard_normal([dim.dim_value for dim in value.type.tensor_type.shape.dim])
        .astype(np.float32)
        .astype(dtype)
        for value in model.graph.input
    }


def _run_niroc(path: Path, model: onnx.ModelProto, feeds, tmp_path: Path) -> list[np.ndarray]:
    vm_module = compile_onnx(path, tmp_path)
    results = call(vm_module, model.graph.name, *feeds.values())
    return [np.asarray(result.to_host()) for result in results]


@pytest.mark.parametrize("exporter", ["script", "dynamo"])
@pytest.mark.parametrize("network", ["lenet", "block"])
def test_fp16_export_matches_onnxruntime(exports, network, exporter, tmp_path):
    path = exports / f"{network}_f16_{exporter}.onnx"
    model = onnx.load(path, load_external_data=False)
    feeds = _feeds(model, np.float16)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    got = _run_niroc(path, model, feeds, tmp_path)
    assert len(got) == len(expected)
    for index, (actual, wanted) in enumerate(zip(got, expected, strict=True)):
        assert_within_ulps(actual.view(np.float16), wanted, ULPS, f"{path.name} output {index}")


def _float_interface(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its bf16 graph inputs and outputs taken and given as f32 through Casts
    (exact both ways for bf16 values): onnxruntime's Python API has no bf16 arrays."""
    graph = model.graph
    for value in graph.input:
        if value.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            graph.node.insert(
                0,
                helper.make_node(
                    "Cast", [value.name + "_ref"], [value.name], to=TensorProto.BFLOAT16
                ),
            )
            value.name += "_ref"
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    for value in graph.output:
        if value.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            graph.node.append(
                helper.make_node("Cast", [value.name], [value.name + "_ref"], to=TensorProto.FLOAT)
            )
            value.name += "_ref"
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    return model


@pytest.mark.parametrize("exporter", ["script", "dynamo"])
@pytest.mark.parametrize("network", ["lenet", "block"])
def test_bf16_export_matches_onnxruntime_on_the_plan(exports, network, exporter, tmp_path):
    path = exports / f"{network}_bf16_{exporter}.onnx"
    model = onnx.load(path)
    with pytest.raises(Exception, match="bfloat16|NOT_IMPLEMENTED"):
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    planned, plan = planned_model(model)
    assert plan is not None
    session = onnxruntime.InferenceSession(
        _float_interface(planned).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    feeds = _feeds(model, ml_dtypes.bfloat16)
    expected = session.run(
        None, {name + "_ref": value.astype(np.float32) for name, value in feeds.items()}
    )
    got = _run_niroc(path, model, feeds, tmp_path)
    for index, (actual, wanted) in enumerate(zip(got, expected, strict=True)):
        wanted = wanted.astype(ml_dtypes.bfloat16)
        assert_within_ulps(
            actual.view(ml_dtypes.bfloat16), wanted, ULPS, f"{path.name} output {index}"
        )


@pytest.mark.parametrize("case", ["if_then", "if_else", "loop", "conv_folds"])
def test_fp16_subgraphs_and_conv_folds_match_onnxruntime(case, tmp_path):
    """If branches and a Loop body computed in f32 and rounded where onnxruntime rounds them
    (it plans each subgraph on its own; rounded per op they were up to 3,112 ulp off), and
    Convs followed by BatchNormalization/Mul/Add folded into fp16 weights as onnxruntime folds
    them (computed as written they were up to ~1,800 ulp off where outputs cancel)."""
    model, feeds = {
        "if_then": lambda: (if_model(), if_feeds(True)),
        "if_else": lambda: (if_model(), if_feeds(False)),
        "loop": lambda: (loop_model(), loop_feeds()),
        "conv_folds": lambda: (conv_fold_model(), {"x": _fp16_input(1, 3, 8, 8)}),
    }[case]()
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    [expected] = session.run(None, feeds)
    [got] = call(compile_onnx(model, tmp_path), model.graph.name, *feeds.values())
    assert_within_ulps(np.asarray(got.to_host()).view(np.float16), expected, ULPS, case)


def _fp16_input(*shape):
    return (np.random.default_rng(9).standard_normal(shape) * 2).astype(np.float16)
