"""Failures a user can meet: ops that need ranked tensors, MLIR verification failures, and the
external opt-tool hand-off (missing tool, failing pipeline)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from mlir_harness import Ids, tensor
from niro.backends.mlir import (
    BINDING,
    LoweringError,
    find_tool,
    lower_to_mlir,
    make_context,
    register_lowering,
    run_opt_tool,
    unregister_lowering,
)
from niro.ir import (
    Add,
    Block,
    Function,
    FunctionType,
    MatMul,
    Module,
    NirocError,
    Region,
    Return,
    ScalarType,
    TensorExtract,
    TensorType,
    Transpose,
    UnknownOp,
)

F32, I64 = ScalarType.F32, ScalarType.I64


def one_function(inputs, outputs, build) -> Module:
    ids = Ids()
    args = [ids(type_) for type_ in inputs]
    operations = build(ids, *args)
    body = Region([Block(tuple(args), operations)])
    return Module(functions=[Function("f", FunctionType(tuple(inputs), tuple(outputs)), body)])


UNRANKED = TensorType(F32, None)  # tensor<*xf32>


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda ids, x: [Add(result := ids(UNRANKED), x, x, loc="add_1"), Return((result,))],
            r"^@f \^bb0 op#0 \(niro\.add\) \[node 'add_1'\]: 'niro\.add' op needs a ranked tensor "
            r"result, got tensor<\*xf32>$",
        ),
        (
            lambda ids, x: [Transpose(result := ids(UNRANKED), x, (0,)), Return((result,))],
            r"^@f \^bb0 op#0 \(niro\.transpose\): 'niro\.transpose' op needs a ranked tensor "
            r"operand, got tensor<\*xf32>$",
        ),
        (
            lambda ids, x: [MatMul(result := ids(UNRANKED), x, x), Return((result,))],
            r"'niro\.matmul' op needs a ranked tensor lhs, got tensor<\*xf32>$",
        ),
        (
            lambda ids, x: [TensorExtract(result := ids(F32), x, ()), Return((result,))],
            r"'niro\.tensor_extract' op needs a ranked tensor operand, got tensor<\*xf32>$",
        ),
    ],
    ids=["add", "transpose", "matmul", "extract"],
)
def test_ops_needing_ranked_tensors_reject_unranked_ones(build, message):
    outputs = (F32,) if "extract" in message else (UNRANKED,)
    with pytest.raises(LoweringError, match=message) as caught:
        lower_to_mlir(one_function((UNRANKED,), outputs, build))
    assert not caught.value.internal  # a refusal of what the model asks, not a niroc bug


def test_unranked_tensors_pass_through_signatures():
    lowered = lower_to_mlir(one_function((UNRANKED,), (UNRANKED,), lambda ids, x: [Return((x,))]))
    text = lowered.to_text()
    assert "func.func @f(%arg0: tensor<*xf32> loc(unknown)) -> tensor<*xf32>" in text


def test_mlir_verification_failure_names_the_node():
    """A Niro-invalid module (Return type differs from the signature) that our rules accept:
    MLIR's verifier catches it and the error points at the ONNX node."""
    module = one_function(
        (tensor(F32, 2),), (tensor(F32, 3),), lambda ids, x: [Return((x,), loc="output_node")]
    )
    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(module)
    error = caught.value
    assert isinstance(error, NirocError)
    assert str(error) == (
        "node 'output_node': the lowered module fails MLIR verification: loc(\"output_node\"): "
        "type of return operand 0 ('tensor<2xf32>') doesn't match function result type "
        "('tensor<3xf32>') in function @f"
    )
    assert any("see current operation" in note for note in error.notes)
    assert error.internal  # niroc built MLIR that MLIR rejects: a bug of niroc's, not the model's


