"""Output forms: .mlir text with streamed resource blobs, .mlirbc bytecode, determinism, blob naming."""

from __future__ import annotations

import io
import re

import numpy as np
from mlir_harness import (
    Ids,
    call,
    check_lowered,
    compile_module,
    generic_text,
    load_vmfb,
    parse_back,
    tensor,
)
from niro.backends.mlir import lower_to_mlir, make_context
from niro.backends.mlir.bindings import mlir_ir
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
    TensorExtract,
)

F32, BOOL, I64 = ScalarType.F32, ScalarType.BOOL, ScalarType.I64


def weights_module(weights: dict[str, np.ndarray]) -> Module:
    """One function adding every weight (all 2x3 f32) to its input."""
    ids = Ids()
    x = ids(tensor(F32, 2, 3))
    operations, current = [], x
    for name in weights:
        loaded, summed = ids(tensor(F32, 2, 3)), ids(tensor(F32, 2, 3))
        operations += [GetGlobal(loaded, name), Add(summed, current, loaded)]
        current = summed
    operations.append(Return((current,)))
    function = Function(
        "main",
        FunctionType((x.type,), (current.type,)),
        Region([Block((x,), operations)]),
        input_names=("input",),
        output_names=("output",),
    )
    globals_ = [Global(name, tensor(F32, 2, 3), array.tobytes()) for name, array in weights.items()]
    return Module(globals=globals_, functions=[function])


WEIGHTS = {
    "layer/0.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
    "layer_0.weight": np.arange(6, 12, dtype=np.float32).reshape(2, 3),
    "7up": np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3),
}


def test_blob_names_derive_from_symbols_and_stay_unique():
    text = lower_to_mlir(weights_module(WEIGHTS)).to_text()
    assert 'ml_program.global private @"layer/0.weight"(dense_resource<layer_0.weight>' in text
    assert "ml_program.global private @layer_0.weight(dense_resource<layer_0.weight_1>" in text
    assert 'ml_program.global private @"7up"(dense_resource<_7up>' in text


def test_streamed_resource_section_is_what_mlir_prints():
    lowered = lower_to_mlir(weights_module(WEIGHTS))
    ours = lowered.to_text()
    mlir_own = io.StringIO()
    with lowered.context:
        lowered.module.operation.print(file=mlir_own, enable_debug_info=True)
    assert ours.strip() == mlir_own.getvalue().strip()
    blob = WEIGHTS["7up"].tobytes().hex().upper()
    assert f'_7up: "0x04000000{blob}"' in ours


def test_same_module_gives_same_bytes():
    first, second = lower_to_mlir(weights_module(WEIGHTS)), lower_to_mlir(weights_module(WEIGHTS))
    assert first.to_text() == second.to_text()
    first_bytes, second_bytes = io.BytesIO(), io.BytesIO()
    first.write_bytecode(first_bytes)
    second.write_bytecode(second_bytes)
    assert first_bytes.getvalue() == second_bytes.getvalue()


def test_bytecode_loads_back_as_the_same_module():
    lowered = lower_to_mlir(weights_module(WEIGHTS))
    stream = io.BytesIO()
    lowered.write_bytecode(stream)
    assert stream.getvalue().startswith(b"ML\xefR")
    with make_context():
        from_bytecode = mlir_ir.Module.parse(stream.getvalue())
        from_bytecode.operation.verify()
    assert generic_text(from_bytecode) == generic_text(parse_back(lowered.to_text()))


def test_elided_text_keeps_references_and_parses():
    lowered = lower_to_mlir(weights_module(WEIGHTS))
    text = lowered.to_text(elide_weights=True)
    assert "dense_resource<_7up>" in text
    assert "dialect_resources" not in text
    assert WEIGHTS["7up"].tobytes().hex().upper() not in text
    parse_back(text)


def test_interface_names_become_argument_and_result_attributes():
    text = lower_to_mlir(weights_module(WEIGHTS)).to_text()
    assert 'func.func @main(%arg0: tensor<2x3xf32> {niro.name = "input"}' in text
    assert '-> (tensor<2x3xf32> {niro.name = "output"})' in text


def test_weights_compute_right_after_text_round_trip(tmp_path):
    vm_module = load_vmfb(compile_module(lower_to_mlir(weights_module(WEIGHTS)), tmp_path))
    x = np.ones((2, 3), dtype=np.float32)
    (result,) = call(vm_module, "main", x)
    np.testing.assert_allclose(result.to_host(), x + sum(WEIGHTS.values()))


