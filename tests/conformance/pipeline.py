"""One ONNX node test through the whole niroc pipeline, stage by stage.

import (ONNX -> Niro) -> verify -> lower (Niro -> MLIR text) -> compile (iree-compile, CPU) ->
run (iree-base-runtime) -> match (ONNX's reference outputs). Each stage's failure is recorded with
its first error line, so the report can say where every test stops and why.

A refusal (a NirocError at import, verify or lower, or one of niroc's run-time checks stopping
the run with its message) is an honest outcome; anything after lowering
that fails (iree-compile rejects our MLIR, the run fails, the numbers differ) or any non-niroc
exception is a niroc bug: `Outcome.is_bug` says which.
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass

import numpy as np
from niro.ir import NirocError, verify

from ..backends.mlir.mlir_harness import NARROW_DTYPES, to_abi
from ..onnx_node_cases import NodeTestCase

STAGES = ("import", "verify", "lower", "compile", "run", "match")
RTOL = 1e-3
ATOL = 1e-5
IREE_COMPILE_FLAGS = ("--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false")


@dataclass(frozen=True)
class Outcome:
    """Where a test stopped: `stage` is the first stage that failed, or "pass"."""

    name: str
    stage: str
    message: str = ""
    refused: bool = False

    @property
    def passed(self) -> bool:
        return self.stage == "pass"

    @property
    def is_bug(self) -> bool:
        """Neither a pass nor a clear niroc refusal: a crash, a compile failure or a wrong number."""
        return not self.passed and not self.refused


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]


def run_case(case: NodeTestCase) -> Outcome:
    """Run one node test through every stage; never raises."""
    try:
        return _run_case(case)
    except Exception as error:  # a crash anywhere is a finding, not a harness failure
        return Outcome(case.name, "crash", f"{type(error).__name__}: {_first_line(error)}")


def _run_case(case: NodeTestCase) -> Outcome:
    from niro.backends.mlir import LoweringError, cannot_lower, lower_to_mlir
    from niro.frontends.onnx import import_model

    with tempfile.TemporaryDirectory(prefix="niroc-conf-") as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as file:
            file.write(case.model.SerializeToString())
        try:
            module = import_model(path, expand_functions=cannot_lower)
        except NirocError as error:
            return Outcome(case.name, "import", _first_line(error), refused=True)
        diagnostics = verify(module)
        if diagnostics:
            return Outcome(case.name, "verify", str(diagnostics[0]), refused=False)
        try:
            lowered = lower_to_mlir(module)
        except NirocError as error:
            # a failure of niroc's own lowering (LoweringError.internal) is a bug, not a refusal
            internal = isinstance(error, LoweringError) and error.internal
            return Outcome(case.name, "lower", _first_line(error), refused=not internal)
        text = io.BytesIO()
        lowered.write_text(text)
        entry = _entry_function(module, case)

    import iree.compiler as iree_compiler
    import iree.runtime as iree_runtime

    try:
        vmfb = iree_compiler.compile_str(
            text.getvalue(), target_backends=["llvm-cpu"], extra_args=list(IREE_COMPILE_FLAGS)
        )
    except Exception as error:
        return Outcome(case.name, "compile", _compile_error_line(error))
    for inputs, expected in case.data_sets:
        try:
            vm_module = iree_runtime.load_vm_flatbuffer(vmfb, driver="local-task")
            results = getattr(vm_module, entry)(*[to_abi(value) for value in inputs])
        except Exception as error:
            message = _first_line(error)
            return Outcome(case.name, "run", message, refused=_is_runtime_check(message))
        actual = _as_tuple(results)
        problem = _mismatch(actual, expected)
        if problem:
            return Outcome(case.name, "match", problem)
    return Outcome(case.name, "pass")


def _is_runtime_check(message: str) -> bool:
    """The run stopped at one of niroc's own run-time checks (a `cf.assert` whose message names
    the function, block and op: "@f ^bb0 op#3 (onnx.MatMul) ...: 'onnx.MatMul' op: ..."), a
    clear refusal of the inputs rather than a bug."""
    return "FAILED_PRECONDITION" in message and " ^bb" in message and "' op: " in message


def _entry_function(module, case: NodeTestCase) -> str:
    """The Function made from the main graph: the one whose input names are the graph's."""
    graph_inputs = tuple(value.name for value in case.model.graph.input)
    for function in module.functions:
        if function.input_names == graph_inputs and function.body is not None:
            return function.name
    return module.functions[0].name


def _compile_error_line(error: Exception) -> str:
    for line in str(error).splitlines():
        if "error:" in line:
            return line.strip()[:300]
    return _first_line(error)


def _as_tuple(results) -> tuple[np.ndarray, ...]:
    if isinstance(results, (tuple, list)):
        return tuple(
            np.asarray(result.to_host() if hasattr(result, "to_host") else result)
            for result in results
        )
    return (np.asarray(results.to_host() if hasattr(results, "to_host") else results),)


def _rtol_for(dtype: np.dtype) -> float:
    """RTOL, widened to two ULPs of a half-precision output type (bf16: 2**-6, f16: 2**-9).

    ONNX's own backend runner compares bfloat16 outputs this way: RTOL = 1e-3 is finer than
    half an ULP of bf16, so it would demand the reference's exact rounding sequence. ONNX's
    expected outputs are themselves computed step by step in half precision (e.g. Attention:
    niroc's f16/bf16 results are closer to a float64 evaluation than the expected ones are)."""
    epsilon = _HALF_PRECISION_EPSILON.get(dtype.name)
    return RTOL if epsilon is None else max(RTOL, 2.0 * epsilon)


_HALF_PRECISION_EPSILON = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


def _mismatch(actual, expected) -> str:
    if len(actual) != len(expected):
        return f"expected {len(expected)} outputs, got {len(actual)}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        want = np.asarray(want)
        if (
            want.dtype.kind in "iu"
            and got.dtype.kind in "iu"
            and got.dtype.itemsize == want.dtype.itemsize
        ):
            # MLIR integers are signless: an unsigned tensor crosses the IREE ABI as the signed
            # type of its width (docs/design.md), and a result that is an input passed through keeps
            # the input's signedness. Same width, same bits: compare them as the expected type.
            got = got.view(want.dtype)
        if want.dtype in NARROW_DTYPES and got.dtype.itemsize == 1:
            # FP8 crosses the IREE ABI as itself, FP4 and the sub-byte integers as one int8 an
            # element (README: element types): the same bytes, read as the expected type.
            got = got.view(want.dtype)
        if got.shape != want.shape:
            return f"output {index}: shape {got.shape} != expected {want.shape}"
        if got.dtype != want.dtype:
            return f"output {index}: dtype {got.dtype} != expected {want.dtype}"
        if want.dtype in NARROW_DTYPES:  # compared as numbers (ml_dtypes' arrays have kind 'V')
            got, want = got.astype(np.float64), want.astype(np.float64)
        if want.dtype.kind in "biu":
            if not np.array_equal(got, want):
                return f"output {index}: integer values differ"
        elif not np.allclose(got, want, rtol=_rtol_for(want.dtype), atol=ATOL, equal_nan=True):
            worst = float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            return f"output {index}: values differ (max abs diff {worst:.3g})"
    return ""
