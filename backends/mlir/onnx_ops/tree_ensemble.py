"""MLIR lowering of `ai.onnx.ml` TreeEnsemble (opset 5): tree ensembles with set membership.

The trees are attributes, so they are checked at compile time (every index in range, every tree
finite) and held as constant node tables. Two `linalg.generic`s evaluate them:

1. over (row, tree): an `scf.while` walks the tree's node table from its root, comparing
   X[row, feature] with the node's split by its mode (LEQ, LT, GTE, GT, EQ, NEQ or set MEMBER;
   NaN goes the true way where `nodes_missing_value_tracks_true` says so), until it reaches a
   leaf; the generic yields the leaf index;
2. over (row, target) with a reduction over the trees: the leaves' weights are aggregated into
   their targets (SUM, AVERAGE, MIN or MAX), in X's type and in tree order, as onnx.reference
   does (each tree's AVERAGE share is weight / number of trees; MIN and MAX start from the
   type's largest / smallest finite value).

Set members come from `membership_values`, NaN-delimited, one set per MEMBER node in the order
those nodes appear in `nodes_modes` (the spec's order); each set is a row of a NaN-padded table,
tested by a static loop. `post_transform` other than NONE is refused: onnx.reference ignores it,
so there is no agreed number to compute.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from niro.ir import ScalarType, format_type

from ..bindings import arith, mlir_ir, scf, tensor
from ..builders import (
    as_i64,
    dense_constant,
    dim_size,
    empty_tensor,
    fill,
    i64_constant,
    index_constant,
)
from ..context import LoweringRuleContext
from ..registry import register_lowering
from ..types import RankedTensorType, index_type, lower_scalar_type
from .common import attribute, element_type
from .indexing import clamp, gather_generic, projection, to_index

__all__: list[str] = []

_FLOATS = (ScalarType.F32, ScalarType.F64, ScalarType.F16)
_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)
_AVERAGE, _SUM, _MIN, _MAX = range(4)
_AGGREGATES = {_AVERAGE: "AVERAGE", _SUM: "SUM", _MIN: "MIN", _MAX: "MAX"}


def _tensor_attribute(ctx: LoweringRuleContext, name: str) -> np.ndarray:
    """`_optional_tensor_attribute` of an attribute the op needs, refused when absent."""
    found = _optional_tensor_attribute(ctx, name)
    if found is None:
        raise ctx.error(f"needs attribute '{name}'")
    return found


def _optional_tensor_attribute(ctx: LoweringRuleContext, name: str) -> np.ndarray | None:
    """A tensor attribute (the frontend's {"dtype", "shape", "data"} dict) as a flat array, or
    None when absent."""
    value = attribute(ctx, name)
    if value is None:
        return None
    if not isinstance(value, dict) or "data" not in value:
        raise ctx.error(f"expects a tensor for attribute '{name}', got {value!r}")
    scalar = ScalarType.from_spelling(value["dtype"])
    if scalar is ScalarType.BF16:
        raise ctx.error(f"cannot read the bf16 tensor attribute '{name}'")
    dtype = np.dtype(scalar.numpy_name).newbyteorder("<")
    return np.frombuffer(bytes(value["data"]), dtype=dtype).reshape(-1)


def _ints(ctx: LoweringRuleContext, name: str) -> tuple[int, ...]:
    """`_optional_ints` of an attribute the op needs, refused when absent."""
    found = _optional_ints(ctx, name)
    if found is None:
        raise ctx.error(f"needs attribute '{name}'")
    return found


def _optional_ints(ctx: LoweringRuleContext, name: str) -> tuple[int, ...] | None:
    """An INTS attribute, or None when absent."""
    value = attribute(ctx, name)
    if value is None:
        return None
    if not isinstance(value, tuple) or not all(isinstance(item, int) for item in value):
        raise ctx.error(f"expects a list of ints for attribute '{name}', got {value!r}")
    return value


class _Ensemble:
    """The checked node tables of the ensemble, as numpy arrays indexed by node or leaf."""

    def __init__(self, ctx: LoweringRuleContext, features: int | None, dtype: np.dtype) -> None:
        splits = _tensor_attribute(ctx, "nodes_splits")
        modes = _tensor_attribute(ctx, "nodes_modes")
        feature_ids = _ints(ctx, "nodes_featureids")
        true_ids, false_ids = _ints(ctx, "nodes_truenodeids"), _ints(ctx, "nodes_falsenodeids")
        true_leafs, false_leafs = _ints(ctx, "nodes_trueleafs"), _ints(ctx, "nodes_falseleafs")
        missing = _optional_ints(ctx, "nodes_missing_value_tracks_true")
        self.targets = np.asarray(_ints(ctx, "leaf_targetids"), np.int64)
        self.weights = _tensor_attribute(ctx, "leaf_weights")
        roots = _ints(ctx, "tree_roots")
        nodes = len(feature_ids)
        if missing is None:
            missing = (0,) * nodes
        per_node = {
            "nodes_splits": len(splits), "nodes_modes": len(modes), "nodes_truenodeids": len(true_ids),
            "nodes_falsenodeids": len(false_ids), "nodes_trueleafs": len(true_leafs),
            "nodes_falseleafs": len(false_leafs), "nodes_missing_value_tracks_true": len(missing),
        }
        for name, length in per_node.items():
            if length != nodes:
                raise ctx.error(f"has {length} {name} for {nodes} nodes (nodes_featureids)")
        if len(self.weights) != len(self.targets):
            raise ctx.error(f"has {len(self.weights)} leaf_weights for {len(self.targets)} leaf_targetids")
        if self.weights.dtype != dtype or splits.dtype != dtype:
            raise ctx.error(f"expects nodes_splits and leaf_weights of X's type {np.dtype(dtype).name}")
        if any(mode > _MEMBER for mode in modes):
            raise ctx.error(f"has an unknown node mode in nodes_modes {tuple(int(m) for m in modes)}")
        if features is not None and any(not 0 <= feature < features for feature in feature_ids):
            raise ctx.error(f"has a nodes_featureids entry outside the {features} features of X")
        if any(feature < 0 for feature in feature_ids):
            raise ctx.error("has a negative nodes_featureids entry")
        self.modes, self.splits = np.asarray(modes, np.int64), splits
        self.features = np.asarray(feature_ids, np.int64)
        self.missing = np.asarray([1 if flag else 0 for flag in missing], np.int64)
        self.members, self.member_rows = self._sets(ctx, dtype)
        self.children = np.asarray([true_ids, false_ids], np.int64).T.reshape(nodes, 2)
        self.to_leaf = np.asarray([[bool(t), bool(f)] for t, f in zip(true_leafs, false_leafs, strict=True)], np.int64).reshape(nodes, 2)
        self.starts = [self._start(ctx, root) for root in roots]
        for tree, (start, is_leaf) in enumerate(self.starts):
            self._check_finite(ctx, tree, start, is_leaf)

    def _sets(self, ctx: LoweringRuleContext, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """The MEMBER nodes' sets as a NaN-padded table, and each node's row in it (0 else)."""
        values = _optional_tensor_attribute(ctx, "membership_values")
        member_nodes = [node for node, mode in enumerate(self.modes) if mode == _MEMBER]
        if values is None:
            if member_nodes:
                raise ctx.error("has set membership nodes but no membership_values")
            return np.full((1, 1), np.nan, dtype), np.zeros(len(self.modes), np.int64)
        if values.dtype != dtype:
            raise ctx.error(f"expects membership_values of X's type {np.dtype(dtype).name}")
        if int(np.isnan(values).sum()) != len(member_nodes):
            raise ctx.error(
                f"has {int(np.isnan(values).sum())} NaN-delimited sets in membership_values for "
                f"{len(member_nodes)} set membership nodes"
            )
        sets: list[list[float]] = [[]]
        for value in values:
            if np.isnan(value):
                sets.append([])
            else:
                sets[-1].append(value)
        sets = sets[: len(member_nodes)] or [[]]
        table = np.full((len(sets), max(1, *(len(members) for members in sets))), np.nan, values.dtype)
        for row, members in enumerate(sets):
            table[row, : len(members)] = members
        rows = np.zeros(len(self.modes), np.int64)
        rows[member_nodes] = np.arange(len(member_nodes))
        return table.astype(dtype), rows

    def _start(self, ctx: LoweringRuleContext, root: int) -> tuple[int, bool]:
        if not 0 <= root < len(self.modes):
            raise ctx.error(f"has a tree root {root} outside the {len(self.modes)} nodes")
        (true_id, false_id), (true_leaf, false_leaf) = self.children[root], self.to_leaf[root]
        # NOTE: a tree that is one leaf is spelled as a root whose both branches are the same
        # leaf; onnx.reference then reads leaf `root` itself, and so do we.
        if true_leaf and false_leaf and true_id == false_id:
            return root, True
        return root, False

    def _check_finite(self, ctx: LoweringRuleContext, tree: int, start: int, is_leaf: bool) -> None:
        """Every path of the tree ends at a leaf in range and no path comes back to a node
        (a depth-first search colouring nodes in progress, so shared subtrees are walked once)."""
        if is_leaf:
            self._check_leaf(ctx, tree, start)
            return
        state: dict[int, bool] = {}  # node -> finished
        pending = [(start, False)]
        while pending:
            node, leaving = pending.pop()
            if leaving:
                state[node] = True
                continue
            if not 0 <= node < len(self.modes):
                raise ctx.error(f"tree {tree} reaches node {node} outside the {len(self.modes)} nodes")
            if node in state:
                if not state[node]:
                    raise ctx.error(f"tree {tree} has a cycle through node {node}")
                continue
            state[node] = False
            pending.append((node, True))
            for branch in (0, 1):
                child = int(self.children[node, branch])
                if self.to_leaf[node, branch]:
                    self._check_leaf(ctx, tree, child)
                elif state.get(child) is False:
                    raise ctx.error(f"tree {tree} has a cycle through node {child}")
                else:
                    pending.append((child, False))

    def _check_leaf(self, ctx: LoweringRuleContext, tree: int, leaf: int) -> None:
        if not 0 <= leaf < len(self.targets):
            raise ctx.error(f"tree {tree} reaches leaf {leaf} outside the {len(self.targets)} leaves")


@register_lowering("ai.onnx.ml.TreeEnsemble", since=5)
def _lower_tree_ensemble(ctx: LoweringRuleContext) -> Sequence[mlir_ir.Value]:
    source = ctx.ranked(ctx.niro_operands[0], "input X")
    result = ctx.ranked(ctx.niro_results[0], "result Y")
    scalar = element_type(ctx.niro_operands[0])
    if scalar not in _FLOATS:
        raise ctx.error(f"expects a float, double or float16 input X, got {format_type(source)}")
    if len(source.shape) != 2:
        raise ctx.error(f"expects an input X of shape [N, F], got {format_type(source)}")
    post_transform = attribute(ctx, "post_transform", 0)
    if post_transform != 0:
        raise ctx.error(
            f"supports post_transform NONE (0) only, got {post_transform} (onnx.reference "
            "ignores post_transform)"
        )
    aggregate = attribute(ctx, "aggregate_function", _SUM)
    if aggregate not in _AGGREGATES:
        raise ctx.error(f"expects aggregate_function 0 to 3, got {aggregate!r}")
    targets = attribute(ctx, "n_targets")
    if not isinstance(targets, int) or targets < 1:
        raise ctx.error(f"needs a positive int attribute 'n_targets', got {targets!r}")
    if len(result.shape) != 2 or result.shape[1] not in (None, targets):
        raise ctx.error(f"result {format_type(result)} differs from the expected shape ?x{targets}")
    dtype = np.dtype(scalar.numpy_name)
    ensemble = _Ensemble(ctx, source.shape[1], dtype)
    if ensemble.targets.size and not (0 <= ensemble.targets.min() and ensemble.targets.max() < targets):
        raise ctx.error(f"has a leaf_targetids entry outside the {targets} targets")
    if not ensemble.starts:
        raise ctx.error("has no trees (tree_roots is empty)")
    rows = [dim_size(ctx.operands[0], 0) if result.shape[0] is None else None]
    leaves = _walk_trees(ctx, ensemble, scalar, result.shape[0], rows)
    return [_aggregate(ctx, ensemble, leaves, scalar, result, rows, aggregate)]


def _walk_trees(ctx, ensemble: _Ensemble, scalar: ScalarType, batch, rows) -> mlir_ir.Value:
    """Leaf index [N, trees] (i64) of every row in every tree."""
    data = ctx.operands[0]
    element = lower_scalar_type(scalar)
    index = index_type()
    starts = dense_constant(
        np.asarray([start for start, _ in ensemble.starts], np.int64), ScalarType.I64
    )
    start_leaf = dense_constant(
        np.asarray([int(leaf) for _, leaf in ensemble.starts], np.int64), ScalarType.I64
    )
    modes = dense_constant(ensemble.modes, ScalarType.I64)
    features = dense_constant(ensemble.features, ScalarType.I64)
    splits = dense_constant(ensemble.splits, scalar)
    missing = dense_constant(ensemble.missing, ScalarType.I64)
    children = dense_constant(ensemble.children, ScalarType.I64)
    to_leaf = dense_constant(ensemble.to_leaf, ScalarType.I64)
    members = dense_constant(ensemble.members, scalar)
    member_rows = dense_constant(ensemble.member_rows, ScalarType.I64)
    width = ensemble.members.shape[1]
    feature_count = dim_size(data, 1)
    trees = len(ensemble.starts)
    leaves_type = RankedTensorType(ScalarType.I64, (batch, trees))

    def read(table, *positions):
        return tensor.ExtractOp(table, list(positions)).result

    def body(position, _elements):
        row, tree = position
        node = to_index(read(starts, tree), ScalarType.I64)
        done = arith.CmpIOp(arith.CmpIPredicate.ne, read(start_leaf, tree), i64_constant(0)).result
        loop = scf.WhileOp([index, done.type], [node, done])
        before = loop.before.blocks.append(index, done.type)
        with mlir_ir.InsertionPoint(before):
            going = arith.XOrIOp(before.arguments[1], _bool(True)).result
            scf.ConditionOp(going, list(before.arguments))
        after = loop.after.blocks.append(index, done.type)
        with mlir_ir.InsertionPoint(after):
            current = after.arguments[0]
            feature = clamp(
                to_index(read(features, current), ScalarType.I64),
                0,
                arith.SubIOp(feature_count, index_constant(1)).result,
            )
            value = read(data, row, feature)
            taken = _branch(value, read(modes, current), read(splits, current), members, read(member_rows, current), width, element)
            nan = arith.CmpFOp(arith.CmpFPredicate.UNO, value, value).result
            tracks = arith.CmpIOp(
                arith.CmpIPredicate.ne, read(missing, current), i64_constant(0)
            ).result
            taken = arith.OrIOp(taken, arith.AndIOp(nan, tracks).result).result
            side = arith.SelectOp(taken, index_constant(0), index_constant(1)).result
            following = to_index(read(children, current, side), ScalarType.I64)
            leaf = arith.CmpIOp(
                arith.CmpIPredicate.ne, read(to_leaf, current, side), i64_constant(0)
            ).result
            scf.YieldOp([following, leaf])
        return as_i64(loop.results[0])

    return gather_generic(ctx, leaves_type, [*rows, None], body)


def _branch(value, mode, split, members, member_row, width, element) -> mlir_ir.Value:
    """Whether `value` takes the true branch of a node of `mode` (i64) with `split`."""
    predicates = {
        _LEQ: arith.CmpFPredicate.OLE, _LT: arith.CmpFPredicate.OLT, _GTE: arith.CmpFPredicate.OGE,
        _GT: arith.CmpFPredicate.OGT, _EQ: arith.CmpFPredicate.OEQ, _NEQ: arith.CmpFPredicate.UNE,
    }
    row = to_index(member_row, ScalarType.I64)
    found = _bool(False)
    for slot in range(width):  # NaN padding equals nothing
        candidate = tensor.ExtractOp(members, [row, index_constant(slot)]).result
        same = arith.CmpFOp(arith.CmpFPredicate.OEQ, value, candidate).result
        found = arith.OrIOp(found, same).result
    taken = found  # mode MEMBER
    for mode_number, predicate in predicates.items():
        is_mode = arith.CmpIOp(arith.CmpIPredicate.eq, mode, i64_constant(mode_number)).result
        outcome = arith.CmpFOp(predicate, value, split).result
        taken = arith.SelectOp(is_mode, outcome, taken).result
    return taken


def _bool(value: bool) -> mlir_ir.Value:
    i1 = mlir_ir.IntegerType.get_signless(1)
    return arith.ConstantOp(i1, mlir_ir.IntegerAttr.get(i1, int(value))).result


def _aggregate(ctx, ensemble: _Ensemble, leaves, scalar, result, rows, aggregate) -> mlir_ir.Value:
    """Y[row, target]: the leaves' weights for `target` combined over the trees in order."""
    element = lower_scalar_type(scalar)
    info = np.finfo(np.dtype(scalar.numpy_name))
    start = {_MIN: float(info.max), _MAX: float(info.min)}.get(aggregate, 0.0)
    output = RankedTensorType(scalar, result.shape)
    initial = arith.ConstantOp(element, mlir_ir.FloatAttr.get(element, start)).result
    init = fill(empty_tensor(ctx, output, [*rows, None]), initial)
    weights = dense_constant(ensemble.weights, scalar)
    targets = dense_constant(ensemble.targets, ScalarType.I64)
    count = arith.ConstantOp(element, mlir_ir.FloatAttr.get(element, float(len(ensemble.starts)))).result
    read_leaves = projection(3, [0, 2])

    def body(position, elements):
        target, leaf, current = position[1], elements[0], elements[1]
        leaf = to_index(leaf, ScalarType.I64)
        hit = arith.CmpIOp(
            arith.CmpIPredicate.eq, to_index(tensor.ExtractOp(targets, [leaf]).result, ScalarType.I64), target
        ).result
        weight = tensor.ExtractOp(weights, [leaf]).result
        if aggregate == _SUM:
            combined = arith.AddFOp(current, weight).result
        elif aggregate == _AVERAGE:
            combined = arith.AddFOp(current, arith.DivFOp(weight, count).result).result
        else:  # Python's min(a, b) / max(a, b): a unless b is strictly smaller / larger
            predicate = arith.CmpFPredicate.OLT if aggregate == _MIN else arith.CmpFPredicate.OGT
            better = arith.CmpFOp(predicate, weight, current).result
            combined = arith.SelectOp(better, weight, current).result
        return arith.SelectOp(hit, combined, current).result

    return gather_generic(
        ctx, output, [*rows, None], body, [(leaves, read_leaves, ScalarType.I64)], reduction_dims=1, init=init
    )

