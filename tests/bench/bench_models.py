"""Whole-process benchmark of niroc on generated models, against floors and the peer.

    .venv/bin/python tests/bench/bench_models.py [--runs 3] [--only MODEL ...] [--skip-peer]

Generates the models (testdata/bench/generate.py, fixed seeds) if they are missing, then for
each model runs every command below as its own process, `--runs` times (median reported):

| command | what it measures |
| --- | --- |
| `read` | reading the model's files (model + external data) in 1 MiB chunks: the I/O floor |
| `copy` | copying those files into one output file: the floor for bytecode |
| `hex` | streaming the weights' files as hex text to an output file in 256 KiB chunks (`binascii.hexlify`): the floor for MLIR text |
| `onnx.load` | `python -c "import onnx; onnx.load(m)"` (with its external data): the parse floor |
| `import onnx` | `python -c "import onnx"` (one-node model only): the start-up floor |
| `import deps` | imports what docs/design.md makes niroc use (onnx, onnx_ir, click, the MLIR bindings and the dialect modules the lowering builds with) and makes an MLIR context (one-node model only): start-up no design on these dependencies can go below |
| `MLIR parse` | reads niroc's own bytecode output of the model back with the MLIR bindings (small_nodes only) |
| `MLIR parse+verify+print` | the same, then MLIR's verifier and its text printer with niroc's options into a file: minus `MLIR parse`, what MLIR itself costs for the module niroc builds, verified in-process and printed as docs/design.md requires |
| `niroc text` | `niroc -q M -o out.mlir` |
| `niroc bytecode` | `niroc -q M -o out.mlirbc` |
| `niroc params` | `niroc -q M --params out.irpa -o out.params.mlir`: the weights to an IREE parameter archive (weight-bound models; output bytes are the archive's) |
| `iree-import-onnx` | the peer, `iree-import-onnx M -o out.mlir`, from the iree-base-compiler wheel |
| `iree-import-onnx params` | the peer's `--externalize-params --save-params-to out.peer.irpa` (mlp_external only; the archive is fsynced too) |

`--only mlp_huge` runs the model with 4.25 GiB of external weights (not in the default set): the
copy floor, `niroc bytecode` and `niroc params` only, each with peak RSS <= 256 MiB as the check,
then the params module is compiled by iree-compile and run by iree.runtime with its archive and
compared with numpy computed from the weights file (offsets past 32 bits, end to end).

Figures per process, from `os.wait4`'s rusage of the child: wall (perf_counter around spawn
and reap), user and sys CPU, peak RSS (ru_maxrss). This parent imports nothing heavy (no numpy,
no onnx) and spawns with subprocess (vfork/posix_spawn), so the children's peaks are their own:
a forked child's ru_maxrss would start at its parent's. The `python -c pass` row checks that.
Every output file written by the floors, niroc and the peer is fsynced before the process
exits, as niroc's atomic writes must be, so the floors and niroc pay for the same disk work.

The ratios (niroc over a floor, the peer over a floor) are computed from figures of the same
run. Models whose ops niroc cannot lower yet get `--allow-unknown` (the table says so). The
text output of every niroc run is hashed: different bytes for the same model fail the run.
After the measured runs, one more `niroc --timing -q M -o out.mlir` per model shows where
niroc's time goes (load, verify, lower, write, the rest); it is reported, not measured.
Results: a table on stdout and `testdata/generated/bench/report.md` (+ `report.json`); the
figures section of docs/compiler-speed.md is rewritten from them (`--no-docs`: not). The page's
rows are kept per model in docs/compiler-speed.json, so a run of some models (`--only`) replaces
theirs and keeps the others', each with when and under what load it was measured.
Not collected by pytest; `make bench` runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
OUT = ROOT / "testdata" / "generated" / "bench"
GENERATOR = ROOT / "testdata" / "bench" / "generate.py"
MODELS = ("one_node", "small_nodes", "transformer", "mlp_inline", "mlp_external", "mlp_huge")
ON_REQUEST = ("mlp_huge",)
"""Run only when named with `--only`: 4.25 GiB of weights, written again by every niroc run."""
WEIGHT_BOUND = ("mlp_external", "mlp_inline", "transformer")
BOUNDED_MEMORY = ("mlp_external", "mlp_huge")
"""Models whose niroc outputs must stream: peak RSS <= 256 MiB whatever the weights' size."""
DOCS = ROOT / "docs" / "compiler-speed.md"
DOCS_ROWS = ROOT / "docs" / "compiler-speed.json"  # the figures' rows per model, merged with each later run's
FIGURES_BEGIN = "<!-- figures: written by `make bench` (tests/bench/bench_models.py) from its latest runs -->"
FIGURES_END = "<!-- end of figures -->"
WHAT = {
    "one_node": "one Add of two 2x2 inputs: start-up",
    "small_nodes": "20,000 nodes on 8x8 f32, 6,487 initializers (2.4 MiB)",
    "transformer": "12-layer encoder, 599 nodes, 93 MiB of inline weights",
    "mlp_inline": "25 x 2048x2048 f32 MatMul + bias, 400 MiB inline",
    "mlp_external": "16 x 4096x4096 f32 MatMul + bias, 1.0 GiB of external data",
    "mlp_huge": "17 x 8192x8192 f32 MatMul + bias, 4.25 GiB of external data",
}
"""What each model is, for the docs' figures (testdata/bench/generate.py makes them)."""
MLIR_FLOOR_INPUT = "out.floor-input.mlirbc"
"""niroc's bytecode output of small_nodes, made before the measured runs: the `MLIR parse` floors read it."""
HEX_CHUNK = 256 << 10
MIB = 1 << 20

