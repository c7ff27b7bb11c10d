"""Bytecode whose blobs are streamed from the Niro buffers (backends/mlir/bytecode.py): the file
is byte for byte what MLIR's own writer makes of the module, loads back with the blobs' data,
compiles with iree-compile, and anything unexpected falls back to MLIR's writer."""

from __future__ import annotations

import io
import mmap
import subprocess

import numpy as np
import pytest
from mlir_harness import IREE_COMPILE_FLAGS, Ids, call, load_vmfb, tensor
from niro.backends.mlir import LoweredModule, find_tool, lower_to_mlir, make_context
from niro.backends.mlir.bindings import mlir_ir
from niro.backends.mlir.bytecode import (
    SPLICE_MIN_BYTES,
    BlobSplicingWriter,
    BytecodeLayoutError,
    encode_varint,
    placeholder_key,
    splice_blobs,
)
from niro.ir import (
    Add,
    Block,
    Const,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    Module,
    Region,
    Return,
    ScalarType,
    UnknownOp,
)

S = ScalarType
F32 = S.F32


def globals_module(
    arrays: dict[str, tuple[ScalarType, np.ndarray]], consts=(), buffers=None
) -> Module:
    """`main()` returns every Global (initializer: the array's buffer, not a copy, or the
    buffer `buffers` gives for its name) and then every Const literal in `consts` ((type,
    array) each)."""
    ids = Ids()
    operations, results = [], []
    for name, (scalar, array) in arrays.items():
        results.append(ids(tensor(scalar, *array.shape)))
        operations.append(GetGlobal(results[-1], name))
    for scalar, array in consts:
        results.append(ids(tensor(scalar, *array.shape)))
        operations.append(Const(results[-1], memoryview(array).cast("B")))
    operations.append(Return(tuple(results)))
    function = Function(
        "main",
        FunctionType((), tuple(value.type for value in results)),
        Region([Block((), operations)]),
    )
    buffers = buffers or {}
    globals_ = [
        Global(name, tensor(scalar, *array.shape), buffers.get(name, memoryview(array).cast("B")))
        for name, (scalar, array) in arrays.items()
    ]
    return Module(globals=globals_, functions=[function])


def generic_module(payload: np.ndarray) -> Module:
    """A kept UnknownOp whose attributes hold buffers at the top, in a tuple and in a dict."""
    ids = Ids()
    x, y = ids(tensor(F32, 4)), ids(tensor(F32, 4))
    attributes = {
        "raw": memoryview(payload).cast("B"),
        "nested": (1, memoryview(payload[:3]).cast("B"), {"deep": memoryview(payload[3:])}),
        "plain": "text",
    }
    body = Block((x,), [UnknownOp("test.Keep", (x,), (y,), attributes), Return((y,))])
    function = Function("main", FunctionType((x.type,), (y.type,)), Region([body]))
    return Module(functions=[function])


def rng_array(dtype, *shape, seed=0) -> np.ndarray:
    values = np.random.default_rng(seed).standard_normal(shape) * 100
    return values.astype(dtype)


MODULES = {
    "one_blob": lambda: globals_module({"w": (F32, rng_array(np.float32, 2, 3))}),
    "alignments": lambda: globals_module(
        {
            "f16": (S.F16, rng_array(np.float16, 3)),
            "i8": (S.I8, np.array([1, -2, 3], np.int8)),
            "f64": (S.F64, rng_array(np.float64, 5)),
            "u8": (S.U8, np.array([0, 200, 255, 7, 9], np.uint8)),
            "i64": (S.I64, np.arange(7, dtype=np.int64)),
            "mask": (S.BOOL, np.array([1, 0, 1], np.uint8)),
            "splat": (F32, np.full((4, 4), 2.5, np.float32)),
        },
        consts=[(S.I16, np.array([5, -6, 7], np.int16)), (F32, np.ones(3, np.float32))],
    ),
    "many_small_blobs_named_as_symbols": lambda: globals_module(
        {f"w{index}": (F32, rng_array(np.float32, 2, seed=index)) for index in range(300)}
        | {f"layer/{index}": (S.F16, rng_array(np.float16, 3, seed=index)) for index in range(20)}
    ),
    "big_blob": lambda: globals_module(
        {
            "head": (S.I8, np.array([1, 2, 3], np.int8)),
            "big": (F32, rng_array(np.float32, 3 << 17)),  # 1.5 MiB
            "tail": (S.F64, rng_array(np.float64, 3)),
        }
    ),
    "generic_op_attributes": lambda: generic_module(rng_array(np.float32, 6)),
}


