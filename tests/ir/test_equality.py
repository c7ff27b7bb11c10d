"""structurally_equal: equal content compares equal, and each field kind can make it differ."""

from __future__ import annotations

import math
import mmap
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
    structurally_equal,
)

F32, I1, I64 = ScalarType.F32, ScalarType.BOOL, ScalarType.I64
T2 = TensorType(F32, (2,))


def v(index: int, type_=F32) -> Value:
    return Value(ValueId(index), type_)


def build(**changes) -> Module:
    """A module touching every kind of node; `changes` alters one field of one node."""
    option = changes.get
    join = Block((v(20),), [Return((v(20),))])
    loop = Block((), [Branch(join, (v(0),))])
    then_region = Region([Block((), [Yield((v(0),))])])
    else_region = Region([Block((), [Yield((option("yield_value", v(0)),))])])
    unknown = UnknownOp(
        option("unknown_name", "onnx.Thing"),
        (v(0),),
        (v(9, option("unknown_result_type", T2)),),
        option(
            "attributes",
            {"axis": 1, "alpha": 0.5, "data": b"\x00\x01", "nested": (None, {"k": "v"})},
        ),
        option("regions", (Region(),)),
        (),
        loc=option("unknown_loc", "node/thing"),
    )
    entry_ops = [
        Const(v(2), option("literal", 1.5)),
        Const(v(3, T2), option("buffer", b"\x00" * 8)),
        GetGlobal(v(4, T2), option("global_ref", "w")),
        Add(v(5), v(0), option("add_rhs", v(2)), loc=option("add_loc", "add_1")),
        Mul(v(6), v(0), v(2)),
        MatMul(
            v(7, TensorType(F32, (1, 1))),
            v(8, TensorType(F32, (1, 1))),
            v(8, TensorType(F32, (1, 1))),
        ),
        Transpose(v(10, T2), v(3, T2), option("permutation", (0,))),
        TensorExtract(v(11), v(3, T2), (v(12, I64),)),
        Call(option("callee", "ext"), (v(0),), ()),
        If((v(13),), v(1, I1), then_region, else_region),
        unknown,
        CondBranch(v(1, I1), loop if option("true_target") == "loop" else join, loop, (v(0),), ()),
    ]
    if option("extra_op"):
        entry_ops.insert(0, Const(v(30), 0.0))
    entry = Block((v(0), v(1, I1)), entry_ops)
    blocks = [entry, join, loop] if not option("swap_blocks") else [entry, loop, join]
    main = Function(
        option("function_name", "main"),
        FunctionType((F32, I1), (F32,)),
        Region(blocks),
        input_names=option("input_names", ("x", None)),
        output_names=("y",),
    )
    return Module(
        globals=[
            Global("w", T2, option("initializer", b"\x01" * 8)),
            Global("s", F32, option("scalar", 2.0)),
        ],
        functions=[main, Function("ext", FunctionType((F32,), ()))],
    )


def test_two_builds_are_equal_though_every_object_differs():
    assert structurally_equal(build(), build())


@pytest.mark.parametrize(
    "changes",
    [
        {"function_name": "other"},
        {"input_names": ("x", "z")},
        {"input_names": None},
        {"initializer": b"\x01" * 7 + b"\x02"},
        {"scalar": 2},  # int vs float
        {"scalar": 2.0000000000000004},
        {"literal": -1.5},
        {"buffer": b"\x00" * 7 + b"\x01"},
        {"global_ref": "s"},
        {"add_rhs": v(0)},
        {"add_rhs": v(2, ScalarType.F64)},
        {"add_loc": None},
        {"add_loc": "add_2"},
        {"permutation": (1,)},
        {"callee": "main"},
        {"yield_value": v(2)},
        {"unknown_name": "onnx.Other"},
        {"unknown_result_type": TensorType(F32, (None,))},
        {"unknown_loc": None},
        {
            "attributes": {
                "axis": 1,
                "alpha": 0.5,
                "data": b"\x00\x01",
                "nested": (None, {"k": "w"}),
            }
        },
        {
            "attributes": {
                "axis": True,
                "alpha": 0.5,
                "data": b"\x00\x01",
                "nested": (None, {"k": "v"}),
            }
        },
        {"attributes": {"axis": 1, "alpha": 0.5, "data": "\x00\x01", "nested": (None, {"k": "v"})}},
        {
            "attributes": {
                "axis": 1,
                "alpha": 0.5,
                "data": b"\x00\x01",
                "nested": [None, {"k": "v"}],
            }
        },
        {"attributes": {"axis": 1, "alpha": 0.5, "data": b"\x00\x01"}},
        {"regions": ()},
        {"regions": (Region([Block((), [Yield()])]),)},
        {"true_target": "loop"},
        {"swap_blocks": True},
        {"extra_op": True},
    ],
    ids=lambda changes: ",".join(f"{key}={value!r}" for key, value in changes.items())[:60],
)
def test_each_field_kind_can_make_modules_differ(changes):
    assert not structurally_equal(build(), build(**changes))
    assert not structurally_equal(build(**changes), build())


