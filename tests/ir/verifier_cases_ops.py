"""Modules that break the per-op type rules (Const, Add/Mul, MatMul, Transpose, TensorExtract)."""

from __future__ import annotations

from niro.ir import Add, Const, MatMul, Mul, Return, TensorExtract, Transpose

from .builders import BOOL, F32, F64, I8, I32, I64, Case, one_block, tensor, unranked, v

OP = ("^bb0", "op#0")


def _const(type_, literal):
    return lambda: one_block([Const(v(0, type_), literal), Return()])


def _binary(kind, lhs_type, rhs_type, result_type):
    """`kind(%2 = %0, %1)` over function inputs %0 and %1."""
    return lambda: one_block(
        [kind(v(2, result_type), v(0, lhs_type), v(1, rhs_type)), Return()],
        (v(0, lhs_type), v(1, rhs_type)),
    )


def _transpose(operand_type, permutation, result_type):
    return lambda: one_block(
        [Transpose(v(1, result_type), v(0, operand_type), permutation), Return()],
        (v(0, operand_type),),
    )


def _extract(operand_type, index_types, result_type):
    indices = tuple(v(index + 1, type_) for index, type_ in enumerate(index_types))
    return lambda: one_block(
        [TensorExtract(v(9, result_type), v(0, operand_type), indices), Return()],
        (v(0, operand_type), *indices),
    )


def _arith_cases(kind, short: str) -> list[Case]:
    name = f"niro.{short}"
    prefix = rf"^'niro\.{short}' op "
    t23 = tensor(F32, 2, 3)
    return [
        Case(
            f"{short}-mixed-scalars",
            f"{short}-operands",
            _binary(kind, F32, F64, F32),
            "main",
            OP,
            name,
            prefix + r"expected operands of one scalar type, got f32 and f64$",
            value_ids=(0, 1),
        ),
        Case(
            f"{short}-scalar-and-tensor",
            f"{short}-operands",
            _binary(kind, F32, t23, t23),
            "main",
            OP,
            name,
            prefix + r"expected two scalars or two tensors, got f32 and tensor<2x3xf32>$",
        ),
        Case(
            f"{short}-element-types",
            f"{short}-operands",
            _binary(kind, t23, tensor(F64, 2, 3), t23),
            "main",
            OP,
            name,
            prefix
            + r"expected tensors of one element type, got tensor<2x3xf32> and tensor<2x3xf64>$",
        ),
        Case(
            f"{short}-bool-scalars",
            f"{short}-bool",
            _binary(kind, BOOL, BOOL, BOOL),
            "main",
            OP,
            name,
            prefix + r"does no arithmetic on i1 \(BOOL\) operands$",
        ),
        Case(
            f"{short}-bool-tensors",
            f"{short}-bool",
            _binary(kind, tensor(BOOL, 2), tensor(BOOL, 2), tensor(BOOL, 2)),
            "main",
            OP,
            name,
            prefix + r"does no arithmetic on i1 \(BOOL\) elements, got tensor<2xi1>$",
        ),
        Case(
            f"{short}-broadcast",
            f"{short}-broadcast",
            _binary(kind, t23, tensor(F32, 4), t23),
            "main",
            OP,
            name,
            prefix
            + r"operand shapes \(2, 3\) and \(4,\) do not broadcast: dim 3 vs 4 at axis 1 of the broadcast result$",
        ),
        Case(
            f"{short}-scalar-result",
            f"{short}-result-type",
            _binary(kind, I32, I32, I64),
            "main",
            OP,
            name,
            prefix + r"expected result type i32, got i64$",
            value_ids=(2,),
        ),
        Case(
            f"{short}-broadcast-result",
            f"{short}-result-type",
            _binary(kind, tensor(F32, None, 1), tensor(F32, 3), tensor(F32, None, 4)),
            "main",
            OP,
            name,
            prefix
            + r"expected result type tensor<\?x3xf32> \(the broadcast of tensor<\?x1xf32> and tensor<3xf32>\), got tensor<\?x4xf32>$",
        ),
    ]


