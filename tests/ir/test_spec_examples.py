"""Every code example of spec/niro-ir.md, copied verbatim, runs against niro.ir.

Each test supplies only the variables its snippet assumes (marked `# supplied:`); the snippet
itself follows between `# --- spec ---` and `# --- end ---` exactly as the spec writes it.
The two pseudo-code union declarations (`type Type = ...`, `type Op = (...)`) use Python 3.12's
`type` statement; the project supports 3.10, so they are checked against the unions instead.
"""

from __future__ import annotations

import struct
import typing

from niro.ir import (
    OP_KINDS,
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
    Op,
    Region,
    Return,
    ScalarType,
    TensorExtract,
    TensorType,
    Transpose,
    Type,
    UnknownOp,
    Value,
    ValueId,
    Yield,
    literal_problem,
    verify,
)


def _module_with(*ops, arguments=(), outputs=()) -> Module:
    """Wraps ops (plus a Return) in a one-block function so the snippet's IR can be verified."""
    body = Region(blocks=[Block(arguments=arguments, operations=[*ops])])
    signature = FunctionType(inputs=tuple(argument.type for argument in arguments), outputs=outputs)
    return Module(functions=[Function(name="main", type=signature, body=body)])


def test_tensor_type() -> None:
    # --- spec ---
    TensorType(element_type=ScalarType.F32, shape=(3, 4))
    # --- end ---
    assert str(TensorType(element_type=ScalarType.F32, shape=(3, 4))) == "tensor<3x4xf32>"


def test_shape_table_notation() -> None:
    table = {
        None: "tensor<*xf32>",
        (): "tensor<f32>",
        (3,): "tensor<3xf32>",
        (3, 4): "tensor<3x4xf32>",
        (None, 4): "tensor<?x4xf32>",
    }
    for shape, notation in table.items():
        assert str(TensorType(ScalarType.F32, shape)) == notation
    assert ScalarType.F32 != TensorType(ScalarType.F32, ())


def test_type_union() -> None:
    # spec: `type Type = ScalarType | TensorType` (Python 3.12 syntax; checked as the union)
    assert set(typing.get_args(Type)) == {ScalarType, TensorType}


def test_value() -> None:
    # --- spec ---
    value = Value(ValueId(0), ScalarType.F32)
    # --- end ---
    assert value == Value(ValueId(0), ScalarType.F32) and str(value) == "%0"


def test_module() -> None:
    # --- spec ---
    module = Module()
    # --- end ---
    assert verify(module) == []


def test_global() -> None:
    # supplied:
    weight_type = TensorType(ScalarType.F32, (2,))
    weight_data = struct.pack("<2f", 1.0, 2.0)
    # --- spec ---
    weight = Global(name="weight", type=weight_type, initializer=weight_data)
    # --- end ---
    assert verify(Module(globals=[weight])) == []
    bad = Global(name="weight", type=weight_type, initializer=weight_data[:4])
    assert [d.rule for d in verify(Module(globals=[bad]))] == ["global-initializer-size"]


def test_function_type() -> None:
    # --- spec ---
    signature = FunctionType(
        inputs=(ScalarType.F32, ScalarType.F32),
        outputs=(ScalarType.F32,),
    )
    # --- end ---
    assert signature.inputs == (ScalarType.F32, ScalarType.F32)


def test_declaration() -> None:
    # --- spec ---
    external = Function(
        name="print_f32",
        type=FunctionType(inputs=(ScalarType.F32,), outputs=()),
        body=None,
    )
    # --- end ---
    assert external.is_declaration and verify(Module(functions=[external])) == []


def test_region() -> None:
    # --- spec ---
    entry = Block()
    body = Region(blocks=[entry])
    # --- end ---
    assert body.entry is entry


