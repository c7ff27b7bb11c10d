"""Deep region nesting: the lowering recurses per level, so it makes room on Python's stack for
the measured depth (500 nested Ifs lower and verify) and refuses what is deeper than its cap
with one LoweringError, never a RecursionError (found by the hostile corpus, testdata/hostile/)."""

from __future__ import annotations

import sys

import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.backends.mlir.nesting import MAX_NESTING, nesting_depth
from niro.ir import parse_module, verify

from ...hostile.corpus import generate


def test_500_nested_ifs_lower_and_verify() -> None:
    module = parse_module(generate.deep_niro(500), filename="deep.niro")
    assert verify(module) == []
    assert nesting_depth(module) == 500
    limit = sys.getrecursionlimit()
    lowered = lower_to_mlir(module)
    assert sys.getrecursionlimit() == limit  # restored
    assert str(lowered.module).count("scf.if") == 500


def test_nesting_past_the_cap_is_one_error() -> None:
    module = parse_module(generate.deep_niro(MAX_NESTING + 1), filename="deep.niro")
    limit = sys.getrecursionlimit()
    with pytest.raises(LoweringError, match=f"^regions nest {MAX_NESTING + 1} deep; the MLIR lowering takes at most {MAX_NESTING} levels$"):
        lower_to_mlir(module)
    assert sys.getrecursionlimit() == limit
