"""Compile-time growth: what niroc + iree-compile cost on the run-time benchmark's models now,
against a base revision of niroc (by default BASE, the code before the run-time speed work).

    .venv/bin/python tests/bench/bench_compile_growth.py [--base REV] [--only NAME ...]

Changes that make the compiled code faster may make the compile slower (unrolled loops, more
dispatches); the budget is 20% on any model. For every model of `bench_run.MODELS` (made the
same way, fixed seeds), the base revision's niroc (a detached git worktree, imported through a
`niro` package shim) and this tree's each write the MLIR, and iree-compile compiles both with
the benchmark's flags. The figure is CPU seconds (user + system of the child processes: the
frontend process, then iree-compile), which load on a shared machine disturbs far less than
wall time. Writes testdata/generated/bench/compile-growth.md and docs/compile-growth.md (the
latest figures). Exit status 1 when a model grew by more than the budget or failed in this
tree. Not collected by pytest; `make bench-compile-growth` runs it.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_run  # noqa: E402

BASE = "4e47eb9"
"""The last revision before the run-time speed work (convolutions as products, unrolled
recurrences, ...): the compile times that work must stay within BUDGET of."""

BUDGET = 1.2
OUT = ROOT / "testdata" / "generated" / "bench"
DOCS = ROOT / "docs" / "compile-growth.md"
FRONTEND = "import sys; from niroc.cli import run; sys.argv[0] = 'niroc'; run()"


@dataclass(frozen=True)
class Cost:
    """CPU seconds of one tree's frontend and iree-compile on one model (None: it failed, why)."""

    frontend: float | None = None
    iree: float | None = None
    error: str | None = None

    @property
    def total(self) -> float | None:
        return None if self.frontend is None or self.iree is None else self.frontend + self.iree


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def compile_cost(model: Path, python_path: str, folder: Path) -> Cost:
    """The frontend on `python_path` writing `model`'s MLIR, then iree-compile on it."""
    mlir = folder / "model.mlir"
    # -P: not the working directory's niroc (the repository root's, when run from there) first
    frontend = [sys.executable, "-P", "-c", FRONTEND, "-q", str(model), "-o", str(mlir)]
    started = _children_cpu()
    _, error = bench_run._run(frontend, env={**os.environ, "PYTHONPATH": python_path})
    front = _children_cpu() - started
    if error:
        return Cost(error=f"niroc: {error}")
    started = _children_cpu()
    vmfb = folder / "model.vmfb"
    _, error = bench_run._run([str(bench_run.BIN / "iree-compile"), str(mlir), *bench_run.FLAGS, "-o", str(vmfb)])
    if error:
        return Cost(error=f"iree-compile: {error}")
    return Cost(front, _children_cpu() - started)


class BaseUnavailable(Exception):
    """The base revision cannot be checked out (not a revision of this repository)."""


def _base_tree(revision: str, scratch: Path) -> str:
    """A PYTHONPATH importing niroc and niro.* from `revision` (a detached worktree)."""
    tree = scratch / "base"
    added = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(tree), revision],
        capture_output=True,
        text=True,
    )
    if added.returncode != 0:
        reason = (added.stderr.strip().splitlines() or ["git failed"])[-1]
        raise BaseUnavailable(f"cannot check out base revision {revision!r}: {reason}")
    shim = scratch / "shim"
    shim.mkdir()
    (shim / "niro").symlink_to(tree)  # niro.ir = <tree>/ir, niro.frontends = <tree>/frontends...
    return f"{shim}{os.pathsep}{tree}"


def over_budget(rows: list[tuple[str, Cost, Cost]]) -> list[str]:
    """The models that failed in this tree or grew by more than BUDGET over the base."""
    return [
        name
        for name, base, now in rows
        if now.total is None or (base.total is not None and now.total > BUDGET * base.total)
    ]


def report(revision: str, rows: list[tuple[str, Cost, Cost]]) -> str:
    lines = [
        "# Compile-time growth",
        "",
        f"CPU seconds (frontend + iree-compile, user + system) of niroc at {revision} (base) and of"
        " this tree on the run-time benchmark's models, iree-compile "
        + " ".join(f"`{flag}`" for flag in bench_run.FLAGS)
        + f". Budget: at most {BUDGET - 1:.0%} growth on any model. Made by"
        " `make bench-compile-growth` (tests/bench/bench_compile_growth.py).",
        "",
        "| model | base CPU s | now CPU s | now/base | within budget |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    ratios = []
    over = set(over_budget(rows))
    for name, base, now in rows:
        ratio = None if base.total is None or now.total is None else now.total / base.total
        if ratio is not None:
            ratios.append((ratio, name))
        verdict = "**no**" if name in over else ("-" if ratio is None else "yes")
        cells = [
            f"{base.total:.2f}" if base.total is not None else f"- ({base.error})",
            f"{now.total:.2f}" if now.total is not None else f"- ({now.error})",
            "-" if ratio is None else f"{ratio:.2f}",
        ]
        lines.append(f"| {name} | {' | '.join(cells)} | {verdict} |")
    if ratios:
        geomean = math.exp(sum(math.log(ratio) for ratio, _ in ratios) / len(ratios))
        highest, name = max(ratios)
        lines += ["", f"- now/base geomean: {geomean:.2f} (highest: {name} {highest:.2f})"]
    return "\n".join(lines) + "\n"


def _measure(name: str, base_path: str, folder: Path) -> tuple[str, Cost, Cost]:
    """Model `name` made in `folder` and compiled by the base tree and by this one."""
    folder.mkdir()
    model = folder / "model.onnx"
    bench_run.MODELS[name].make(model)
    costs = []
    for tree, python_path in (("base", base_path), ("now", str(ROOT))):
        (folder / tree).mkdir()
        costs.append(compile_cost(model, python_path, folder / tree))
    base, now = costs
    print(f"{name}: base {base.total or base.error}, now {now.total or now.error}", flush=True)
    return name, base, now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE, help=f"the base revision (default {BASE})")
    parser.add_argument("--only", nargs="*", choices=list(bench_run.MODELS), metavar="NAME")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite the docs page")
    options = parser.parse_args()
    names = options.only or list(bench_run.MODELS)
    with tempfile.TemporaryDirectory(prefix="niroc-compile-growth-") as directory:
        scratch = Path(directory)
        try:
            base_path = _base_tree(options.base, scratch)
        except BaseUnavailable as unavailable:
            print(f"bench_compile_growth: {unavailable}", file=sys.stderr)
            return 2
        try:
            rows = [_measure(name, base_path, scratch / name) for name in names]
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(scratch / "base")],
                capture_output=True,
            )
    text = report(options.base, rows)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "compile-growth.md").write_text(text)
    if not options.no_docs:
        DOCS.write_text(text)
    print(text)
    return 1 if over_budget(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
