"""Every op the lowering refuses is reported in one LoweringError: refused ops are recorded and
lowering goes on, ops that use a refused op's results lower as usual (no spurious refusals),
ops without a lowering lead the list, and the listing is capped."""

from __future__ import annotations

import onnx.parser
import pytest
from mlir_harness import Ids, tensor
from niro.backends.mlir import (
    MAX_LISTED_REFUSALS,
    LoweringError,
    LoweringRuleContext,
    lower_to_mlir,
    register_lowering,
    unregister_lowering,
)
from niro.backends.mlir.builders import index_constant
from niro.frontends.onnx import import_model
from niro.ir import (
    Add,
    Block,
    Function,
    FunctionType,
    If,
    Module,
    Region,
    Return,
    ScalarType,
    UnknownOp,
    Yield,
)

F32 = ScalarType.F32
VECTOR = tensor(F32, 4)


@pytest.fixture(scope="module", autouse=True)
def refusing_rules():
    """test.Refuse refuses with its `reason`; test.Fragile builds an op, then its binding call
    fails with a ValueError (wrapped by the driver)."""

    @register_lowering("test.Refuse")
    def lower_refuse(ctx: LoweringRuleContext):
        raise ctx.error(f"refuses: {ctx.op.attributes['reason']}")

    @register_lowering("test.Fragile")
    def lower_fragile(ctx: LoweringRuleContext):
        index_constant(7)
        raise ValueError("the binding gave up")

    yield
    unregister_lowering("test.Refuse")
    unregister_lowering("test.Fragile")


def module_of(build) -> Module:
    """One function @f(x: tensor<4xf32>) -> tensor<4xf32> whose body `build(ids, x)` makes."""
    ids = Ids()
    x = ids(VECTOR)
    body = Region([Block((x,), build(ids, x))])
    return Module(functions=[Function("f", FunctionType((VECTOR,), (VECTOR,)), body)])


def refuse(ids, operand, reason: str, loc: str | None) -> tuple[UnknownOp, object]:
    result = ids(VECTOR)
    return UnknownOp("test.Refuse", (operand,), (result,), {"reason": reason}, loc=loc), result


def test_two_independent_refusals_give_one_error_naming_both():
    def build(ids, x):
        first, a = refuse(ids, x, "first reason", "node_a")
        second, b = refuse(ids, x, "second reason", "node_b")
        return [first, second, Add(total := ids(VECTOR), a, b, loc="sum"), Return((total,))]

    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(module_of(build))
    error = caught.value
    assert str(error) == (
        "@f ^bb0 op#0 (test.Refuse) [node 'node_a']: 'test.Refuse' op refuses: first reason "
        "(and 1 more op refused)"
    )
    assert error.notes == (
        "also refused: @f ^bb0 op#1 (test.Refuse) [node 'node_b']: 'test.Refuse' op refuses: "
        "second reason",
    )
    assert [(refusal.location, refusal.message) for refusal in error.refusals] == [
        ("@f ^bb0 op#0 (test.Refuse) [node 'node_a']", "'test.Refuse' op refuses: first reason"),
        ("@f ^bb0 op#1 (test.Refuse) [node 'node_b']", "'test.Refuse' op refuses: second reason"),
    ]


def test_one_refusal_is_raised_as_it_is():
    def build(ids, x):
        op, y = refuse(ids, x, "alone", "only")
        return [op, Return((y,))]

    with pytest.raises(
        LoweringError,
        match=r"^@f \^bb0 op#0 \(test\.Refuse\) \[node 'only'\]: 'test\.Refuse' "
        r"op refuses: alone$",
    ) as caught:
        lower_to_mlir(module_of(build))
    assert caught.value.refusals == () and caught.value.notes == ()


def test_binding_errors_are_collected_too_and_keep_their_cause():
    def build(ids, x):
        fragile = UnknownOp("test.Fragile", (x,), (y := ids(VECTOR),), loc="fragile")
        op, z = refuse(ids, y, "later", "after")
        return [fragile, op, Return((z,))]

    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(module_of(build))
    error = caught.value
    assert str(error) == (
        "@f ^bb0 op#0 (test.Fragile) [node 'fragile']: 'test.Fragile' op could not be lowered: "
        "the binding gave up (and 1 more op refused)"
    )
    assert len(error.refusals) == 2 and "'test.Refuse' op refuses: later" in error.notes[0]
    assert isinstance(error.__cause__, ValueError)


