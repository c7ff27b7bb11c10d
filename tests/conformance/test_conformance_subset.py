"""`make test`'s slice of `make conformance`: a fixed list of ONNX node tests, end to end.

Each test in tests/conformance/subset.py goes through import -> verify -> lower -> iree-compile
-> IREE runtime -> compare (tests/conformance/pipeline.py). Every one must pass or be refused
with a clear niroc error, never be a bug (a verify, compile or run failure, a wrong number, a
crash); those in EXPECTED_PASS must pass, so a regression fails `make test`. The list is fixed
so the run time is too (about 0.3-1 s of iree-compile per passing test); the whole suite stays
in `make conformance`.
"""

from __future__ import annotations

import pytest

from ..onnx_node_cases import node_test_case, node_test_cases
from .pipeline import run_case
from .subset import EXPECTED_PASS, FAMILIES, SUBSET, names_by_family


def test_the_subset_names_real_node_tests_once() -> None:
    known = {case.name for case in node_test_cases()}
    assert [name for name in SUBSET if name not in known] == []
    assert len(SUBSET) == len(set(SUBSET))
    assert set(EXPECTED_PASS) <= set(SUBSET)


def test_every_family_has_passing_tests() -> None:
    grouped = names_by_family()
    assert set(grouped) == set(FAMILIES)
    assert all(grouped[family] for family in FAMILIES), grouped


@pytest.mark.parametrize("name", SUBSET)
def test_node_test_end_to_end(name: str) -> None:
    outcome = run_case(node_test_case(name))
    assert not outcome.is_bug, f"{name}: a niroc bug at stage '{outcome.stage}': {outcome.message}"
    if name in EXPECTED_PASS:
        assert outcome.passed, (
            f"{name} passed before and now stops at '{outcome.stage}': {outcome.message}"
        )
