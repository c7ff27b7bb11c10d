"""`assert_never` for exhaustive matches (typing.assert_never is 3.11+; we support 3.10)."""

from __future__ import annotations

from typing import NoReturn


def assert_never(value: NoReturn) -> NoReturn:
    raise AssertionError(f"unhandled case: {type(value).__name__}")
