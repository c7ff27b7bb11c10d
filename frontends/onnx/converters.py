"""The ONNX ops Niro models, one converter each, registered by op type.

`CONVERTERS` maps a default-domain op type to a function that emits Niro ops for one node and
binds its outputs; it returns False to leave the node to the generic UnknownOp path (e.g. a
`MatMul` whose operands are not both rank 2). Result types of modelled ops follow Niro's own
rules (broadcasting, transposition, matrix products), so they always agree with the verifier;
everything else takes its types from ONNX shape inference.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx_ir
from niro.ir import (
    Add,
    Const,
    If,
    MatMul,
    Mul,
    ScalarType,
    TensorExtract,
    TensorType,
    Transpose,
    Value,
    broadcast_names,
    broadcast_shapes,
    format_type,
)
from onnx import numpy_helper

from .context import NodeContext
from .if_conditions import describe_condition_origin
from .tensors import pack_scalar

__all__ = ["CONVERTERS", "Converter", "converter"]

Converter = Callable[[NodeContext], bool]
CONVERTERS: dict[str, Converter] = {}


def converter(op_type: str) -> Callable[[Converter], Converter]:
    """Register `function` as the converter of default-domain `op_type` nodes."""

    def register(function: Converter) -> Converter:
        if op_type in CONVERTERS:
            raise ValueError(f"converter for {op_type} registered twice")
        CONVERTERS[op_type] = function
        return function

    return register


def _tensor_input(ctx: NodeContext, position: int, role: str) -> Value:
    if position >= len(ctx.inputs) or ctx.inputs[position] is None:
        raise ctx.error(f"missing required input #{position} ({role})")
    value = ctx.inputs[position]
    assert value is not None
    if not isinstance(value.type, TensorType):
        raise ctx.error(f"input #{position} ({role}) must be a tensor, got {format_type(value.type)}")
    return value


# -- Constant ------------------------------------------------------------------------------------

_CONSTANT_LISTS = {
    "value_float": (ScalarType.F32, False),
    "value_floats": (ScalarType.F32, True),
    "value_int": (ScalarType.I64, False),
    "value_ints": (ScalarType.I64, True),
}


_CONSTANT_KINDS = {
    "value": onnx_ir.AttributeType.TENSOR,
    "value_float": onnx_ir.AttributeType.FLOAT,
    "value_floats": onnx_ir.AttributeType.FLOATS,
    "value_int": onnx_ir.AttributeType.INT,
    "value_ints": onnx_ir.AttributeType.INTS,
    "value_string": onnx_ir.AttributeType.STRING,
    "value_strings": onnx_ir.AttributeType.STRINGS,
    "sparse_value": onnx_ir.AttributeType.SPARSE_TENSOR,
}
"""The kind ONNX gives each `value*` attribute of Constant (a mutated model may lie)."""


@converter("Constant")
def convert_constant(ctx: NodeContext) -> bool:
    """Every `value*` form becomes one Const of the tensor type the attribute implies."""
    attributes = ctx.node.attributes
    if len(attributes) != 1:
        names = ", ".join(sorted(attributes)) or "none"
        raise ctx.error(f"expected exactly one value attribute, got {names}")
    name, attribute = next(iter(attributes.items()))
    if attribute.is_ref():
        raise ctx.error(f"attribute '{name}' refers to a function attribute outside a function")
    expected = _CONSTANT_KINDS.get(name)
    if expected is not None and attribute.type is not expected:
        raise ctx.error(f"attribute '{name}' must be of kind {expected.name}, got {attribute.type.name}")
    if name == "value":
        tensor_type, data = ctx.read_node_tensor(attribute.value, f"attribute '{name}'")
        literal = data
    elif name in _CONSTANT_LISTS:
        scalar, is_list = _CONSTANT_LISTS[name]
        items = tuple(attribute.value) if is_list else (attribute.value,)
        tensor_type = TensorType(scalar, (len(items),) if is_list else ())
        literal = b"".join(pack_scalar(item, scalar) for item in items)
    elif name in ("value_string", "value_strings"):
        raise ctx.error("string constants are not supported (Niro has no string type)")
    elif name == "sparse_value":
        raise ctx.error("sparse constants are not supported")
    else:
        raise ctx.error(f"unknown attribute '{name}'")
    result = ctx.new_value(tensor_type)
    ctx.emit(Const(result, literal, loc=ctx.loc))
    ctx.bind(0, result)
    return True


# -- Identity --------------------------------------------------------------------------------


@converter("Identity")
def convert_identity(ctx: NodeContext) -> bool:
    """The output denotes the input itself; no op is emitted."""
    value = _tensor_input(ctx, 0, "input")
    ctx.bind(0, value)
    return True


# -- element-wise arithmetic -------------------------------------------------------------------


def _binary(ctx: NodeContext, op_class: type[Add] | type[Mul]) -> bool:
    # NOTE: before opset 7, Add/Mul with an `axis` attribute broadcast from that axis, not
    # NumPy-style; those stay generic.
    if ctx.opset() < 7 and ctx.attribute("axis") is not None:
        return False
    lhs = _tensor_input(ctx, 0, "A")
    rhs = _tensor_input(ctx, 1, "B")
    assert isinstance(lhs.type, TensorType) and isinstance(rhs.type, TensorType)
    if lhs.type.element_type is not rhs.type.element_type:
        raise ctx.error(
            f"operands have different element types: {format_type(lhs.type)} and {format_type(rhs.type)}"
        )
    if lhs.type.element_type is ScalarType.BOOL:
        return False
    try:
        shape = broadcast_shapes(lhs.type.shape, rhs.type.shape)
    except ValueError as error:
        raise ctx.error(str(error)) from None
    result = ctx.new_value(
        TensorType(lhs.type.element_type, shape, broadcast_names(shape, lhs.type, rhs.type))
    )
    ctx.emit(op_class(result, lhs, rhs, loc=ctx.loc))
    ctx.bind(0, result)
    return True


@converter("Add")
def convert_add(ctx: NodeContext) -> bool:
    return _binary(ctx, Add)


@converter("Mul")
def convert_mul(ctx: NodeContext) -> bool:
    return _binary(ctx, Mul)


# -- MatMul, Transpose, Gemm ---------------------------------------------------------------------


def _matmul(ctx: NodeContext, lhs: Value, rhs: Value) -> Value:
    assert isinstance(lhs.type, TensorType) and isinstance(rhs.type, TensorType)
    assert lhs.type.shape is not None and rhs.type.shape is not None
    if lhs.type.element_type is not rhs.type.element_type:
        raise ctx.error(
            f"operands have different element types: {format_type(lhs.type)} and {format_type(rhs.type)}"
        )
    rows, inner = lhs.type.shape
    inner_rhs, columns = rhs.type.shape
    if inner is not None and inner_rhs is not None and inner != inner_rhs:
        raise ctx.error(
            f"inner dimensions differ: {format_type(lhs.type)} x {format_type(rhs.type)}"
        )
    names = (lhs.type.dim_name(0), rhs.type.dim_name(1))
    result = ctx.new_value(
        TensorType(lhs.type.element_type, (rows, columns), names if any(names) else None)
    )
    ctx.emit(MatMul(result, lhs, rhs, loc=ctx.loc))
    return result


def _is_matrix(value: Value) -> bool:
    return isinstance(value.type, TensorType) and value.type.rank == 2


def _is_numeric(value: Value) -> bool:
    """Niro does no arithmetic on BOOL."""
    return isinstance(value.type, TensorType) and not value.type.element_type.is_bool


@converter("MatMul")
def convert_matmul(ctx: NodeContext) -> bool:
    """Rank-2 operands only; other ranks (batched, vector) stay `onnx.MatMul`."""
    lhs = _tensor_input(ctx, 0, "A")
    rhs = _tensor_input(ctx, 1, "B")
    if not (_is_matrix(lhs) and _is_matrix(rhs)) or not _is_numeric(lhs):
        return False
    ctx.bind(0, _matmul(ctx, lhs, rhs))
    return True


def _transpose(ctx: NodeContext, operand: Value, permutation: tuple[int, ...]) -> Value:
    assert isinstance(operand.type, TensorType) and operand.type.shape is not None
    shape = operand.type.shape
    names = operand.type.dim_names
    result = ctx.new_value(
        TensorType(
            operand.type.element_type,
            tuple(shape[axis] for axis in permutation),
            None if names is None else tuple(names[axis] for axis in permutation),
        )
    )
    ctx.emit(Transpose(result, operand, permutation, loc=ctx.loc))
    return result


@converter("Transpose")
def convert_transpose(ctx: NodeContext) -> bool:
    """`perm` (default: the dims reversed); an operand of unknown rank stays generic."""
    operand = _tensor_input(ctx, 0, "data")
    assert isinstance(operand.type, TensorType)
    if operand.type.shape is None:
        origin = ctx.operand_origin(0)
        why = "which shape inference could not type" if origin.startswith("output") else "declared without a shape"
        ctx.generic_reason = f"its operand {format_type(operand.type)} has unknown rank ({origin}, {why})"
        return False
    rank = len(operand.type.shape)
    permutation = ctx.ints_attribute("perm")
    if permutation is None:
        permutation = tuple(reversed(range(rank)))
    if sorted(permutation) != list(range(rank)):
        raise ctx.error(
            f"perm {list(permutation)} is not a permutation of the {rank} dims of {format_type(operand.type)}"
        )
    ctx.bind(0, _transpose(ctx, operand, permutation))
    return True


def _scaled(ctx: NodeContext, value: Value, factor: float) -> Value:
    """`value` times a rank-0 Const `factor` (skipped when the factor is 1)."""
    if factor == 1.0:
        return value
    assert isinstance(value.type, TensorType)
    element = value.type.element_type
    constant = ctx.new_value(TensorType(element, ()))
    ctx.emit(Const(constant, pack_scalar(factor, element), loc=ctx.loc))
    result = ctx.new_value(value.type)
    ctx.emit(Mul(result, value, constant, loc=ctx.loc))
    return result


@converter("Gemm")
def convert_gemm(ctx: NodeContext) -> bool:
    """alpha * op(A) @ op(B) + beta * C as Transpose / MatMul / Mul by a Const / Add.

    A plain MLP layer (alpha = beta = 1, transB = 1) becomes Transpose, MatMul, Add.
    """
    a = _tensor_input(ctx, 0, "A")
    b = _tensor_input(ctx, 1, "B")
    c = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    if not (_is_matrix(a) and _is_matrix(b)) or not _is_numeric(a):
        return False
    assert isinstance(a.type, TensorType)
    element = a.type.element_type
    # NOTE: Gemm-1/6 broadcast C only when asked (`broadcast=1`), by the same unidirectional rule
    # as later versions; NumPy broadcasting agrees with both whenever the model is valid.
    alpha = ctx.float_attribute("alpha", 1.0)
    beta = ctx.float_attribute("beta", 1.0)
    if not element.is_float and (alpha != 1.0 or (beta != 1.0 and c is not None)):
        return False  # integer Gemm scales in float; a Const of the element type would truncate
    if ctx.int_attribute("transA", 0):
        a = _transpose(ctx, a, (1, 0))
    if ctx.int_attribute("transB", 0):
        b = _transpose(ctx, b, (1, 0))
    product = _scaled(ctx, _matmul(ctx, a, b), alpha)
    if c is not None:
        if not isinstance(c.type, TensorType) or c.type.element_type is not element:
            raise ctx.error(f"C must be a tensor like A, got {format_type(c.type)}")
        bias = _scaled(ctx, c, beta)
        assert isinstance(product.type, TensorType)
        try:
            shape = broadcast_shapes(product.type.shape, c.type.shape)
        except ValueError as error:
            raise ctx.error(f"C does not broadcast to A @ B: {error}") from None
        total = ctx.new_value(
            TensorType(product.type.element_type, shape, broadcast_names(shape, product.type, c.type))
        )
        ctx.emit(Add(total, product, bias, loc=ctx.loc))
        product = total
    ctx.bind(0, product)
    return True


# -- If --------------------------------------------------------------------------------------


def _inline_taken_branch(ctx: NodeContext, condition: bool) -> None:
    """An If whose condition is a constant (often folded shape arithmetic, as in the bodies
    ONNX gives AffineGrid or CenterCropPad) is the branch it takes: only that subgraph is
    imported, its ops placed where the If was (the other may not even type-check here)."""
    taken = "then_branch" if condition else "else_branch"
    region, values = ctx.build_region(ctx, taken, 0)
    block = region.blocks[0]
    if block.arguments:
        raise ctx.error(f"{taken} takes {len(block.arguments)} inputs; If branches take none")
    if len(values) != len(ctx.node.outputs):
        raise ctx.error(f"{taken} yields {len(values)} values for {len(ctx.node.outputs)} outputs")
    for op in block.operations[:-1]:  # all but the Yield
        ctx.emit(op)
    for position, value in enumerate(values):
        ctx.bind(position, value)


def _constant_ints(ctx: NodeContext, onnx_value: onnx_ir.Value) -> list[int] | None:
    """An ONNX value's data as ints if the importer holds it as a constant."""
    value = ctx.scope.lookup(onnx_value)
    data = None if value is None else ctx.builder.constant_data(value)
    if data is None or data.data_type not in (onnx.TensorProto.INT32, onnx.TensorProto.INT64):
        return None
    return [int(item) for item in numpy_helper.to_array(data).reshape(-1)]


