"""Run-time benchmark: the code iree-compile makes from niroc's MLIR against the code it makes
from iree-import-onnx's, and against onnxruntime, on real-size and exported networks.

    .venv/bin/python tests/bench/bench_run.py [--only NAME ...] [--runs 10] [--extra-flags="..."]

For every model (fixed seeds; see MODELS): niroc's MLIR (`niroc -q model.onnx -o niroc.mlir`)
and the peer's (`iree-import-onnx model.onnx -o peer.mlir`) are compiled by iree-compile with the
same flags (its defaults plus `--iree-llvmcpu-target-cpu=host`), one compile at a time; both
modules are loaded with iree.runtime (`local-task`) and called on the same inputs, and so is an
onnxruntime session (CPU, defaults). Every output of both modules is checked against
onnxruntime (rtol 1e-3, atol 1e-4 of the largest expected magnitude, as the zoo test does; a row
may say otherwise, `Spec.atol`).
Timing: onnxruntime first, in a block of its own (two warm-ups, `--runs` timed calls), then its
session is dropped (its threads spin on after each call and slow whatever runs next); then two
warm-up calls of each IREE module and `--runs` rounds calling niroc's and the peer's in turn, the
order reversed each round (so a load change on the shared machine hits both alike and neither
always follows the other), each timed call right after an untimed one of the same module;
medians are reported with
the ratios niroc/peer and niroc/onnxruntime of the same run, and the compile times (frontend +
iree-compile, wall). A model the peer cannot import or compile shows "-". With `--extra-flags`,
niroc's MLIR is compiled and timed a second time with those iree-compile flags added.

The zoo nets are the onnx wheel's light models with random weights
(tests/backends/mlir/onnx_ops/test_model_zoo.py `randomized`), each in its own opset and
converted to opset 17 by `onnx.version_converter` (the form the peer compiles); the transformer,
the BERT-style encoder and the Llama-style decoder are the perf bench generator's
(testdata/bench/generate.py); the rest are the torch exports in
testdata/pytorch (testdata/pytorch/export.py), at the sizes in MODELS; the `_static` rows are the
same exports with their symbolic input dims fixed in the model, the form `--dim` gives niroc.
Writes testdata/generated/bench/run-report.md (+ run-report.json) and docs/performance.md (the
latest figures; its rows, kept in docs/performance.json, merge with each later run's unless
`--fresh`). Not collected by pytest; `make bench-run` runs it.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
OUT = ROOT / "testdata" / "generated" / "bench"
REPORT = OUT / "run-report.md"
DOCS = ROOT / "docs" / "performance.md"
DOCS_ROWS = ROOT / "docs" / "performance.json"  # the page's rows, which later runs merge into
FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
]
ZOO = ("resnet50", "squeezenet", "shufflenet", "inception_v1", "densenet121")
PEER_OPSET = 17


@dataclass(frozen=True)
class Spec:
    """One benchmark model: how to make its .onnx, the sizes of its symbolic dims and the
    exclusive upper bound of its integer (token id) inputs."""

    what: str
    make: object
    dims: dict = field(default_factory=dict)
    ids: int = 32
    ones: tuple[str, ...] = ()
    """Integer inputs filled with ones (an attention mask), not random ids."""
    single_op: bool = False
    """One op alone (how a construct scales), not a network: outside the geomeans of the
    networks, which the report gives with and without these rows."""
    atol: float = 1e-4
    """The absolute tolerance of the check, as a fraction of the largest expected magnitude."""


def _zoo(name: str, opset: int | None):
    def make(path: Path) -> None:
        from onnx import version_converter

        from tests.backends.mlir.onnx_ops.test_model_zoo import randomized

        model = randomized(name, np.random.default_rng(0))
        if opset is not None:
            model = version_converter.convert_version(model, opset)
        onnx.save(model, path)

    return make


def _exported(name: str):
    def make(path: Path) -> None:
        source = ROOT / "testdata" / "pytorch" / f"{name}.onnx"
        path.write_bytes(source.read_bytes())

    return make


def _edited(make, edit):
    """`make`'s model with `edit(model)` applied to its graph (its weights' file stays beside:
    the model is read without its external data)."""

    def edited(path: Path) -> None:
        make(path)
        model = onnx.load(path, load_external_data=False)
        edit(model)
        onnx.save(model, path)

    return edited


def _fixed(make, dims: dict[str, int]):
    """`make`'s model with its graph inputs' symbolic dims fixed to `dims` (as niroc's
    `--dim NAME=SIZE` does at import), so that both frontends compile the static form."""

    def fix(model: onnx.ModelProto) -> None:
        for value in model.graph.input:
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in dims:
                    dim.dim_value = dims[dim.dim_param]

    return _edited(make, fix)


def _accuracy_level(make, level: int):
    """`make`'s model with every MatMulNBits at `accuracy_level` `level` (the builder writes 4
    for CPU; onnxruntime's quantizer leaves it at 0)."""

    def set_level(model: onnx.ModelProto) -> None:
        for node in model.graph.node:
            if node.op_type == "MatMulNBits":
                kept = [a for a in node.attribute if a.name != "accuracy_level"]
                del node.attribute[:]
                node.attribute.extend([*kept, onnx.helper.make_attribute("accuracy_level", level)])

    return _edited(make, set_level)


