"""Helpers for the MLIR backend tests: build Niro IR tersely, check and run lowered modules.

Real tools only: the text is parsed back with the MLIR bindings, piped through `iree-opt`,
compiled with `iree-compile` for the CPU and run with `iree.runtime`.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
import onnx
from niro.backends.mlir import (
    LoweredModule,
    cannot_lower,
    find_tool,
    lower_to_mlir,
    make_context,
    run_opt_tool,
)
from niro.backends.mlir.bindings import mlir_ir
from niro.frontends.onnx import import_model
from niro.ir import ScalarType, TensorType, Value, ValueId

from niroc.checking import IREE_COMPILE_FLAGS, from_abi, to_abi  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    import onnxruntime

NUMPY_DTYPES = {
    ScalarType.BOOL: np.bool_,
    ScalarType.I8: np.int8,
    ScalarType.I16: np.int16,
    ScalarType.I32: np.int32,
    ScalarType.I64: np.int64,
    ScalarType.U8: np.uint8,
    ScalarType.U16: np.uint16,
    ScalarType.U32: np.uint32,
    ScalarType.U64: np.uint64,
    ScalarType.F16: np.float16,
    ScalarType.F32: np.float32,
    ScalarType.F64: np.float64,
}

NARROW_DTYPES = frozenset(
    np.dtype(dtype)
    for dtype in (
        ml_dtypes.int4,
        ml_dtypes.uint4,
        ml_dtypes.int2,
        ml_dtypes.uint2,
        ml_dtypes.float4_e2m1fn,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float8_e8m0fnu,
    )
)
"""ml_dtypes' FP8, FP4 and sub-byte integer dtypes (one byte an element)."""


