"""format_tree: what the pretty tree shows, rendered with rich to plain text."""

from __future__ import annotations

import io

import pytest
from niro.ir import (
    Add,
    Block,
    Branch,
    CondBranch,
    Const,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    If,
    Module,
    NirocError,
    Region,
    Return,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    ValueId,
    Yield,
    format_tree,
)
from rich.console import Console

F32, I1 = ScalarType.F32, ScalarType.BOOL
T22 = TensorType(F32, (2, 2))


def v(index: int, type_=F32) -> Value:
    return Value(ValueId(index), type_)


def render(node, **options) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None, legacy_windows=False)
    console.print(format_tree(node, **options))
    return console.file.getvalue()


def sample_module() -> Module:
    x, cond, weight, total, merged = v(0, T22), v(1, I1), v(2, T22), v(3, T22), v(4, T22)
    join = Block((merged,), [Return((merged,))])
    other = Block((), [Branch(join, (x,))])
    if_op = If(
        (v(5),),
        cond,
        Region([Block((), [Const(v(6), 2.5), Yield((v(6),))])]),
        Region([Block((), [Yield((v(6),))])]),
    )
    unknown = UnknownOp(
        "onnx.Split",
        (x,),
        (v(7, TensorType(F32, None)),),
        {"axis": 0, "split": (1, 1)},
        loc="split_1",
    )
    entry = Block(
        (x, cond),
        [
            GetGlobal(weight, "weight"),
            Add(total, x, weight, loc="add_1"),
            if_op,
            unknown,
            CondBranch(cond, join, other, (total,), ()),
        ],
    )
    main = Function(
        "main",
        FunctionType((T22, I1), (T22,)),
        Region([entry, join, other]),
        input_names=("x", None),
        output_names=("y",),
    )
    helper = Function(
        "helper", FunctionType((), ()), Region([Block((), [GetGlobal(v(0), "scale"), Return()])])
    )
    return Module(
        globals=[Global("weight", T22, bytes(16)), Global("scale", F32, 2.0)],
        functions=[main, helper, Function("print_f32", FunctionType((F32,), ()))],
    )


def test_module_tree_shows_types_ops_symbols_attributes_and_locs():
    assert render(sample_module()) == (
        "Module (2 globals, 3 functions)\n"
        "├── Global @weight : tensor<2x2xf32> = <16 bytes>\n"
        "├── Global @scale : f32 = 2.0\n"
        "├── Function @main(x: tensor<2x2xf32>, i1) -> (y: tensor<2x2xf32>)\n"
        "│   ├── ^bb0(%0: tensor<2x2xf32>, %1: i1)\n"
        "│   │   ├── %2: tensor<2x2xf32> = niro.get_global @weight\n"
        '│   │   ├── %3: tensor<2x2xf32> = niro.add (%0: tensor<2x2xf32>, %2: tensor<2x2xf32>)  loc("add_1")\n'
        "│   │   ├── %5: f32 = niro.if (%1: i1)\n"
        "│   │   │   ├── then\n"
        "│   │   │   │   └── ^bb0\n"
        "│   │   │   │       ├── %6: f32 = niro.const 2.5\n"
        "│   │   │   │       └── niro.yield (%6: f32)\n"
        "│   │   │   └── else\n"
        "│   │   │       └── ^bb0\n"
        "│   │   │           └── niro.yield (%6: f32)\n"
        '│   │   ├── %7: tensor<*xf32> = onnx.Split (%0: tensor<2x2xf32>)  loc("split_1")\n'
        "│   │   │   ├── axis = 0\n"
        "│   │   │   └── split = [1, 1]\n"
        "│   │   └── niro.cond_br (%1: i1) → ^bb1(%3: tensor<2x2xf32>), ^bb2\n"
        "│   ├── ^bb1(%4: tensor<2x2xf32>)\n"
        "│   │   └── niro.return (%4: tensor<2x2xf32>)\n"
        "│   └── ^bb2\n"
        "│       └── niro.br → ^bb1(%0: tensor<2x2xf32>)\n"
        "├── Function @helper() -> ()\n"
        "│   └── ^bb0\n"
        "│       ├── %0: f32 = niro.get_global @scale\n"
        "│       └── niro.return\n"
        "└── Function @print_f32(f32) -> () declaration\n"
    )


def test_depth_cuts_the_tree_and_says_what_is_hidden():
    text = render(sample_module(), depth=2)
    assert "│   ├── ^bb0(%0: tensor<2x2xf32>, %1: i1)\n│   │   └── … 5 ops\n" in text
    assert "niro.add" not in text
    assert (
        render(sample_module(), depth=0)
        == "Module (2 globals, 3 functions)\n└── … 2 globals, 3 functions\n"
    )


def test_function_filter_keeps_the_named_functions_and_the_globals_they_read():
    text = render(sample_module(), functions=["helper"])
    assert text.splitlines()[:3] == [
        "Module (2 globals, 3 functions)",
        "├── Global @scale : f32 = 2.0",
        "└── Function @helper() -> ()",
    ]
    assert "@main" not in text and "@weight" not in text


def test_function_filter_names_a_missing_function():
    with pytest.raises(
        NirocError,
        match=r"no function @nope in the module \(functions: @main, @helper, @print_f32\)",
    ):
        format_tree(sample_module(), functions=["nope"])


def test_data_is_shown_only_when_asked():
    module = Module(globals=[Global("w", TensorType(ScalarType.U8, (2,)), b"\x01\xff")])
    assert "= <2 bytes>" in render(module)
    assert '= dense<"0x01FF">' in render(module, elide_data=False)


def test_types_and_single_nodes_render():
    assert render(TensorType(F32, (None, 4))) == (
        "TensorType tensor<?x4xf32>\n├── element_type: f32\n└── shape: [?, 4]\n"
    )
    assert render(TensorType(F32, None)).endswith("└── shape: unranked\n")
    assert render(ScalarType.BF16) == "ScalarType bf16\n"
    assert render(v(3, T22)) == "Value %3: tensor<2x2xf32>\n"
    assert render(Global("g", I1, True)) == "Global @g : i1 = true\n"
    assert render(Add(v(2), v(0), v(1))) == "%2: f32 = niro.add (%0: f32, %1: f32)\n"


def test_odd_names_are_quoted_and_empty_regions_marked():
    op = UnknownOp('we"ird', regions=(Region(),), loc="a\nb")
    assert render(op) == '"we\\"ird" ()  loc("a\\nb")\n└── region #0 (empty)\n'


def _nest(levels: int) -> Region:
    region = Region([Block((), [Yield()])])
    for _ in range(levels):
        region = Region(
            [Block((), [If((), v(0, I1), region, Region([Block((), [Yield()])])), Yield()])]
        )
    return region


def test_deep_nesting_is_cut_by_depth():
    text = render(_nest(300), depth=20)
    assert text.count("niro.if") == 7  # one If every 3 levels: block, op, then-region
    assert text.count("… ") == 1 and "└── … 2 regions\n" in text


def test_deep_nesting_builds_and_renders_whole():
    console = Console(file=io.StringIO(), width=5000, color_system=None)
    console.print(format_tree(_nest(120)))
    assert console.file.getvalue().count("niro.if") == 120
