"""lit configuration for the golden tests of what each lowering family emits.

Each `.onnxtxt` file is the input and the test: a small model in ONNX text, RUN lines that
compile it with niroc, and FileCheck patterns for the MLIR of the family (`CHECK-LABEL` per
function, captured SSA names). A change of the emitted IR shows here, in review, before it
shows in numbers. Same substitutions as tests/cli (its lit.cfg.py is loaded first).
"""

# ruff: noqa: F821 - lit provides `config` and `lit_config`
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

lit_config.load_config(config, os.path.join(ROOT, "tests", "cli", "lit.cfg.py"))
config.name = "niroc-golden"
config.suffixes = [".onnxtxt"]
config.excludes = ["__pycache__", "lit.cfg.py", "test_golden.py"]
config.test_source_root = HERE
config.test_exec_root = os.environ.get("NIROC_LIT_EXEC_ROOT") or os.path.join(
    ROOT, "build", "lit", "golden"
)