def _genai(family: str, precision: str):
    """`family` built by onnxruntime-genai's model builder at `precision`, at the benchmark's
    widths (testdata/llm/generate.py, BENCH_SIZES; random weights, fixed seed)."""

    def make(path: Path) -> None:
        import shutil

        from testdata.llm import generate as llm

        built = llm.generate(path.parent / "genai", family, precision, llm.BENCH_SIZES)
        for file in built.parent.iterdir():
            if file.name.startswith("model.onnx"):
                shutil.copy(file, path.parent / file.name)

    return make


def _generated(name: str):
    """A model of the perf bench's generator (testdata/bench/generate.py, fixed seeds)."""

    def make(path: Path) -> None:
        sys.path.insert(0, str(ROOT / "testdata" / "bench"))
        import generate

        generate.generate([name])
        path.write_bytes(generate.model_path(name).read_bytes())

    return make


GENAI_DECODE_STEP = {
    "batch_size": 1,
    "sequence_length": 1,
    "total_sequence_length": 32,
    "past_sequence_length": 31,
    "kv_cache_dim": 64,
}
"""The genai builder's dims at one decode step after 31 tokens (the KV cache's head size 64)."""

GENAI_PROMPT = {**GENAI_DECODE_STEP, "sequence_length": 32, "past_sequence_length": 0}
"""The genai builder's dims at a 32-token prompt (no KV cache yet)."""


def _genai_spec(
    what: str,
    precision: str,
    dims: dict,
    atol: float = 1e-4,
    fixed: tuple[str, ...] = (),
    level: int | None = None,
) -> Spec:
    """A row of onnxruntime-genai's Llama at `precision` (`_genai`), fed random ids below its
    vocabulary of 256 and an all-ones attention mask; the dims named in `fixed` are fixed in
    the model (as `--dim`) to their sizes in `dims`; `level` sets its MatMulNBits'
    accuracy_level."""
    make = _genai("llama", precision)
    if level is not None:
        make = _accuracy_level(make, level)
    if fixed:
        make = _fixed(make, {name: dims[name] for name in fixed})
    return Spec(what, make, dims, ids=256, ones=("attention_mask",), atol=atol)


MODELS: dict[str, Spec] = {}
for _name in ZOO:
    MODELS[_name] = Spec(f"light {_name}, own opset", _zoo(_name, None))
    MODELS[f"{_name}_17"] = Spec(f"light {_name}, opset 17", _zoo(_name, PEER_OPSET))
