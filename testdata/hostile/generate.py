"""The hostile-input corpus: broken, malicious and odd-but-valid inputs for niroc, built from code.

Every case is a row of `CASES`: a name, a builder that writes the input (and any files beside it)
into a fresh folder and returns the path to give niroc, and what niroc must do with it:

- `expect="error"`: exit 1 and one stderr line `error: FILE: ...` whose text after the file
  name matches `message` (a regular expression); Niro assembly's syntax errors and verifier
  failures have the CLI's own forms (`Case.form`);
- `expect="valid"`: compile to MLIR that `iree-opt` parses.

`notes` says why a case is what it is when that is a decision (e.g. a graph output listed
twice is valid: ONNX's checker allows it).

Nothing here is committed as a binary: run `python testdata/hostile/generate.py [FOLDER]` to
write the whole corpus (default `testdata/generated/hostile/`, gitignored), one subfolder per
case; the tests build each case on its own in a temporary folder. Random bytes come from fixed
seeds, so the corpus is the same on every run. Some cases need a canary file outside the
case's folder (external data that tries to escape): `CANARY` names it, beside the folder.

This module must stay importable without niroc installed (only onnx and numpy).
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import TensorProto, helper

__all__ = ["CANARY", "CANARY_TEXT", "CASES", "Case", "build_case", "write_corpus"]

CANARY = "canary.bin"
"""A file beside each case's folder that no case may ever read (external data aims at it)."""
CANARY_TEXT = b"CANARY: niroc must never open this file\n" * 16

OPSET = 17
FLOAT = TensorProto.FLOAT


@dataclass(frozen=True)
class Case:
    """One corpus input and the outcome niroc owes it (see the module docstring)."""

    name: str
    build: Callable[[Path], Path]
    expect: str  # "error" | "valid"
    message: str = ""  # regex for the error text after `FILE: ` (see `form`)
    form: str = "line"  # "line": `error: FILE: message`; "parse": `FILE:L:C: error: message` + source
    # + caret (Niro assembly); "verify": `FILE: error: <diagnostic matching message>` lines, then
    # `error: FILE: verification failed (N errors)`
    arguments: tuple[str, ...] = ()  # extra niroc arguments (e.g. --allow-unknown)
    mlir_contains: tuple[str, ...] = ()  # substrings the MLIR output must hold (valid cases)
    slow: bool = False  # big inputs: the test allows a longer timeout
    notes: str = ""
    tags: frozenset[str] = field(default_factory=frozenset)  # "lowering": fails after verification


# -- model builders ------------------------------------------------------------------------------


def _model(
    nodes,
    inputs,
    outputs,
    initializers=(),
    *,
    name: str = "g",
    opset: int = OPSET,
    extra_opsets: dict[str, int] | None = None,
    functions=(),
    ir_version: int = 8,
) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(domain, version) for domain, version in (extra_opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = ir_version
    return model


def _tensor_value(name: str, elem_type: int = FLOAT, shape=(2, 3)) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, None if shape is None else list(shape))


def _relu_model() -> onnx.ModelProto:
    """A small valid model with an inline weight (the base for truncation and mutation)."""
    weight = helper.make_tensor("w", FLOAT, [2, 3], [float(index) for index in range(6)])
    return _model(
        [helper.make_node("Add", ["x", "w"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu")],
        [_tensor_value("x")],
        [_tensor_value("y")],
        [weight],
    )


def _save(model: onnx.ModelProto, folder: Path, name: str = "model.onnx") -> Path:
    path = folder / name
    path.write_bytes(model.SerializeToString())
    return path


def _writes(model_factory: Callable[[], onnx.ModelProto], name: str = "model.onnx") -> Callable[[Path], Path]:
    return lambda folder: _save(model_factory(), folder, name)


def _bytes(data: bytes, name: str = "model.onnx") -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path

    return build


def _text(text: str, name: str) -> Callable[[Path], Path]:
    return _bytes(text.encode("utf-8"), name)


# -- files that are not models -------------------------------------------------------------------


def _random_bytes(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _truncated(fraction: float) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        data = _relu_model().SerializeToString()
        return _bytes(data[: int(len(data) * fraction)])(folder)

    return build


def _no_graph() -> onnx.ModelProto:
    model = onnx.ModelProto(ir_version=8, producer_name="hostile")
    model.opset_import.add(domain="", version=OPSET)
    return model


# -- structure -----------------------------------------------------------------------------------


def _undefined_input() -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [_tensor_value("x")], [_tensor_value("y")])


def _missing_input() -> onnx.ModelProto:
    return _model([helper.make_node("Add", ["x", ""], ["y"], name="add")], [_tensor_value("x")], [_tensor_value("y")])


def _cycle() -> onnx.ModelProto:
    return _model(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="first"),
            helper.make_node("Relu", ["a"], ["b"], name="second"),
        ],
        [_tensor_value("x")],
        [_tensor_value("b")],
    )


def _duplicate_value() -> onnx.ModelProto:
    return _model(
        [
            helper.make_node("Relu", ["x"], ["y"], name="one"),
            helper.make_node("Neg", ["x"], ["y"], name="two"),
        ],
        [_tensor_value("x")],
        [_tensor_value("y")],
    )


def _node_shadows_input() -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["x"], name="r")], [_tensor_value("x")], [_tensor_value("x")])


def _duplicate_initializer() -> onnx.ModelProto:
    first = helper.make_tensor("w", FLOAT, [2, 3], [1.0] * 6)
    second = helper.make_tensor("w", FLOAT, [2, 3], [2.0] * 6)
    return _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_tensor_value("x")], [_tensor_value("y")], [first, second]
    )


