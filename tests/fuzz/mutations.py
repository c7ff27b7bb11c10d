"""Seeds (valid models and Niro assembly) and the hypothesis mutations applied to them.

Three levels, each reaching a different layer: bytes of a serialized model (protobuf's parser
and the raw-data splitter in `wire`), fields of the ModelProto (the frontend's checks, ONNX's
shape inference, the converters, the verifier and the lowering), and characters of Niro text
(the lexer and parser, then the same verifier and lowering).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import onnx
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "mutate_bytes", "mutate_model", "mutate_text", "niro_seeds", "onnx_seeds", "onnx_text_seeds"]


@functools.cache
def onnx_seeds() -> tuple[bytes, ...]:
    """Serialized valid models: the ONNX text test models (If, Loop, functions, unknown ops,
    Gemm, old-IR initializers...) and the small valid cases of the hostile corpus."""
    from ..hostile.corpus import generate

    texts = sorted((ROOT / "testdata" / "onnx").glob("*.onnxtxt")) + [
        ROOT / "testdata" / "cli" / "mlp.onnxtxt",
        ROOT / "testdata" / "cli" / "custom_op.onnxtxt",
    ]
    models = [onnx.parser.parse_model(path.read_text(encoding="utf-8")) for path in texts]
    models += [
        generate._relu_model(), generate._zero_size(), generate._rank0(), generate._dynamic_dims(),
        generate._input_is_initializer(), generate._empty_graph(), generate._custom_domain(),
        generate._special_names(generate.SPECIAL)(), generate._broadcast_mismatch(),
    ]
    return tuple(model.SerializeToString() for model in models)


@functools.cache
def onnx_text_seeds() -> tuple[str, ...]:
    """ONNX text models (the test models of testdata/onnx and testdata/cli)."""
    paths = sorted((ROOT / "testdata" / "onnx").glob("*.onnxtxt")) + sorted((ROOT / "testdata" / "cli").glob("*.onnxtxt"))
    return tuple(path.read_text(encoding="utf-8") for path in paths)


@functools.cache
def niro_seeds() -> tuple[str, ...]:
    """Niro assembly: the CLI's test inputs and the printed import of every ONNX seed."""
    import niro.ir as nir
    from niro.frontends.onnx import OnnxImportError, import_model

    texts = [(ROOT / "testdata" / "cli" / "scale.niro").read_text(encoding="utf-8")]
    for data in onnx_seeds():
        model = onnx.ModelProto()
        model.ParseFromString(data)
        try:
            texts.append(nir.print_module(import_model(model)))
        except OnnxImportError:
            continue  # the deliberately broken seed
    return tuple(texts)


# -- bytes ---------------------------------------------------------------------------------------


def mutate_bytes(data: st.DataObject, blob: bytes) -> bytes:
    buffer = bytearray(blob)
    for _ in range(data.draw(st.integers(1, 4), label="byte mutations")):
        kind = data.draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "duplicate"]))
        if not buffer:
            buffer += data.draw(st.binary(min_size=1, max_size=16))
            continue
        position = data.draw(st.integers(0, len(buffer) - 1))
        if kind == "flip":
            buffer[position] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "set":
            buffer[position] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif kind == "truncate":
            del buffer[position:]
        elif kind == "insert":
            buffer[position:position] = data.draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del buffer[position : position + data.draw(st.integers(1, 16))]
        else:
            end = min(len(buffer), position + data.draw(st.integers(1, 64)))
            buffer[position:position] = buffer[position:end]
    return bytes(buffer)


# -- protobuf fields -----------------------------------------------------------------------------

DIMS = [-7, -1, 0, 1, 2, 3, 5, 2**31, 2**62]
ELEMENT_TYPES = [*range(0, 27), 999]
OP_TYPES = sorted({schema.name for schema in onnx.defs.get_all_schemas() if schema.domain in ("", "ai.onnx")}) + ["NotAnOp"]
"""Every default-domain op: a node swapped to any of them meets that op's shape inference with
operands, attributes and arities made for another op."""
OPSETS = [0, 1, 6, 7, 9, 13, 17, 21, 28, 29, 99]
INTS = [-(2**63), -(2**31), -9999, -2, -1, 0, 1, 2, 3, 7, 9999, 2**31, 2**63 - 1]
FLOATS = [0.0, -0.0, 1e-45, 3.5, -1.0, 1e38, math.inf, -math.inf, math.nan]


