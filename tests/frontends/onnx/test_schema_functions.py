"""Ops ONNX defines by a function body (schema_functions.py): with `expand_functions`, an op the
caller cannot handle becomes a Call of its specialised ONNX body; without it, an UnknownOp."""

from __future__ import annotations

import niro.ir as nir
import numpy as np

from .helpers import describe_block, import_text, main_block

SHRINK = '<ir_version: 8, opset_import: ["" : 18]> g (float[4] x) => (y) { y = Shrink <lambd = 1.5> (x) }'
ATTENTION = (
    '<ir_version: 10, opset_import: ["" : 23]>'
    " g (float[2, 3, 4, 8] q, float[2, 3, 6, 8] k, float[2, 3, 6, 8] v) => (y)"
    " { y = Attention <is_causal = 1> (q, k, v) }"
)


def test_without_a_predicate_the_op_stays_unknown() -> None:
    ops = describe_block(main_block(import_text(SHRINK)))
    assert ops[0].startswith("onnx.Shrink(tensor<4xf32>) -> (tensor<4xf32>)")


def test_an_expanded_op_is_a_call_of_its_specialised_body() -> None:
    asked = []

    def expand(name: str, opset: int) -> bool:
        asked.append((name, opset))
        return name == "onnx.Shrink"

    imported = import_text(SHRINK, expand_functions=expand)
    assert asked[0] == ("onnx.Shrink", 18)  # then the ops of its body that have bodies too
    call = main_block(imported).operations[0]
    assert isinstance(call, nir.Call) and call.loc == "Shrink_0"
    body = imported.module.get_function(call.callee)
    assert body is not None and imported.onnx_names[call.callee] == "Shrink"
    names = {nir.op_name(op) for op in nir.walk_ops(body)}
    assert "onnx.Shrink" not in names and "onnx.Where" in names
    # the call site's attribute is baked into the body: lambd = 1.5 is a constant there
    lambd = np.float32(1.5).tobytes()
    assert any(isinstance(op, nir.Const) and bytes(op.literal) == lambd for op in nir.walk_ops(body))


def test_a_declined_op_stays_unknown_and_ops_without_a_body_are_not_asked_about() -> None:
    asked = []
    text = SHRINK.replace("y = Shrink <lambd = 1.5> (x)", "t = Shrink(x)\n y = TopK(t, k)").replace(
        "(float[4] x)", "(float[4] x, int64[1] k)"
    ).replace("=> (y)", "=> (y, i)").replace("y = TopK", "y, i = TopK")
    imported = import_text(text, expand_functions=lambda name, opset: asked.append(name) or False)
    assert asked == ["onnx.Shrink"]  # TopK has no ONNX function body
    ops = describe_block(main_block(imported))
    assert ops[0].startswith("onnx.Shrink(") and ops[1].startswith("onnx.TopK(")


def test_a_context_dependent_body_returns_only_the_outputs_the_node_uses() -> None:
    imported = import_text(ATTENTION, expand_functions=lambda name, opset: name == "onnx.Attention")
    call = main_block(imported).operations[0]
    assert isinstance(call, nir.Call)
    body = imported.module.get_function(call.callee)
    assert body is not None
    assert [nir.format_type(type_) for type_ in body.type.outputs] == ["tensor<2x3x4x8xf32>"]
    assert "onnx.Softmax" in {nir.op_name(op) for op in nir.walk_ops(body)}


def test_call_sites_with_the_same_types_and_attributes_share_one_function() -> None:
    text = SHRINK.replace("y = Shrink <lambd = 1.5> (x)", "t = Shrink(x)\n u = Shrink(t)\n y = Shrink <bias = 1.0> (u)")
    imported = import_text(text, expand_functions=lambda name, opset: True)
    callees = [op.callee for op in main_block(imported).operations if isinstance(op, nir.Call)]
    assert len(callees) == 3 and callees[0] == callees[1] != callees[2]
