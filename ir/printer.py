"""The printer: Niro IR to its text form, an MLIR-like assembly the parser reads back exactly.

The text is deterministic (the same module always prints the same text: attribute dict keys
are sorted, blocks are numbered by position) and faithful: print -> parse gives a structurally
equal module, and print -> parse -> print gives the same text, for ill-formed IR too (a wrong
operand type, an arity mismatch), so the verifier can be tested from text. Every value's type is
spelled out at each use; the parser never has to infer or look anything up.

The printer writes to a stream as it goes and never recurses on nesting: a 500-deep If nest and
a gigabyte of weights (hex-encoded in chunks, straight from the buffer) both print. It does not
check the IR; `verify` does. The one thing it cannot print is a branch to a block outside the
branch's own region, since labels are per region: that raises ValueError.

Grammar (`x?` optional, `x*` repeated, `x,*` comma-separated; `//` comments run to end of line)::

    module      ::= (global | function)*
    global      ::= 'niro.global' symbol ':' type '=' literal
    function    ::= 'niro.func' 'private' symbol signature             // a declaration
                  | 'niro.func' symbol signature '{' region-body '}'    // a definition
    signature   ::= '(' (type arg-attrs?),* ')' '->' '(' (type arg-attrs?),* ')'
                    ('attributes' attr-dict)?
    arg-attrs   ::= '{' 'name' '=' string '}'
    region-body ::= op* block*            // leading ops form an unlabeled entry block
    block       ::= block-label ('(' (value ':' type),* ')')? ':' op*
    op          ::= (value,* '=')? op-body ('loc' '(' string ')')?
    op-body     ::= 'niro.const' literal ':' type
                  | 'niro.get_global' symbol ':' type
                  | 'niro.transpose' value '[' integer,* ']' ':' fn-type
                  | 'niro.tensor_extract' value '[' value,* ']' ':' fn-type
                  | ('niro.add' | 'niro.mul' | 'niro.matmul') value ',' value ':' fn-type
                  | 'niro.call' symbol '(' value,* ')' ':' fn-type
                  | 'niro.br' successor
                  | 'niro.cond_br' value ',' successor ',' successor ':' type
                  | ('niro.return' | 'niro.yield') (value,* ':' type,*)?
                  | 'niro.if' value ':' fn-type '{' region-body '}' 'else' '{' region-body '}'
                  | string '(' value,* ')' ('[' block-label,* ']')?          // an UnknownOp
                    ('(' ('{' region-body '}'),* ')')? attr-dict? ':' fn-type
    successor   ::= block-label ('(' value,* ':' type,* ')')?
    fn-type     ::= '(' type,* ')' '->' (type | '(' type,* ')')
    type        ::= 'i1' | 'i8' | ... | 'f32' | 'f64' | 'bf16' | 'ui8' | ...
                  | 'tensor<' ('*x' | (dim 'x')*) scalar-type '>'    // dim: integer or '?'
    literal     ::= 'true' | 'false' | integer | float | dense
    float       ::= decimal (always with '.' or an exponent) | 'inf' | '-inf' | 'nan'
                  | 'nan(0x' 16-hex-digits ')'                      // a NaN with other bits
    dense       ::= 'dense<"0x' hex-bytes '">' | 'dense<elided:' integer 'bytes>'
    attribute   ::= 'none' | literal | string | '[' attribute,* ']' | attr-dict
    attr-dict   ::= '{' ((bare-name | string) '=' attribute),* '}'
    value       ::= '%' integer                   // the ValueId itself, never renumbered
    block-label ::= '^' name                      // printed '^bbN', N the position in the region
    symbol      ::= '@' bare-name | '@' string    // bare-name: [A-Za-z_][A-Za-z0-9_$.]*

Strings are double-quoted with escapes `\\n \\t \\r \\" \\\\ \\xHH \\u{H...}`. An unlabeled entry block is
printed only for a one-block region whose block has no arguments, at least one op and no
successors, so an empty region (`{ }`) and a region of one empty block (`{ ^bb0: }`) differ.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TextIO

from ._never import assert_never
from .attributes import as_memoryview, buffer_nbytes, is_buffer
from .lexer import BARE_IDENTIFIER, quote_string
from .ops import (
    Add,
    Branch,
    Call,
    CondBranch,
    Const,
    GetGlobal,
    If,
    MatMul,
    Mul,
    Op,
    Return,
    TensorExtract,
    Transpose,
    UnknownOp,
    Yield,
    successors_of,
)
from .structure import Block, Function, Global, Module, Region
from .types import format_type
from .values import Value

__all__ = [
    "print_module",
    "write_module",
    "format_symbol",
    "format_float",
    "format_attribute",
    "ELIDE_THRESHOLD",
]

ELIDE_THRESHOLD = 64
"""With elide_data, buffers larger than this many bytes print as `dense<elided: N bytes>`."""

_HEX_CHUNK = 1 << 16
_CANONICAL_NAN_BITS = 0x7FF8000000000000
_INDENT = "  "


@dataclass(frozen=True, slots=True)
class _Data:
    """A buffer to write as `dense<...>` when its turn comes, in chunks."""

    buffer: object


@dataclass(frozen=True, slots=True)
class _NestedRegion:
    """A region to print in place: labels at `indent`, its ops one level deeper."""

    region: Region
    indent: str


_Piece = str | _Data | _NestedRegion


def print_module(module: Module, *, elide_data: bool = False) -> str:
    """The text form of `module` (see the module docstring for the grammar)."""
    stream = io.StringIO()
    write_module(module, stream, elide_data=elide_data)
    return stream.getvalue()


def write_module(module: Module, stream: TextIO, *, elide_data: bool = False) -> None:
    """Writes the text form of `module` to `stream` as it goes, buffers in chunks."""
    _Printer(stream, elide_data).run(_module_pieces(module))


def format_symbol(name: str) -> str:
    """`@main`, or `@"conv 1/weight"` for a name that is not a bare identifier."""
    if BARE_IDENTIFIER.fullmatch(name):
        return "@" + name
    return "@" + quote_string(name)


def format_float(value: float) -> str:
    """A float spelling that reads back to the same bits: `2.0`, `-0.0`, `1e+16`, `inf`, `nan`."""
    value = float(value)
    if value != value:
        (bits,) = struct.unpack("<Q", struct.pack("<d", value))
        return "nan" if bits == _CANONICAL_NAN_BITS else f"nan(0x{bits:016X})"
    return float.__repr__(value)


def format_attribute(attribute: object, *, elide_data: bool = True) -> str:
    """One generic attribute as text (buffers elided past ELIDE_THRESHOLD unless told not to)."""
    stream = io.StringIO()
    _Printer(stream, elide_data).run(iter(_attribute_pieces(attribute)))
    return stream.getvalue()


class _Printer:
    """Writes pieces in order; a nested region becomes a new iterator on an explicit stack."""

    def __init__(self, stream: TextIO, elide_data: bool):
        self.stream = stream
        self.elide_data = elide_data

    def run(self, pieces: Iterator[_Piece]) -> None:
        write = self.stream.write
        stack = [pieces]
        while stack:
            piece = next(stack[-1], None)
            if piece is None:
                stack.pop()
            elif isinstance(piece, str):
                write(piece)
            elif isinstance(piece, _Data):
                self._write_data(piece.buffer)
            else:
                stack.append(_region_pieces(piece.region, piece.indent))

    def _write_data(self, buffer) -> None:
        nbytes = buffer_nbytes(buffer)
        if self.elide_data and nbytes > ELIDE_THRESHOLD:
            self.stream.write(f"dense<elided: {nbytes} bytes>")
            return
        view = as_memoryview(buffer)
        self.stream.write('dense<"0x')
        for start in range(0, nbytes, _HEX_CHUNK):
            self.stream.write(view[start : start + _HEX_CHUNK].hex().upper())
        self.stream.write('">')


def _module_pieces(module: Module) -> Iterator[_Piece]:
    for global_ in module.globals:
        yield from _global_pieces(global_)
    for index, function in enumerate(module.functions):
        if index > 0 or module.globals:
            yield "\n"
        yield from _function_pieces(function)


def _global_pieces(global_: Global) -> Iterator[_Piece]:
    yield f"niro.global {format_symbol(global_.name)} : {format_type(global_.type)} = "
    yield from _literal_pieces(global_.initializer)
    yield "\n"


def _function_pieces(function: Function) -> Iterator[_Piece]:
    keyword = "niro.func private " if function.body is None else "niro.func "
    inputs, input_attribute = _signature_side(function.type.inputs, function.input_names)
    outputs, output_attribute = _signature_side(function.type.outputs, function.output_names)
    yield f"{keyword}{format_symbol(function.name)}({inputs}) -> ({outputs})"
    attributes = {}
    if input_attribute is not None:
        attributes["input_names"] = input_attribute
    if output_attribute is not None:
        attributes["output_names"] = output_attribute
    if attributes:
        yield " attributes "
        yield from _attribute_pieces(attributes)
    if function.body is None:
        yield "\n"
        return
    yield " {\n"
    yield _NestedRegion(function.body, "")
    yield "}\n"


def _signature_side(types: Sequence, names: tuple | None) -> tuple[str, tuple | None]:
    """The `type {name = "x"}, ...` list, plus the names when only `attributes` can hold them.

    Names go next to their types when there is one per type and at least one is present; an
    all-None tuple, an empty one, or one of the wrong arity (ill-formed, but printable) goes to
    the function's `attributes {input_names = [...]}` instead, so None and (None,) stay distinct.
    """
    per_position = (
        names is not None and len(names) == len(types) and any(n is not None for n in names)
    )
    parts = []
    for index, type_ in enumerate(types):
        text = format_type(type_)
        name = names[index] if per_position and names is not None else None
        if name is not None:
            text += " {name = " + quote_string(name) + "}"
        parts.append(text)
    leftover = names if names is not None and not per_position else None
    return ", ".join(parts), leftover


def _region_pieces(region: Region, indent: str) -> Iterator[_Piece]:
    labels = {id(block): index for index, block in enumerate(region.blocks)}
    blocks = region.blocks
    implicit_entry = (
        len(blocks) == 1
        and not blocks[0].arguments
        and bool(blocks[0].operations)
        and not any(successors_of(op) for op in blocks[0].operations)
    )
    op_indent = indent + _INDENT
    for index, block in enumerate(blocks):
        if not implicit_entry:
            yield _block_header(block, index, indent)
        for op in block.operations:
            yield from _op_pieces(op, op_indent, labels)


def _block_header(block: Block, index: int, indent: str) -> str:
    if not block.arguments:
        return f"{indent}^bb{index}:\n"
    arguments = ", ".join(
        f"%{value.id.index}: {format_type(value.type)}" for value in block.arguments
    )
    return f"{indent}^bb{index}({arguments}):\n"


def _ids(values: Sequence[Value]) -> str:
    return ", ".join(f"%{value.id.index}" for value in values)


def _types(values: Sequence[Value]) -> str:
    return ", ".join(format_type(value.type) for value in values)


def _function_type(operands: Sequence[Value], results: Sequence[Value]) -> str:
    if len(results) == 1:
        return f"({_types(operands)}) -> {format_type(results[0].type)}"
    return f"({_types(operands)}) -> ({_types(results)})"


def _loc(op: Op) -> str:
    return "" if op.loc is None else f" loc({quote_string(op.loc)})"


def _label(block: Block, labels: dict[int, int], op: Op) -> str:
    index = labels.get(id(block))
    if index is None:
        raise ValueError(
            f"cannot print '{type(op).__name__}': its successor is not a block of its own region"
        )
    return f"^bb{index}"


def _successor(block: Block, arguments: Sequence[Value], labels: dict[int, int], op: Op) -> str:
    label = _label(block, labels, op)
    if not arguments:
        return label
    return f"{label}({_ids(arguments)} : {_types(arguments)})"


def _op_pieces(op: Op, indent: str, labels: dict[int, int]) -> Iterator[_Piece]:
    match op:
        case Const():
            yield f"{indent}%{op.result.id.index} = niro.const "
            yield from _literal_pieces(op.literal)
            yield f" : {format_type(op.result.type)}{_loc(op)}\n"
        case GetGlobal():
            yield (
                f"{indent}%{op.result.id.index} = niro.get_global {format_symbol(op.name)}"
                f" : {format_type(op.result.type)}{_loc(op)}\n"
            )
        case Transpose():
            permutation = format_attribute(tuple(op.permutation))
            yield (
                f"{indent}%{op.result.id.index} = niro.transpose %{op.operand.id.index} {permutation}"
                f" : {_function_type((op.operand,), (op.result,))}{_loc(op)}\n"
            )
        case TensorExtract():
            yield (
                f"{indent}%{op.result.id.index} = niro.tensor_extract %{op.operand.id.index}"
                f"[{_ids(op.indices)}] : {_function_type((op.operand, *op.indices), (op.result,))}"
                f"{_loc(op)}\n"
            )
        case Add() | Mul() | MatMul():
            yield (
                f"{indent}%{op.result.id.index} = {_BINARY_NAMES[type(op)]} %{op.lhs.id.index}, "
                f"%{op.rhs.id.index} : {_function_type((op.lhs, op.rhs), (op.result,))}{_loc(op)}\n"
            )
        case Call():
            yield (
                f"{indent}{_results_prefix(op.results)}niro.call {format_symbol(op.callee)}"
                f"({_ids(op.arguments)}) : {_function_type(op.arguments, op.results)}{_loc(op)}\n"
            )
        case Branch():
            yield f"{indent}niro.br {_successor(op.target, op.arguments, labels, op)}{_loc(op)}\n"
        case CondBranch():
            yield (
                f"{indent}niro.cond_br %{op.condition.id.index}, "
                f"{_successor(op.true_target, op.true_arguments, labels, op)}, "
                f"{_successor(op.false_target, op.false_arguments, labels, op)}"
                f" : {format_type(op.condition.type)}{_loc(op)}\n"
            )
        case Return() | Yield():
            name = "niro.return" if isinstance(op, Return) else "niro.yield"
            operands = f" {_ids(op.operands)} : {_types(op.operands)}" if op.operands else ""
            yield f"{indent}{name}{operands}{_loc(op)}\n"
        case If():
            yield (
                f"{indent}{_results_prefix(op.results)}niro.if %{op.condition.id.index}"
                f" : {_function_type((op.condition,), op.results)} {{\n"
            )
            yield _NestedRegion(op.then_region, indent)
            yield f"{indent}}} else {{\n"
            yield _NestedRegion(op.else_region, indent)
            yield f"{indent}}}{_loc(op)}\n"
        case UnknownOp():
            yield f"{indent}{_results_prefix(op.results)}{quote_string(op.name)}({_ids(op.operands)})"
            if op.successors:
                yield " [" + ", ".join(_label(block, labels, op) for block in op.successors) + "]"
            if op.regions:
                yield " ("
                for index, region in enumerate(op.regions):
                    yield "{\n" if index == 0 else f"{indent}}}, {{\n"
                    yield _NestedRegion(region, indent)
                yield f"{indent}}})"
            if op.attributes:
                yield " "
                yield from _attribute_pieces(op.attributes)
            yield f" : {_function_type(op.operands, op.results)}{_loc(op)}\n"
        case _:
            assert_never(op)


_BINARY_NAMES = {Add: "niro.add", Mul: "niro.mul", MatMul: "niro.matmul"}


def _results_prefix(results: Sequence[Value]) -> str:
    return f"{_ids(results)} = " if results else ""


def _literal_pieces(literal: object) -> list[_Piece]:
    """A Const literal or Global initializer: bool, int, float or buffer."""
    if isinstance(literal, bool):
        return ["true" if literal else "false"]
    if isinstance(literal, int):
        return [int.__repr__(literal)]
    if isinstance(literal, float):
        return [format_float(literal)]
    if is_buffer(literal):
        return [_Data(literal)]
    raise TypeError(f"not a Niro literal (bool, int, float, buffer): {type(literal).__name__}")


def _attribute_pieces(attribute: object) -> list[_Piece]:
    """A generic attribute; dict keys sorted so the text does not depend on insertion order."""
    if attribute is None:
        return ["none"]
    if isinstance(attribute, str):
        return [quote_string(attribute)]
    if isinstance(attribute, tuple):
        pieces: list[_Piece] = ["["]
        for index, item in enumerate(attribute):
            if index:
                pieces.append(", ")
            pieces.extend(_attribute_pieces(item))
        pieces.append("]")
        return pieces
    if isinstance(attribute, dict):
        pieces = ["{"]
        for index, key in enumerate(sorted(attribute)):
            if not isinstance(key, str):
                raise TypeError(f"attribute dict keys must be str, got {key!r}")
            if index:
                pieces.append(", ")
            pieces.append(f"{_attribute_key(key)} = ")
            pieces.extend(_attribute_pieces(attribute[key]))
        pieces.append("}")
        return pieces
    try:
        return _literal_pieces(attribute)
    except TypeError:
        raise TypeError(f"not a Niro attribute: {type(attribute).__name__}") from None


def _attribute_key(key: str) -> str:
    # NOTE: `inf` and `nan` lex as floats, so as keys they are quoted like any odd name.
    if BARE_IDENTIFIER.fullmatch(key) and key not in ("inf", "nan"):
        return key
    return quote_string(key)