def _graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)
            for subgraph in attribute.graphs:
                yield from _graphs(subgraph)


def _pick(data: st.DataObject, items, label: str):
    items = list(items)
    return items[data.draw(st.integers(0, len(items) - 1), label=label)] if items else None


def _mutate_attribute(data: st.DataObject, attribute: onnx.AttributeProto) -> None:
    kind = data.draw(st.sampled_from(["int", "float", "ints", "string", "type", "rename", "tensor"]))
    if kind == "int":
        attribute.i = data.draw(st.sampled_from(INTS))
    elif kind == "float":
        attribute.f = data.draw(st.sampled_from(FLOATS))
    elif kind == "ints":
        attribute.ints[:] = data.draw(st.lists(st.sampled_from(INTS[3:11]), max_size=5))
    elif kind == "string":
        attribute.s = data.draw(st.binary(max_size=8))
    elif kind == "type":
        # NOTE: 99 is no AttributeType; protobuf's upb backend refuses to set it (a closed proto2
        # enum) while the C++ backend accepted it: then the type stays as it was
        try:
            attribute.type = data.draw(st.sampled_from([*onnx.AttributeProto.AttributeType.values(), 99]))
        except ValueError:
            pass
    elif kind == "rename":
        attribute.name = data.draw(st.sampled_from(["", "to", "perm", "axis", "value", "body", "then_branch", "x\x00"]))
    elif attribute.HasField("t"):
        tensor = attribute.t
        tensor.dims[:] = data.draw(st.lists(st.sampled_from(DIMS), max_size=3))
        if tensor.raw_data:
            tensor.raw_data = tensor.raw_data[: data.draw(st.integers(0, len(tensor.raw_data)))]


def _mutate_tensor(data: st.DataObject, tensor: onnx.TensorProto) -> None:
    kind = data.draw(st.sampled_from(["dims", "type", "truncate", "external", "clear"]))
    if kind == "dims":
        tensor.dims[:] = data.draw(st.lists(st.sampled_from(DIMS), max_size=3))
    elif kind == "type":
        tensor.data_type = data.draw(st.sampled_from(ELEMENT_TYPES))
    elif kind == "truncate" and tensor.raw_data:
        tensor.raw_data = tensor.raw_data[: data.draw(st.integers(0, len(tensor.raw_data)))]
    elif kind == "external":
        tensor.data_location = onnx.TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key = data.draw(st.sampled_from(["location", "offset", "length", "checksum"]))
        entry.value = data.draw(st.sampled_from(["model.onnx", "../x", "/etc/passwd", "", "-1", "99999", "a\x00b"]))
    else:
        for name in ("raw_data", "float_data", "int64_data", "int32_data"):
            tensor.ClearField(name)