def _duplicate_output() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], [_tensor_value("x")], [_tensor_value("y"), _tensor_value("y")]
    )


def _node_outputs_same_name() -> onnx.ModelProto:
    node = helper.make_node("Split", ["x"], ["y", "y"], name="split", axis=1, num_outputs=2)
    return _model([node], [_tensor_value("x", shape=(2, 4))], [_tensor_value("y", shape=None)], opset=18)


def _duplicate_input() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], [_tensor_value("x"), _tensor_value("x")], [_tensor_value("y")]
    )


# -- tensors -------------------------------------------------------------------------------------


def _with_initializer(tensor: onnx.TensorProto, shape=(2, 3)) -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["x", tensor.name], ["y"], name="add")],
        [_tensor_value("x", shape=shape)],
        [_tensor_value("y", shape=None)],
        [tensor],
    )


def _raw_wrong_length() -> onnx.ModelProto:
    tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[2, 3], raw_data=b"\0" * 20)
    return _with_initializer(tensor)


def _raw_and_typed_data() -> onnx.ModelProto:
    """raw_data says zeros, float_data says ones: which is the weight? (ONNX's checker refuses it)."""
    tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[2, 3], raw_data=b"\0" * 24, float_data=[1.0] * 6)
    return _with_initializer(tensor)


def _constant_raw_and_typed_data() -> onnx.ModelProto:
    value = onnx.TensorProto(name="v", data_type=TensorProto.INT64, dims=[1], raw_data=b"\0" * 8, int64_data=[1])
    return _model(
        [helper.make_node("Constant", [], ["c"], name="const", value=value), helper.make_node("Cast", ["c"], ["f"], name="cast", to=FLOAT), helper.make_node("Add", ["x", "f"], ["y"], name="add")],
        [_tensor_value("x", shape=(1,))],
        [_tensor_value("y", shape=None)],
    )


def _negative_dim_initializer() -> onnx.ModelProto:
    tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[-2, 3])
    return _with_initializer(tensor)


def _negative_dim_input() -> onnx.ModelProto:
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_tensor_value("x")], [_tensor_value("y", shape=None)])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -4
    return model


def _overflow_dims_initializer() -> onnx.ModelProto:
    tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[2**40, 2**40, 2**40], raw_data=b"\0" * 4)
    return _with_initializer(tensor, shape=(1,))


def _overflow_dims_input() -> onnx.ModelProto:
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_tensor_value("x", shape=(1,))], [_tensor_value("y", shape=None)])
    dims = model.graph.input[0].type.tensor_type.shape
    dims.ClearField("dim")
    for _ in range(3):
        dims.dim.add().dim_value = 2**62
    return model


def _huge_no_data() -> onnx.ModelProto:
    """A declared 4 TiB initializer with no data at all: refusing it must not allocate it."""
    tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[1 << 20, 1 << 20])
    return _with_initializer(tensor, shape=(1,))


def _huge_constant() -> onnx.ModelProto:
    """A Constant node declaring a 4 TiB value with no data."""
    value = onnx.TensorProto(name="v", data_type=FLOAT, dims=[1 << 20, 1 << 20])
    return _model(
        [helper.make_node("Constant", [], ["c"], name="const", value=value), helper.make_node("Add", ["x", "c"], ["y"], name="add")],
        [_tensor_value("x", shape=(1,))],
        [_tensor_value("y", shape=None)],
    )


def _huge_external(folder: Path) -> Path:
    """A declared 4 TiB external weight backed by a 16-byte file."""
    (folder / "weights.bin").write_bytes(b"\0" * 16)
    tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[1 << 20, 1 << 20])
    _external(tensor, "weights.bin")
    return _save(_with_initializer(tensor, shape=(1,)), folder)


def _elem_type_input(elem_type: int) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        model = _model([helper.make_node("Identity", ["x"], ["y"], name="id")], [_tensor_value("x")], [_tensor_value("y")])
        model.graph.input[0].type.tensor_type.elem_type = elem_type
        model.graph.output[0].type.tensor_type.elem_type = elem_type
        return model

    return build


def _elem_type_initializer(elem_type: int) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        tensor = onnx.TensorProto(name="w", data_type=elem_type, dims=[2], raw_data=b"\0" * 2)
        return _model(
            [helper.make_node("Identity", ["w"], ["y"], name="id")], [], [_tensor_value("y", shape=None)], [tensor]
        )

    return build


# -- attributes and ops --------------------------------------------------------------------------


def _cast_to(target: int) -> onnx.ModelProto:
    return _model([helper.make_node("Cast", ["x"], ["y"], name="cast", to=target)], [_tensor_value("x")], [_tensor_value("y", shape=None)])


def _transpose_perm_floats() -> onnx.ModelProto:
    node = helper.make_node("Transpose", ["x"], ["y"], name="t")
    node.attribute.append(helper.make_attribute("perm", [1.0, 0.0]))
    return _model([node], [_tensor_value("x")], [_tensor_value("y", shape=None)])


def _gemm_alpha_string() -> onnx.ModelProto:
    node = helper.make_node("Gemm", ["a", "b"], ["y"], name="gemm")
    node.attribute.append(helper.make_attribute("alpha", "two"))
    return _model([node], [_tensor_value("a", shape=(2, 3)), _tensor_value("b", shape=(3, 4))], [_tensor_value("y", shape=None)])


def _transpose_perm_out_of_range() -> onnx.ModelProto:
    node = helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 7])
    return _model([node], [_tensor_value("x")], [_tensor_value("y", shape=None)])


