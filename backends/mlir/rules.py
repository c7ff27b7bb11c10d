"""The built-in lowering rules: one per Niro op class, checked complete at import.

Each rule follows docs/design.md's table (func, ml_program, arith, linalg, tensor, cf, scf). Rules
build at the context's insertion point and location and return the MLIR values of the op's
results. Control-flow rules ask the context to lower their nested blocks (`ctx.lower_block`).
"""

from __future__ import annotations

from collections.abc import Sequence

from niro.ir import (
    OP_KINDS,
    OPSET_ATTRIBUTE,
    Add,
    Branch,
    Call,
    CondBranch,
    Const,
    GetGlobal,
    If,
    MatMul,
    Mul,
    Region,
    Return,
    ScalarType,
    TensorExtract,
    TensorType,
    Transpose,
    UnknownOp,
    Yield,
    format_type,
)

from . import sub_byte
from .bindings import arith, cf, func, mlir_ir, scf, tensor
from .builders import (
    Arithmetic,
    as_index,
    binary_arithmetic,
    dim_size,
    empty,
    empty_tensor,
    index_constant,
    matmul,
    transpose,
    untiled,
    untiled_filter,
)
from .context import LoweringRuleContext
from .literals import scalar_attr, tensor_data_attr
from .registry import KNOWN_LOWERINGS, lowering, registered_lowering
from .types import lower_type
from .weight_layout import Layout, filter_tiles_type, matrix_dims, tiled_type

__all__ = ["KNOWN_LOWERINGS"]


@lowering(Const)
def _lower_const(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, Const), op
    result_type = op.result.type
    if isinstance(result_type, ScalarType):
        if not isinstance(op.literal, (bool, int, float)):
            raise ctx.error(f"expected a bool, int or float literal for {format_type(result_type)}")
        attribute = scalar_attr(result_type, op.literal)
    else:
        if not result_type.is_static:
            raise ctx.error(f"needs a static tensor type, got {format_type(result_type)}")
        name = ctx.next_constant_name()
        stored = (
            sub_byte.packed_type(result_type) if sub_byte.is_packed(result_type) else result_type
        )
        try:
            attribute = tensor_data_attr(stored, op.literal, resources=ctx.resources, name=name)
        except ValueError as error:
            raise ctx.error(str(error)) from error
        if stored is not result_type:
            packed = arith.ConstantOp(lower_type(stored), attribute).result
            return [sub_byte.unpack(packed, result_type)]
    return [arith.ConstantOp(ctx.result_types[0], attribute).result]


@lowering(GetGlobal)
def _lower_get_global(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, GetGlobal), op
    global_type = ctx.global_type(op.name)
    if global_type is None:
        raise ctx.error(f"refers to @{op.name}, which is not a global of this module")
    symbol = mlir_ir.FlatSymbolRefAttr.get(op.name)

    def load(stored: mlir_ir.Type) -> mlir_ir.Value:
        return mlir_ir.Operation.create(
            "ml_program.global_load_const", results=[stored], attributes={"global": symbol}
        ).result

    if isinstance(global_type, ScalarType):
        # A scalar global is stored as a 0-d tensor; read it back with tensor.extract.
        return [tensor.ExtractOp(load(lower_type(TensorType(global_type, ()))), []).result]
    if sub_byte.is_packed(global_type):
        return [sub_byte.unpack(load(lower_type(sub_byte.packed_type(global_type))), global_type)]
    layout = ctx.global_layout(op.name)  # a weight its products read so (weight_layout.py)
    if layout is Layout.TRANSPOSED:
        rows, columns = matrix_dims(global_type)
        stored = load(ctx.mlir_type(TensorType(global_type.element_type, (columns, rows))))
        element = ctx.mlir_type(global_type.element_type)
        return [transpose(stored, empty([rows, columns], element), _permutation(ctx, (1, 0)))]
    if layout is Layout.TILES:
        return [untiled(load(ctx.mlir_type(tiled_type(global_type))))]
    if layout is Layout.FILTER_TILES:
        assert isinstance(global_type, TensorType) and global_type.shape is not None
        tiles = load(ctx.mlir_type(filter_tiles_type(global_type)))
        return [untiled_filter(tiles, [size or 0 for size in global_type.shape])]
    return [load(ctx.result_types[0])]


def _permutation(ctx: LoweringRuleContext, permutation: tuple[int, ...]) -> mlir_ir.Attribute:
    """`permutation` as the DenseI64ArrayAttr a `linalg.transpose` takes, made once per module."""
    return ctx.shared_object(
        ("permutation", permutation), lambda: mlir_ir.DenseI64ArrayAttr.get(list(permutation))
    )


@lowering(Transpose)
def _lower_transpose(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, Transpose), op
    source = ctx.ranked(op.operand, "operand")
    result = ctx.ranked(op.result, "result")
    if sorted(op.permutation) != list(range(len(source.shape))):
        raise ctx.error(
            f"permutation {list(op.permutation)} is not a permutation of rank {len(source.shape)}"
        )
    sizes = [
        dim_size(ctx.operands[0], op.permutation[axis]) if dim is None else None
        for axis, dim in enumerate(result.shape)
    ]
    init = empty_tensor(ctx, result, sizes)
    return [transpose(ctx.operands[0], init, _permutation(ctx, tuple(op.permutation)))]