def other_types_module() -> Module:
    """BF16, F16, BOOL and U8 data: blobs, splats and scalars of the types numpy lacks or
    that need care (BOOL takes one byte per element)."""
    ids = Ids()
    bf16_bits = np.array([0x3F80, 0x4000, 0x4040, 0xBF80], dtype=np.uint16)  # 1, 2, 3, -1
    globals_ = [
        Global("bf16_blob", tensor(ScalarType.BF16, 4), bf16_bits.tobytes()),
        Global(
            "bf16_splat", tensor(ScalarType.BF16, 2, 2), np.full(4, 0x3F80, np.uint16).tobytes()
        ),
        Global("f16_blob", tensor(ScalarType.F16, 3), np.array([1, 2, 3], np.float16).tobytes()),
        Global("mask", tensor(BOOL, 4), bytes([1, 0, 1, 1])),
        Global("mask_splat", tensor(BOOL, 3), bytes([1, 1, 1])),
        Global("u8", tensor(ScalarType.U8, 3), bytes([0, 200, 255])),
        Global("u64_scalar", ScalarType.U64, (1 << 64) - 1),
        Global("flag", BOOL, True),
        Global("empty", tensor(F32, 0, 3), b""),
    ]
    bf16_value, bf16_sum = ids(tensor(ScalarType.BF16, 4)), ids(tensor(ScalarType.BF16, 4))
    mask, index, bit = ids(tensor(BOOL, 4)), ids(I64), ids(BOOL)
    u8, u8_sum = ids(tensor(ScalarType.U8, 3)), ids(tensor(ScalarType.U8, 3))
    operations = [
        GetGlobal(bf16_value, "bf16_blob"),
        Add(bf16_sum, bf16_value, bf16_value),
        GetGlobal(mask, "mask"),
        Const(index, 1),
        TensorExtract(bit, mask, (index,)),
        GetGlobal(u8, "u8"),
        Add(u8_sum, u8, u8),
        Return((bf16_sum, bit, u8_sum)),
    ]
    function = Function(
        "main",
        FunctionType((), (bf16_sum.type, BOOL, u8_sum.type)),
        Region([Block((), operations)]),
    )
    return Module(globals=globals_, functions=[function])


def test_other_element_types_lower_and_pass_iree_opt():
    text = check_lowered(lower_to_mlir(other_types_module()))
    # bf16 constants are stored as their 16-bit words (backends/mlir/sub_byte.py: an IREE 3.13
    # workaround), 16256 = 0x3F80 = 1.0
    assert "@bf16_blob(dense_resource<bf16_blob> : tensor<4xi16>)" in text
    assert "arith.bitcast %bf16_blob : tensor<4xi16> to tensor<4xbf16>" in text
    assert "@bf16_splat(dense<16256> : tensor<2x2xi16>)" in text
    assert "@mask(dense<[true, false, true, true]> : tensor<4xi1>)" in text
    assert "@mask_splat(dense<true> : tensor<3xi1>)" in text
    assert "@u64_scalar(dense<-1> : tensor<i64>)" in text
    assert "@flag(dense<true> : tensor<i1>)" in text
    assert "@empty(dense<0.000000e+00> : tensor<0x3xf32>)" in text
    assert 'f16_blob: "0x02000000003C00400042"' in text


def test_bool_and_unsigned_data_compute_right(tmp_path):
    vm_module = load_vmfb(compile_module(lower_to_mlir(other_types_module()), tmp_path))
    _, bit, u8_sum = call(vm_module, "main")
    assert int(bit) == 0
    np.testing.assert_array_equal(
        u8_sum.to_host().view(np.uint8), np.array([0, 144, 254], dtype=np.uint8)
    )


def test_small_integer_constants_are_inline_and_compile_without_const_eval(tmp_path):
    """1-D i32/i64 tensors of at most SMALL_VECTOR elements (shape vectors, axes, pads) are written
    as `dense<...>`, not as `dense_resource` blobs, so the lowering reads them at compile time.
    NOTE: IREE 3.13 crashes when a folder iterates a blob's elements ("ElementsAttr does not
    provide iteration facilities"): torch's padded TransformerEncoder export did with
    `--iree-opt-const-eval=false` (a Reshape read its constant shape with tensor.extract)."""
    from pathlib import Path

    import onnxruntime
    from mlir_harness import assert_matches_onnxruntime
    from niro.frontends.onnx import import_model

    path = Path(__file__).resolve().parents[3] / "testdata" / "pytorch" / "padded_encoder.onnx"
    lowered = lower_to_mlir(import_model(path))
    text = lowered.to_text()
    flags = ("--iree-opt-const-eval=false",)
    vm_module = load_vmfb(compile_module(lowered, tmp_path, extra_flags=flags))
    assert not re.search(r"dense_resource<[\w.]+> : tensor<\d+xi64>", text)
    ids = np.random.default_rng(0).integers(1, 40, (2, 10)).astype(np.int64)
    ids[0, 5:] = 0  # the first row's second half is padding
    session = onnxruntime.InferenceSession(str(path))
    assert_matches_onnxruntime(
        vm_module, session, [{"ids": ids}], function="main_graph", rtol=1e-4, atol=1e-5
    )