def mutate_model(data: st.DataObject, model: onnx.ModelProto) -> None:
    """1-3 field-level changes, anywhere in the model (subgraphs included)."""
    for _ in range(data.draw(st.integers(1, 3), label="field mutations")):
        graph = _pick(data, _graphs(model.graph), "graph")
        kind = data.draw(st.sampled_from([
            "dim", "elem_type", "attribute", "drop_node", "duplicate_node", "swap_nodes", "op_type",
            "node_input", "node_output", "initializer", "opset", "graph_output", "graph_input",
        ]))
        values = [*graph.input, *graph.output, *graph.value_info]
        node = _pick(data, graph.node, "node")
        if kind == "dim" and values:
            tensor_type = _pick(data, values, "value").type.tensor_type
            if tensor_type.shape.dim:
                dim = _pick(data, tensor_type.shape.dim, "dim")
                if data.draw(st.booleans()):
                    dim.dim_value = data.draw(st.sampled_from(DIMS))
                else:
                    dim.dim_param = data.draw(st.sampled_from(["N", "", "%x", "N"]))
            else:
                tensor_type.shape.dim.add().dim_value = data.draw(st.sampled_from(DIMS))
        elif kind == "elem_type" and values:
            _pick(data, values, "value").type.tensor_type.elem_type = data.draw(st.sampled_from(ELEMENT_TYPES))
        elif kind == "attribute" and node is not None and node.attribute:
            _mutate_attribute(data, _pick(data, node.attribute, "attribute"))
        elif kind == "drop_node" and node is not None:
            graph.node.remove(node)
        elif kind == "duplicate_node" and node is not None:
            graph.node.add().CopyFrom(node)
        elif kind == "swap_nodes" and len(graph.node) > 1:
            first, second = data.draw(st.integers(0, len(graph.node) - 1)), data.draw(st.integers(0, len(graph.node) - 1))
            copy = onnx.NodeProto()
            copy.CopyFrom(graph.node[first])
            graph.node[first].CopyFrom(graph.node[second])
            graph.node[second].CopyFrom(copy)
        elif kind == "op_type" and node is not None:
            node.op_type = data.draw(st.sampled_from(OP_TYPES))
        elif kind == "node_input" and node is not None and node.input:
            names = ["", "ghost", *[value.name for value in graph.input], *[output for other in graph.node for output in other.output]]
            node.input[data.draw(st.integers(0, len(node.input) - 1))] = data.draw(st.sampled_from(names))
        elif kind == "node_output" and node is not None and node.output:
            names = ["", *[value.name for value in graph.input], *[output for other in graph.node for output in other.output]]
            node.output[data.draw(st.integers(0, len(node.output) - 1))] = data.draw(st.sampled_from(names))
        elif kind == "initializer" and graph.initializer:
            _mutate_tensor(data, _pick(data, graph.initializer, "initializer"))
        elif kind == "opset" and model.opset_import:
            _pick(data, model.opset_import, "opset").version = data.draw(st.sampled_from(OPSETS))
        elif kind == "graph_output" and graph.output:
            output = _pick(data, graph.output, "output")
            if data.draw(st.booleans()):
                graph.output.add().CopyFrom(output)
            else:
                output.name = data.draw(st.sampled_from(["", "ghost", *[value.name for value in graph.input]]))
        elif kind == "graph_input" and graph.input:
            if data.draw(st.booleans()):
                graph.input.add().CopyFrom(_pick(data, graph.input, "input"))
            else:
                graph.input.remove(_pick(data, graph.input, "input"))


# -- Niro text -----------------------------------------------------------------------------------

FRAGMENTS = [
    "%", "@", "^", "#", "{", "}", "(", ")", "<", ">", ":", ",", '"', "\\", "\n", " ", "-", "?", "x", "0",
    "9999999999999999999999", "-1", "f32", "i1", "tensor<", "tensor<*xf32>", "niro.add", "niro.if",
    "niro.return", "niro.yield", "^bb1", "%0", "loc(", "\u00e9", "\U0001f600", "\x00", "dense_resource<",
    "[", "]", "=", "=>", "<", "float[", "int64", "If", "<then_branch = t () => (float y) {", "seq(", "map(",
    "opset_import: [", '"" : 99', "-9223372036854775809", "1e999",
]


def mutate_text(data: st.DataObject, text: str) -> str:
    for _ in range(data.draw(st.integers(1, 4), label="text mutations")):
        kind = data.draw(st.sampled_from(["delete", "insert", "replace", "duplicate_line", "drop_line", "swap_lines"]))
        if kind in ("duplicate_line", "drop_line", "swap_lines"):
            lines = text.split("\n")
            first = data.draw(st.integers(0, len(lines) - 1))
            second = data.draw(st.integers(0, len(lines) - 1))
            if kind == "duplicate_line":
                lines.insert(second, lines[first])
            elif kind == "drop_line":
                del lines[first]
            else:
                lines[first], lines[second] = lines[second], lines[first]
            text = "\n".join(lines)
            continue
        position = data.draw(st.integers(0, len(text)))
        if kind == "delete":
            text = text[:position] + text[position + data.draw(st.integers(1, 8)):]
        elif kind == "insert":
            text = text[:position] + data.draw(st.sampled_from(FRAGMENTS)) + text[position:]
        else:
            text = text[:position] + data.draw(st.sampled_from(FRAGMENTS)) + text[position + 1:]
    return text
