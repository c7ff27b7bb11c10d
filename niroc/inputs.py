"""Loading a Niro Module from any file niroc accepts: `.onnx`, `.onnxtxt`, or Niro assembly.

The format comes from the suffix (a table below); a file with another suffix is recognised by
its content, or refused with a message listing what niroc reads. Loading wraps every failure in
a NirocError that names the file, so the CLI can print one line. The ONNX frontend is imported
only when an ONNX file is loaded (it pulls in onnx and protobuf, which are slow to import).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from niro.ir import Module, NirocError, parse_module

__all__ = [
    "InputError",
    "InputShapeRequest",
    "INPUT_FORMATS",
    "Loaded",
    "detect_format",
    "load_module",
    "name_file",
]


class InputError(NirocError):
    """The input file cannot be read or is in no format niroc knows."""


def _cannot_lower(name: str, version: int) -> bool:
    """The frontend's `expand_functions`: an op ONNX defines by a function body is imported as
    a call of that body when the MLIR backend has no lowering of its own for it. Asked only
    about such ops, so the backend (and the MLIR bindings) load only for models that have one."""
    from niro.backends.mlir import cannot_lower

    return cannot_lower(name, version)


@dataclass(frozen=True)
class Loaded:
    """A loaded Module and the notes on how it was read (printed unless --quiet)."""

    module: Module
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class InputShapeRequest:
    """--dim and --input-shape, parsed (see shape_options.py): static sizes for input dims."""

    dims: dict[str, int] = field(default_factory=dict)
    input_shapes: dict[str, tuple[int | None, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.dims or self.input_shapes)


def _import_onnx(source, path: Path, shapes: InputShapeRequest) -> Loaded:
    from niro.frontends.onnx import import_model_with_info

    imported = import_model_with_info(
        source,
        filename=str(path),
        expand_functions=_cannot_lower,
        dims=shapes.dims,
        input_shapes=shapes.input_shapes,
    )
    return Loaded(imported.module, imported.notes)


def _load_onnx(path: Path, shapes: InputShapeRequest) -> Loaded:
    return _import_onnx(path, path, shapes)


def _load_onnx_text(path: Path, shapes: InputShapeRequest) -> Loaded:
    # NOTE: parsed here rather than by import_model(path), which tells text from binary by the
    # suffix: a sniffed text model may be named anything.
    from niro.frontends.onnx import load_onnx_text

    return _import_onnx(load_onnx_text(path, filename=str(path)), path, shapes)


def _load_niro(path: Path, shapes: InputShapeRequest) -> Loaded:
    if shapes:
        raise InputError(
            "--dim and --input-shape apply to ONNX models; Niro assembly has its types already",
            location=str(path),
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"not UTF-8 text (invalid byte at offset {error.start}): Niro assembly must be UTF-8",
            location=str(path),
        ) from error
    return Loaded(parse_module(text, filename=str(path)))


# NOTE: one loader per format; a new input format is a new row.
INPUT_FORMATS: dict[str, Callable[[Path, InputShapeRequest], Loaded]] = {
    "onnx": _load_onnx,
    "onnxtxt": _load_onnx_text,
    "niro": _load_niro,
}

_SUFFIXES = {".onnx": "onnx", ".onnxtxt": "onnxtxt", ".niro": "niro"}
_OUTPUT_SUFFIXES = (".mlir", ".mlirbc")
_SNIFF_BYTES = 4096


def detect_format(path: Path) -> str:
    """The input format of `path`: by suffix, else by the first few KiB of content."""
    by_suffix = _SUFFIXES.get(path.suffix.lower())
    if by_suffix is not None:
        return by_suffix
    if path.suffix.lower() in _OUTPUT_SUFFIXES:
        raise InputError(
            "is MLIR, which niroc writes but does not read; "
            "give it an ONNX model (.onnx, .onnxtxt) or Niro assembly (.niro)",
            location=str(path),
        )
    head = _read_head(path)
    sniffed = _sniff(head)
    if sniffed is None:
        raise InputError(
            "cannot tell the input format from the suffix or the content; "
            "niroc reads .onnx, .onnxtxt (ONNX text) and .niro (Niro assembly)",
            location=str(path),
        )
    return sniffed


def _read_head(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            return stream.read(_SNIFF_BYTES)
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", location=str(path)) from error


def _sniff(head: bytes) -> str | None:
    """Text that starts like Niro assembly or ONNX text, else a protobuf (binary) model.

    NOTE: a heuristic for files without a known suffix only; the suffix always wins.
    """
    if not head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        # ONNX ModelProto starts with field 1 (ir_version, varint): tag byte 0x08.
        return "onnx" if head[0] == 0x08 else None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        if stripped.startswith("niro."):
            return "niro"
        if stripped.startswith("<") or "=>" in text:
            return "onnxtxt"
        return None
    return None


def load_module(path: str | Path, shapes: InputShapeRequest | None = None) -> Loaded:
    """Read `path` into a Module, with `shapes` (--dim, --input-shape) applied to an ONNX
    model's inputs; every failure is a NirocError naming the file."""
    path = Path(path)
    input_format = detect_format(path)
    loader = INPUT_FORMATS[input_format]
    try:
        return loader(path, shapes or InputShapeRequest())
    except NirocError as error:
        name_file(error, str(path))
        raise
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}", location=str(path)) from error


def name_file(error: NirocError, filename: str) -> None:
    """Prefix the error's location with the file, unless its text names the file already."""
    if not str(error).startswith(filename):
        error.location = f"{filename}: {error.location}" if error.location else filename