MODELS.update(
    {
        "transformer": Spec(
            "perf bench's 12-layer encoder, 128 ids", _generated("transformer"), ids=8192
        ),
        "bert_encoder": Spec(
            "4-layer BERT-style encoder, d=256, 1x128 ids, padding mask", _generated("bert")
        ),
        "llama": Spec(
            "4-layer Llama-style decoder, d=256, 1x128 ids, RoPE, causal mask",
            _generated("llama"),
            ids=4096,
        ),
        "llama_step": Spec(
            "the llama decoder at 1 id, d=512 (a decode step's matrix-vector products)",
            _generated("llama_step"),
            ids=8192,
        ),
        "mlp_rows": Spec(
            "4-layer MLP, d=1024, ffn 4096, on [rows, 1024] (rows a run-time dim) at 1 row",
            _generated("mlp_rows"),
            {"rows": 1},
        ),
        "mlp_rows_128": Spec(
            "mlp_rows with rows=128 fixed in the model (as `--dim`): products of many static rows"
            " by large weights",
            _fixed(_generated("mlp_rows"), {"rows": 128}),
        ),
        "genai_llama_step": _genai_spec(
            "onnxruntime-genai's fp32 Llama (4 layers, hidden 1024, MLP 2816, GQA 16/4 heads),"
            " one decode step after 31 tokens (KV cache)",
            "fp32",
            GENAI_DECODE_STEP,
        ),
        "genai_llama_decode": _genai_spec(
            "genai_llama_step's model with batch_size=1, sequence_length=1 fixed (as `--dim`):"
            " a decode-only module, products of one static row",
            "fp32",
            GENAI_DECODE_STEP,
            fixed=("batch_size", "sequence_length"),
        ),
        "genai_llama_prompt": _genai_spec(
            "genai_llama_step's model on a 32-token prompt (empty KV cache): products of 32"
            " run-time rows by the f32 weights",
            "fp32",
            GENAI_PROMPT,
        ),
        "genai_llama_int4_step": _genai_spec(
            "genai_llama_step with int4 weights (the builder's MatMulNBits, block 32;"
            " at accuracy_level 4: int8 activations per block, in niroc and onnxruntime alike;"
            " checked to 1e-2 of the largest value)",
            "int4",
            GENAI_DECODE_STEP,
            # an activation one ulp apart rounds to the next int8 step in one of the two: its
            # block moves a whole row of a product by one step (0.007-0.01 on values up to 4.4
            # seen, where the f32 product is 0.04 away); `make llm` checks the semantics
            atol=1e-2,
        ),
        "genai_llama_int4_decode": _genai_spec(
            "genai_llama_int4_step's model with batch_size=1, sequence_length=1 fixed (as"
            " `--dim`): a decode-only module (checked to 1e-2 of the largest value)",
            "int4",
            GENAI_DECODE_STEP,
            atol=1e-2,
            fixed=("batch_size", "sequence_length"),
        ),
        "genai_llama_int4_f32_step": _genai_spec(
            "genai_llama_int4_step's model at accuracy_level 0 (onnxruntime's quantizer's"
            " default): the products in f32, of the int4 weights as int8 values q - zero_point",
            "int4",
            GENAI_DECODE_STEP,
            level=0,
        ),
        "genai_llama_int4_prompt": _genai_spec(
            "genai_llama_int4_step's model on a 32-token prompt (empty KV cache): products of"
            " 32 rows by the int4 weights (checked to 2e-2 of the largest value)",
            "int4",
            GENAI_PROMPT,
            # the int8 steps (see genai_llama_int4_step) compound over the layers on 32 rows:
            # layer 0's present KV matches to 1e-6, layers 1-3 to 0.011, 0.022, 0.030 (values
            # up to 2.8; the f32 product is 0.012-0.048 away), the logits to 1e-3
            atol=2e-2,
        ),
        "torch_encoder": Spec(
            "2-layer torch TransformerEncoder export, 1x9 ids (its traced length)",
            _exported("encoder"),
            {"batch": 1, "seq": 9},
        ),
        "gpt_decoder": Spec(
            "2-layer GPT decoder, 1x16 ids", _exported("gpt"), {"batch": 1, "seq": 16}
        ),
        "llama_decoder": Spec(
            "Llama decoder layer, 1x32 ids", _exported("llama"), {"batch": 1, "seq": 32}
        ),
        "lstm": Spec(
            "2-layer bidirectional LSTM, 32x1x16", _exported("lstm"), {"seq": 32, "batch": 1}
        ),
        "lstm_long": Spec(
            "lstm at 1024x16x16 (a long sequence: looped in blocks)",
            _exported("lstm"),
            {"seq": 1024, "batch": 16},
        ),
        "lstm_static": Spec(
            "lstm with seq=32, batch=1 fixed in the model (as `--dim`)",
            _fixed(_exported("lstm"), {"seq": 32, "batch": 1}),
        ),
        "gru": Spec(
            "2-layer bidirectional GRU, 1x32 ids", _exported("gru"), {"batch": 1, "seq": 32}
        ),
        "gru_long": Spec(
            "gru at 16x1024 ids (a long sequence: looped in blocks)",
            _exported("gru"),
            {"batch": 16, "seq": 1024},
        ),
        "gru_static": Spec(
            "gru with batch=1, seq=32 fixed in the model (as `--dim`)",
            _fixed(_exported("gru"), {"batch": 1, "seq": 32}),
        ),
        "scan_long": Spec(
            "one Scan stacking a row of 256 floats per step, 4096 steps (looped in blocks)",
            _generated("scan_long"),
            {"seq": 4096},
            single_op=True,
        ),
        "loop_long": Spec(
            "one Loop stacking a row of 256 floats per iteration, 4096 iterations (in blocks)",
            _generated("loop_long"),
            {"rows": 4096},
            single_op=True,
        ),
        "unet": Spec("small UNet, 1x3x32x32", _exported("unet"), {"batch": 1}),
        "unet_static": Spec(
            "unet with batch=1 fixed in the model (as `--dim`)",
            _fixed(_exported("unet"), {"batch": 1}),
        ),
        "mobilenet": Spec(
            "MobileNetV3-style, 1x3x224x224",
            _exported("mobilenet_hw"),
            {"batch": 1, "h": 224, "w": 224},
        ),
        "mobilenet_static": Spec(
            "mobilenet with batch=1, h=w=224 fixed in the model (as `--dim`)",
            _fixed(_exported("mobilenet_hw"), {"batch": 1, "h": 224, "w": 224}),
        ),
    }
)


