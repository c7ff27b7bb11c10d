"""The fast paths of the writers keep the bytes right: table-driven hex, weights in
read-only file mappings whose pages are released while writing, and bigger-than-a-chunk blobs.
Speed itself is shown by `tests/bench/bench_models.py`, never here."""

from __future__ import annotations

import io
import mmap
import re

import numpy as np
import pytest
from mlir_harness import Ids, parse_back, tensor
from niro.backends.mlir import lower_to_mlir, make_context
from niro.backends.mlir.bindings import mlir_ir
from niro.backends.mlir.output import _HEX_CHUNK, _uppercase_hex
from niro.ir import (
    Add,
    Block,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    Module,
    Region,
    Return,
    ScalarType,
)

F32 = ScalarType.F32


def one_weight_module(data, shape: tuple[int, ...]) -> Module:
    """`main(x) = x + weight`, the weight's buffer being `data` as given (no copy)."""
    ids = Ids()
    x = ids(tensor(F32, *shape))
    loaded, summed = ids(tensor(F32, *shape)), ids(tensor(F32, *shape))
    body = Block((x,), [GetGlobal(loaded, "weight"), Add(summed, x, loaded), Return((summed,))])
    function = Function("main", FunctionType((x.type,), (summed.type,)), Region([body]))
    return Module(globals=[Global("weight", tensor(F32, *shape), data)], functions=[function])


def blob_hex(text: str) -> str:
    found = re.search(r'weight: "0x04000000([0-9A-F]*)"', text)
    assert found is not None, text[-300:]
    return found.group(1)


def test_table_hex_is_uppercase_hex_of_every_byte_value():
    every_byte = bytes(range(256)) * 3 + bytes(range(255, -1, -1))
    assert _uppercase_hex(memoryview(every_byte)).tobytes() == every_byte.hex().upper().encode()
    assert _uppercase_hex(memoryview(b"")).tobytes() == b""


def test_blob_longer_than_a_chunk_is_written_whole_and_in_order():
    # 2.5 chunks of float32 ramp: a chunk boundary that splits no element, then a partial chunk
    count = (_HEX_CHUNK * 5 // 2) // 4
    weights = np.arange(count, dtype=np.float32)
    lowered = lower_to_mlir(one_weight_module(weights.tobytes(), (count,)))
    text = lowered.to_text()
    assert blob_hex(text) == weights.tobytes().hex().upper()
    mlir_own = io.StringIO()
    with lowered.context:
        lowered.module.operation.print(file=mlir_own, enable_debug_info=True)
    assert text.strip() == mlir_own.getvalue().strip()


@pytest.fixture
def mapped_weights(tmp_path):
    """A read-only mapping of a file holding 3 chunks' worth of random float32 weights."""
    weights = np.random.default_rng(7).standard_normal(3 * _HEX_CHUNK // 4).astype(np.float32)
    path = tmp_path / "weights.bin"
    weights.tofile(path)
    with open(path, "rb") as handle:
        mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    yield weights, mapping
    mapping.close()


def test_weights_from_a_read_only_mapping_are_written_byte_for_byte(mapped_weights):
    weights, mapping = mapped_weights
    view = memoryview(mapping)[: weights.nbytes]
    lowered = lower_to_mlir(one_weight_module(view, (weights.size,)))
    first = lowered.to_text()
    assert blob_hex(first) == weights.tobytes().hex().upper()
    # the pages were released while writing; the data reads back the same, and so does a
    # second write of the same module
    assert bytes(view[:64]) == weights.tobytes()[:64]
    assert lowered.to_text() == first
    stream = io.BytesIO()
    lowered.write_bytecode(stream)
    with make_context():
        from_bytecode = mlir_ir.Module.parse(stream.getvalue())
    from_text = parse_back(first)
    assert str(from_bytecode) == str(from_text)
    del lowered, view


def test_changed_pages_of_a_private_mapping_are_kept(tmp_path):
    """A copy-on-write mapping may hold changes that exist nowhere else: they must be written,
    never dropped by a page release."""
    original = np.arange(3 * _HEX_CHUNK // 4, dtype=np.float32)
    path = tmp_path / "weights.bin"
    original.tofile(path)
    with open(path, "rb") as handle:
        mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    changed = np.frombuffer(mapping, dtype=np.float32)
    changed[::1000] = -1.0
    expected = changed.tobytes()
    del changed
    view = memoryview(mapping)
    lowered = lower_to_mlir(one_weight_module(view, (original.size,)))
    assert blob_hex(lowered.to_text()) == expected.hex().upper()
    stream = io.BytesIO()
    lowered.write_bytecode(stream)
    assert expected in stream.getvalue()
    assert bytes(view) == expected
    del lowered, view
    mapping.close()


@pytest.mark.parametrize("differing", [1, 63, 64, 65, 319, 320, 5_000, 99_999])
def test_a_weight_that_differs_in_one_element_anywhere_is_a_blob_not_a_splat(differing):
    # The splat check reads growing chunks (64, 256, 1024... elements): a difference at or
    # around any chunk boundary, or in the last element, must still be seen.
    count = 100_000
    weights = np.full(count, 2.5, dtype=np.float32)
    weights[differing] = -1.0
    text = lower_to_mlir(one_weight_module(weights.tobytes(), (count,))).to_text()
    assert "dense_resource<weight>" in text
    assert blob_hex(text) == weights.tobytes().hex().upper()


def test_a_weight_whose_elements_are_all_equal_is_a_splat():
    weights = np.full(100_000, 2.5, dtype=np.float32)
    text = lower_to_mlir(one_weight_module(weights.tobytes(), (100_000,))).to_text()
    assert "dense<2.500000e+00> : tensor<100000xf32>" in text
    assert "dense_resource" not in text
