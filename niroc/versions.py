"""What `niroc --version` prints: niroc's version and those of the libraries that decide its
output (onnx, onnx-ir and the MLIR bindings), read from the installed distributions' metadata.

Nothing here imports onnx or the bindings (`niroc --version` stays as fast as `--help`): the
versions come from `importlib.metadata`, and which bindings a compile would use from
`importlib.util.find_spec`, the same choice `niro.backends.mlir.bindings` makes by importing.
"""

from __future__ import annotations

from importlib import metadata
from importlib.util import find_spec

from . import __version__

__all__ = ["version_lines"]

UPSTREAM_BINDING_DISTRIBUTIONS = ("mlir-python-bindings", "mlir")
"""The distribution names upstream MLIR's Python bindings are installed under."""


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _described(distribution: str) -> str:
    version = _version(distribution)
    return f"{distribution} {version}" if version is not None else f"{distribution} (not installed)"


def _bindings() -> str:
    """The bindings the MLIR backend imports: the upstream `mlir` package when it is installed
    (it wins), else the copy inside iree-base-compiler."""
    if find_spec("mlir") is not None:
        for distribution in UPSTREAM_BINDING_DISTRIBUTIONS:
            version = _version(distribution)
            if version is not None:
                return f"upstream mlir package ({distribution} {version})"
        return "upstream mlir package (version unknown)"
    return f"{_described('iree-base-compiler')} (iree.compiler.ir)"


def version_lines() -> list[str]:
    """niroc's version, then one line per library: `onnx 1.23.2`, `onnx-ir 1.1.0`,
    `MLIR bindings: iree-base-compiler 3.13.0 (iree.compiler.ir)`."""
    return [
        f"niroc {__version__}",
        _described("onnx"),
        _described("onnx-ir"),
        f"MLIR bindings: {_bindings()}",
    ]
