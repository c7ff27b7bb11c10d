"""Property: whatever the input (mutated model bytes, ModelProto fields, ONNX text or Niro text),
the pipeline (import or parse -> verify -> lower -> MLIR text)
succeeds, reports verifier diagnostics, or raises a NirocError with a message. Any other
exception, a native crash or a hang fails the example (see `isolation`: each input runs in a
worker process, so a segfault in ONNX's shape inference is a failure hypothesis can shrink).

Bounded in `make test` (derandomized, NIROC_FUZZ_EXAMPLES examples per test, default 30); `make
fuzz` raises the count and uses random seeds (NIROC_FUZZ_RANDOM=1).
"""

from __future__ import annotations

import os

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .isolation import Isolated
from .mutations import (
    mutate_bytes,
    mutate_model,
    mutate_text,
    niro_seeds,
    onnx_seeds,
    onnx_text_seeds,
)

EXAMPLES = int(os.environ.get("NIROC_FUZZ_EXAMPLES", "30"))
RANDOM = os.environ.get("NIROC_FUZZ_RANDOM") == "1"

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not RANDOM,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

ALLOWED = {"ok", "verify", "error"}


@pytest.fixture(scope="module")
def worker():
    isolated = Isolated()
    yield isolated
    isolated.close()


def check(worker: Isolated, kind: str, data: bytes) -> None:
    outcome, detail = worker.run(kind, data)
    assert outcome in ALLOWED, f"{outcome}: {detail}"
    if outcome == "error":
        assert "\n" not in detail or detail.startswith("ParseError"), detail


@FUZZ
@given(data=st.data())
def test_mutated_model_bytes(worker, data) -> None:
    seeds = onnx_seeds()
    blob = seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]
    check(worker, "onnx", mutate_bytes(data, blob))


@FUZZ
@given(data=st.data())
def test_mutated_model_fields(worker, data) -> None:
    seeds = onnx_seeds()
    model = onnx.ModelProto()
    model.ParseFromString(seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")])
    mutate_model(data, model)
    check(worker, "onnx", model.SerializeToString())


@FUZZ
@given(data=st.data())
def test_mutated_niro_text(worker, data) -> None:
    seeds = niro_seeds()
    text = seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]
    check(worker, "niro", mutate_text(data, text).encode("utf-8", "surrogatepass"))


@FUZZ
@given(data=st.data())
def test_mutated_onnx_text(worker, data) -> None:
    """onnx's C++ text parser is part of the attack surface (it segfaulted on deep nesting)."""
    seeds = onnx_text_seeds()
    text = seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]
    check(worker, "onnxtxt", mutate_text(data, text).encode("utf-8", "surrogatepass"))


def test_isolation_reports_a_native_crash() -> None:
    """The harness itself: a worker killed by a signal is a 'crash' outcome, and the next input
    gets a fresh worker."""
    isolated = Isolated()
    try:
        assert isolated.run("niro", b"") [0] in ALLOWED
        pool = isolated._executor()
        for process in list(pool._processes.values()):
            process.kill()
        outcome, detail = isolated.run("niro", b"")
        assert (outcome, detail) == ("crash", "the worker process died (a native crash, e.g. SIGSEGV)")
        assert isolated.run("niro", b"")[0] in ALLOWED
    finally:
        isolated.close()