def _rank(type_: object) -> int | None:
    return len(type_.shape) if isinstance(type_, TensorType) and type_.shape is not None else None


@converter("If")
def convert_if(ctx: NodeContext) -> bool:
    """TensorExtract of the one-element condition and a Niro If holding both subgraphs.

    A constant condition imports the taken branch alone, inline (`_inline_taken_branch`).
    Stays generic (`onnx.If` with two regions) when the condition's rank is unknown or the two
    branches yield different shapes (Niro's If needs one result type per output). Branches that
    differ in element type, or take inputs, are invalid ONNX and refused.
    """
    condition = _tensor_input(ctx, 0, "cond")
    assert isinstance(condition.type, TensorType)
    if condition.type.element_type is not ScalarType.BOOL:
        raise ctx.error(f"condition must be a bool tensor, got {format_type(condition.type)}")
    shape = condition.type.shape
    if shape is None:
        ctx.generic_reason = f"its condition {format_type(condition.type)} has unknown rank"
        return False
    if any(dim is not None and dim != 1 for dim in shape):
        raise ctx.error(f"condition must hold one element, got {format_type(condition.type)}")
    for name in ("then_branch", "else_branch"):
        found = ctx.attribute(name)
        if found is None or found.type is not onnx_ir.AttributeType.GRAPH:
            raise ctx.error(f"missing graph attribute '{name}'")
    known = ctx.builder.constant_data(condition)
    if known is not None:
        _inline_taken_branch(ctx, bool(numpy_helper.to_array(known).reshape(-1)[0]))
        return True
    then_region, then_values = ctx.build_region(ctx, "then_branch", 0)
    else_region, else_values = ctx.build_region(ctx, "else_branch", 0)
    then_types = tuple(value.type for value in then_values)
    else_types = tuple(value.type for value in else_values)
    if len(then_values) != len(ctx.node.outputs) or len(else_values) != len(ctx.node.outputs):
        raise ctx.error(
            f"then_branch yields {len(then_values)} and else_branch {len(else_values)} values for "
            f"{len(ctx.node.outputs)} outputs"
        )
    for name, region in (("then_branch", then_region), ("else_branch", else_region)):
        if region.blocks[0].arguments:
            raise ctx.error(f"{name} takes {len(region.blocks[0].arguments)} inputs; If branches take none")
    for position, (then_type, else_type) in enumerate(zip(then_types, else_types, strict=True)):
        # NOTE: ONNX lets the branches' shapes differ (the output is then dynamic), never their
        # element types or kinds
        then_element = then_type.element_type if isinstance(then_type, TensorType) else then_type
        else_element = else_type.element_type if isinstance(else_type, TensorType) else else_type
        if then_element is not else_element:
            raise ctx.error(
                f"then_branch yields {format_type(then_type)} and else_branch {format_type(else_type)} "
                f"for output #{position}: element types differ"
            )
    if then_types != else_types:
        ctx.generic_reason = (
            f"its branches yield different types (then_branch: {', '.join(map(format_type, then_types))}; "
            f"else_branch: {', '.join(map(format_type, else_types))})"
        )
        if any(_rank(then_type) != _rank(else_type) for then_type, else_type in zip(then_types, else_types, strict=True)):
            origin = describe_condition_origin(ctx.node, lambda value: _constant_ints(ctx, value))
            ctx.generic_reason += (
                (f"; {origin}" if origin else "")
                + "; static input shapes (--input-shape INPUT=DIMS, --dim NAME=SIZE) let the condition fold"
            )
        return False
    indices: tuple[Value, ...] = ()
    if shape:
        zero = ctx.new_value(ScalarType.I64)
        ctx.emit(Const(zero, 0, loc=ctx.loc))
        indices = (zero,) * len(shape)
    flag = ctx.new_value(ScalarType.BOOL)
    ctx.emit(TensorExtract(flag, condition, indices, loc=ctx.loc))
    results = tuple(ctx.new_value(type_) for type_ in then_types)
    ctx.emit(If(results, flag, then_region, else_region, loc=ctx.loc))
    for position, result in enumerate(results):
        ctx.bind(position, result)
    return True
