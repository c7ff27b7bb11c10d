"""Checks the ONNX checker does not make and the frontend does (validation.py, importer.py,
converters.py): models that would otherwise import into something wrong, each refused in one
line naming the value, node or opset. Found by the hostile corpus (testdata/hostile/)."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from niro.frontends.onnx import OnnxImportError, import_model, import_model_with_info
from onnx import TensorProto, helper

from .helpers import import_text, import_verified

OPSET = '<ir_version: 8, opset_import: ["" : 17]>'


def refuse(model: onnx.ModelProto | str, message: str) -> None:
    if isinstance(model, str):
        model = onnx.parser.parse_model(OPSET + model)
    with pytest.raises(OnnxImportError, match="^" + re.escape(f"m.onnx: {message}") + "$"):
        import_model(model, filename="m.onnx")


def test_duplicate_graph_input() -> None:
    refuse("g (float x, float x) => (float y) { y = Relu(x) }", "graph 'g': input 'x' is declared twice")


def test_graph_output_listed_twice_stays_valid() -> None:
    """The ONNX checker allows it (one value returned twice); it is no redefinition."""
    function = import_text(OPSET + "g (float x) => (float y, float y) { y = Relu(x) }").module.functions[0]
    assert function.output_names == ("y", "y")


def test_negative_dim_in_a_value_info_hint_is_tolerated() -> None:
    model = onnx.parser.parse_model(OPSET + "g (float[2] x) => (float[2] y) { t = Relu(x) \n y = Relu(t) }")
    model.graph.value_info.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, [2]))
    model.graph.value_info[0].type.tensor_type.shape.dim[0].dim_value = -1
    import_verified(model)


def test_duplicate_initializer() -> None:
    refuse(
        "g (float[1] x) => (float[1] y) <float[1] w = {1.0}, float[1] w = {2.0}> { y = Add(x, w) }",
        "graph 'g': initializer 'w' is declared twice",
    )


def test_node_output_defined_twice() -> None:
    refuse("g (float x) => (float y) { y = Relu(x) \n [second] y = Neg(x) }",
           "node 'second' (Neg): output 'y' is already defined in graph 'g'")
    refuse("g (float x) => (float x) { [r] x = Relu(x) }", "node 'r' (Relu): output 'x' is already defined in graph 'g'")


def _single_input(build) -> onnx.ModelProto:
    model = onnx.parser.parse_model(OPSET + "g (float[2, 3] x) => (float y) { y = Relu(x) }")
    build(model.graph.input[0].type.tensor_type)
    return model


def test_negative_declared_dim_is_read_as_unknown() -> None:
    """PaddlePaddle declares dynamic dims as -1 (any negative value is read so), with a note."""
    model = _single_input(lambda tensor: setattr(tensor.shape.dim[0], "dim_value", -4))
    imported = import_model_with_info(model)
    assert imported.module.functions[0].type.inputs[0].shape == (None, 3)
    assert imported.notes == ("input 'x' declares shape [-4, 3]: negative dims read as unknown (dynamic)",)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == -4  # the caller's model


def test_declared_element_count_past_int64() -> None:
    def huge(tensor) -> None:
        tensor.shape.dim[0].dim_value = 2**62
        tensor.shape.dim[1].dim_value = 4

    refuse(_single_input(huge), "value 'x' (input of graph 'g'): shape [4611686018427387904, 4] has more elements than int64 can count")


def test_element_type_that_is_no_onnx_type() -> None:
    refuse(_single_input(lambda tensor: setattr(tensor, "elem_type", 999)),
           "value 'x' (input of graph 'g'): element type #999 is not an ONNX element type")
    model = onnx.parser.parse_model(OPSET + "g () => (float y) <float[1] w = {1.0}> { y = Identity(w) }")
    model.graph.initializer[0].data_type = 999
    refuse(model, "initializer 'w': element type #999 is not an ONNX element type")


def test_cast_to_no_element_type() -> None:
    refuse("g (float x) => (float y) { [cast] y = Cast <to = 9999> (x) }",
           "node 'cast' (Cast): attribute 'to' is 9999, which is no ONNX element type")
    refuse("g (float x) => (string y) { [cast] y = Cast <to = 8> (x) }",
           "node 'cast' (Cast): attribute 'to': element type STRING is not supported")


def test_loop_body_signature() -> None:
    refuse(
        """g (int64 n, float[2] x) => (float[2] y) {
          [loop] y = Loop(n, , x) <body = b (float[2] v) => (float[2] w) { w = Identity(v) }>
        }""",
        "node 'loop' (Loop): body takes 1 inputs, expected 3 (iteration number, condition, 1 loop-carried values)",
    )
    refuse(
        """g (int64 n, float[2] x) => (float[2] y) {
          [loop] y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v) => (float[2] w) { w = Identity(v) }>
        }""",
        "node 'loop' (Loop): body yields 1 outputs, expected the condition, 1 loop-carried values and "
        "a scan output for each of the node's other outputs",
    )


def test_scan_body_signature() -> None:
    refuse(
        """g (float[3] s, float[4, 3] xs) => (float[3] y) {
          [scan] y = Scan <num_scan_inputs = 1, body = b (float[3] a, float[3] e, float[3] extra) => (float[3] r) {
            r = Add(a, e) }> (s, xs)
        }""",
        "node 'scan' (Scan): body takes 3 inputs, expected 2 (1 state values, 1 scan inputs)",
    )
    refuse(
        """g (float[3] s, float[4, 3] xs) => (float[3] y) {
          [scan] y = Scan <num_scan_inputs = 5, body = b (float[3] a, float[3] e) => (float[3] r) {
            r = Add(a, e) }> (s, xs)
        }""",
        "node 'scan' (Scan): num_scan_inputs 5 does not fit its 2 state and scan inputs",
    )


def test_valid_loop_and_scan_pass_the_signature_check() -> None:
    import_text(OPSET + """g (int64 n, float[2] x) => (float[2] y) {
      y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v) => (bool c2, float[2] w) { c2 = Identity(c)
      w = Identity(v) }>
    }""")


@pytest.mark.parametrize("version", [0, 99])
def test_opset_outside_what_onnx_knows(version: int) -> None:
    model = onnx.parser.parse_model(OPSET + "g (float x) => (float y) { y = Relu(x) }")
    model.opset_import[0].version = version
    known = onnx.defs.onnx_opset_version()
    refuse(model, f"opset_import: opset {version} of the default ONNX domain is not supported (this niroc knows opsets 1 to {known})")


def test_function_opset_outside_what_onnx_knows() -> None:
    function = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                                    [helper.make_opsetid("", 99)])
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17, "local" : 1]> g (float x) => (float y) { y = local.F(x) }')
    model.functions.append(function)
    known = onnx.defs.onnx_opset_version()
    refuse(model, f"function 'F': opset_import: opset 99 of the default ONNX domain is not supported (this niroc knows opsets 1 to {known})")


def test_declared_output_contradicting_the_computed_type() -> None:
    refuse("g (float[2, 3] a) => (float[5, 7] y) { y = Add(a, a) }",
           "graph 'g': output 'y' is declared tensor<5x7xf32> but its producer computes tensor<2x3xf32>")
    refuse("g (float[2, 3] a) => (int64[2, 3] y) { y = Add(a, a) }",
           "graph 'g': output 'y' is declared tensor<2x3xi64> but its producer computes tensor<2x3xf32>")
    refuse("g (float[2, 3] a) => (float[2, 3, 1] y) { y = Add(a, a) }",
           "graph 'g': output 'y' is declared tensor<2x3x1xf32> but its producer computes tensor<2x3xf32>")


def test_declared_output_that_agrees_up_to_dynamic_dims() -> None:
    import_text(OPSET + "g (float[2, 3] a) => (float[N, 3] y) { y = Add(a, a) }")
    import_text(OPSET + "g (float[N, 3] a) => (float[2, 3] y) { y = Add(a, a) }")
    model = onnx.parser.parse_model(OPSET + "g (float[2, 3] a) => (float y) { y = Add(a, a) }")
    model.graph.output[0].type.tensor_type.ClearField("shape")  # unknown rank (`float y` is rank 0)
    import_verified(model)


def test_if_branches_with_different_element_types() -> None:
    refuse(
        """g (bool c) => (float y) {
          [choose] y = If(c) <then_branch = t () => (float[1] a) { a = Constant <value = float[1] {1.0}> () },
                              else_branch = e () => (int64[1] b) { b = Constant <value = int64[1] {1}> () }>
        }""",
        "node 'choose' (If): then_branch yields tensor<1xf32> and else_branch tensor<1xi64> for output #0: element types differ",
    )


def test_if_branch_with_inputs() -> None:
    refuse(
        """g (bool c, float[1] x) => (float y) {
          [choose] y = If(c) <then_branch = t (float[1] p) => (float[1] a) { a = Identity(x) },
                              else_branch = e () => (float[1] b) { b = Identity(x) }>
        }""",
        "node 'choose' (If): then_branch takes 1 inputs; If branches take none",
    )


def test_if_branches_of_different_shapes_stay_valid() -> None:
    import_text(OPSET + """g (bool c) => (float y) {
      y = If(c) <then_branch = t () => (float[1] a) { a = Constant <value = float[1] {1.0}> () },
                 else_branch = e () => (float[2] b) { b = Constant <value = float[2] {1.0, 2.0}> () }>
    }""")


def test_onnx_text_syntax_error_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "m.onnxtxt"
    path.write_text(OPSET + "\ng (float[2] x) => (float[2] y) {\n  y = Relu(x\n}\n")
    with pytest.raises(OnnxImportError, match="^" + re.escape(
        f"{path}: cannot parse ONNX text: line 4, column 1: Expected character ) not found. (at '}}')") + "$"):
        import_model(path)


def test_nesting_past_protobufs_limit(tmp_path: Path) -> None:
    from ...hostile.corpus import generate

    path = generate._deep_if(200)(tmp_path)
    with pytest.raises(OnnxImportError, match="^" + re.escape(
        f"{path}: not an ONNX model: it nests messages deeper than protobuf's limit of 100 (graphs nested ~30 deep)") + "$"):
        import_model(path)


@pytest.mark.parametrize("levels", [500, 5000])
def test_deeply_nested_onnx_text_never_reaches_onnxs_parser(tmp_path: Path, levels: int) -> None:
    """onnx's C++ text parser overflowed its stack (a segfault) on 5000 nested Ifs."""
    from ...hostile.corpus import generate

    path = tmp_path / "deep.onnxtxt"
    path.write_text(generate.deep_onnx_text(levels))
    with pytest.raises(OnnxImportError, match="^" + re.escape(
        f"{path}: cannot parse ONNX text: brackets nest {levels + 2} deep, more than the 200 niroc hands "
        "to onnx's parser (protobuf takes at most 100 nested messages)") + "$"):
        import_model(path)


def test_onnx_text_nesting_ignores_brackets_in_strings(tmp_path: Path) -> None:
    path = tmp_path / "strings.onnxtxt"
    path.write_text('<ir_version: 8, opset_import: ["" : 17], doc_string: "' + "{(\\\"[" * 300 + '">'
                    "\ng (float[2] x) => (float[2] y) { y = Relu(x) }\n")
    import_model(path)


def test_element_type_attributes_are_checked_only_on_known_ops() -> None:
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17, "custom" : 1]> g (float[2] x) => (float[2] y) { y = custom.Cast <to = 9999> (x) }'
    )
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    import_model(model)  # an op of another domain: its `to` means what that domain says
