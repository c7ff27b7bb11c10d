"""The model-zoo architectures shipped inside the onnx wheel import and verify."""

from __future__ import annotations

from pathlib import Path

import niro.ir as nir
import onnx
import pytest
from niro.frontends.onnx import import_model_with_info

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = sorted(LIGHT.glob("light_*.onnx"))


def test_the_wheel_ships_the_light_models() -> None:
    names = {path.stem for path in MODELS}
    assert {"light_resnet50", "light_densenet121", "light_inception_v1", "light_squeezenet", "light_vgg19"} <= names


@pytest.mark.parametrize("path", MODELS, ids=lambda path: path.stem)
def test_light_model_imports_and_verifies(path: Path) -> None:
    imported = import_model_with_info(path)
    assert nir.verify(imported.module) == []
    model = onnx.load(path)
    function = imported.module.get_function(imported.main)
    assert function is not None
    # old IR: every initializer is also a graph input, so it stays one (its data a Global)
    assert function.input_names == tuple(value.name for value in model.graph.input)
    assert len(imported.module.globals) == len(model.graph.initializer)
    assert set(imported.input_defaults) == {tensor.name for tensor in model.graph.initializer}
    locs = {op.loc for op in nir.walk_ops(function) if not isinstance(op, nir.Return)}
    assert None not in locs
