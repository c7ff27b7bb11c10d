"""`make conformance`: every ONNX node test through niroc -> iree-compile -> iree runtime.

Writes a Markdown report (counts per stage, a table per ONNX op type, every failure with its
first error line) and prints the summary. Uses both cores. Usage:

    python -m tests.conformance.run_all [--jobs 2] [--report PATH] [--filter SUBSTRING]
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import sys
import time

from ..onnx_node_cases import is_tensor_typed, node_test_case, node_test_cases
from .pipeline import STAGES, Outcome, run_case


def _run_named(name: str) -> Outcome:
    return run_case(node_test_case(name))


def op_type_of(case) -> str:
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    return "(multi-node)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--report", default="testdata/generated/conformance-report.md")
    parser.add_argument("--filter", default="")
    arguments = parser.parse_args(argv)

    cases = [case for case in node_test_cases() if arguments.filter in case.name]
    tensor_typed = {case.name for case in cases if is_tensor_typed(case.model)}
    by_name = {case.name: case for case in cases}
    started = time.monotonic()
    outcomes: list[Outcome] = []
    context = multiprocessing.get_context("fork")
    with context.Pool(arguments.jobs, maxtasksperchild=40) as pool:
        for index, outcome in enumerate(
            pool.imap_unordered(_run_named, [case.name for case in cases], chunksize=4), 1
        ):
            outcomes.append(outcome)
            if sys.stderr.isatty():
                print(f"\r{index}/{len(cases)}", end="", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    outcomes.sort(key=lambda outcome: outcome.name)

    report = _render_report(outcomes, by_name, tensor_typed, elapsed)
    os.makedirs(os.path.dirname(arguments.report) or ".", exist_ok=True)
    with open(arguments.report, "w") as file:
        file.write(report)
    print(report.split("\n## Per op type")[0])
    print(f"report: {arguments.report}")
    return 0


def _render_report(outcomes, by_name, tensor_typed, elapsed) -> str:
    stage_counts = collections.Counter(outcome.stage for outcome in outcomes)
    passed = sum(outcome.passed for outcome in outcomes)
    passed_tensor = sum(outcome.passed for outcome in outcomes if outcome.name in tensor_typed)
    bugs = [outcome for outcome in outcomes if outcome.is_bug]
    lines = [
        "# niroc conformance: ONNX node tests end to end",
        "",
        f"{len(outcomes)} tests ({len(tensor_typed)} tensor-typed) in {elapsed:.0f} s.",
        f"**passed: {passed}** ({passed_tensor} of {len(tensor_typed)} tensor-typed,"
        f" {100 * passed_tensor / max(1, len(tensor_typed)):.1f}%);"
        f" refused with a niroc error: {sum(o.refused for o in outcomes)};"
        f" bugs (verify/compile/run/match failure or crash): {len(bugs)}",
        "",
        "| stopped at | tests |",
        "| --- | --- |",
    ]
    for stage in (*STAGES, "crash", "pass"):
        lines.append(f"| {stage} | {stage_counts.get(stage, 0)} |")
    lines += ["", "## Per op type", "", "| op type | tests | passed | first failing stage |", "| --- | --- | --- | --- |"]
    per_op: dict[str, list[Outcome]] = collections.defaultdict(list)
    for outcome in outcomes:
        per_op[op_type_of(by_name[outcome.name])].append(outcome)
    for op_type in sorted(per_op):
        group = per_op[op_type]
        failing = collections.Counter(o.stage for o in group if not o.passed)
        stages = ", ".join(f"{stage} x{count}" for stage, count in failing.most_common())
        lines.append(f"| {op_type} | {len(group)} | {sum(o.passed for o in group)} | {stages} |")
    lines += ["", "## Failures", "", "| test | stage | first error line |", "| --- | --- | --- |"]
    for outcome in outcomes:
        if not outcome.passed:
            message = outcome.message.replace("|", "\\|")
            lines.append(f"| {outcome.name} | {outcome.stage} | {message} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
