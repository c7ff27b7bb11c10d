"""linalg's structured ops: `generic` with explicit maps, `fill`, and the named ops.

Every structured op is built with the generic operation builder (`ir.Operation.create`) and,
for a named op, its region by MLIR's C++ region builder (`fill_builtin_region`).

NOTE: not the generated op classes (`linalg.GenericOp`, `linalg.MatmulOp`...), which re-derive
the operand segments and check each attribute in Python (2-3x the time of the generic
builder), nor linalg's OpDSL helpers (`linalg.fill(...)`), which rebuild the op's definition
in Python on every call (~0.2 ms each) and cost ~45 ms to import. Same ops, same text.

A map is written as a list with one entry per indexed dim: an int `d` is loop dim `d`, None is
the constant 0 (a broadcast size-1 dim), an `ir.AffineExpr` (`dim(d) * 2 + dim(e)`) is used as
it is. Loops are parallel except those listed in `reductions`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Union

from ..bindings import fill_builtin_region, ir
from .shapes import empty

__all__ = ["MapSpec", "dim", "affine_map", "generic", "fill", "filled", "named_op"]

MapSpec = Sequence[Union[int, None, "ir.AffineExpr"]]


def dim(position: int) -> ir.AffineExpr:
    """Loop dim `position` as an affine expression (to write strided or shifted maps)."""
    return ir.AffineDimExpr.get(position)


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


def _segments(inputs: int, outputs: int) -> ir.Attribute:
    return ir.DenseI32ArrayAttr.get([inputs, outputs])


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
    maps = [ir.AffineMapAttr.get(affine_map(loops, spec)) for _, spec in (*inputs, *outputs)]
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    reduction = ir.Attribute.parse("#linalg.iterator_type<reduction>")
    iterators = [reduction if loop in reductions else parallel for loop in range(loops)]
    op = ir.Operation.create(
        "linalg.generic",
        results=[value.type for value, _ in outputs],
        operands=[value for value, _ in (*inputs, *outputs)],
        attributes={
            "indexing_maps": ir.ArrayAttr.get(maps),
            "iterator_types": ir.ArrayAttr.get(iterators),
            "operandSegmentSizes": _segments(len(inputs), len(outputs)),
        },
        regions=1,
    )
    element_types = [
        ir.RankedTensorType(value.type).element_type for value, _ in (*inputs, *outputs)
    ]
    block = op.regions[0].blocks.append(*element_types)
    with ir.InsertionPoint(block):
        ir.Operation.create("linalg.yield", operands=list(body(list(block.arguments))))
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
    inputs: Sequence[ir.Value],
    init: ir.Value,
    attributes: dict[str, ir.Attribute] | None = None,
) -> ir.Value:
    """The linalg named op `name` ("linalg.matmul", "linalg.conv_2d_nchw_fchw"...) of `inputs`
    writing into `init`, with `attributes` (strides, dilations...)."""
    defaults = {}
    if name in _DEFAULT_MAPS:
        loops, specs = _DEFAULT_MAPS[name]
        maps = [ir.AffineMapAttr.get(affine_map(loops, spec)) for spec in specs]
        defaults["indexing_maps"] = ir.ArrayAttr.get(maps)
    op = ir.Operation.create(
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


def fill(init: ir.Value, value: ir.Value) -> ir.Value:
    """`linalg.fill` of `init` with the scalar `value`."""
    return named_op("linalg.fill", [value], init)


def filled(sizes: Sequence[int | ir.Value], element: ir.Type, value: ir.Value) -> ir.Value:
    """A tensor of mixed `sizes` and `element` type filled with the scalar `value`."""
    return fill(empty(sizes, element), value)