_READ = """
import sys
buffer = bytearray(1 << 20)
for path in sys.argv[1:]:
    with open(path, "rb", buffering=0) as handle:
        while handle.readinto(buffer):
            pass
"""

_COPY = """
import os, sys
with open(sys.argv[1], "wb") as out:
    for path in sys.argv[2:]:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                out.write(chunk)
    out.flush()
    os.fsync(out.fileno())
"""

_HEX = f"""
import binascii, os, sys
with open(sys.argv[1], "wb") as out:
    for path in sys.argv[2:]:
        with open(path, "rb") as handle:
            while chunk := handle.read({HEX_CHUNK}):
                out.write(binascii.hexlify(chunk))
    out.flush()
    os.fsync(out.fileno())
"""

_ONNX_LOAD = "import sys, onnx; onnx.load(sys.argv[1])"

# NOTE: the same binding choice as backends/mlir/bindings.py (upstream `mlir` first), without
# importing niroc: these are floors of the dependencies, not of niroc's code.
_BINDINGS = """
try:
    from mlir import ir
    from mlir.dialects import _linalg_ops_gen, arith, cf, func, math, scf, tensor
except ImportError:
    from iree.compiler import ir
    from iree.compiler.dialects import _linalg_ops_gen, arith, cf, func, math, scf, tensor
"""

# NOTE: onnx_ir as niroc imports it: sympy deferred (frontends/onnx/_deferred.py, loaded by path
# so that no other niroc module is imported).
_IMPORT_DEPS = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("_deferred", {str(ROOT / "frontends" / "onnx" / "_deferred.py")!r})
deferred = importlib.util.module_from_spec(spec)
spec.loader.exec_module(deferred)
deferred.defer_sympy()
import onnx, onnx_ir, click
""" + _BINDINGS + "ir.Context()"

_MLIR_PARSE = _BINDINGS + """
import sys
with ir.Context():
    module = ir.Module.parse(open(sys.argv[1], "rb").read())
"""

_MLIR_PRINT = _MLIR_PARSE + """
    import os
    module.operation.verify()
    with open(sys.argv[2], "wb") as out:
        module.operation.print(file=out, binary=True, enable_debug_info=True, assume_verified=True,
                               large_resource_limit=1)
        out.flush()
        os.fsync(out.fileno())