@lowering(TensorExtract)
def _lower_tensor_extract(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, TensorExtract), op
    source = ctx.ranked(op.operand, "operand")
    if len(op.indices) != len(source.shape):
        raise ctx.error(
            f"needs {len(source.shape)} indices for {format_type(source)}, got {len(op.indices)}"
        )
    indices = [as_index(index) for index in ctx.operands[1:]]
    return [tensor.ExtractOp(ctx.operands[0], indices).result]


def _arith_binary(ctx: LoweringRuleContext, operation: Arithmetic) -> Sequence[mlir_ir.Value]:
    """Add/Mul, computed in the element type (f16 too: the same numbers as `onnx.Add`'s f32)."""
    result_type = ctx.niro_results[0].type
    element = result_type if isinstance(result_type, ScalarType) else result_type.element_type
    if element.is_bool:
        raise ctx.error("does not compute on i1 (BOOL)")
    return [binary_arithmetic(ctx, operation, halves_in_f32=False)]


@lowering(Add)
def _lower_add(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _arith_binary(ctx, "add")


@lowering(Mul)
def _lower_mul(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    return _arith_binary(ctx, "mul")


@lowering(MatMul)
def _lower_matmul(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    """Rank 2, summed in the element type (f16 too, where `onnx.MatMul` sums in f32)."""
    op = ctx.op
    assert isinstance(op, MatMul), op
    lhs = ctx.ranked(op.lhs, "lhs")
    rhs = ctx.ranked(op.rhs, "rhs")
    result = ctx.ranked(op.result, "result")
    if len(lhs.shape) != 2 or len(rhs.shape) != 2 or len(result.shape) != 2:
        raise ctx.error(f"expected rank-2 operands, got {format_type(lhs)} and {format_type(rhs)}")
    if result.element_type.is_bool:
        raise ctx.error("does not compute on i1 (BOOL)")
    return [matmul(ctx, ctx.mlir_type(result.element_type))]


@lowering(Call)
def _lower_call(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, Call), op
    if not ctx.has_function(op.callee):
        raise ctx.error(f"calls @{op.callee}, which is not a function of this module")
    ctx.record_call(op.callee)
    call = func.CallOp(
        list(ctx.result_types), mlir_ir.FlatSymbolRefAttr.get(op.callee), list(ctx.operands)
    )
    return list(call.results)


@lowering(Branch)
def _lower_branch(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, Branch), op
    cf.BranchOp(list(ctx.operands), ctx.successor(op.target))
    return []


@lowering(CondBranch)
def _lower_cond_branch(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, CondBranch), op
    true_count = len(op.true_arguments)
    cf.CondBranchOp(
        ctx.operands[0],
        list(ctx.operands[1 : 1 + true_count]),
        list(ctx.operands[1 + true_count :]),
        ctx.successor(op.true_target),
        ctx.successor(op.false_target),
    )
    return []


@lowering(Return)
def _lower_return(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    func.ReturnOp(list(ctx.operands))
    return []


@lowering(Yield)
def _lower_yield(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    ctx.build_yield()
    return []


@lowering(If)
def _lower_if(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, If), op
    return lower_if(ctx, ctx.operands[0], (op.then_region, op.else_region))


def lower_if(
    ctx: LoweringRuleContext, condition: mlir_ir.Value, arms: tuple[Region, Region]
) -> list[mlir_ir.Value]:
    """The one lowering of an If (Niro's, and `onnx.If` once its ONNX form is checked): an
    `scf.if` with the op's result types, its arms the lowered single blocks of `arms`.

    `condition` is an i1, or a one-element tensor of i1 (read with `tensor.extract`). A yielded
    value whose type differs from the result's (an `onnx.If` whose arms yield different shapes
    of one rank) is `tensor.cast` to it; Niro's If yields the result types exactly."""
    if isinstance(condition.type, mlir_ir.RankedTensorType):
        rank = mlir_ir.RankedTensorType(condition.type).rank
        condition = tensor.ExtractOp(condition, [index_constant(0)] * rank).result
    result_types = list(ctx.result_types)

    def build_yield(yield_ctx: LoweringRuleContext) -> None:
        values = [
            value if value.type == wanted else tensor.CastOp(wanted, value).result
            for value, wanted in zip(yield_ctx.operands, result_types, strict=True)
        ]
        scf.YieldOp(values)

    if_op = scf.IfOp(condition, result_types, has_else=True)
    for index, (niro_region, block) in enumerate(
        zip(arms, (if_op.then_block, if_op.else_block), strict=True)
    ):
        if len(niro_region.blocks) != 1 or niro_region.blocks[0].arguments:
            raise ctx.error("expects each region to hold one argument-free block")
        ctx.lower_block(niro_region.blocks[0], block, region=index, yield_builder=build_yield)
    return list(if_op.results)


@lowering(UnknownOp)
def _lower_unknown(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    op = ctx.op
    assert isinstance(op, UnknownOp), op
    registration = registered_lowering(op.name)
    if registration is None:
        return ctx.build_generic()
    version = op.attributes.get(OPSET_ATTRIBUTE)
    if (
        isinstance(version, int)
        and not isinstance(version, bool)
        and not registration.supports(version)
    ):
        raise ctx.error(
            f"is not supported at opset {version} (niroc lowers {registration.describe_versions()})"
        )
    return registration.rule(ctx)


_missing = [kind.__name__ for kind in OP_KINDS if kind not in KNOWN_LOWERINGS]
if _missing:  # pragma: no cover - a new op kind without a rule fails at import
    raise AssertionError(f"no MLIR lowering for Niro op kinds: {', '.join(_missing)}")