def _custom_domain() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.acme", level=3)],
        [_tensor_value("x")],
        [_tensor_value("y")],
        extra_opsets={"com.acme": 2},
    )


def _legacy_broadcast() -> onnx.ModelProto:
    """Add-1 broadcasting B along `axis` (not NumPy-style): Niro's Add must not take it."""
    node = helper.make_node("Add", ["a", "b"], ["y"], name="add", broadcast=1, axis=0)
    return _model(
        [node], [_tensor_value("a", shape=(2, 3)), _tensor_value("b", shape=(2,))], [_tensor_value("y", shape=(2, 3))], opset=1
    )


def _opset(version: int) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        return _model(
            [helper.make_node("Add", ["x", "x"], ["y"], name="add")], [_tensor_value("x")], [_tensor_value("y")], opset=version
        )

    return build


# -- control flow and functions ------------------------------------------------------------------


def _branch(name: str, outputs: list[tuple[str, int]]) -> onnx.GraphProto:
    nodes = []
    values = []
    for output, elem_type in outputs:
        value = helper.make_tensor(f"{output}_value", elem_type, [1], [1])
        nodes.append(helper.make_node("Constant", [], [output], value=value))
        values.append(_tensor_value(output, elem_type, shape=(1,)))
    return helper.make_graph(nodes, name, [], values)


def _if_model(then_outputs, else_outputs, outputs) -> onnx.ModelProto:
    node = helper.make_node(
        "If", ["c"], [name for name, _ in outputs], name="choose",
        then_branch=_branch("then", then_outputs), else_branch=_branch("else", else_outputs),
    )
    return _model([node], [_tensor_value("c", TensorProto.BOOL, shape=())], [_tensor_value(name, t, shape=None) for name, t in outputs])


def _if_count() -> onnx.ModelProto:
    return _if_model([("a", FLOAT), ("b", FLOAT)], [("a", FLOAT)], [("y", FLOAT), ("z", FLOAT)])


def _if_type() -> onnx.ModelProto:
    return _if_model([("a", FLOAT)], [("a", TensorProto.INT64)], [("y", FLOAT)])


def _loop_body_wrong() -> onnx.ModelProto:
    """A Loop body with one input (ONNX requires iteration number, condition, then the carried values)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["v"], ["v_out"])],
        "body",
        [_tensor_value("v", shape=(2, 3))],
        [_tensor_value("v_out", shape=(2, 3))],
    )
    node = helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)
    return _model([node], [_tensor_value("n", TensorProto.INT64, shape=()), _tensor_value("x")], [_tensor_value("y", shape=None)])


def _scan_body_wrong() -> onnx.ModelProto:
    """A Scan body taking three inputs for a node with one state value and one scan input."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "e"], ["s_out"])],
        "body",
        [_tensor_value("s", shape=(3,)), _tensor_value("e", shape=(3,)), _tensor_value("extra", shape=(3,))],
        [_tensor_value("s_out", shape=(3,))],
    )
    node = helper.make_node("Scan", ["s0", "xs"], ["s_final"], name="scan", body=body, num_scan_inputs=1)
    return _model(
        [node], [_tensor_value("s0", shape=(3,)), _tensor_value("xs", shape=(4, 3))], [_tensor_value("s_final", shape=None)]
    )


def _function(name: str, body_op: str, inputs=("a",), domain: str = "local") -> onnx.FunctionProto:
    return helper.make_function(
        domain, name, list(inputs), ["b"], [helper.make_node(body_op, [inputs[0]], ["b"], domain=domain if body_op != "Relu" else "")],
        [helper.make_opsetid("", OPSET), helper.make_opsetid(domain, 1)],
    )


def _recursive_function() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Again", ["x"], ["y"], name="call", domain="local")],
        [_tensor_value("x")], [_tensor_value("y", shape=None)],
        extra_opsets={"local": 1}, functions=[_function("Again", "Again")],
    )


def _mutual_recursion() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Ping", ["x"], ["y"], name="call", domain="local")],
        [_tensor_value("x")], [_tensor_value("y", shape=None)],
        extra_opsets={"local": 1}, functions=[_function("Ping", "Pong"), _function("Pong", "Ping")],
    )


def _function_arity() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Act", ["x", "x", "x"], ["y"], name="call", domain="local")],
        [_tensor_value("x")], [_tensor_value("y", shape=None)],
        extra_opsets={"local": 1}, functions=[_function("Act", "Relu")],
    )


def _function_outputs() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Act", ["x"], ["y", "z"], name="call", domain="local")],
        [_tensor_value("x")], [_tensor_value("y", shape=None)],
        extra_opsets={"local": 1}, functions=[_function("Act", "Relu")],
    )


def _length_delimited(field_number: int, body: bytes) -> bytes:
    """One protobuf field of wire type 2 (a submessage), encoded by hand."""
    key = (field_number << 3) | 2
    out = bytearray()
    for value in (key, len(body)):
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out) + body


