"""Golden tests, one per mapping rule, on the hand-written models in testdata/onnx/.

Each asserts on the produced Niro IR (ops, types, names, loc) through `describe`, which does not
depend on the printer's exact text; every imported module must verify.
"""

from __future__ import annotations

import struct

import niro.ir as nir
import numpy as np
import onnx
import pytest
from niro.frontends.onnx import OnnxImportError
from onnx import TensorProto, helper, numpy_helper

from .helpers import describe_block, import_text, import_verified, main_block

F32_2 = "tensor<2xf32>"


def test_constant_forms() -> None:
    imported = import_verified("constant_forms.onnxtxt")
    block = main_block(imported)
    assert describe_block(block) == [
        "niro.const() -> (tensor<2x2xf32>) @Constant_0",
        "niro.const() -> (tensor<f32>) @Constant_1",
        "niro.const() -> (tensor<3xf32>) @Constant_2",
        "niro.const() -> (tensor<i64>) @Constant_3",
        "niro.const() -> (tensor<2xi64>) @Constant_4",
        "niro.const() -> (tensor<2xf16>) @Constant_5",
        "niro.return(tensor<2x2xf32>, tensor<f32>, tensor<3xf32>, tensor<i64>, tensor<2xi64>, tensor<2xf16>) -> () @None",
    ]
    literals = [bytes(op.literal) for op in block.operations[:-1]]
    assert literals == [
        struct.pack("<4f", 1, 2, 3, 4),
        struct.pack("<f", 1.5),
        struct.pack("<3f", 1, 2, 3),
        struct.pack("<q", 7),
        struct.pack("<2q", -1, 2),
        struct.pack("<2e", 1.0, -2.0),
    ]
    function = imported.module.get_function("constants")
    assert function is not None and function.output_names == ("t", "f", "fs", "i", "is", "h")


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ('value_string = "hi"', "string constants are not supported"),
        ('value_strings = ["a"]', "string constants are not supported"),
    ],
)
def test_string_constants_are_refused(attribute: str, message: str) -> None:
    text = f'<ir_version: 8, opset_import: ["" : 17]> g () => (string s) {{ s = Constant <{attribute}> () }}'
    with pytest.raises(OnnxImportError, match=rf"^<model>: node 'Constant_0' \(Constant\): {message}"):
        import_text(text)


def test_add_mul_broadcast() -> None:
    block = main_block(import_verified("add_mul_broadcast.onnxtxt"))
    assert describe_block(block)[:3] == [
        "niro.add(tensor<?x1x4xf32>, tensor<3x1xf32>) -> (tensor<?x3x4xf32>) @Add_0",
        "niro.mul(tensor<?x3x4xf32>, tensor<3x1xf32>) -> (tensor<?x3x4xf32>) @Mul_1",
        "niro.mul(tensor<5xi32>, tensor<i32>) -> (tensor<5xi32>) @Mul_2",
    ]


def test_matmul_rank_2_only() -> None:
    block = main_block(import_verified("matmul.onnxtxt"))
    assert describe_block(block)[:2] == [
        "niro.matmul(tensor<?x3xf32>, tensor<3x5xf32>) -> (tensor<?x5xf32>) @MatMul_0",
        "onnx.MatMul(tensor<2x?x3xf32>, tensor<3x5xf32>) -> (tensor<2x?x5xf32>) @MatMul_1",
    ]


def test_transpose_default_and_explicit() -> None:
    block = main_block(import_verified("transpose.onnxtxt"))
    reverse, swap = block.operations[:2]
    assert isinstance(reverse, nir.Transpose) and reverse.permutation == (2, 1, 0)
    assert isinstance(swap, nir.Transpose) and swap.permutation == (1, 0, 2)
    assert describe_block(block)[:2] == [
        "niro.transpose(tensor<2x3x4xf32>) -> (tensor<4x3x2xf32>) @Transpose_0",
        "niro.transpose(tensor<2x3x4xf32>) -> (tensor<3x2x4xf32>) @Transpose_1",
    ]


