"""`verify --stats` as a pre-flight: per op kind whether it will compile, with the reasons the
lowering's own rules give, and "N of M ops will compile", which must agree with what compiling
the model does."""

from __future__ import annotations

import json

import onnx
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper

from niroc.cli import main

from .niroc_runner import ROOT


def verify_stats(capsys, path, *options: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--stats", *options, str(path)])
    return exit_.value.code, capsys.readouterr().out


def stats_record(capsys, path) -> dict:
    code, out = verify_stats(capsys, path, "--format", "json")
    assert code == 0
    return next(record for record in map(json.loads, out.splitlines()) if record["type"] == "stats")


def save(tmp_path, nodes, inputs, outputs, opset=18) -> str:
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path


def floats(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_a_kind_partly_refused_counts_only_its_refused_ops(capsys, tmp_path):
    path = save(
        tmp_path,
        [
            helper.make_node("Celu", ["x"], ["a"], name="fine", alpha=1.0),
            helper.make_node("Celu", ["a"], ["y"], name="zero", alpha=0.0),
        ],
        [floats("x", [2, 3])],
        [floats("y", [2, 3])],
    )
    code, out = verify_stats(capsys, path)
    assert code == 0
    assert "onnx.Celu         2   1 refused" in out
    assert "onnx.Celu refused: 'onnx.Celu' op attribute 'alpha' must not be 0" in out
    assert "2 of 3 ops will compile" in out
    record = stats_record(capsys, path)
    assert record["ops_will_compile"] == 2
    assert record["lowering"]["onnx.Celu"] == {
        "status": "refused",
        "count": 2,
        "refused": 1,
        "reasons": ["'onnx.Celu' op attribute 'alpha' must not be 0"],
    }


def test_a_dynamic_shape_refusal_gives_the_rules_reason(capsys, tmp_path):
    # MaxPool's Indices output needs static spatial dims
    path = save(
        tmp_path,
        [helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2])],
        [floats("x", [1, 1, "h", "w"])],
        [floats("y", None), helper.make_tensor_value_info("i", TensorProto.INT64, None)],
    )
    with pytest.raises(LoweringError) as raised:
        lower_to_mlir(import_model(str(path)))
    record = stats_record(capsys, path)
    assert record["lowering"]["onnx.MaxPool"]["reasons"] == [raised.value.message]
    assert record["ops_will_compile"] == record["ops"] - 1


def test_an_unsupported_opset_is_a_refusal(capsys, tmp_path):
    # Concat is lowered from opset 4 (where `axis` became required)
    path = save(
        tmp_path,
        [helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=0)],
        [floats("x", [2, 3])],
        [floats("y", [4, 3])],
        opset=3,
    )
    record = stats_record(capsys, path)
    (reason,) = record["lowering"]["onnx.Concat"]["reasons"]
    assert reason.startswith("'onnx.Concat' op is not supported at opset 3"), reason
    assert record["ops_will_compile"] == record["ops"] - 1


def test_every_op_of_a_clean_model_will_compile_and_does(capsys):
    path = ROOT / "testdata" / "cli" / "mlp.onnxtxt"
    record = stats_record(capsys, path)
    assert record["ops_will_compile"] == record["ops"] == 5
    assert {kind["status"] for kind in record["lowering"].values()} == {"native"}
    lower_to_mlir(import_model(str(path)))  # and it does lower


def test_the_count_agrees_with_the_lowerings_refusals(capsys):
    path = ROOT / "tests" / "cli" / "lowering-refusals.onnxtxt"
    with pytest.raises(LoweringError) as raised:
        lower_to_mlir(import_model(str(path)), allow_unknown=True)
    record = stats_record(capsys, path)
    refused = sum(kind.get("refused", 0) for kind in record["lowering"].values())
    assert refused == len(raised.value.refusals) == 2
    no_lowering = sum(
        kind["count"] for kind in record["lowering"].values() if kind["status"] == "no lowering"
    )
    assert record["ops_will_compile"] == record["ops"] - refused - no_lowering


def test_a_module_with_verifier_errors_is_only_counted(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--stats", str(ROOT / "testdata" / "cli" / "invalid.niro")])
    out = capsys.readouterr().out
    assert "lowering not checked: the module has verifier errors" in out
    assert "will compile" not in out