def test_a_rule_building_another_type_than_its_result_is_an_internal_error():
    """A rule whose value differs from the op's result type (e.g. more static than the result):
    the driver stops it as niroc's own failure, which the conformance runs count as a bug."""
    register_lowering("test.WrongType")(lambda ctx: [ctx.operands[0]])

    def build(ids, x):
        y = ids(tensor(F32, None))
        return [UnknownOp("test.WrongType", (x,), (y,)), Return((y,))]

    try:
        with pytest.raises(
            LoweringError,
            match=r"lowering returned tensor<2xf32> for result #0, expected tensor<\?xf32>",
        ) as caught:
            lower_to_mlir(one_function((tensor(F32, 2),), (tensor(F32, None),), build))
        assert caught.value.internal
    finally:
        unregister_lowering("test.WrongType")


def test_use_before_definition_is_a_lowering_error():
    ids = Ids()
    x = ids(F32)
    ghost = ids(F32)
    body = Region([Block((x,), [Return((ghost,))])])
    module = Module(functions=[Function("f", FunctionType((F32,), (F32,)), body)])
    with pytest.raises(
        LoweringError,
        match=r"^@f \^bb0 op#0 \(niro\.return\): 'niro\.return' op uses %1, which is not defined "
        r"before it \(is the module verified\?\)$",
    ):
        lower_to_mlir(module)


def test_bad_tensor_literal_size_is_a_lowering_error():
    from niro.ir import Const

    module = one_function(
        (),
        (tensor(F32, 2),),
        lambda ids: [Const(result := ids(tensor(F32, 2)), b"\x00" * 7, loc="c"), Return((result,))],
    )
    with pytest.raises(
        LoweringError, match=r"'niro\.const' op tensor<2xf32> needs 8 bytes of data, got 7$"
    ):
        lower_to_mlir(module)


def small_module():
    return lower_to_mlir(
        one_function(
            (tensor(F32, 2),),
            (tensor(F32, 2),),
            lambda ids, x: [Add(y := ids(tensor(F32, 2)), x, x), Return((y,))],
        )
    )


def test_opt_tool_runs_a_pass_pipeline():
    output = io.BytesIO()
    result = run_opt_tool(
        small_module(),
        pass_pipeline="builtin.module(func.func(canonicalize))",
        output_stream=output,
    )
    assert result == output.getvalue()
    assert b"linalg.generic" in result and b"func.func @f" in result


def test_opt_tool_takes_text_and_paths(tmp_path):
    text = small_module().to_text()
    assert b"func.func @f" in run_opt_tool(text)
    path = tmp_path / "m.mlir"
    path.write_text(text)
    assert b"func.func @f" in run_opt_tool(Path(path))


def test_opt_tool_failure_quotes_the_tool_and_exit_code():
    with pytest.raises(
        LoweringError, match=r"^iree-opt failed with exit code 1: .*error: .*no-such-pass"
    ):
        run_opt_tool(small_module(), pass_pipeline="builtin.module(no-such-pass)")


def test_opt_tool_rejecting_input_quotes_its_error_line():
    with pytest.raises(LoweringError) as caught:
        run_opt_tool("func.func @f() {\n  %0 = arith.addf\n}\n")
    assert caught.value.message.startswith("iree-opt failed with exit code 1: ")
    assert "error:" in caught.value.message


def test_missing_opt_tool_is_a_lowering_error():
    with pytest.raises(
        LoweringError, match=r"^cannot run 'mlir-opt-999': it is not on PATH nor next to "
    ):
        run_opt_tool(small_module(), tool="mlir-opt-999")


def test_binding_and_context_factory():
    assert BINDING in ("mlir", "iree.compiler")
    context = make_context()
    assert context.is_registered_operation("ml_program.global_load_const")
    assert not context.allow_unregistered_dialects


def test_bare_mlir_opt_finds_the_newest_versioned_tool(tmp_path, monkeypatch):
    for version in ("17", "19", "9"):
        tool = tmp_path / f"mlir-opt-{version}"
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_tool("mlir-opt") == str(tmp_path / "mlir-opt-19")
    assert find_tool("mlir-opt-17") == str(tmp_path / "mlir-opt-17")
    assert find_tool("iree-opt") is not None  # found next to the interpreter, not on PATH
