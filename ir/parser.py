"""The parser: Niro assembly text (the printer's grammar, see `niro.ir.printer`) to a Module.

It reads what the printer writes, exactly, and hand-written text too (comments, any block label
names, unlabeled entry blocks). It checks syntax and block labels only: value types come from
the text at every use, so nothing is looked up or inferred, and ill-typed IR parses so the
verifier can report it (a wrong byte count in `dense<...>` is the verifier's business too).

Every error is a ParseError at a 1-based line and column, saying what was expected and what was
found (`expected ':' after value list, got '{'`). Parser methods come in pairs:
`parse_optional_x()` returns None when x is not next, `parse_x()` raises.

Nesting does not recurse: a region is parsed by a generator that yields the generators of its
nested regions to a driver loop with an explicit stack (`_run`), so a 500-deep If nest parses.
Attributes, which only nest in hand-written text, recurse up to MAX_ATTRIBUTE_DEPTH levels.
Tokens are read lazily in one left-to-right pass, so time is linear in the text's size, and hex
data is decoded in chunks straight from the text.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from .errors import ParseError
from .lexer import Lexer, Token, TokenKind
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
)
from .printer import format_symbol
from .structure import Block, Function, FunctionType, Global, Module, Region
from .types import ScalarType, TensorType, Type
from .values import Value, ValueId

__all__ = ["parse_module", "Parser", "MAX_ATTRIBUTE_DEPTH"]

MAX_ATTRIBUTE_DEPTH = 256
"""Attribute lists and dicts nest at most this deep (they are parsed recursively)."""

_VALUE_ID = re.compile(r"%(-?[0-9]+)")
_DIM = re.compile(r"-?[0-9]+")
_NOT_HEX = re.compile(r"[^0-9A-Fa-f]")
_HEX_CHUNK = 1 << 20  # hex digits decoded at a time
_SCALAR_SPELLINGS = {scalar.spelling: scalar for scalar in ScalarType}

RegionParse = Generator["RegionParse", Region, Region]
"""A region being parsed: yields nested region parses to the driver, returns the Region."""


def parse_module(text: str, *, filename: str = "<string>") -> Module:
    """Reads a whole module; raises ParseError (file:line:col, source line, caret) on bad text."""
    return Parser(text, filename=filename).parse_module()


@dataclass(slots=True)
class _RegionScope:
    """Block labels of the region being parsed; labels are local to their region."""

    blocks_by_label: dict[str, Block] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    first_use: dict[str, Token] = field(default_factory=dict)


class Parser:
    """A recursive-descent parser with one token of lookahead over a lazy Lexer."""

    def __init__(self, text: str, *, filename: str = "<string>"):
        self.lexer = Lexer(text, filename)
        self.token = self.lexer.next_token()

    # -- tokens ---------------------------------------------------------------------------

    def advance(self) -> Token:
        token = self.token
        self.token = self.lexer.next_token()
        return token

    def error(self, token: Token, message: str) -> ParseError:
        return self.lexer.error(token.start, message)

    def error_expected(self, what: str, context: str = "") -> ParseError:
        context = f" {context}" if context else ""
        return self.error(self.token, f"expected {what}{context}, got {self.token.describe()}")

    def parse_optional_punct(self, text: str) -> Token | None:
        if self.token.kind is TokenKind.PUNCT and self.token.text == text:
            return self.advance()
        return None

    def parse_punct(self, text: str, context: str = "") -> Token:
        token = self.parse_optional_punct(text)
        if token is None:
            raise self.error_expected(f"'{text}'", context)
        return token

    def parse_optional_keyword(self, word: str) -> Token | None:
        if self.token.kind is TokenKind.BARE and self.token.text == word:
            return self.advance()
        return None

    def parse_keyword(self, word: str, context: str = "") -> Token:
        token = self.parse_optional_keyword(word)
        if token is None:
            raise self.error_expected(f"'{word}'", context)
        return token

    # -- module level ---------------------------------------------------------------------

    def parse_module(self) -> Module:
        module = Module()
        while self.token.kind is not TokenKind.EOF:
            if self.token.kind is TokenKind.BARE and self.token.text == "niro.global":
                module.globals.append(self.parse_global())
            elif self.token.kind is TokenKind.BARE and self.token.text == "niro.func":
                module.functions.append(self.parse_function())
            else:
                raise self.error_expected("'niro.global' or 'niro.func'")
        return module

    def parse_global(self) -> Global:
        self.parse_keyword("niro.global")
        name = self.parse_symbol("after 'niro.global'")
        self.parse_punct(":", "after global name")
        type_ = self.parse_type("after ':' in niro.global")
        self.parse_punct("=", "after global type")
        return Global(name=name, type=type_, initializer=self.parse_literal())

    def parse_function(self) -> Function:
        self.parse_keyword("niro.func")
        is_declaration = self.parse_optional_keyword("private") is not None
        name = self.parse_symbol("after 'niro.func'")
        self.parse_punct("(", "to begin the argument types")
        inputs, input_names = self._parse_signature_side()
        self.parse_punct("->", "after the argument types")
        self.parse_punct("(", "to begin the result types")
        outputs, output_names = self._parse_signature_side()
        if attributes_token := self.parse_optional_keyword("attributes"):
            attributes = self.parse_attribute_dict()
            for key, names in attributes.items():
                if key not in ("input_names", "output_names"):
                    raise self.error(
                        attributes_token,
                        f"unknown function attribute '{key}' (known: input_names, output_names)",
                    )
                if not isinstance(names, tuple) or not all(
                    item is None or isinstance(item, str) for item in names
                ):
                    raise self.error(
                        attributes_token, f"'{key}' must be a list of strings and none"
                    )
                if (input_names if key == "input_names" else output_names) is not None:
                    raise self.error(
                        attributes_token, f"'{key}' given both next to the types and in attributes"
                    )
                if key == "input_names":
                    input_names = names
                else:
                    output_names = names
        body = None
        if is_declaration:
            if self.token.kind is TokenKind.PUNCT and self.token.text == "{":
                raise self.error(
                    self.token,
                    f"'niro.func private' declares {_symbol(name)}, which cannot have a body",
                )
        else:
            if not (self.token.kind is TokenKind.PUNCT and self.token.text == "{"):
                raise self.error_expected(
                    "'{'",
                    f"to begin the body of {_symbol(name)} (a declaration is 'niro.func private')",
                )
            body = self._run(self._parse_region(f"to begin the body of {_symbol(name)}"))
        return Function(
            name=name,
            type=FunctionType(inputs=tuple(inputs), outputs=tuple(outputs)),
            body=body,
            input_names=input_names,
            output_names=output_names,
        )

    def _parse_signature_side(self) -> tuple[list[Type], tuple[str | None, ...] | None]:
        """`type {name = "x"}, type) `: the types and, if any is named, the names."""
        types: list[Type] = []
        names: list[str | None] = []
        if self.parse_optional_punct(")"):
            return types, None
        while True:
            if self.token.kind is TokenKind.VALUE:
                raise self.error_expected(
                    "a type",
                    "(a signature lists types; the entry block ^bb0(%0: ...) names the values)",
                )
            types.append(self.parse_type())
            name = None
            if self.token.kind is TokenKind.PUNCT and self.token.text == "{":
                open_token = self.token
                attributes = self.parse_attribute_dict()
                if set(attributes) != {"name"} or not isinstance(attributes["name"], str):
                    raise self.error(
                        open_token, "expected '{name = \"...\"}' after a signature type"
                    )
                name = attributes["name"]
            names.append(name)
            if self.parse_optional_punct(")"):
                break
            self.parse_punct(",", "or ')' after a signature type")
        return types, (tuple(names) if any(name is not None for name in names) else None)

    # -- regions and blocks (iterative) ---------------------------------------------------

    def _run(self, parse: RegionParse) -> Region:
        """Drives nested region parses with an explicit stack instead of Python recursion."""
        stack: list[RegionParse] = [parse]
        sent: Region | None = None
        while True:
            try:
                nested = stack[-1].send(sent)  # type: ignore[arg-type]  # None starts a generator
            except StopIteration as finished:
                stack.pop()
                if not stack:
                    return finished.value
                sent = finished.value
                continue
            stack.append(nested)
            sent = None

    def _parse_region(self, context: str) -> RegionParse:
        open_token = self.parse_punct("{", context)
        region = Region()
        scope = _RegionScope()
        block: Block | None = None
        while True:
            token = self.token
            if token.kind is TokenKind.PUNCT and token.text == "}":
                self.advance()
                break
            if token.kind is TokenKind.EOF:
                line = self.lexer.text.count("\n", 0, open_token.start) + 1
                raise self.error(
                    token,
                    f"expected '}}' to close the region opened on line {line}, got end of input",
                )
            if token.kind is TokenKind.BLOCK:
                block = self._parse_block_header(scope, region)
                continue
            if block is None:  # ops before any label form an unlabeled entry block
                block = Block()
                region.blocks.append(block)
            op = yield from self._parse_operation(scope)
            block.operations.append(op)
        undefined = [label for label in scope.first_use if label not in scope.defined]
        if undefined:
            first = min(undefined, key=lambda label: scope.first_use[label].start)
            raise self.error(scope.first_use[first], f"use of undefined block label '{first}'")
        return region

    def _parse_block_header(self, scope: _RegionScope, region: Region) -> Block:
        label_token = self.advance()
        label = label_token.text
        if label in scope.defined:
            raise self.error(label_token, f"redefinition of block label '{label}'")
        block = scope.blocks_by_label.get(label)
        if block is None:
            block = scope.blocks_by_label[label] = Block()
        scope.defined.add(label)
        region.blocks.append(block)
        if self.parse_optional_punct("("):
            arguments = []
            while True:
                value_id = self.parse_value_id("in block arguments")
                self.parse_punct(":", "after block argument")
                arguments.append(Value(value_id, self.parse_type()))
                if self.parse_optional_punct(")"):
                    break
                self.parse_punct(",", "or ')' after block argument")
            block.arguments = tuple(arguments)
        self.parse_punct(":", f"after block label '{label}'")
        return block

    def _block_reference(self, scope: _RegionScope) -> Block:
        if self.token.kind is not TokenKind.BLOCK:
            raise self.error_expected("a block label (^name)")
        token = self.advance()
        block = scope.blocks_by_label.get(token.text)
        if block is None:
            block = scope.blocks_by_label[token.text] = Block()
        scope.first_use.setdefault(token.text, token)
        return block

    # -- operations -----------------------------------------------------------------------

    def _parse_operation(self, scope: _RegionScope) -> Generator[RegionParse, Region, Op]:
        result_ids: list[ValueId] = []
        if self.token.kind is TokenKind.VALUE:
            while True:
                result_ids.append(self.parse_value_id())
                if not self.parse_optional_punct(","):
                    break
            self.parse_punct("=", "after result list")
        name_token = self.token
        if name_token.kind is TokenKind.STRING:
            op = yield from self._parse_unknown_op(result_ids, scope)
        elif name_token.kind is TokenKind.BARE and name_token.text in _KNOWN_OP_NAMES:
            name = self.advance().text
            arity = _RESULT_ARITY.get(name)
            if arity is not None and len(result_ids) != arity:
                raise self.error(
                    name_token, f"'{name}' defines {_count(arity, 'result')}, got {len(result_ids)}"
                )
            if name in _REGION_OP_PARSERS:
                op = yield from _REGION_OP_PARSERS[name](self, result_ids, scope, name)
            else:
                op = _OP_PARSERS[name](self, result_ids, scope, name)
        elif name_token.kind is TokenKind.BARE:
            hint = (
                ""
                if name_token.text.startswith("niro.")
                else (
                    f' (an op Niro does not model is written in generic form: "{name_token.text}"(...) : (...) -> (...))'
                )
            )
            raise self.error(name_token, f"unknown op '{name_token.text}'{hint}")
        else:
            raise self.error_expected("an operation")
        op.loc = self.parse_optional_loc()
        return op

    def parse_optional_loc(self) -> str | None:
        if self.parse_optional_keyword("loc") is None:
            return None
        self.parse_punct("(", "after 'loc'")
        text = self.parse_string("inside loc(...)")
        self.parse_punct(")", "after the loc string")
        return text

    def _parse_const(self, results, scope, name) -> Const:
        literal = self.parse_literal()
        self.parse_punct(":", "after constant literal")
        return Const(Value(results[0], self.parse_type()), literal)

    def _parse_get_global(self, results, scope, name) -> GetGlobal:
        symbol = self.parse_symbol(f"after '{name}'")
        self.parse_punct(":", "after global name")
        return GetGlobal(Value(results[0], self.parse_type()), symbol)

    def _parse_transpose(self, results, scope, name) -> Transpose:
        operand = self.parse_value_id(f"after '{name}'")
        if not (self.token.kind is TokenKind.PUNCT and self.token.text == "["):
            raise self.error_expected("'[' to begin the permutation")
        permutation = self.parse_attribute()
        operand_types, result_types = self.parse_function_type(1, 1, name)
        return Transpose(
            Value(results[0], result_types[0]), Value(operand, operand_types[0]), permutation
        )

    def _parse_tensor_extract(self, results, scope, name) -> TensorExtract:
        operand = self.parse_value_id(f"after '{name}'")
        self.parse_punct("[", "to begin the indices")
        indices = self._parse_value_ids_until("]")
        operand_types, result_types = self.parse_function_type(1 + len(indices), 1, name)
        return TensorExtract(
            Value(results[0], result_types[0]),
            Value(operand, operand_types[0]),
            tuple(map(Value, indices, operand_types[1:])),
        )

    def _parse_binary(self, results, scope, name) -> Add | Mul | MatMul:
        lhs = self.parse_value_id(f"after '{name}'")
        self.parse_punct(",", "between operands")
        rhs = self.parse_value_id("after ','")
        operand_types, result_types = self.parse_function_type(2, 1, name)
        return _BINARY_KINDS[name](
            Value(results[0], result_types[0]),
            Value(lhs, operand_types[0]),
            Value(rhs, operand_types[1]),
        )

    def _parse_call(self, results, scope, name) -> Call:
        callee = self.parse_symbol(f"after '{name}'")
        self.parse_punct("(", "to begin the call arguments")
        arguments = self._parse_value_ids_until(")")
        operand_types, result_types = self.parse_function_type(len(arguments), len(results), name)
        return Call(
            callee,
            tuple(map(Value, arguments, operand_types)),
            tuple(map(Value, results, result_types)),
        )

    def _parse_branch(self, results, scope, name) -> Branch:
        target, arguments = self._parse_successor(scope)
        return Branch(target, arguments)

    def _parse_cond_branch(self, results, scope, name) -> CondBranch:
        condition = self.parse_value_id(f"after '{name}'")
        self.parse_punct(",", "after the condition")
        true_target, true_arguments = self._parse_successor(scope)
        self.parse_punct(",", "after the first successor")
        false_target, false_arguments = self._parse_successor(scope)
        self.parse_punct(":", "after the successors")
        condition_type = self.parse_type()
        return CondBranch(
            Value(condition, condition_type),
            true_target,
            false_target,
            true_arguments,
            false_arguments,
        )

    def _parse_successor(self, scope: _RegionScope) -> tuple[Block, tuple[Value, ...]]:
        target = self._block_reference(scope)
        if not self.parse_optional_punct("("):
            return target, ()
        return target, self._parse_typed_values(")")

    def _parse_terminator(self, results, scope, name) -> Return | Yield:
        kind = Return if name == "niro.return" else Yield
        if self.token.kind is not TokenKind.VALUE:
            return kind(())
        return kind(self._parse_typed_values(None))

    def _parse_typed_values(self, close: str | None) -> tuple[Value, ...]:
        """`%a, %b : t1, t2` then `close` (if any): the values with their types."""
        first = self.token
        ids = []
        while True:
            ids.append(self.parse_value_id())
            if not self.parse_optional_punct(","):
                break
        self.parse_punct(":", "after value list")
        types = [self.parse_type()]
        while self.parse_optional_punct(","):
            types.append(self.parse_type())
        if len(types) != len(ids):
            raise self.error(first, f"{_count(len(ids), 'value')} but {_count(len(types), 'type')}")
        if close is not None:
            self.parse_punct(close, "after the types")
        return tuple(map(Value, ids, types))

    def _parse_if(
        self, results: list[ValueId], scope: _RegionScope, name: str
    ) -> Generator[RegionParse, Region, If]:
        condition = self.parse_value_id("after 'niro.if'")
        operand_types, result_types = self.parse_function_type(1, len(results), "niro.if")
        then_region = yield self._parse_region("to begin the 'then' region of 'niro.if'")
        self.parse_keyword("else", "after the 'then' region of 'niro.if'")
        else_region = yield self._parse_region("to begin the 'else' region of 'niro.if'")
        return If(
            tuple(map(Value, results, result_types)),
            Value(condition, operand_types[0]),
            then_region,
            else_region,
        )

    def _parse_unknown_op(
        self, results: list[ValueId], scope: _RegionScope
    ) -> Generator[RegionParse, Region, UnknownOp]:
        name = self.parse_string()
        self.parse_punct("(", f'to begin the operands of "{name}"')
        operands = self._parse_value_ids_until(")")
        successors: list[Block] = []
        if self.parse_optional_punct("["):
            while True:
                successors.append(self._block_reference(scope))
                if self.parse_optional_punct("]"):
                    break
                self.parse_punct(",", "or ']' after a successor")
        regions: list[Region] = []
        if self.parse_optional_punct("("):
            while True:
                regions.append((yield self._parse_region(f'to begin a region of "{name}"')))
                if self.parse_optional_punct(")"):
                    break
                self.parse_punct(",", "or ')' after a region")
        attributes = {}
        if self.token.kind is TokenKind.PUNCT and self.token.text == "{":
            attributes = self.parse_attribute_dict()
        operand_types, result_types = self.parse_function_type(len(operands), len(results), name)
        return UnknownOp(
            name=name,
            operands=tuple(map(Value, operands, operand_types)),
            results=tuple(map(Value, results, result_types)),
            attributes=attributes,
            regions=tuple(regions),
            successors=tuple(successors),
        )

    # -- values, symbols, strings ---------------------------------------------------------

    def parse_optional_value_id(self) -> ValueId | None:
        if self.token.kind is not TokenKind.VALUE:
            return None
        match = _VALUE_ID.fullmatch(self.token.text)
        if match is None:
            raise self.error(
                self.token, f"expected a numeric value id like %3, got '{self.token.text}'"
            )
        return ValueId(self._integer(match.group(1), self.advance().start + 1))

    def _integer(self, digits: str, offset: int) -> int:
        try:
            return int(digits)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            raise self.lexer.error(
                offset, f"integer with {len(digits)} digits is too long"
            ) from None

    def parse_value_id(self, context: str = "") -> ValueId:
        value_id = self.parse_optional_value_id()
        if value_id is None:
            raise self.error_expected("a value (%N)", context)
        return value_id

    def _parse_value_ids_until(self, close: str) -> list[ValueId]:
        ids: list[ValueId] = []
        if self.parse_optional_punct(close):
            return ids
        while True:
            ids.append(self.parse_value_id())
            if self.parse_optional_punct(close):
                return ids
            self.parse_punct(",", f"or '{close}' after a value")

    def parse_optional_symbol(self) -> str | None:
        if self.token.kind is not TokenKind.SYMBOL:
            return None
        return self.lexer.string_value(self.advance())

    def parse_symbol(self, context: str = "") -> str:
        symbol = self.parse_optional_symbol()
        if symbol is None:
            raise self.error_expected("a symbol (@name)", context)
        return symbol

    def parse_optional_string(self) -> str | None:
        if self.token.kind is not TokenKind.STRING:
            return None
        return self.lexer.string_value(self.advance())

    def parse_string(self, context: str = "") -> str:
        text = self.parse_optional_string()
        if text is None:
            raise self.error_expected("a string", context)
        return text

    # -- types ----------------------------------------------------------------------------

    def parse_optional_type(self) -> Type | None:
        token = self.token
        if token.kind is TokenKind.TENSOR_TYPE:
            self.advance()
            return self._tensor_type(token)
        if token.kind is TokenKind.BARE and token.text in _SCALAR_SPELLINGS:
            self.advance()
            return _SCALAR_SPELLINGS[token.text]
        return None

    def parse_type(self, context: str = "") -> Type:
        type_ = self.parse_optional_type()
        if type_ is None:
            if self.token.kind is TokenKind.BARE:
                raise self.error(self.token, f"unknown type '{self.token.text}'")
            raise self.error_expected("a type", context)
        return type_

    def _tensor_type(self, token: Token) -> TensorType:
        inner: str = token.value  # type: ignore[assignment]
        offset = token.start + len("tensor<")
        if inner.startswith("*x"):
            return TensorType(self._element_type(inner[2:], offset + 2), None)
        parts = inner.split("x")
        dims: list[int | None] = []
        for part in parts[:-1]:
            if part == "?":
                dims.append(None)
            elif _DIM.fullmatch(part):
                dims.append(self._integer(part, offset))
            else:
                raise self.lexer.error(
                    offset, f"bad dimension '{part}' in tensor type (expected an integer or '?')"
                )
            offset += len(part) + 1
        return TensorType(self._element_type(parts[-1], offset), tuple(dims))

    def _element_type(self, spelling: str, offset: int) -> ScalarType:
        scalar = _SCALAR_SPELLINGS.get(spelling)
        if scalar is None:
            raise self.lexer.error(offset, f"unknown element type '{spelling}' in tensor type")
        return scalar

    def parse_function_type(
        self, operand_count: int, result_count: int, op_name: str
    ) -> tuple[list[Type], list[Type]]:
        """`: (t, ...) -> t` or `: (t, ...) -> (t, ...)`, checked against the op's arity."""
        self.parse_punct(":", f"before the type of '{op_name}'")
        open_token = self.parse_punct("(", f"to begin the operand types of '{op_name}'")
        operand_types = self._parse_types_until(")")
        if len(operand_types) != operand_count:
            raise self.error(
                open_token,
                f"'{op_name}' has {_count(operand_count, 'operand')} but {_count(len(operand_types), 'operand type')}",
            )
        self.parse_punct("->", f"after the operand types of '{op_name}'")
        results_token = self.token
        if self.parse_optional_punct("("):
            result_types = self._parse_types_until(")")
        else:
            result_types = [self.parse_type(f"after '->' of '{op_name}'")]
        if len(result_types) != result_count:
            raise self.error(
                results_token,
                f"'{op_name}' has {_count(result_count, 'result')} but {_count(len(result_types), 'result type')}",
            )
        return operand_types, result_types

    def _parse_types_until(self, close: str) -> list[Type]:
        types: list[Type] = []
        if self.parse_optional_punct(close):
            return types
        while True:
            types.append(self.parse_type())
            if self.parse_optional_punct(close):
                return types
            self.parse_punct(",", f"or '{close}' after a type")

    # -- literals and attributes ----------------------------------------------------------

    def parse_optional_literal(self):
        """A bool, int, float or `dense<"0x...">` buffer; None when no literal is next."""
        token = self.token
        if token.kind is TokenKind.INT:
            self.advance()
            return self._integer(token.text, token.start)
        if token.kind is TokenKind.FLOAT:
            self.advance()
            return _float_from_text(token.text)
        if token.kind is TokenKind.BARE:
            if token.text in ("true", "false"):
                self.advance()
                return token.text == "true"
            if token.text == "dense":
                return self._parse_dense()
        return None

    def parse_literal(self):
        literal = self.parse_optional_literal()
        if literal is None:
            raise self.error_expected('a literal (true, false, a number or dense<"0x...">)')
        return literal

    def _parse_dense(self) -> bytes | bytearray:
        self.parse_keyword("dense")
        self.parse_punct("<", "after 'dense'")
        if self.token.kind is TokenKind.BARE and self.token.text == "elided":
            raise self.error(
                self.token,
                "elided data cannot be parsed back (print the module without elide_data)",
            )
        if self.token.kind is not TokenKind.STRING:
            raise self.error_expected('a hex string "0x..."', "after 'dense<'")
        token = self.advance()
        data = self._decode_hex(token)
        self.parse_punct(">", "after dense data")
        return data

    def _decode_hex(self, token: Token) -> bytes | bytearray:
        """The bytes of `"0x..."`, decoded in chunks from the text (big buffers as bytearray)."""
        text = self.lexer.text
        start = token.start + 1
        end = token.end - 1
        if token.value is not None or not text.startswith(("0x", "0X"), start, end):
            raise self.error(token, 'expected hex data as "0x..." in dense<...>')
        start += 2
        bad = _NOT_HEX.search(text, start, end)
        if bad is not None:
            raise self.lexer.error(bad.start(), f"bad hex digit {bad.group()!r} in dense data")
        digits = end - start
        if digits % 2:
            raise self.error(token, f"dense data has an odd number of hex digits ({digits})")
        if digits <= _HEX_CHUNK:
            return bytes.fromhex(text[start:end])
        data = bytearray(digits // 2)
        for chunk_start in range(start, end, _HEX_CHUNK):
            chunk_end = min(chunk_start + _HEX_CHUNK, end)
            offset = (chunk_start - start) // 2
            data[offset : offset + (chunk_end - chunk_start) // 2] = bytes.fromhex(
                text[chunk_start:chunk_end]
            )
        return data

    def parse_attribute(self, depth: int = 0):
        """A generic attribute: none, a literal, a string, `[...]` (tuple) or `{...}` (dict)."""
        token = self.token
        if depth > MAX_ATTRIBUTE_DEPTH:
            raise self.error(token, f"attribute nested deeper than {MAX_ATTRIBUTE_DEPTH} levels")
        if token.kind is TokenKind.BARE and token.text == "none":
            self.advance()
            return None
        if token.kind is TokenKind.STRING:
            return self.parse_string()
        if token.kind is TokenKind.PUNCT and token.text == "[":
            self.advance()
            items = []
            if self.parse_optional_punct("]"):
                return ()
            while True:
                items.append(self.parse_attribute(depth + 1))
                if self.parse_optional_punct("]"):
                    return tuple(items)
                self.parse_punct(",", "or ']' after a list item")
        if token.kind is TokenKind.PUNCT and token.text == "{":
            return self.parse_attribute_dict(depth + 1)
        literal = self.parse_optional_literal()
        if literal is None:
            raise self.error_expected(
                "an attribute (none, true, false, a number, a string, dense<...>, [...] or {...})"
            )
        return literal

    def parse_attribute_dict(self, depth: int = 0) -> dict:
        self.parse_punct("{", "to begin an attribute dict")
        attributes: dict = {}
        if self.parse_optional_punct("}"):
            return attributes
        while True:
            key_token = self.token
            if key_token.kind is TokenKind.BARE:
                key = self.advance().text
            elif key_token.kind is TokenKind.STRING:
                key = self.parse_string()
            else:
                raise self.error_expected("an attribute name")
            if key in attributes:
                raise self.error(key_token, f"duplicate attribute '{key}'")
            self.parse_punct("=", f"after attribute name '{key}'")
            attributes[key] = self.parse_attribute(depth)
            if self.parse_optional_punct("}"):
                return attributes
            self.parse_punct(",", "or '}' after an attribute")


def _float_from_text(text: str) -> float:
    if text.startswith("nan("):
        return struct.unpack("<d", struct.pack("<Q", int(text[4:-1], 16)))[0]
    if text == "nan":
        return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000))[0]
    return float(text)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _symbol(name: str) -> str:
    return format_symbol(name)


