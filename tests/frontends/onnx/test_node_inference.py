"""Types graph inference leaves unknown, recovered at import: a node re-typed from its operands'
Niro types and constant data (node_inference.py), Scan/Loop results typed from their imported
bodies (region_types.py), and an If on a constant condition imported as its taken branch."""

from __future__ import annotations

import niro.ir as nir
import onnx

from .helpers import describe_block, import_verified, main_block

OPSET = '<ir_version: 8, opset_import: ["" : 18]>'

# The body unsqueezes with `axes`, a constant of the outer graph: ONNX types the body without
# the data of captured values, so the Unsqueeze (and all after it) come out of unknown rank.
SCAN_WITH_CAPTURED_AXES = (
    OPSET
    + " g (float[2, 3] s0, float[4, 3] xs) => (s, ys) {"
    + " axes = Constant <value_ints = [0]> ()\n"
    + " s, ys = Scan <num_scan_inputs = 1, body = body (float[2, 3] st, float[3] x) => (float[2, 3] st2, y) {"
    + " u = Unsqueeze(x, axes)\n st2 = Add(st, u)\n y = Identity(u) }> (s0, xs) }"
)


def _types(block: nir.Block) -> list[str]:
    return [", ".join(nir.format_type(v.type) for v in nir.results_of(op)) for op in block.operations]


def test_a_body_node_using_a_captured_constant_is_typed_from_its_data() -> None:
    model = onnx.parser.parse_model(SCAN_WITH_CAPTURED_AXES)
    block = main_block(import_verified(model))
    scan = next(op for op in block.operations if nir.op_name(op) == "onnx.Scan")
    body = scan.regions[0].blocks[0]
    assert describe_block(body)[0].startswith("onnx.Unsqueeze(tensor<3xf32>, tensor<1xi64>) -> (tensor<1x3xf32>)")


def test_scan_results_are_typed_from_the_imported_body() -> None:
    model = onnx.parser.parse_model(SCAN_WITH_CAPTURED_AXES)
    block = main_block(import_verified(model))
    scan = next(op for op in block.operations if nir.op_name(op) == "onnx.Scan")
    assert [nir.format_type(v.type) for v in nir.results_of(scan)] == ["tensor<2x3xf32>", "tensor<4x1x3xf32>"]


def test_an_if_on_a_constant_condition_is_its_taken_branch_inline() -> None:
    # the else branch would not even type-check (a rank-3 Reshape of 6 elements into 4): only
    # the taken branch is imported
    model = onnx.parser.parse_model(
        OPSET
        + " g (float[2, 3] x) => (y) {"
        + " s = Shape(x)\n n = Size(s)\n two = Constant <value_int = 2> ()\n c = Equal(n, two)\n"
        + " y = If(c) < then_branch = t () => (float[3, 2] o1) { o1 = Transpose(x) },"
        + " else_branch = e () => (float[1, 2, 2] o2) { bad = Constant <value_ints = [1, 2, 2]> ()\n"
        + " o2 = Reshape(x, bad) }> }"
    )
    block = main_block(import_verified(model))
    names = [nir.op_name(op) for op in block.operations]
    assert "niro.if" not in names and "onnx.If" not in names
    assert names[-2:] == ["niro.transpose", "niro.return"]
    assert _types(block)[-2] == "tensor<3x2xf32>"
