"""literal_problem: a literal against a scalar or tensor type."""

from __future__ import annotations

import mmap

import pytest
from niro.ir import ScalarType, TensorType, literal_problem
from niro.ir.literals import classify_literal_problem

S = ScalarType


@pytest.mark.parametrize(
    ("type_", "literal"),
    [
        (S.BOOL, True),
        (S.I8, -128),
        (S.U8, 255),
        (S.I64, 2**63 - 1),
        (S.U64, 2**64 - 1),
        (S.F32, 2.0),
        (S.F32, 2),  # ints are accepted for float types
        (S.F16, 65504.0),
        (S.F32, float("inf")),
        (S.F64, float("nan")),
        (S.F64, 1e308),
        (TensorType(S.F32, (2, 3)), bytes(24)),
        (TensorType(S.BOOL, (3,)), bytearray(3)),
        (TensorType(S.F64, ()), memoryview(bytes(8))),
        (TensorType(S.I16, (0, 5)), b""),
    ],
)
def test_matching_literals(type_, literal) -> None:
    assert literal_problem(type_, literal) is None


def test_mmap_buffer() -> None:
    buffer = mmap.mmap(-1, 16)
    assert literal_problem(TensorType(S.I32, (2, 2)), buffer) is None
    assert (
        literal_problem(TensorType(S.I32, (2,)), buffer)
        == "expected 8 bytes for tensor<2xi32> (2 elements of 4 bytes), got 16"
    )


def test_memoryview_counts_bytes_not_items() -> None:
    view = memoryview(bytes(8)).cast("I")  # 2 items of 4 bytes
    assert literal_problem(TensorType(S.F32, (2,)), view) is None


@pytest.mark.parametrize(
    ("type_", "literal", "kind", "message"),
    [
        (S.BOOL, 1, "kind", "expected a bool literal for i1, got int 1"),
        (S.I32, True, "kind", "expected an int literal for i32, got bool True"),
        (S.I32, 2.0, "kind", "expected an int literal for i32, got float 2.0"),
        (S.I8, 128, "kind", "literal 128 is out of range for i8 [-128, 127]"),
        (S.U16, -1, "kind", "literal -1 is out of range for ui16 [0, 65535]"),
        (S.I4, 8, "kind", "literal 8 is out of range for i4 [-8, 7]"),
        (S.U2, 4, "kind", "literal 4 is out of range for ui2 [0, 3]"),
        (S.F8E4M3FN, 464.0, "kind", "literal 464.0 is out of range for f8E4M3FN"),
        (
            TensorType(S.I4, (3, 5)),
            bytes(7),
            "size",
            "expected 8 bytes for tensor<3x5xi4> (15 elements of 4 bits), got 7",
        ),
        (S.F32, False, "kind", "expected a float (or int) literal for f32, got bool False"),
        (S.F32, "2.0", "kind", "expected a float (or int) literal for f32, got str '2.0'"),
        (S.F16, 65520.0, "kind", "literal 65520.0 is out of range for f16"),
        (S.F32, 10**400, "kind", f"literal {10**400} is out of range for f32"),
        (
            S.F32,
            b"\0\0\0\0",
            "kind",
            "expected a float (or int) literal for f32, got a bytes buffer of 4 bytes",
        ),
        (
            TensorType(S.F32, (2,)),
            [1.0, 2.0],
            "kind",
            "expected a buffer of packed bytes for tensor<2xf32>, got list [1.0, 2.0]",
        ),
        (
            TensorType(S.F32, (None, 2)),
            b"",
            "static-shape",
            "a tensor literal needs a static shape, got tensor<?x2xf32>",
        ),
        (
            TensorType(S.F32, None),
            b"",
            "static-shape",
            "a tensor literal needs a static shape, got tensor<*xf32>",
        ),
        (TensorType(S.F32, (-1,)), b"", "static-shape", "tensor<-1xf32> has a negative dimension"),
        (
            TensorType(S.F32, (2, 3)),
            bytes(23),
            "size",
            "expected 24 bytes for tensor<2x3xf32> (6 elements of 4 bytes), got 23",
        ),
        ("f32", 1.0, "kind", "'f32' is not a Niro type"),
    ],
)
def test_mismatching_literals(type_, literal, kind, message) -> None:
    assert literal_problem(type_, literal) == message
    assert classify_literal_problem(type_, literal) == (kind, message)
