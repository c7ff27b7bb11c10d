"""Valid modules verify with []: loops through block arguments, nested Ifs, calls, declarations,
globals, zero-output functions, dynamic and unranked shapes, UnknownOps with regions."""

from __future__ import annotations

import struct

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
    TensorExtract,
    Transpose,
    UnknownOp,
    Yield,
    verify,
)

from .builders import BOOL, F32, I32, I64, declaration, function, one_block, tensor, unranked, v


def test_counting_loop_through_block_arguments() -> None:
    # ^bb0(%0 limit): br ^bb1(0); ^bb1(%1 i): %2 = i < limit (opaque); cond_br %2, ^bb2, ^bb3(%1)
    # ^bb2: %4 = %1 + 1; br ^bb1(%4); ^bb3(%5): return %5
    limit, counter, condition, one, step, out = (
        v(0, I32),
        v(1, I32),
        v(2, BOOL),
        v(3, I32),
        v(4, I32),
        v(5, I32),
    )
    zero = v(6, I32)
    header = Block((counter,))
    body = Block()
    exit_block = Block((out,), [Return((out,))])
    entry = Block((limit,), [Const(zero, 0), Branch(header, (zero,))])
    header.operations = [
        UnknownOp("test.less", (counter, limit), (condition,)),
        CondBranch(condition, body, exit_block, false_arguments=(counter,)),
    ]
    body.operations = [Const(one, 1), Add(step, counter, one), Branch(header, (step,))]
    module = Module(functions=[function("count", [entry, exit_block, body, header], (I32,))])
    assert verify(module) == []


def test_loop_without_exit_and_both_edges_to_one_block() -> None:
    flag, x, y = v(0, BOOL), v(1), v(2)
    loop = Block((y,))
    loop.operations = [CondBranch(flag, loop, loop, (y,), (x,))]
    entry = Block((flag, x), [Branch(loop, (x,))])
    assert verify(Module(functions=[function("spin", [entry, loop])])) == []


def test_nested_ifs_capture_outer_values() -> None:
    condition, x = v(0, BOOL), v(1)
    inner = If(
        (v(3),),
        condition,
        Region([Block(operations=[Add(v(4), x, v(2)), Yield((v(4),))])]),
        Region([Block(operations=[Yield((x,))])]),
    )
    outer = If(
        (v(5),),
        condition,
        Region([Block(operations=[Mul(v(2), x, x), inner, Yield((v(3),))])]),
        Region(
            [
                Block(
                    operations=[
                        If(
                            (),
                            condition,
                            Region([Block(operations=[Yield()])]),
                            Region([Block(operations=[Yield()])]),
                        ),
                        Yield((x,)),
                    ]
                )
            ]
        ),
    )
    module = one_block([outer, Return((v(5),))], (condition, x), (F32,))
    assert verify(module) == []


def test_calls_declarations_globals_and_zero_outputs() -> None:
    weight_type = tensor(F32, 2, 2)
    weight_data = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    x = v(0, weight_type)
    callee = function(
        "project",
        [
            Block(
                (x,),
                [
                    GetGlobal(v(1, weight_type), "weight"),
                    MatMul(v(2, weight_type), x, v(1, weight_type)),
                    Return((v(2, weight_type),)),
                ],
            )
        ],
        (weight_type,),
        input_names=("x",),
        output_names=(None,),
    )
    caller = function(
        "main",
        [
            Block(
                (v(0, weight_type),),
                [
                    Call("project", (v(0, weight_type),), (v(1, weight_type),)),
                    Const(v(2), 2),  # an int literal for an f32 Const means 2.0
                    Call("print_f32", (v(2),)),
                    Return(),
                ],
            )
        ],
    )
    module = Module(
        globals=[
            Global("weight", weight_type, weight_data),
            Global("unused", BOOL, False),
            Global("scale", F32, 0.5),
            Global("empty", tensor(I64, 0, 3), b""),
        ],
        functions=[callee, caller, declaration("print_f32", (F32,))],
    )
    assert verify(module) == []


def test_dynamic_and_unranked_shapes() -> None:
    dynamic, bias, anything = tensor(F32, None, 4), tensor(F32, 4), unranked(F32)
    ops = [
        Add(v(3, dynamic), v(0, dynamic), v(1, bias)),
        Mul(
            v(4, anything), v(3, dynamic), v(2, anything)
        ),  # unknown rank: the result may be unranked
        Add(v(5, tensor(F32, 2, 4)), v(0, dynamic), v(1, bias)),  # a declared result may refine ?
        Transpose(v(6, tensor(F32, 4, None)), v(3, dynamic), (1, 0)),
        MatMul(v(7, tensor(F32, 4, 4)), v(6, tensor(F32, 4, None)), v(0, dynamic)),
        Const(v(8, I32), 1),
        Const(v(9, I64), 2),
        TensorExtract(v(10, F32), v(3, dynamic), (v(8, I32), v(9, I64))),
        Const(v(11, tensor(BOOL)), b"\x01"),
        TensorExtract(v(12, BOOL), v(11, tensor(BOOL)), ()),
        If(
            (),
            v(12, BOOL),
            Region([Block(operations=[Yield()])]),
            Region([Block(operations=[Yield()])]),
        ),
        Return((v(4, anything),)),
    ]
    module = one_block(ops, (v(0, dynamic), v(1, bias), v(2, anything)), (anything,))
    assert verify(module) == []


def test_unknown_ops_with_regions_and_successors() -> None:
    x = v(0)
    done = Block(operations=[Return((x,))])
    region = Region([Block((v(2),), [UnknownOp("test.body", (v(2), x), (v(3),)), Yield((v(3),))])])
    entry = Block(
        (x,),
        [
            UnknownOp(
                "test.loop",
                (x,),
                (v(1),),
                {"alpha": 0.01, "axes": (1, 2), "meta": {"k": None}, "raw": b"\0"},
                (region, Region()),
            ),
            UnknownOp("test.jump", (v(1),), successors=(done,)),
        ],
    )
    assert verify(Module(functions=[function("main", [entry, done], (F32,))])) == []


def test_functions_may_reuse_value_ids() -> None:
    module = one_block([Return((v(0),))], (v(0),), (F32,))
    module.functions.append(function("other", [Block((v(0, I32),), [Return()])]))
    assert verify(module) == []


def test_declaration_only_module_and_empty_module() -> None:
    assert verify(Module()) == []
    assert (
        verify(
            Module(
                functions=[
                    Function("f", FunctionType((F32,), (F32, I32)), None, ("a",), (None, "b"))
                ]
            )
        )
        == []
    )


def test_opaque_region_with_its_own_cfg() -> None:
    x = v(0)
    inner_exit = Block((v(2),), [Yield((v(2),))])
    inner_entry = Block((v(1),), [Add(v(3), v(1), x), Branch(inner_exit, (v(3),))])
    loop = UnknownOp("test.region", (x,), (v(4),), regions=(Region([inner_entry, inner_exit]),))
    assert verify(one_block([loop, Return((v(4),))], (x,), (F32,))) == []
