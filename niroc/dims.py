"""`--dim NAME=SIZE` for commands that choose run-time sizes (`niroc check`).

The same parser and checks as compile's `--dim` (`shape_options`, over the frontend's
`parse_dim_assignment`), so every command spells and checks the option alike.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

__all__ = ["parse_dims"]


def parse_dims(values: Iterable[str], option: str = "--dim") -> dict[str, int]:
    """`("batch=4", "seq=128")` -> `{"batch": 4, "seq": 128}`; a malformed item, a negative
    size or a name given two sizes is a usage error naming the option."""
    from niro.frontends.onnx import parse_dim_assignment

    from .shape_options import parse_all

    return parse_all(parse_dim_assignment, tuple(values), click.Option([option]))
