"""Helpers for the MLIR backend tests: build Niro IR tersely, check and run lowered modules.

Real tools only: the text is parsed back with the MLIR bindings, piped through `iree-opt`,
compiled with `iree-compile` for the CPU and run with `iree.runtime`.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
from niro.backends.mlir import LoweredModule, find_tool, make_context, run_opt_tool
from niro.backends.mlir.bindings import ir
from niro.ir import ScalarType, TensorType, Value, ValueId

IREE_COMPILE_FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
)

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

SIGNLESS = {
    np.dtype(np.uint8): np.int8,
    np.dtype(np.uint16): np.int16,
    np.dtype(np.uint32): np.int32,
    np.dtype(np.uint64): np.int64,
}
"""Unsigned arrays cross the IREE ABI as the signless (signed) type of the same width."""


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


def parse_back(text: str, *, allow_unregistered: bool = False) -> ir.Module:
    """Parses (and so verifies) MLIR text in a fresh context (the module keeps it alive)."""
    context = make_context(allow_unregistered_dialects=allow_unregistered)
    with context:
        module = ir.Module.parse(text)
        module.operation.verify()
    return module


def generic_text(module: ir.Module) -> str:
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


def load_vmfb(path: Path):
    import iree.runtime as runtime

    return runtime.load_vm_flatbuffer_file(str(path), driver="local-sync")


def to_abi(array):
    """A numpy input as IREE wants it: scalars (numpy generics) as Python numbers, unsigned
    arrays as the signless type of the same width."""
    if isinstance(array, np.generic):
        array = array.item()
    if isinstance(array, bool):
        return int(array)  # the VM has no bool: an i1 argument is an int
    if isinstance(array, np.ndarray) and array.dtype in SIGNLESS:
        return array.view(SIGNLESS[array.dtype])
    return array


def from_abi(result, like):
    """An IREE result as numpy, reinterpreted with `like`'s dtype."""
    if hasattr(result, "to_host"):
        result = result.to_host()
    result = np.asarray(result)
    like = np.asarray(like)
    if result.dtype != like.dtype and result.dtype.itemsize == like.dtype.itemsize:
        result = result.view(like.dtype)
    return result.astype(like.dtype, copy=False)


def call(vm_module, name: str, *inputs):
    """Calls a function of a loaded module; always returns a list of results."""
    results = vm_module[name](*[to_abi(value) for value in inputs])
    if isinstance(results, (list, tuple)):
        return list(results)
    return [results]
