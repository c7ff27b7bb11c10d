"""Small builders for verifier tests: values, one-block functions, modules, and the Case table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from niro.ir import (
    Block,
    Function,
    FunctionType,
    Global,
    Module,
    Region,
    ScalarType,
    TensorType,
    Value,
    ValueId,
)

BOOL, I8, I32, I64, F32, F64 = (
    ScalarType.BOOL,
    ScalarType.I8,
    ScalarType.I32,
    ScalarType.I64,
    ScalarType.F32,
    ScalarType.F64,
)


def tensor(element: ScalarType, *dims: int | None) -> TensorType:
    return TensorType(element, tuple(dims))


def unranked(element: ScalarType) -> TensorType:
    return TensorType(element, None)


def v(index: int, type_=F32) -> Value:
    return Value(ValueId(index), type_)


def function(
    name: str,
    blocks: list[Block],
    outputs: tuple = (),
    *,
    inputs: tuple | None = None,
    **fields,
) -> Function:
    """A definition whose inputs default to its entry block's argument types."""
    if inputs is None:
        inputs = tuple(argument.type for argument in blocks[0].arguments)
    return Function(name, FunctionType(inputs, outputs), Region(blocks), **fields)


def one_block(ops: list, arguments: tuple = (), outputs: tuple = (), name: str = "main") -> Module:
    """A module with one function `name` whose body is one block."""
    return Module(functions=[function(name, [Block(arguments, ops)], outputs)])


def with_globals(module: Module, *globals_: Global) -> Module:
    module.globals.extend(globals_)
    return module


def declaration(name: str, inputs: tuple = (), outputs: tuple = ()) -> Function:
    return Function(name, FunctionType(inputs, outputs), None)


@dataclass(frozen=True)
class Case:
    """A module breaking `rule`, and where the diagnostic must point.

    `also` lists the other rules the module breaks (the test checks the exact multiset, so a
    rule that fires spuriously fails the test too).
    """

    name: str
    rule: str
    build: Callable[[], Module]
    symbol: str | None
    path: tuple[str, ...]
    op_name: str | None
    message: str
    also: tuple[str, ...] = ()
    value_ids: tuple[int, ...] | None = None
    source: str | None = None
