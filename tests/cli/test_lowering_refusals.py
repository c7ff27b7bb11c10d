"""Many refused ops: `niroc` lists the first MAX_LISTED_REFUSALS, one line each, and counts
them all in its last line (lowering-refusals.onnxtxt shows the lines of a few)."""

from __future__ import annotations

import onnx
from niro.backends.mlir import MAX_LISTED_REFUSALS
from onnx import TensorProto, helper

from .niroc_runner import run_niroc


def celu_model(count: int) -> onnx.ModelProto:
    """`count` Celu nodes with alpha=0 (refused: Celu divides by alpha), summed."""
    nodes = [
        helper.make_node("Celu", ["x"], [f"c{index}"], name=f"celu_{index}", alpha=0.0)
        for index in range(count)
    ]
    nodes.append(
        helper.make_node("Sum", [f"c{index}" for index in range(count)], ["y"], name="sum")
    )
    graph = helper.make_graph(
        nodes,
        "many",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_past_the_cap_the_first_refusals_are_listed_and_all_counted(tmp_path):
    count = MAX_LISTED_REFUSALS + 3
    onnx.save(celu_model(count), tmp_path / "many.onnx")
    completed = run_niroc("many.onnx", "-o", "many.mlir", cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout == ""
    *listed, summary = completed.stderr.splitlines()
    assert listed == [
        f"error: many.onnx: @many ^bb0 op#{index} (onnx.Celu) [node 'celu_{index}']: "
        "'onnx.Celu' op attribute 'alpha' must not be 0"
        for index in range(MAX_LISTED_REFUSALS)
    ]
    assert summary == (
        f"error: many.onnx: lowering to MLIR failed ({count} errors, "
        f"the first {MAX_LISTED_REFUSALS} shown)"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["many.onnx"]
