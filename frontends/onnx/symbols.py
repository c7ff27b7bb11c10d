"""Niro symbol names for ONNX names: sanitised to `[A-Za-z_][A-Za-z0-9_]*` and made unique.

Globals and Functions share one namespace in a Module, so one `SymbolTable` hands out every
module-level name; it remembers which ONNX name each symbol came from so diagnostics can say it.
"""

from __future__ import annotations

import re

__all__ = ["SymbolTable", "sanitize_symbol"]

_INVALID = re.compile(r"[^A-Za-z0-9_]")


def sanitize_symbol(name: str, *, fallback: str) -> str:
    """`name` with every character outside `[A-Za-z0-9_]` replaced by `_`; never empty, never
    starting with a digit."""
    text = _INVALID.sub("_", name) if name else fallback
    if not text:
        text = fallback
    if text[0].isdigit():
        text = "_" + text
    return text


class SymbolTable:
    """Unique module symbols; `onnx_names` maps each symbol back to the ONNX name it stands for."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self.onnx_names: dict[str, str] = {}

    def claim(self, onnx_name: str, *, fallback: str) -> str:
        base = sanitize_symbol(onnx_name, fallback=fallback)
        symbol = base
        counter = 1
        while symbol in self._used:
            symbol = f"{base}_{counter}"
            counter += 1
        self._used.add(symbol)
        self.onnx_names[symbol] = onnx_name
        return symbol