def lower(name: str) -> LoweredModule:
    module = MODULES[name]()
    return lower_to_mlir(module, allow_unknown=name.startswith("generic"))


def mlir_writer_bytes(lowered: LoweredModule) -> bytes:
    stream = io.BytesIO()
    with lowered.context:
        lowered.module.operation.write_bytecode(stream)
    return stream.getvalue()


def spliced(lowered: LoweredModule) -> bytes:
    """The bytecode from a BlobSplicingWriter (whatever the blobs' size): each blob is handed
    over as its Niro memoryview itself."""
    pieces: list = []
    writer = BlobSplicingWriter(lowered.module, lowered.resources, min_bytes=0)
    with lowered.context:
        assert writer.write(pieces.append, nested=lowered.has_generic_ops)
    for blob in lowered.resources.blobs:
        assert any(piece is blob.data for piece in pieces)
    return b"".join(pieces)


def print_with_blobs(module: mlir_ir.Module) -> str:
    text = io.StringIO()
    module.operation.print(file=text, enable_debug_info=True)
    return text.getvalue()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_spliced_bytecode_is_what_mlir_writes(name):
    lowered = lower(name)
    with lowered.context:
        before = print_with_blobs(lowered.module)
    expected = mlir_writer_bytes(lowered)
    pieces: list = []
    writer = BlobSplicingWriter(lowered.module, lowered.resources, min_bytes=0)
    with lowered.context:
        assert writer.write(pieces.append, nested=lowered.has_generic_ops)
        assert b"".join(pieces) == expected
        assert all(any(piece is blob.data for piece in pieces) for blob in lowered.resources.blobs)
        pieces.clear()
        assert writer.write(pieces.append, nested=lowered.has_generic_ops)  # placeholders reused
        assert b"".join(pieces) == expected
        assert print_with_blobs(lowered.module) == before  # every attribute swapped back
    assert mlir_writer_bytes(lowered) == expected


class RecordingStream(io.BytesIO):
    """A real in-memory file that also counts the bytes written as views of `buffers`."""

    def __init__(self, buffers=()):
        super().__init__()
        self.buffer_ids = {id(buffer) for buffer in buffers}
        self.viewed_bytes = 0

    def write(self, data) -> int:
        if isinstance(data, memoryview) and id(data.obj) in self.buffer_ids:
            self.viewed_bytes += data.nbytes
        return super().write(data)


def blob_owners(lowered: LoweredModule) -> list:
    return [blob.data.obj for blob in lowered.resources.blobs]


def model_scale_module() -> Module:
    """Just over SPLICE_MIN_BYTES of weights, in a big blob and a small one."""
    count = (SPLICE_MIN_BYTES >> 2) + 3
    return globals_module(
        {"big": (F32, rng_array(np.float32, count)), "small": (S.F16, rng_array(np.float16, 5))}
    )


def test_write_bytecode_streams_model_scale_blobs_from_their_buffers():
    lowered = lower_to_mlir(model_scale_module())
    assert lowered.resources.total_bytes >= SPLICE_MIN_BYTES
    stream = RecordingStream(blob_owners(lowered))
    lowered.write_bytecode(stream)
    assert stream.getvalue() == mlir_writer_bytes(lowered)
    # every blob byte reached the stream as a view of its Niro buffer, none as a copy
    assert stream.viewed_bytes == lowered.resources.total_bytes