"""

# mlp_huge end to end: niroc --params, iree-compile the (small) module, run it with iree.runtime
# and the 4.25 GiB archive, and compare with numpy computed from the weights file itself; then
# niroc's bytecode output read back by MLIR (parseFile), every global there with its type.
# Prints a JSON object: the run's max |error| / max |y|, and the globals found in the bytecode.
_HUGE_CHECK = _BINDINGS + """
import json, subprocess, sys
from pathlib import Path
import numpy as np
import onnx
from niro.backends.mlir import find_tool
from niroc.checking import IREE_COMPILE_FLAGS, load_iree_module
folder, niroc = Path(sys.argv[1]), sys.argv[2]
# the sizes and byte ranges are the model's own (its initializers, without their data)
tensors = {t.name: t for t in onnx.load(folder / "model.onnx", load_external_data=False).graph.initializer}
layers = sum(1 for name in tensors if name.endswith(".weight"))
side = int(tensors["fc0.weight"].dims[0])
def data(name):
    where = {entry.key: int(entry.value) for entry in tensors[name].external_data if entry.key != "location"}
    return weights[where["offset"] // 4:(where["offset"] + where["length"]) // 4]
module, archive, vmfb = folder / "out.check.mlir", folder / "out.check.irpa", folder / "out.check.vmfb"
bytecode = folder / "out.check.mlirbc"
result = {}
try:
    subprocess.run([niroc, "-q", str(folder / "model.onnx"), "--params", str(archive), "-o", str(module)], check=True)
    subprocess.run([find_tool("iree-compile"), *IREE_COMPILE_FLAGS, str(module), "-o", str(vmfb)], check=True)
    weights = np.memmap(folder / "weights.bin", np.float32, "r")
    x = np.random.default_rng(1).standard_normal((1, side), dtype=np.float32)
    expected = x
    for layer in range(layers):
        expected = expected @ data(f"fc{layer}.weight").reshape(side, side) + data(f"fc{layer}.bias")
    got = load_iree_module(vmfb, archive)["mlp_huge"](x).to_host()
    result["error"] = float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))
    for path in (module, archive, vmfb):
        path.unlink()
    subprocess.run([niroc, "-q", str(folder / "model.onnx"), "-o", str(bytecode)], check=True)
    wanted = {f"fc{layer}_{kind}": f"tensor<{shape}xf32>" for layer in range(layers)
              for kind, shape in (("weight", f"{side}x{side}"), ("bias", side))}
    with ir.Context():
        parsed = ir.Module.parseFile(str(bytecode))
        found = {str(op.attributes["sym_name"]).strip('"'): str(op.attributes["type"])
                 for op in parsed.body.operations if op.operation.name == "ml_program.global"}
    result["globals"] = sum(found.get(name) == kind for name, kind in wanted.items())
    result["globals_wanted"] = len(wanted)
finally:
    for path in (module, archive, vmfb, bytecode):
        path.unlink(missing_ok=True)
print(json.dumps(result))
"""

# The peer writes without fsync; this wrapper runs it and then fsyncs its output, so its
# figures include the same disk work as niroc's (the child's rusage covers the peer).
_PEER = """
import os, subprocess, sys
outputs = sys.argv[1].split(os.pathsep)
code = subprocess.call(sys.argv[2:])
if code == 0:
    for output in outputs:
        descriptor = os.open(output, os.O_RDONLY)
        os.fsync(descriptor)
        os.close(descriptor)
