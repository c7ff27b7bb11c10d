"""State the verifier's passes share: the diagnostics list, where each region sits, and the
definitions of one function's values.

Locations are built only when a rule fails: a valid 100k-op module must not pay for strings it
never prints.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from operator import itemgetter

from .diagnostics import Diagnostic, Location
from .dominance import DominatorTree
from .ops import Op, UnknownOp, op_name
from .structure import Block, Function, Global, Region
from .types import ScalarType, TensorType, format_type
from .values import Value, ValueId
from .verify_table import VERIFIER_RULES

__all__ = [
    "RegionKind",
    "RegionInfo",
    "Reporter",
    "FunctionCheck",
    "check_type",
    "describe",
    "safe_op_name",
]


def describe(thing: object) -> str:
    """A short description of an arbitrary (possibly hostile) object for a message."""
    if isinstance(thing, (ScalarType, TensorType)):
        return format_type(thing)
    if isinstance(thing, Value):
        return f"{thing.id} : {format_type(thing.type)}"
    try:
        text = repr(thing)
    except Exception:  # a hostile __repr__ must not crash the verifier
        text = "<unprintable>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(thing).__name__} {text}"


def safe_op_name(op: object) -> str:
    if isinstance(op, UnknownOp) and not isinstance(op.name, str):
        return "<unnamed op>"
    try:
        return op_name(op)  # type: ignore[arg-type]
    except Exception:
        return f"<{type(op).__name__}>"


def check_type(type_: object, what: str, report) -> bool:
    """Reports a non-type or a negative dim through `report(rule, message)`; True when sound."""
    if isinstance(type_, ScalarType):
        return True
    if isinstance(type_, TensorType):
        shape = type_.shape
        if shape is not None:
            for dim in shape:
                if dim is None:
                    continue
                if not isinstance(dim, int):  # only reachable by bypassing TensorType's checks
                    report(
                        "field-type",
                        f"{what} has a dim that is not an int or None: {describe(dim)}",
                    )
                    return False
                if dim < 0:
                    report(
                        "dim-non-negative", f"{what} has a negative dimension: {format_type(type_)}"
                    )
                    return False
        return True
    report("field-type", f"{what} must be a ScalarType or TensorType, got {describe(type_)}")
    return False


class RegionKind(enum.Enum):
    """Which exit terminator a region takes: Return (function body) or Yield (the others)."""

    FUNCTION_BODY = "function body"
    IF_ARM = "If arm"
    OPAQUE = "UnknownOp region"


@dataclass(eq=False, slots=True)
class RegionInfo:
    """One occurrence of a region: its path, its owner, and its CFG once checked.

    `blocks` holds the (index, Block) pairs that are real, first-seen Blocks; `index_of` maps a
    block's id() to its index; `tree` is None when the entry is missing or malformed.
    """

    region: Region
    kind: RegionKind
    steps: tuple[str, ...]  # path segments from the parent region (`^bb0`, `op#2`, `region#0`)
    parent: RegionInfo | None = None
    owner: Op | None = None
    owner_index: int = -1
    blocks: list[tuple[int, Block]] = field(default_factory=list)
    index_of: dict[int, int] = field(default_factory=dict)
    successors: list[list[int]] = field(default_factory=list)
    tree: DominatorTree | None = None

    @property
    def prefix(self) -> tuple[str, ...]:
        """The path from the function to this region; built on demand (failures only), so deep
        nesting costs O(depth) per diagnostic rather than O(depth) per region."""
        parts: list[tuple[str, ...]] = []
        current: RegionInfo | None = self
        while current is not None:
            parts.append(current.steps)
            current = current.parent
        return tuple(step for steps in reversed(parts) for step in steps)

    def encloses(self, other: RegionInfo) -> bool:
        """Whether `other` is this region or nested (at any depth) inside it."""
        current: RegionInfo | None = other
        while current is not None:
            if current is self:
                return True
            current = current.parent
        return False


class Reporter:
    """Collects diagnostics; every rule id must be in VERIFIER_RULES (registered rules excepted)."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def report(
        self, rule: str, message: str, location: Location, *, registered: bool = False
    ) -> None:
        if not registered and rule not in VERIFIER_RULES:
            raise AssertionError(f"verifier rule '{rule}' is not in VERIFIER_RULES")
        self.diagnostics.append(Diagnostic(rule, message, location))


def _value_ids(values: tuple[object, ...]) -> tuple[int, ...]:
    ids = []
    for value in values:
        if isinstance(value, Value):
            ids.append(value.id.index)
        elif isinstance(value, ValueId):
            ids.append(value.index)
    return tuple(ids)