def test_blobs_in_a_read_only_file_mapping_are_streamed_right(tmp_path):
    """The weights' pages are dropped while writing (MADV_DONTNEED) and read again: the file
    still holds every byte, as MLIR's writer would write it."""
    weights = rng_array(np.float32, (SPLICE_MIN_BYTES >> 2) + 5, seed=3)
    path = tmp_path / "weights.bin"
    weights.tofile(path)
    with open(path, "rb") as handle:
        mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mapping)
    module = globals_module({"mapped": (F32, weights)}, buffers={"mapped": view})
    lowered = lower_to_mlir(module)
    assert lowered.resources.mapped_read_only() == [mapping]
    stream = RecordingStream([mapping])
    lowered.write_bytecode(stream)
    assert stream.viewed_bytes == weights.nbytes
    assert weights.tobytes() in stream.getvalue()
    assert stream.getvalue() == mlir_writer_bytes(lowered)
    del lowered, view


def test_write_bytecode_leaves_small_blobs_to_mlirs_writer():
    lowered = lower("alignments")
    stream = RecordingStream(blob_owners(lowered))
    lowered.write_bytecode(stream)
    assert stream.getvalue() == mlir_writer_bytes(lowered)
    assert stream.viewed_bytes == 0


def test_both_section_alignments_and_multibyte_sizes_are_covered():
    """The resource section lands both on and off its alignment in the modules above (flag bit
    set or not), and the big blob's size takes a 3-byte varint."""
    codes = {name: _section_codes(mlir_writer_bytes(lower(name))) for name in MODULES}
    assert all(0x06 in sections for sections in codes.values())
    assert {code for sections in codes.values() for code in sections if code & 0x7F == 5} == {
        0x05,
        0x85,
    }
    assert len(encode_varint(3 << 19)) == 3


def _section_codes(data: bytes) -> list[int]:
    """The id bytes of the top-level sections (a minimal walk, independent of bytecode.py)."""
    position = data.index(b"\x00", 5) + 1
    codes = []
    while position < len(data):
        code = data[position]
        length, position = _varint(data, position + 1)
        if code & 0x80:
            alignment, position = _varint(data, position)
            position += -position % alignment
        codes.append(code)
        position += length
    return codes


def _varint(data: bytes, position: int) -> tuple[int, int]:
    first = data[position]
    if first == 0:
        return int.from_bytes(data[position + 1 : position + 9], "little"), position + 9
    count = (first & -first).bit_length()
    value = int.from_bytes(data[position : position + count], "little") >> count
    return value, position + count


@pytest.mark.parametrize("name", ["alignments", "big_blob", "generic_op_attributes"])
def test_bytecode_loads_back_with_the_blob_data(name):
    lowered = lower(name)
    data = spliced(lowered)
    with make_context(allow_unregistered_dialects=lowered.has_generic_ops):
        loaded = mlir_ir.Module.parse(data)
        loaded.operation.verify()
        text = print_with_blobs(loaded)
    with lowered.context:
        assert text == print_with_blobs(lowered.module)
    for blob in lowered.resources.blobs:  # the text form holds each blob's bytes in hex
        hex_data = blob.data.hex().upper()
        assert f'{blob.name}: "0x{blob.alignment:02X}000000{hex_data}"' in text


