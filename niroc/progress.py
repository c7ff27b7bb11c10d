"""Progress for slow work, on stderr, only where a person is watching.

A step (`with progress.step("loading model.onnx") as step:`) shows a spinner with the elapsed
time once it has run for `delay` seconds (half a second by default), and leaves a one-line
record when it ends (`✓ loading model.onnx: 1234 ops, 56 globals (2.3 s)`). Fast steps print
nothing. Nothing at all is printed when stderr is not a terminal or with --quiet, so pipes and
logs stay clean. `step.add_bytes(n)` turns the line into a byte counter for writing output.

Every step's wall time is also appended to `step_times` when one is given (`--timing`), shown
or not.

NOTE: NIROC_PROGRESS_DELAY (seconds) overrides the delay; tests set it to 0 to see the display.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import BinaryIO

__all__ = ["Progress", "Step", "CountingWriter", "timing_report"]

_DEFAULT_DELAY = 0.5


class Step:
    """The handle a running step gives its caller; a no-op when progress is off."""

    def __init__(self, description: str, update=None):
        self.description = description
        self.byte_count = 0
        self._update = update

    def add_bytes(self, count: int) -> None:
        self.byte_count += count
        if self._update is not None:
            self._update(self)

    def rename(self, description: str) -> None:
        self.description = description
        if self._update is not None:
            self._update(self)

    def label(self) -> str:
        if self.byte_count:
            return f"{self.description}: {format_bytes(self.byte_count)}"
        return self.description


class Progress:
    """Shows steps on `console` (a rich Console on stderr) when enabled."""

    def __init__(
        self,
        console,
        *,
        enabled: bool,
        delay: float | None = None,
        step_times: list[tuple[str, float]] | None = None,
    ):
        self.console = console
        self.enabled = enabled and console is not None and console.is_terminal
        self.delay = _delay_from_environment() if delay is None else delay
        self.step_times = step_times

    @classmethod
    def off(cls, step_times: list[tuple[str, float]] | None = None) -> Progress:
        """Shows nothing; still records step times into `step_times` when given."""
        return cls(None, enabled=False, step_times=step_times)

    @contextlib.contextmanager
    def step(self, description: str) -> Iterator[Step]:
        started = time.perf_counter()
        with self._shown_step(description) as step:
            try:
                yield step
            except BaseException:
                self._record(f"{step.label()} (failed)", started)
                raise
            self._record(step.label(), started)

    def _record(self, label: str, started: float) -> None:
        if self.step_times is not None:
            self.step_times.append((label, time.perf_counter() - started))

    @contextlib.contextmanager
    def _shown_step(self, description: str) -> Iterator[Step]:
        if not self.enabled:
            yield Step(description)
            return
        display = _LiveStep(self.console, description, self.delay)
        step = Step(description, update=display.update)
        display.arm(step)
        try:
            yield step
        except BaseException:
            display.finish(step, succeeded=False)
            raise
        display.finish(step, succeeded=True)


class _LiveStep:
    """One spinner line, started by a timer after the delay; thread-safe start and stop."""

    def __init__(self, console, description: str, delay: float):
        self.console = console
        self.delay = delay
        self.started_at = time.monotonic()
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self.live = None
        self.task = None
        self.done = False

    def arm(self, step: Step) -> None:
        if self.delay <= 0:
            self._show(step)
            return
        self.timer = threading.Timer(self.delay, self._show, args=(step,))
        self.timer.daemon = True
        self.timer.start()

    def _show(self, step: Step) -> None:
        from rich.progress import Progress as RichProgress
        from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

        with self.lock:
            if self.done:
                return
            self.live = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.task = self.live.add_task(step.label(), total=None)
            self.live.start()

    def update(self, step: Step) -> None:
        with self.lock:
            if self.live is not None:
                self.live.update(self.task, description=step.label())

    def finish(self, step: Step, *, succeeded: bool) -> None:
        with self.lock:
            self.done = True
            if self.timer is not None:
                self.timer.cancel()
            if self.live is None:
                return
            self.live.stop()
        if succeeded:
            elapsed = time.monotonic() - self.started_at
            self.console.print(f"[green]✓[/] {_escape(step.label())} [dim]({elapsed:.1f} s)[/]")


def _delay_from_environment() -> float:
    try:
        return max(0.0, float(os.environ.get("NIROC_PROGRESS_DELAY", _DEFAULT_DELAY)))
    except ValueError:
        return _DEFAULT_DELAY


class CountingWriter:
    """Wraps a binary stream and reports each write to a Step (for the byte counter)."""

    def __init__(self, stream: BinaryIO, step: Step):
        self.stream = stream
        self.step = step

    def write(self, data) -> int:
        written = self.stream.write(data)
        self.step.add_bytes(len(memoryview(data).cast("B")) if written is None else written)
        return written

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def format_bytes(count: int) -> str:
    """1536 -> '1.5 KiB'; bytes stay exact below 1 KiB."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def timing_report(
    step_times: list[tuple[str, float]], total: float, peak_bytes: int | None = None
) -> str:
    """--timing's table: each step's wall time and share, the rest, the total, and the peak
    memory when known (plain text, so it reads the same in a log as on a terminal)."""
    lines = ["niroc timing (wall clock):"]
    rest = total - sum(seconds for _, seconds in step_times)
    rows = [*step_times, ("other (niroc's imports, argument parsing)", max(rest, 0.0))]
    for label, seconds in rows:
        share = 100 * seconds / total if total > 0 else 0.0
        lines.append(f"  {seconds:8.3f} s {share:6.1f}%  {label}")
    lines.append(f"  {total:8.3f} s  100.0%  total")
    if peak_bytes is not None:
        lines.append(f"  peak memory (resident): {format_bytes(peak_bytes)}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
