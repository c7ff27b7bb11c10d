"""How errors and diagnostics look: colored on a terminal, plain text when piped, JSON for tools.

Every line is built as a rich Text from data (never markup with user strings in it), so a node
named `[red]` prints as itself. `soft_wrap` keeps a long diagnostic on one line when piped, where
grep and FileCheck expect it. The plain form of a diagnostic line is

    model.onnx: error: @main op#3 (niro.add) [node 'add_1'] failed rule 'add-broadcast': ...

that is `{file}: {severity}: {str(diagnostic)}`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import IO, Any

from niro.ir import Diagnostic, NirocError, ParseError

__all__ = [
    "make_console",
    "print_block",
    "error_lines",
    "print_error",
    "print_diagnostics",
    "print_notes",
    "diagnostic_text",
    "diagnostic_record",
    "error_record",
    "failure_rule",
    "write_json_line",
    "summary_text",
]

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "note": "bold cyan"}


def make_console(*, stderr: bool = False, file: IO[str] | None = None):
    from rich.console import Console

    return Console(stderr=stderr, file=file, highlight=False, soft_wrap=True, emoji=False)


def print_block(console, renderable) -> None:
    """Print a table or tree; when piped, without the padding rich adds at line ends.

    NOTE: trailing spaces make golden tests and pasted output brittle; on a terminal they are
    invisible and the colors matter more, so only plain output is trimmed.
    """
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as capture:
        console.print(renderable, no_wrap=True, overflow="ignore", crop=False)
    text = "\n".join(line.rstrip() for line in capture.get().split("\n"))
    console.file.write(text)
    console.file.flush()


def error_lines(error: BaseException, *, filename: str | None = None) -> list[tuple[str, str]]:
    """(severity, text) lines for a failure: one `error` line, then any `note` lines.

    A ParseError keeps its own `file:line:col` form with the source line and a caret; other
    errors are prefixed with `filename` unless their message already names it.
    """
    if isinstance(error, ParseError):
        return [("parse", error.render())] + [("note", note) for note in error.notes]
    if isinstance(error, NirocError):
        text = str(error)
        notes = error.notes
    elif isinstance(error, OSError) and error.strerror:
        text = f"{error.filename}: {error.strerror}" if error.filename else error.strerror
        notes = ()
    else:
        text = str(error)
        notes = ()
    if filename and not text.startswith(filename):
        text = f"{filename}: {text}"
    return [("error", text)] + [("note", note) for note in notes]


def print_error(console, error: BaseException, *, filename: str | None = None) -> None:
    from rich.text import Text

    for severity, text in error_lines(error, filename=filename):
        if severity == "parse":
            _print_parse_error(console, text)
            continue
        console.print(Text.assemble((f"{severity}:", _SEVERITY_STYLE[severity]), " ", text))


def print_notes(console, filename: str, notes: Iterable[str]) -> None:
    """`note: model.onnx: ...` lines: what the user should know about how a file was read."""
    from rich.text import Text

    for note in notes:
        console.print(Text.assemble(("note:", _SEVERITY_STYLE["note"]), " ", f"{filename}: {note}"))


def _print_parse_error(console, rendered: str) -> None:
    """`file:1:2: error: msg` + source + caret, with the header and caret colored."""
    from rich.text import Text

    header, *rest = rendered.split("\n")
    location, separator, message = header.partition(": error: ")
    if separator:
        console.print(Text.assemble((location, "bold"), ": ", ("error:", "bold red"), " ", message))
    else:
        console.print(Text(header))
    for index, line in enumerate(rest):
        is_caret = index == len(rest) - 1 and line.strip() == "^"
        console.print(Text(line, style="bold green" if is_caret else ""))


def diagnostic_text(filename: str, diagnostic: Diagnostic):
    from rich.text import Text

    return Text.assemble(
        (filename, "bold"),
        ": ",
        (f"{diagnostic.severity}:", _SEVERITY_STYLE.get(diagnostic.severity, "bold")),
        " ",
        (str(diagnostic.location), "cyan"),
        " failed rule '",
        (diagnostic.rule, "magenta"),
        "': ",
        diagnostic.message,
    )


def print_diagnostics(console, filename: str, diagnostics: Iterable[Diagnostic]) -> None:
    for diagnostic in diagnostics:
        console.print(diagnostic_text(filename, diagnostic))


def summary_text(file_count: int, error_count: int, warning_count: int = 0):
    from rich.text import Text

    parts = [_plural(file_count, "file"), _plural(error_count, "error")]
    if warning_count:
        parts.append(_plural(warning_count, "warning"))
    style = "bold red" if error_count else "bold green"
    return Text(", ".join(parts), style=style)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def diagnostic_record(filename: str, diagnostic: Diagnostic) -> dict[str, Any]:
    return {"type": "diagnostic", "file": filename, **diagnostic.to_dict()}


def failure_rule(error: NirocError) -> str:
    """The rule id of a failure that stopped a file before the verifier ran.

    Named after the error's class, so each layer's errors get their own id without this module
    importing the layers: ParseError -> 'parse', OnnxImportError -> 'onnx-import',
    LoweringError -> 'lowering', a bare NirocError -> 'error'.
    """
    name = type(error).__name__.removesuffix("Error") or "Error"
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


def error_record(filename: str, error: NirocError) -> dict[str, Any]:
    """A failure to load a file, shaped like a diagnostic so tools need one reader."""
    record: dict[str, Any] = {
        "type": "diagnostic",
        "file": filename,
        "severity": "error",
        "rule": failure_rule(error),
        "location": error.location or "",
        "message": error.message,
    }
    if isinstance(error, ParseError):
        record["line"] = error.line
        record["column"] = error.column
    if error.notes:
        record["notes"] = list(error.notes)
    return record


def write_json_line(record: dict[str, Any], stream: IO[str] | None = None) -> None:
    stream = stream or sys.stdout
    stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