def test_bytecode_compiles_with_iree_and_computes(tmp_path):
    weights = rng_array(np.float32, 2, 3)
    bias = rng_array(np.float16, 3, seed=1)
    ids = Ids()
    x, loaded, summed = ids(tensor(F32, 2, 3)), ids(tensor(F32, 2, 3)), ids(tensor(F32, 2, 3))
    half = ids(tensor(S.F16, 3))
    body = Block(
        (x,),
        [
            GetGlobal(loaded, "weights"),
            Add(summed, x, loaded),
            GetGlobal(half, "bias"),
            Return((summed, half)),
        ],
    )
    function = Function("main", FunctionType((x.type,), (summed.type, half.type)), Region([body]))
    module = Module(
        globals=[
            Global("weights", x.type, weights.tobytes()),
            Global("bias", half.type, bias.tobytes()),
        ],
        functions=[function],
    )
    source, output = tmp_path / "model.mlirbc", tmp_path / "model.vmfb"
    source.write_bytes(spliced(lower_to_mlir(module)))
    tool = find_tool("iree-compile")
    assert tool is not None, "iree-compile not found"
    completed = subprocess.run(
        [tool, *IREE_COMPILE_FLAGS, str(source), "-o", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    ones = np.ones((2, 3), np.float32)
    summed_result, half_result = call(load_vmfb(output), "main", ones)
    np.testing.assert_array_equal(summed_result.to_host(), ones + weights)
    np.testing.assert_array_equal(half_result.to_host(), bias)


def test_module_without_blobs_is_written_by_mlir():
    lowered = lower_to_mlir(
        globals_module(
            {
                "splat": (F32, np.full(8, 3.0, np.float32)),
                "mask": (S.BOOL, np.array([1, 0, 0, 1], np.uint8)),
            }
        )
    )
    assert lowered.resources.blobs == []
    written: list = []
    writer = BlobSplicingWriter(lowered.module, lowered.resources, min_bytes=0)
    with lowered.context:
        assert writer.write(written.append) is False
    assert written == []
    stream = io.BytesIO()
    lowered.write_bytecode(stream)
    assert stream.getvalue() == mlir_writer_bytes(lowered)


def add_foreign_blob(lowered: LoweredModule, data: np.ndarray) -> None:
    """A dense_resource made outside the ResourceTable, as a discardable attribute of main."""
    with lowered.context:
        (function,) = [
            op.operation
            for op in lowered.module.body.operations
            if op.operation.name == "func.func"
        ]
        function.attributes["test.foreign"] = mlir_ir.DenseResourceElementsAttr.get_from_buffer(
            data, "foreign", mlir_ir.Type.parse(f"tensor<{data.size}xf32>")
        )


def test_a_blob_that_is_not_ours_falls_back_to_mlirs_writer():
    """We cannot stream a blob we do not know: the whole file comes from MLIR's writer, and
    is right."""
    foreign = np.arange(4, dtype=np.float32)
    lowered = lower_to_mlir(model_scale_module())
    add_foreign_blob(lowered, foreign)
    expected = mlir_writer_bytes(lowered)
    assert foreign.tobytes() in expected
    stream = RecordingStream(blob_owners(lowered))
    lowered.write_bytecode(stream)
    assert stream.getvalue() == expected
    assert stream.viewed_bytes == 0  # MLIR's writer handed every blob over as a copy
    small = lower("one_blob")
    add_foreign_blob(small, foreign)
    written: list = []
    writer = BlobSplicingWriter(small.module, small.resources, min_bytes=0)
    with small.context:
        assert writer.write(written.append) is False
    assert written == []


def test_a_second_writer_on_one_module_falls_back():
    """Placeholder keys are unique per context: a second writer's are renamed by MLIR, so it
    must not splice (it would name the wrong keys): MLIR's writer is used."""
    lowered = lower("alignments")
    expected = mlir_writer_bytes(lowered)
    assert spliced(lowered) == expected
    second = BlobSplicingWriter(lowered.module, lowered.resources, min_bytes=0)
    written: list = []
    with lowered.context:
        assert second.write(written.append) is False
    assert written == []


@pytest.mark.parametrize("name", ["niro.bytecode_placeholder.0", "niro.bytecode_placeholder.99"])
def test_names_like_placeholder_keys_fall_back_to_mlirs_writer(name):
    """A blob named as a placeholder (whose key MLIR then renames), or any IR string holding
    the placeholder prefix, is not spliced: MLIR's writer writes the file."""
    arrays = {name: (F32, rng_array(np.float32, 4)), "other": (S.F16, rng_array(np.float16, 2))}
    lowered = lower_to_mlir(globals_module(arrays))
    assert lowered.resources.blobs[0].name == name
    written: list = []
    writer = BlobSplicingWriter(lowered.module, lowered.resources, min_bytes=0)
    with lowered.context:
        assert writer.write(written.append) is False
    assert written == []
    stream = io.BytesIO()
    lowered.write_bytecode(stream)
    assert stream.getvalue() == mlir_writer_bytes(lowered)


@pytest.fixture
def placeholder_output():
    lowered = lower("alignments")
    writer = BlobSplicingWriter(lowered.module, lowered.resources)
    with lowered.context:
        output = writer.placeholder_output()
    assert output is not None
    return output, lowered


def test_the_placeholder_output_splices_into_mlirs_bytes(placeholder_output):
    output, lowered = placeholder_output
    assert placeholder_key(0).encode() in output
    pieces = splice_blobs(output, lowered.resources.blobs)
    assert b"".join(pieces) == mlir_writer_bytes(lowered)


def _replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1
    return data.replace(old, new)


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda data: b"XX" + data[2:], "not MLIR bytecode"),
        (lambda data: data[:4] + encode_varint(99) + data[5:], "bytecode version 99"),
        (lambda data: data + b"\x09\x01", "unknown section id 9"),
        (lambda data: data + b"\x00\x03\x01", "unexpected sections"),  # a second string table
        (lambda data: data + b"\x88\x01\x03", "unexpected section layout"),  # aligned, last
        (lambda data: data[:-1], "past the end"),
        (
            lambda data: _replace_once(
                data, placeholder_key(3).encode(), b"niro.bytecode_placeholdeX.3"
            ),
            "placeholder keys are not the string table's tail",
        ),
        (
            lambda data: _replace_once(data, b"niro\xefPH\x00\x02", b"niro\xefPX\x00\x02"),
            "not one of our placeholders",
        ),
    ],
)
def test_unexpected_layouts_are_refused(placeholder_output, corrupt, message):
    output, lowered = placeholder_output
    assert output[4] == encode_varint(6)[0]  # the version this test's offsets assume
    with pytest.raises(BytecodeLayoutError, match=message):
        splice_blobs(corrupt(output), lowered.resources.blobs)


