"""LoweringError: every failure of the MLIR backend a user can cause.

It names where the problem is (the Niro op's location, and the ONNX node name when the op came
from one) and carries MLIR's or the external tool's own diagnostics as notes. When lowering
refuses several ops, one LoweringError reports them all (`refused_together`): a user fixes the
model once, not once per refused op.
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import NirocError

__all__ = ["LoweringError", "MAX_LISTED_REFUSALS", "refused_together"]

MAX_LISTED_REFUSALS = 20
"""How many refused ops an error lists one by one; past it, only how many more there are."""


class LoweringError(NirocError):
    """The module cannot be lowered to MLIR, fails MLIR verification, or an MLIR tool failed.

    `refusals` is empty for a single failure. When lowering refused several ops it holds each
    one's own LoweringError in module order (all of them, uncapped); this error's location and
    notes are then the first one's, its message the first one's plus how many more there are,
    and its notes list the others (at most MAX_LISTED_REFUSALS in all).

    `op_kind` is the Niro op name (`niro.add`, `onnx.Col2Im`) of the op a rule refused, set by
    the driver when it records the refusal; None for an error that is no op's refusal (MLIR
    verification of the whole module, an external tool). `verify --stats` groups by it.

    `internal` marks a failure of niroc's own lowering, not of the model: the lowered module
    fails MLIR verification, or a rule built a value of another type than its op's result. The
    model may be fine; the conformance runs count these as bugs, not refusals.
    """

    def __init__(
        self,
        message: str,
        *,
        location: str | None = None,
        notes: Sequence[str] = (),
        refusals: Sequence[LoweringError] = (),
        op_kind: str | None = None,
        internal: bool = False,
    ):
        super().__init__(message, location=location, notes=notes)
        self.refusals = tuple(refusals)
        self.op_kind = op_kind
        self.internal: bool = internal or any(refusal.internal for refusal in self.refusals)


def refused_together(refusals: Sequence[LoweringError]) -> LoweringError:
    """The one error that reports every refusal: the only one as it is, else the first one as
    the headline with the others as notes (see LoweringError.refusals)."""
    if not refusals:
        raise ValueError("refused_together needs at least one refusal")
    first, others = refusals[0], refusals[1:]
    if not others:
        return first
    noun = "op" if len(others) == 1 else "ops"
    listed = [f"also refused: {other}" for other in others[: MAX_LISTED_REFUSALS - 1]]
    unlisted = len(others) - len(listed)
    if unlisted:
        listed.append(f"and {unlisted} more refused {'op' if unlisted == 1 else 'ops'}")
    combined = LoweringError(
        f"{first.message} (and {len(others)} more {noun} refused)",
        location=first.location,
        notes=(*first.notes, *listed),
        refusals=refusals,
    )
    combined.__cause__ = first.__cause__
    return combined
