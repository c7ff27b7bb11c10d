"""The types of a model the fp16/bf16 plan rewrote, derived from the types it was planned on.

`half_precision.plan_half_precision` rewrites a typed model (Casts to f32 and back, nodes
computing in f32): typing the result by inference again would cost as much as the first
typing. The plan changes no shape, so the planned model's types follow from the ones it was
planned on, and so do its folds, through folding's own function (`folding.fold_shape_arithmetic`
on the planned graph). `planned_types` derives them, or says None where inference of the planned
model could learn more than the derivation knows, for `graph_typing` to infer it again. It must
give exactly what inference gives (`tests/frontends/onnx/test_half_precision.py` compares them
on every model the plan tests build).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import onnx
from onnx import TensorProto

from .folding import fold_shape_arithmetic
from .inference import GraphTypes, all_graphs, strip_weights

__all__ = ["PlannedGraph", "graph_bodies", "names_read_by_bodies", "planned_types"]

_DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})


@dataclass(frozen=True)
class PlannedGraph:
    """One graph rewritten by the fp16/bf16 plan (`half_precision`), and what ties its nodes
    to the graph planned."""

    graph: onnx.GraphProto
    origins: list[int | None]
    """Per node, the index of the node it was written from (None: a Cast the plan made)."""
    widened: dict[str, str]
    """Each value the plan made (an f32 node's result, a Cast to f32) -> the half value it
    holds in f32."""
    in_f32: list[bool]
    """Per node of the graph planned, whether it computes in f32."""
    bodies: dict[tuple[int, str, int], PlannedGraph]
    """The bodies planned too, by (node index in the graph planned, attribute, position)."""


def planned_types(
    planned: PlannedGraph,
    types: GraphTypes,
    graph: onnx.GraphProto,
    rewritten: onnx.ModelProto,
    split_raw: Mapping[str, memoryview] | None = None,
) -> GraphTypes | None:
    """The types of `rewritten`, the model whose main graph is `planned`, from `types` (those
    of `graph`, the main graph before the plan), or None for it to be inferred again (see
    `_derived_types`). `split_raw`: the main graph's split-out raw_data, for folding
    (`inference.strip_weights`)."""
    derived = _derived_types(planned, types, graph, lambda name: None)
    if derived is None:
        return None
    found, dropped, refold = derived
    return _with_written_folds(rewritten, found, dropped, split_raw) if refold else found


def _derived_types(
    planned: PlannedGraph,
    types: GraphTypes,
    graph: onnx.GraphProto,
    outer: Callable[[str], onnx.TypeProto | None],
) -> tuple[GraphTypes, dict[str, int], bool] | None:
    """The types of the planned `graph` (the main graph or a body), from `types` (those of
    `graph`, before the plan); `outer` types the values of the graphs around a body.

    The plan changes no shape: a value it makes holds a half value in f32 (a Cast to f32, an
    f32 node's result), so it has that value's type with element type f32; a Cast back gives a
    half value its own type again; every other value keeps its type, folded nodes and subgraphs
    follow their nodes to their new positions. A planned body is typed the same way, on its own:
    it reads its half inputs and outer values through Casts of its own and yields its half
    outputs again, so what the graph around it sees of it keeps its types (a Cast to f32 of an
    outer value has that value's type, `outer`). Where a node the plan wrote reads a folded
    value, folding may fold it too, and a folded node computing in f32 folds to another value
    (or not at all), and so do the folds computed from it: those are left out (returned, by
    value name), and the derived types' graph is to be folded again as inference would
    (returned True: `_with_written_folds`). None, for the
    planned model to be inferred again, where typing would learn something the plan does not
    know: a fold that could change a type (`_with_written_folds`), or an f32 node's result that
    typing left untyped. A half graph output given its declared size
    (`GraphTypes.before_declared`) is held in f32 by a value that is no graph output: that value
    has the type inference gave the output, or, where that had no shape, the output's
    (`inference._refine_backwards` carries it up through the Cast back)."""
    folded_values = {tensor.name for tensors in types.folded.values() for tensor in tensors}
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    values = dict(types.values)

    def typed(name: str) -> onnx.TypeProto | None:
        """The type of `name` in `graph` before the plan, or in the graphs around it."""
        found = types.values.get(name)
        if found is None and name in initializers:
            found = onnx.helper.make_tensor_type_proto(initializers[name].data_type, initializers[name].dims)
        return outer(name) if found is None else found

    folded: dict[int, tuple[onnx.TensorProto, ...]] = {}
    subgraphs: dict[tuple[int, str, int], GraphTypes] = {}
    moved: dict[int, int] = {}
    refold = False
    for index, (origin, node) in enumerate(zip(planned.origins, planned.graph.node, strict=True)):
        computed = origin is not None and planned.in_f32[origin]
        written = origin is None or computed or node.op_type != graph.node[origin].op_type
        if written and any(name in folded_values for name in node.input) or computed and origin in types.folded:
            refold = True
        if origin is not None:
            moved.setdefault(origin, index)
        for name in node.output:
            half = planned.widened.get(name)
            if half is None:
                if name not in values and computed:
                    return None
                continue
            found = typed(half)
            inferred = types.before_declared.get(half)
            if inferred is not None and inferred.tensor_type.HasField("shape"):
                found = inferred
            if found is None:
                return None
            wide = onnx.TypeProto()
            wide.CopyFrom(found)
            wide.tensor_type.elem_type = TensorProto.FLOAT
            values[name] = wide
    dropped: dict[str, int] = {}
    """The values of folds that are folded again: a folded node computing in f32, and every
    fold computed from one of them, and the f32 values holding them (-> their element types)."""
    for origin, tensors in sorted(types.folded.items()):
        if planned.in_f32[origin] or any(name in dropped for name in graph.node[origin].input):
            dropped.update((tensor.name, tensor.data_type) for tensor in tensors)
        else:
            folded[moved[origin]] = tensors
    dropped.update((wide, TensorProto.FLOAT) for wide, half in planned.widened.items() if half in dropped)
    for (origin, attribute, position), subgraph in types.subgraphs.items():
        subgraphs[(moved[origin], attribute, position)] = subgraph
    for (origin, attribute, position), body in planned.bodies.items():
        body_types = _derived_types(
            body, types.subgraph(origin, attribute, position), _body(graph.node[origin], attribute, position), typed
        )
        if body_types is None or body_types[2]:  # (inference folds no body)
            return None
        subgraphs[(moved[origin], attribute, position)] = body_types[0]
    derived = GraphTypes(values, subgraphs, folded, types.dim_names, spare_fold_round=types.spare_fold_round)
    derived.shaped_backwards = types.shaped_backwards | {
        wide for wide, half in planned.widened.items() if half in types.shaped_backwards
    }
    return derived, dropped, refold


_TYPED_FROM_SHAPES = frozenset(
    {
        "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Cos", "Div", "Equal", "Erf", "Exp", "Floor",
        "Greater", "GreaterOrEqual", "IsInf", "IsNaN", "Less", "LessOrEqual", "Log", "Max", "Mean",
        "Min", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "Relu", "Round", "Sigmoid", "Sign",
        "Sin", "Sqrt", "Sub", "Sum", "Tanh", "Where", "Xor",
    }
)  # fmt: skip
"""Element-wise ops: ONNX infers their results from their operands' types, never their data."""

_FLOAT_TENSORS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})


def _with_written_folds(
    model: onnx.ModelProto,
    derived: GraphTypes,
    dropped: Mapping[str, int],
    split_raw: Mapping[str, memoryview] | None,
) -> GraphTypes | None:
    """`derived` (the planned `model`'s types) with what inference's folding folds of the
    planned main graph (`folding.fold_shape_arithmetic` on the copy inference reads), or None
    where the folds could change a type, for the model to be inferred again. `dropped`: the
    values (-> element type) of the folds `derived` left out to be folded again (a folded node
    computing in f32 folds to another value, or not at all: an f32 Div of an fp16 Constant is
    no shape arithmetic, and neither is what was folded from it).

    A fold that is new, or dropped, changes no type where every node that reads it and does
    not fold with it is an element-wise op (`_TYPED_FROM_SHAPES`: ONNX types it from its
    operands' types, where Range's bounds or Resize's scales are read as data). Shape data
    (ONNX's data propagation, `symbolic_dims`, also in bodies) is integers and booleans, never
    floats: a fold that is no float (a comparison of floats the plan made) may only be read as
    the condition of a Where choosing between floats, by no body, and, if it was dropped, must
    fold again (else what symbolic dims proved from it could fold differently). Anything else
    is refused. Folding learns no more in a second round: a round folds every chain it reaches,
    and nothing new is typed. So one pass from the final types is what inference's rounds fold,
    provided they have a round to spare (`GraphTypes.spare_fold_round`) and no new fold's type
    comes from after them (`GraphTypes.shaped_backwards`)."""
    if not derived.spare_fold_round:
        return None
    folded = dict(derived.folded)
    opset = next((entry.version for entry in model.opset_import if entry.domain in _DEFAULT_DOMAINS), 1)
    fold_shape_arithmetic(strip_weights(model, split_raw).graph, derived.values, opset, folded, {})
    readers: dict[str, list[onnx.NodeProto]] = {}
    for index, node in enumerate(model.graph.node):
        if index not in folded:
            for name in node.input:
                readers.setdefault(name, []).append(node)

    def float_results(node: onnx.NodeProto) -> bool:
        found = [derived.values.get(name) for name in node.output]
        return all(type_ is not None and type_.tensor_type.elem_type in _FLOAT_TENSORS for type_ in found)

    new = {
        tensor.name: tensor.data_type
        for index, tensors in folded.items()
        if index not in derived.folded
        for tensor in tensors
    }
    if any(name in derived.shaped_backwards for name in new):
        return None  # (typed after folding, which saw it without a shape)
    read_by_bodies = names_read_by_bodies(model.graph)
    for name, element in {**dropped, **new}.items():
        if element not in _FLOAT_TENSORS and (name in read_by_bodies or name in dropped and name not in new):
            return None
        for reader in readers.get(name, ()):
            if reader.op_type not in _TYPED_FROM_SHAPES or reader.domain not in _DEFAULT_DOMAINS:
                return None
            if element not in _FLOAT_TENSORS and not (
                reader.op_type == "Where" and name not in reader.input[1:] and float_results(reader)
            ):
                return None
    return replace(derived, folded=folded)


def _body(node: onnx.NodeProto, attribute: str, position: int) -> onnx.GraphProto:
    """Graph number `position` of `node`'s graph attribute `attribute`."""
    found = next(candidate for candidate in node.attribute if candidate.name == attribute)
    return graph_bodies(found)[position]


def graph_bodies(attribute: onnx.AttributeProto) -> list[onnx.GraphProto]:
    """The graphs of a graph attribute (`g`, then `graphs`), by position."""
    return [attribute.g, *attribute.graphs] if attribute.HasField("g") else list(attribute.graphs)


def names_read_by_bodies(graph: onnx.GraphProto) -> set[str]:
    """The names the bodies of `graph`'s nodes read, at any depth."""
    return {
        name
        for node in graph.node
        for attribute in node.attribute
        for body in graph_bodies(attribute)
        for sub in all_graphs(body)
        for inner in sub.node
        for name in inner.input
    }
