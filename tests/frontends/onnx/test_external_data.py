"""External data: weights mapped from side files in the model's folder (zero copy), and every
location the frontend must refuse, each with its exact error naming the tensor and the file."""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from niro.frontends.onnx import OnnxImportError, import_model_with_info
from onnx import TensorProto, helper

from .helpers import import_verified

WEIGHTS = np.arange(6, dtype=np.float32).reshape(2, 3)
BIAS = np.array([10, 20, 30], dtype=np.float32)


def external_tensor(name: str, dims, location: str, offset: int | None = None, length: int | None = None,
                    data_type: int = TensorProto.FLOAT) -> TensorProto:
    tensor = TensorProto(name=name, data_type=data_type, dims=list(dims))
    tensor.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": offset, "length": length}
    for key, value in entries.items():
        if value is not None:
            tensor.external_data.add(key=key, value=str(value))
    return tensor


def write_model(folder: Path, tensor: TensorProto, *, constant: TensorProto | None = None) -> Path:
    """`folder/model.onnx`: y = x + w (w external), plus an external Constant when given."""
    nodes = [helper.make_node("Add", ["x", tensor.name], ["y"], name="add")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if constant is not None:
        nodes.append(helper.make_node("Constant", [], ["c"], name="const", value=constant))
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(tensor.dims))], outputs, [tensor]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "weights.bin").write_bytes(b"\xff" * 8 + WEIGHTS.tobytes() + BIAS.tobytes())
    return model_dir


def test_external_weights_are_views_into_a_mapped_file(folder: Path) -> None:
    path = write_model(
        folder,
        external_tensor("w", (2, 3), "weights.bin", offset=8, length=24),
        constant=external_tensor("bias", (3,), "weights.bin", offset=32),
    )
    imported = import_verified(path)
    (global_,) = imported.module.globals
    data = global_.initializer
    assert isinstance(data, memoryview) and isinstance(data.obj, mmap.mmap)
    assert bytes(data) == WEIGHTS.tobytes()
    constant = imported.module.functions[0].first_block.operations[-2]
    assert isinstance(constant.literal, memoryview) and constant.literal.obj is data.obj  # one map per file
    assert bytes(constant.literal) == BIAS.tobytes()


def test_a_symlink_that_stays_inside_the_folder_is_fine(folder: Path) -> None:
    (folder / "sub").mkdir()
    os.symlink("../weights.bin", folder / "sub" / "link.bin")
    imported = import_verified(write_model(folder, external_tensor("w", (2, 3), "sub/link.bin", offset=8)))
    assert bytes(imported.module.globals[0].initializer) == WEIGHTS.tobytes()


def expect_refusal(path: Path, message: str) -> None:
    with pytest.raises(OnnxImportError, match="^" + re.escape(f"{path}: initializer 'w': {message}") + "$"):
        import_model_with_info(path)


def test_absolute_location_is_refused(folder: Path) -> None:
    location = str(folder / "weights.bin")
    path = write_model(folder, external_tensor("w", (2, 3), location))
    expect_refusal(path, f"external data location '{location}' is an absolute path")


def test_parent_directory_location_is_refused(folder: Path) -> None:
    (folder.parent / "x.bin").write_bytes(WEIGHTS.tobytes())
    path = write_model(folder, external_tensor("w", (2, 3), "../x.bin"))
    expect_refusal(path, "external data location '../x.bin' leaves the model's folder")


def test_sneaky_parent_directory_location_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "sub/../../model/../x.bin"))
    expect_refusal(path, "external data location 'sub/../../model/../x.bin' leaves the model's folder")


def test_symlink_leading_out_is_refused(folder: Path) -> None:
    outside = folder.parent / "secret.bin"
    outside.write_bytes(WEIGHTS.tobytes())
    os.symlink(outside, folder / "link.bin")
    path = write_model(folder, external_tensor("w", (2, 3), "link.bin"))
    expect_refusal(path, "external data location 'link.bin' leads out of the model's folder through a symlink")


def test_symlink_to_a_device_file_is_refused(folder: Path) -> None:
    os.symlink("/dev/zero", folder / "zero.bin")
    path = write_model(folder, external_tensor("w", (2, 3), "zero.bin"))
    expect_refusal(path, "external data location 'zero.bin' leads out of the model's folder through a symlink")


def test_device_file_by_absolute_path_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "/dev/zero"))
    expect_refusal(path, "external data location '/dev/zero' is an absolute path")


def test_fifo_inside_the_folder_is_refused_without_blocking(folder: Path) -> None:
    os.mkfifo(folder / "pipe.bin")
    path = write_model(folder, external_tensor("w", (2, 3), "pipe.bin"))
    expect_refusal(path, "external data file 'pipe.bin' is not a regular file")


def test_directory_is_refused(folder: Path) -> None:
    (folder / "dir.bin").mkdir()
    path = write_model(folder, external_tensor("w", (2, 3), "dir.bin"))
    expect_refusal(path, "external data file 'dir.bin' is not a regular file")


def test_nul_byte_in_location_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "weights.bin\0.txt"))
    expect_refusal(path, "external data location 'weights.bin\\x00.txt' contains a NUL byte")


def test_empty_location_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), ""))
    expect_refusal(path, "external data has an empty location")


def test_missing_file_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "missing.bin"))
    expect_refusal(path, "external data file 'missing.bin' does not exist")


def test_offset_beyond_the_file_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "weights.bin", offset=1000))
    expect_refusal(path, "external data offset 1000 is beyond the end of 'weights.bin' (44 bytes)")


def test_data_running_past_the_end_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "weights.bin", offset=40))
    expect_refusal(path, "external data in 'weights.bin' runs past the end of the file: offset 40 + 24 bytes > 44 bytes")


def test_negative_offset_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "weights.bin", offset=-8))
    expect_refusal(path, "external data offset -8 in 'weights.bin' is negative")


def test_non_integer_length_is_refused(folder: Path) -> None:
    tensor = external_tensor("w", (2, 3), "weights.bin")
    tensor.external_data.add(key="length", value="abc")
    expect_refusal(write_model(folder, tensor), "external data length 'abc' in 'weights.bin' is not an integer")


def test_wrong_length_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "weights.bin", offset=8, length=12))
    expect_refusal(path, "external data length 12 in 'weights.bin' does not match the tensor's 24 bytes")


def test_model_proto_without_a_folder_cannot_use_external_data(folder: Path) -> None:
    model = onnx.load(write_model(folder, external_tensor("w", (2, 3), "weights.bin", offset=8)),
                      load_external_data=False)
    with pytest.raises(OnnxImportError, match=re.escape(
        "<model>: initializer 'w': external data location 'weights.bin' cannot be resolved: the model has "
        "no folder (pass filename= with a ModelProto)"
    )):
        import_model_with_info(model)
    imported = import_verified(model, filename=str(folder / "model.onnx"))
    assert bytes(imported.module.globals[0].initializer) == WEIGHTS.tobytes()


def test_unsupported_external_element_type_is_refused(folder: Path) -> None:
    path = write_model(folder, external_tensor("w", (2, 3), "weights.bin", data_type=TensorProto.COMPLEX64))
    with pytest.raises(OnnxImportError, match=re.escape(f"{path}: initializer 'w': element type COMPLEX64 is not supported")):
        import_model_with_info(path)
