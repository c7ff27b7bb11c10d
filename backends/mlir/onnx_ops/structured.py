"""Small builders for `linalg.generic` with explicit maps, and the scalar plumbing around them.

Shared by the reduction, matmul/einsum and normalization families: they all build structured
ops whose loops are not simply the result's dims (reductions, contractions, statistics). A map
is written as a list with one entry per indexed dim: an int `d` is loop dim `d`, None is the
constant 0 (a broadcast size-1 dim), an `ir.AffineExpr` is used as it is.

Also here: the accumulator type of a reduction (f16/bf16 accumulate in f32), element
conversions between the two, identity values (0, 1, +-inf, min/max int) and reading a small
run-time integer tensor as scalars (for ONNX inputs such as `axes` that are graph inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from niro.ir import ScalarType

from ..bindings import arith, fill_builtin_region, ir, linalg, tensor
from ..context import LoweringRuleContext
from ..types import index_type, lower_scalar_type

__all__ = [
    "MapSpec",
    "affine_map",
    "generic",
    "empty",
    "fill",
    "named_op",
    "constant",
    "accumulator_type",
    "convert",
    "identity_value",
    "tensor_sizes",
    "read_int_scalars",
    "small_elements",
    "assert_all",
    "assert_true",
    "is_float",
    "ranked_result",
]

MapSpec = Sequence["int | None | ir.AffineExpr"]

_PARALLEL = "#linalg.iterator_type<parallel>"
_REDUCTION = "#linalg.iterator_type<reduction>"


def affine_map(loops: int, spec: MapSpec) -> ir.AffineMap:
    """The affine map of `loops` dims whose results `spec` lists (int: a dim, None: 0)."""
    exprs = []
    for entry in spec:
        if entry is None:
            exprs.append(ir.AffineConstantExpr.get(0))
        elif isinstance(entry, int):
            exprs.append(ir.AffineDimExpr.get(entry))
        else:
            exprs.append(entry)
    return ir.AffineMap.get(loops, 0, exprs)


def generic(
    inputs: Sequence[tuple[ir.Value, MapSpec]],
    outputs: Sequence[tuple[ir.Value, MapSpec]],
    loops: int,
    reductions: Sequence[int],
    body: Callable[[list[ir.Value]], Sequence[ir.Value]],
) -> list[ir.Value]:
    """A `linalg.generic` over `loops` loops (those in `reductions` are reduction loops).

    `body(arguments)` gets the block arguments (input elements, then output elements) and
    returns the yielded values, one per output. Returns the results, one per output.
    """
    maps = [affine_map(loops, spec) for _, spec in (*inputs, *outputs)]
    iterators = [
        ir.Attribute.parse(_REDUCTION if loop in reductions else _PARALLEL) for loop in range(loops)
    ]
    op = linalg.GenericOp(
        [value.type for value, _ in outputs],
        [value for value, _ in inputs],
        [value for value, _ in outputs],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(map_) for map_ in maps]),
        ir.ArrayAttr.get(iterators),
    )
    element_types = [
        ir.RankedTensorType(value.type).element_type for value, _ in (*inputs, *outputs)
    ]
    block = op.regions[0].blocks.append(*element_types)
    with ir.InsertionPoint(block):
        linalg.YieldOp(list(body(list(block.arguments))))
    return list(op.results)


def ranked_result(ctx: LoweringRuleContext, index: int = 0) -> ir.RankedTensorType:
    """The MLIR type of result `index`, refused clearly when it is not a ranked tensor (e.g.
    ONNX shape inference could not find its rank)."""
    ctx.ranked(ctx.niro_results[index], f"result #{index}")
    return ir.RankedTensorType(ctx.result_types[index])


def tensor_size(value: ir.Value, axis: int) -> int | ir.Value:
    """Dim `axis` of a ranked tensor value: its static size, or a `tensor.dim` when dynamic
    (built only then, so a static lowering builds nothing extra)."""
    shaped = ir.RankedTensorType(value.type)
    if not shaped.is_dynamic_dim(axis):
        return shaped.shape[axis]
    index = arith.ConstantOp(index_type(), ir.IntegerAttr.get(index_type(), axis)).result
    return tensor.DimOp(value, index).result


def tensor_sizes(value: ir.Value) -> list[int | ir.Value]:
    """Each dim of a ranked tensor value, as `tensor_size` gives it."""
    return [tensor_size(value, axis) for axis in range(ir.RankedTensorType(value.type).rank)]


def empty(sizes: Sequence[int | ir.Value], element: ir.Type) -> ir.Value:
    """`tensor.empty` with static sizes as ints and dynamic ones as index values."""
    return tensor.EmptyOp(list(sizes), element).result


def fill(init: ir.Value, value: ir.Value) -> ir.Value:
    """`linalg.fill` of `init` with the scalar `value` (the one builder of fills: see
    `named_op` for why not the OpDSL helper)."""
    return named_op(linalg.FillOp, [value], init)


def named_op(op_class, inputs: Sequence[ir.Value], init: ir.Value, **attributes) -> ir.Value:
    """A linalg named op (`linalg.FillOp`, `linalg.Conv2DNchwFchwOp`...) writing into `init`,
    its region made by MLIR's C++ builder (OpDSL's Python builders re-derive the op on every
    call, ~0.2 ms each, and cost ~45 ms to import)."""
    op = op_class([init.type], list(inputs), [init], **attributes)
    fill_builtin_region(op.operation)
    return op.result


def is_float(element: ir.Type) -> bool:
    return not isinstance(element, (ir.IntegerType, ir.IndexType))


def constant(element: ir.Type, value: float | int) -> ir.Value:
    """A scalar constant of an integer or float MLIR type (ints wrap to the type's width)."""
    if isinstance(element, ir.IntegerType):
        width = element.width
        value = int(value) & ((1 << width) - 1)
        if width > 1 and value >= 1 << (width - 1):
            value -= 1 << width
        return arith.ConstantOp(element, ir.IntegerAttr.get(element, value)).result
    return arith.ConstantOp(element, ir.FloatAttr.get(element, float(value))).result


def accumulator_type(scalar: ScalarType) -> ir.Type:
    """Where to accumulate sums of `scalar`: f32 for f16/bf16 (precision), else the type."""
    if scalar in (ScalarType.F16, ScalarType.BF16):
        return ir.F32Type.get()
    return lower_scalar_type(scalar)


def convert(value: ir.Value, target: ir.Type) -> ir.Value:
    """Float widening/narrowing between float types (identity when the types agree)."""
    source = value.type
    if source == target:
        return value
    if _float_width(source) < _float_width(target):
        return arith.ExtFOp(target, value).result
    return arith.TruncFOp(target, value).result


def _float_width(type_: ir.Type) -> int:
    return ir.FloatType(type_).width


def identity_value(scalar: ScalarType, kind: str) -> float | int:
    """The identity of a combining function over `scalar` elements ("max": the lowest value,
    "min": the highest), as ONNX defines an empty max/min: -inf/+inf, or the integer extremes."""
    if scalar.is_float:
        return float("-inf") if kind == "max" else float("inf")
    low, high = scalar.integer_range
    return low if kind == "max" else high


def read_int_scalars(value: ir.Value, count: int) -> list[ir.Value]:
    """The `count` elements of a rank-0 or rank-1 integer tensor, as i64 scalars (sign-extended)."""
    shaped = ir.RankedTensorType(value.type)
    i64 = ir.IntegerType.get_signless(64)
    small = small_elements(value)
    scalars = []
    for position in range(count):
        if small is not None:
            element = small[position]
        else:
            indices = [] if shaped.rank == 0 else [_index_constant(position)]
            element = tensor.ExtractOp(value, indices).result
        if ir.IntegerType(element.type).width < 64:
            element = arith.ExtSIOp(i64, element).result
        scalars.append(element)
    return scalars


SMALL_VECTOR = 16  # elements: shape vectors, axes, the operands of shape arithmetic


def small_elements(value: ir.Value, known=None) -> list[ir.Value] | None:
    """The elements of a static integer tensor of rank <= 1 with at most SMALL_VECTOR elements,
    as scalars read through the `tensor.from_elements`, reshapes, slices and constants that
    made it (`known`: its contents when the caller knows them at compile time, e.g.
    `ctx.constant_operand`, for initializers); None for any other tensor.

    Why: exporters compute shapes as tensors (Shape, Gather, Unsqueeze, Concat, then Reshape).
    Kept as scalars, that arithmetic stays on IREE's host side; as tensors, each Gather or
    Concat of them is a device dispatch whose result the host then reads back, one wait for
    the device (a submission) each."""
    try:
        shaped = ir.RankedTensorType(value.type)
    except ValueError:
        return None
    count = 1 if shaped.rank == 0 else shaped.shape[0] if shaped.rank == 1 else -1
    if (
        not shaped.has_static_shape
        or not 0 <= count <= SMALL_VECTOR
        or not isinstance(shaped.element_type, ir.IntegerType)
    ):
        return None
    element = shaped.element_type
    if known is not None:
        return [
            arith.ConstantOp(element, ir.IntegerAttr.get(element, int(n))).result
            for n in known.reshape(-1)
        ]
    owner = value.owner
    name = owner.name if isinstance(owner, (ir.Operation, ir.OpView)) else ""
    if name == "tensor.from_elements":
        return list(owner.operands)
    if name in ("tensor.expand_shape", "tensor.collapse_shape"):
        inner = small_elements(owner.operands[0])
        if inner is not None and len(inner) == count:
            return inner
    if name == "tensor.extract_slice" and len(owner.operands) == 1 and shaped.rank == 1:
        inner = small_elements(owner.operands[0])
        offset = list(ir.DenseI64ArrayAttr(owner.attributes["static_offsets"]))
        stride = list(ir.DenseI64ArrayAttr(owner.attributes["static_strides"]))
        if inner is not None and len(offset) == 1:
            return [inner[offset[0] + position * stride[0]] for position in range(count)]
    if name == "arith.constant" and isinstance(owner.attributes["value"], ir.DenseIntElementsAttr):
        data = ir.DenseIntElementsAttr(owner.attributes["value"])
        numbers = [data.get_splat_value().value] * count if data.is_splat else list(data)
        return [arith.ConstantOp(element, ir.IntegerAttr.get(element, n)).result for n in numbers]
    return [
        tensor.ExtractOp(value, [] if shaped.rank == 0 else [_index_constant(position)]).result
        for position in range(count)
    ]


def _index_constant(position: int) -> ir.Value:
    return arith.ConstantOp(index_type(), ir.IntegerAttr.get(index_type(), position)).result


def assert_true(condition: ir.Value, message: str) -> None:
    """A run-time check (`cf.assert`): the program fails with `message` when it is false."""
    from ..bindings import cf

    cf.AssertOp(condition, message)


def assert_all(
    inputs: Sequence[tuple[ir.Value, MapSpec]],
    loops: int,
    holds: Callable[[list[ir.Value]], ir.Value],
    message: str,
) -> None:
    """A run-time check over every element: `holds(elements)` (an i1) must be true for all of
    them (counted by one reduction over all `loops`), else the program fails with `message`."""
    i64 = ir.IntegerType.get_signless(64)

    def count(arguments):
        *elements, failures = arguments
        more = arith.AddIOp(failures, constant(i64, 1)).result
        return [arith.SelectOp(holds(elements), failures, more).result]

    init = fill(empty([], i64), constant(i64, 0))
    failures = generic(inputs, [(init, [])], loops, tuple(range(loops)), count)[0]
    none = arith.CmpIOp(arith.CmpIPredicate.eq, tensor.ExtractOp(failures, []).result, constant(i64, 0))
    assert_true(none.result, message)
