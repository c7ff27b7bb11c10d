"""The import driver (importer.py): Python's cyclic collector is paused for one import and left
as the caller had it, whether the import succeeds or fails."""

from __future__ import annotations

import gc

import onnx
import pytest
from niro.frontends.onnx import OnnxImportError, import_model

MODEL = '<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (y) { y = Relu(x) }'
BROKEN = '<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (y) { y = Relu(z) }'


def _collector_state_during_import(monkeypatch) -> list[bool]:
    from niro.frontends.onnx.conversion import Converter

    seen = []
    real_convert = Converter._convert_nodes

    def recording_convert(self, *args):
        seen.append(gc.isenabled())
        return real_convert(self, *args)

    monkeypatch.setattr(Converter, "_convert_nodes", recording_convert)
    return seen


def test_the_collector_is_paused_during_an_import_and_running_after(monkeypatch) -> None:
    seen = _collector_state_during_import(monkeypatch)
    assert gc.isenabled()
    import_model(onnx.parser.parse_model(MODEL))
    assert seen == [False]
    assert gc.isenabled()


def test_a_failed_import_leaves_the_collector_running() -> None:
    with pytest.raises(OnnxImportError, match="node 'Relu_0' \\(Relu\\): input 'z' is not defined before the node"):
        import_model(onnx.parser.parse_model(BROKEN))
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        import_model(onnx.parser.parse_model(MODEL))
        assert not gc.isenabled()
    finally:
        gc.enable()
