"""The benchmark scripts are run as programs (`python -m tests.bench...`); their tests load one
as a fresh module, under a name of its own."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture
def load_bench_script(monkeypatch) -> Callable[[str], ModuleType]:
    """Loads `tests/bench/<filename>` as a module registered in sys.modules for the test
    (dataclasses look their module up there)."""

    def load(filename: str) -> ModuleType:
        path = Path(__file__).with_name(filename)
        spec = importlib.util.spec_from_file_location(f"{path.stem}_under_test", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, module)
        spec.loader.exec_module(module)
        return module

    return load
