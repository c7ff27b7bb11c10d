"""`--dim NAME=SIZE`: sizes for named dynamic dims, given on the command line.

One parser for every command that takes the option, so they spell and check it alike.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

__all__ = ["parse_dims"]


def parse_dims(values: Iterable[str], option: str = "--dim") -> dict[str, int]:
    """`("batch=4", "seq=128")` -> `{"batch": 4, "seq": 128}`; a malformed item, a size below 0
    or a name given twice is a usage error naming the item."""
    sizes: dict[str, int] = {}
    for value in values:
        name, separator, size_text = value.partition("=")
        name = name.strip()
        if not separator or not name:
            raise click.BadParameter(f"expected NAME=SIZE, got '{value}'", param_hint=option)
        try:
            size = int(size_text)
        except ValueError:
            raise click.BadParameter(
                f"size of '{name}' is not an integer: '{size_text}'", param_hint=option
            ) from None
        if size < 0:
            raise click.BadParameter(f"size of '{name}' is negative: {size}", param_hint=option)
        if name in sizes:
            raise click.BadParameter(f"'{name}' is given twice", param_hint=option)
        sizes[name] = size
    return sizes
