"""The types of a model the fp16/bf16 plan rewrote, derived from the types it was planned on.

`half_precision.plan_half_precision` rewrites a typed model in place (Casts to f32 and back,
nodes computing in f32): typing the result by inference again would cost as much as the first
typing. The plan changes no shape, so the planned model's types follow from the ones it was
planned on, and so do its folds, through folding's own function (`folding.fold_shape_arithmetic`
on the planned graph). `planned_types` derives them, or says None where inference of the planned
model could learn more than the derivation knows, for `graph_typing` to infer it again. It must
give exactly what inference gives (`tests/frontends/onnx/test_half_precision.py` compares them
on every model the plan tests build).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

import onnx
import onnx_ir
from onnx import TensorProto

from .folding import fold_shape_arithmetic
from .graph_walks import node_bodies, values_read
from .inference import strip_weights
from .value_types import ValueTypes

__all__ = ["PlannedGraph", "initializer_dims", "planned_types", "values_read_by_bodies"]

_DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})


@dataclass
class PlannedGraph:
    """One graph the fp16/bf16 plan (`half_precision`) rewrote in place, and what ties it to
    the graph as it was planned."""

    graph: onnx_ir.Graph
    before: list[onnx_ir.Node]
    """The graph's nodes as planned, in order (the plan adds Casts between them)."""
    op_types: list[str]
    """Their op types as planned (a Cast the plan reads through becomes an Identity)."""
    input_names: list[tuple[str, ...]]
    """The names of their inputs as planned."""
    in_f32: list[bool]
    """Per node as planned, whether it computes in f32."""
    bodies: dict[onnx_ir.Graph, PlannedGraph]
    """The bodies of its nodes that the plan rewrote too."""
    made: dict[onnx_ir.Node, None] = field(default_factory=dict)
    """The Casts the plan made (an ordered set)."""
    widened: dict[onnx_ir.Value, tuple[onnx_ir.Value, str]] = field(default_factory=dict)
    """Each value that holds a half value in f32 (an f32 node's result, renamed; a Cast to f32)
    -> (the value whose type before the plan it takes with element type f32, that value's name
    as planned)."""
    narrowed: dict[onnx_ir.Value, onnx_ir.Value] = field(default_factory=dict)
    """Each Cast back to the half type -> the f32 node's result it rounds, whose type before the
    plan it has."""

    def __post_init__(self) -> None:
        self.index_of = {node: index for index, node in enumerate(self.before)}


def planned_types(
    model: onnx_ir.Model,
    planned: PlannedGraph,
    types: ValueTypes,
    split_raw: Mapping[str, memoryview] | None = None,
) -> ValueTypes | None:
    """The types of `model`, whose main graph the plan rewrote (`planned`), from `types` (those
    it was planned on), or None for it to be inferred again (see `_derive`). `split_raw`: the
    main graph's split-out raw_data, for folding (`inference.strip_weights`)."""
    derived = ValueTypes(
        graphs=dict(types.graphs),
        folded=dict(types.folded),
        dim_names=dict(types.dim_names),
        before_declared=dict(types.before_declared),
        shaped_backwards=set(types.shaped_backwards),
        spare_fold_round=types.spare_fold_round,
    )
    outcome = _derive(planned, types, derived, lambda value: None)
    if outcome is None:
        return None
    dropped, refold = outcome
    return _with_written_folds(model, derived, dropped, split_raw) if refold else derived


def _derive(
    planned: PlannedGraph,
    types: ValueTypes,
    derived: ValueTypes,
    outer: Callable[[onnx_ir.Value], onnx.TypeProto | None],
) -> tuple[dict[str, int], bool] | None:
    """Write into `derived` the types of the planned graph (the main graph or a body), from
    `types` (those before the plan); `outer` types the values of the graphs around a body.

    The plan changes no shape: a value it makes holds a half value in f32 (a Cast to f32, an
    f32 node's result), so it has that value's type with element type f32; a Cast back gives a
    half value its own type again; every other value keeps its type, and folded nodes and
    bodies stay typed. A planned body is typed the same way, on its own: it reads its half
    inputs and outer values through Casts of its own and yields its half outputs again, so what
    the graph around it sees of it keeps its types (a Cast to f32 of an outer value has that
    value's type, `outer`). Where a node the plan wrote reads a folded value, folding may fold
    it too, and a folded node computing in f32 folds to another value (or not at all), and so
    do the folds computed from it: those are left out (returned, by value name -> element
    type), and the graph is to be folded again as inference would (returned True:
    `_with_written_folds`). None, for the planned model to be inferred again, where typing
    would learn something the plan does not know: a fold that could change a type
    (`_with_written_folds`), or an f32 node's result that typing left untyped. A half graph
    output given its declared size (`ValueTypes.before_declared`) is held in f32 by a value
    that is no graph output: that value has the type inference gave the output, or, where that
    had no shape, the output's (`inference._refine_backwards` carries it up through the Cast
    back)."""
    graph = planned.graph
    before = types.of_graph(graph)
    folded_here = {node: tensors for node, tensors in types.folded.items() if node.graph is graph}
    folded_values = {tensor.name for tensors in folded_here.values() for tensor in tensors}
    values = dict(before)

    def typed(value: onnx_ir.Value) -> onnx.TypeProto | None:
        """The type of `value` in `graph` before the plan, or in the graphs around it."""
        found = before.get(value)
        if (
            found is None
            and value.is_initializer()
            and value.graph is graph
            and value.const_value is not None
        ):
            found = onnx.helper.make_tensor_type_proto(
                int(value.const_value.dtype), initializer_dims(value)
            )
        return outer(value) if found is None else found

    for half, rounded in planned.narrowed.items():
        if rounded in before:
            values[half] = before[rounded]
    refold = False
    for node in graph:
        origin = planned.index_of.get(node)
        computed = origin is not None and planned.in_f32[origin]
        written = origin is None or computed or node.op_type != planned.op_types[origin]
        if (
            written
            and any(value is not None and value.name in folded_values for value in node.inputs)
        ) or (computed and origin is not None and planned.before[origin] in folded_here):
            refold = True
        for value in node.outputs:
            held = planned.widened.get(value)
            if held is None:
                if value not in values and computed:
                    return None
                continue
            found = typed(held[0])
            inferred = types.before_declared.get(held[0])
            if inferred is not None and inferred.tensor_type.HasField("shape"):
                found = inferred
            if found is None:
                return None
            wide = onnx.TypeProto()
            wide.CopyFrom(found)
            wide.tensor_type.elem_type = TensorProto.FLOAT
            values[value] = wide
    dropped: dict[str, int] = {}
    """The values of folds that are folded again: a folded node computing in f32, and every
    fold computed from one of them, and the f32 values holding them (-> their element types)."""
    for node, tensors in sorted(folded_here.items(), key=lambda item: planned.index_of[item[0]]):
        origin = planned.index_of[node]
        if planned.in_f32[origin] or any(name in dropped for name in planned.input_names[origin]):
            dropped.update((tensor.name, tensor.data_type) for tensor in tensors)
            del derived.folded[node]
    dropped.update(
        (value.name or "", TensorProto.FLOAT)
        for value, (_, name) in planned.widened.items()
        if name in dropped
    )
    for body in planned.bodies.values():
        outcome = _derive(body, types, derived, typed)
        if outcome is None or outcome[1]:  # (inference folds no body)
            return None
    derived.graphs[graph] = values
    derived.shaped_backwards |= {
        value for value, (source, _) in planned.widened.items() if source in types.shaped_backwards
    }
    return dropped, refold


