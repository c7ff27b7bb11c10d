"""Round trip laws: print -> parse is structurally equal, and print -> parse -> print is identical.

Random modules come from `tests.ir.strategies` (well-formed by construction; the first test
checks that `verify` agrees, so the verifier's tests can rely on them too).
"""

from __future__ import annotations

import math
import re
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from niro.ir import (
    Block,
    Const,
    Function,
    FunctionType,
    Global,
    Module,
    Region,
    Return,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    ValueId,
    parse_module,
    print_module,
    structurally_equal,
    verify,
)
from niro.ir.printer import ELIDE_THRESHOLD

from tests.ir.strategies import attributes, literals_for, modules, names, scalar_types, types

_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assert_round_trips(module: Module) -> str:
    text = print_module(module)
    parsed = parse_module(text)
    assert structurally_equal(module, parsed), text
    assert print_module(parsed) == text
    return text


@_SETTINGS
@given(modules())
def test_random_modules_are_well_formed_and_round_trip(module):
    assert verify(module) == []
    assert_round_trips(module)


@_SETTINGS
@given(modules())
def test_printing_is_deterministic(module):
    assert print_module(module) == print_module(module)


@_SETTINGS
@given(modules())
def test_elided_text_differs_only_where_data_was_big(module):
    def elide(match: re.Match) -> str:
        size = len(match.group(1)) // 2
        return f"dense<elided: {size} bytes>" if size > ELIDE_THRESHOLD else match.group()

    expected = re.sub(r'dense<"0x([0-9A-F]*)">', elide, print_module(module))
    assert print_module(module, elide_data=True) == expected


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(names, attributes, max_size=4), names)
def test_generic_attributes_and_names_round_trip(attribute_dict, name):
    op = UnknownOp(name, attributes=attribute_dict, loc=name)
    module = Module(functions=[Function(name, FunctionType(), Region([Block((), [op, Return()])]))])
    assert_round_trips(module)


@st.composite
def _typed_literals(draw):
    type_ = draw(
        st.one_of(scalar_types, types.filter(lambda t: isinstance(t, TensorType) and t.is_static))
    )
    return type_, draw(literals_for(type_))


@settings(max_examples=150, deadline=None)
@given(_typed_literals(), st.floats())
def test_literals_round_trip_bit_exactly(typed_literal, any_float):
    type_, literal = typed_literal
    module = Module(
        globals=[Global("g", type_, literal), Global("h", ScalarType.F64, any_float)],
        functions=[
            Function(
                "f",
                FunctionType(),
                Region([Block((), [Const(Value(ValueId(0), type_), literal), Return()])]),
            )
        ],
    )
    assert_round_trips(module)


_NANS = [
    struct.unpack("<d", struct.pack("<Q", bits))[0]
    for bits in (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF4000000000000)
]


@pytest.mark.parametrize(
    "value", [0.0, -0.0, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, *_NANS]
)
def test_special_floats_round_trip_bit_exactly(value):
    module = Module(globals=[Global("x", ScalarType.F64, value)])
    [parsed] = parse_module(assert_round_trips(module)).globals
    assert struct.pack("<d", parsed.initializer) == struct.pack("<d", value)


@pytest.mark.parametrize(
    "type_",
    [
        TensorType(ScalarType.F32, (0,)),
        TensorType(ScalarType.I64, (2, 0, 3)),
        TensorType(ScalarType.BOOL, ()),
    ],
)
def test_zero_size_and_rank_zero_tensors_round_trip(type_):
    size = 1 if type_.shape == () else 0
    assert_round_trips(Module(globals=[Global("t", type_, b"\x01" * size)]))


def test_function_name_forms_round_trip():
    functions = [
        Function("a", FunctionType((ScalarType.F32,), ()), input_names=None),
        Function("b", FunctionType((ScalarType.F32,), ()), input_names=(None,)),
        Function(
            "c",
            FunctionType((ScalarType.F32,), (ScalarType.BOOL,)),
            input_names=("x",),
            output_names=("y",),
        ),
        Function("d", FunctionType(), input_names=(), output_names=()),
        Function("e", FunctionType((ScalarType.F32,)), input_names=("too", "many")),
        Function("f", FunctionType(), Region()),
    ]
    assert_round_trips(Module(functions=functions))
