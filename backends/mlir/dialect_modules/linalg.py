"""linalg's generated op classes and enums: the bindings' `linalg` package minus OpDSL."""

from ..bindings import BINDING

if BINDING == "mlir":
    from mlir.dialects._linalg_enum_gen import *  # noqa: F403
    from mlir.dialects._linalg_ops_gen import *  # noqa: F403
else:
    from iree.compiler.dialects._linalg_enum_gen import *  # noqa: F403
    from iree.compiler.dialects._linalg_ops_gen import *  # noqa: F403