_BINARY_KINDS: dict[str, type[Add] | type[Mul] | type[MatMul]] = {
    "niro.add": Add,
    "niro.mul": Mul,
    "niro.matmul": MatMul,
}

_OP_PARSERS: dict[str, Callable] = {
    "niro.const": Parser._parse_const,
    "niro.get_global": Parser._parse_get_global,
    "niro.transpose": Parser._parse_transpose,
    "niro.tensor_extract": Parser._parse_tensor_extract,
    "niro.add": Parser._parse_binary,
    "niro.mul": Parser._parse_binary,
    "niro.matmul": Parser._parse_binary,
    "niro.call": Parser._parse_call,
    "niro.br": Parser._parse_branch,
    "niro.cond_br": Parser._parse_cond_branch,
    "niro.return": Parser._parse_terminator,
    "niro.yield": Parser._parse_terminator,
}
"""Known op name -> its parser, called after the name with (result ids, label scope, name)."""

_REGION_OP_PARSERS: dict[str, Callable] = {"niro.if": Parser._parse_if}
"""Known ops with regions: generator parsers that yield their regions' parses to the driver."""

_KNOWN_OP_NAMES = frozenset(_OP_PARSERS) | frozenset(_REGION_OP_PARSERS)

_RESULT_ARITY = {
    "niro.const": 1,
    "niro.get_global": 1,
    "niro.transpose": 1,
    "niro.tensor_extract": 1,
    "niro.add": 1,
    "niro.mul": 1,
    "niro.matmul": 1,
    "niro.br": 0,
    "niro.cond_br": 0,
    "niro.return": 0,
    "niro.yield": 0,
}
"""Known ops with a fixed number of results (niro.call and niro.if take any number)."""