def _deep_if(levels: int) -> Callable[[Path], Path]:
    """`levels` Ifs, each in the then-branch of the one above; the innermost yields the input.

    Python's protobuf refuses to build messages nested past 100 levels, so each level is
    encoded by hand: serialized messages concatenate into one (a repeated field appends), and
    the nested then-branch attribute is appended to its If node's bytes."""

    def build(folder: Path) -> Path:
        graph = helper.make_graph([helper.make_node("Identity", ["x"], [f"out{levels}"])], f"then{levels}", [], [_tensor_value(f"out{levels}")])
        graph_bytes = graph.SerializeToString()
        for level in range(levels, 0, -1):
            else_graph = helper.make_graph(
                [helper.make_node("Identity", ["x"], [f"else{level}"])], f"else{level}", [], [_tensor_value(f"else{level}")]
            )
            node = helper.make_node("If", ["c"], [f"out{level - 1}"], name=f"if{level}", else_branch=else_graph)
            attribute = onnx.AttributeProto(name="then_branch", type=onnx.AttributeProto.GRAPH).SerializeToString()
            attribute += _length_delimited(6, graph_bytes)  # AttributeProto.g
            node_bytes = node.SerializeToString() + _length_delimited(5, attribute)  # NodeProto.attribute
            if level > 1:
                outer = helper.make_graph([], f"then{level - 1}", [], [_tensor_value(f"out{level - 1}")])
                graph_bytes = outer.SerializeToString() + _length_delimited(1, node_bytes)  # GraphProto.node
        model = _model([], [_tensor_value("c", TensorProto.BOOL, shape=()), _tensor_value("x")], [_tensor_value("out0")])
        main = model.graph.SerializeToString() + _length_delimited(1, node_bytes)
        model.ClearField("graph")
        return _bytes(model.SerializeToString() + _length_delimited(7, main))(folder)  # ModelProto.graph

    return build


def _long_vector() -> onnx.ModelProto:
    """A 1-D input of 2**31 floats into a Mul: ONNX's data propagation would materialise every
    element (minutes, then out of memory); niroc infers it without."""
    return _model(
        [helper.make_node("Mul", ["x", "x"], ["y"], name="mul")],
        [_tensor_value("x", shape=(2**31,))],
        [_tensor_value("y", shape=(2**31,))],
    )


def _many_inputs(count: int) -> onnx.ModelProto:
    inputs = [_tensor_value(f"x{index}", shape=(1,)) for index in range(count)]
    return _model([helper.make_node("Relu", ["x0"], ["y"], name="r")], inputs, [_tensor_value("y", shape=(1,))])


def _long_names() -> onnx.ModelProto:
    long = "n" * 100_000
    return _model(
        [helper.make_node("Add", [long + "x", long + "x"], [long + "y"], name=long)],
        [_tensor_value(long + "x")],
        [_tensor_value(long + "y")],
        name="g" + long,
    )


def _long_name_error() -> onnx.ModelProto:
    long = "n" * 100_000
    return _model(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name=long)],
        [_tensor_value("a", shape=(2, 3)), _tensor_value("b", shape=(4, 5))],
        [_tensor_value("y", shape=None)],
    )


def _non_utf8_name(folder: Path) -> Path:
    """A node name with the bytes FF FE (protobuf does not check proto2 strings on write)."""
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="QQQQ")], [_tensor_value("x")], [_tensor_value("y")])
    data = model.SerializeToString().replace(b"QQQQ", b"Q\xff\xfeQ")
    return _bytes(data)(folder)


def _non_utf8_value(folder: Path) -> Path:
    model = _model([helper.make_node("Relu", ["xQQQ"], ["y"], name="r")], [_tensor_value("xQQQ")], [_tensor_value("y")])
    data = model.SerializeToString().replace(b"xQQQ", b"x\xc3\x28Q")
    return _bytes(data)(folder)


SPECIAL = 'a"b\\c%d@e^f#g{h}i\nj\tk<l>m!n\x00o'
"""Characters MLIR's syntax gives a meaning to (and a NUL and control characters)."""


def _special_names(special: str) -> Callable[[], onnx.ModelProto]:
    def build() -> onnx.ModelProto:
        return _model(
            [
                helper.make_node("Add", [special + "x", special + "w"], [special + "s"], name=special + "node"),
                helper.make_node("Relu", [special + "s"], [special + "y"], name=special + "relu"),
            ],
            [_tensor_value(special + "x")],
            [_tensor_value(special + "y")],
            [helper.make_tensor(special + "w", FLOAT, [2, 3], [1.0] * 6)],
            name=special + "graph",
        )

    return build


def _special_custom_op() -> onnx.ModelProto:
    """An unknown op whose domain and type hold MLIR-special characters (kept with --allow-unknown)."""
    return _model(
        [helper.make_node('Fro"b{n}', ["x"], ["y"], name="frob", domain='com.a"c\\me')],
        [_tensor_value("x")],
        [_tensor_value("y")],
        extra_opsets={'com.a"c\\me': 1},
    )


# -- external data -------------------------------------------------------------------------------


def _external(tensor: onnx.TensorProto, location: str, **fields: str) -> None:
    tensor.data_location = TensorProto.EXTERNAL
    tensor.ClearField("raw_data")
    for key, value in {"location": location, **fields}.items():
        entry = tensor.external_data.add()
        entry.key = key
        entry.value = value


def _external_case(location: str | Callable[[Path], str], setup: Callable[[Path], None] | None = None, **fields: str):
    def build(folder: Path) -> Path:
        if setup is not None:
            setup(folder)
        tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[2, 3])
        _external(tensor, location(folder) if callable(location) else location, **fields)
        return _save(_with_initializer(tensor), folder)

    return build


def _weights(folder: Path) -> None:
    (folder / "weights.bin").write_bytes(b"\0" * 24)


def _symlink_out(folder: Path) -> None:
    os.symlink(os.path.join("..", CANARY), folder / "link.bin")


def _symlink_device(folder: Path) -> None:
    os.symlink("/dev/zero", folder / "zero.bin")


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / "pipe.bin")


def _folder_as_weights(folder: Path) -> None:
    (folder / "weights.bin").mkdir()


# -- text inputs ---------------------------------------------------------------------------------

