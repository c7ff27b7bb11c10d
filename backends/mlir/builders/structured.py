"""linalg's structured ops: `generic` with explicit maps, `fill`, and the named ops.

Every structured op is built with the generic operation builder (`mlir_ir.Operation.create`) and,
for a named op, its region by MLIR's C++ region builder (`fill_builtin_region`).

NOTE: not the generated op classes (`linalg.GenericOp`, `linalg.MatmulOp`...), which re-derive
the operand segments and check each attribute in Python (2-3x the time of the generic
builder), nor linalg's OpDSL helpers (`linalg.fill(...)`), which rebuild the op's definition
in Python on every call (~0.2 ms each) and cost ~45 ms to import. Same ops, same text.

A map is written as a list with one entry per indexed dim: an int `d` is loop dim `d`, None is
the constant 0 (a broadcast size-1 dim), an `mlir_ir.AffineExpr` (`dim(d) * 2 + dim(e)`) is used as
it is. Loops are parallel except those listed in `reductions`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Union

from ..bindings import fill_builtin_region, mlir_ir
from .shapes import empty, tensor_sizes

__all__ = [
    "MapSpec",
    "dim",
    "affine_map",
    "generic",
    "fill",
    "filled",
    "named_op",
    "pack",
    "transpose",
    "unpack",
]

MapSpec = Sequence[Union[int, None, "mlir_ir.AffineExpr"]]


def dim(position: int) -> mlir_ir.AffineExpr:
    """Loop dim `position` as an affine expression (to write strided or shifted maps)."""
    return mlir_ir.AffineDimExpr.get(position)


def affine_map(loops: int, spec: MapSpec) -> mlir_ir.AffineMap:
    """The affine map of `loops` dims whose results `spec` lists (int: a dim, None: 0)."""
    exprs = []
    for entry in spec:
        if entry is None:
            exprs.append(mlir_ir.AffineConstantExpr.get(0))
        elif isinstance(entry, int):
            exprs.append(mlir_ir.AffineDimExpr.get(entry))
        else:
            exprs.append(entry)
    return mlir_ir.AffineMap.get(loops, 0, exprs)


def _segments(inputs: int, outputs: int) -> mlir_ir.Attribute:
    return mlir_ir.DenseI32ArrayAttr.get([inputs, outputs])


def generic(
    inputs: Sequence[tuple[mlir_ir.Value, MapSpec]],
    outputs: Sequence[tuple[mlir_ir.Value, MapSpec]],
    loops: int,
    reductions: Sequence[int],
    body: Callable[[list[mlir_ir.Value]], Sequence[mlir_ir.Value]],
) -> list[mlir_ir.Value]:
    """A `linalg.generic` over `loops` loops (those in `reductions` are reduction loops).

    `body(arguments)` gets the block arguments (input elements, then output elements) and
    returns the yielded values, one per output. Returns the results, one per output.
    """
    maps = [mlir_ir.AffineMapAttr.get(affine_map(loops, spec)) for _, spec in (*inputs, *outputs)]
    parallel = mlir_ir.Attribute.parse("#linalg.iterator_type<parallel>")
    reduction = mlir_ir.Attribute.parse("#linalg.iterator_type<reduction>")
    iterators = [reduction if loop in reductions else parallel for loop in range(loops)]
    op = mlir_ir.Operation.create(
        "linalg.generic",
        results=[value.type for value, _ in outputs],
        operands=[value for value, _ in (*inputs, *outputs)],
        attributes={
            "indexing_maps": mlir_ir.ArrayAttr.get(maps),
            "iterator_types": mlir_ir.ArrayAttr.get(iterators),
            "operandSegmentSizes": _segments(len(inputs), len(outputs)),
        },
        regions=1,
    )
    element_types = [
        mlir_ir.RankedTensorType(value.type).element_type for value, _ in (*inputs, *outputs)
    ]
    block = op.regions[0].blocks.append(*element_types)
    with mlir_ir.InsertionPoint(block):
        mlir_ir.Operation.create("linalg.yield", operands=list(body(list(block.arguments))))
    return list(op.results)


_DEFAULT_MAPS = {"linalg.matmul": (3, ((0, 2), (2, 1), (0, 1)))}
"""Named ops whose `indexing_maps` attribute has a default, and that default (loops, maps).