ONNX_MODEL = """
<ir_version: 9, opset_import: ["" : 20]>
refusals (float[2,3] x) => (float[2,3] y) <float[2,3] a, float[2,3] b, float[2,3] c> {
  [gelu_1] a = Gelu <approximate = "erf"> (x)
  [relu_after] b = Relu(a)
  [celu_1] c = Celu <alpha = 0.0> (x)
  [sum] y = Add(b, c)
}
"""


def test_onnx_ops_downstream_of_a_refused_op_add_no_refusal():
    """Gelu is refused (a half-built rule: it made ops before it gave up); the Relu and the Add
    that use its result lower as usual; the independent Celu is reported too."""
    module = import_model(onnx.parser.parse_model(ONNX_MODEL))
    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(module)
    assert [str(refusal) for refusal in caught.value.refusals] == [
        "@refusals ^bb0 op#0 (onnx.Gelu) [node 'gelu_1']: 'onnx.Gelu' op attribute "
        "'approximate' must be 'none' or 'tanh', got 'erf'",
        "@refusals ^bb0 op#2 (onnx.Celu) [node 'celu_1']: 'onnx.Celu' op attribute 'alpha' "
        "must not be 0",
    ]


def test_refusals_inside_regions_are_collected_and_the_region_goes_on():
    ids = Ids()
    condition, x = ids(ScalarType.BOOL), ids(VECTOR)
    inner_op, inner = refuse(ids, x, "in the then arm", "inner")
    doubled = ids(VECTOR)
    if_op = If(
        (chosen := ids(VECTOR),),
        condition,
        Region([Block((), [inner_op, Add(doubled, inner, inner, loc="twice"), Yield((doubled,))])]),
        Region([Block((), [Yield((x,))])]),
        loc="branch",
    )
    outer_op, outer = refuse(ids, chosen, "after the if", "outer")
    entry = Block((condition, x), [if_op, outer_op, Return((outer,))])
    function = Function("f", FunctionType((ScalarType.BOOL, VECTOR), (VECTOR,)), Region([entry]))
    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(Module(functions=[function]))
    assert [refusal.location for refusal in caught.value.refusals] == [
        "@f ^bb0 op#0 region#0 ^bb0 op#0 (test.Refuse) [node 'inner']",
        "@f ^bb0 op#1 (test.Refuse) [node 'outer']",
    ]


def test_ops_without_a_lowering_lead_the_list_and_are_not_refused_again():
    def build(ids, x):
        mystery = UnknownOp("test.Mystery", (x,), (y := ids(VECTOR),), loc="mystery")
        op, z = refuse(ids, y, "its own reason", "after_mystery")
        return [mystery, op, Return((z,))]

    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(module_of(build))
    error = caught.value
    assert str(error) == (
        "1 operation has no MLIR lowering: test.Mystery (x1, first at node 'mystery') "
        "(and 1 more op refused)"
    )
    assert len(error.refusals) == 2
    assert "allow_unknown=True" in error.notes[0]
    assert error.notes[1] == (
        "also refused: @f ^bb0 op#1 (test.Refuse) [node 'after_mystery']: 'test.Refuse' op "
        "refuses: its own reason"
    )


def test_a_long_list_is_capped_with_a_count_of_the_rest():
    count = MAX_LISTED_REFUSALS + 5

    def build(ids, x):
        operations, current = [], x
        for index in range(count):
            op, current = refuse(ids, current, f"reason {index}", f"n{index}")
            operations.append(op)
        return [*operations, Return((current,))]

    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(module_of(build))
    error = caught.value
    assert error.message.endswith(
        f"'test.Refuse' op refuses: reason 0 (and {count - 1} more ops refused)"
    )
    assert len(error.refusals) == count
    assert len(error.notes) == MAX_LISTED_REFUSALS
    assert error.notes[-2].endswith(f"reason {MAX_LISTED_REFUSALS - 1}")
    assert error.notes[-1] == "and 5 more refused ops"
