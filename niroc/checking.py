"""What `niroc check` does: run a model through niroc + IREE and through onnxruntime, compare
every output, and find the first node where the two part ways.

Every step that can fail raises `CheckStepFailed` naming the step (`import`, `iree-compile`,
`run`, `onnxruntime`). Intermediate values are compared by exposing them as graph outputs of
the same model on both sides (frontends/onnx/surgery.py): all at once for a small graph, by
bisecting on the graph's live cuts for a large one (each probe is one compile). This module
renders nothing; check_cmd.py does.
"""

from __future__ import annotations

import ctypes
import importlib
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np
from niro.ir import NirocError
from onnx import TensorProto, helper

from .progress import Progress

__all__ = [
    "ALL_AT_ONCE_LIMIT",
    "CHECK_EXTRA",
    "CheckStepFailed",
    "Comparison",
    "Culprit",
    "IREE_COMPILE_FLAGS",
    "ModelRunner",
    "Tolerance",
    "compare",
    "fused_low_bit_products_note",
    "from_abi",
    "load_iree_module",
    "localize",
    "missing_check_extra",
    "random_feeds",
    "to_abi",
    "tolerance_for",
    "widened_from_half",
]

CHECK_EXTRA = "pip install 'niroc[check]'"
_CHECK_MODULES = (("iree.runtime", "iree-base-runtime"), ("onnxruntime", "onnxruntime"))

IREE_COMPILE_FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
)

ALL_AT_ONCE_LIMIT = 64
"""Graphs with at most this many nodes expose every intermediate value in one compile; larger
ones bisect (about log2(nodes) compiles, each with only a cut's values exposed)."""


class CheckStepFailed(NirocError):
    """A step of `niroc check` failed; `step` is its name as the CLI prints it."""

    def __init__(self, step: str, message: str, **kwargs):
        super().__init__(f"{step} failed: {message}", **kwargs)
        self.step = step


def missing_check_extra() -> list[str]:
    """The packages of the `check` extra that cannot be imported (their PyPI names)."""
    missing = []
    for module, package in _CHECK_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    return missing


# -- tolerances and comparison ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tolerance:
    rtol: float
    atol: float


_TOLERANCES = {
    "float16": Tolerance(1e-2, 1e-2),
    "bfloat16": Tolerance(2e-2, 2e-2),
    "float32": Tolerance(1e-4, 1e-4),
    "float64": Tolerance(1e-7, 1e-7),
}
"""By element type: IREE and onnxruntime may round and accumulate in different orders, so
floats get a relative and an absolute margin; integers and booleans must be equal."""

_EXACT = Tolerance(0.0, 0.0)


def tolerance_for(dtype: np.dtype, rtol: float | None, atol: float | None) -> Tolerance:
    """The element type's tolerance, with --rtol / --atol replacing either part."""
    default = _TOLERANCES.get(np.dtype(dtype).name, _EXACT)
    return Tolerance(default.rtol if rtol is None else rtol, default.atol if atol is None else atol)


_HALF_TYPES = {
    onnx_type: np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    for onnx_type in (TensorProto.FLOAT16, TensorProto.BFLOAT16)
}
_WIDE_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE})


def widened_from_half(model) -> dict[str, np.dtype]:
    """The values of `model`'s main graph that a Cast (or CastLike) widens from fp16/bf16 to
    f32/f64, by name, with the half type: computed in half precision, they carry its error,
    and are compared at its tolerance. A model converted to fp16 with its inputs and outputs
    kept f32 (onnxruntime's `convert_float_to_float16(keep_io_types=True)`, autocast exports)
    ends in such Casts; at f32's tolerance every fp16 rounding difference before them showed
    as a mismatch made by the last Cast."""
    from niro.frontends.onnx.inference import InferenceFailure, infer_types

    casts = [
        node for node in model.graph.node if node.op_type in ("Cast", "CastLike") and node.input
    ]
    if not casts:
        return {}
    try:
        values = infer_types(model).values
    except InferenceFailure:
        return {}

    def element(name: str) -> int:
        found = values.get(name)
        return found.tensor_type.elem_type if found is not None else 0

    return {
        node.output[0]: _HALF_TYPES[element(node.input[0])]
        for node in casts
        if element(node.input[0]) in _HALF_TYPES and element(node.output[0]) in _WIDE_TYPES
    }