CASES: list[Case] = [
    Case(
        "const-int-range",
        "const-literal-type",
        _const(I8, 300),
        "main",
        OP,
        "niro.const",
        r"^'niro\.const' op literal 300 is out of range for i8 \[-128, 127\]$",
        value_ids=(0,),
    ),
    Case(
        "const-bool-as-int",
        "const-literal-type",
        _const(I32, True),
        "main",
        OP,
        "niro.const",
        r"expected an int literal for i32, got bool True$",
    ),
    Case(
        "const-int-as-bool",
        "const-literal-type",
        _const(BOOL, 1),
        "main",
        OP,
        "niro.const",
        r"expected a bool literal for i1, got int 1$",
    ),
    Case(
        "const-f32-overflow",
        "const-literal-type",
        _const(F32, 1e39),
        "main",
        OP,
        "niro.const",
        r"literal 1e\+39 is out of range for f32$",
    ),
    Case(
        "const-scalar-for-tensor",
        "const-literal-type",
        _const(tensor(F32, 2), 1.0),
        "main",
        OP,
        "niro.const",
        r"expected a buffer of packed bytes for tensor<2xf32>, got float 1\.0$",
    ),
    Case(
        "const-buffer-for-scalar",
        "const-literal-type",
        _const(F32, b"\0\0\0\0"),
        "main",
        OP,
        "niro.const",
        r"expected a float \(or int\) literal for f32, got a bytes buffer of 4 bytes$",
    ),
    Case(
        "const-unranked",
        "const-static-shape",
        _const(unranked(F32), b""),
        "main",
        OP,
        "niro.const",
        r"^'niro\.const' op a tensor literal needs a static shape, got tensor<\*xf32>$",
    ),
    Case(
        "const-size",
        "const-literal-size",
        _const(tensor(BOOL, 3), b"\x01\x00"),
        "main",
        OP,
        "niro.const",
        r"^'niro\.const' op expected 3 bytes for tensor<3xi1> \(3 elements of 1 bytes\), got 2$",
    ),
    *_arith_cases(Add, "add"),
    *_arith_cases(Mul, "mul"),
    Case(
        "matmul-rank",
        "matmul-rank",
        _binary(MatMul, tensor(F32, 2, 3, 4), tensor(F32, 4, 5), tensor(F32, 2, 5)),
        "main",
        OP,
        "niro.matmul",
        r"^'niro\.matmul' op expected rank-2 operands, got tensor<2x3x4xf32>$",
    ),
    Case(
        "matmul-unranked",
        "matmul-rank",
        _binary(MatMul, unranked(F32), F32, tensor(F32, 2, 5)),
        "main",
        OP,
        "niro.matmul",
        r"expected rank-2 operands, got tensor<\*xf32> and f32$",
    ),
    Case(
        "matmul-element-type",
        "matmul-element-type",
        _binary(MatMul, tensor(F32, 2, 3), tensor(F64, 3, 4), tensor(F32, 2, 4)),
        "main",
        OP,
        "niro.matmul",
        r"expected operands of one element type, got tensor<2x3xf32> and tensor<3x4xf64>$",
    ),
    Case(
        "matmul-bool",
        "matmul-bool",
        _binary(MatMul, tensor(BOOL, 2, 3), tensor(BOOL, 3, 4), tensor(BOOL, 2, 4)),
        "main",
        OP,
        "niro.matmul",
        r"does no arithmetic on i1 \(BOOL\) elements, got tensor<2x3xi1>$",
    ),
    Case(
        "matmul-contraction",
        "matmul-contraction",
        _binary(MatMul, tensor(F32, 2, 3), tensor(F32, 4, 5), tensor(F32, 2, 5)),
        "main",
        OP,
        "niro.matmul",
        r"^'niro\.matmul' op contraction dims differ: lhs tensor<2x3xf32> has K=3, rhs tensor<4x5xf32> has K=4$",
    ),
    Case(
        "matmul-result",
        "matmul-result-type",
        _binary(MatMul, tensor(F32, None, 3), tensor(F32, 3, 4), tensor(F32, None, 5)),
        "main",
        OP,
        "niro.matmul",
        r"expected result type tensor<\?x4xf32>, got tensor<\?x5xf32>$",
    ),
    Case(
        "transpose-scalar",
        "transpose-operand",
        _transpose(F32, (), F32),
        "main",
        OP,
        "niro.transpose",
        r"^'niro\.transpose' op expected a ranked tensor operand, got f32$",
    ),
    Case(
        "transpose-unranked",
        "transpose-operand",
        _transpose(unranked(F32), (1, 0), unranked(F32)),
        "main",
        OP,
        "niro.transpose",
        r"expected a ranked tensor operand, got tensor<\*xf32>$",
    ),
    Case(
        "transpose-permutation",
        "transpose-permutation",
        _transpose(tensor(F32, 2, 3), (0, 0), tensor(F32, 2, 2)),
        "main",
        OP,
        "niro.transpose",
        r"permutation \(0, 0\) is not a permutation of range\(2\) for operand tensor<2x3xf32>$",
    ),
    Case(
        "transpose-result",
        "transpose-result-type",
        _transpose(tensor(F32, 2, 3), (1, 0), tensor(F32, 2, 3)),
        "main",
        OP,
        "niro.transpose",
        r"expected result type tensor<3x2xf32>, got tensor<2x3xf32>$",
    ),
    Case(
        "extract-unranked",
        "tensor-extract-operand",
        _extract(unranked(F32), (), F32),
        "main",
        OP,
        "niro.tensor_extract",
        r"^'niro\.tensor_extract' op expected a ranked tensor operand, got tensor<\*xf32>$",
    ),
    Case(
        "extract-index-count",
        "tensor-extract-indices",
        _extract(tensor(F32, 2, 3), (I64,), F32),
        "main",
        OP,
        "niro.tensor_extract",
        r"expected 2 indices for tensor<2x3xf32> \(one per axis\), got 1$",
    ),
    Case(
        "extract-index-type",
        "tensor-extract-indices",
        _extract(tensor(F32, 2), (F32,), F32),
        "main",
        OP,
        "niro.tensor_extract",
        r"index #0 \(%1\) must be a scalar i32 or i64, got f32$",
        value_ids=(1,),
    ),
    Case(
        "extract-result",
        "tensor-extract-result-type",
        _extract(tensor(BOOL), (), tensor(BOOL)),
        "main",
        OP,
        "niro.tensor_extract",
        r"expected result type i1 \(the element type of tensor<i1>\), got tensor<i1>$",
    ),
]
