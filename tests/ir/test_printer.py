"""The printer: exact text of every construct, data elision, streaming, determinism."""

from __future__ import annotations

import io
import math
import struct

import pytest
from niro.ir import (
    Add,
    Block,
    Branch,
    Call,
    CondBranch,
    Const,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    If,
    MatMul,
    Module,
    Mul,
    Region,
    Return,
    ScalarType,
    TensorExtract,
    TensorType,
    Transpose,
    UnknownOp,
    Value,
    ValueId,
    Yield,
    print_module,
    write_module,
)
from niro.ir.printer import format_attribute, format_float, format_symbol

F32, I1, I64 = ScalarType.F32, ScalarType.BOOL, ScalarType.I64
T22 = TensorType(F32, (2, 2))


def v(index: int, type_=F32) -> Value:
    return Value(ValueId(index), type_)


def single(ops: list, arguments: tuple = (), outputs: tuple = ()) -> Module:
    inputs = tuple(argument.type for argument in arguments)
    body = Region([Block(arguments, ops)])
    return Module(functions=[Function("f", FunctionType(inputs, outputs), body)])


def body_text(module: Module) -> list[str]:
    """The printed lines between the function header and its closing brace."""
    return print_module(module).splitlines()[1:-1]


def test_sketch_module_prints_exactly():
    x, cond, weight, total, merged = v(0, T22), v(1, I1), v(2, T22), v(3, T22), v(4, T22)
    join = Block((merged,), [Return((merged,))])
    other = Block((), [Branch(join, (x,))])
    entry = Block(
        (x, cond),
        [
            GetGlobal(weight, "weight"),
            Add(total, x, weight, loc="add_1"),
            CondBranch(cond, join, other, (total,), ()),
        ],
    )
    module = Module(
        globals=[
            Global("weight", T22, struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)),
            Global("scale", F32, 2.0),
        ],
        functions=[
            Function(
                "main",
                FunctionType((T22, I1), (T22,)),
                Region([entry, join, other]),
                input_names=("x", None),
                output_names=("y",),
            ),
            Function("print_f32", FunctionType((F32,), ())),
        ],
    )
    assert print_module(module) == (
        'niro.global @weight : tensor<2x2xf32> = dense<"0x0000803F000000400000404000008040">\n'
        "niro.global @scale : f32 = 2.0\n"
        "\n"
        'niro.func @main(tensor<2x2xf32> {name = "x"}, i1) -> (tensor<2x2xf32> {name = "y"}) {\n'
        "^bb0(%0: tensor<2x2xf32>, %1: i1):\n"
        "  %2 = niro.get_global @weight : tensor<2x2xf32>\n"
        '  %3 = niro.add %0, %2 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("add_1")\n'
        "  niro.cond_br %1, ^bb1(%3 : tensor<2x2xf32>), ^bb2 : i1\n"
        "^bb1(%4: tensor<2x2xf32>):\n"
        "  niro.return %4 : tensor<2x2xf32>\n"
        "^bb2:\n"
        "  niro.br ^bb1(%0 : tensor<2x2xf32>)\n"
        "}\n"
        "\n"
        "niro.func private @print_f32(f32) -> ()\n"
    )


def test_every_known_op_prints_in_its_form():
    t23, t32 = TensorType(F32, (2, 3)), TensorType(F32, (3, 2))
    ops = [
        Const(v(0), 1.5),
        Const(v(1, I1), True),
        Const(v(2, I64), -7),
        Mul(v(3), v(0), v(0)),
        Const(v(4, t23), bytes(24)),
        Transpose(v(5, t32), v(4, t23), (1, 0)),
        MatMul(v(6, TensorType(F32, (2, 2))), v(4, t23), v(5, t32)),
        TensorExtract(v(7), v(4, t23), (v(2, I64), v(2, I64))),
        Call("g", (v(0), v(1, I1)), (v(8), v(9, I1))),
        Call("h"),
        Return((v(7), v(8))),
    ]
    assert body_text(single(ops, outputs=(F32, F32))) == [
        "  %0 = niro.const 1.5 : f32",
        "  %1 = niro.const true : i1",
        "  %2 = niro.const -7 : i64",
        "  %3 = niro.mul %0, %0 : (f32, f32) -> f32",
        '  %4 = niro.const dense<"0x' + "00" * 24 + '"> : tensor<2x3xf32>',
        "  %5 = niro.transpose %4 [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>",
        "  %6 = niro.matmul %4, %5 : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>",
        "  %7 = niro.tensor_extract %4[%2, %2] : (tensor<2x3xf32>, i64, i64) -> f32",
        "  %8, %9 = niro.call @g(%0, %1) : (f32, i1) -> (f32, i1)",
        "  niro.call @h() : () -> ()",
        "  niro.return %7, %8 : f32, f32",
    ]