@dataclass(frozen=True, slots=True)
class Comparison:
    """One value compared: IREE's result against onnxruntime's."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    max_abs_error: float
    max_rel_error: float
    verdict: str
    """`match`, `mismatch` (values outside the tolerance) or `shape` (shapes differ)."""

    @property
    def matches(self) -> bool:
        return self.verdict == "match"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "verdict": self.verdict,
        }


def compare(name: str, got: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> Comparison:
    """Element-wise within `atol + rtol * |expected|`; NaN matches NaN, infinities themselves."""
    expected = np.asarray(expected)
    got = np.asarray(got)
    if got.shape != expected.shape:
        return Comparison(name, tuple(expected.shape), expected.dtype.name, np.inf, np.inf, "shape")
    if expected.dtype.kind in "fc":
        same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    else:
        same = got == expected
    wide_got = got.astype(np.float64)
    wide_expected = expected.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        error = np.where(same, 0.0, np.abs(wide_got - wide_expected))
        error = np.where(np.isnan(error), np.inf, error)
        scale = np.abs(wide_expected)
        relative = np.where(error == 0, 0.0, error / scale)
    close = same | (error <= tolerance.atol + tolerance.rtol * scale)
    max_abs = float(error.max()) if error.size else 0.0
    max_rel = float(relative.max()) if relative.size else 0.0
    verdict = "match" if bool(close.all()) else "mismatch"
    return Comparison(name, tuple(expected.shape), expected.dtype.name, max_abs, max_rel, verdict)


# -- inputs -------------------------------------------------------------------------------------


def random_feeds(
    model, names: Sequence[str], seed: int, dims: Mapping[str, int]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Random inputs (normal floats, integers in RANDOM_INTEGERS, booleans) of the graph's input
    types, dynamic dims sized by `dims` (by dim name) or 1; returns the feeds and a note per dim
    set to 1. `dims` naming no dynamic dim is the caller's to check (see `dynamic_dim_names`)."""
    rng = np.random.default_rng(seed)
    declared = {value.name: value for value in model.graph.input}
    feeds: dict[str, np.ndarray] = {}
    notes: list[str] = []
    noted: set[str] = set()
    for name in names:
        tensor_type = declared[name].type.tensor_type
        shape = []
        for axis, dim in enumerate(tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                shape.append(dim.dim_value)
            elif dim.dim_param and dim.dim_param in dims:
                shape.append(dims[dim.dim_param])
            else:
                shape.append(1)
                label = dim.dim_param or f"{name}[{axis}]"
                if label not in noted:
                    noted.add(label)
                    hint = f"; pass --dim {dim.dim_param}=SIZE" if dim.dim_param else ""
                    notes.append(f"dynamic dim '{label}' of input '{name}' set to 1{hint}")
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        feeds[name] = _random_array(rng, dtype, tuple(shape))
    return feeds, notes


def dynamic_dim_names(model) -> set[str]:
    return {
        dim.dim_param
        for value in model.graph.input
        for dim in value.type.tensor_type.shape.dim
        if dim.dim_param
    }


RANDOM_INTEGERS = (0, 4)
"""The half-open range of random integer inputs (small: they are often indices or sizes)."""


def _random_array(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(*RANDOM_INTEGERS, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# -- the two runtimes ---------------------------------------------------------------------------

_SIGNLESS = {
    np.dtype(np.uint8): np.int8,
    np.dtype(np.uint16): np.int16,
    np.dtype(np.uint32): np.int32,
    np.dtype(np.uint64): np.int64,
    np.dtype(ml_dtypes.int4): np.int8,
    np.dtype(ml_dtypes.uint4): np.int8,
    np.dtype(ml_dtypes.int2): np.int8,
    np.dtype(ml_dtypes.uint2): np.int8,
    np.dtype(ml_dtypes.float4_e2m1fn): np.int8,
}
"""Unsigned arrays cross the IREE ABI as the signless (signed) type of the same width; the
sub-byte types (ml_dtypes' int4, uint4, int2, uint2, float4_e2m1fn: one element a byte) as int8
arrays of the same bytes (README: element types)."""


def to_abi(array):
    """A numpy input as IREE wants it: scalars (numpy generics) as Python numbers, unsigned
    arrays as the signless type of the same width."""
    if isinstance(array, np.generic):
        array = array.item()
    if isinstance(array, bool):
        return int(array)  # the VM has no bool: an i1 argument is an int
    if isinstance(array, np.ndarray) and array.dtype in _SIGNLESS:
        return array.view(_SIGNLESS[array.dtype])
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


@dataclass
class ModelRunner:
    """Runs one ONNX model (a ModelProto, possibly with extra outputs exposed) both ways.

    `path` names the model in messages and locates its external data for niroc. The niroc
    side imports, verifies and lowers in-process (so a lowering registered or replaced in this
    process is the one used), compiles with iree-compile into a temporary folder, and runs the
    module with iree.runtime's local-sync driver."""

    path: Path
    progress: Progress
    compile_count: int = 0
    workdir: tempfile.TemporaryDirectory = field(default_factory=tempfile.TemporaryDirectory)

    def run_both(
        self, model, feeds: Mapping[str, np.ndarray], what: str
    ) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
        """(output names, IREE's results, onnxruntime's results) of `model` on `feeds`."""
        names = [output.name for output in model.graph.output]
        vmfb, function = self.compile(model, what)
        with self.progress.step(f"running {what} with iree.runtime"):
            got = self.run_iree(vmfb, function, feeds)
        with self.progress.step(f"running {what} with onnxruntime"):
            expected = run_onnxruntime(model, feeds)
        if len(got) != len(names):
            raise CheckStepFailed(
                "run", f"the module returned {len(got)} results, expected {len(names)}"
            )
        return (
            names,
            [from_abi(value, like) for value, like in zip(got, expected, strict=True)],
            expected,
        )

    def compile(self, model, what: str) -> tuple[Path, str]:
        """The model imported and lowered by niroc, then compiled by iree-compile."""
        from niro.backends.mlir import LoweringError, cannot_lower, find_tool, lower_to_mlir
        from niro.frontends.onnx import import_model
        from niro.ir import verify

        self.compile_count += 1
        stem = Path(self.workdir.name) / f"module{self.compile_count}"
        with self.progress.step(f"importing {what} with niroc"):
            try:
                module = import_model(model, filename=str(self.path), expand_functions=cannot_lower)
                errors = [d for d in verify(module) if d.severity == "error"]
                if errors:
                    raise CheckStepFailed("import", f"verification failed: {errors[0]}")
                lowered = lower_to_mlir(module)
            except LoweringError as error:
                first = error.refusals[0] if error.refusals else error
                raise CheckStepFailed("import", str(first), notes=first.notes) from error
            except CheckStepFailed:
                raise
            except NirocError as error:
                raise CheckStepFailed("import", str(error), notes=error.notes) from error
            with open(f"{stem}.mlirbc", "wb") as stream:
                lowered.write_bytecode(stream)
            function = module.functions[0].name
        tool = find_tool("iree-compile")
        if tool is None:
            raise CheckStepFailed("iree-compile", f"iree-compile not found ({CHECK_EXTRA})")
        with self.progress.step(f"compiling {what} with iree-compile"):
            completed = subprocess.run(
                [tool, *IREE_COMPILE_FLAGS, f"{stem}.mlirbc", "-o", f"{stem}.vmfb"],
                capture_output=True,
                text=True,
                check=False,
            )
        if completed.returncode != 0:
            raise CheckStepFailed("iree-compile", _first_error_line(completed.stderr))
        return Path(f"{stem}.vmfb"), function

    def run_iree(self, vmfb: Path, function: str, feeds: Mapping[str, np.ndarray]) -> list:
        try:
            bound = load_iree_module(vmfb)
            results = bound[function](*[to_abi(value) for value in feeds.values()])
        except Exception as error:  # noqa: BLE001 - iree.runtime maps each IREE status to its own
            # Python exception (OUT_OF_RANGE is an IndexError): all are the module failing to run
            raise CheckStepFailed("run", _first_error_line(str(error))) from error
        return list(results) if isinstance(results, (list, tuple)) else [results]


def load_iree_module(vmfb: Path, parameters: Path | None = None, scope: str = "model"):
    """A compiled module loaded for the local-sync driver, with the IREE parameter archive
    `parameters` (an `.irpa`) served under `scope` when given, as
    `iree-run-module --parameters=model=FILE.irpa` does."""
    import iree.runtime as runtime

    config = runtime.Config("local-sync")
    modules = []
    if parameters is not None:
        index = runtime.ParameterIndex()
        index.load(str(parameters))
        provider = index.create_provider(scope=scope)
        modules.append(runtime.create_io_parameters_module(config.vm_instance, provider))
    modules.append(runtime.VmModule.mmap(config.vm_instance, str(vmfb)))
    return runtime.load_vm_modules(*modules, config=config)[-1]


_ORT_RAW_TYPES = {
    np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type)): onnx_type
    for onnx_type in (
        TensorProto.BFLOAT16,
        TensorProto.FLOAT8E4M3FN,
        TensorProto.FLOAT8E4M3FNUZ,
        TensorProto.FLOAT8E5M2,
        TensorProto.FLOAT8E5M2FNUZ,
    )
}
"""The ml_dtypes arrays onnxruntime's Python API has no numpy type for (it refuses them as
inputs, "Numpy_type 256 can't be converted", and as outputs), by their ONNX element type: they
go in and out as raw elements of the same width (every run goes through OrtValues: an
exposed intermediate value may be one of them with no declared type)."""
_ORT_RAW_DTYPES = {onnx_type: dtype for dtype, onnx_type in _ORT_RAW_TYPES.items()}


EXACT_ACCURACY_LEVEL = 1
"""The accuracy_level of the MatMulNBits onnxruntime fuses from a blocked DequantizeLinear +
MatMul: f32 activations, the computation niroc compiles. At its default, 4, onnxruntime
quantizes the activations to int8 there, ~1e-2 off. (A MatMulNBits written in the model is
run as written: niroc computes it as onnxruntime does at its level.)"""


def fused_low_bit_products_note(model) -> str | None:
    """What the user should know when `model` has a DequantizeLinear of blocked weights, which
    onnxruntime fuses with the MatMul reading it into a MatMulNBits (`run_onnxruntime` runs
    that at `EXACT_ACCURACY_LEVEL`); None when it has none."""
    from niro.frontends.onnx.inference import all_graphs

    blocked = any(
        node.op_type == "DequantizeLinear" and attribute.name == "block_size" and attribute.i
        for graph in all_graphs(model.graph)
        for node in graph.node
        for attribute in node.attribute
    )
    if not blocked:
        return None
    return (
        f"onnxruntime fuses the blocked DequantizeLinear + MatMul pairs into MatMulNBits; they "
        f"run at accuracy_level {EXACT_ACCURACY_LEVEL} (f32 activations), the computation niroc "
        f"compiles (at level 4, its default for them, it quantizes the activations to int8: "
        f"~1e-2 off)"
    )


def run_onnxruntime(model, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry(
        "session.qdq_matmulnbits_accuracy_level", str(EXACT_ACCURACY_LEVEL)
    )
    try:
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        values = {name: _ort_value(onnxruntime, np.asarray(value)) for name, value in feeds.items()}
        return [_from_ort_value(value) for value in session.run_with_ort_values(None, values)]
    except Exception as error:  # noqa: BLE001 - onnxruntime raises its own unrelated classes
        raise CheckStepFailed("onnxruntime", _first_error_line(str(error))) from error


def _ort_value(onnxruntime, array: np.ndarray):
    onnx_type = _ORT_RAW_TYPES.get(array.dtype)
    if onnx_type is None:
        return onnxruntime.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array))
    raw = np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")
    return onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, onnx_element_type=onnx_type)


