"""SSA values: an immutable (ValueId, Type) pair.

A value is defined by its position in the IR (a block argument or an op result); the Value object
itself carries no back-pointer to its definition, so it can be shared freely.
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import ScalarType, TensorType, Type

__all__ = ["ValueId", "Value"]


@dataclass(frozen=True, slots=True, order=True)
class ValueId:
    """Identifies a value; unique within a function, nested regions included."""

    index: int

    def __post_init__(self) -> None:
        if not isinstance(self.index, int) or isinstance(self.index, bool):
            raise TypeError(f"ValueId wraps an int, got {self.index!r}")

    def __str__(self) -> str:
        return f"%{self.index}"


@dataclass(frozen=True, slots=True)
class Value:
    """An SSA value. Two Values are equal when both id and type are."""

    id: ValueId
    type: Type

    def __post_init__(self) -> None:
        if not isinstance(self.id, ValueId):
            raise TypeError(f"Value id must be a ValueId, got {self.id!r}")
        if not isinstance(self.type, (ScalarType, TensorType)):
            raise TypeError(f"Value type must be a ScalarType or TensorType, got {self.type!r}")

    def __str__(self) -> str:
        return str(self.id)
