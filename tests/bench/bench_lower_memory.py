"""Benchmark: lower and write a module holding ~1 GB of weights; report peak RSS per phase.

Not collected by pytest (run it with `make bench` or directly). Each phase runs in a fresh child
process so each peak is its own: the weights are allocated (baseline), then the phase runs, and
the child reports its peak RSS above that baseline. The bar: lowering and writing hold
no more than about one extra copy of the weights.

    .venv/bin/python tests/bench/bench_lower_memory.py [--gigabytes 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from niro.backends.mlir import lower_to_mlir
from niro.ir import (
    Add,
    Block,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    Module,
    Region,
    Return,
    ScalarType,
    TensorType,
    Value,
    ValueId,
)

PHASES = ("lower", "text", "bytecode")
LAYOUTS = {
    "many": 2048,  # weights of 2048 x 2048 f32 = 16 MiB each
    "one": None,  # a single square weight holding everything
}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def build_module(gigabytes: float, layout: str) -> tuple[Module, int]:
    """Distinct weights (no splats: each is a ramp from a different start) of f32."""
    side = LAYOUTS[layout] or int((gigabytes * (1 << 30) / 4) ** 0.5)
    weight_type = TensorType(ScalarType.F32, (side, side))
    weight_bytes = side * side * 4
    count = max(1, round(gigabytes * (1 << 30) / weight_bytes))
    globals_ = []
    for index in range(count):
        data = bytearray(weight_bytes)
        ramp = np.frombuffer(data, dtype=np.float32)
        for start in range(0, ramp.size, 1 << 20):  # in chunks: no weight-sized temporaries
            stop = min(start + (1 << 20), ramp.size)
            ramp[start:stop] = np.arange(start + index, stop + index, dtype=np.float32)
        globals_.append(Global(f"layer{index}.weight", weight_type, data))
    next_id = 0

    def value() -> Value:
        nonlocal next_id
        next_id += 1
        return Value(ValueId(next_id - 1), weight_type)

    x = value()
    operations, current = [], x
    for index in range(count):
        loaded, summed = value(), value()
        operations += [GetGlobal(loaded, f"layer{index}.weight"), Add(summed, current, loaded)]
        current = summed
    operations.append(Return((current,)))
    function = Function(
        "main", FunctionType((weight_type,), (weight_type,)), Region([Block((x,), operations)])
    )
    return Module(globals=globals_, functions=[function]), count * weight_bytes


def run_phase(phase: str, gigabytes: float, layout: str, directory: str) -> dict:
    module, weight_bytes = build_module(gigabytes, layout)
    baseline = peak_rss_mib()
    start = time.perf_counter()
    lowered = lower_to_mlir(module)
    lowered_at = time.perf_counter()
    after_lower = peak_rss_mib()
    size = 0
    if phase == "text":
        path = os.path.join(directory, "model.mlir")
        with open(path, "wb") as stream:
            lowered.write_text(stream)
        size = os.path.getsize(path)
    elif phase == "bytecode":
        path = os.path.join(directory, "model.mlirbc")
        with open(path, "wb") as stream:
            lowered.write_bytecode(stream)
        size = os.path.getsize(path)
    done = time.perf_counter()
    return {
        "phase": phase,
        "weights_mib": weight_bytes / (1 << 20),
        "baseline_rss_mib": baseline,
        "lower_extra_mib": after_lower - baseline,
        "peak_extra_mib": peak_rss_mib() - baseline,
        "lower_seconds": lowered_at - start,
        "write_seconds": done - lowered_at,
        "output_mib": size / (1 << 20),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--layout", choices=tuple(LAYOUTS), help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.phase:
        print(
            json.dumps(
                run_phase(options.phase, options.gigabytes, options.layout, options.directory)
            )
        )
        return 0
    failed = False
    for layout, phase in ((layout, phase) for layout in LAYOUTS for phase in PHASES):
        if phase == "lower":
            what = "16 MiB weights" if LAYOUTS[layout] else "one weight"
            print(f"== {options.gigabytes:g} GiB of f32 weights as {what}")
        with tempfile.TemporaryDirectory(prefix="niroc-bench-") as directory:
            completed = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--phase",
                    phase,
                    "--layout",
                    layout,
                    "--gigabytes",
                    str(options.gigabytes),
                    "--directory",
                    directory,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
        if completed.returncode != 0:
            print(f"{phase}: FAILED\n{completed.stderr}")
            failed = True
            continue
        row = json.loads(completed.stdout)
        ratio = row["peak_extra_mib"] / row["weights_mib"]
        print(
            f"{phase:>9}: weights {row['weights_mib']:.0f} MiB, baseline RSS "
            f"{row['baseline_rss_mib']:.0f} MiB, extra after lowering {row['lower_extra_mib']:.0f} MiB, "
            f"peak extra {row['peak_extra_mib']:.0f} MiB ({ratio:.2f}x weights), lower "
            f"{row['lower_seconds']:.2f} s, write {row['write_seconds']:.2f} s, output "
            f"{row['output_mib']:.0f} MiB"
        )
        if ratio > 1.25:  # "about one extra copy"
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