def test_block_and_entry_arguments() -> None:
    # --- spec ---
    x = Value(ValueId(0), ScalarType.F32)
    block = Block(arguments=(x,), operations=[])
    # --- end ---
    block.operations.append(Return(operands=()))
    # supplied:
    function = Function(
        name="f", type=FunctionType(inputs=(ScalarType.F32,)), body=Region(blocks=[block])
    )
    # --- spec --- (the expression is verbatim; `holds =` captures it so the test can assert it)
    holds = (
        tuple(argument.type for argument in function.first_block.arguments) == function.type.inputs
    )
    # --- end ---
    assert holds
    assert verify(Module(functions=[function])) == []


def test_op_union() -> None:
    # spec: `type Op = (Const | GetGlobal | ... | UnknownOp)` (Python 3.12 syntax; checked as the union)
    expected = (
        Const,
        GetGlobal,
        Transpose,
        TensorExtract,
        Add,
        Mul,
        MatMul,
        Call,
        Branch,
        CondBranch,
        Return,
        Yield,
        If,
        UnknownOp,
    )
    assert typing.get_args(Op) == expected
    assert OP_KINDS == expected


def test_literals() -> None:
    # --- spec ---
    True  # noqa: B018  (verbatim literal examples)
    42  # noqa: B018
    2.0  # noqa: B018
    b"raw data"  # noqa: B018
    # --- end ---
    assert literal_problem(ScalarType.BOOL, True) is None
    assert literal_problem(ScalarType.I32, 42) is None
    assert literal_problem(ScalarType.F32, 2.0) is None
    assert literal_problem(TensorType(ScalarType.U8, (8,)), b"raw data") is None


def test_attributes() -> None:
    # --- spec ---
    attributes = {"alpha": 0.01}
    # --- end ---
    op = UnknownOp(name="test.scale", attributes=attributes)
    assert verify(_module_with(op, Return())) == []


def test_const() -> None:
    # --- spec ---
    result = Value(ValueId(0), ScalarType.F32)
    constant = Const(result=result, literal=2.0)
    # --- end ---
    assert (
        verify(_module_with(constant, Return(operands=(result,)), outputs=(ScalarType.F32,))) == []
    )


def test_get_global() -> None:
    # supplied:
    weight_type = TensorType(ScalarType.F32, (2,))
    weight_data = bytes(8)
    # --- spec ---
    Global(name="weight", type=weight_type, initializer=weight_data)

    result = Value(ValueId(0), weight_type)
    GetGlobal(name="weight", result=result)
    # --- end ---
    module = _module_with(GetGlobal(name="weight", result=result), Return())
    module.globals.append(Global(name="weight", type=weight_type, initializer=weight_data))
    assert verify(module) == []


def test_add() -> None:
    # supplied:
    left = Value(ValueId(0), ScalarType.F32)
    right = Value(ValueId(1), ScalarType.F32)
    # --- spec ---
    result = Value(ValueId(2), ScalarType.F32)
    add = Add(result=result, lhs=left, rhs=right)
    # --- end ---
    assert verify(_module_with(add, Return(), arguments=(left, right))) == []


def test_transpose() -> None:
    # supplied:
    input_value = Value(ValueId(0), TensorType(ScalarType.F32, (2, 3)))
    result = Value(ValueId(1), TensorType(ScalarType.F32, (3, 2)))
    # --- spec ---
    transpose = Transpose(
        result=result,
        operand=input_value,
        permutation=(1, 0),
    )
    # --- end ---
    assert verify(_module_with(transpose, Return(), arguments=(input_value,))) == []


def test_call() -> None:
    # supplied:
    lhs = Value(ValueId(0), ScalarType.F32)
    rhs = Value(ValueId(1), ScalarType.F32)
    result = Value(ValueId(2), ScalarType.F32)
    # --- spec ---
    function_call = Call(
        callee="add",
        arguments=(lhs, rhs),
        results=(result,),
    )
    # --- end ---
    module = _module_with(function_call, Return(), arguments=(lhs, rhs))
    module.functions.append(_complete_example().functions[0])
    assert verify(module) == []