def test_branch_targets_compare_by_position_in_their_region():
    def cfg(target_index: int) -> Region:
        blocks = [Block(), Block((), [Return()]), Block((), [Return()])]
        blocks[0].operations.append(Branch(blocks[target_index]))
        return Region(blocks)

    assert structurally_equal(cfg(1), cfg(1))
    assert not structurally_equal(cfg(1), cfg(2))


def test_buffers_compare_by_bytes_whatever_their_type():
    data = b"\x00\x01\x02\x03"
    with mmap.mmap(-1, 4) as mapped:
        mapped.write(data)
        for other in (bytearray(data), memoryview(data), memoryview(data).cast("I"), mapped):
            assert structurally_equal(Global("g", F32, data), Global("g", F32, other))
    assert not structurally_equal(Global("g", F32, data), Global("g", F32, data[:3]))


def test_floats_compare_bitwise():
    nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000))[0]
    other_nan = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    assert structurally_equal(Const(v(0), nan), Const(v(0), nan))
    assert structurally_equal(Const(v(0), math.nan), Const(v(0), float("nan")))
    assert not structurally_equal(Const(v(0), nan), Const(v(0), other_nan))
    assert not structurally_equal(Const(v(0), 0.0), Const(v(0), -0.0))


def test_literal_kinds_differ():
    assert not structurally_equal(Const(v(0, I1), True), Const(v(0, I1), 1))
    assert not structurally_equal(Const(v(0), 1), Const(v(0), 1.0))


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (F32, F32, True),
        (F32, ScalarType.F64, False),
        (TensorType(F32, (None, 4)), TensorType(F32, (None, 4)), True),
        (TensorType(F32, (None, 4)), TensorType(F32, (3, 4)), False),
        (TensorType(F32, None), TensorType(F32, ()), False),
        (TensorType(F32, ()), F32, False),
        (FunctionType((F32,), ()), FunctionType((F32,), ()), True),
        (FunctionType((F32,), ()), FunctionType((), (F32,)), False),
        (v(1), v(1), True),
        (v(1), v(2), False),
        (v(1), v(1, I1), False),
    ],
)
def test_types_and_values(left, right, equal):
    assert structurally_equal(left, right) is equal


def test_blocks_ops_and_functions_compare_on_their_own():
    def block(op_loc=None):
        return Block((v(0),), [Add(v(1), v(0), v(0), loc=op_loc), Return((v(1),))])

    assert structurally_equal(block(), block())
    assert not structurally_equal(block(), block("x"))
    assert not structurally_equal(block().operations[0], block().operations[1])
    declaration = Function("f", FunctionType())
    definition = Function("f", FunctionType(), Region([Block((), [Return()])]))
    assert not structurally_equal(declaration, definition)
    assert structurally_equal(
        definition, Function("f", FunctionType(), Region([Block((), [Return()])]))
    )


def test_deep_nesting_compares_without_recursion():
    def nest(depth: int, leaf: float) -> Region:
        region = Region([Block((), [Const(v(1), leaf), Yield()])])
        for _ in range(depth):
            region = Region(
                [Block((), [If((), v(0, I1), region, Region([Block((), [Yield()])])), Yield()])]
            )
        return region

    assert structurally_equal(nest(2000, 1.0), nest(2000, 1.0))
    assert not structurally_equal(nest(2000, 1.0), nest(2000, 2.0))
