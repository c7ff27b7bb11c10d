"""Control flow lowered and run: If (scf.if), a CFG loop with block arguments (cf), calls (func).

All functions live in one module: one compile.
"""

from __future__ import annotations

import numpy as np
import pytest
from mlir_harness import Ids, call, check_lowered, compile_module, from_abi, load_vmfb, tensor
from niro.backends.mlir import lower_to_mlir
from niro.ir import (
    Add,
    Block,
    Branch,
    Call,
    CondBranch,
    Const,
    Function,
    FunctionType,
    If,
    Module,
    Mul,
    Region,
    Return,
    ScalarType,
    TensorExtract,
    Yield,
    verify,
)

BOOL, I64, F32 = ScalarType.BOOL, ScalarType.I64, ScalarType.F32


def _one_block(operations) -> Region:
    return Region([Block((), operations)])


def select_function() -> Function:
    """select(c, a, b) = c ? a + b : a * b, on scalars, with an If that yields one value."""
    ids = Ids()
    condition, lhs, rhs = ids(BOOL), ids(F32), ids(F32)
    total, product, result = ids(F32), ids(F32), ids(F32)
    if_op = If(
        (result,),
        condition,
        _one_block([Add(total, lhs, rhs), Yield((total,))]),
        _one_block([Mul(product, lhs, rhs), Yield((product,))]),
        loc="if_node",
    )
    body = Region([Block((condition, lhs, rhs), [if_op, Return((result,))])])
    return Function("select", FunctionType((BOOL, F32, F32), (F32,)), body)


def nested_if_function() -> Function:
    """nested(c1, c2, x): c1 ? (c2 ? x + x : x * x) : x, on a dynamic tensor; also an If
    with no results."""
    ids = Ids()
    dyn = tensor(F32, None)
    outer_condition, inner_condition, x = ids(BOOL), ids(BOOL), ids(dyn)
    doubled, squared, inner, outer = ids(dyn), ids(dyn), ids(dyn), ids(dyn)
    inner_if = If(
        (inner,),
        inner_condition,
        _one_block([Add(doubled, x, x), Yield((doubled,))]),
        _one_block([Mul(squared, x, x), Yield((squared,))]),
    )
    empty_if = If((), inner_condition, _one_block([Yield(())]), _one_block([Yield(())]))
    outer_if = If(
        (outer,),
        outer_condition,
        _one_block([inner_if, empty_if, Yield((inner,))]),
        _one_block([Yield((x,))]),
    )
    body = Region([Block((outer_condition, inner_condition, x), [outer_if, Return((outer,))])])
    return Function("nested", FunctionType((BOOL, BOOL, dyn), (dyn,)), body)


def loop_function() -> Function:
    """sum_while(flags) = sum of i while flags[i]: a CFG loop carrying (i, acc) in block args.

    The blocks are listed exit-first, so the exit (which uses the header's `acc` directly, as
    the header dominates it) comes before its dominator: the lowering must not depend on the
    Niro block order.
    """
    ids = Ids()
    flags = ids(tensor(BOOL, None))
    zero, one = ids(I64), ids(I64)
    i, acc = ids(I64), ids(I64)
    keep_going = ids(BOOL)
    next_acc, next_i = ids(I64), ids(I64)
    header = Block((i, acc), [])
    exit_block = Block((), [Return((acc,), loc="ret")])
    loop_body = Block(
        (), [Add(next_acc, acc, i), Add(next_i, i, one), Branch(header, (next_i, next_acc))]
    )
    header.operations += [
        TensorExtract(keep_going, flags, (i,)),
        CondBranch(keep_going, loop_body, exit_block, loc="loop_test"),
    ]
    entry = Block(
        (flags,),
        [Const(zero, 0), Const(one, 1), Branch(header, (zero, zero))],
    )
    body = Region([entry, exit_block, loop_body, header])
    return Function("sum_while", FunctionType((tensor(BOOL, None),), (I64,)), body)


