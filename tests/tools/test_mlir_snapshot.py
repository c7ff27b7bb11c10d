"""tests/tools/mlir_snapshot.py, the check that a refactor changes no emitted MLIR: it must see a
change (a manifest of node tests made dynamic differs from the static one), see none where there
is none, and make the node tests dynamic as `make conformance` does."""

from __future__ import annotations

import json

import onnx
import pytest

from tests.tools import mlir_snapshot


def test_dynamic_modes_make_the_declared_input_dims_symbolic() -> None:
    models = dict(mlir_snapshot._models("test_softmax_example", dynamic="all"))
    model = onnx.load_from_string(models["node/test_softmax_example"])
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims and all(dim.dim_param and not dim.HasField("dim_value") for dim in dims)


@pytest.mark.parametrize("dynamic", ["realistic", "all"])
def test_a_changed_model_is_reported_and_an_unchanged_one_is_not(tmp_path, capsys, dynamic) -> None:
    static, moved, again = (
        str(tmp_path / name) for name in ("static.json", "moved.json", "again.json")
    )
    assert mlir_snapshot.write(static, "test_softmax_example", None, 1) == 0
    assert mlir_snapshot.write(moved, "test_softmax_example", None, 1, dynamic=dynamic) == 0
    assert mlir_snapshot.write(again, "test_softmax_example", None, 1) == 0
    assert json.loads(open(static).read())["node/test_softmax_example"].startswith("mlir ")
    capsys.readouterr()
    assert mlir_snapshot.compare(static, again) == 0
    assert capsys.readouterr().out.startswith("0 of ")
    assert mlir_snapshot.compare(static, moved) == 1
    assert "node/test_softmax_example\n" in capsys.readouterr().out
