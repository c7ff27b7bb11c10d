"""What a successful compile imports (the start-up budget): only the layers it uses.

The figures are `make bench`'s (`one_node`); this checks the modules that must stay out of a
plain compile, because each was a measured slice of start-up: rich (~25 ms: only progress on a
terminal, errors, tables and trees need it) and linalg's OpDSL (~70 ms: niroc builds named
ops from the generated classes).
"""

from __future__ import annotations

import json
import subprocess
import sys

from .niroc_runner import ROOT

MODEL = ROOT / "testdata" / "cli" / "mlp.onnxtxt"

_RUN_AND_LIST_MODULES = """
import json, sys
from niroc.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def compile_and_list_modules(*arguments: str) -> tuple[int, list[str]]:
    completed = subprocess.run(
        [sys.executable, "-c", _RUN_AND_LIST_MODULES, *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    found = json.loads(completed.stdout.splitlines()[-1])
    return found["code"], found["modules"]


def test_a_successful_compile_imports_neither_rich_nor_opdsl(tmp_path):
    code, modules = compile_and_list_modules(str(MODEL), "-o", str(tmp_path / "m.mlir"))
    assert code == 0
    assert "niro.backends.mlir.dialect_modules.linalg" in modules  # the ops were built
    unwanted = [
        name
        for name in modules
        if name.split(".")[0] == "rich" or ".opdsl" in name
    ]
    assert unwanted == []
    assert "linalg.matmul" in (tmp_path / "m.mlir").read_text()


def test_a_failing_compile_still_reports_through_rich(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08")
    code, modules = compile_and_list_modules(str(broken), "-o", str(tmp_path / "m.mlir"))
    assert code == 1
    assert "rich.console" in modules


def test_version_imports_neither_onnx_nor_the_bindings():
    """`niroc --version` reads the libraries' versions from their metadata (no heavy import)."""
    code, modules = compile_and_list_modules("--version")
    assert code == 0
    heavy_packages = ("onnx", "onnx_ir", "iree", "mlir", "numpy", "rich")
    heavy = [name for name in modules if name.split(".")[0] in heavy_packages]
    assert heavy == []
    assert "niro.backends.mlir.bindings" not in modules


_COMPILE_AND_COUNT_LOOKUPS = """
import collections, json, sys

class Recorder:
    '''Sees every import that reaches the finders (a module not yet in sys.modules).'''
    lookups = collections.Counter()
    def find_spec(self, name, path=None, target=None):
        self.lookups[name] += 1
        return None

sys.meta_path.insert(0, Recorder())
from niroc.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "lookups": Recorder.lookups}))
"""


def test_a_compile_looks_each_dialect_module_up_once(tmp_path):
    """The bindings import a dialect's module when one of its ops is first handed to Python and
    remember only a module they found; `ml_program`, which the IREE wheel has no module for,
    has one in `dialect_modules`, else each weight's ops cost a failed import (see there)."""
    completed = subprocess.run(
        [sys.executable, "-c", _COMPILE_AND_COUNT_LOOKUPS, str(MODEL), "-o", str(tmp_path / "m.mlir")],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    found = json.loads(completed.stdout.splitlines()[-1])
    assert found["code"] == 0
    assert "ml_program.global_load_const" in (tmp_path / "m.mlir").read_text()
    dialect_modules = {name: count for name, count in found["lookups"].items() if ".dialect" in name}
    assert "niro.backends.mlir.dialect_modules.ml_program" in dialect_modules
    assert {name: count for name, count in dialect_modules.items() if count > 1} == {}
