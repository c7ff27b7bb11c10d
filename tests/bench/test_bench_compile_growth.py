"""`make bench-compile-growth` weighs compile CPU time against a base revision: what it measures
for one model (a real niroc run and iree-compile), which models it counts over the 20% budget,
and the one line it says for a base it cannot check out. (The figures themselves are the
benchmark's job.)"""

from __future__ import annotations

import sys

import onnx
import pytest
from onnx import TensorProto, helper


@pytest.fixture
def growth(load_bench_script):
    return load_bench_script("bench_compile_growth.py")


def test_a_model_costs_the_cpu_of_its_frontend_and_its_compile(growth, tmp_path) -> None:
    value = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 2]) for name in "abc"]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g", value[:2], value[2:])
    model = tmp_path / "add.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    (tmp_path / "now").mkdir()
    cost = growth.compile_cost(model, str(growth.ROOT), tmp_path / "now")
    assert cost.error is None
    assert cost.frontend > 0 and cost.iree > 0 and cost.total == cost.frontend + cost.iree
    assert (tmp_path / "now" / "model.vmfb").stat().st_size > 0


def test_a_frontend_failure_is_reported_with_its_error_line(growth, tmp_path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    (tmp_path / "now").mkdir()
    cost = growth.compile_cost(broken, str(growth.ROOT), tmp_path / "now")
    assert cost.total is None and cost.error.startswith("niroc: ")


def test_the_frontend_is_the_niroc_on_its_path_not_the_working_directory_s(
    growth, tmp_path, monkeypatch
) -> None:
    """Run from the repository root (as `make` does), the base's niroc must still come from the
    base tree: with the root first on sys.path, its CLI met the base's frontend and failed."""
    fake = tmp_path / "tree" / "niroc"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "cli.py").write_text("import sys\ndef run():\n    sys.exit('error: the base tree')\n")
    model = tmp_path / "any.onnx"
    model.write_bytes(b"")
    (tmp_path / "now").mkdir()
    monkeypatch.chdir(growth.ROOT)
    cost = growth.compile_cost(model, str(tmp_path / "tree"), tmp_path / "now")
    assert cost.error == "niroc: error: the base tree"


def test_growth_over_the_budget_and_failures_count_against_it(growth) -> None:
    cost = growth.Cost
    rows = [
        ("within", cost(1.0, 9.0), cost(1.0, 11.0)),  # 1.20: at the budget
        ("over", cost(1.0, 9.0), cost(1.0, 11.5)),  # 1.25
        ("broken", cost(1.0, 9.0), cost(error="iree-compile: boom")),
        ("new", cost(error="niroc: refused"), cost(1.0, 1.0)),  # nothing to grow from
    ]
    assert growth.over_budget(rows) == ["over", "broken"]
    page = growth.report("base", rows)
    assert "| within | 10.00 | 12.00 | 1.20 | yes |" in page
    assert "| over | 10.00 | 12.50 | 1.25 | **no** |" in page
    assert "| broken | 10.00 | - (iree-compile: boom) | - | **no** |" in page
    assert "| new | - (niroc: refused) | 2.00 | - | - |" in page
    assert "highest: over 1.25" in page


def test_a_base_that_is_no_revision_is_one_line_and_status_2(growth, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_compile_growth.py", "--base", "no-such-revision", "--no-docs"])
    assert growth.main() == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("bench_compile_growth: cannot check out base revision 'no-such-revision':")
    assert "\n" not in error
