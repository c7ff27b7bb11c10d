"""No lowering brings f64 into a model that has none: f64 arithmetic is slow on CPUs, missing on
many GPUs, and with `--iree-input-demote-f64-to-f32=false` some of it does not compile (Resize
computed its coordinates in f64). Every test model (testdata/pytorch) and the Resize/Upsample
node tests, static and with dynamic input dims, are lowered and their MLIR searched for f64."""

from __future__ import annotations

import io
from pathlib import Path

import onnx
import pytest
from google.protobuf.message import Message
from niro.backends.mlir import cannot_lower, lower_to_mlir
from niro.frontends.onnx import import_model
from niro.ir import NirocError

from ...onnx_node_cases import dynamic_variant, node_test_cases

TESTDATA = Path(__file__).resolve().parents[3] / "testdata" / "pytorch"


def _has_f64(message) -> bool:
    """Any f64 in an ONNX message: a tensor type, a tensor's data type, a Cast/attribute to
    double, anywhere in its fields (subgraphs and functions included)."""
    for field, value in message.ListFields():
        single = isinstance(value, (Message, str, bytes, int, float))
        values = [value] if single else value
        for item in values:
            if field.type == field.TYPE_MESSAGE:
                if _has_f64(item):
                    return True
            elif field.name in ("elem_type", "data_type", "to") and item == onnx.TensorProto.DOUBLE:
                return True
            elif field.name == "i" and item == onnx.TensorProto.DOUBLE and message.name == "to":
                return True
    return False


def _mlir(model: onnx.ModelProto | str) -> str | None:
    """The model lowered to MLIR text, or None when niroc refuses it."""
    try:
        lowered = lower_to_mlir(import_model(model, expand_functions=cannot_lower))
    except NirocError:
        return None
    text = io.BytesIO()
    lowered.write_text(text)
    return text.getvalue().decode()


def _assert_no_f64(models) -> None:
    lowered, with_f64 = 0, []
    for name, model in models:
        if _has_f64(
            model
            if isinstance(model, onnx.ModelProto)
            else onnx.load(model, load_external_data=False)
        ):
            continue
        text = _mlir(model)
        if text is None:
            continue
        lowered += 1
        if "f64" in text:
            with_f64.append(name)
    assert lowered >= 5, f"only {lowered} models lowered"
    assert with_f64 == [], f"f64 introduced in: {with_f64}"


def test_the_test_models_stay_free_of_f64() -> None:
    paths = sorted(TESTDATA.glob("*.onnx"))
    assert paths, f"no models in {TESTDATA}"
    _assert_no_f64([(path.name, str(path)) for path in paths])


@pytest.mark.parametrize("mode", ["none", "realistic"])
def test_resize_node_tests_stay_free_of_f64(mode: str) -> None:
    cases = [case for case in node_test_cases() if "resize" in case.name or "upsample" in case.name]
    _assert_no_f64([(case.name, dynamic_variant(case, mode).model) for case in cases])