def test_gemm_with_transposes_alpha_beta_and_bias() -> None:
    block = main_block(import_verified("gemm.onnxtxt"))
    assert describe_block(block) == [
        "niro.transpose(tensor<3x2xf32>) -> (tensor<2x3xf32>) @Gemm_0",
        "niro.transpose(tensor<4x3xf32>) -> (tensor<3x4xf32>) @Gemm_0",
        "niro.matmul(tensor<2x3xf32>, tensor<3x4xf32>) -> (tensor<2x4xf32>) @Gemm_0",
        "niro.const() -> (tensor<f32>) @Gemm_0",
        "niro.mul(tensor<2x4xf32>, tensor<f32>) -> (tensor<2x4xf32>) @Gemm_0",
        "niro.const() -> (tensor<f32>) @Gemm_0",
        "niro.mul(tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>) @Gemm_0",
        "niro.add(tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>) @Gemm_0",
        # alpha = beta = 1 and no C: no Mul, no Add
        "niro.transpose(tensor<3x2xf32>) -> (tensor<2x3xf32>) @Gemm_1",
        "niro.transpose(tensor<4x3xf32>) -> (tensor<3x4xf32>) @Gemm_1",
        "niro.matmul(tensor<2x3xf32>, tensor<3x4xf32>) -> (tensor<2x4xf32>) @Gemm_1",
        "niro.return(tensor<2x4xf32>, tensor<2x4xf32>) -> () @None",
    ]
    alpha, beta = block.operations[3], block.operations[5]
    assert bytes(alpha.literal) == struct.pack("<f", 0.5)
    assert bytes(beta.literal) == struct.pack("<f", 2.0)


def test_plain_mlp_needs_no_unknown_op() -> None:
    imported = import_verified("mlp.onnxtxt")
    ops = list(nir.walk_ops(imported.module))
    assert not any(isinstance(op, nir.UnknownOp) for op in ops)
    assert [g.name for g in imported.module.globals] == ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    assert [nir.format_type(g.type) for g in imported.module.globals] == [
        "tensor<3x4xf32>", "tensor<3xf32>", "tensor<2x3xf32>", "tensor<2xf32>",
    ]
    assert bytes(imported.module.globals[1].initializer) == struct.pack("<3f", 0.5, 0.5, 0.5)
    block = main_block(imported)
    assert describe_block(block)[:5] == [
        "niro.get_global() -> (tensor<3x4xf32>) @Gemm_0",
        "niro.get_global() -> (tensor<3xf32>) @Gemm_0",
        "niro.transpose(tensor<3x4xf32>) -> (tensor<4x3xf32>) @Gemm_0",
        "niro.matmul(tensor<?x4xf32>, tensor<4x3xf32>) -> (tensor<?x3xf32>) @Gemm_0",
        "niro.add(tensor<?x3xf32>, tensor<3xf32>) -> (tensor<?x3xf32>) @Gemm_0",
    ]
    assert imported.onnx_names["fc1_weight"] == "fc1_weight" and imported.onnx_names["mlp"] == "mlp"


def test_identity_is_the_value_itself() -> None:
    block = main_block(import_verified("identity.onnxtxt"))
    add, ret = block.operations
    argument = block.arguments[0]
    assert isinstance(add, nir.Add) and add.lhs == argument and add.rhs == argument
    assert isinstance(ret, nir.Return) and ret.operands == (argument, argument, add.result)


def test_if_extracts_the_condition_and_keeps_captures() -> None:
    imported = import_verified("if_captures.onnxtxt")
    block = main_block(imported)
    assert describe_block(block) == [
        "niro.const() -> (tensor<f32>) @Constant_0",
        "niro.const() -> (i64) @If_1",
        "niro.tensor_extract(tensor<1xi1>, i64) -> (i1) @If_1",
        "niro.if(i1) -> (tensor<2xf32>) @If_1",
        "niro.return(tensor<2xf32>) -> () @None",
    ]
    two, zero, extract, if_op, _ = block.operations
    assert zero.literal == 0 and extract.indices == (zero.result,)
    assert if_op.condition == extract.result
    flag, x = block.arguments
    then_block, else_block = if_op.then_region.blocks[0], if_op.else_region.blocks[0]
    assert then_block.arguments == () and else_block.arguments == ()
    assert describe_block(then_block) == [
        "niro.mul(tensor<2xf32>, tensor<f32>) -> (tensor<2xf32>) @Mul_0",
        "niro.yield(tensor<2xf32>) -> () @If_1",
    ]
    mul = then_block.operations[0]
    assert mul.lhs == x and mul.rhs == two.result  # captures of outer values
    assert describe_block(else_block) == [
        "niro.get_global() -> (tensor<2xf32>) @Add_0",
        "niro.add(tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>) @Add_0",
        "niro.yield(tensor<2xf32>) -> () @If_1",
    ]
    ids = [value.id for op in nir.walk_ops(imported.module) for value in nir.results_of(op)]
    assert len(ids) == len(set(ids))


