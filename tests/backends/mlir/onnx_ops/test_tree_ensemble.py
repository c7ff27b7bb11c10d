"""ai.onnx.ml TreeEnsemble (opset 5) runs end to end against onnx.reference beyond ONNX's two node
tests: every comparison mode, NaN with and without `nodes_missing_value_tracks_true`, several
trees aggregated by SUM, AVERAGE, MIN and MAX (untouched targets keep MIN/MAX's start value), a
tree that is a single leaf, float16. Refusals name the reason."""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module
from onnx import helper

from tests.conformance.pipeline import run_case

from .model_cases import one_node_case

X = np.array(
    [[1.0, 2.0, 3.0], [4.0, -1.0, np.nan], [np.nan, 0.5, 7.0], [2.5, 2.0, 3.0], [0.0, 9.0, -3.0]]
)


def _ensemble(dtype, aggregate: int, **extra) -> dict:
    """Two trees over nodes 0-5 (modes LT, GTE, EQ, GT, NEQ, MEMBER) and a one-leaf tree (node 6,
    whose leaf is leaf 6, as onnx.reference reads it); target 3 is never reached."""
    tensor = helper.make_tensor
    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    attributes = dict(
        nodes_featureids=[0, 1, 2, 0, 2, 1, 0],
        nodes_modes=tensor("modes", 2, [7], [1, 2, 4, 3, 5, 6, 0]),
        nodes_splits=tensor("splits", kind, [7], np.array([2.0, 1.0, 3.0, 1.5, 7.0, 0.0, 0.0], dtype)),
        nodes_truenodeids=[1, 0, 1, 0, 5, 2, 3],
        nodes_trueleafs=[0, 1, 1, 1, 0, 1, 1],
        nodes_falsenodeids=[2, 1, 2, 4, 4, 3, 3],
        nodes_falseleafs=[0, 1, 1, 1, 1, 1, 1],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 1, 0],
        membership_values=tensor("members", kind, [4], np.array([0.5, 9.0, 2.0, np.nan], dtype)),
        leaf_targetids=[0, 1, 2, 0, 1, 2, 2],
        leaf_weights=tensor(
            "weights", kind, [7], np.array([1.5, -2.0, 3.25, 0.75, 10.0, 4.0, 0.5], dtype)
        ),
        tree_roots=[0, 3, 6],
        n_targets=4,
        aggregate_function=aggregate,
    )
    attributes.update(extra)
    return attributes


def _case(name, dtype, aggregate):
    return lambda: one_node_case(
        name, "TreeEnsemble", {"x": X.astype(dtype)}, domain="ai.onnx.ml", domain_version=5,
        **_ensemble(dtype, aggregate),
    )


MODEL_CASES = {
    "sum_f32": _case("sum_f32", np.float32, 1),
    "average_f64": _case("average_f64", np.float64, 0),
    "min_f32": _case("min_f32", np.float32, 2),
    "max_f64": _case("max_f64", np.float64, 3),
    "sum_f16": _case("sum_f16", np.float16, 1),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def _module(attributes: str) -> str:
    return f"""
niro.func @main(tensor<2x3xf32> {{name = "x"}}) -> (tensor<2x2xf32> {{name = "y"}}) {{
^bb0(%0: tensor<2x3xf32>):
  %1 = "ai.onnx.ml.TreeEnsemble"(%0) {{niro.opset = 5, {attributes}}} : (tensor<2x3xf32>) -> tensor<2x2xf32> loc("TreeEnsemble_0")
  niro.return %1 : tensor<2x2xf32>
}}
"""


def _tensor(dtype: str, values: list[float]) -> str:
    return f'{{dtype = "{dtype}", shape = [{len(values)}], data = dense<"0x{np.asarray(values, dtype={"f32": np.float32, "ui8": np.uint8}[dtype]).tobytes().hex().upper()}">}}'


def _attributes(post_transform: int = 0, true_ids: str = "[1, 0]") -> str:
    return (
        f"n_targets = 2, post_transform = {post_transform}, tree_roots = [0], "
        "nodes_featureids = [0, 1], nodes_truenodeids = " + true_ids + ", nodes_falsenodeids = [1, 1], "
        "nodes_trueleafs = [0, 1], nodes_falseleafs = [1, 1], leaf_targetids = [0, 1], "
        f"nodes_modes = {_tensor('ui8', [0, 0])}, nodes_splits = {_tensor('f32', [1.0, 2.0])}, "
        f"leaf_weights = {_tensor('f32', [1.0, 2.0])}"
    )


def test_post_transform_is_refused() -> None:
    with pytest.raises(
        LoweringError,
        match=r"'ai\.onnx\.ml\.TreeEnsemble' op supports post_transform NONE \(0\) only, got 2 "
        r"\(onnx\.reference ignores post_transform\)$",
    ):
        lower_to_mlir(parse_module(_module(_attributes(post_transform=2))))


def test_a_cycle_is_refused() -> None:
    with pytest.raises(
        LoweringError, match=r"'ai\.onnx\.ml\.TreeEnsemble' op tree 0 has a cycle through node 0$"
    ):
        # node 1's true branch goes back to node 0
        attributes = _attributes().replace("nodes_trueleafs = [0, 1]", "nodes_trueleafs = [0, 0]")
        lower_to_mlir(parse_module(_module(attributes)))
