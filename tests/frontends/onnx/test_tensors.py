"""Tensor data: every ONNX data field packs to little-endian bytes of the right Niro type."""

from __future__ import annotations

import numpy as np
import pytest
from niro.frontends.onnx import OnnxImportError
from niro.frontends.onnx.tensors import TensorDataError, pack_scalar, pack_tensor_proto
from niro.ir import ScalarType, format_type
from onnx import TensorProto, helper

from .helpers import import_verified


def typed(data_type: int, field: str, values, dims=None) -> TensorProto:
    tensor = TensorProto(name="t", data_type=data_type, dims=[len(values)] if dims is None else dims)
    getattr(tensor, field).extend(values)
    return tensor


@pytest.mark.parametrize(
    ("data_type", "field", "values", "expected_type", "expected"),
    [
        (TensorProto.FLOAT, "float_data", [1.5, -2.0], "tensor<2xf32>", np.array([1.5, -2.0], "<f4")),
        (TensorProto.DOUBLE, "double_data", [1.5, -2.0], "tensor<2xf64>", np.array([1.5, -2.0], "<f8")),
        (TensorProto.INT64, "int64_data", [-1, 2**40], "tensor<2xi64>", np.array([-1, 2**40], "<i8")),
        (TensorProto.INT32, "int32_data", [-1, 7], "tensor<2xi32>", np.array([-1, 7], "<i4")),
        (TensorProto.INT16, "int32_data", [-300, 7], "tensor<2xi16>", np.array([-300, 7], "<i2")),
        (TensorProto.INT8, "int32_data", [-128, 127], "tensor<2xi8>", np.array([-128, 127], "i1")),
        (TensorProto.UINT8, "int32_data", [0, 255], "tensor<2xui8>", np.array([0, 255], "u1")),
        (TensorProto.UINT16, "int32_data", [0, 65535], "tensor<2xui16>", np.array([0, 65535], "<u2")),
        (TensorProto.BOOL, "int32_data", [0, 1, 5], "tensor<3xi1>", np.array([0, 1, 1], "u1")),
        (TensorProto.FLOAT16, "int32_data", [0x3C00, 0xC000], "tensor<2xf16>", np.array([1.0, -2.0], "<f2")),
        (TensorProto.BFLOAT16, "int32_data", [0x3F80, 0xC000], "tensor<2xbf16>", np.array([0x3F80, 0xC000], "<u2")),
        (TensorProto.UINT32, "uint64_data", [0, 2**32 - 1], "tensor<2xui32>", np.array([0, 2**32 - 1], "<u4")),
        (TensorProto.UINT64, "uint64_data", [0, 2**64 - 1], "tensor<2xui64>", np.array([0, 2**64 - 1], "<u8")),
    ],
)
def test_typed_fields_pack_little_endian(data_type, field, values, expected_type, expected) -> None:
    tensor_type, data = pack_tensor_proto(typed(data_type, field, values))
    assert format_type(tensor_type) == expected_type
    assert bytes(data) == expected.tobytes()


def test_raw_data_is_a_view_not_a_list() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = TensorProto(name="t", data_type=TensorProto.FLOAT, dims=[3, 4], raw_data=array.tobytes())
    tensor_type, data = pack_tensor_proto(tensor)
    assert isinstance(data, memoryview) and isinstance(data.obj, bytes)
    assert format_type(tensor_type) == "tensor<3x4xf32>" and bytes(data) == array.tobytes()


def test_empty_tensor_packs_to_no_bytes() -> None:
    tensor_type, data = pack_tensor_proto(TensorProto(name="t", data_type=TensorProto.FLOAT, dims=[0, 3]))
    assert format_type(tensor_type) == "tensor<0x3xf32>" and bytes(data) == b""


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (TensorProto(name="t", data_type=TensorProto.FLOAT, dims=[2], raw_data=b"\0" * 4),
         "has 4 bytes of raw data, expected 8 for tensor<2xf32>"),
        (typed(TensorProto.FLOAT, "float_data", [1.0], dims=[2]),
         "has 1 elements in float_data, expected 2 for tensor<2xf32>"),
        (TensorProto(name="t", data_type=TensorProto.INT64, dims=[2]), r"has no data \(tensor<2xi64> needs 2 elements\)"),
        (typed(TensorProto.STRING, "string_data", [b"a"]), "element type STRING is not supported"),
        (typed(TensorProto.COMPLEX64, "float_data", [1.0, 2.0], dims=[1]), "element type COMPLEX64 is not supported"),
        (TensorProto(name="t", data_type=TensorProto.FLOAT, dims=[-1]), r"has a negative dimension in \[-1\]"),
    ],
)
def test_bad_tensor_data_is_refused(tensor: TensorProto, message: str) -> None:
    with pytest.raises(TensorDataError, match=f"^{message}$"):
        pack_tensor_proto(tensor)


def test_bad_initializer_names_the_initializer() -> None:
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], raw_data=b"\0" * 4)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"^m\.onnx: initializer 'w': has 4 bytes of raw data, expected 8 for tensor<2xf32>$"):
        import_verified(model, filename="m.onnx")


@pytest.mark.parametrize(
    ("value", "scalar", "expected"),
    [
        (0.5, ScalarType.F32, np.array(0.5, "<f4").tobytes()),
        (0.5, ScalarType.F16, np.array(0.5, "<f2").tobytes()),
        (2.0, ScalarType.F64, np.array(2.0, "<f8").tobytes()),
        (3, ScalarType.I32, np.array(3, "<i4").tobytes()),
        (1.0, ScalarType.BF16, (0x3F80).to_bytes(2, "little")),
        (1.00390625, ScalarType.BF16, (0x3F80).to_bytes(2, "little")),  # a tie rounds to even
        (1.01171875, ScalarType.BF16, (0x3F82).to_bytes(2, "little")),  # a tie rounds to even (up)
    ],
)
def test_pack_scalar(value, scalar, expected) -> None:
    assert pack_scalar(value, scalar) == expected