NOTE: IREE 3.13's iree-compile crashes (a null attribute in `MatmulTransposeAOp::
isDefaultIndexingMaps`, from its PropagateLinalgTranspose pass) on a `linalg.matmul` with a
transposed operand read from bytecode without `indexing_maps`: the text parser fills the
default in, the bytecode reader does not, so `niroc check` and `-o x.mlirbc` of a Gemm with
transB failed where the text compiled. The maps are therefore always written."""


def named_op(
    name: str,
    inputs: Sequence[mlir_ir.Value],
    init: mlir_ir.Value,
    attributes: dict[str, mlir_ir.Attribute] | None = None,
) -> mlir_ir.Value:
    """The linalg named op `name` ("linalg.matmul", "linalg.conv_2d_nchw_fchw"...) of `inputs`
    writing into `init`, with `attributes` (strides, dilations...)."""
    defaults = {}
    if name in _DEFAULT_MAPS:
        loops, specs = _DEFAULT_MAPS[name]
        maps = [mlir_ir.AffineMapAttr.get(affine_map(loops, spec)) for spec in specs]
        defaults["indexing_maps"] = mlir_ir.ArrayAttr.get(maps)
    op = mlir_ir.Operation.create(
        name,
        results=[init.type],
        operands=[*inputs, init],
        attributes={
            **defaults,
            **(attributes or {}),
            "operandSegmentSizes": _segments(len(inputs), 1),
        },
        regions=1,
    )
    fill_builtin_region(op)
    return op.result


def fill(init: mlir_ir.Value, value: mlir_ir.Value) -> mlir_ir.Value:
    """`linalg.fill` of `init` with the scalar `value`."""
    return named_op("linalg.fill", [value], init)


def filled(
    sizes: Sequence[int | mlir_ir.Value], element: mlir_ir.Type, value: mlir_ir.Value
) -> mlir_ir.Value:
    """A tensor of mixed `sizes` and `element` type filled with the scalar `value`."""
    return fill(empty(sizes, element), value)


def transpose(
    value: mlir_ir.Value, init: mlir_ir.Value, permutation: mlir_ir.Attribute
) -> mlir_ir.Value:
    """`linalg.transpose` of `value` into `init`: result dim i is `value`'s dim
    `permutation[i]` (a DenseI64ArrayAttr, which callers share between ops).

    NOTE: the generic builder: `linalg.TransposeOp` converts the permutation and checks its
    arguments in Python (2x the time; same op). Its region (one yield of the input element) is
    built as the op's printer/parser would.

    NOTE: IREE 3.13's MLIR crashes on a `linalg.transpose` of rank 0 (`permutation = []`): a
    segmentation fault in the verifier (iree-opt too), so a model transposing a scalar killed
    niroc. The transpose of a scalar is the scalar, and none is written."""
    if mlir_ir.RankedTensorType(value.type).rank == 0:
        return value
    transposed = mlir_ir.Operation.create(
        "linalg.transpose",
        results=[init.type],
        operands=[value, init],
        attributes={"permutation": permutation},
        regions=1,
    )
    element = mlir_ir.RankedTensorType(init.type).element_type
    block = transposed.regions[0].blocks.append(element, element)
    with mlir_ir.InsertionPoint(block):
        mlir_ir.Operation.create("linalg.yield", operands=[block.arguments[0]])
    return transposed.result


def pack(
    value: mlir_ir.Value,
    outer: Sequence[int | mlir_ir.Value],
    tile: Sequence[int],
    padding: mlir_ir.Value | None = None,
    *,
    transposed: bool = False,
) -> mlir_ir.Value:
    """`linalg.pack` of `value`'s last len(`tile`) dims into tiles: [..., outer..., tile...],
    `outer` the number of tiles along each (an index value where it is a run-time size), the
    last tiles filled out with the scalar `padding` (needed where a tile may not divide).
    `transposed` packs [..., A, B] as its transpose [..., B, A] would be (`outer` and `tile`
    in that order), the transposition done by the pack's own copy."""
    source = mlir_ir.RankedTensorType(value.type)
    tiled = list(range(source.rank - len(tile), source.rank))
    kept = source.rank - len(tile)
    sizes = tensor_sizes(value)[:kept]
    attributes = {}
    if transposed:
        assert len(tile) == 2, "a transposing pack tiles the last two dims"
        tiled.reverse()
        attributes["outer_dims_perm"] = mlir_ir.DenseI64ArrayAttr.get([*range(kept), *tiled])
    init = empty([*sizes, *outer, *tile], source.element_type)
    return mlir_ir.Operation.create(
        "linalg.pack",
        results=[init.type],
        operands=[value, init] + ([] if padding is None else [padding]),
        attributes={
            **attributes,
            "inner_dims_pos": mlir_ir.DenseI64ArrayAttr.get(tiled),
            "static_inner_tiles": mlir_ir.DenseI64ArrayAttr.get(list(tile)),
            "operandSegmentSizes": mlir_ir.DenseI32ArrayAttr.get(
                [1, 1, int(padding is not None), 0]
            ),
        },
    ).result


def unpack(value: mlir_ir.Value, sizes: Sequence[int | mlir_ir.Value]) -> mlir_ir.Value:
    """`linalg.unpack` of `pack`'s layout back into a tensor of `sizes` (the padding dropped):
    `value` is [..., outer..., tile...], its dims past len(`sizes`) the tiles of as many last
    dims of `sizes`."""
    source = mlir_ir.RankedTensorType(value.type)
    count = source.rank - len(sizes)
    inner = list(range(len(sizes) - count, len(sizes)))
    init = empty(list(sizes), source.element_type)
    return mlir_ir.Operation.create(
        "linalg.unpack",
        results=[init.type],
        operands=[value, init],
        attributes={
            "inner_dims_pos": mlir_ir.DenseI64ArrayAttr.get(inner),
            "static_inner_tiles": mlir_ir.DenseI64ArrayAttr.get(list(source.shape[-count:])),
            "operandSegmentSizes": mlir_ir.DenseI32ArrayAttr.get([1, 1, 0]),
        },
    ).result
