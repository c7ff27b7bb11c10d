"""Hugging Face models as users export them (testdata/hf/generate.py: tiny random-weight configs
of transformers' architectures, by the TorchScript and the dynamo exporter, dynamic batch,
sequence or image size): each compiled once by niroc and iree-compile, run at two sizes and
compared with onnxruntime. Run by `make hf` (minutes: not in `make test`; the patterns that broke
these models have small tests of their own there)."""

from __future__ import annotations

import numpy as np
import pytest

from testdata.hf import generate

from .mlir_harness import assert_matches_onnxruntime, compile_onnx

CASES = [
    (name, exporter)
    for name, spec in generate.MODELS.items()
    for exporter in spec.exporters
]


@pytest.mark.parametrize(("name", "exporter"), CASES, ids=[f"{name}-{exporter}" for name, exporter in CASES])
def test_hf_export_matches_onnxruntime(tmp_path, name, exporter):
    spec = generate.MODELS[name]
    path = generate.export(name, exporter)
    vm_module = compile_onnx(path, tmp_path)
    rng = np.random.default_rng(0)
    feeds_list = [generate.inputs(spec, shape, rng) for shape in spec.shapes]
    assert_matches_onnxruntime(
        vm_module, path, feeds_list, function="main_graph", rtol=1e-3, atol=1e-4
    )
