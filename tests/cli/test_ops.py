"""`niroc ops` (niroc/ops_cmd.py), in process: the listing is built from the live registries.

A lowering registered for the test (in a made-up domain, so no real op is disturbed) shows its
opset range, and `--opset` outside it is refused with exit 1.
"""

from __future__ import annotations

import json

import pytest
from niro.backends.mlir import register_lowering, registered_lowerings, unregister_lowering
from niro.frontends.onnx import CONVERTERS
from niro.frontends.onnx.oplib import schema_op_names

from niroc.cli import main
from niroc.ops_cmd import collect_op_support, find_op

NATIVE = {"Add", "Mul", "MatMul", "Transpose", "Gemm", "Identity", "Constant", "If"}


def run(capsys, *arguments: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["ops", *arguments])
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


@pytest.fixture
def frobnicate():
    """`test.domain.Frobnicate`, lowered at opsets 2 to 5 (the rule is never run)."""
    register_lowering("test.domain.Frobnicate", since=2, until=5)(lambda ctx: [])
    yield
    unregister_lowering("test.domain.Frobnicate")


def test_native_ops_are_the_frontend_converters() -> None:
    rows = collect_op_support()
    assert {row.op for row in rows if row.native} == NATIVE == set(CONVERTERS)
    assert all(row.domain == "ai.onnx" for row in rows if row.native)
    matmul = find_op(rows, "onnx.MatMul")
    assert matmul is not None and matmul.native_note.startswith("Rank-2 operands only")


def test_listing_covers_every_registered_lowering_and_every_schema_with_all() -> None:
    rows = collect_op_support()
    names = {row.name for row in rows}
    assert set(registered_lowerings()) <= names
    assert all(row.supported for row in rows)
    every = collect_op_support(include_unsupported=True)
    assert len(every) >= len(schema_op_names())
    assert not all(row.supported for row in every)


def test_plain_listing_has_one_line_per_op(capsys) -> None:
    code, out, err = run(capsys)
    lines = out.splitlines()
    rows = collect_op_support()
    assert (code, err) == (0, "")
    assert lines[0].split() == [
        "op",
        "domain",
        "lowered",
        "to",
        "MLIR",
        "at",
        "native",
        "ONNX",
        "versions",
    ]
    assert len(lines) == len(rows) + 2
    assert lines[-1] == f"{len(rows)} supported ops"
    gemm = next(line for line in lines if line.startswith("Gemm "))
    assert gemm.split()[1] == "ai.onnx" and " yes " in gemm


def test_a_lowering_shows_its_opset_range(capsys, frobnicate) -> None:
    code, out, _ = run(capsys)
    line = next(line for line in out.splitlines() if line.startswith("Frobnicate "))
    assert line.split() == ["Frobnicate", "test.domain", "opsets", "2", "to", "5", "no", "-"]
    assert code == 0


def test_checking_one_op_at_an_opset(capsys, frobnicate) -> None:
    code, out, err = run(capsys, "test.domain.Frobnicate", "--opset", "3")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "Frobnicate (test.domain): supported",
        "niro op             test.domain.Frobnicate",
        "lowered to MLIR at  opsets 2 to 5",
        "native              no",
        "ONNX versions       -",
    ]
    code, out, err = run(capsys, "Frobnicate", "--opset", "6")
    assert code == 1
    assert err == (
        "error: Frobnicate (test.domain) is not supported at opset 6: niroc lowers opsets 2 to 5\n"
    )


def test_json_is_one_object_per_op(capsys, frobnicate) -> None:
    code, out, _ = run(capsys, "--format", "json")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(records) == len(collect_op_support())
    frob = next(record for record in records if record["op"] == "Frobnicate")
    assert frob == {
        "type": "op",
        "op": "Frobnicate",
        "domain": "test.domain",
        "name": "test.domain.Frobnicate",
        "supported": True,
        "native": False,
        "native_note": "",
        "lowered": {"since": 2, "until": 5},
        "function_body": None,
        "contrib_body": False,
        "onnx_versions": [],
    }
    code, out, _ = run(capsys, "Frobnicate", "--opset", "9", "--format", "json")
    record = json.loads(out)
    assert code == 1 and record["opset"] == 9 and record["supported_at_opset"] is False


def test_onnxruntime_contrib_ops_are_listed_with_their_domain(capsys) -> None:
    """The transformer contrib ops niroc defines by bodies (contrib_functions) are supported,
    SimplifiedLayerNormalization in the default domain, where onnxruntime registers it."""
    code, out, _ = run(capsys, "--format", "json")
    records = {(record["domain"], record["op"]): record for record in map(json.loads, out.splitlines())}
    assert code == 0
    for key in [
        ("ai.onnx", "SimplifiedLayerNormalization"),
        ("com.microsoft", "GroupQueryAttention"),
        ("com.microsoft", "MatMulNBits"),
        ("com.microsoft", "SkipSimplifiedLayerNormalization"),
        ("com.microsoft", "SkipLayerNormalization"),
        ("com.microsoft", "RotaryEmbedding"),
        ("com.microsoft", "FastGelu"),
    ]:
        assert records[key]["supported"] and records[key]["contrib_body"], key
    code, out, _ = run(capsys, "MatMulNBits")
    assert code == 0 and "onnxruntime's semantics, as a body of ONNX ops" in out


def test_an_op_niroc_does_not_lower(capsys) -> None:
    code, out, err = run(capsys, "Gradient")
    assert code == 1
    assert out.splitlines()[0] == "Gradient (ai.onnx.preview.training): not supported"
    assert err == (
        "error: Gradient (ai.onnx.preview.training) is not supported: niroc has no lowering for "
        "it (ONNX defines it at opset 1)\n"
    )


def test_an_unknown_name(capsys) -> None:
    code, out, err = run(capsys, "Relux")
    assert (code, out) == (1, "")
    assert err == "error: 'Relux' is not an ONNX op niroc knows; did you mean 'Relu'?\n"


def test_opset_needs_a_name(capsys) -> None:
    code, _, err = run(capsys, "--opset", "3")
    assert code == 2
    assert "Error: --opset needs an op NAME" in err


def test_quiet_drops_the_count(capsys) -> None:
    code, out, _ = run(capsys, "-q")
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(collect_op_support()) + 1
    assert not lines[-1].endswith("supported ops")