sys.exit(code)
"""


@dataclass
class Sample:
    wall: float
    user: float
    sys: float
    rss_mib: float
    output_bytes: int
    ok: bool
    error: str = ""
    digest: str = ""


@dataclass
class Row:
    model: str
    command: str
    note: str = ""
    samples: list[Sample] = field(default_factory=list)

    def median(self, name: str) -> float:
        values = [getattr(sample, name) for sample in self.samples if sample.ok]
        return statistics.median(values) if values else float("nan")

    @property
    def ok(self) -> bool:
        return bool(self.samples) and all(sample.ok for sample in self.samples)

    @property
    def cpu(self) -> float:
        return self.median("user") + self.median("sys")


def run_process(argv: list[str], output: Path | None, hash_output: bool = False) -> Sample:
    """Run `argv` as a child; its wall time and its own rusage (wait4)."""
    if output is not None and output.exists():
        output.unlink()
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        message = stderr.read().decode(errors="replace").strip()
    ok = process.returncode == 0
    size = output.stat().st_size if output is not None and output.exists() else 0
    digest = ""
    if ok and hash_output and output is not None:
        digest = _digest(output)
    if output is not None and output.exists():
        output.unlink()  # NOTE: 2 GB outputs; the disk must not fill up over the runs
    return Sample(
        wall=wall,
        user=usage.ru_utime,
        sys=usage.ru_stime,
        rss_mib=usage.ru_maxrss / 1024,  # Linux: KiB
        output_bytes=size,
        ok=ok,
        error="" if ok else (message.splitlines() or [f"exit {process.returncode}"])[-1][:300],
        digest=digest,
    )


def _digest(path: Path) -> str:
    hasher = hashlib.blake2b(digest_size=16)
    with open(path, "rb", buffering=0) as handle:
        buffer = bytearray(4 * MIB)
        view = memoryview(buffer)
        while count := handle.readinto(buffer):
            hasher.update(view[:count])
    return hasher.hexdigest()


def model_files(name: str) -> list[Path]:
    folder = OUT / name
    model = folder / "model.onnx"
    return [model] + sorted(path for path in folder.iterdir() if path != model and not path.name.startswith("out."))


def needs_allow_unknown(model: Path) -> str | None:
    """The lowering error when niroc cannot lower every op of `model` yet, else None."""
    completed = subprocess.run(
        [str(BIN / "niroc"), "-q", "verify", str(model)], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise SystemExit(f"niroc verify {model} failed:\n{completed.stdout}{completed.stderr}")
    with tempfile.TemporaryDirectory() as folder:
        completed = subprocess.run(
            [str(BIN / "niroc"), "-q", str(model), "--elide-weights", "-o", os.path.join(folder, "m.mlir")],
            capture_output=True, text=True, check=False,
        )
    if completed.returncode == 0:
        return None
    return completed.stderr.strip().splitlines()[0]


def commands_for(name: str, allow_unknown: bool, skip_peer: bool) -> list[tuple[str, list[str], Path | None, str]]:
    """(command label, argv, output file or None, note) for one model."""
    python = str(BIN / "python")
    files = [str(path) for path in model_files(name)]
    model = files[0]
    folder = OUT / name
    text, bytecode = folder / "out.mlir", folder / "out.mlirbc"
    floor, peer = folder / "out.floor", folder / "out.peer.mlir"
    extra = ["--allow-unknown"] if allow_unknown else []
    note = "--allow-unknown" if allow_unknown else ""
    if name == "mlp_huge":
        # NOTE: past 4 GiB only what must stream is measured: text would be 8.5 GB of hex, and
        # iree-import-onnx holds the weights several times in memory (~6 GB for the 1 GiB model).
        archive, module = folder / "out.irpa", folder / "out.params.mlir"
        return [
            ("copy", [python, "-c", _COPY, str(floor), *files], floor, ""),
            ("niroc bytecode", [str(BIN / "niroc"), "-q", model, "-o", str(bytecode)], bytecode, ""),
            ("niroc params", [str(BIN / "niroc"), "-q", model, "--params", str(archive), "-o", str(module)],
             archive, ""),
        ]
    commands = [
        ("python -c pass", [python, "-c", "pass"], None, ""),
        ("read", [python, "-c", _READ, *files], None, ""),
        ("copy", [python, "-c", _COPY, str(floor), *files], floor, ""),
        ("hex", [python, "-c", _HEX, str(floor), *files], floor, ""),
        ("onnx.load", [python, "-c", _ONNX_LOAD, model], None, ""),
    ]
    if name == "one_node":
        commands.append(("import onnx", [python, "-c", "import onnx"], None, ""))
        commands.append(("import deps", [python, "-c", _IMPORT_DEPS], None, ""))
    if name == "small_nodes":
        mlir_input = str(folder / MLIR_FLOOR_INPUT)
        commands.append(("MLIR parse", [python, "-c", _MLIR_PARSE, mlir_input], None, ""))
        commands.append(("MLIR parse+verify+print", [python, "-c", _MLIR_PRINT, mlir_input, str(floor)], floor, ""))
    commands += [
        ("niroc text", [str(BIN / "niroc"), "-q", model, *extra, "-o", str(text)], text, note),
        ("niroc bytecode", [str(BIN / "niroc"), "-q", model, *extra, "-o", str(bytecode)], bytecode, note),
    ]
    if name in WEIGHT_BOUND:
        archive, module = folder / "out.irpa", folder / "out.params.mlir"
        params_argv = [str(BIN / "niroc"), "-q", model, *extra, "--params", str(archive), "-o", str(module)]
        commands.append(("niroc params", params_argv, archive, note))
    if not skip_peer:
        peer_argv = [python, "-c", _PEER, str(peer), str(BIN / "iree-import-onnx"), model, "-o", str(peer)]
        commands.append(("iree-import-onnx", peer_argv, peer, ""))
        if name == "mlp_external":
            peer_archive = folder / "out.peer.irpa"
            outputs = os.pathsep.join((str(peer), str(peer_archive)))
            peer_argv = [python, "-c", _PEER, outputs, str(BIN / "iree-import-onnx"), model,
                         "--externalize-params", "--save-params-to", str(peer_archive), "-o", str(peer)]
            commands.append(("iree-import-onnx params", peer_argv, peer_archive, ""))
    return commands


def runs_for(name: str, command: str, runs: int) -> int:
    """The big models' slow processes run fewer times (the peer takes ~25 s and ~6 GB on the
    1 GB model; niroc writes 2 GB of text a run)."""
    if command.startswith("iree-import-onnx") and name in ("mlp_external", "mlp_inline"):
        return 1
    if name in ("mlp_external", "mlp_huge") and command.startswith("niroc"):
        return min(runs, 2)
    return runs


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def measure_model(name: str, runs: int, skip_peer: bool) -> list[Row]:
    model = OUT / name / "model.onnx"
    lowering_error = needs_allow_unknown(model)
    rows = []
    run_process([str(BIN / "python"), "-c", _READ, *map(str, model_files(name))], None)  # warm the page cache
    if name == "small_nodes":
        extra = ["--allow-unknown"] if lowering_error else []
        subprocess.run([str(BIN / "niroc"), "-q", str(model), *extra, "-o", str(OUT / name / MLIR_FLOOR_INPUT)],
                       check=True)
    for label, argv, output, note in commands_for(name, lowering_error is not None, skip_peer):
        row = Row(name, label, note)
        for _ in range(runs_for(name, label, runs)):
            row.samples.append(run_process(argv, output, hash_output=label == "niroc text"))
            if not row.samples[-1].ok:
                break  # a failure is recorded once, not repeated
        rows.append(row)
        print(f"  {format_row(row)}", flush=True)
    if lowering_error:
        print(f"  (niroc cannot lower every op yet: {lowering_error})")
    if name == "mlp_huge":
        HUGE_RESULTS[:] = check_huge_results()
        for check in HUGE_RESULTS:
            print(f"  {check.what}: {check.value:.3g} (target {check.target})", flush=True)
        return rows  # no `--timing` text compile: 8.5 GB of hex
    STEP_TIMES[name] = niroc_step_times(name, lowering_error is not None)
    print("\n".join(f"  {line}" for line in STEP_TIMES[name].splitlines()), flush=True)
    return rows


HUGE_RESULTS: list[Check] = []
"""The end-to-end checks of mlp_huge's outputs, once measured."""