class _Definition(tuple):
    """(value, info, block_index, op_index); op_index -1 for a block argument.

    A tuple subclass rather than a dataclass: one is built per value of every verified module,
    and tuple construction and itemgetter fields run at C speed.
    """

    __slots__ = ()
    value: Value = property(itemgetter(0))  # type: ignore[assignment]
    info: RegionInfo = property(itemgetter(1))  # type: ignore[assignment]
    block_index: int = property(itemgetter(2))  # type: ignore[assignment]
    op_index: int = property(itemgetter(3))  # type: ignore[assignment]

    def path(self) -> tuple[str, ...]:
        head = (*self.info.prefix, f"^bb{self.block_index}")
        return head if self.op_index < 0 else (*head, f"op#{self.op_index}")


class FunctionCheck:
    """Per-function state: symbols, definitions, region occurrences, and the op being checked.

    The per-op rules read `info`, `block_index`, `op_index` and `op` (set before each call)
    instead of receiving a fresh site object, so checking an op allocates nothing on success.
    """

    def __init__(
        self,
        reporter: Reporter,
        symbols: dict[str, Global | Function],
        function: Function,
        symbol: str | None,
        seen_blocks: dict[int, tuple[str | None, RegionInfo, int]],
        seen_regions: dict[int, tuple[str | None, RegionInfo]],
    ) -> None:
        self.reporter = reporter
        self.symbols = symbols
        self.function = function
        self.symbol = symbol
        self.outputs: tuple | None = None  # the function's output types, once known to be sound
        self.seen_blocks = seen_blocks
        self.seen_regions = seen_regions
        self.definitions: dict[int, _Definition] = {}  # by ValueId.index: int hashing is C-fast
        self.region_infos: dict[int, RegionInfo] = {}
        self.bad_ops: set[int] = set()
        # (rule kind, id(type)...) of type combinations already found valid; ids are stable
        # while the module (which holds the types) is alive, i.e. for the whole verify() call.
        self.valid_types: set[tuple] = set()
        self.info: RegionInfo | None = None
        self.block_index = 0
        self.op_index = 0
        self.op: Op | None = None

    # -- reporting
    def fail_at(
        self,
        rule: str,
        message: str,
        path: tuple[str, ...],
        op: object = None,
        values: tuple[object, ...] = (),
        *,
        registered: bool = False,
    ) -> None:
        name = None if op is None else safe_op_name(op)
        source = getattr(op, "loc", None)
        location = Location(
            symbol=self.symbol,
            path=path,
            op_name=name,
            value_ids=_value_ids(values),
            source=source if isinstance(source, str) else None,
        )
        self.reporter.report(rule, message, location, registered=registered)

    def op_path(self) -> tuple[str, ...]:
        assert self.info is not None
        return (*self.info.prefix, f"^bb{self.block_index}", f"op#{self.op_index}")

    def fail(self, rule: str, message: str, *values: object) -> None:
        """Report a failure of the current op, MLIR-style: `'niro.add' op <message>`."""
        name = safe_op_name(self.op)
        self.fail_at(rule, f"'{name}' op {message}", self.op_path(), self.op, values)

    def fail_block(
        self, rule: str, info: RegionInfo, block_index: int, message: str, *values: object
    ) -> None:
        self.fail_at(rule, message, (*info.prefix, f"^bb{block_index}"), None, values)

    def fail_region(self, rule: str, info: RegionInfo, message: str) -> None:
        self.fail_at(rule, message, info.prefix, info.owner)

    @staticmethod
    def path_text(symbol: str | None, path: tuple[str, ...]) -> str:
        return " ".join(("<module>" if symbol is None else f"@{symbol}", *path))

    def first_seen_block(self, block: object) -> str | None:
        """Where `block` was first seen in the module, or None."""
        seen = self.seen_blocks.get(id(block))
        if seen is None:
            return None
        symbol, info, index = seen
        return self.path_text(symbol, (*info.prefix, f"^bb{index}"))

    # -- definitions
    def define(self, value: Value, info: RegionInfo, block_index: int, op_index: int) -> None:
        """Records a definition (the current op's result, or a block argument when op_index < 0)."""
        previous = self.definitions.get(value.id.index)
        definition = _Definition((value, info, block_index, op_index))
        op = None if op_index < 0 else self.op
        if previous is not None:
            where = " ".join(previous.path())
            self.fail_at(
                "value-id-unique",
                f"value {value.id} is defined twice in the function (first at {where})",
                definition.path(),
                op,
                (value,),
            )
        else:
            self.definitions[value.id.index] = definition
        if not isinstance(value.type, ScalarType):
            check_type(
                value.type,
                f"value {value.id}",
                lambda rule, message: self.fail_at(rule, message, definition.path(), op, (value,)),
            )