def _from_ort_value(value) -> np.ndarray:
    """A CPU OrtValue's tensor as numpy; bf16/float8 read as raw bytes (`_ORT_RAW_TYPES`)."""
    dtype = _ORT_RAW_DTYPES.get(value.element_type())
    if dtype is None:
        return np.asarray(value.numpy())
    raw = (ctypes.c_char * value.tensor_size_in_bytes()).from_address(value.data_ptr())
    return np.frombuffer(bytes(raw), dtype).reshape(value.shape())


def _first_error_line(text: str) -> str:
    """The first line that says `error` (a tool's diagnostic), else the first non-empty one."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else "(no message)"


# -- finding the first node that differs ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Culprit:
    """The first node whose output differs while its inputs agree."""

    index: int
    name: str
    op_type: str
    comparisons: tuple[Comparison, ...]
    """Its outputs that were compared (the differing ones among them)."""

    def to_dict(self) -> dict:
        return {
            "node": self.name,
            "op_type": self.op_type,
            "index": self.index,
            "outputs": [comparison.to_dict() for comparison in self.comparisons],
        }


def localize(
    model,
    feeds: Mapping[str, np.ndarray],
    runner: ModelRunner,
    tolerance: Callable[[str, np.ndarray], Tolerance],
) -> Culprit | None:
    """The first top-level node whose outputs differ, or None when no exposed value differs
    (the difference then arises where niroc's and onnxruntime's outputs are formed)."""
    from niro.frontends.onnx.surgery import exposed, live_cut, node_label, produced_values

    graph = model.graph
    node_count = len(graph.node)

    def probe(names: Sequence[str], what: str) -> dict[str, Comparison]:
        with exposed(model, names) as outputs:
            _, got, expected = runner.run_both(model, feeds, what)
        return {
            name: compare(name, value, wanted, tolerance(name, wanted))
            for name, value, wanted in zip(outputs, got, expected, strict=True)
        }

    def culprit_at(index: int, comparisons: Mapping[str, Comparison]) -> Culprit:
        node = graph.node[index]
        own = tuple(comparisons[name] for name in node.output if name in comparisons)
        return Culprit(index, node_label(node, index), node.op_type, own)

    if node_count <= ALL_AT_ONCE_LIMIT:
        values = produced_values(graph)
        comparisons = probe([name for _, name in values], "every intermediate value")
        for index, name in values:
            if not comparisons[name].matches:
                return culprit_at(index, comparisons)
        return None

    low, high = 0, node_count - 1
    found: dict[str, Comparison] | None = None
    step = 0
    while low < high:
        middle = (low + high) // 2
        step += 1
        cut = live_cut(graph, middle)
        comparisons = probe(cut, f"bisection {step}: cut after node {middle + 1} of {node_count}")
        if any(not comparisons[name].matches for name in cut):
            high, found = middle, comparisons
        else:
            low = middle + 1
    culprit = culprit_at(low, found) if found is not None else None
    if culprit is None or all(each.matches for each in culprit.comparisons):
        own = [name for name in graph.node[low].output if name]
        culprit = culprit_at(low, probe(own, f"node {low + 1} of {node_count}"))
        if all(each.matches for each in culprit.comparisons):
            return None
    return culprit