BROKEN_NIRO = """niro.func @main(f32) -> (f32) {
^bb0(%0: f32):
  %1 = niro.add %0, %0 : f32 f32
  niro.return %1 : f32
"""

BAD_SHAPES_NIRO = """niro.func @main(tensor<2x3xf32>, tensor<4x5xf32>) -> (tensor<2x5xf32>) {
^bb0(%0: tensor<2x3xf32>, %1: tensor<4x5xf32>):
  %2 = niro.matmul %0, %1 : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  niro.return %2 : tensor<2x5xf32>
}
"""

BROKEN_ONNXTXT = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2] x) => (float[2] y) {\n  y = Relu(x\n}\n"


def deep_onnx_text(levels: int) -> str:
    """ONNX text with `levels` Ifs, each in the then-branch of the last (onnx's C++ text parser
    recurses per level: 5000 levels overflowed its stack, a segfault)."""
    inner = "out = Identity(x)"
    for level in range(levels):
        inner = (
            f"out = If(c) <then_branch = t{level} () => (float[2] out) {{ {inner} }}, "
            f"else_branch = e{level} () => (float[2] out) {{ out = Identity(x) }}>"
        )
    return '<ir_version: 8, opset_import: ["" : 17]>\ng (bool c, float[2] x) => (float[2] out) {\n' + inner + "\n}\n"


def deep_niro(levels: int) -> str:
    """Niro assembly with `levels` nested niro.if ops (each in the then-region of the last)."""
    tensor = "tensor<2x3xf32>"
    head = [f'niro.func @main(tensor<i1>, {tensor}) -> ({tensor}) {{', f"^bb0(%0: tensor<i1>, %1: {tensor}):"]
    tail = [f"  niro.return %3 : {tensor}", "}"]
    opening, closing = [], []
    for level in range(1, levels + 1):
        condition, result = 2 * level, 2 * level + 1
        opening.append(f"  %{condition} = niro.tensor_extract %0[] : (tensor<i1>) -> i1")
        opening.append(f"  %{result} = niro.if %{condition} : (i1) -> {tensor} {{")
        inner = f"%{result + 2}" if level < levels else "%1"
        closing.append(f"  niro.yield {inner} : {tensor}\n}} else {{\n  niro.yield %1 : {tensor}\n}}")
    return "\n".join([*head, *opening, *reversed(closing), *tail]) + "\n"


# -- semantic checks -----------------------------------------------------------------------------


def _broadcast_mismatch() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["a", "b"], ["y"], name="add")],
        [_tensor_value("a", shape=(2, 3)), _tensor_value("b", shape=(4, 3))],
        [_tensor_value("y", shape=None)],
    )


def _matmul_mismatch() -> onnx.ModelProto:
    return _model(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
        [_tensor_value("a", shape=(2, 3)), _tensor_value("b", shape=(4, 5))],
        [_tensor_value("y", shape=None)],
    )


def _declared_output_contradicts() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["a", "a"], ["y"], name="add")],
        [_tensor_value("a", shape=(2, 3))],
        [_tensor_value("y", shape=(5, 7))],
    )


def _declared_output_elem_type() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["a", "a"], ["y"], name="add")],
        [_tensor_value("a", shape=(2, 3))],
        [_tensor_value("y", TensorProto.INT64, shape=(2, 3))],
    )


# -- valid edge cases ----------------------------------------------------------------------------


def _zero_size() -> onnx.ModelProto:
    weight = helper.make_tensor("w", FLOAT, [0, 3], [])
    return _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [_tensor_value("x", shape=(0, 3))], [_tensor_value("y", shape=(0, 3))], [weight],
    )


def _rank0() -> onnx.ModelProto:
    weight = helper.make_tensor("w", FLOAT, [], [2.5])
    return _model(
        [helper.make_node("Mul", ["x", "w"], ["y"], name="mul")],
        [_tensor_value("x", shape=())], [_tensor_value("y", shape=())], [weight],
    )


def _dynamic_dims() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["x", "x"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu")],
        [_tensor_value("x", shape=("N", 3))], [_tensor_value("y", shape=("N", 3))],
    )


def _input_is_initializer() -> onnx.ModelProto:
    weight = helper.make_tensor("w", FLOAT, [2, 3], [1.0] * 6)
    return _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [_tensor_value("x"), _tensor_value("w")], [_tensor_value("y")], [weight], ir_version=3,
    )


def _empty_graph() -> onnx.ModelProto:
    return _model([], [_tensor_value("x"), _tensor_value("z", TensorProto.INT64, shape=(4,))],
                  [_tensor_value("z", TensorProto.INT64, shape=(4,)), _tensor_value("x")])


# -- the table -----------------------------------------------------------------------------------

_UTF8 = "is not valid UTF-8"
_LOWERING = frozenset({"lowering"})
_TEXT_TOO_DEEP = (
    "cannot parse ONNX text: brackets nest {} deep, more than the 200 niroc hands to onnx's parser "
    "\\(protobuf takes at most 100 nested messages\\)"
)
_CORRUPT = "not an ONNX model: Error parsing message with type 'onnx.ModelProto': Wire format was corrupt"