def check_huge_results() -> list[Check]:
    """mlp_huge compiled with `--params` and run by IREE with its 4.25 GiB archive, against
    numpy; and its bytecode output read back by MLIR."""
    run = "params module run with its archive vs numpy (max |error| / max |y|)"
    parsed = "bytecode read back by MLIR: globals with their types"
    completed = subprocess.run([str(BIN / "python"), "-c", _HUGE_CHECK, str(OUT / "mlp_huge"), str(BIN / "niroc")],
                               capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        lines = (completed.stderr.strip() or f"exit {completed.returncode}").splitlines()
        return [Check("mlp_huge", run, float("nan"), "<= 1e-4", False, lines[-1][:200])]
    result = json.loads(completed.stdout.splitlines()[-1])
    return [
        Check("mlp_huge", run, result["error"], "<= 1e-4", result["error"] <= 1e-4),
        Check("mlp_huge", parsed, result["globals"], f"{result['globals_wanted']}",
              result["globals"] == result["globals_wanted"]),
    ]


STEP_TIMES: dict[str, str] = {}
"""Model name -> `niroc --timing`'s table of its one extra text compile."""


def niroc_step_times(name: str, allow_unknown: bool) -> str:
    """`niroc --timing`'s table for one text compile of `name` (one run, after the measured ones)."""
    folder = OUT / name
    extra = ["--allow-unknown"] if allow_unknown else []
    output = folder / "out.mlir"
    completed = subprocess.run(
        [str(BIN / "niroc"), "--timing", "-q", str(folder / "model.onnx"), *extra, "-o", str(output)],
        capture_output=True, text=True, check=False,
    )
    output.unlink(missing_ok=True)
    return completed.stderr.replace(str(folder) + os.sep, "").rstrip()


def format_row(row: Row) -> str:
    if not row.ok:
        failed = next(sample for sample in row.samples if not sample.ok)
        return f"{row.model:13} {row.command:17} FAILED: {failed.error}"
    size = row.median("output_bytes")
    return (
        f"{row.model:13} {row.command:17} wall {row.median('wall'):7.2f} s  user {row.median('user'):6.2f} s  "
        f"sys {row.median('sys'):5.2f} s  peak {row.median('rss_mib'):7.0f} MiB"
        + (f"  out {size / MIB:8.1f} MiB" if size else "")
        + f"  (n={len(row.samples)}) {row.note}"
    )


# -- ratios and targets --------------------------------------------------------------------------


@dataclass
class Check:
    model: str
    what: str
    value: float
    target: str
    met: bool | None  # None: not measurable (a command failed)
    detail: str = ""


def _find(rows: list[Row], model: str, command: str) -> Row | None:
    for row in rows:
        if row.model == model and row.command == command and row.ok:
            return row
    return None


def _ratio(rows, model, numerator, denominator, metric="wall") -> float | None:
    top, bottom = _find(rows, model, numerator), _find(rows, model, denominator)
    if top is None or bottom is None:
        return None
    if metric == "cpu":
        return top.cpu / bottom.cpu
    return top.median(metric) / bottom.median(metric)


def checks(rows: list[Row]) -> list[Check]:
    found: list[Check] = []

    def ratio_check(model, what, numerator, denominator, limit, metric="wall"):
        value = _ratio(rows, model, numerator, denominator, metric)
        cpu = _ratio(rows, model, numerator, denominator, "cpu") if metric == "wall" else None
        detail = f"CPU ratio {cpu:.2f}" if cpu is not None else ""
        found.append(Check(model, what, value if value is not None else float("nan"), f"<= {limit}",
                           None if value is None else value <= limit, detail))

    models = {row.model for row in rows}
    for model in WEIGHT_BOUND:
        if model not in models:
            continue
        ratio_check(model, "niroc text / hex floor (wall)", "niroc text", "hex", 1.5)
        ratio_check(model, "niroc bytecode / copy floor (wall)", "niroc bytecode", "copy", 2.0)
        ratio_check(model, "niroc params / copy floor (wall)", "niroc params", "copy", 2.0)
        text, hex_floor = _find(rows, model, "niroc text"), _find(rows, model, "hex")
        if text and hex_floor:
            size = text.median("output_bytes") / hex_floor.median("output_bytes")
            found.append(Check(model, "text size / weights' hex size", size, "~1 (+ the graph)", size <= 1.05))
    for model in BOUNDED_MEMORY:
        if model not in models:
            continue
        for command in ("niroc text", "niroc bytecode", "niroc params"):
            row = _find(rows, model, command)
            if row is None and model == "mlp_huge" and command == "niroc text":
                continue  # not measured past 4 GiB
            peak = row.median("rss_mib") if row else float("nan")
            found.append(Check(model, f"{command} peak RSS (MiB)", peak, "<= 256",
                               None if row is None else peak <= 256))
    if "mlp_huge" in models:
        ratio_check("mlp_huge", "niroc bytecode / copy floor (wall)", "niroc bytecode", "copy", 2.0)
        ratio_check("mlp_huge", "niroc params / copy floor (wall)", "niroc params", "copy", 2.0)
        found += HUGE_RESULTS
    if "mlp_inline" in models:
        for command in ("niroc text", "niroc bytecode"):
            ratio_check("mlp_inline", f"{command} peak RSS / onnx.load's", command, "onnx.load", 1.1, "rss_mib")
    if "small_nodes" in models:
        ratio_check("small_nodes", "niroc text / onnx.load (wall)", "niroc text", "onnx.load", 2.0)
        row = _find(rows, "small_nodes", "niroc text")
        if row:
            found.append(Check("small_nodes", "niroc text: us per node (wall)", row.median("wall") / 20_000 * 1e6,
                               "~15", None, "whole process, start-up included"))
        parse, printed = _find(rows, "small_nodes", "MLIR parse"), _find(rows, "small_nodes", "MLIR parse+verify+print")
        load = _find(rows, "small_nodes", "onnx.load")
        if parse and printed and load:
            mlir_own = printed.median("wall") - parse.median("wall")
            found.append(Check("small_nodes", "MLIR's verifier + printer alone / onnx.load (wall)",
                               mlir_own / load.median("wall"), "(floor under docs/design.md)", None,
                               f"{mlir_own:.2f} s: parse+verify+print minus parse, niroc's module"))
    if "one_node" in models:
        ratio_check("one_node", "niroc text / import onnx (wall)", "niroc text", "import onnx", 1.3)
        deps = _ratio(rows, "one_node", "import deps", "import onnx")
        if deps is not None:
            found.append(Check("one_node", "import deps / import onnx (wall)", deps, "(floor under docs/design.md)", None,
                               "onnx, onnx_ir, click, MLIR bindings + context"))
            own = _ratio(rows, "one_node", "niroc text", "import deps")
            found.append(Check("one_node", "niroc text / import deps (wall)", own, "(niroc's own start-up)", None))
    for model in sorted(models, key=MODELS.index):
        for command in ("niroc text", "niroc bytecode"):
            row = next((row for row in rows if row.model == model and row.command == command), None)
            if row is None or not row.ok:
                continue
            digests = {sample.digest for sample in row.samples if sample.digest}
            if command == "niroc text" and len(row.samples) > 1:
                found.append(Check(model, "same bytes every run (text)", float(len(digests)), "1 distinct",
                                   len(digests) == 1))
        peer = _ratio(rows, model, "iree-import-onnx", "hex")
        if peer is not None and model in WEIGHT_BOUND:
            found.append(Check(model, "peer: iree-import-onnx / hex floor (wall)", peer, "(for comparison)", None))
        peer = _ratio(rows, model, "iree-import-onnx", "niroc text")
        if peer is not None:
            found.append(Check(model, "peer / niroc text (wall)", peer, "(for comparison)", None))
        peer = _ratio(rows, model, "iree-import-onnx params", "niroc params")
        if peer is not None:
            found.append(Check(model, "peer params / niroc params (wall)", peer, "(for comparison)", None))
    return found


# -- report --------------------------------------------------------------------------------------


def markdown(rows: list[Row], found: list[Check], header: dict[str, str]) -> str:
    lines = ["# niroc benchmark", ""]
    lines += [f"- {key}: {value}" for key, value in header.items()]
    lines += ["", "## Processes (median of n runs)", "",
              "| model | command | wall s | user s | sys s | peak RSS MiB | output MiB | n | note |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in rows:
        if not row.ok:
            failed = next(sample for sample in row.samples if not sample.ok)
            lines.append(f"| {row.model} | {row.command} | failed | | | | | {len(row.samples)} | {failed.error.replace('|', '/')} |")
            continue
        size = row.median("output_bytes")
        lines.append(
            f"| {row.model} | {row.command} | {row.median('wall'):.2f} | {row.median('user'):.2f} | "
            f"{row.median('sys'):.2f} | {row.median('rss_mib'):.0f} | {size / MIB:.1f} | {len(row.samples)} | {row.note} |"
        )
    lines += ["", "## Ratios and targets (same run)", "", "| model | ratio | value | target | met | detail |",
              "| --- | --- | ---: | --- | --- | --- |"]
    for check in found:
        met = {True: "yes", False: "**no**", None: "-"}[check.met]
        lines.append(f"| {check.model} | {check.what} | {check.value:.3g} | {check.target} | {met} | {check.detail} |")
    lines += ["", "## Where niroc's time goes (`niroc --timing -q M -o out.mlir`, one run per model)", ""]
    for name, table in STEP_TIMES.items():
        lines += [f"{name}:", "", "```", table, "```", ""]
    return "\n".join(lines) + "\n"


# -- docs/compiler-speed.md's figures ------------------------------------------------------------


def merged_figures(rows: list[Row], found: list[Check], measured: str) -> dict[str, dict]:
    """docs/compiler-speed.json's models with this run's replacing those it measured: per model
    its rows, its checks and when and under what load they were measured (one run's figures)."""
    figures = json.loads(DOCS_ROWS.read_text()) if DOCS_ROWS.exists() else {}
    for model in dict.fromkeys(row.model for row in rows):
        figures[model] = {
            "measured": measured,
            "rows": [asdict(row) for row in rows if row.model == model],
            "checks": [asdict(check) for check in found if check.model == model],
        }
    return {model: figures[model] for model in MODELS if model in figures}


def _cell(row: Row | None) -> str:
    """`wall / CPU / peak` of a command's median, '-' when it was not run, 'failed' when it failed."""
    if row is None:
        return "-"
    if not row.ok:
        return "failed"
    return f"{row.median('wall'):.2f} s / {row.cpu:.2f} s / {row.median('rss_mib'):.0f} MiB"


def figures_markdown(figures: dict[str, dict]) -> str:
    """The figures section: the commands of each model as wall / CPU (user + sys) / peak RSS
    medians, then every ratio and target of the same runs, then when each model was measured."""
    columns = ("niroc text", "niroc bytecode", "niroc params", "copy", "hex", "onnx.load", "iree-import-onnx")
    lines = [
        "Each cell: wall / CPU (user + sys) / peak RSS, medians of whole processes; '-': not run on",
        "that model. `copy` and `hex` are the bytecode and text floors.",
        "",
        "| model | " + " | ".join(f"`{column}`" for column in columns) + " |",
        "| --- |" + " --- |" * len(columns),
    ]
    models: dict[str, tuple[list[Row], list[Check]]] = {}
    for model, entry in figures.items():
        rows = [Row(row["model"], row["command"], row["note"], [Sample(**sample) for sample in row["samples"]])
                for row in entry["rows"]]
        models[model] = (rows, [Check(**check) for check in entry["checks"]])
        cells = [_cell(_find_any(rows, model, column)) for column in columns]
        lines.append(f"| `{model}`: {WHAT.get(model, '')} | " + " | ".join(cells) + " |")
    extra = [(model, row) for model, (rows, _) in models.items() for row in rows
             if row.command not in columns and row.command not in ("python -c pass", "read")]
    if extra:
        lines += ["", "| model | other command | wall / CPU / peak |", "| --- | --- | --- |"]
        lines += [f"| `{model}` | `{row.command}` | {_cell(row)} |" for model, row in extra]
    lines += ["", "| model | ratio (same run) | value | target | met | detail |", "| --- | --- | ---: | --- | --- | --- |"]
    for model, (_, found) in models.items():
        for check in found:
            met = {True: "yes", False: "**no**", None: "-"}[check.met]
            cells = (check.what, f"{check.value:.3g}", check.target, met, check.detail)
            lines.append(f"| `{model}` | " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    lines += ["", "| model | measured |", "| --- | --- |"]
    lines += [f"| `{model}` | {entry['measured']} |" for model, entry in figures.items()]
    return "\n".join(lines)


def _find_any(rows: list[Row], model: str, command: str) -> Row | None:
    """The row of `command`, failed or not (`_find` takes only successful ones)."""
    return next((row for row in rows if row.model == model and row.command == command), None)


def write_figures(figures: dict[str, dict]) -> None:
    """Replace the figures section of docs/compiler-speed.md (between its markers) and keep the
    rows it shows in docs/compiler-speed.json."""
    page = DOCS.read_text()
    start, end = page.index(FIGURES_BEGIN) + len(FIGURES_BEGIN), page.index(FIGURES_END)
    DOCS.write_text(page[:start] + "\n" + figures_markdown(figures) + "\n" + page[end:])
    DOCS_ROWS.write_text(json.dumps(figures, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per command (median reported)")
    parser.add_argument("--only", nargs="*", choices=MODELS, help="these models only")
    parser.add_argument("--skip-peer", action="store_true", help="do not run iree-import-onnx")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/compiler-speed.md's figures")
    options = parser.parse_args()
    names = options.only or [name for name in MODELS if name not in ON_REQUEST]
    subprocess.run([str(BIN / "python"), str(GENERATOR), "--only", *names], check=True)
    # NOTE: niroc's modules byte-compiled first, as an installed tool's are after its first run:
    # with PYTHONDONTWRITEBYTECODE set (as on some machines) every niroc process would compile
    # the sources changed since their last .pyc again (~25 ms of start-up measured).
    packages = [str(ROOT / folder) for folder in ("ir", "frontends", "backends", "niroc")]
    subprocess.run([str(BIN / "python"), "-m", "compileall", "-q", *packages], check=True)
    header = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load average at start (1, 5, 15 min)": load_average(),
        "cpus": str(os.cpu_count()),
        "command": "`.venv/bin/python tests/bench/bench_models.py " + " ".join(sys.argv[1:]) + "`",
    }
    rows: list[Row] = []
    for name in names:
        print(f"== {name} (load {load_average()})", flush=True)
        rows += measure_model(name, options.runs, options.skip_peer)
    header["load average at end"] = load_average()
    found = checks(rows)
    report = markdown(rows, found, header)
    print()
    print(report)
    (OUT / "report.md").write_text(report)
    (OUT / "report.json").write_text(
        json.dumps({"header": header, "rows": [asdict(row) for row in rows], "checks": [asdict(check) for check in found],
                    "step_times": STEP_TIMES}, indent=1)
    )
    print(f"written: {(OUT / 'report.md').relative_to(ROOT)}")
    if not options.no_docs:
        measured = f"{header['started']}, load {header['load average at start (1, 5, 15 min)'].split()[0]}"
        write_figures(merged_figures(rows, found, measured))
        print(f"written: {DOCS.relative_to(ROOT)}")
    nondeterministic = [check for check in found if check.what.startswith("same bytes") and check.met is False]
    return 1 if nondeterministic else 0


if __name__ == "__main__":
    sys.exit(main())
