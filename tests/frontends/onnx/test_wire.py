"""Inline weights of a `.onnx` file: split out of the message before parsing and handed to the
Globals as views into the mapped file (no copy); anything unusual falls back to parsing as is."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import onnx
from niro.frontends.onnx.wire import split_raw_data
from onnx import TensorProto, helper, numpy_helper

from .helpers import import_verified, main_block

W = np.arange(12, dtype=np.float32).reshape(3, 4)
B = np.array([1, 2, 3], dtype=np.float32)


def linear_model(*initializers: TensorProto) -> onnx.ModelProto:
    shape = numpy_helper.from_array(np.array([4, 3], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1),
        helper.make_node("Reshape", ["y", "shape"], ["z"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [*initializers, shape],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_inline_weights_are_views_into_the_mapped_model_file(tmp_path: Path) -> None:
    path = tmp_path / "linear.onnx"
    onnx.save(linear_model(numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")), path)
    imported = import_verified(path)
    weights = {g.name: g.initializer for g in imported.module.globals}
    assert set(weights) == {"w", "b", "shape"}
    for view in weights.values():
        assert isinstance(view, memoryview) and isinstance(view.obj, mmap.mmap)
    assert bytes(weights["w"]) == W.tobytes() and bytes(weights["b"]) == B.tobytes()
    # the split-out shape initializer still feeds shape inference's data propagation
    reshape = main_block(imported).operations[-2]
    assert reshape.name == "onnx.Reshape" and str(reshape.results[0].type) == "tensor<4x3xf32>"


def test_split_removes_raw_data_and_records_where_it_was() -> None:
    model = linear_model(numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b"))
    data = model.SerializeToString()
    remainder, spans = split_raw_data(data)
    assert set(spans) == {"w", "b", "shape"}
    assert data[slice(*spans["w"])] == W.tobytes()
    parsed = onnx.ModelProto()
    parsed.ParseFromString(remainder)
    for tensor in parsed.graph.initializer:
        assert not tensor.HasField("raw_data")
    for tensor in model.graph.initializer:
        tensor.ClearField("raw_data")
    assert parsed == model


def test_typed_field_initializers_are_left_in_the_message() -> None:
    typed = helper.make_tensor("b", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    remainder, spans = split_raw_data(linear_model(numpy_helper.from_array(W, "w"), typed).SerializeToString())
    assert set(spans) == {"w", "shape"}
    parsed = onnx.ModelProto()
    parsed.ParseFromString(remainder)
    assert list(parsed.graph.initializer[1].float_data) == [1.0, 2.0, 3.0]


def test_unusual_bytes_fall_back_to_a_plain_parse() -> None:
    model = linear_model(numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "w"))
    assert split_raw_data(model.SerializeToString()) is None  # duplicate initializer names
    single = linear_model(numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")).SerializeToString()
    graph_field = onnx.ModelProto(graph=onnx.GraphProto(name="more")).SerializeToString()
    assert split_raw_data(single + graph_field) is None  # a merged second graph field
    assert split_raw_data(b"\xff\xff\xff garbage") is None
    assert split_raw_data(single[:-3]) is None  # truncated


def test_split_reads_multi_byte_keys_and_lengths() -> None:
    # a 4 KB weight has a two-byte length; metadata_props (field 16) a two-byte key
    big = np.arange(1024, dtype=np.float32)
    model = linear_model(numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b"))
    model.graph.initializer.append(numpy_helper.from_array(big, "big"))
    model.graph.metadata_props.add(key="origin", value="test")
    remainder, spans = split_raw_data(model.SerializeToString())
    assert set(spans) == {"w", "b", "shape", "big"}
    assert model.SerializeToString()[slice(*spans["big"])] == big.tobytes()
    parsed = onnx.ModelProto()
    parsed.ParseFromString(remainder)
    for tensor in model.graph.initializer:
        tensor.ClearField("raw_data")
    assert parsed == model


def test_split_keeps_nodes_between_initializers_in_order() -> None:
    # protobuf writes fields in number order, but a graph may interleave them: the bytes
    # around each initializer are copied as they are
    model = linear_model(numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b"))
    pieces = [
        onnx.GraphProto(node=[model.graph.node[0]]),
        onnx.GraphProto(initializer=[model.graph.initializer[0]]),
        onnx.GraphProto(node=[model.graph.node[1]], name="linear"),
        onnx.GraphProto(initializer=list(model.graph.initializer[1:])),
        onnx.GraphProto(input=model.graph.input, output=model.graph.output),
    ]
    graph = b"".join(piece.SerializeToString() for piece in pieces)
    header = onnx.ModelProto()
    header.CopyFrom(model)
    header.ClearField("graph")
    data = header.SerializeToString() + b"\x3a" + _varint(len(graph)) + graph  # field 7, length-delimited
    remainder, spans = split_raw_data(data)
    assert data[slice(*spans["w"])] == W.tobytes()
    parsed = onnx.ModelProto()
    parsed.ParseFromString(remainder)
    assert [node.name for node in parsed.graph.node] == ["fc", "reshape"]
    for tensor in model.graph.initializer:
        tensor.ClearField("raw_data")
    assert parsed == model


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