class Ids:
    """Fresh values with increasing ValueIds: `ids(TensorType(...))`."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, type_) -> Value:
        value = Value(ValueId(self.next), type_)
        self.next += 1
        return value


def tensor(element: ScalarType, *shape) -> TensorType:
    return TensorType(element, tuple(shape))


def parse_back(text: str, *, allow_unregistered: bool = False) -> mlir_ir.Module:
    """Parses (and so verifies) MLIR text in a fresh context (the module keeps it alive)."""
    context = make_context(allow_unregistered_dialects=allow_unregistered)
    with context:
        module = mlir_ir.Module.parse(text)
        module.operation.verify()
    return module


def generic_text(module: mlir_ir.Module) -> str:
    """Location-free custom-form text: what two equal modules print the same."""
    buffer = io.StringIO()
    module.operation.print(file=buffer)
    return buffer.getvalue()


def check_lowered(lowered: LoweredModule) -> str:
    """Text parses back and verifies; `iree-opt` takes it and prints the same module."""
    text = lowered.to_text()
    ours = parse_back(text, allow_unregistered=lowered.has_generic_ops)
    theirs = parse_back(run_opt_tool(lowered).decode(), allow_unregistered=lowered.has_generic_ops)
    assert generic_text(theirs) == generic_text(ours)
    return text


def compile_module(
    lowered: LoweredModule, directory: Path, name: str = "module", extra_flags: tuple[str, ...] = ()
) -> Path:
    """Writes `.mlir` and compiles it with iree-compile for the host CPU; returns the .vmfb."""
    source = directory / f"{name}.mlir"
    with open(source, "wb") as handle:
        lowered.write_text(handle)
    output = directory / f"{name}.vmfb"
    tool = find_tool("iree-compile")
    assert tool is not None, "iree-compile not found"
    completed = subprocess.run(
        [tool, *IREE_COMPILE_FLAGS, *extra_flags, str(source), "-o", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return output


def load_vmfb(path: Path, driver: str = "local-sync"):
    """A compiled module loaded for `driver`: local-sync by default (deterministic, one thread);
    local-task is the driver users run, with its asynchronous queue."""
    import iree.runtime as runtime

    return runtime.load_vm_flatbuffer_file(str(path), driver=driver)


def call(vm_module, name: str, *inputs):
    """Calls a function of a loaded module; always returns a list of results."""
    results = vm_module[name](*[to_abi(value) for value in inputs])
    if isinstance(results, (list, tuple)):
        return list(results)
    return [results]


Feeds = Mapping[str, np.ndarray]
"""One run's inputs: graph input name -> array, in the order of the compiled function's
arguments (the model's graph inputs)."""

Reference = Callable[[Feeds], Sequence[np.ndarray]]
"""What computes the expected outputs of one run when onnxruntime cannot take the model as it
is (e.g. a time-major f32 twin of a batch-major f16 recurrence)."""


def compile_onnx(
    model: onnx.ModelProto | str | Path,
    directory: Path,
    name: str = "module",
    *,
    expand_functions=cannot_lower,
):
    """An ONNX model (ModelProto or path) imported, lowered by niroc, compiled once with
    iree-compile into `directory/name.vmfb` and loaded: what the dynamic-shape tests run at
    several shapes. Functions ONNX defines by a body are expanded where niroc cannot lower them,
    as the CLI does."""
    lowered = lower_to_mlir(import_model(model, expand_functions=expand_functions))
    return load_vmfb(compile_module(lowered, directory, name))


def stream_ir(model: onnx.ModelProto, directory: Path, name: str = "module") -> str:
    """An ONNX model lowered by niroc and taken by iree-compile to its stream dialect
    (`--compile-to=stream`): where its submissions (`stream.cmd.execute`) and its reads of a
    device tensor back to the host (`stream.resource.load`) show."""
    lowered = lower_to_mlir(import_model(model))
    return compile_module(lowered, directory, name, ("--compile-to=stream",)).read_text()


def _reference_runner(reference) -> Reference:
    """A model (ModelProto or path) or an onnxruntime session as a Reference; a Reference as is."""
    import onnxruntime

    if isinstance(reference, onnx.ModelProto):
        reference = reference.SerializeToString()
    if isinstance(reference, (bytes, str, Path)):
        source = reference if isinstance(reference, bytes) else str(reference)
        reference = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
    if isinstance(reference, onnxruntime.InferenceSession):
        session = reference
        return lambda feeds: session.run(None, dict(feeds))
    return reference


def assert_matches_onnxruntime(
    vm_module,
    reference: onnx.ModelProto | str | Path | onnxruntime.InferenceSession | Reference,
    feeds_list: Iterable[Feeds],
    *,
    function: str,
    rtol: float,
    atol: float | Callable[[np.ndarray], float],
) -> list[list[np.ndarray]]:
    """Runs `function` of a compiled module once per feeds and checks every run against the
    reference: as many outputs, each of the reference's shape and within rtol/atol of it (after
    the IREE ABI's signless and device arrays are read back as the reference's dtype).

    Why one helper: "compile once, run at several shapes, compare with onnxruntime" is how every
    dynamic-shape test proves the compiled module is not specialised to one size; doing it in
    one place keeps all of them checking the output count, shapes and values the same way.
    `reference` is a model (ModelProto or path) or an onnxruntime session run as is, or a
    Reference; `atol` may depend on the expected output (e.g. 1 for requantized uint8). Returns
    the outputs as numpy arrays, one list per run, for checks of a test's own."""
    run_reference = _reference_runner(reference)
    results = []
    for feeds in feeds_list:
        expected = list(run_reference(feeds))
        got = call(vm_module, function, *feeds.values())
        where = f"{function} at input shapes {[np.shape(value) for value in feeds.values()]}"
        assert len(got) == len(expected), f"{where}: {len(got)} outputs, expected {len(expected)}"
        outputs = []
        for index, (value, wanted) in enumerate(zip(got, expected, strict=True)):
            actual = from_abi(value, wanted)
            context = f"{where}, output #{index}"
            assert actual.shape == wanted.shape, (
                f"{context}: shape {actual.shape}, expected {wanted.shape}"
            )
            tolerance = atol(wanted) if callable(atol) else atol
            np.testing.assert_allclose(actual, wanted, rtol=rtol, atol=tolerance, err_msg=context)
            outputs.append(actual)
        results.append(outputs)
    return results


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """How many representable values of their (common) float type lie between each pair of
    elements: 0 when equal (and for +0 / -0), 1 for neighbours. Both arrays are mapped to
    their bit patterns, ordered so that consecutive floats get consecutive integers."""
    expected = np.asarray(expected)
    actual = np.asarray(actual).astype(expected.dtype, copy=False)
    width = expected.dtype.itemsize * 8
    unsigned = np.dtype(f"u{expected.dtype.itemsize}")
    sign = 1 << (width - 1)

    def ordered(values: np.ndarray) -> np.ndarray:
        bits = values.view(unsigned).astype(np.int64)
        return np.where(bits >= sign, sign - bits, bits)

    return np.abs(ordered(actual) - ordered(expected))


def assert_within_ulps(actual: np.ndarray, expected: np.ndarray, ulps: int, context: str) -> None:
    """Every element of `actual` within `ulps` units in the last place of `expected`'s float
    type (fp16, bf16, f32...). Why ulps: a relative tolerance is far too loose for an output
    near 1 and far too tight for one that cancels to near 0; the number of representable values
    between two results is what differs when two programs round at other points."""
    expected = np.asarray(expected)
    assert np.shape(actual) == expected.shape, (
        f"{context}: shape {np.shape(actual)}, expected {expected.shape}"
    )
    distance = ulp_distance(actual, expected)
    worst = int(distance.max()) if distance.size else 0
    assert worst <= ulps, (
        f"{context}: {int((distance > ulps).sum())} of {distance.size} elements more than {ulps} ulp"
        f" from the reference (worst {worst} ulp)"
    )
