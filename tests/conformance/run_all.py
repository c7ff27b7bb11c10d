"""`make conformance`: every ONNX node test through niroc -> iree-compile -> iree runtime.

Writes a Markdown report (counts per stage, a table per ONNX op type, every failure with its
first error line) and prints the summary. Uses both cores. Usage:

    python -m tests.conformance.run_all [--jobs 2] [--report PATH] [--filter SUBSTRING]
                                        [--dynamic none|realistic|all]

`--dynamic realistic|all` reruns the tests with declared input dims made symbolic
(tests/onnx_node_cases.py `DYNAMIC_MODES`; the tests it leaves unchanged are not rerun). Every
run also writes its outcomes as JSON beside the report; a dynamic run's report puts its counts
beside the static run's (read from that JSON when `make conformance` has written it) and lists
the tests that pass static and not dynamic.

Each test runs in a worker process; a worker that dies (the compiled program's SIGFPE or
SIGSEGV kills the process that runs it) or overruns `--timeout` is counted as a crash of that
test and replaced, so one crash never stops or hangs the run.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time

from ..onnx_node_cases import (
    DYNAMIC_MODES,
    dynamic_variant,
    is_tensor_typed,
    node_test_case,
    node_test_cases,
)
from .pipeline import STAGES, Outcome, run_case

DEFAULT_REPORT = "testdata/generated/conformance-report.md"
TASKS_PER_WORKER = 40
"""A worker is replaced after this many tests: IREE's compiler and runtime keep memory."""


def report_path(mode: str) -> str:
    """Where `make conformance` writes mode `mode`'s report (its JSON outcomes beside it)."""
    return DEFAULT_REPORT if mode == "none" else DEFAULT_REPORT.replace(".md", f"-{mode}.md")


def _outcomes_path(report: str) -> str:
    return os.path.splitext(report)[0] + ".json"


def _worker(connection, dynamic: str) -> None:
    """Run the tests named on `connection`, one at a time, answering each with its Outcome."""
    for _ in range(TASKS_PER_WORKER):
        name = connection.recv()
        if name is None:
            return
        connection.send(run_case(node_test_case(name, dynamic)))


def run_cases(
    names: list[str], dynamic: str, jobs: int, timeout: float, progress=None
) -> list[Outcome]:
    """Each named test's Outcome, `jobs` at a time in forked workers (see the module docstring)."""
    context = multiprocessing.get_context("fork")
    pending = list(reversed(names))
    outcomes: list[Outcome] = []
    workers: dict = {}  # connection -> [process, test name or None, start time, tests given]

    def start_worker():
        parent, child = context.Pipe()
        process = context.Process(target=_worker, args=(child, dynamic), daemon=True)
        process.start()
        child.close()
        workers[parent] = [process, None, 0.0, 0]

    def give(connection) -> None:
        state = workers[connection]
        if not pending or state[3] == TASKS_PER_WORKER:
            retire(connection)
            return
        state[1], state[2], state[3] = pending.pop(), time.monotonic(), state[3] + 1
        connection.send(state[1])

    def retire(connection) -> None:
        process = workers.pop(connection)[0]
        if process.is_alive():
            try:
                connection.send(None)
            except OSError:
                pass
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join()
        connection.close()
        if pending:
            start_worker()
            give(list(workers)[-1])

    for _ in range(min(jobs, len(names))):
        start_worker()
    for connection in list(workers):
        give(connection)
    while workers:
        sentinels = {workers[connection][0].sentinel: connection for connection in workers}
        ready = multiprocessing.connection.wait([*workers, *sentinels], timeout=5)
        handled = set()
        for item in ready:
            connection = sentinels.get(item, item)
            if connection in handled or connection not in workers:
                continue
            handled.add(connection)
            process, name, _, _ = workers[connection]
            try:
                outcome = connection.recv() if connection.poll() else None
            except (EOFError, OSError):
                outcome = None
            if outcome is None:
                process.join(5)
                outcome = Outcome(
                    name, "crash", f"the test's process died: {_exit_reason(process.exitcode)}"
                )
                workers[connection][1] = None
            outcomes.append(outcome)
            if progress:
                progress(len(outcomes), len(names))
            if outcome.stage == "crash" and not process.is_alive():
                retire(connection)
            else:
                give(connection)
        now = time.monotonic()
        for connection, (process, name, started, _) in list(workers.items()):
            if name is not None and connection not in handled and now - started > timeout:
                process.kill()
                process.join()
                outcomes.append(Outcome(name, "crash", f"no result after {timeout:.0f} s (killed)"))
                if progress:
                    progress(len(outcomes), len(names))
                retire(connection)
    return outcomes


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


