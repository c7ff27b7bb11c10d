"""The frontend's one error type, and how its messages name the place in the model.

Every failure a bad model can cause leaves `import_model` as an `OnnxImportError` whose text is
one line: `model.onnx: node 'conv1' (Conv): ...`, `model.onnx: value 'seq' (output of node
'SplitToSequence_3'): ...`, `model.onnx: initializer 'w': ...`. Lower-level exceptions (protobuf,
onnx parser, shape inference, OSError) are wrapped at the boundary with `raise ... from e`.
"""

from __future__ import annotations

from niro.ir import NirocError

__all__ = ["OnnxImportError", "first_line", "root_cause"]


def _one_line(text: str) -> str:
    """`text` with control characters escaped (`\\n`): names in a model may hold anything,
    and a message must stay one line."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


class OnnxImportError(NirocError):
    """A model the frontend refuses. `location` is the model's file name (or `<model>`)."""

    def __init__(self, message: str, *, filename: str):
        super().__init__(_one_line(message), location=_one_line(filename))
        self.filename = filename


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's text (lower layers write paragraphs)."""
    for line in str(error).splitlines():
        line = line.strip()
        if line:
            return line
    return type(error).__name__


def root_cause(error: BaseException) -> BaseException:
    """The exception at the end of `error`'s `__cause__` chain (onnx_ir wraps the root cause in
    one "Error calling ..." layer per nesting level)."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error