@dataclass
class Result:
    model: str
    what: str
    niroc_ms: float | None = None
    peer_ms: float | None = None
    ort_ms: float | None = None
    extra_ms: float | None = None
    niroc_compile_s: float | None = None
    peer_compile_s: float | None = None
    checked: str = ""
    notes: list[str] = field(default_factory=list)
    measured: str = ""  # when, under what load, with how many calls (rows of several runs merge)
    extra_flags: str = ""


def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str | None]:
    """Wall time of a child process (run with `env`, default ours) and its first error line
    (else its last line) on failure."""
    started = time.perf_counter()
    process = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        lines = (process.stderr or process.stdout).strip().splitlines() or ["(no output)"]
        return wall, next((line for line in lines if "error" in line), lines[-1])[:200]
    return wall, None


def _compile(onnx_path: Path, frontend: list[str], mlir: Path, vmfb: Path, flags: list[str]):
    """(frontend + iree-compile seconds, None) or (None, the reason it failed)."""
    if not mlir.exists():
        front, error = _run([*frontend, str(onnx_path), "-o", str(mlir)])
        if error:
            return None, f"{Path(frontend[0]).name}: {error}"
        mlir.with_suffix(".frontend-s").write_text(str(front))
    front = float(mlir.with_suffix(".frontend-s").read_text())
    back, error = _run([str(BIN / "iree-compile"), str(mlir), *FLAGS, *flags, "-o", str(vmfb)])
    if error:
        return None, f"iree-compile: {error}"
    return front + back, None