CASES: tuple[Case, ...] = (
    # files that are not models
    Case("empty_file", _bytes(b""), "error", "not an ONNX model: it has no graph"),
    Case("random_bytes", _bytes(_random_bytes(1, 4096)), "error", _CORRUPT),
    Case("random_bytes_protobuf_tag", _bytes(b"\x08" + _random_bytes(2, 4096)), "error", _CORRUPT),
    Case("random_text_onnxtxt", _bytes(_random_bytes(3, 512), "model.onnxtxt"), "error", "cannot read model: 'utf-8' codec can't decode byte 0x[0-9a-f]+ in position \\d+: .*"),
    *(
        Case(f"truncated_{int(fraction * 100)}pct", _truncated(fraction), "error", _CORRUPT)
        for fraction in (0.1, 0.35, 0.5, 0.8, 0.97)
    ),
    Case("tensor_as_model", _bytes(helper.make_tensor("t", FLOAT, [2], [1.0, 2.0]).SerializeToString()), "error", _CORRUPT),
    Case("graph_as_model", lambda folder: _bytes(_relu_model().graph.SerializeToString())(folder), "error", "not an ONNX model: it has no graph"),
    Case("no_graph", _writes(_no_graph), "error", "not an ONNX model: it has no graph"),
    # structure
    Case("undefined_input", _writes(_undefined_input), "error", "node 'r' \\(Relu\\): input 'ghost' is not defined before the node"),
    Case("missing_required_input", _writes(_missing_input), "error", "node 'add' \\(Add\\): required input #1 \\('B'\\) is missing"),
    Case("cycle", _writes(_cycle), "error", "node 'first' \\(Add\\): input 'b' is not defined before the node"),
    Case("duplicate_value_name", _writes(_duplicate_value), "error", "node 'two' \\(Neg\\): output 'y' is already defined in graph 'g'"),
    Case("node_output_shadows_input", _writes(_node_shadows_input), "error", "node 'r' \\(Relu\\): output 'x' is already defined in graph 'g'"),
    Case("duplicate_initializer", _writes(_duplicate_initializer), "error", "graph 'g': initializer 'w' is declared twice"),
    Case("node_outputs_same_name", _writes(_node_outputs_same_name), "error", "node 'split' \\(Split\\): output 'y' is already defined in graph 'g'"),
    Case("graph_output_listed_twice", _writes(_duplicate_output), "valid", notes="the ONNX checker allows it: one value returned twice"),
    Case("duplicate_input_name", _writes(_duplicate_input), "error", "graph 'g': input 'x' is declared twice"),
    # tensors
    Case("raw_data_wrong_length", _writes(_raw_wrong_length), "error", "initializer 'w': has 20 bytes of raw data, expected 24 for tensor<2x3xf32>"),
    Case("raw_and_typed_data", _writes(_raw_and_typed_data), "error", "initializer 'w': sets both raw_data and float_data; a tensor holds its data in one field"),
    Case("constant_raw_and_typed_data", _writes(_constant_raw_and_typed_data), "error", "node 'const' \\(Constant\\): attribute 'value': sets both raw_data and int64_data; a tensor holds its data in one field"),
    Case("negative_dim_initializer", _writes(_negative_dim_initializer), "error", "initializer 'w': has a negative dimension in \\[-2, 3\\]"),
    # A negative declared dim is how PaddlePaddle exports a dynamic one: read as unknown.
    Case("negative_dim_input", _writes(_negative_dim_input), "valid", arguments=("--quiet",), mlir_contains=("tensor<?x",)),
    Case("overflow_dims_initializer", _writes(_overflow_dims_initializer), "error", "initializer 'w': has 4 bytes of raw data, expected 5316911983139663491615228241121378304 for tensor<1099511627776x1099511627776x1099511627776xf32>"),
    Case("overflow_dims_input", _writes(_overflow_dims_input), "error", "value 'x' \\(input of graph 'g'\\): shape \\[4611686018427387904, 4611686018427387904, 4611686018427387904\\] has more elements than int64 can count"),
    Case("huge_declared_no_data", _writes(_huge_no_data), "error", "initializer 'w': has no data \\(tensor<1048576x1048576xf32> needs 1099511627776 elements\\)"),
    Case("huge_declared_constant", _writes(_huge_constant), "error", "node 'const' \\(Constant\\): attribute 'value': has no data \\(tensor<1048576x1048576xf32> needs 1099511627776 elements\\)"),
    Case("huge_declared_external", _huge_external, "error", "initializer 'w': external data in 'weights.bin' runs past the end of the file: offset 0 \\+ 4398046511104 bytes > 16 bytes"),
    Case("unsupported_elem_type_input", _writes(_elem_type_input(TensorProto.COMPLEX64)), "error", "value 'x' \\(input of graph 'g'\\): element type COMPLEX64 is not supported"),
    Case("unsupported_elem_type_initializer", _writes(_elem_type_initializer(TensorProto.FLOAT6E2M3)), "error", "initializer 'w': element type FLOAT6E2M3 is not supported"),
    Case("out_of_range_elem_type_input", _writes(_elem_type_input(999)), "error", "value 'x' \\(input of graph 'g'\\): element type #999 is not an ONNX element type"),
    Case("out_of_range_elem_type_initializer", _writes(_elem_type_initializer(999)), "error", "initializer 'w': element type #999 is not an ONNX element type"),
    Case("undefined_elem_type_input", _writes(_elem_type_input(0)), "error", "value 'x' \\(input of graph 'g'\\): element type is unknown \\(shape inference could not type it\\)"),
    # attributes and ops
    Case("cast_to_9999", _writes(lambda: _cast_to(9999)), "error", "node 'cast' \\(Cast\\): attribute 'to' is 9999, which is no ONNX element type"),
    Case("cast_to_string", _writes(lambda: _cast_to(TensorProto.STRING)), "error", "node 'cast' \\(Cast\\): attribute 'to': element type STRING is not supported"),
    Case("transpose_perm_floats", _writes(_transpose_perm_floats), "error", "node 't' \\(Transpose\\): attribute 'perm' must be a list of ints, got FLOATS"),
    Case("transpose_perm_out_of_range", _writes(_transpose_perm_out_of_range), "error", "node 't' \\(Transpose\\): perm \\[0, 7\\] is not a permutation of the 2 dims of tensor<2x3xf32>"),
    Case("gemm_alpha_string", _writes(_gemm_alpha_string), "error", "node 'gemm' \\(Gemm\\): attribute 'alpha' must be a float, got STRING"),
    Case("custom_domain_refused", _writes(_custom_domain), "error", "1 operation has no MLIR lowering: com\\.acme\\.Frobnicate \\(x1, first at node 'frob'\\)", tags=_LOWERING),
    Case("custom_domain_kept", _writes(_custom_domain), "valid", arguments=("--allow-unknown",), mlir_contains=('"com.acme.Frobnicate"',)),
    Case("custom_domain_special_chars", _writes(_special_custom_op), "valid", arguments=("--allow-unknown",)),
    Case("opset_1", _writes(_opset(1)), "valid"),
    Case("opset_1_legacy_broadcast", _writes(_legacy_broadcast), "error", ".*\\[node 'add'\\]: 'onnx.Add' op legacy broadcasting with axis=0 .*", tags=_LOWERING | {"no-notes"}),
    Case("opset_0", _writes(_opset(0)), "error", "opset_import: opset 0 of the default ONNX domain is not supported \\(this niroc knows opsets 1 to \\d+\\)"),
    Case("ir_version_999", _writes(lambda: _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_tensor_value("x")], [_tensor_value("y")], ir_version=999)), "error", "ir_version 999 is newer than this niroc knows \\(IR versions up to \\d+\\)"),
    Case("ir_version_current", _writes(lambda: _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_tensor_value("x")], [_tensor_value("y")], ir_version=onnx.IR_VERSION)), "valid"),
    Case("opset_99", _writes(_opset(99)), "error", "opset_import: opset 99 of the default ONNX domain is not supported \\(this niroc knows opsets 1 to \\d+\\)"),
    # control flow and functions
    Case("if_branch_count", _writes(_if_count), "error", "node 'choose' \\(If\\): then_branch yields 2 and else_branch 1 values for 2 outputs"),
    Case("if_branch_type", _writes(_if_type), "error", "node 'choose' \\(If\\): then_branch yields tensor<1xf32> and else_branch tensor<1xi64> for output #0: element types differ"),
    Case("loop_body_signature", _writes(_loop_body_wrong), "error", "node 'loop' \\(Loop\\): body takes 1 inputs, expected 3 \\(iteration number, condition, 1 loop-carried values\\)"),
    Case("scan_body_signature", _writes(_scan_body_wrong), "error", "node 'scan' \\(Scan\\): body takes 3 inputs, expected 2 \\(1 state values, 1 scan inputs\\)"),
    Case("recursive_function", _writes(_recursive_function), "error", "shape inference failed: Cycle detected in model-local function references: local::Again -> local::Again\\. Model-local functions must not be recursive\\."),
    Case("mutually_recursive_functions", _writes(_mutual_recursion), "error", "shape inference failed: Cycle detected in model-local function references: local::Pong -> local::Ping -> local::Pong\\. Model-local functions must not be recursive\\."),
    Case("function_arity", _writes(_function_arity), "error", "node 'call' \\(local.Act\\): passes 3 inputs to a function of 1"),
    Case("function_outputs", _writes(_function_outputs), "error", "node 'call' \\(local.Act\\): expects 2 outputs from a function of 1"),
    # sizes and names
    Case("deep_if_500", _deep_if(500), "error", "not an ONNX model: it nests messages deeper than protobuf's limit of 100 \\(graphs nested ~30 deep\\)"),
    Case("deep_if_30", _deep_if(30), "valid"),
    Case("long_vector_2pow31", _writes(_long_vector), "valid"),
    Case("inputs_100000", _writes(lambda: _many_inputs(100_000)), "valid", slow=True),
    Case("names_100kb", _writes(_long_names), "valid", slow=True),
    Case("names_100kb_in_error", _writes(_long_name_error), "error", "node 'n{100000}' \\(MatMul\\): inner dimensions differ: .*"),
    Case("non_utf8_node_name", _non_utf8_name, "error", f"node #0: node name b'Q\\\\xff\\\\xfeQ' {_UTF8}"),
    Case("non_utf8_value_name", _non_utf8_value, "error", f"graph 'g': value name b'x\\\\xc3\\(Q' {_UTF8}"),
    Case("mlir_special_names", _writes(_special_names(SPECIAL)), "valid"),
    Case("unicode_names", _writes(_special_names("名前_ü_\U0001f600_")), "valid"),
    # external data
    Case("external_absolute", _external_case(lambda folder: str(folder.parent / CANARY)), "error", "initializer 'w': external data location '.*' is an absolute path"),
    Case("external_dotdot", _external_case(f"../{CANARY}"), "error", f"initializer 'w': external data location '../{CANARY}' leaves the model's folder"),
    Case("external_dotdot_inner", _external_case(f"sub/../../{CANARY}"), "error", "initializer 'w': external data location .* leaves the model's folder"),
    Case("external_symlink_out", _external_case("link.bin", _symlink_out), "error", "initializer 'w': external data location 'link.bin' leads out of the model's folder through a symlink"),
    Case("external_device_absolute", _external_case("/dev/zero"), "error", "initializer 'w': external data location '/dev/zero' is an absolute path"),
    Case("external_device_symlink", _external_case("zero.bin", _symlink_device), "error", "initializer 'w': external data location 'zero.bin' leads out of the model's folder through a symlink"),
    Case("external_fifo", _external_case("pipe.bin", _fifo), "error", "initializer 'w': external data file 'pipe.bin' is not a regular file"),
    Case("external_folder", _external_case("weights.bin", _folder_as_weights), "error", "initializer 'w': external data file 'weights.bin' is not a regular file"),
    Case("external_nul_byte", _external_case("weights.bin\0../../canary.bin", _weights), "error", "initializer 'w': external data location .* contains a NUL byte"),
    Case("external_offset_past_end", _external_case("weights.bin", _weights, offset="4096"), "error", "initializer 'w': external data offset 4096 is beyond the end of 'weights.bin' \\(24 bytes\\)"),
    Case("external_runs_past_end", _external_case("weights.bin", _weights, offset="8"), "error", "initializer 'w': external data in 'weights.bin' runs past the end of the file: offset 8 \\+ 24 bytes > 24 bytes"),
    Case("external_negative_offset", _external_case("weights.bin", _weights, offset="-8"), "error", "initializer 'w': external data offset -8 in 'weights.bin' is negative"),
    Case("external_offset_not_int", _external_case("weights.bin", _weights, offset="0x10"), "error", "initializer 'w': external data offset '0x10' in 'weights.bin' is not an integer"),
    Case("external_bad_length", _external_case("weights.bin", _weights, length="12"), "error", "initializer 'w': external data length 12 in 'weights.bin' does not match the tensor's 24 bytes"),
    Case("external_missing_file", _external_case("nowhere.bin"), "error", "initializer 'w': external data file 'nowhere.bin' does not exist"),
    Case("external_empty_location", _external_case(""), "error", "initializer 'w': external data has an empty location"),
    Case("external_valid", _external_case("weights.bin", _weights, offset="0", length="24"), "valid"),
    # text inputs
    Case("broken_niro", _text(BROKEN_NIRO, "model.niro"), "error", "3:26: error: expected '\\(' to begin the operand types of 'niro.add', got 'f32'", form="parse"),
    Case("broken_onnxtxt", _text(BROKEN_ONNXTXT, "model.onnxtxt"), "error", "cannot parse ONNX text: line 4, column 1: Expected character \\) not found\\. \\(at '}'\\)"),
    Case("deep_onnxtxt_20", _text(deep_onnx_text(20), "model.onnxtxt"), "valid"),
    Case("deep_onnxtxt_500", _text(deep_onnx_text(500), "model.onnxtxt"), "error", _TEXT_TOO_DEEP.format(502)),
    Case("deep_onnxtxt_5000", _text(deep_onnx_text(5000), "model.onnxtxt"), "error", _TEXT_TOO_DEEP.format(5002)),
    Case("deep_niro_500", _text(deep_niro(500), "model.niro"), "valid"),
    Case("deep_niro_3000", _text(deep_niro(3000), "model.niro"), "error", "regions nest 3000 deep; the MLIR lowering takes at most 1000 levels", slow=True, tags=_LOWERING),
    Case("non_utf8_niro", _bytes(b"niro.func @main() -> () {\n\xff\xfe\n}\n", "model.niro"), "error", "not UTF-8 text \\(invalid byte at offset 26\\): Niro assembly must be UTF-8"),
    Case("niro_matmul_mismatch", _text(BAD_SHAPES_NIRO, "model.niro"), "error", "@main \\^bb0 op#0 \\(niro.matmul\\) failed rule 'matmul-contraction': 'niro.matmul' op contraction dims differ: lhs tensor<2x3xf32> has K=3, rhs tensor<4x5xf32> has K=4", form="verify"),
    # semantic checks
    Case("broadcast_mismatch", _writes(_broadcast_mismatch), "error", "node 'add' \\(Add\\): shapes \\(2, 3\\) and \\(4, 3\\) do not broadcast: dim 2 vs 4 at axis 0 of the broadcast result"),
    Case("matmul_mismatch", _writes(_matmul_mismatch), "error", "node 'mm' \\(MatMul\\): inner dimensions differ: tensor<2x3xf32> x tensor<4x5xf32>"),
    Case("declared_output_shape_contradicts", _writes(_declared_output_contradicts), "error", "graph 'g': output 'y' is declared tensor<5x7xf32> but its producer computes tensor<2x3xf32>"),
    Case("declared_output_type_contradicts", _writes(_declared_output_elem_type), "error", "graph 'g': output 'y' is declared tensor<2x3xi64> but its producer computes tensor<2x3xf32>"),
    # valid edge cases
    Case("zero_size_tensors", _writes(_zero_size), "valid"),
    Case("rank0_tensors", _writes(_rank0), "valid"),
    Case("dynamic_dims", _writes(_dynamic_dims), "valid"),
    Case("input_is_initializer", _writes(_input_is_initializer), "valid"),
    Case("empty_graph", _writes(_empty_graph), "valid"),
)


def build_case(case: Case, folder: Path) -> Path:
    """Write `case` into `folder/<name>/` (a canary file beside it); return the input's path."""
    (folder / CANARY).write_bytes(CANARY_TEXT)
    case_folder = folder / case.name
    case_folder.mkdir(parents=True, exist_ok=True)
    return case.build(case_folder)


def write_corpus(folder: Path) -> list[tuple[Case, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    return [(case, build_case(case, folder)) for case in CASES]


def main(argv: list[str]) -> int:
    default = Path(__file__).resolve().parents[1] / "generated" / "hostile"
    folder = Path(argv[1]) if len(argv) > 1 else default
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    for case, path in write_corpus(folder):
        print(f"{case.expect:5}  {path.relative_to(folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