def test_if_with_branches_of_different_types_stays_generic() -> None:
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[2] x, float[3] y) => (float[N] z) {
      z = If (c) <then_branch = a () => (float[2] p) { p = Identity(x) },
                  else_branch = b () => (float[3] q) { q = Identity(y) }>
    }"""
    block = main_block(import_text(text))
    unknown = block.operations[0]
    assert isinstance(unknown, nir.UnknownOp) and unknown.name == "onnx.If"
    assert unknown.attributes == {
        "regions": ("then_branch", "else_branch"),
        "niro.opset": 17,
        nir.GENERIC_REASON_ATTRIBUTE: "its branches yield different types (then_branch: tensor<2xf32>; "
        "else_branch: tensor<3xf32>)",
    }
    assert len(unknown.regions) == 2


def test_local_functions_one_per_signature() -> None:
    imported = import_verified("local_functions.onnxtxt")
    block = main_block(imported)
    calls = [op for op in block.operations if isinstance(op, nir.Call)]
    assert [(call.callee, call.loc) for call in calls] == [
        ("scale", "scale_0"),
        ("scale", "scale_1"),  # same types, same attribute value: same Function
        ("scale_1", "scale_2"),  # the default factor
        ("scale_2", "scale_3"),  # another input type
    ]
    assert [function.name for function in imported.module.functions] == ["calls", "scale", "scale_1", "scale_2"]
    assert {imported.onnx_names[name] for name in ("scale", "scale_1", "scale_2")} == {"scale"}
    factors = []
    for name in ("scale", "scale_1", "scale_2"):
        function = imported.module.get_function(name)
        assert function.input_names == ("input",) and function.output_names == ("output",)
        constant = function.first_block.operations[0]
        factors.append(struct.unpack("<f", bytes(constant.literal))[0])
    assert factors == [3.0, 2.0, 3.0]
    assert nir.format_type(imported.module.get_function("scale_2").type.inputs[0]) == "tensor<2xf64>"


def test_unknown_ops_keep_attributes_domains_and_absent_operands() -> None:
    block = main_block(import_verified("unknown_ops.onnxtxt"))
    relu, clip, fused, dropout = block.operations[:4]
    # every UnknownOp records the opset of its domain in effect (`niro.opset`)
    assert (relu.name, relu.attributes, relu.loc) == ("onnx.Relu", {"niro.opset": 17}, "Relu_0")
    assert (clip.name, clip.attributes) == ("onnx.Clip", {"absent_inputs": (1,), "niro.opset": 17})
    assert [nir.format_type(v.type) for v in clip.operands] == ["tensor<2x3xf32>", "tensor<f32>"]
    assert fused.name == "com.example.Blend" and fused.loc == "Blend_2"
    weights = fused.attributes.pop("weights")
    assert fused.attributes == {
        "alpha": 2.0, "transB": 1, "names": ("a", "b"), "scales": (1.0, 2.5), "niro.opset": 1,
    }
    assert weights["dtype"] == "f32" and weights["shape"] == (2,)
    assert bytes(weights["data"]) == struct.pack("<2f", 1.0, 2.0)
    assert (dropout.name, dropout.attributes, len(dropout.results)) == (
        "onnx.Dropout", {"absent_outputs": (1,), "niro.opset": 17}, 1,
    )


def test_loop_body_is_a_region_ending_in_yield() -> None:
    block = main_block(import_verified("loop.onnxtxt"))
    loop = block.operations[0]
    assert isinstance(loop, nir.UnknownOp) and loop.name == "onnx.Loop"
    assert loop.attributes == {"regions": ("body",), "niro.opset": 17}
    (body,) = loop.regions
    entry = body.blocks[0]
    assert [nir.format_type(a.type) for a in entry.arguments] == ["tensor<i64>", "tensor<i1>", "tensor<2xf32>"]
    assert describe_block(entry) == [
        "niro.add(tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>) @Add_1",
        "niro.yield(tensor<i1>, tensor<2xf32>) -> () @Loop_0",
    ]
    add, yield_op = entry.operations
    assert add.rhs == block.arguments[2]  # `start` captured from the outer graph
    assert yield_op.operands == (entry.arguments[1], add.result)


def test_initializers_listed_as_inputs_stay_inputs() -> None:
    imported = import_verified("old_ir_initializers.onnxtxt")
    function = imported.module.get_function("old")
    assert function.input_names == ("x", "w")
    assert imported.input_defaults == {"w": "w"}
    add = function.first_block.operations[0]
    assert add.rhs == function.first_block.arguments[1]


def test_symbol_names_are_sanitised_unique_and_mapped_back() -> None:
    weights = [numpy_helper.from_array(np.full((2,), i, np.float32), name) for i, name in
               enumerate(["fc1.weight", "fc1_weight", "1x", "main graph"])]
    nodes = [helper.make_node("Add", ["x", tensor.name], [f"y{i}"]) for i, tensor in enumerate(weights)]
    graph = helper.make_graph(
        nodes, "main graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [2]) for i in range(4)], weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_verified(model)
    assert imported.main == "main_graph"
    assert [g.name for g in imported.module.globals] == ["fc1_weight", "fc1_weight_1", "_1x", "main_graph_1"]
    assert imported.onnx_names == {
        "main_graph": "main graph", "fc1_weight": "fc1.weight", "fc1_weight_1": "fc1_weight",
        "_1x": "1x", "main_graph_1": "main graph",
    }


def test_unnamed_graph_becomes_main() -> None:
    text = '<ir_version: 8, opset_import: ["" : 17]> g (float x) => (float y) { y = Relu(x) }'
    model = onnx.parser.parse_model(text)
    model.graph.name = ""
    assert import_verified(model).main == "main"


def test_value_ids_are_unique_per_function_including_regions() -> None:
    imported = import_verified("loop.onnxtxt")
    function = imported.module.get_function(imported.main)
    ids = [a.id for a in function.first_block.arguments]
    for block in nir.walk_blocks(function):
        ids.extend(a.id for a in block.arguments if block is not function.first_block)
        for op in block.operations:
            ids.extend(v.id for v in nir.results_of(op))
    assert len(ids) == len(set(ids))


def test_integer_gemm_with_a_fractional_alpha_stays_generic() -> None:
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (int32[2, 3] a, int32[3, 4] b) => (int32[2, 4] y, int32[2, 4] z) {
      y = Gemm <alpha = 0.5> (a, b)
      z = Gemm (a, b)
    }"""
    block = main_block(import_text(text))
    assert describe_block(block)[:2] == [
        "onnx.Gemm(tensor<2x3xi32>, tensor<3x4xi32>) -> (tensor<2x4xi32>) @Gemm_0",
        "niro.matmul(tensor<2x3xi32>, tensor<3x4xi32>) -> (tensor<2x4xi32>) @Gemm_1",
    ]