def op_type_of(case) -> str:
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    return "(multi-node)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--report", default=None, help="default: testdata/generated/conformance-report[-MODE].md"
    )
    parser.add_argument("--filter", default="")
    parser.add_argument("--dynamic", choices=DYNAMIC_MODES, default="none")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per test before it counts as a crash"
    )
    arguments = parser.parse_args(argv)
    report_file = arguments.report or report_path(arguments.dynamic)

    cases = [case for case in node_test_cases() if arguments.filter in case.name]
    if arguments.dynamic != "none":
        cases = [case for case in cases if dynamic_variant(case, arguments.dynamic) is not case]
    tensor_typed = {case.name for case in cases if is_tensor_typed(case.model)}
    by_name = {case.name: case for case in cases}

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{done}/{total}", end="", file=sys.stderr, flush=True)

    started = time.monotonic()
    outcomes = run_cases(
        [case.name for case in cases],
        arguments.dynamic,
        arguments.jobs,
        arguments.timeout,
        progress,
    )
    elapsed = time.monotonic() - started
    outcomes.sort(key=lambda outcome: outcome.name)

    static = None
    if arguments.dynamic != "none":
        static = _read_outcomes(_outcomes_path(report_path("none")))
    report = _render_report(outcomes, by_name, tensor_typed, elapsed, arguments.dynamic, static)
    os.makedirs(os.path.dirname(report_file) or ".", exist_ok=True)
    with open(report_file, "w") as file:
        file.write(report)
    with open(_outcomes_path(report_file), "w") as file:
        json.dump([outcome.__dict__ for outcome in outcomes], file, indent=0)
    print(report.split("\n## Per op type")[0])
    print(f"report: {report_file}")
    return 0


def _read_outcomes(path: str) -> dict[str, Outcome] | None:
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return {entry["name"]: Outcome(**entry) for entry in json.load(file)}


def _summary(outcomes) -> dict[str, int]:
    counts = collections.Counter(outcome.stage for outcome in outcomes)
    return {
        "tests": len(outcomes),
        "passed": sum(outcome.passed for outcome in outcomes),
        "refused": sum(outcome.refused for outcome in outcomes),
        "bugs": sum(outcome.is_bug for outcome in outcomes),
        **{f"stopped at {stage}": counts.get(stage, 0) for stage in (*STAGES, "crash")},
    }


def _render_report(outcomes, by_name, tensor_typed, elapsed, dynamic="none", static=None) -> str:
    stage_counts = collections.Counter(outcome.stage for outcome in outcomes)
    passed = sum(outcome.passed for outcome in outcomes)
    passed_tensor = sum(outcome.passed for outcome in outcomes if outcome.name in tensor_typed)
    bugs = [outcome for outcome in outcomes if outcome.is_bug]
    title = "" if dynamic == "none" else f", dynamic shapes ({dynamic} mode)"
    lines = [
        f"# niroc conformance: ONNX node tests end to end{title}",
        "",
        f"{len(outcomes)} tests ({len(tensor_typed)} tensor-typed) in {elapsed:.0f} s.",
        f"**passed: {passed}** ({passed_tensor} of {len(tensor_typed)} tensor-typed,"
        f" {100 * passed_tensor / max(1, len(tensor_typed)):.1f}%);"
        f" refused with a niroc error: {sum(o.refused for o in outcomes)};"
        f" bugs (verify/compile/run/match failure or crash): {len(bugs)}",
        "",
    ]
    if dynamic == "none":
        lines += ["| stopped at | tests |", "| --- | --- |"]
        for stage in (*STAGES, "crash", "pass"):
            lines.append(f"| {stage} | {stage_counts.get(stage, 0)} |")
    else:
        lines += _comparison(outcomes, static)
    lines += [
        "",
        "## Per op type",
        "",
        "| op type | tests | passed | first failing stage |",
        "| --- | --- | --- | --- |",
    ]
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


def _comparison(outcomes, static: dict[str, Outcome] | None) -> list[str]:
    """The dynamic run's counts beside the static run's over the same tests, and the tests
    that pass static and not dynamic."""
    if static is None:
        return [
            f"(no static results at {_outcomes_path(report_path('none'))}: run `make conformance` for the comparison)",
            "",
            *(f"- {key}: {value}" for key, value in _summary(outcomes).items()),
        ]
    same = [static[outcome.name] for outcome in outcomes if outcome.name in static]
    dynamic_counts, static_counts = _summary(outcomes), _summary(same)
    lines = ["| count | static | dynamic |", "| --- | --- | --- |"]
    lines += [f"| {key} | {static_counts[key]} | {dynamic_counts[key]} |" for key in dynamic_counts]
    lost = [o for o in outcomes if not o.passed and o.name in static and static[o.name].passed]
    lines += [
        "",
        f"{len(lost)} tests pass static and not dynamic: "
        f"{sum(o.refused for o in lost)} refused, {sum(o.is_bug for o in lost)} bugs.",
    ]
    return lines


if __name__ == "__main__":
    sys.exit(main())