def test_single_block_region_omits_its_entry_label_and_if_prints_inline():
    then_region = Region([Block((), [Const(v(2), 1.0), Yield((v(2),))])])
    else_region = Region(
        [
            Block(
                (),
                [Yield((v(0),))],
            )
        ]
    )
    op = If((v(3),), v(1, I1), then_region, else_region, loc="if_1")
    assert body_text(single([op, Return((v(3),))], (v(0), v(1, I1)), (F32,))) == [
        "^bb0(%0: f32, %1: i1):",
        "  %3 = niro.if %1 : (i1) -> f32 {",
        "    %2 = niro.const 1.0 : f32",
        "    niro.yield %2 : f32",
        "  } else {",
        "    niro.yield %0 : f32",
        '  } loc("if_1")',
        "  niro.return %3 : f32",
    ]


def test_unknown_op_generic_form_carries_everything():
    exit_block = Block((), [Return()])
    region = Region([Block((v(9),), [Yield((v(9),))])])
    op = UnknownOp(
        "onnx.Split",
        (v(0), v(1, I1)),
        (v(5), v(6, TensorType(F32, None))),
        {"axis": 0, "b": None, "c": (True, 2.5, "s", b"\x01\x02", {"k": ()}), "with space": {}},
        (Region(), region),
        (exit_block,),
        loc="split",
    )
    module = Module(
        functions=[
            Function(
                "f", FunctionType((F32, I1)), Region([Block((v(0), v(1, I1)), [op]), exit_block])
            )
        ]
    )
    assert body_text(module) == [
        "^bb0(%0: f32, %1: i1):",
        '  %5, %6 = "onnx.Split"(%0, %1) [^bb1] ({',
        "  }, {",
        "  ^bb0(%9: f32):",
        "    niro.yield %9 : f32",
        '  }) {axis = 0, b = none, c = [true, 2.5, "s", dense<"0x0102">, {k = []}], "with space" = {}}'
        ' : (f32, i1) -> (f32, tensor<*xf32>) loc("split")',
        "^bb1:",
        "  niro.return",
    ]


def test_zero_result_unknown_op_and_unlabeled_entry():
    assert body_text(single([UnknownOp("x.y"), Return()])) == [
        '  "x.y"() : () -> ()',
        "  niro.return",
    ]


@pytest.mark.parametrize(
    ("type_", "text"),
    [
        (ScalarType.U8, "ui8"),
        (ScalarType.BF16, "bf16"),
        (ScalarType.F8E4M3FN, "f8E4M3FN"),
        (ScalarType.F8E8M0FNU, "f8E8M0FNU"),
        (TensorType(ScalarType.I4, (3, 5)), "tensor<3x5xi4>"),
        (TensorType(ScalarType.U2, (7,)), "tensor<7xui2>"),
        (TensorType(ScalarType.F4E2M1FN, (2,)), "tensor<2xf4E2M1FN>"),
        (TensorType(F32, None), "tensor<*xf32>"),
        (TensorType(F32, ()), "tensor<f32>"),
        (TensorType(F32, (None, 4)), "tensor<?x4xf32>"),
        (TensorType(ScalarType.I8, (0, 3)), "tensor<0x3xi8>"),
    ],
)
def test_types_print_mlir_style(type_, text):
    module = Module(functions=[Function("f", FunctionType((type_,), ()))])
    assert print_module(module) == f"niro.func private @f({text}) -> ()\n"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.0, "2.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (1e16, "1e+16"),
        (5e-324, "5e-324"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (math.nan, "nan"),
        (struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0], "nan(0xFFF8000000000000)"),
        (struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0], "nan(0x7FF0000000000001)"),
    ],
)
def test_floats_print_so_they_read_back_bit_exactly(value, text):
    assert format_float(value) == text


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("main", "@main"),
        ("conv.weight_1$", "@conv.weight_1$"),
        ("conv 1/weight", '@"conv 1/weight"'),
        ("", '@""'),
        ("1abc", '@"1abc"'),
        ('say "hi"\\', '@"say \\"hi\\"\\\\"'),
        ("a\nb\tc\r\x00\x7f", '@"a\\nb\\tc\\r\\x00\\x7f"'),
        ("ünïcode ✓", '@"ünïcode ✓"'),
        ("\u2028\ud800", '@"\\u{2028}\\u{d800}"'),
    ],
)
def test_symbols_quote_and_escape_odd_names(name, text):
    assert format_symbol(name) == text


