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


def _feeds(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> dict[str, np.ndarray]:
    if kind == "text":
        batch, seq = shape
        mask = np.ones((batch, seq), np.int64)
        mask[0, seq - seq // 3 :] = 0  # the first row right-padded: the mask is real
        return {"input_ids": rng.integers(1, 500, shape).astype(np.int64), "attention_mask": mask}
    if kind == "image":
        batch, height, width = shape
        return {"pixel_values": rng.standard_normal((batch, 3, height, width)).astype(np.float32)}
    return {"input_values": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize(("name", "exporter"), CASES, ids=[f"{name}-{exporter}" for name, exporter in CASES])
def test_hf_export_matches_onnxruntime(tmp_path, name, exporter):
    spec = generate.MODELS[name]
    path = generate.export(name, exporter)
    vm_module = compile_onnx(path, tmp_path)
    rng = np.random.default_rng(0)
    feeds_list = [_feeds(spec.kind, shape, rng) for shape in spec.shapes]
    assert_matches_onnxruntime(
        vm_module, path, feeds_list, function="main_graph", rtol=1e-3, atol=1e-4
    )
