"""Loop body inputs that ONNX inference leaves of unknown rank take their first value's type
(region_types.py); declared ones keep their declaration."""

from __future__ import annotations

import niro.ir as nir
import onnx
from niro.frontends.onnx.region_types import refine_type
from niro.ir import ScalarType, TensorType

from .helpers import import_verified, main_block

# ONNX's own function body of Range has this shape: the body declares no input types.
UNDECLARED = """<ir_version: 8, opset_import: ["" : 17]>
g (int64 m, float[3] x, float step) => (float[3] y) {
  go = Constant <value = bool {1}> ()
  y = Loop (m, go, x) <body = body (i, c, v) => (c_out, v_out) {
    c_out = Identity (c)
    v_out = Add (v, step)
  }>
}"""


def _loop_body(text: str) -> nir.Block:
    block = main_block(import_verified(onnx.parser.parse_model(text)))
    loop = next(op for op in block.operations if nir.op_name(op) == "onnx.Loop")
    return loop.regions[0].blocks[0]


def test_undeclared_loop_body_inputs_take_their_first_values_types() -> None:
    body = _loop_body(UNDECLARED)
    assert [nir.format_type(argument.type) for argument in body.arguments] == [
        "tensor<i64>",
        "tensor<i1>",
        "tensor<3xf32>",
    ]
    (add, _) = body.operations
    assert nir.format_type(nir.results_of(add)[0].type) == "tensor<3xf32>"


def test_declared_loop_body_inputs_keep_their_declaration() -> None:
    body = _loop_body(UNDECLARED.replace("body (i, c, v)", "body (int64 i, bool c, float[N] v)"))
    assert nir.format_type(body.arguments[2].type) == "tensor<?xf32>"


def test_refine_type_fills_only_an_unknown_rank_of_the_same_element_type() -> None:
    unranked = TensorType(ScalarType.F32, None)
    known = TensorType(ScalarType.F32, (2,))
    assert refine_type(unranked, known) == known
    assert refine_type(TensorType(ScalarType.F32, (None,)), known) == TensorType(
        ScalarType.F32, (None,)
    )
    assert refine_type(unranked, TensorType(ScalarType.I32, (2,))) == unranked
    assert refine_type(unranked, None) == unranked
