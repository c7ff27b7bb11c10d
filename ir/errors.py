"""The error hierarchy. Every failure a user can cause is a NirocError.

Each layer raises its own subclass (ParseError, VerifyError here; OnnxImportError in the
frontend; LoweringError in the backend) and wraps lower-level exceptions at its boundary with
`raise ... from e`, naming the ONNX node or Niro op. The CLI turns any NirocError into one line
and an exit code; nothing else should reach a user.
"""

from __future__ import annotations

from collections.abc import Sequence

from .diagnostics import Diagnostic

__all__ = ["NirocError", "ParseError", "VerifyError"]


class NirocError(Exception):
    """Base error: a message, an optional location (a file, a node, an op), optional notes."""

    def __init__(self, message: str, *, location: str | None = None, notes: Sequence[str] = ()):
        super().__init__(message)
        self.message = message
        self.location = location
        self.notes = tuple(notes)

    def __str__(self) -> str:
        if self.location:
            return f"{self.location}: {self.message}"
        return self.message


class ParseError(NirocError):
    """A syntax or semantic error in Niro assembly, at a line and column (1-based)."""

    def __init__(
        self,
        message: str,
        *,
        line: int,
        column: int,
        source_line: str = "",
        filename: str = "<string>",
    ):
        super().__init__(message, location=f"{filename}:{line}:{column}")
        self.line = line
        self.column = column
        self.source_line = source_line
        self.filename = filename

    def render(self) -> str:
        """`file:line:col: error: message`, the source line, and a caret under the column."""
        text = f"{self.location}: error: {self.message}"
        if self.source_line:
            caret = " " * (self.column - 1) + "^"
            text += f"\n{self.source_line}\n{caret}"
        return text


class VerifyError(NirocError):
    """A module failed verification; carries every diagnostic found."""

    def __init__(self, diagnostics: Sequence[Diagnostic], *, location: str | None = None):
        self.diagnostics = tuple(diagnostics)
        first = str(self.diagnostics[0]) if self.diagnostics else "verification failed"
        more = len(self.diagnostics) - 1
        message = first if more <= 0 else f"{first} (and {more} more)"
        super().__init__(message, location=location)
