"""The one place that imports the MLIR Python bindings.

The upstream bindings are used when they are installed as the `mlir` package; otherwise the copy
that ships inside the `iree-base-compiler` wheel (`iree.compiler.ir`). Every other module of the
backend imports MLIR's `ir` module, as `mlir_ir` (docs/design.md, "The stages"), and the dialect
modules from here, so switching binding is one edit.

The IREE wheel has no Python module for the `ml_program` dialect (the dialect itself is
registered in its context), so `ml_program` ops are built with the generic `Operation.create`
(`ml_program.global` in `lowering.py`, `ml_program.global_load_const` in `rules.py`); `make_context` checks the context
knows them.
"""

from __future__ import annotations

# NOTE: `linalg` is the dialect's generated op classes, not the `dialects.linalg` package: that
# package imports linalg's OpDSL op definitions (~45 ms at start-up) whose function-style
# builders (`linalg.fill(...)`) also rebuild each op's definition in Python on every call. The
# classes plus the C++ region builder (`fill_builtin_region`) make the same ops.
try:  # NOTE: the upstream package wins when both are installed (docs/design.md).
    from mlir import ir as mlir_ir
    from mlir._mlir_libs._mlir import globals as _binding_globals
    from mlir._mlir_libs._mlirDialectsLinalg import fill_builtin_region
    from mlir.dialects import _linalg_ops_gen as linalg
    from mlir.dialects import arith, cf, func, math, scf, tensor
    from mlir.passmanager import PassManager

    BINDING = "mlir"
except ImportError:
    from iree.compiler import ir as mlir_ir
    from iree.compiler._mlir_libs._mlir import globals as _binding_globals
    from iree.compiler._mlir_libs._mlirDialectsLinalg import fill_builtin_region
    from iree.compiler.dialects import _linalg_ops_gen as linalg
    from iree.compiler.dialects import arith, cf, func, math, scf, tensor
    from iree.compiler.passmanager import PassManager

    BINDING = "iree.compiler"

__all__ = [
    "BINDING",
    "mlir_ir",
    "arith",
    "cf",
    "fill_builtin_region",
    "func",
    "linalg",
    "math",
    "scf",
    "tensor",
    "make_context",
    "PassManager",
    "REQUIRED_OPERATIONS",
]

_DIALECT_MODULES = "niro.backends.mlir.dialect_modules"
if _DIALECT_MODULES not in _binding_globals.dialect_search_modules:
    # NOTE: first, so the bindings find our light `linalg` before theirs (dialect_modules/).
    _binding_globals.dialect_search_modules = [_DIALECT_MODULES, *_binding_globals.dialect_search_modules]

REQUIRED_OPERATIONS = (
    "ml_program.global",
    "ml_program.global_load_const",
    "linalg.generic",
    "func.func",
    "scf.if",
    "cf.cond_br",
)
"""Ops the lowering builds; a context that does not know one of them cannot be used."""


def make_context(*, allow_unregistered_dialects: bool = False) -> mlir_ir.Context:
    """A fresh MLIR context with every dialect the lowering emits loaded.

    One context per lowered module: resource blob names are unique per context, so a fresh one
    keeps the names we choose (deterministic output), and dropping the module frees its blobs.
    """
    context = mlir_ir.Context()
    context.allow_unregistered_dialects = allow_unregistered_dialects
    missing = [name for name in REQUIRED_OPERATIONS if not context.is_registered_operation(name)]
    if missing:
        raise RuntimeError(
            f"the MLIR bindings from '{BINDING}' do not register {', '.join(missing)}; "
            "install iree-base-compiler or upstream MLIR bindings built with those dialects"
        )
    return context
