"""The peer (iree-import-onnx) on `make hf`'s Hugging Face exports, for comparison with niroc.

    .venv/bin/python -m tests.tools.hf_peer [--only NAME ...]

imports each export (testdata/hf/generate.py, exported if missing) with iree-import-onnx,
compiles it with the flags niroc's tests use, runs it with iree.runtime at the model's larger
test size and compares with onnxruntime at the tolerances of tests/backends/mlir/test_hf_models.py
(rtol 1e-3, atol 1e-4). Prints one line per export (match, WRONG with the largest difference, or
the step that failed and its first error line) and the counts.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime

from niroc.checking import IREE_COMPILE_FLAGS, Tolerance, compare, from_abi, load_iree_module
from testdata.hf import generate

BIN = Path(sys.executable).parent
TOLERANCE = Tolerance(1e-3, 1e-4)
"""test_hf_models.py's rtol and atol."""


def _first_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line.lower()] or stderr.splitlines()
    return (lines[0] if lines else "?")[:160]


def outcome(name: str, exporter: str, folder: Path) -> str:
    """What the peer makes of one export: 'match', 'WRONG: ...' or '<step>: <first error>'."""
    spec = generate.MODELS[name]
    path = generate.export(name, exporter)
    mlir, vmfb = folder / f"{name}-{exporter}.mlir", folder / f"{name}-{exporter}.vmfb"
    done = subprocess.run([BIN / "iree-import-onnx", path, "-o", mlir], capture_output=True, text=True)
    if done.returncode:
        return "import: " + _first_error(done.stderr)
    done = subprocess.run([BIN / "iree-compile", mlir, *IREE_COMPILE_FLAGS, "-o", vmfb], capture_output=True, text=True)
    if done.returncode:
        return "compile: " + _first_error(done.stderr)
    feeds = generate.inputs(spec, spec.shapes[-1], np.random.default_rng(0))
    expected = onnxruntime.InferenceSession(str(path)).run(None, feeds)
    try:
        results = load_iree_module(vmfb)["main_graph"](*feeds.values())
    except Exception as error:  # noqa: BLE001 - iree.runtime's exceptions: the run failed
        return "run: " + str(error).splitlines()[0][:160]
    results = results if isinstance(results, (list, tuple)) else [results]
    for index, (got, want) in enumerate(zip(results, expected, strict=True)):
        found = compare(f"#{index}", from_abi(got, want), want, TOLERANCE)
        if not found.matches:
            return (
                f"WRONG: output {found.name} {found.verdict}, max abs error {found.max_abs_error:.3g}"
                f" (largest value {np.abs(want).max():.3g})"
            )
    return "match"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="these models only")
    names = parser.parse_args().only or list(generate.MODELS)
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            for exporter in generate.MODELS[name].exporters:
                found = outcome(name, exporter, Path(scratch))
                counts[found.split(":")[0]] += 1
                print(f"{name}-{exporter}: {found}", flush=True)
    print(", ".join(f"{kind}: {count}" for kind, count in counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
