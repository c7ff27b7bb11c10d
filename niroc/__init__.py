"""niroc: the command-line driver that compiles ONNX models to MLIR through Niro IR.

This package is only the user interface (click commands, rendering, atomic output). It must not
import onnx or the MLIR bindings at import time: `niroc --version` and `niroc --help` stay fast,
and each command imports the heavy layers it needs when it runs.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
