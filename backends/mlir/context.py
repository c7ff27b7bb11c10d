"""The lowering-rule context, the rule tables, and the registry for UnknownOp lowerings.

Every rule, built in or registered, receives one `LoweringRuleContext` (as JAX's lowering rules
receive a `LoweringRuleContext`): the Niro op, its MLIR operand values, the MLIR types its
results must have, the location and insertion point to build at, and helpers. A rule builds ops
and returns the MLIR values of the op's results, in order (terminators return nothing).

Two tables: `KNOWN_LOWERINGS` keyed by Niro op class (`@lowering(Add)`, filled by `rules.py`,
checked complete against `niro.ir.OP_KINDS`), and the public registry keyed by UnknownOp name
(`@register_lowering("onnx.Relu")`), which op libraries fill.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from niro.ir import Block, Location, Op, ScalarType, TensorType, Value, format_type, op_name

from .bindings import ir
from .errors import LoweringError

if TYPE_CHECKING:
    from .literals import ResourceTable
    from .lowering import FunctionLowering

T = TypeVar("T")

__all__ = [
    "LoweringRuleContext",
    "LoweringRule",
    "lowering",
    "KNOWN_LOWERINGS",
    "register_lowering",
    "unregister_lowering",
    "registered_lowerings",
    "lowering_for",
    "registered_lowering",
    "RegisteredLowering",
]


@dataclass(frozen=True, slots=True)
class LoweringRuleContext:
    """What a lowering rule gets: one per Niro op lowered.

    `operands` are the MLIR values of `niro_operands` (`operands_of(op)`) in order;
    `result_types` the MLIR types of `niro_results` (`results_of(op)`). The rule runs with
    `location` and `insertion_point` already entered, so builders pick them up implicitly.
    `niro_location` says where the op is in the Niro module (its function and `path`), for error
    messages. What a rule needs from the lowering around it (nested regions, branch targets,
    the module's symbols and blobs, attributes shared between ops) it asks through the methods
    here; `_driver`, the function being lowered, is theirs alone: a rule never reads or writes
    the driver's map of Niro values to MLIR values.
    """

    op: Op
    operands: tuple[ir.Value, ...]
    result_types: tuple[ir.Type, ...]
    niro_operands: tuple[Value, ...]
    niro_results: tuple[Value, ...]
    location: ir.Location
    insertion_point: ir.InsertionPoint
    path: tuple[str, ...]
    _driver: FunctionLowering

    @property
    def niro_location(self) -> Location:
        """Where the op is in the Niro module, made when asked (an error, a run-time check's
        message): most ops never need it, and a 20,000-op model would make 20,000."""
        op = self.op
        return Location(
            symbol=self._driver.function.name, path=self.path, op_name=op_name(op), source=op.loc
        )

    # -- errors ---------------------------------------------------------------------------------

    def error(self, message: str) -> LoweringError:
        """A LoweringError in MLIR's form (`'niro.add' op ...`) located at this op."""
        return LoweringError(f"'{op_name(self.op)}' op {message}", location=str(self.niro_location))

    # -- Niro views of the operands ---------------------------------------------------------------

    def ranked(self, value: Value, what: str) -> TensorType:
        """`value`'s type when it is a ranked tensor, else an error naming the op and operand."""
        type_ = value.type
        if not isinstance(type_, TensorType):
            raise self.error(f"expected a tensor {what}, got {format_type(type_)}")
        if type_.shape is None:
            raise self.error(f"needs a ranked tensor {what}, got {format_type(type_)}")
        return type_

    def constant_operand(self, index: int) -> np.ndarray | None:
        """Operand `index` as a numpy array when it is a compile-time constant (defined by a
        Const or a GetGlobal), else None: for axes, shapes, pads given as ONNX inputs."""
        return self.constant_value(self.niro_operands[index])

    def constant_value(self, value: Value) -> np.ndarray | None:
        """A Niro value's contents as a numpy array when a Const or GetGlobal defines it."""
        return self._driver.constant_value(value)

    # -- what the lowering shares -------------------------------------------------------------

    def mlir_type(self, type_: ScalarType | TensorType) -> ir.Type:
        """`lower_type(type_)` in this lowering's context, made once per type."""
        return self._driver.module.mlir_type(type_)

    def shared_object(self, key: Hashable, build: Callable[[], T]) -> T:
        """`build()`, made once per lowered module for `key` (attributes many ops repeat:
        indexing maps, permutations, broadcast plans); `key` must say all `build` depends on."""
        return self._driver.module.shared_object(key, build)  # type: ignore[return-value]

    # -- nested regions and branch targets ------------------------------------------------------

    def lower_block(
        self,
        block: Block,
        mlir_block: ir.Block,
        arguments: Sequence[ir.Value] = (),
        *,
        region: int = 0,
        yield_builder: Callable[[LoweringRuleContext], None],
    ) -> None:
        """Lowers `block`, the single block of this op's region #`region`, into the existing
        MLIR block `mlir_block` (an scf.if arm, a loop body), its arguments bound to the MLIR
        values `arguments`. Its Yield calls `yield_builder` with the Yield's own context, whose
        `operands` are the yielded values: it builds the terminator the enclosing op needs."""
        path = self.niro_location.path + (f"region#{region}", "^bb0")
        self._driver.lower_block(block, mlir_block, arguments, path, yield_builder=yield_builder)

    def successor(self, block: Block) -> ir.Block:
        """The MLIR block made for a Niro block of this function (a branch's target)."""
        return self._driver.block_for(block)

    def build_yield(self) -> None:
        """This Yield, built by the enclosing region's yield builder (see `lower_block`)."""
        self._driver.build_yield(self)

    def build_generic(self) -> list[ir.Value]:
        """This UnknownOp kept as a generic operation (when the context allows unregistered
        dialects), its regions lowered."""
        return self._driver.build_generic(self)

    # -- the module -----------------------------------------------------------------------------

    def next_constant_name(self) -> str:
        """The base blob name of the next tensor constant of this function."""
        return self._driver.next_constant_name()

    @property
    def resources(self) -> ResourceTable:
        """The module's `dense_resource` blobs, where a tensor constant's data goes."""
        return self._driver.module.resources

    def global_type(self, name: str) -> ScalarType | TensorType | None:
        """The type of the module's global @`name`, None when there is no such global."""
        return self._driver.module.global_types.get(name)

    def has_function(self, name: str) -> bool:
        """Whether the module defines or declares function @`name`."""
        return name in self._driver.module.function_names


LoweringRule = Callable[[LoweringRuleContext], Sequence[ir.Value]]

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