def test_branches_cfg_example() -> None:
    # supplied:
    condition = Value(ValueId(0), ScalarType.BOOL)
    lhs = Value(ValueId(1), ScalarType.I32)
    rhs = Value(ValueId(2), ScalarType.I32)
    # --- spec ---
    merged = Value(ValueId(3), ScalarType.I32)
    join = Block(arguments=(merged,), operations=[Return((merged,))])
    left = Block(operations=[Branch(target=join, arguments=(lhs,))])
    right = Block(operations=[Branch(target=join, arguments=(rhs,))])
    entry = Block(
        arguments=(condition, lhs, rhs),
        operations=[CondBranch(condition, true_target=left, false_target=right)],
    )
    body = Region(blocks=[entry, left, right, join])
    # --- end ---
    signature = FunctionType(
        inputs=(ScalarType.BOOL, ScalarType.I32, ScalarType.I32), outputs=(ScalarType.I32,)
    )
    assert verify(Module(functions=[Function(name="select", type=signature, body=body)])) == []


def test_return_and_yield() -> None:
    # supplied:
    result = Value(ValueId(0), ScalarType.F32)
    # --- spec ---
    return_op = Return(operands=(result,))
    # --- end ---
    # --- spec ---
    yield_op = Yield(operands=(result,))
    # --- end ---
    assert verify(_module_with(return_op, arguments=(result,), outputs=(ScalarType.F32,))) == []
    assert [d.rule for d in verify(_module_with(yield_op, arguments=(result,)))] == [
        "yield-placement"
    ]


def test_tensor_extract() -> None:
    # supplied (the spec's own follow-up: a TensorType(BOOL, ()) gives a BOOL If condition):
    scalar = Value(ValueId(1), ScalarType.BOOL)
    tensor = Value(ValueId(0), TensorType(ScalarType.BOOL, ()))
    # --- spec ---
    extract = TensorExtract(result=scalar, operand=tensor, indices=())
    # --- end ---
    if_op = If(
        (), scalar, Region([Block(operations=[Yield()])]), Region([Block(operations=[Yield()])])
    )
    assert verify(_module_with(extract, if_op, Return(), arguments=(tensor,))) == []


def test_if() -> None:
    # supplied:
    condition = Value(ValueId(0), ScalarType.BOOL)
    then_value = Value(ValueId(1), ScalarType.F32)
    else_value = Value(ValueId(2), ScalarType.F32)
    result = Value(ValueId(3), ScalarType.F32)
    # --- spec ---
    if_op = If(
        results=(result,),
        condition=condition,
        then_region=Region(blocks=[Block(operations=[Yield(operands=(then_value,))])]),
        else_region=Region(blocks=[Block(operations=[Yield(operands=(else_value,))])]),
    )
    # --- end ---
    module = _module_with(
        if_op,
        Return(operands=(result,)),
        arguments=(condition, then_value, else_value),
        outputs=(ScalarType.F32,),
    )
    assert verify(module) == []


def test_unknown_op() -> None:
    # supplied:
    input_value = Value(ValueId(0), TensorType(ScalarType.F32, (None, 8)))
    result = Value(ValueId(1), TensorType(ScalarType.F32, (None, 8)))
    # --- spec ---
    unknown = UnknownOp(
        name="onnx.LeakyRelu",
        operands=(input_value,),
        results=(result,),
        attributes={"alpha": 0.01},
    )
    # --- end ---
    assert verify(_module_with(unknown, Return(), arguments=(input_value,))) == []


def _complete_example() -> Module:
    # --- spec ---
    lhs = Value(ValueId(0), ScalarType.F32)
    rhs = Value(ValueId(1), ScalarType.F32)
    result = Value(ValueId(2), ScalarType.F32)

    entry = Block(
        arguments=(lhs, rhs),
        operations=[
            Add(result=result, lhs=lhs, rhs=rhs),
            Return(operands=(result,)),
        ],
    )

    add = Function(
        name="add",
        type=FunctionType(
            inputs=(ScalarType.F32, ScalarType.F32),
            outputs=(ScalarType.F32,),
        ),
        body=Region(blocks=[entry]),
    )

    module = Module(functions=[add])
    # --- end ---
    return module


def test_complete_example_verifies() -> None:
    assert verify(_complete_example()) == []
