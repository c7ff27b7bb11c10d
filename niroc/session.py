"""Per-run settings shared by every command (--quiet, --debug, --timing) and the options that
set them.

`main()` creates one Session and hands it to click as `ctx.obj`; the flags may be given before
or after the command word (`niroc --debug verify m.onnx` and `niroc verify --debug m.onnx`).
`main()` still reads `debug` after click has returned, to decide whether a traceback is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import click

__all__ = ["Session", "session_options", "current_session", "format_option", "SESSION_FLAGS"]

F = TypeVar("F", bound=Callable)


@dataclass
class Session:
    debug: bool = False
    quiet: bool = False
    timing: bool = False
    step_times: list[tuple[str, float]] = field(default_factory=list)
    """(step label, wall seconds) of every progress step that ran, in order (for --timing)."""

    def print_traceback(self) -> None:
        """With --debug, the traceback of the exception being handled, on stderr."""
        if self.debug:
            import traceback  # NOTE: here: only --debug runs pay for it

            traceback.print_exc()


# The flags (they take no value) accepted both before and after the command word.
SESSION_FLAGS = ("--quiet", "-q", "--debug", "--timing")


def current_session() -> Session:
    return click.get_current_context().ensure_object(Session)


def _set_flag(name: str) -> Callable:
    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            setattr(ctx.ensure_object(Session), name, True)

    return callback


def session_options(function: F) -> F:
    """Add --quiet, --debug and --timing to a command or group."""
    function = click.option(
        "--timing",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_flag("timing"),
        help="When done, print the wall time of each step on stderr (like --mlir-timing).",
    )(function)
    function = click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_flag("debug"),
        help="Show a full Python traceback when something fails.",
    )(function)
    function = click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_flag("quiet"),
        help="No progress display and no summary line.",
    )(function)
    return function


def format_option(json_records: str) -> Callable[[F], F]:
    """The `--format text|json` option of every command with a JSON form (as `output_format`);
    `json_records` says what the JSON objects are, for the help."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help=f"text for people; json for tools: {json_records}.",
    )
