"""The parser: hand-written text, exact error positions and messages, deep nesting, big inputs."""

from __future__ import annotations

import time

import pytest
from niro.ir import (
    Block,
    Branch,
    CondBranch,
    Const,
    Function,
    FunctionType,
    If,
    Module,
    ParseError,
    Region,
    Return,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    ValueId,
    Yield,
    parse_module,
    print_module,
    structurally_equal,
)
from niro.ir.parser import MAX_ATTRIBUTE_DEPTH

F32, I1 = ScalarType.F32, ScalarType.BOOL


def v(index: int, type_=F32) -> Value:
    return Value(ValueId(index), type_)


def test_hand_written_text_with_comments_and_own_labels():
    text = """
    // a loop: ^head branches back to itself until %1 says stop
    niro.func @count(f32 {name = "start"}, i1) -> (f32) {   // trailing comment
    ^entry(%0: f32, %1: i1):
      niro.br ^head(%0 : f32)
    ^exit:
      niro.return %0 : f32
    ^head(%2: f32):
      %3 = niro.add %2, %2 : (f32, f32) -> f32 loc("double")
      niro.cond_br %1, ^head(%3 : f32), ^exit : i1
    }
    """
    module = parse_module(text)
    [function] = module.functions
    entry, exit_block, head = function.body.blocks
    assert function.input_names == ("start", None) and function.output_names is None
    assert entry.arguments == (v(0), v(1, I1))
    assert isinstance(entry.operations[0], Branch) and entry.operations[0].target is head
    cond_branch = head.operations[1]
    assert isinstance(cond_branch, CondBranch)
    assert cond_branch.true_target is head and cond_branch.false_target is exit_block
    assert cond_branch.true_arguments == (v(3),)
    assert head.operations[0].loc == "double"
    # The printer renames labels by position; the structure is the same.
    assert "^bb2(%2: f32):" in print_module(module)


def test_unlabeled_entry_block_and_nested_regions():
    text = """
    niro.func @f(i1) -> () {
    ^bb0(%0: i1):
      niro.if %0 : (i1) -> () {
        "x.op"() ({
          %1 = niro.const 1 : i64
          niro.yield
        }) : () -> ()
        niro.yield
      } else {
        niro.yield
      }
      niro.return
    }
    """
    [function] = parse_module(text).functions
    if_op = function.body.blocks[0].operations[0]
    assert isinstance(if_op, If)
    [then_block] = if_op.then_region.blocks
    unknown = then_block.operations[0]
    assert isinstance(unknown, UnknownOp)
    [inner] = unknown.regions[0].blocks
    assert isinstance(inner.operations[0], Const) and inner.operations[0].literal == 1
    assert isinstance(if_op.else_region.blocks[0].operations[0], Yield)


def test_wrong_byte_count_parses_since_the_verifier_reports_it():
    [global_] = parse_module('niro.global @g : tensor<2xui8> = dense<"0x01">').globals
    assert global_.initializer == b"\x01"
    assert global_.type == TensorType(ScalarType.U8, (2,))


def test_ill_typed_ir_parses_for_the_verifier():
    text = "niro.func @f() -> () {\n  %0 = niro.add %7, %8 : (i1, tensor<*xf32>) -> f64\n}\n"
    [function] = parse_module(text).functions
    add = function.body.blocks[0].operations[0]
    assert (
        add.lhs == v(7, I1)
        and add.rhs == v(8, TensorType(F32, None))
        and add.result == v(0, ScalarType.F64)
    )


