"""Niro scalar types to MLIR types: the table `lower_scalar_type` reads must cover every
ScalarType (it replaced an exhaustive match; a new ScalarType without a row would otherwise
fail only when a model uses it)."""

from __future__ import annotations

from niro.backends.mlir import make_context
from niro.backends.mlir.types import lower_scalar_type
from niro.ir import ScalarType

EXPECTED = {
    ScalarType.BOOL: "i1",
    ScalarType.I8: "i8",
    ScalarType.U8: "i8",
    ScalarType.I16: "i16",
    ScalarType.U16: "i16",
    ScalarType.I32: "i32",
    ScalarType.U32: "i32",
    ScalarType.I64: "i64",
    ScalarType.U64: "i64",
    ScalarType.F16: "f16",
    ScalarType.BF16: "bf16",
    ScalarType.F32: "f32",
    ScalarType.F64: "f64",
    ScalarType.F8E4M3FN: "f8E4M3FN",
    ScalarType.F8E5M2: "f8E5M2",
    ScalarType.F8E4M3FNUZ: "f8E4M3FNUZ",
    ScalarType.F8E5M2FNUZ: "f8E5M2FNUZ",
    ScalarType.F8E8M0FNU: "f8E8M0FNU",
    # the sub-byte types: one element an i8 (backends/mlir/types.py says why)
    ScalarType.I4: "i8",
    ScalarType.U4: "i8",
    ScalarType.I2: "i8",
    ScalarType.U2: "i8",
    ScalarType.F4E2M1FN: "i8",
}


def test_every_scalar_type_lowers_to_its_signless_mlir_type() -> None:
    with make_context():
        lowered = {scalar: str(lower_scalar_type(scalar)) for scalar in ScalarType}
    assert lowered == EXPECTED
