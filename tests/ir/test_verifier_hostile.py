"""verify() never raises on malformed IR: wrong Python types, shared or cyclic structure, deep
nesting. It guards the CLI against hostile input, so each problem must become a diagnostic."""

from __future__ import annotations

import pytest
from niro.ir import (
    Add,
    Block,
    Branch,
    Call,
    CondBranch,
    Function,
    FunctionType,
    Global,
    If,
    Module,
    Region,
    Return,
    TensorExtract,
    Transpose,
    UnknownOp,
    Value,
    ValueId,
    Yield,
    verify,
)

from .builders import BOOL, F32, function, one_block, tensor, v


def _rules(module) -> list[str]:
    return [d.rule for d in verify(module)]


def _cyclic_region() -> Module:
    region = Region()
    region.blocks.append(Block(operations=[UnknownOp("test.self", regions=(region,)), Yield()]))
    return one_block([UnknownOp("test.outer", regions=(region,)), Return()])


def _shared_across_functions() -> Module:
    block = Block(operations=[Return()])
    return Module(functions=[function("a", [block]), function("b", [block])])


def _op_with_field(**fields) -> Module:
    op = Add(v(1), v(0), v(0))
    for name, value in fields.items():
        object.__setattr__(op, name, value)
    return one_block([op, Return()], (v(0),))


HOSTILE = {
    "not-a-module": (lambda: None, ["field-type"]),
    "globals-not-a-list": (lambda: _set(Module(), globals=5), ["field-type"]),
    "function-not-a-function": (lambda: Module(functions=["f"]), ["field-type"]),
    "global-bad-type": (lambda: Module(globals=[Global("g", "f32", 1.0)]), ["field-type"]),
    "function-name-int": (
        lambda: Module(functions=[Function(3, FunctionType(), None)]),
        ["symbol-name"],
    ),
    "function-type-wrong": (
        lambda: Module(functions=[Function("f", (F32,), None)]),
        ["field-type"],
    ),
    "signature-not-types": (
        lambda: Module(functions=[Function("f", FunctionType(("x",)), None)]),
        ["field-type"],
    ),
    "body-not-region": (
        lambda: Module(functions=[Function("f", FunctionType(), [Block()])]),
        ["field-type"],
    ),
    "blocks-not-list": (
        lambda: Module(functions=[Function("f", FunctionType(), _set(Region(), blocks=None))]),
        ["field-type"],
    ),
    "block-not-block": (
        lambda: Module(functions=[Function("f", FunctionType(), Region(["b"]))]),
        ["field-type"],
    ),
    "arguments-not-values": (
        lambda: Module(functions=[function("f", [Block((3,), [Return()])], inputs=(F32,))]),
        ["field-type", "function-entry-args"],
    ),
    "operations-not-list": (
        lambda: Module(functions=[function("f", [_set(Block(), operations=7)])]),
        ["field-type", "block-terminator"],
    ),
    "operand-tuple-of-ints": (lambda: _op_with_field(rhs=(1, 2)), ["field-type"]),
    "loc-not-str": (lambda: _op_with_field(loc=3), ["field-type"]),
    "unset-slot": (lambda: one_block([_unset(Add), Return()]), ["field-type"] * 4),
    "target-not-block": (lambda: one_block([Branch("^bb1")]), ["field-type"]),
    "cond-targets-none": (
        lambda: one_block([CondBranch(v(0, BOOL), None, None)], (v(0, BOOL),)),
        ["field-type", "field-type"],
    ),
    "if-regions-not-regions": (
        lambda: one_block([If((), v(0, BOOL), None, 5), Return()], (v(0, BOOL),)),
        ["field-type", "field-type"],
    ),
    "permutation-not-ints": (
        lambda: one_block(
            [Transpose(v(1, tensor(F32, 2)), v(0, tensor(F32, 2)), ("a",)), Return()],
            (v(0, tensor(F32, 2)),),
        ),
        ["field-type"],
    ),
    "indices-not-values": (
        lambda: one_block(
            [TensorExtract(v(1), v(0, tensor(F32, 2)), (0,)), Return()], (v(0, tensor(F32, 2)),)
        ),
        ["field-type"],
    ),
    "callee-not-str": (lambda: one_block([Call(None), Return()]), ["field-type"]),
    "unknown-name-not-str": (lambda: one_block([UnknownOp(5), Return()]), ["field-type"]),
    "attributes-not-dict": (
        lambda: one_block([UnknownOp("x", attributes=[1]), Return()]),
        ["unknown-op-attributes"],
    ),
    "cyclic-region": (_cyclic_region, ["unique-ownership"]),
    "block-shared-across-functions": (_shared_across_functions, ["unique-ownership"]),
    "value-with-hostile-repr": (lambda: one_block([Return((_Evil(),))]), ["field-type"]),
}


