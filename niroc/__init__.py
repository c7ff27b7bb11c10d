"""niroc: the command-line driver that compiles ONNX models to MLIR through Niro IR.

This package is only the user interface (click commands, rendering, atomic output). It must not
import onnx or the MLIR bindings at import time: `niroc --version` and `niroc --help` stay fast,
and each command imports the heavy layers it needs when it runs.
"""

import time

__all__ = ["__version__", "STARTED_AT"]

__version__ = "0.1.0"

STARTED_AT = time.perf_counter()
"""When niroc's own code began (--timing's total counts from here; the interpreter's own
start-up before it, ~20 ms, is not counted)."""
