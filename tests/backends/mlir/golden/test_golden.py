"""Runs the golden tests of the lowering families (lit + FileCheck over this folder) as one
pytest test, so `make test` covers them; a failure carries lit's report."""

from pathlib import Path

from ....cli.niroc_runner import assert_lit_passes


def test_lowering_families_emit_the_golden_mlir(tmp_path) -> None:
    assert_lit_passes(Path(__file__).resolve().parent, tmp_path)