class _Evil:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


def _set(node, **fields):
    for name, value in fields.items():
        object.__setattr__(node, name, value)
    return node


def _unset(kind):
    return kind.__new__(kind)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_becomes_diagnostics(name: str) -> None:
    build, expected = HOSTILE[name]
    assert sorted(_rules(build())) == sorted(expected)


def test_field_type_message_names_field_and_expectation() -> None:
    (diagnostic,) = verify(_op_with_field(rhs=(1, 2)))
    assert diagnostic.message == "'niro.add' op field 'rhs' expects a Value, got tuple (1, 2)"
    diagnostic, loc_diagnostic = verify(one_block([_unset(Return)]))
    assert (
        loc_diagnostic.message
        == "'niro.return' op field 'loc' expects a str or None, got nothing (unset)"
    )
    assert (
        diagnostic.message
        == "'niro.return' op field 'operands' expects a tuple of Values, got nothing (unset)"
    )


def test_deep_nesting_does_not_recurse() -> None:
    condition = v(0, BOOL)
    body: list = [Yield()]
    for _ in range(2000):
        body = [
            If(
                (),
                condition,
                Region([Block(operations=body)]),
                Region([Block(operations=[Yield()])]),
            ),
            Yield(),
        ]
    body[-1] = Return()
    assert verify(one_block(body, (condition,))) == []


def test_long_block_chain_does_not_recurse() -> None:
    blocks = [Block((v(0),))]
    for index in range(1, 5_000):
        block = Block((v(index),))
        blocks[-1].operations.append(Branch(block, (v(index - 1),)))
        blocks.append(block)
    blocks[-1].operations.append(Return())
    # A 5k-deep dominator tree (well past the recursion limit): both the CFG walk and the scoped SSA walk must be iterative.
    assert verify(Module(functions=[function("chain", blocks)])) == []


def test_value_id_index_is_validated_by_value() -> None:
    # Values themselves reject a non-ValueId id at construction, so the verifier may rely on it.
    with pytest.raises(TypeError, match=r"^Value id must be a ValueId, got 3$"):
        Value(3, F32)  # type: ignore[arg-type]
    assert ValueId(3).index == 3


class _EvilBuffer(bytes):
    def __len__(self) -> int:
        raise RuntimeError("no length")


def test_crash_inside_the_verifier_is_an_internal_error_diagnostic() -> None:
    (diagnostic,) = verify(Module(globals=[Global("g", tensor(F32, 2), _EvilBuffer(b"12345678"))]))
    assert diagnostic.rule == "internal-error"
    assert diagnostic.location.symbol == "g"
    assert diagnostic.message == (
        "the verifier failed on this global (RuntimeError: no length); this is a bug in niroc, please report it"
    )


def test_dim_of_the_wrong_python_type_is_a_field_type() -> None:
    bad = tensor(F32, 2)
    object.__setattr__(bad, "shape", ("2",))
    (diagnostic,) = verify(Module(globals=[Global("g", bad, b"")]))
    assert (diagnostic.rule, diagnostic.message) == (
        "field-type",
        "global @g has a dim that is not an int or None: str '2'",
    )


def test_malformed_signature_is_not_compared_against() -> None:
    # Only the bad output type is reported, not a Return mismatch against it.
    signature = FunctionType((F32,), (tensor(F32, -1),))
    module = Module(
        functions=[Function("f", signature, Region([Block((v(0),), [Return((v(0),))])]))]
    )
    assert [(d.rule, d.message) for d in verify(module)] == [
        ("dim-non-negative", "output #0 has a negative dimension: tensor<-1xf32>")
    ]
