"""The verifier: every rule in VERIFIER_RULES is broken by at least one case below, and the
diagnostic names the rule, the function, the path, the op and what was expected."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from niro.ir import OP_KINDS, VERIFIER_RULES, register_op_type_rule, unregister_op_type_rule, verify

from . import verifier_cases_ops, verifier_cases_structure
from .builders import Case

CASES: list[Case] = [*verifier_cases_structure.CASES, *verifier_cases_ops.CASES]


@pytest.fixture(autouse=True)
def boom_rule():
    """A registered UnknownOp type rule that crashes, for the `internal-error` case."""

    def boom(op, report):
        return 1 // 0

    register_op_type_rule("test.boom", boom)
    yield
    unregister_op_type_rule("test.boom")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_rule_is_reported(case: Case) -> None:
    diagnostics = verify(case.build())
    assert Counter(d.rule for d in diagnostics) == Counter((case.rule, *case.also)), [
        str(d) for d in diagnostics
    ]
    found = [d for d in diagnostics if d.rule == case.rule and re.search(case.message, d.message)]
    assert found, (
        f"no '{case.rule}' diagnostic matches {case.message!r}: {[str(d) for d in diagnostics]}"
    )
    location = found[0].location
    assert (location.symbol, location.path, location.op_name) == (
        case.symbol,
        case.path,
        case.op_name,
    )
    if case.value_ids is not None:
        assert location.value_ids == case.value_ids
    if case.source is not None:
        assert location.source == case.source


def test_every_rule_is_broken_by_a_case() -> None:
    assert {case.rule for case in CASES} == set(VERIFIER_RULES)


def test_every_op_kind_has_a_rule() -> None:
    for kind in OP_KINDS:
        assert any(kind in rule.checks for rule in VERIFIER_RULES.values()), kind.__name__


def test_rule_ids_are_kebab_case_with_descriptions() -> None:
    for rule_id, (description, checks) in VERIFIER_RULES.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule_id)
        assert description and checks


def test_diagnostic_reads_well_alone() -> None:
    case = next(case for case in CASES if case.name == "bad-field")
    (diagnostic,) = verify(case.build())
    assert str(diagnostic) == (
        "@main ^bb0 op#0 (niro.add) [node 'add_1'] failed rule 'field-type': "
        "'niro.add' op field 'lhs' expects a Value, got int 5"
    )


def test_every_problem_is_reported_not_just_the_first() -> None:
    from niro.ir import Add, Return

    from .builders import F64, I32, one_block, v

    module = one_block([Add(v(1), v(0), v(0, I32)), Add(v(2, F64), v(1), v(1)), Return()], (v(0),))
    assert sorted(d.rule for d in verify(module)) == [
        "add-operands",
        "add-result-type",
        "ssa-use-type",
    ]