_TYPED_FROM_SHAPES = frozenset(
    {
        "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Cos", "Div", "Equal", "Erf", "Exp", "Floor",
        "Greater", "GreaterOrEqual", "IsInf", "IsNaN", "Less", "LessOrEqual", "Log", "Max", "Mean",
        "Min", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "Relu", "Round", "Sigmoid", "Sign",
        "Sin", "Sqrt", "Sub", "Sum", "Tanh", "Where", "Xor",
    }
)  # fmt: skip
"""Element-wise ops: ONNX infers their results from their operands' types, never their data."""

_FLOAT_TENSORS = frozenset(
    {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
)


def _with_written_folds(
    model: onnx_ir.Model,
    derived: ValueTypes,
    dropped: Mapping[str, int],
    split_raw: Mapping[str, memoryview] | None,
) -> ValueTypes | None:
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
    provided they have a round to spare (`ValueTypes.spare_fold_round`) and no new fold's type
    comes from after them (`ValueTypes.shaped_backwards`)."""
    if not derived.spare_fold_round:
        return None
    graph = model.graph
    nodes = list(graph)
    position = {node: index for index, node in enumerate(nodes)}
    folded = {
        position[node]: tensors for node, tensors in derived.folded.items() if node in position
    }
    earlier = set(folded)
    values = {value.name or "": type_ for value, type_ in derived.of_graph(graph).items()}
    opset = next(
        (version for domain, version in model.opset_imports.items() if domain in _DEFAULT_DOMAINS),
        1,
    )
    copy = strip_weights(onnx_ir.serde.serialize_model(model), split_raw)
    fold_shape_arithmetic(copy.graph, values, opset, folded, {})
    readers: dict[str, list[onnx.NodeProto]] = {}
    for index, node in enumerate(copy.graph.node):
        if index not in folded:
            for name in node.input:
                readers.setdefault(name, []).append(node)

    def float_results(node: onnx.NodeProto) -> bool:
        found = [values.get(name) for name in node.output]
        return all(
            type_ is not None and type_.tensor_type.elem_type in _FLOAT_TENSORS for type_ in found
        )

    new = {
        tensor.name: tensor.data_type
        for index, tensors in folded.items()
        if index not in earlier
        for tensor in tensors
    }
    shaped_backwards = {value.name for value in derived.shaped_backwards}
    if any(name in shaped_backwards for name in new):
        return None  # (typed after folding, which saw it without a shape)
    read_by_bodies = {value.name for value in values_read_by_bodies(graph)}
    for name, element in {**dropped, **new}.items():
        if element not in _FLOAT_TENSORS and (
            name in read_by_bodies or name in dropped and name not in new
        ):
            return None
        for reader in readers.get(name, ()):
            if reader.op_type not in _TYPED_FROM_SHAPES or reader.domain not in _DEFAULT_DOMAINS:
                return None
            if element not in _FLOAT_TENSORS and not (
                reader.op_type == "Where" and name not in reader.input[1:] and float_results(reader)
            ):
                return None
    for index, tensors in folded.items():
        derived.folded[nodes[index]] = tensors
    return derived


def initializer_dims(value: onnx_ir.Value) -> list[int | None] | None:
    """The dims of an initializer's tensor (None without one)."""
    tensor = value.const_value
    return None if tensor is None else [cast(int | None, dim) for dim in tensor.shape.dims]


def values_read_by_bodies(graph: onnx_ir.Graph) -> set[onnx_ir.Value]:
    """The values the bodies of `graph`'s nodes read, at any depth."""
    return {
        value for node in graph for _, _, body in node_bodies(node) for value in values_read(body)
    }
