"""The hostile-input corpus (testdata/hostile/generate.py) and the real `niroc` run the way a
user runs it, with a hang guard and a memory ceiling.

generate.py is a script beside the data, not a package; it is loaded here by path, once.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
from pathlib import Path

from tests.cli.niroc_runner import ROOT, VENV_BIN

NIROC = VENV_BIN / "niroc"
IREE_OPT = VENV_BIN / "iree-opt"
MEMORY_LIMIT = 2 << 30
"""RLIMIT_AS for every niroc run: a model that declares a 4 TiB tensor must not get it."""
TIMEOUT = 20
"""A hang guard, not a timing assertion (the machine may be loaded)."""
SLOW_TIMEOUT = 120


def _load_generator():
    path = ROOT / "testdata" / "hostile" / "generate.py"
    spec = importlib.util.spec_from_file_location("hostile_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


generate = _load_generator()
CASES = generate.CASES
CANARY = generate.CANARY


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_niroc(*arguments: str, cwd: Path, timeout: float = TIMEOUT, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`niroc ARGUMENTS...` in `cwd` under the memory ceiling; `prefix` wraps it (strace)."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [*prefix, str(NIROC), *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        errors="replace",
        env=env,
        timeout=timeout,
        preexec_fn=_limit_memory,
    )


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under `folder` with its content (None for folders and special files)."""
    entries: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            entries[str(path.relative_to(folder))] = None
        else:
            entries[str(path.relative_to(folder))] = path.read_bytes()
    return entries
