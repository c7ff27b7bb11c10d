"""`make bench-run` fails when niroc fails a model, not when the peer does (the peer's failures
are what the report compares against). The measurements themselves are the benchmark's job."""

from __future__ import annotations

import pytest


@pytest.fixture
def bench(load_bench_script):
    return load_bench_script("bench_run.py")


@pytest.mark.parametrize(
    ("notes", "failed"),
    [
        ([], False),
        (["peer: WRONG output #1: shape (1, 256), expected (4096, 256)"], False),
        (["peer: iree-compile: error: failed to legalize operation 'torch.operator'"], False),
        (["niroc: WRONG output #0: max error 0.5"], True),
        (["niroc: iree-compile: error: failed"], True),
        (["peer: WRONG output #0", "niroc: run failed: out of memory"], True),
    ],
)
def test_only_niroc_failures_fail_the_run(bench, notes, failed) -> None:
    results = [
        bench.Result("fine", "a model niroc runs"),
        bench.Result("model", "a model", notes=notes),
    ]
    assert bench.niroc_failed(results) is failed