_ERRORS = [
    (
        "unknown op",
        "niro.func @f() -> () {\n  %0 = niro.frob : f32\n}\n",
        2,
        8,
        "unknown op 'niro.frob'",
    ),
    (
        "bare unknown op",
        "niro.func @f() -> () {\n  %0 = onnx.Relu %1 : f32\n}\n",
        2,
        8,
        "unknown op 'onnx.Relu' (an op Niro does not model is written in generic form: "
        '"onnx.Relu"(...) : (...) -> (...))',
    ),
    ("bad type", "niro.func @f(f33) -> ()\n", 1, 14, "unknown type 'f33'"),
    (
        "bad element type",
        "niro.global @g : tensor<2x?xf33> = 1\n",
        1,
        29,
        "unknown element type 'f33' in tensor type",
    ),
    (
        "bad dimension",
        "niro.global @g : tensor<2xqx3xf32> = 1\n",
        1,
        27,
        "bad dimension 'q' in tensor type (expected an integer or '?')",
    ),
    (
        "missing ':'",
        "niro.func @f() -> () {\n  niro.return %0 {\n}\n",
        2,
        18,
        "expected ':' after value list, got '{'",
    ),
    (
        "undefined block label",
        "niro.func @f() -> () {\n^bb0:\n  niro.br ^bb7\n}\n",
        3,
        11,
        "use of undefined block label '^bb7'",
    ),
    (
        "duplicate block label",
        "niro.func @f() -> () {\n^bb0:\n  niro.br ^bb1\n^bb1:\n  niro.return\n^bb1:\n  niro.return\n}\n",
        6,
        1,
        "redefinition of block label '^bb1'",
    ),
    (
        "unterminated string",
        'niro.global @g : f32 = 1.0\nniro.func @"abc() -> ()\n',
        2,
        12,
        "unterminated string",
    ),
    (
        "bad hex",
        'niro.global @g : tensor<2xui8> = dense<"0x0G01">\n',
        1,
        44,
        "bad hex digit 'G' in dense data",
    ),
    (
        "odd hex",
        'niro.global @g : tensor<2xui8> = dense<"0x012">\n',
        1,
        40,
        "dense data has an odd number of hex digits (3)",
    ),
    (
        "elided data",
        "niro.global @g : tensor<100xui8> = dense<elided: 100 bytes>\n",
        1,
        42,
        "elided data cannot be parsed back (print the module without elide_data)",
    ),
    (
        "result count",
        "niro.func @f() -> () {\n  %0, %1 = niro.add %2, %3 : (f32, f32) -> f32\n}\n",
        2,
        12,
        "'niro.add' defines 1 result, got 2",
    ),
    (
        "operand type count",
        "niro.func @f() -> () {\n  %0 = niro.add %2, %3 : (f32) -> f32\n}\n",
        2,
        26,
        "'niro.add' has 2 operands but 1 operand type",
    ),
    (
        "unclosed region",
        "niro.func @f() -> () {\n  niro.return\n",
        3,
        1,
        "expected '}' to close the region opened on line 1, got end of input",
    ),
    (
        "declaration with a body",
        "niro.func private @f() -> () {\n}\n",
        1,
        30,
        "'niro.func private' declares @f, which cannot have a body",
    ),
    (
        "top level",
        "niro.fun @f() -> ()\n",
        1,
        1,
        "expected 'niro.global' or 'niro.func', got 'niro.fun'",
    ),
    (
        "bad escape",
        'niro.func @"a\\q"() -> ()\n',
        1,
        14,
        "unknown escape '\\q' in string (known: \\n \\t \\r \\\" \\\\ \\xHH \\u{H...})",
    ),
    (
        "value name",
        "niro.func @f() -> () {\n  niro.return %x : f32\n}\n",
        2,
        15,
        "expected a numeric value id like %3, got '%x'",
    ),
    (
        "value in signature",
        "niro.func @f(%0: f32) -> ()\n",
        1,
        14,
        "expected a type (a signature lists types; the entry block ^bb0(%0: ...) names the values), got '%0'",
    ),
    (
        "missing arrow",
        "niro.func @f(f32) ()\n",
        1,
        19,
        "expected '->' after the argument types, got '('",
    ),
    (
        "duplicate attribute",
        'niro.func @f() -> () {\n  "a"() {x = 1, x = 2} : () -> ()\n}\n',
        2,
        17,
        "duplicate attribute 'x'",
    ),
    ("stray character", "niro.global @g : f32 = 1.0 ;\n", 1, 28, "unexpected character ';'"),
    (
        "loc needs a string",
        "niro.func @f() -> () {\n  niro.return loc(3)\n}\n",
        2,
        19,
        "expected a string inside loc(...), got '3'",
    ),
    (
        "missing literal",
        "niro.global @g : f32 = @x\n",
        1,
        24,
        "expected a literal (true, false, a number or dense<\"0x...\">), got '@x'",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [case[1:] for case in _ERRORS],
    ids=[case[0] for case in _ERRORS],
)
def test_parse_errors_say_where_and_what_was_expected(text, line, column, message):
    with pytest.raises(ParseError) as caught:
        parse_module(text, filename="model.niro")
    error = caught.value
    assert (error.line, error.column, error.message) == (line, column, message)
    assert error.filename == "model.niro"
    assert str(error) == f"model.niro:{line}:{column}: {message}"


def test_rendered_error_shows_the_source_line_and_a_caret():
    with pytest.raises(ParseError) as caught:
        parse_module("niro.func @f() -> () {\n  niro.return %0 {\n}\n", filename="m.niro")
    assert caught.value.render() == (
        "m.niro:2:18: error: expected ':' after value list, got '{'\n"
        "  niro.return %0 {\n"
        "                 ^"
    )


def _nested_ifs(depth: int) -> Module:
    condition = v(0, I1)
    region = Region([Block((), [Yield()])])
    for _ in range(depth):
        region = Region(
            [Block((), [If((), condition, region, Region([Block((), [Yield()])])), Yield()])]
        )
    body = region.blocks[0]
    body.operations[-1] = Return()
    body.arguments = (condition,)
    return Module(functions=[Function("deep", FunctionType((I1,), ()), Region([body]))])


def test_500_nested_ifs_print_parse_and_compare_without_recursion():
    module = _nested_ifs(500)
    text = print_module(module)
    assert text.count("niro.if") == 500
    parsed = parse_module(text)
    assert structurally_equal(module, parsed)
    assert print_module(parsed) == text


def test_attribute_nesting_beyond_the_limit_is_a_parse_error():
    depth = MAX_ATTRIBUTE_DEPTH + 5
    text = 'niro.func @f() -> () {\n  "a"() {x = ' + "[" * depth + "]" * depth + "} : () -> ()\n}\n"
    with pytest.raises(
        ParseError, match=f"attribute nested deeper than {MAX_ATTRIBUTE_DEPTH} levels"
    ):
        parse_module(text)


def _chain_module(count: int) -> str:
    lines = ["niro.func @f(f32) -> (f32) {", "^bb0(%0: f32):"]
    lines += [
        f'  %{i + 1} = niro.add %{i}, %{i} : (f32, f32) -> f32 loc("n{i}")' for i in range(count)
    ]
    lines += [f"  niro.return %{count} : f32", "}"]
    return "\n".join(lines) + "\n"


def _best_time(function, *args) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        function(*args)
        best = min(best, time.process_time() - start)
    return best


def test_parse_time_grows_linearly_with_input_size():
    small, large = _chain_module(3_000), _chain_module(12_000)
    ratio = _best_time(parse_module, large) / _best_time(parse_module, small)
    assert ratio < 8, f"4x the input took {ratio:.1f}x the CPU time"


def test_big_buffers_decode_in_chunks_exactly():
    data = bytes(range(256)) * 8192  # 2 MiB, more than one decoding chunk
    text = f'niro.global @w : tensor<{len(data)}xui8> = dense<"0x{data.hex()}">\n'
    [global_] = parse_module(text).globals
    assert bytes(global_.initializer) == data


def test_bad_hex_far_into_a_big_buffer_is_found_where_it_is():
    text = 'niro.global @w : tensor<4xui8> = dense<"0x' + "00" * 5000 + "zz" + '">\n'
    with pytest.raises(ParseError) as caught:
        parse_module(text)
    assert (caught.value.line, caught.value.column) == (1, 43 + 10000)
    assert caught.value.message == "bad hex digit 'z' in dense data"
    assert caught.value.source_line == ""  # too long a line to show with a caret


def test_negative_zero_and_nan_payloads_parse_bit_exactly():
    text = "niro.global @a : f64 = -0.0\nniro.global @b : f64 = nan(0xFFF8000000000001)\n"
    first, second = parse_module(text).globals
    assert str(first.initializer) == "-0.0"
    assert print_module(parse_module(text)) == text


def test_integers_floats_and_bools_keep_their_kind():
    text = "niro.global @a : f32 = 2\nniro.global @b : f32 = 2.0\nniro.global @c : i1 = true\n"
    values = [global_.initializer for global_ in parse_module(text).globals]
    assert [type(value) for value in values] == [int, float, bool]


def test_byte_order_mark_and_crlf_line_endings_are_accepted():
    module = parse_module("\ufeffniro.global @a : f32 = 1.0\r\nniro.global @b : i1 = true\r\n")
    assert [global_.name for global_ in module.globals] == ["a", "b"]
    with pytest.raises(ParseError) as caught:
        parse_module("niro.global @a : f32 = 1.0\r\nniro.global @b : i1 = ;\r\n")
    assert (caught.value.line, caught.value.column) == (2, 23)


def test_absurdly_long_integers_are_a_parse_error_not_a_crash():
    with pytest.raises(ParseError, match="integer with 5000 digits is too long") as caught:
        parse_module("niro.global @g : i64 = " + "9" * 5000)
    assert (caught.value.line, caught.value.column) == (1, 24)
