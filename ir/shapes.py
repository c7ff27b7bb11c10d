"""Shape arithmetic shared by the verifier, the ONNX frontend and the MLIR backend.

One place knows ONNX/NumPy multidirectional broadcasting and what "this declared shape is
compatible with the shape the operands imply" means, so the three layers cannot disagree.
Pure functions over `Shape` (a tuple of dims, None for a dynamic dim; None for unknown rank).
"""

from __future__ import annotations

from .types import Dim, Shape, TensorType

__all__ = ["broadcast_names", "broadcast_shapes", "format_shape", "shape_refines"]


def format_shape(shape: Shape) -> str:
    """`(?, 3)` for a ranked shape with a dynamic first dim, `*` for unknown rank."""
    if shape is None:
        return "*"
    dims = ", ".join("?" if dim is None else str(dim) for dim in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def broadcast_shapes(lhs: Shape, rhs: Shape) -> Shape:
    """The shape ONNX/NumPy multidirectional broadcasting gives `lhs` and `rhs`.

    Shapes align at their last dim; the shorter is padded with 1s on the left. Per dim: equal
    dims stay; 1 stretches to the other; a dynamic dim (None) against n > 1 gives n (it must be
    n or 1 at run time), against 1 or None gives None, against 0 gives 0. An unknown rank on
    either side gives an unknown rank (None). Raises ValueError when two static dims differ and
    neither is 1.
    """
    if lhs is None or rhs is None:
        return None
    rank = max(len(lhs), len(rhs))
    padded_lhs = (1,) * (rank - len(lhs)) + tuple(lhs)
    padded_rhs = (1,) * (rank - len(rhs)) + tuple(rhs)
    result: list[Dim] = []
    for axis, (left, right) in enumerate(zip(padded_lhs, padded_rhs, strict=True)):
        if left == right:
            result.append(left)
        elif left == 1:
            result.append(right)
        elif right == 1:
            result.append(left)
        elif left is None:
            result.append(right)
        elif right is None:
            result.append(left)
        else:
            raise ValueError(
                f"shapes {format_shape(lhs)} and {format_shape(rhs)} do not broadcast: "
                f"dim {left} vs {right} at axis {axis} of the broadcast result"
            )
    return tuple(result)


def broadcast_names(result: Shape, *operands: TensorType) -> tuple[str | None, ...] | None:
    """The dim names (`TensorType.dim_names`) of the broadcast of `operands` to `result`: a
    dynamic result dim is named n when every operand dim on it is absent, a static 1, or
    dynamic and named n (at least one): a 1 stretches to the named size, and equal names are
    equal sizes. Any other mix (an unnamed dynamic dim, two names) leaves it unnamed."""
    if result is None:
        return None
    names: list[str | None] = []
    for axis in range(len(result)):
        found: set[str | None] = set()
        for operand in operands:
            offset = len(result) - (operand.rank or 0)
            if operand.shape is None:
                found.add(None)
            elif axis >= offset and operand.shape[axis - offset] != 1:
                found.add(operand.dim_name(axis - offset))
        names.append(found.pop() if result[axis] is None and len(found) == 1 else None)
    return tuple(names) if any(names) else None


def shape_refines(declared: Shape, inferred: Shape) -> bool:
    """Whether a declared result shape is compatible with the shape the operands imply.

    NOTE: the declared shape may be more precise than the inferred one (a frontend's shape
    inference can know that a dynamic dim is 4, or the rank of an unranked result), never less
    precise and never different: every static inferred dim must be declared as that same dim,
    and a ranked inference needs a ranked declaration of the same rank.
    """
    if inferred is None:
        return True
    if declared is None or len(declared) != len(inferred):
        return False
    return all(want is None or got == want for got, want in zip(declared, inferred, strict=True))
