"""Prints a few lines of MLIR on which IREE 3.13's BubbleUpExpandShapesPass grows steeply with K:
K tensors each cut to a clamped run-time count (a per-class top-k), concatenated, an element-wise
`linalg.generic`, then a slice of its clamped size (what niroc's whole-axis Slice was). The pass
moves the slice above the generic and bounds the slice's size, a sum of K clamped counts, with
MLIR's Presburger solver. `--fixed` leaves the slice out, as niroc now does.

    python -m tests.tools.slice_bound_repro 24 > repro.mlir
    iree-opt --pass-pipeline='builtin.module(func.func(iree-dispatch-creation-bubble-up-expand-shapes))' \\
        repro.mlir -o /dev/null

Wall times of that iree-opt (2 shared cores, load ~4; about 0.35 s of it is start-up): K = 12
0.53 s, 24 3.5 s, 48 49.6 s; with `--fixed` 0.33-0.40 s at each K. See docs/reliability.md
("Compile time") and tests/backends/mlir/onnx_ops/test_batched_nms.py.
"""

from __future__ import annotations

import sys


def repro(parts: int, fixed: bool = False) -> str:
    arguments = ", ".join(f"%a{i}: tensor<?xf32>, %k{i}: tensor<i64>" for i in range(parts))
    lines = [
        f"func.func @main({arguments}) -> tensor<?xf32> {{",
        "  %c0 = arith.constant 0 : index",
        "  %big = arith.constant 2147483647 : index",
        "  %two = arith.constant 2.0 : f32",
    ]
    for i in range(parts):  # part i: the first clamp(k_i, 0, n_i) elements of a_i
        lines += [
            f"  %n{i} = tensor.dim %a{i}, %c0 : tensor<?xf32>",
            f"  %x{i} = tensor.extract %k{i}[] : tensor<i64>",
            f"  %y{i} = arith.index_cast %x{i} : i64 to index",
            f"  %p{i} = arith.maxsi %y{i}, %c0 : index",
            f"  %q{i} = arith.minsi %p{i}, %n{i} : index",
            f"  %t{i} = tensor.extract_slice %a{i}[0] [%q{i}] [1] : tensor<?xf32> to tensor<?xf32>",
            f"  %u{i} = arith.maxsi %q{i}, %c0 : index",
            f"  %v{i} = arith.minsi %u{i}, %big : index",
        ]
    names = ", ".join(f"%t{i}" for i in range(parts))
    types = ", ".join(["tensor<?xf32>"] * parts)
    lines += [
        f"  %c = tensor.concat dim(0) {names} : ({types}) -> tensor<?xf32>",
        "  %s0 = arith.addi %v0, %c0 : index",
    ]
    lines += [f"  %s{i} = arith.addi %s{i - 1}, %v{i} : index" for i in range(1, parts)]
    last = f"%s{parts - 1}"
    lines += [
        f"  %e = tensor.empty({last}) : tensor<?xf32>",
        "  %g = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],"
        ' iterator_types = ["parallel"]} ins(%c : tensor<?xf32>) outs(%e : tensor<?xf32>) {',
        "  ^bb0(%x: f32, %o: f32):",
        "    %y = arith.mulf %x, %two : f32",
        "    linalg.yield %y : f32",
        "  } -> tensor<?xf32>",
    ]
    if fixed:
        lines.append("  return %g : tensor<?xf32>")
    else:
        lines += [
            f"  %size = arith.maxsi {last}, %c0 : index",
            "  %cut = tensor.extract_slice %g[0] [%size] [1] : tensor<?xf32> to tensor<?xf32>",
            "  return %cut : tensor<?xf32>",
        ]
    return "\n".join([*lines, "}"])


if __name__ == "__main__":
    print(repro(int(sys.argv[1]), fixed="--fixed" in sys.argv[2:]))
