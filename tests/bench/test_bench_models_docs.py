"""`make bench` rewrites docs/compiler-speed.md's figures section from its runs: a run of some
models replaces their figures and keeps the others', and nothing outside the markers changes.
(The benchmark's measurements themselves are not tested here: speed is the benchmark's job.)"""

from __future__ import annotations

import pytest


@pytest.fixture
def bench(tmp_path, monkeypatch, load_bench_script):
    module = load_bench_script("bench_models.py")
    page = tmp_path / "compiler-speed.md"
    page.write_text(f"# Title\n\nprose before\n\n{module.FIGURES_BEGIN}\nold figures\n{module.FIGURES_END}\n\nprose after\n")
    monkeypatch.setattr(module, "DOCS", page)
    monkeypatch.setattr(module, "DOCS_ROWS", tmp_path / "compiler-speed.json")
    return module


def _run(bench, model: str, wall: float, ok: bool = True):
    sample = bench.Sample(wall=wall, user=wall / 2, sys=0.1, rss_mib=150.0, output_bytes=10, ok=ok,
                          error="" if ok else "exit 1")
    rows = [bench.Row(model, "niroc text", "", [sample]), bench.Row(model, "hex", "", [sample])]
    checks = [bench.Check(model, "max |error| / max |y|", 1e-6, "<= 1e-4", True)]
    return rows, checks


def test_a_run_of_one_model_keeps_the_others_figures(bench):
    bench.write_figures(bench.merged_figures(*_run(bench, "small_nodes", 2.5), "first run"))
    bench.write_figures(bench.merged_figures(*_run(bench, "one_node", 0.3), "second run"))
    page = bench.DOCS.read_text()
    assert "old figures" not in page
    assert page.startswith("# Title\n\nprose before\n\n") and page.endswith(f"{bench.FIGURES_END}\n\nprose after\n")
    # both models, in MODELS order, each with its own run's figures and time of measurement
    assert page.index("| `one_node`:") < page.index("| `small_nodes`:")
    assert "| `small_nodes` | first run |" in page and "| `one_node` | second run |" in page
    assert "2.50 s / 1.35 s / 150 MiB" in page and "0.30 s / 0.25 s / 150 MiB" in page
    # a later run of a model replaces its figures
    bench.write_figures(bench.merged_figures(*_run(bench, "small_nodes", 3.0), "third run"))
    page = bench.DOCS.read_text()
    assert "first run" not in page and "| `small_nodes` | third run |" in page and "3.00 s" in page


def test_cells_are_escaped_and_failures_shown(bench):
    bench.write_figures(bench.merged_figures(*_run(bench, "transformer", 1.0, ok=False), "a run"))
    page = bench.DOCS.read_text()
    assert "max \\|error\\| / max \\|y\\|" in page
    row = next(line for line in page.splitlines() if line.startswith("| `transformer`:"))
    assert row.count("failed") == 2 and row.count("|") == 9
