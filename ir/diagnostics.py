"""Diagnostics as data: a rule id, a location, a message.

The verifier returns these; the CLI renders them (rich on a terminal, plain or JSON when piped).
`str(diagnostic)` reads well on its own:

    @main ^bb1 op#3 (niro.add) [node 'add_1'] failed rule 'add-broadcast': ...
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Location", "Diagnostic", "Severity"]

Severity = str
"""'error' or 'warning'."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where in a module something is.

    `symbol` names the function or global; `path` walks down from it, one segment per step
    (`^bb1`, `op#3`, `region#0`, ...); `op_name` is the op at the end of the path; `value_ids`
    are the SSA values involved; `source` is the op's `loc` (the ONNX node name) when known.
    """

    symbol: str | None = None
    path: tuple[str, ...] = ()
    op_name: str | None = None
    value_ids: tuple[int, ...] = ()
    source: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.symbol is not None:
            parts.append(f"@{self.symbol}")
        parts.extend(self.path)
        if self.op_name is not None:
            parts.append(f"({self.op_name})")
        if self.source is not None:
            parts.append(f"[node {self.source!r}]")
        return " ".join(parts) if parts else "<module>"

    def to_dict(self) -> dict:
        return {
            "symbol": self.symbol,
            "path": list(self.path),
            "op": self.op_name,
            "values": [f"%{index}" for index in self.value_ids],
            "node": self.source,
        }


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found in a module: which rule, where, and what was expected."""

    rule: str
    message: str
    location: Location = field(default_factory=Location)
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.location} failed rule '{self.rule}': {self.message}"

    def to_dict(self) -> dict:
        return {
            "severity": self.severity,
            "rule": self.rule,
            "location": str(self.location),
            **{f"location_{key}": value for key, value in self.location.to_dict().items()},
            "message": self.message,
        }
