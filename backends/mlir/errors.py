"""LoweringError: every failure of the MLIR backend a user can cause.

It names where the problem is (the Niro op's location, and the ONNX node name when the op came
from one) and carries MLIR's or the external tool's own diagnostics as notes.
"""

from __future__ import annotations

from niro.ir import NirocError

__all__ = ["LoweringError"]


class LoweringError(NirocError):
    """The module cannot be lowered to MLIR, fails MLIR verification, or an MLIR tool failed."""