def test_mlirs_own_output_is_refused_as_not_placeholders():
    lowered = lower("one_blob")
    with pytest.raises(BytecodeLayoutError, match="not one of our placeholders"):
        splice_blobs(mlir_writer_bytes(lowered), lowered.resources.blobs)


@pytest.mark.parametrize(
    "value, encoded",
    [
        (0, b"\x01"),
        (127, b"\xff"),
        (128, b"\x02\x02"),
        ((1 << 14) - 1, b"\xfe\xff"),
        (1 << 14, b"\x04\x00\x02"),
        ((1 << 56) - 1, b"\x80" + b"\xff" * 7),
        (1 << 56, b"\x00" + (1 << 56).to_bytes(8, "little")),
        ((1 << 64) - 1, b"\x00" + b"\xff" * 8),
    ],
)
def test_varints_are_mlirs_prefix_varints(value, encoded):
    assert encode_varint(value) == encoded
    assert _varint(encoded, 0) == (value, len(encoded))


def test_bytecode_of_a_matmul_with_a_transposed_operand_compiles(tmp_path):
    """`linalg.matmul` carries its default `indexing_maps` in bytecode: without them iree-compile
    3.13 crashed on a MatMul fed by a Transpose (Gemm with transB), which the text form hid (its
    parser fills the default in)."""
    from niro.frontends.onnx import import_model
    from onnx import TensorProto, helper

    weights = rng_array(np.float32, 8, 16)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)],
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor("w", TensorProto.FLOAT, [8, 16], weights.reshape(-1))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    source, output = tmp_path / "gemm.mlirbc", tmp_path / "gemm.vmfb"
    with open(source, "wb") as stream:
        lower_to_mlir(import_model(model)).write_bytecode(stream)
    tool = find_tool("iree-compile")
    assert tool is not None, "iree-compile not found"
    completed = subprocess.run(
        [tool, *IREE_COMPILE_FLAGS, str(source), "-o", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    x = rng_array(np.float32, 3, 16, seed=2)
    (result,) = call(load_vmfb(output), "gemm", x)
    np.testing.assert_allclose(result.to_host(), x @ weights.T, rtol=1e-5, atol=1e-5)
