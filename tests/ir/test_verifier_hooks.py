"""The UnknownOp type-rule hook the operator library fills: `register_op_type_rule`."""

from __future__ import annotations

import pytest
from niro.ir import (
    Return,
    ScalarType,
    UnknownOp,
    format_type,
    register_op_type_rule,
    register_op_type_rule_source,
    unregister_op_type_rule,
    verify,
)

from .builders import F32, I32, one_block, v

# NOTE: `test.Relu`, not `onnx.Relu`: the ONNX operator library registers rules for every
# `onnx.*` op when any test imports niro.frontends.onnx, and this file must not depend on that.


def relu_rule(op: UnknownOp, report) -> None:
    (operand,) = op.operands
    (result,) = op.results
    if result.type != operand.type:
        report(
            "relu-result-type",
            f"expected result type {format_type(operand.type)}, got {format_type(result.type)}",
            result,
        )


@pytest.fixture
def relu():
    register_op_type_rule("test.Relu", relu_rule)
    yield
    unregister_op_type_rule("test.Relu")


def _relu_module(result_type):
    return one_block(
        [UnknownOp("test.Relu", (v(0),), (v(1, result_type),), loc="relu_1"), Return()], (v(0),)
    )


def test_registered_rule_reports_under_its_own_id(relu) -> None:
    (diagnostic,) = verify(_relu_module(I32))
    assert diagnostic.rule == "relu-result-type"
    assert diagnostic.message == "'test.Relu' op expected result type f32, got i32"
    assert str(diagnostic.location) == "@main ^bb0 op#0 (test.Relu) [node 'relu_1']"
    assert diagnostic.location.value_ids == (1,)


def test_registered_rule_accepts_valid_op(relu) -> None:
    assert verify(_relu_module(F32)) == []


def test_without_a_registered_rule_unknown_ops_are_opaque() -> None:
    assert verify(_relu_module(ScalarType.I32)) == []


def test_registering_twice_is_an_error(relu) -> None:
    with pytest.raises(ValueError, match=r"^a type rule for 'test\.Relu' is already registered$"):
        register_op_type_rule("test.Relu", relu_rule)


def test_registering_needs_a_name_and_a_callable() -> None:
    with pytest.raises(ValueError, match=r"^an op type rule needs a non-empty op name, got ''$"):
        register_op_type_rule("", relu_rule)
    with pytest.raises(
        TypeError, match=r"^the type rule for 'test\.Relu' must be callable, got 3$"
    ):
        register_op_type_rule("test.Relu", 3)  # type: ignore[arg-type]


def test_a_rule_reporting_a_bad_rule_id_is_an_internal_error() -> None:
    register_op_type_rule("test.badid", lambda op, report: report("Not Kebab", "x"))
    try:
        (diagnostic,) = verify(one_block([UnknownOp("test.badid"), Return()]))
    finally:
        unregister_op_type_rule("test.badid")
    assert diagnostic.rule == "internal-error"
    assert "ValueError: rule ids are kebab-case, got 'Not Kebab'" in diagnostic.message


_ASKED: list[str] = []


def _sourced_rules(name: str):
    """A rule source in the way the ONNX operator library is one: rules made on demand."""
    _ASKED.append(name)
    return relu_rule if name.startswith("test.sourced.") else None


def test_a_rule_source_is_asked_once_per_name_and_its_rule_runs() -> None:
    register_op_type_rule_source(_sourced_rules)
    for name in ("test.sourced.Relu", "test.other.Relu"):
        module = one_block(
            [UnknownOp(name, (v(0),), (v(1, I32),), loc="relu_1"), Return()], (v(0),)
        )
        for _ in range(3):
            found = [diagnostic.rule for diagnostic in verify(module)]
            assert found == (["relu-result-type"] if "sourced" in name else [])
    assert _ASKED.count("test.sourced.Relu") == 1
    assert _ASKED.count("test.other.Relu") == 1


def test_a_registered_rule_wins_over_a_rule_source() -> None:
    name = "test.sourced.Registered"  # the source above would give it relu_rule
    register_op_type_rule(name, lambda op, report: None)
    try:
        module = one_block([UnknownOp(name, (v(0),), (v(1, I32),)), Return()], (v(0),))
        register_op_type_rule_source(_sourced_rules)
        assert verify(module) == []
        assert name not in _ASKED
    finally:
        unregister_op_type_rule(name)


def test_a_rule_source_must_be_callable() -> None:
    with pytest.raises(TypeError, match="an op type rule source must be callable, got 3"):
        register_op_type_rule_source(3)  # type: ignore[arg-type]