def call_functions() -> list[Function]:
    """sum_product(x, y) -> (x + y, x * y); caller(x, y) = sum_product applied twice; and an
    unused external declaration (a private func.func without a body)."""
    ids = Ids()
    matrix = tensor(F32, 2, 2)
    x, y, total, product = ids(matrix), ids(matrix), ids(matrix), ids(matrix)
    callee = Function(
        "sum_product",
        FunctionType((matrix, matrix), (matrix, matrix)),
        Region([Block((x, y), [Add(total, x, y), Mul(product, x, y), Return((total, product))])]),
        input_names=("x", "y"),
        output_names=("sum", None),
    )
    ids = Ids()
    x, y = ids(matrix), ids(matrix)
    first_sum, first_product, second_sum, second_product = (ids(matrix) for _ in range(4))
    caller = Function(
        "caller",
        FunctionType((matrix, matrix), (matrix, matrix)),
        Region(
            [
                Block(
                    (x, y),
                    [
                        Call("sum_product", (x, y), (first_sum, first_product), loc="call1"),
                        Call(
                            "sum_product", (first_sum, first_product), (second_sum, second_product)
                        ),
                        Return((second_sum, second_product)),
                    ],
                )
            ]
        ),
    )
    external = Function("print_f32", FunctionType((F32,), ()), None)
    return [callee, caller, external]


def control_flow_module() -> Module:
    return Module(
        functions=[select_function(), nested_if_function(), loop_function(), *call_functions()]
    )


def test_control_flow_text_shape():
    module = control_flow_module()
    assert verify(module) == []  # the lowering's contract: verified input
    text = check_lowered(lower_to_mlir(module))
    assert "scf.if" in text and "scf.yield" in text
    assert "cf.cond_br" in text and "cf.br ^bb" in text
    assert "func.func private @print_f32(f32)" in text
    # a function other functions call is a private helper; the ones nothing calls are entries
    assert 'func.func private @sum_product(%arg0: tensor<2x2xf32> {niro.name = "x"}' in text
    assert "func.func @caller(" in text and "func.func @select(" in text
    assert '-> (tensor<2x2xf32> {niro.name = "sum"}, tensor<2x2xf32>)' in text
    assert "call @sum_product(%arg0, %arg1)" in text
    assert 'loc("loop_test")' in text and 'loc("if_node")' in text


@pytest.fixture(scope="module")
def vm_module(tmp_path_factory):
    lowered = lower_to_mlir(control_flow_module())
    return load_vmfb(compile_module(lowered, tmp_path_factory.mktemp("control_flow")))


@pytest.mark.parametrize("condition", [True, False])
def test_if_selects_region(vm_module, condition):
    (result,) = call(vm_module, "select", condition, 3.0, 4.0)
    assert result == (7.0 if condition else 12.0)


@pytest.mark.parametrize(("outer", "inner"), [(True, True), (True, False), (False, True)])
def test_nested_if_on_dynamic_tensor(vm_module, outer, inner):
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype=np.float32)
    (result,) = call(vm_module, "nested", outer, inner, x)
    expected = (x + x if inner else x * x) if outer else x
    np.testing.assert_array_equal(from_abi(result, expected), expected)


@pytest.mark.parametrize("count", [0, 1, 5, 10])
def test_cfg_loop_with_block_arguments(vm_module, count):
    flags = np.zeros(12, dtype=np.bool_)
    flags[:count] = True
    (result,) = call(vm_module, "sum_while", flags)
    assert int(result) == sum(range(count))


def test_calls_between_functions(vm_module):
    x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    y = np.array([[5.0, 6.0], [7.0, 8.0]], dtype=np.float32)
    total, product = call(vm_module, "caller", x, y)
    with pytest.raises(KeyError):  # a helper is not exported
        vm_module["sum_product"]
    first_sum, first_product = x + y, x * y
    np.testing.assert_array_equal(from_abi(total, x), first_sum + first_product)
    np.testing.assert_array_equal(from_abi(product, x), first_sum * first_product)
