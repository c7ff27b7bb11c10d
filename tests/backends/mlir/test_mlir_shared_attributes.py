"""The lowering makes the attributes and types many ops repeat once per module: a
memo keyed too coarsely would hand one op another op's indexing maps, element type or
permutation, and the module could still verify. Each op here must get its own."""

from __future__ import annotations

from niro.backends.mlir import lower_to_mlir
from niro.ir import parse_module, verify

MODULE = """
niro.func @main(tensor<2x3xf32>, tensor<3xf32>, tensor<2x1xf32>, tensor<2x3xi32>, tensor<3xi32>, tensor<2x3x4xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<3x2xf32>, tensor<4x2x3xf32>) {
^bb0(%0: tensor<2x3xf32>, %1: tensor<3xf32>, %2: tensor<2x1xf32>, %3: tensor<2x3xi32>, %4: tensor<3xi32>, %5: tensor<2x3x4xf32>):
  %6 = niro.add %0, %1 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("row")
  %7 = niro.add %0, %2 : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32> loc("column")
  %8 = niro.mul %3, %4 : (tensor<2x3xi32>, tensor<3xi32>) -> tensor<2x3xi32> loc("integer")
  %9 = niro.transpose %0 [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32> loc("swap")
  %10 = niro.transpose %5 [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32> loc("rotate")
  niro.return %6, %7, %8, %9, %10 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<3x2xf32>, tensor<4x2x3xf32>
}
"""


def _op_at(lowered, location: str, name: str):
    """The `name` op of the function body that carries `loc("<location>")`."""
    body = lowered.module.body.operations[0].regions[0].blocks[0]
    return next(
        op for op in body.operations if op.name == name and str(op.location) == f'loc("{location}")'
    )


def test_ops_of_different_types_get_their_own_attributes_and_element_types() -> None:
    module = parse_module(MODULE, filename="shared.niro")
    assert verify(module) == []
    lowered = lower_to_mlir(module)
    with lowered.context:
        generics = {
            location: _op_at(lowered, location, "linalg.generic")
            for location in ("row", "column", "integer")
        }
        maps = {location: str(op.attributes["indexing_maps"]) for location, op in generics.items()}
        identity = "affine_map<(d0, d1) -> (d0, d1)>"
        assert maps == {
            "row": f"[{identity}, affine_map<(d0, d1) -> (d1)>, {identity}]",
            "column": f"[{identity}, affine_map<(d0, d1) -> (d0, 0)>, {identity}]",
            "integer": f"[{identity}, affine_map<(d0, d1) -> (d1)>, {identity}]",
        }
        bodies = {
            location: (
                [str(argument.type) for argument in op.regions[0].blocks[0].arguments],
                op.regions[0].blocks[0].operations[0].name,
            )
            for location, op in generics.items()
        }
        assert bodies == {
            "row": (["f32", "f32", "f32"], "arith.addf"),
            "column": (["f32", "f32", "f32"], "arith.addf"),
            "integer": (["i32", "i32", "i32"], "arith.muli"),
        }
        permutations = {
            location: str(_op_at(lowered, location, "linalg.transpose").attributes["permutation"])
            for location in ("swap", "rotate")
        }
        assert permutations == {"swap": "array<i64: 1, 0>", "rotate": "array<i64: 2, 0, 1>"}
