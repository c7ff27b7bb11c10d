"""Runs the golden CLI tests (lit + FileCheck over tests/cli/) as one pytest test.

So `make test` covers them; on failure the assertion message carries lit's report of every
failing test with its command and output.
"""

from .niroc_runner import ROOT, assert_lit_passes


def test_lit_golden_cli_tests(tmp_path) -> None:
    assert_lit_passes(ROOT / "tests" / "cli", tmp_path)
