"""Program structure: Module > Global*, Function* > Region > Block* > Op* > Region*.

Blocks and regions are mutable containers compared by identity; each must have exactly one owner
(the verifier checks it, since Python cannot stop the same Block being put in two lists).
FunctionType and Global are plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .attributes import Literal
from .types import Type
from .values import Value

if TYPE_CHECKING:
    from .ops import Op

__all__ = ["FunctionType", "Global", "Block", "Region", "Function", "Module", "SymbolName"]

SymbolName = str
"""Names a module-level declaration (a Global or a Function); resolved by name."""


@dataclass(frozen=True, slots=True)
class FunctionType:
    """The input and output types of a function."""

    inputs: tuple[Type, ...] = ()
    outputs: tuple[Type, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))


@dataclass(eq=False, slots=True)
class Global:
    """An immutable, initialized module value. `initializer` is a scalar literal or a buffer."""

    name: SymbolName
    type: Type
    initializer: Literal


@dataclass(eq=False, slots=True)
class Block:
    """Arguments, then ops; the last op is the block's terminator."""

    arguments: tuple[Value, ...] = ()
    operations: list[Op] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.arguments, tuple):
            self.arguments = tuple(self.arguments)
        if not isinstance(self.operations, list):
            self.operations = list(self.operations)


@dataclass(eq=False, slots=True)
class Region:
    """Blocks; the first is the entry, every other must be reachable from it."""

    blocks: list[Block] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.blocks, list):
            self.blocks = list(self.blocks)

    @property
    def entry(self) -> Block | None:
        return self.blocks[0] if self.blocks else None


@dataclass(eq=False, slots=True)
class Function:
    """A definition (with `body`) or an external declaration (`body` None).

    `input_names`/`output_names` are optional public-interface metadata: one entry per input or
    output, each a non-empty name or None.
    """

    name: SymbolName
    type: FunctionType
    body: Region | None = None
    input_names: tuple[str | None, ...] | None = None
    output_names: tuple[str | None, ...] | None = None

    def __post_init__(self) -> None:
        if self.input_names is not None and not isinstance(self.input_names, tuple):
            self.input_names = tuple(self.input_names)
        if self.output_names is not None and not isinstance(self.output_names, tuple):
            self.output_names = tuple(self.output_names)

    @property
    def is_declaration(self) -> bool:
        return self.body is None

    @property
    def first_block(self) -> Block:
        """The entry block of a definition."""
        if self.body is None or not self.body.blocks:
            raise ValueError(f"function @{self.name} has no body")
        return self.body.blocks[0]


@dataclass(eq=False, slots=True)
class Module:
    """Globals and functions sharing one symbol namespace."""

    globals: list[Global] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.globals, list):
            self.globals = list(self.globals)
        if not isinstance(self.functions, list):
            self.functions = list(self.functions)

    def get_function(self, name: SymbolName) -> Function | None:
        for function in self.functions:
            if function.name == name:
                return function
        return None

    def get_global(self, name: SymbolName) -> Global | None:
        for global_ in self.globals:
            if global_.name == name:
                return global_
        return None