def test_if_on_a_condition_of_unknown_rank_stays_generic() -> None:
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[2] x) => (float[2] y) {
      d = Identity(c)
      y = If (c) <then_branch = a () => (float[2] p) { p = Identity(x) },
                  else_branch = b () => (float[2] q) { q = Identity(x) }>
    }"""
    model = onnx.parser.parse_model(text)
    model.graph.input[0].type.tensor_type.ClearField("shape")
    block = main_block(import_verified(model))
    assert block.operations[0].name == "onnx.If"
    assert block.operations[0].attributes[nir.GENERIC_REASON_ATTRIBUTE] == "its condition tensor<*xi1> has unknown rank"


def test_a_transpose_of_unknown_rank_stays_generic_and_the_backend_says_why() -> None:
    from niro.backends.mlir import LoweringError, lower_to_mlir

    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[2, 3] x) => (y) { y = Transpose(x) }'
    )
    model.graph.input[0].type.tensor_type.ClearField("shape")
    module = import_verified(model).module
    with pytest.raises(
        LoweringError,
        match=r"1 operation has no MLIR lowering: onnx\.Transpose \(x1, first at node 'Transpose_0', kept "
        r"generic because its operand tensor<\*xf32> has unknown rank \(graph input 'x', declared without a "
        r"shape\)\)$",
    ):
        lower_to_mlir(module)


def test_the_modelled_ops_are_listed_in_one_table() -> None:
    from niro.frontends.onnx import CONVERTERS

    assert sorted(CONVERTERS) == ["Add", "Constant", "Gemm", "Identity", "If", "MatMul", "Mul", "Transpose"]


def test_a_transpose_of_unknown_rank_names_the_node_whose_output_is_untyped() -> None:
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[6] x, int64[K] s) => (y) {'
        " r = Reshape(x, s)\n y = Transpose(r) }"
    )
    block = import_verified(model).module.functions[0].body.blocks[0]
    transpose = next(op for op in block.operations if getattr(op, "name", "") == "onnx.Transpose")
    assert transpose.attributes[nir.GENERIC_REASON_ATTRIBUTE] == (
        "its operand tensor<*xf32> has unknown rank (output of node 'Reshape_0' (Reshape), which shape"
        " inference could not type)"
    )
