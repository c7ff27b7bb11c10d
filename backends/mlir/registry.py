"""The lowering rules' registry: one table per kind of op, the only place rules are looked up.

`KNOWN_LOWERINGS` is keyed by Niro op class (`@lowering(Add)`, filled by `rules.py`, checked
complete against `niro.ir.OP_KINDS`); the public registry is keyed by UnknownOp name and
op-set range (`@register_lowering("onnx.Relu", since=6)`), filled by the op libraries under
`onnx_ops/`. An UnknownOp's rule is found through the built-in rule of `UnknownOp`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .bindings import mlir_ir
from .context import LoweringRuleContext

__all__ = [
    "LoweringRule",
    "lowering",
    "KNOWN_LOWERINGS",
    "register_lowering",
    "unregister_lowering",
    "registered_lowerings",
    "lowering_for",
    "registered_lowering",
    "RegisteredLowering",
    "lowers",
    "cannot_lower",
]

LoweringRule = Callable[[LoweringRuleContext], Sequence[mlir_ir.Value]]

KNOWN_LOWERINGS: dict[type, LoweringRule] = {}
"""Niro op class -> rule; `rules.py` fills it and checks it covers `OP_KINDS`."""

_REGISTERED: dict[str, RegisteredLowering] = {}


def lowering(op_class: type) -> Callable[[LoweringRule], LoweringRule]:
    """Registers the built-in rule for a Niro op class (`@lowering(Add)`)."""

    def register(rule: LoweringRule) -> LoweringRule:
        if op_class in KNOWN_LOWERINGS:
            raise ValueError(f"{op_class.__name__} already has a lowering")
        KNOWN_LOWERINGS[op_class] = rule
        return rule

    return register


@dataclass(frozen=True, slots=True)
class RegisteredLowering:
    """A registered UnknownOp lowering and the op-set versions it implements (`until` inclusive,
    None = every later version)."""

    name: str
    rule: LoweringRule
    since: int = 1
    until: int | None = None

    def supports(self, version: int) -> bool:
        return version >= self.since and (self.until is None or version <= self.until)

    def describe_versions(self) -> str:
        if self.until is None:
            return f"opset {self.since} and later"
        return f"opsets {self.since} to {self.until}"


def register_lowering(
    name: str, *, since: int = 1, until: int | None = None, replace: bool = False
) -> Callable[[LoweringRule], LoweringRule]:
    """Registers the lowering of the UnknownOp called `name` (`@register_lowering("onnx.Relu")`).

    The rule gets a `LoweringRuleContext` and returns the MLIR values of the op's results.
    `since`/`until` bound the op-set versions (the op's `niro.opset` attribute) it implements;
    an op of another version is refused with a LoweringError rather than lowered with the wrong
    semantics. Registering a name twice is an error unless `replace=True`.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"an UnknownOp lowering needs a non-empty op name, got {name!r}")

    def register(rule: LoweringRule) -> LoweringRule:
        if name in _REGISTERED and not replace:
            raise ValueError(f"'{name}' already has a registered MLIR lowering")
        _REGISTERED[name] = RegisteredLowering(name, rule, since, until)
        return rule

    return register


def unregister_lowering(name: str) -> LoweringRule:
    """Removes and returns the lowering registered for `name` (KeyError when there is none)."""
    return _REGISTERED.pop(name).rule


def registered_lowerings() -> tuple[str, ...]:
    """The UnknownOp names that have a registered lowering, sorted."""
    return tuple(sorted(_REGISTERED))


def registered_lowering(name: str) -> RegisteredLowering | None:
    """The registration for `name`, with its op-set range (for `niroc ops`)."""
    return _REGISTERED.get(name)


def lowers(name: str, version: int) -> bool:
    """Whether a registered lowering implements UnknownOp `name` at op-set `version`.

    The ONNX frontend asks this (as its `expand_functions`, negated) so that an op we cannot
    lower, but which ONNX defines by a function body, arrives as a call of that body."""
    registration = _REGISTERED.get(name)
    return registration is not None and registration.supports(version)


def cannot_lower(name: str, version: int) -> bool:
    """`not lowers(...)`: the `expand_functions` predicate for `import_model`."""
    return not lowers(name, version)


def lowering_for(name: str) -> LoweringRule | None:
    registration = _REGISTERED.get(name)
    return None if registration is None else registration.rule