def _feeds(model: onnx.ModelProto, spec: Spec, rng: np.random.Generator) -> dict[str, np.ndarray]:
    initializers = {tensor.name for tensor in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        kind = value.type.tensor_type
        shape = [
            dim.dim_value if dim.HasField("dim_value") else spec.dims[dim.dim_param]
            for dim in kind.shape.dim
        ]
        if kind.elem_type == onnx.TensorProto.INT64 and value.name in spec.ones:
            feeds[value.name] = np.ones(shape, np.int64)
        elif kind.elem_type == onnx.TensorProto.INT64:
            feeds[value.name] = rng.integers(0, spec.ids, shape, dtype=np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _load(vmfb: Path):
    """A callable running the module's entry function on a list of numpy arrays."""
    import iree.runtime as runtime

    config = runtime.Config("local-task")
    context = runtime.SystemContext(config=config)
    module = runtime.VmModule.copy_buffer(context.instance, vmfb.read_bytes())
    context.add_vm_module(module)
    name = next(n for n in module.function_names if not n.startswith("__") and "$" not in n)
    function = context.modules[module.name][name]

    def call(arrays):
        result = function(*arrays)
        results = result if isinstance(result, (list, tuple)) else [result]
        return [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]

    return call


def _check(
    actual: list[np.ndarray], expected: list[np.ndarray], atol_of_largest: float
) -> str | None:
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        got = got.astype(want.dtype) if got.dtype != want.dtype else got
        if got.shape != want.shape:
            return f"output #{index}: shape {got.shape}, expected {want.shape}"
        atol = atol_of_largest * max(1.0, float(np.abs(want).max())) if want.size else 0.0
        if not np.allclose(got, want, rtol=1e-3, atol=atol):
            return f"output #{index}: max abs diff {float(np.abs(got - want).max()):.3g}"
    return None


def _median_ms(call, runs: int) -> float:
    """The median wall time of `runs` calls after 2 warm-ups, in milliseconds."""
    call()
    call()
    values = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        values.append(time.perf_counter() - started)
    return statistics.median(values) * 1e3


def bench(name: str, runs: int, extra_flags: list[str]) -> Result:
    spec = MODELS[name]
    result = Result(name, spec.what, extra_flags=shlex.join(extra_flags))
    folder = OUT / "run" / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    stamp = folder / "model.what"  # a model made for another spec (renamed entry) is remade
    if not path.exists() or not stamp.exists() or stamp.read_text() != spec.what:
        spec.make(path)
        stamp.write_text(spec.what)
    model = onnx.load(path)
    feeds = _feeds(model, spec, np.random.default_rng(1))
    arrays = list(feeds.values())

    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # the light models' unused initializers warn by the hundred
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    # NOTE: onnxruntime is timed in a block of its own, and its session is gone before IREE's
    # modules are timed: its worker threads spin on after a call returns and take a core from
    # whatever runs next. Timed in turn with it, the module called after it was up to 25%
    # slower (the transformer's niroc/peer read 1.24 in the order ort, niroc, peer and 0.92 in
    # the order ort, peer, niroc, load ~12), even with an untimed call between.
    result.ort_ms = _median_ms(functools.partial(session.run, None, feeds), runs)
    session = None
    gc.collect()
    callers = {}
    niroc = [str(BIN / "niroc"), "-q"]
    peer = [str(BIN / "iree-import-onnx")]
    variants = [("niroc", niroc, "niroc.mlir", []), ("peer", peer, "peer.mlir", [])]
    if extra_flags:
        variants.append(("extra", niroc, "niroc.mlir", extra_flags))
    for key, frontend, mlir, flags in variants:
        for stale in (folder / mlir, folder / mlir.replace(".mlir", ".frontend-s")):
            if key != "extra" and stale.exists():
                stale.unlink()
        seconds, error = _compile(path, frontend, folder / mlir, folder / f"{key}.vmfb", flags)
        if key in ("niroc", "peer"):
            setattr(result, f"{key}_compile_s", seconds)
        if error:
            result.notes.append(f"{key}: {error}")
            continue
        call = _load(folder / f"{key}.vmfb")
        try:
            problem = _check(call(arrays), expected, spec.atol)
        except Exception as exc:  # noqa: BLE001 - a run-time failure is a finding to report
            problem = f"run failed: {str(exc).splitlines()[0][:160]}"
        if problem:
            result.notes.append(f"{key}: WRONG {problem}")
            continue
        callers[key] = lambda call=call: call(arrays)
    result.checked = ", ".join(callers) + " match onnxruntime" if callers else ""
    for caller in callers.values():
        caller()
        caller()
    times: dict[str, list[float]] = {key: [] for key in callers}
    order = list(callers)
    for _ in range(runs):
        # IREE's modules are called in turn, the order reversed each round, so neither always
        # follows the other; each timed call follows an untimed call of the same module.
        for key in order:
            callers[key]()
            started = time.perf_counter()
            callers[key]()
            times[key].append(time.perf_counter() - started)
        order.reverse()
    for key, values in times.items():
        setattr(result, f"{key}_ms", statistics.median(values) * 1e3)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result.measured = f"{stamp}, load {os.getloadavg()[0]:.1f}, {runs} calls"
    return result


def merged(results: list[Result]) -> list[Result]:
    """The docs page's rows (docs/performance.json) with this run's replacing those of the
    models it measured, in MODELS order: runs of a few models (`--only`, e.g. by people working
    on different models) add to the page instead of dropping the rest. Each row keeps its own
    `measured`; its ratios are of one run."""
    rows = {}
    if DOCS_ROWS.exists():
        for row in json.loads(DOCS_ROWS.read_text()):
            if row.get("model") in MODELS:
                rows[row["model"]] = Result(**row)
    rows.update((result.model, result) for result in results)
    return [rows[name] for name in MODELS if name in rows]


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def report(results: list[Result]) -> str:
    extra = any(r.extra_ms is not None for r in results)
    head = ["model", "niroc ms", "peer ms", "onnxruntime ms", "niroc/peer", "niroc/ort"]
    if extra:
        head += ["niroc + extra flags ms", "(extra)/ort"]
    head += ["compile s niroc", "compile s peer"]
    lines = [
        "# Run-time benchmark: niroc vs iree-import-onnx vs onnxruntime",
        "",
        "Made by `make bench-run` (tests/bench/bench_run.py). iree-compile "
        + " ".join(f"`{flag}`" for flag in FLAGS)
        + " (otherwise its defaults) for both niroc's and iree-import-onnx's MLIR; iree.runtime"
        " `local-task`; onnxruntime CPU defaults; median of the calls (see 'measured') after 2"
        " warm-ups; onnxruntime timed in a block of its own, then niroc's and the peer's modules in"
        " turn (the order reversed each round), each timed call right after an untimed one of the"
        ' same module. Batch 1. "-": the peer cannot import or compile the'
        " model. Compile times are wall seconds of the frontend plus iree-compile. Every output of"
        " every module shown was checked against onnxruntime. A row's figures are of one run"
        " ('measured': when, the 1-minute load, the calls); rows of different runs are merged.",
        "",
    ]
    if extra:
        flags = sorted({r.extra_flags for r in results if r.extra_ms is not None})
        lines += ["Extra flags: " + "; ".join(f"`{flag}`" for flag in flags) + ".", ""]
    lines += [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared: timings are noisy; the"
        " ratios of one run are what to compare).",
        "",
        "| " + " | ".join(head) + " |",
        "| --- |" + " ---: |" * (len(head) - 1),
    ]
    for r in results:
        row = [
            r.model,
            _ms(r.niroc_ms),
            _ms(r.peer_ms),
            _ms(r.ort_ms),
            _ratio(r.niroc_ms, r.peer_ms),
            _ratio(r.niroc_ms, r.ort_ms),
        ]
        if extra:
            row += [_ms(r.extra_ms), _ratio(r.extra_ms, r.ort_ms)]
        row += [_ms(r.niroc_compile_s), _ms(r.peer_compile_s)]
        lines.append("| " + " | ".join(row) + " |")
    networks = [r for r in results if not (r.model in MODELS and MODELS[r.model].single_op)]
    single = [r.model for r in results if r not in networks]
    peer = _geomean([r.niroc_ms / r.peer_ms for r in networks if r.niroc_ms and r.peer_ms])
    ort = _geomean([r.niroc_ms / r.ort_ms for r in networks if r.niroc_ms and r.ort_ms])
    worst = max(
        ((r.niroc_ms / r.peer_ms, r.model) for r in networks if r.niroc_ms and r.peer_ms),
        default=None,
    )
    every = _geomean([r.niroc_ms / r.ort_ms for r in results if r.niroc_ms and r.ort_ms])
    lines += [
        "",
        f"- niroc/peer geomean: {_ratio(peer, 1.0)}"
        + (f" (highest: {worst[1]} {worst[0]:.2f})" if worst else ""),
        f"- niroc/onnxruntime geomean: {_ratio(ort, 1.0)}"
        + (
            f"; {_ratio(every, 1.0)} with the single-op rows ({', '.join(single)})"
            if single
            else ""
        ),
    ]
    if single:
        lines.append(
            "- the geomeans are over the networks; the single-op rows show how one op's loop"
            " scales (each iteration driven from the host)"
        )
    if extra:
        lines.append(
            f"- niroc + extra flags/onnxruntime geomean: {_ratio(_geomean([r.extra_ms / r.ort_ms for r in results if r.extra_ms and r.ort_ms]), 1.0)}"
        )
    lines += [
        "",
        "| model | what | checked | measured | notes |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.model} | {r.what} | {r.checked or '-'} | {r.measured} |"
            f" {'; '.join(r.notes).replace('|', '/') or ''} |"
        )
    return "\n".join(lines) + "\n"


DOCS_HEAD = """# Performance

How fast the code iree-compile makes from niroc's MLIR runs, against the code it makes from
iree-import-onnx's MLIR and against onnxruntime on the same CPU. `make bench-run` measures it
and rewrites this page from its latest report (testdata/generated/bench/run-report.md).

"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        nargs="*",
        choices=list(MODELS),
        metavar="NAME",
        help=f"these models only: {', '.join(MODELS)}",
    )
    parser.add_argument("--runs", type=int, default=10, help="timed calls per module (median)")
    parser.add_argument(
        "--extra-flags", default="", help="iree-compile flags to time niroc's MLIR with as well"
    )
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/performance.md")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="report this run's models only (default: merge them into the latest report's rows)",
    )
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    extra_flags = shlex.split(options.extra_flags)
    names = options.only or list(MODELS)
    results = []
    for name in names:
        started = time.perf_counter()
        result = bench(name, options.runs, extra_flags)
        results.append(result)
        print(
            f"{name}: niroc {_ms(result.niroc_ms)} ms, peer {_ms(result.peer_ms)} ms, onnxruntime"
            f" {_ms(result.ort_ms)} ms; niroc/peer {_ratio(result.niroc_ms, result.peer_ms)}, niroc/ort"
            f" {_ratio(result.niroc_ms, result.ort_ms)} ({time.perf_counter() - started:.0f} s)"
            + ("".join(f"\n  {note}" for note in result.notes)),
            flush=True,
        )
    OUT.mkdir(parents=True, exist_ok=True)
    rows = results if options.fresh else merged(results)
    text = report(rows)
    REPORT.write_text(text)
    (OUT / "run-report.json").write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    if not options.no_docs:
        DOCS.parent.mkdir(exist_ok=True)
        body = text.split("\n", 2)[2]  # the report without its title
        DOCS.write_text(DOCS_HEAD + body)
        DOCS_ROWS.write_text(json.dumps([r.__dict__ for r in rows], indent=1) + "\n")
    print(text)
    return 1 if niroc_failed(results) else 0


def niroc_failed(results: list[Result]) -> bool:
    """Whether niroc failed a model (compile, run or a wrong output): that fails the run. The
    peer's failures (iree-import-onnx's wrong output on scan_long, models it cannot import or
    compile) are findings the report shows."""
    return any(note.startswith("niroc") for result in results for note in result.notes)


if __name__ == "__main__":
    sys.exit(main())
