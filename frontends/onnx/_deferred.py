"""Defer sympy, which onnx_ir imports eagerly but the importer never needs.

onnx_ir (1.x) imports sympy at the top of `_core` and `_symbolic_shapes` for symbolic dims
arithmetic (`SymbolicDim + 1`), which the frontend never does: it reads dims as names. Importing
sympy costs 0.3-1 s, more than the rest of niroc's start-up together (the start-up budget: within
1.3x of `python -c "import onnx"`). So before onnx_ir is first imported, both modules are
registered with `importlib.util.LazyLoader`: each is executed on its first attribute access,
which keeps every behaviour (a symbolic expression still works, it just pays the import then).

This must run before anything imports onnx_ir, and only changes *when* a module is executed,
never what it does. If the modules cannot be found (another onnx_ir layout), nothing is done.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

__all__ = ["defer_sympy"]

_ONNX_IR_SYMBOLIC = "onnx_ir._symbolic_shapes"


class _DeferredModule(types.ModuleType):
    """Stands in `sys.modules` for a module until an attribute of it is first read; then the
    real module is imported (replacing this one in `sys.modules`) and the read served from it.

    NOTE: not `importlib.util.LazyLoader`: on Python 3.11 the import system reads `__spec__`
    of a module found in `sys.modules`, which makes a LazyLoader module execute at once.
    """

    def __init__(self, spec) -> None:
        super().__init__(spec.name)
        self.__spec__ = spec  # read by the import system, must not trigger the load

    def __getattr__(self, attribute: str):
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attribute)


def defer_sympy() -> None:
    """Stand in for sympy and onnx_ir's sympy-using module until first used (idempotent)."""
    if "onnx_ir" in sys.modules or "sympy" in sys.modules:
        return  # too late, or someone uses sympy already: nothing to save
    sympy_spec = importlib.util.find_spec("sympy")
    onnx_ir_spec = importlib.util.find_spec("onnx_ir")
    if sympy_spec is None or onnx_ir_spec is None or not onnx_ir_spec.submodule_search_locations:
        return
    symbolic_spec = importlib.machinery.PathFinder.find_spec(
        "_symbolic_shapes", list(onnx_ir_spec.submodule_search_locations)
    )
    if symbolic_spec is None:
        return  # another onnx_ir layout: leave it alone
    symbolic_spec.name = _ONNX_IR_SYMBOLIC
    sys.modules["sympy"] = _DeferredModule(sympy_spec)
    sys.modules[_ONNX_IR_SYMBOLIC] = _DeferredModule(symbolic_spec)
