"""Run the in-process pipeline (import/parse -> verify -> lower -> MLIR text) on one input in a
separate worker process, so that a crash in native code (ONNX's C++ shape inference, protobuf,
the MLIR bindings) is a test failure for that input, not a dead pytest worker.

The worker is one long-lived `spawn`ed process (no fork of a threaded pytest process), fed one
input at a time; it reports what happened as data. A worker that dies (a segfault) or stops
answering (a hang) is replaced and the input fails with the signal or the timeout, so
hypothesis can shrink it like any other failure.

Outcomes: ("ok", ""), ("verify", first diagnostic), ("error", "<NirocError subclass>: message"),
("bug", traceback of any other exception), ("crash", how the process died).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import tempfile
import traceback
from concurrent.futures.process import BrokenProcessPool

__all__ = ["Isolated", "run_pipeline"]

TIMEOUT = 60.0
"""A hang guard for one input (generous: the machine may be loaded)."""


def _check_error(error: BaseException) -> tuple[str, str]:
    from niro.ir import NirocError

    if not isinstance(error, NirocError):
        return "bug", "".join(traceback.format_exception(error))
    message = str(error)
    if not error.message or not message.strip():
        return "bug", f"{type(error).__name__} without a message"
    return "error", f"{type(error).__name__}: {message}"


def run_pipeline(kind: str, data: bytes) -> tuple[str, str]:
    """The pipeline on one input, in the worker: `kind` is "onnx" (model bytes) or "onnxtxt"
    (ONNX text), read from a file as niroc reads them, or "niro" (Niro assembly, UTF-8)."""
    import io

    from niro.backends.mlir import cannot_lower, lower_to_mlir
    from niro.frontends.onnx import import_model
    from niro.ir import parse_module, verify

    try:
        if kind in ("onnx", "onnxtxt"):
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, f"model.{kind}")
                with open(path, "wb") as stream:
                    stream.write(data)
                module = import_model(path, expand_functions=cannot_lower)  # as niroc does
        else:
            module = parse_module(data.decode("utf-8", "replace"), filename="fuzz.niro")
        diagnostics = verify(module)
        if any(diagnostic.severity == "error" for diagnostic in diagnostics):
            return "verify", str(diagnostics[0])
        lowered = lower_to_mlir(module, allow_unknown=True)
        lowered.write_text(io.BytesIO())
        return "ok", ""
    except Exception as error:  # noqa: BLE001 - classified: only NirocError is allowed
        return _check_error(error)


def _warm_up() -> None:
    """Import the heavy layers once per worker, not per input."""
    import niro.backends.mlir  # noqa: F401
    import niro.frontends.onnx  # noqa: F401


class Isolated:
    """One worker process running `run_pipeline`; replaced after a crash or a hang."""

    def __init__(self) -> None:
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def _executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_warm_up
            )
        return self._pool

    def run(self, kind: str, data: bytes) -> tuple[str, str]:
        future = self._executor().submit(run_pipeline, kind, data)
        try:
            return future.result(timeout=TIMEOUT)
        except BrokenProcessPool:
            self._discard()
            return "crash", "the worker process died (a native crash, e.g. SIGSEGV)"
        except concurrent.futures.TimeoutError:
            self._discard(kill=True)
            return "crash", f"no answer within {TIMEOUT:.0f} s (a hang)"

    def _discard(self, kill: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if kill:
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
