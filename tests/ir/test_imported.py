"""The imported-op contract: what write_imported_op puts on an UnknownOp, read_imported_op reads
back by position, and bookkeeping that breaks the contract is refused with its attribute named."""

from __future__ import annotations

import pytest
from niro.ir import (
    ABSENT_INPUTS_ATTRIBUTE,
    ABSENT_OUTPUTS_ATTRIBUTE,
    GENERIC_REASON_ATTRIBUTE,
    OPSET_ATTRIBUTE,
    REGIONS_ATTRIBUTE,
    Block,
    ImportedOp,
    ImportedOpError,
    Region,
    ScalarType,
    UnknownOp,
    Value,
    ValueId,
    Yield,
    absent_positions,
    by_position,
    read_imported_op,
    write_imported_op,
)


def v(index: int) -> Value:
    return Value(ValueId(index), ScalarType.F32)


X, Y, Z, R0, R1 = v(0), v(1), v(2), v(10), v(11)


def body() -> Region:
    return Region([Block((), [Yield()])])


def test_write_encodes_positions_regions_and_opset_after_the_node_attributes() -> None:
    then_branch, else_branch = body(), body()
    op = write_imported_op(
        ImportedOp(
            name="onnx.Thing",
            inputs=(X, None, Y, None),
            outputs=(None, R0, R1),
            attributes={"axis": 1},
            regions={"then_branch": then_branch, "else_branch": else_branch},
            opset=17,
            generic_reason="why",
            loc="node",
        )
    )
    assert (op.name, op.operands, op.results, op.loc) == ("onnx.Thing", (X, Y), (R0, R1), "node")
    assert op.regions == (then_branch, else_branch)
    assert list(op.attributes.items()) == [
        ("axis", 1),
        (REGIONS_ATTRIBUTE, ("then_branch", "else_branch")),
        (ABSENT_INPUTS_ATTRIBUTE, (1, 3)),
        (ABSENT_OUTPUTS_ATTRIBUTE, (0,)),
        (GENERIC_REASON_ATTRIBUTE, "why"),
        (OPSET_ATTRIBUTE, 17),
    ]


def test_write_leaves_out_empty_bookkeeping() -> None:
    op = write_imported_op(ImportedOp("onnx.Relu", (X,), (R0,), opset=14))
    assert op.attributes == {OPSET_ATTRIBUTE: 14}


def test_read_gives_back_what_was_written() -> None:
    region = body()
    written = ImportedOp(
        "com.microsoft.Thing", (None, X), (R0, None), {"k": "v"}, {"body": region}, 1, None, "n"
    )
    read = read_imported_op(write_imported_op(written))
    assert (read.name, read.domain, read.op_type) == (
        "com.microsoft.Thing",
        "com.microsoft",
        "Thing",
    )
    assert (read.inputs, read.outputs, dict(read.attributes)) == ((None, X), (R0, None), {"k": "v"})
    assert (dict(read.regions), read.opset, read.generic_reason, read.loc) == (
        {"body": region},
        1,
        None,
        "n",
    )


def test_positions_of_inputs_and_outputs() -> None:
    read = read_imported_op(
        UnknownOp(
            "onnx.Clip",
            (X, Z),
            (R0,),
            {ABSENT_INPUTS_ATTRIBUTE: (1,), ABSENT_OUTPUTS_ATTRIBUTE: (1,)},
        )
    )
    assert read.inputs == (X, None, Z)
    assert [read.input(position) for position in range(5)] == [X, None, Z, None, None]
    assert [read.operand_index(position) for position in range(4)] == [0, None, 1, None]
    assert (read.absent_inputs, read.absent_outputs, read.output_positions) == ((1,), (1,), (0,))
    assert (read.output(0), read.output(1), read.output(-1)) == (R0, None, None)


def test_an_op_without_bookkeeping_reads_as_all_present() -> None:
    read = read_imported_op(UnknownOp("onnx.Relu", (X,), (R0,)))
    assert (read.inputs, read.outputs, read.opset, dict(read.regions)) == ((X,), (R0,), None, {})


@pytest.mark.parametrize(
    ("attributes", "regions", "message"),
    [
        ({ABSENT_INPUTS_ATTRIBUTE: (3,)}, (), "'absent_inputs' must be a tuple of distinct input"),
        ({ABSENT_INPUTS_ATTRIBUTE: (0, 0)}, (), "'absent_inputs' must be"),
        ({ABSENT_INPUTS_ATTRIBUTE: [0]}, (), "'absent_inputs' must be"),
        ({ABSENT_OUTPUTS_ATTRIBUTE: (True,)}, (), "'absent_outputs' must be a tuple of distinct"),
        ({}, (Region(),), "'regions' must name each of the op's 1 regions once"),
        ({REGIONS_ATTRIBUTE: ("a", "a")}, (Region(), Region()), "'regions' must name each"),
        ({REGIONS_ATTRIBUTE: (3,)}, (Region(),), "'regions' must name each"),
        ({OPSET_ATTRIBUTE: 0}, (), "'niro.opset' must be a positive int"),
        ({OPSET_ATTRIBUTE: True}, (), "'niro.opset' must be a positive int"),
        ({GENERIC_REASON_ATTRIBUTE: 1}, (), "'niro.generic_reason' must be a str"),
    ],
)
def test_read_refuses_broken_bookkeeping(attributes, regions, message) -> None:
    with pytest.raises(ImportedOpError, match=f"attribute {message}"):
        read_imported_op(UnknownOp("onnx.Thing", (X, Y), (R0,), attributes, regions))


def test_write_refuses_a_node_attribute_with_a_bookkeeping_name() -> None:
    with pytest.raises(ImportedOpError, match="has attribute 'regions', a name niroc keeps"):
        write_imported_op(ImportedOp("custom.Op", (X,), (R0,), {REGIONS_ATTRIBUTE: 1}))


def test_absent_positions_and_by_position() -> None:
    assert absent_positions((), 2) == ()
    assert absent_positions((0, 2), 1) == (0, 2)
    assert absent_positions((3,), 2) is None  # past the 3 positions
    assert absent_positions("0", 2) is None
    assert by_position((X, Y), (0, 2)) == (None, X, None, Y)
    assert by_position([X], ()) == (X,)
