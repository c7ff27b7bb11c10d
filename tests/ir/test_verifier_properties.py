"""Property tests: verify() never crashes on a mutated random module (tests/ir/strategies.py);
each mutation yields diagnostics from the rule table, never a traceback and never an
`internal-error`. (That verify() accepts the unmutated modules is asserted by test_roundtrip.)"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from niro.ir import (
    VERIFIER_RULES,
    Block,
    Diagnostic,
    Region,
    ScalarType,
    verify,
    walk_blocks,
    walk_ops,
)

from .strategies import modules

_JUNK = (
    st.sampled_from([None, 5, "x", (1, "y"), ScalarType.F32, (), b"\0"])
    | st.builds(Block)
    | st.builds(Region)
)
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_clean_diagnostics(diagnostics) -> None:
    assert isinstance(diagnostics, list)
    for diagnostic in diagnostics:
        assert isinstance(diagnostic, Diagnostic)
        assert diagnostic.rule in VERIFIER_RULES and diagnostic.rule != "internal-error", str(
            diagnostic
        )


@_SETTINGS
@given(modules(), st.data())
def test_junk_in_any_op_field_is_a_diagnostic(module, data) -> None:
    ops = list(walk_ops(module))
    if not ops:
        return
    op = data.draw(st.sampled_from(ops))
    field = data.draw(st.sampled_from([f.name for f in dataclasses.fields(op)]))
    setattr(op, field, data.draw(_JUNK))
    _assert_clean_diagnostics(verify(module))


@_SETTINGS
@given(modules(), st.data())
def test_reshuffled_structure_is_a_diagnostic(module, data) -> None:
    blocks = list(walk_blocks(module))
    if not blocks:
        return
    block = data.draw(st.sampled_from(blocks))
    mutation = data.draw(st.sampled_from(["drop-last", "reverse", "duplicate-op", "share-block"]))
    if mutation == "drop-last" and block.operations:
        block.operations.pop()
        assert verify(module), "a block without its terminator must not verify"
    elif mutation == "reverse":
        block.operations.reverse()
    elif mutation == "duplicate-op" and block.operations:
        block.operations.insert(0, block.operations[-1])
    elif mutation == "share-block":
        other = data.draw(st.sampled_from(blocks))
        for function in module.functions:
            if function.body is not None:
                function.body.blocks.append(other)
                assert verify(module), "a block in two places must not verify"
                break
    _assert_clean_diagnostics(verify(module))
