"""Tokens of Niro assembly, produced lazily from the source text.

The lexer turns text into tokens one at a time (the parser keeps one token of lookahead), so a
multi-gigabyte module is scanned once, left to right, in linear time; nothing splits the text
into lines up front. Line and column are computed only when an error is reported. It knows the
spelling of tokens, not the grammar: `tensor<2x?xf32>` is one TENSOR_TYPE token whose inside the
parser reads, and strings are unescaped here (the printer's `quote_string` is the inverse).
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

from .errors import ParseError

__all__ = [
    "TokenKind",
    "Token",
    "Lexer",
    "BARE_IDENTIFIER",
    "quote_string",
    "make_parse_error",
]


class TokenKind(enum.Enum):
    BARE = "identifier"  # niro.add, f32, true, dense, loc, ...
    VALUE = "value"  # %3
    BLOCK = "block label"  # ^bb1
    SYMBOL = "symbol"  # @main, @"conv 1/weight"
    STRING = "string"  # "text" (value holds the unescaped text)
    INT = "integer"
    FLOAT = "float"  # 2.5, -0.0, inf, -inf, nan, nan(0x7FF8000000000001)
    TENSOR_TYPE = "tensor type"  # tensor<...> (value holds the text between < and >)
    PUNCT = "punctuation"  # ( ) { } [ ] < > , : = ->
    EOF = "end of input"


class Token(NamedTuple):
    """One token: its kind, its source text, where it starts and ends, and its decoded value."""

    kind: TokenKind
    text: str
    start: int
    end: int
    value: object = None

    def describe(self) -> str:
        """How an error message names this token: `'{'`, `end of input`."""
        if self.kind is TokenKind.EOF:
            return "end of input"
        text = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        return f"'{text}'"


BARE_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
"""Names that print without quotes (symbols, attribute keys). Any other name is quoted."""

_NAME_CHARACTER = "[A-Za-z0-9_$.]"
_TOKEN = re.compile(
    rf"""
    (?:[ \t\r\n]+|//[^\n]*)*                       # whitespace and comments
    (?:
        (?P<punct>->|[(){{}}\[\]<>,:=])
      | (?P<value>%[A-Za-z0-9_$.\-]+)
      | (?P<block>\^[A-Za-z0-9_$.\-]+)
      | (?P<special>(?:-?inf|nan(?:\(0x[0-9A-Fa-f]{{1,16}}\))?)(?!{_NAME_CHARACTER}))
      | (?P<float>-?[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)(?!{_NAME_CHARACTER}))
      | (?P<int>-?[0-9]+(?!{_NAME_CHARACTER}))
      | (?P<tensor>tensor<)
      | (?P<bare>[A-Za-z_]{_NAME_CHARACTER}*)
      | (?P<string>")
      | (?P<symbol>@)
    )?""",
    re.VERBOSE,
)
"""One token, after any whitespace and comments; which group matched names its kind."""
_SIMPLE_KINDS = {
    "punct": TokenKind.PUNCT,
    "value": TokenKind.VALUE,
    "block": TokenKind.BLOCK,
    "special": TokenKind.FLOAT,
    "float": TokenKind.FLOAT,
    "int": TokenKind.INT,
    "bare": TokenKind.BARE,
}
_NUMBER_LIKE = re.compile(r"-?[0-9A-Za-z_$.+\-]*")
_STRING_BODY = re.compile(r'[^"\\\n]*(?:\\[^\n][^"\\\n]*)*"')
_ESCAPE = re.compile(r"\\(?:u\{([0-9A-Fa-f]{1,6})\}|x([0-9A-Fa-f]{2})|(.))")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
_PLAIN_STRING = re.compile(r"[\x20-\x21\x23-\x5b\x5d-\x7e]*")
_NEEDS_ESCAPE = re.compile(r'["\\]|[^\x20-\x7e]')


def quote_string(text: str) -> str:
    """`text` as a double-quoted literal the lexer reads back exactly.

    Printable characters stay as they are (any unicode); quotes, backslashes, control and other
    non-printable characters (lone surrogates included) become escapes.
    """
    if _PLAIN_STRING.fullmatch(text):
        return f'"{text}"'
    return '"' + _NEEDS_ESCAPE.sub(_escape_character, text) + '"'


def _escape_character(match: re.Match) -> str:
    character = match.group()
    if character in ('"', "\\"):
        return "\\" + character
    if character == "\n":
        return "\\n"
    if character == "\t":
        return "\\t"
    if character == "\r":
        return "\\r"
    if character.isprintable():
        return character
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{{{code:x}}}"


def make_parse_error(text: str, offset: int, message: str, filename: str) -> ParseError:
    """A ParseError at `offset` in `text`, with 1-based line/column and the source line."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    if line_end < 0:
        line_end = len(text)
    column = offset - line_start + 1
    # NOTE: a dense<"0x..."> line can be gigabytes long; a caret under column 2,000,000 helps
    # nobody, so very long lines are cut and lose their caret.
    source_line = text[line_start : min(line_end, line_start + 400)]
    if line_end - line_start > 400:
        source_line = source_line + "..." if column <= 400 else ""
    return ParseError(message, line=line, column=column, source_line=source_line, filename=filename)


class Lexer:
    """Reads tokens from `text` starting at offset 0; `next_token()` returns EOF forever at the end."""

    def __init__(self, text: str, filename: str = "<string>"):
        self.text = text
        self.filename = filename
        self.position = 1 if text.startswith("\ufeff") else 0  # a UTF-8 byte order mark

    def error(self, offset: int, message: str) -> ParseError:
        return make_parse_error(self.text, offset, message, self.filename)

    def next_token(self) -> Token:
        text = self.text
        match = _TOKEN.match(text, self.position)
        assert match is not None  # the pattern can match the empty string
        kind_name = match.lastgroup
        if kind_name is None:
            start = match.end()
            if start >= len(text):
                self.position = start
                return Token(TokenKind.EOF, "", start, start)
            raise self.error(start, self._unexpected(start))
        start, end = match.span(kind_name)
        kind = _SIMPLE_KINDS.get(kind_name)
        if kind is not None:
            token = Token(kind, match.group(kind_name), start, end)
        elif kind_name == "string":
            token = self._lex_string(start, TokenKind.STRING, start)
        elif kind_name == "symbol":
            token = self._lex_symbol(start)
        else:
            token = self._lex_tensor_type(start, end)
        self.position = token.end
        return token

    def _unexpected(self, start: int) -> str:
        character = self.text[start]
        if character in "%^":
            return f"expected a name after '{character}'"
        if character.isdigit() or character == "-":
            number = _NUMBER_LIKE.match(self.text, start)
            return f"malformed number '{number.group() if number else character}'"
        return f"unexpected character {character!r}"

    def _lex_symbol(self, start: int) -> Token:
        text = self.text
        if text.startswith('"', start + 1):
            token = self._lex_string(start + 1, TokenKind.SYMBOL, start)
            return token
        match = BARE_IDENTIFIER.match(text, start + 1)
        if match is None:
            raise self.error(start, "expected a symbol name after '@'")
        return Token(TokenKind.SYMBOL, text[start : match.end()], start, match.end(), match.group())

    def _lex_string(self, quote: int, kind: TokenKind, start: int) -> Token:
        text = self.text
        match = _STRING_BODY.match(text, quote + 1)
        if match is None:
            raise self.error(quote, "unterminated string")
        end = match.end()
        # NOTE: a dense<"0x..."> string can hold gigabytes; it is not copied here. Only a string
        # with escapes gets its value now (to report a bad escape where it is); the parser
        # reads any other string's value from the text when it needs it (`string_value`).
        body = None
        if text.find("\\", quote + 1, end - 1) >= 0:
            body = self._unescape(text[quote + 1 : end - 1], quote + 1)
        shown = text[start:end] if end - start <= 80 else text[start : start + 40] + '..."'
        return Token(kind, shown, start, end, body)

    def string_value(self, token: Token) -> str:
        """The unescaped text of a STRING token or of a quoted SYMBOL token."""
        if isinstance(token.value, str):
            return token.value
        return self.text[self.string_body_start(token) : token.end - 1]

    def string_body_start(self, token: Token) -> int:
        """Offset of the first character after the opening quote."""
        return token.start + (2 if token.kind is TokenKind.SYMBOL else 1)

    def _unescape(self, body: str, body_start: int) -> str:
        def replace(match: re.Match) -> str:
            unicode_hex, byte_hex, simple = match.groups()
            if unicode_hex is not None:
                code = int(unicode_hex, 16)
                if code > 0x10FFFF:
                    raise self.error(
                        body_start + match.start(), f"escape '{match.group()}' is beyond U+10FFFF"
                    )
                return chr(code)
            if byte_hex is not None:
                return chr(int(byte_hex, 16))
            if simple in _SIMPLE_ESCAPES:
                return _SIMPLE_ESCAPES[simple]
            raise self.error(
                body_start + match.start(),
                f"unknown escape '\\{simple}' in string (known: \\n \\t \\r \\\" \\\\ \\xHH \\u{{H...}})",
            )

        return _ESCAPE.sub(replace, body)

    def _lex_tensor_type(self, start: int, inner_start: int) -> Token:
        """`tensor<...>` as one token; `inner_start` is just after the `<`."""
        text = self.text
        close = inner_start
        limit = len(text)
        while close < limit and text[close] not in ">\n":
            close += 1
        if close >= limit or text[close] != ">":
            raise self.error(start, "expected '>' to close 'tensor<'")
        return Token(
            TokenKind.TENSOR_TYPE,
            text[start : close + 1],
            start,
            close + 1,
            text[inner_start:close],
        )