def test_attribute_dict_keys_print_sorted_so_text_is_deterministic():
    first = format_attribute({"b": 1, "a": {"z": 2, "y": 3}})
    second = format_attribute({"a": {"y": 3, "z": 2}, "b": 1})
    assert first == second == "{a = {y = 3, z = 2}, b = 1}"
    assert format_attribute({"inf": 1, "nan": 2, "true": 3}) == '{"inf" = 1, "nan" = 2, true = 3}'


def test_function_names_that_cannot_sit_next_to_types_go_to_attributes():
    def header(inputs, input_names, outputs=(), output_names=None) -> str:
        function = Function(
            "f", FunctionType(inputs, outputs), input_names=input_names, output_names=output_names
        )
        return print_module(Module(functions=[function])).rstrip("\n")

    assert header((F32, I1), ("x", None)) == 'niro.func private @f(f32 {name = "x"}, i1) -> ()'
    assert (
        header((F32,), (None,))
        == "niro.func private @f(f32) -> () attributes {input_names = [none]}"
    )
    assert header((), ()) == "niro.func private @f() -> () attributes {input_names = []}"
    assert header((F32,), ("a", "b"), (F32,), ()) == (
        'niro.func private @f(f32) -> (f32) attributes {input_names = ["a", "b"], output_names = []}'
    )


def test_empty_function_body_and_empty_block_differ():
    empty = Module(functions=[Function("f", FunctionType(), Region())])
    one_empty_block = Module(functions=[Function("f", FunctionType(), Region([Block()]))])
    assert print_module(empty) == "niro.func @f() -> () {\n}\n"
    assert print_module(one_empty_block) == "niro.func @f() -> () {\n^bb0:\n}\n"


def test_elide_data_hides_big_buffers_only():
    big = Global("big", TensorType(ScalarType.U8, (65,)), bytes(65))
    small = Global("small", TensorType(ScalarType.U8, (64,)), bytes(64))
    text = print_module(Module(globals=[big, small]), elide_data=True)
    assert text == (
        "niro.global @big : tensor<65xui8> = dense<elided: 65 bytes>\n"
        f'niro.global @small : tensor<64xui8> = dense<"0x{"00" * 64}">\n'
    )


class _RecordingStream(io.StringIO):
    def __init__(self):
        super().__init__()
        self.largest_write = 0

    def write(self, text: str) -> int:
        self.largest_write = max(self.largest_write, len(text))
        return super().write(text)


def test_write_module_streams_big_buffers_in_chunks():
    data = bytes(range(256)) * 4096  # 1 MiB
    for buffer in (data, bytearray(data), memoryview(data)):
        stream = _RecordingStream()
        write_module(
            Module(globals=[Global("w", TensorType(ScalarType.U8, (len(data),)), buffer)]), stream
        )
        assert stream.largest_write <= 2 * 65536
        text = stream.getvalue()
        assert text.startswith('niro.global @w : tensor<1048576xui8> = dense<"0x000102')
        assert len(text) == len('niro.global @w : tensor<1048576xui8> = dense<"0x">\n') + 2 * len(
            data
        )


def test_printing_is_deterministic():
    module = single([UnknownOp("a", attributes={"z": 1, "y": 2}), Return()])
    assert print_module(module) == print_module(module)


def test_branch_to_a_block_of_another_region_cannot_print():
    stray = Block((), [Return()])
    module = single([Branch(stray)])
    with pytest.raises(
        ValueError, match="cannot print 'Branch': its successor is not a block of its own region"
    ):
        print_module(module)


def test_non_literal_initializer_is_a_clear_type_error():
    module = Module(globals=[Global("g", F32, "two")])
    with pytest.raises(TypeError, match=r"not a Niro literal \(bool, int, float, buffer\): str"):
        print_module(module)
