"""Types for every ONNX value, from ONNX shape inference run on a weightless copy of the model.

Shape inference serialises the whole model and would copy every weight (and fail past 2 GB), so
it never sees one: `strip_weights` copies the model's structure with each large tensor (graph
initializers and tensor attributes, at any depth) replaced by an external-data placeholder that
keeps its name, element type and dims. Small tensors stay, so data propagation still folds
shape arithmetic (`Reshape` by an initializer shape). Node order and nesting are unchanged, so
the inferred graphs line up with the original's node by node.

Inference runs with strict mode off (a node it cannot type is skipped, not fatal) and data
propagation on, unless the model has a long 1-D value (see `DATA_PROPAGATION_LIMIT`). The result is a `GraphTypes` tree: the inferred `TypeProto` of each value name
per graph, and the tree of each subgraph keyed by (node index, attribute name, position).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain

import onnx

from .folding import fold_shape_arithmetic
from .symbolic_dims import analyse

__all__ = [
    "DATA_PROPAGATION_LIMIT",
    "GraphTypes",
    "InferenceFailure",
    "all_graphs",
    "copy_fields",
    "infer_types",
    "strip_weights",
]

STRIP_THRESHOLD_BYTES = 4096
"""Tensors bigger than this lose their data before shape inference (shape tensors are tiny)."""

_PLACEHOLDER_LOCATION = "niroc-weights-stripped-for-shape-inference"


class InferenceFailure(ValueError):
    """ONNX shape inference raised although strict mode is off (the message says why)."""


@dataclass
class GraphTypes:
    """Inferred types of one graph's values, and of its subgraphs'."""

    values: dict[str, onnx.TypeProto] = field(default_factory=dict)
    subgraphs: dict[tuple[int, str, int], GraphTypes] = field(default_factory=dict)
    folded: dict[int, tuple[onnx.TensorProto, ...]] = field(default_factory=dict)
    """Nodes (by index) whose outputs `folding` computed: the importer emits these constants."""
    dim_names: frozenset[str] = frozenset()
    """The dim names (`dim_param`) kept in this graph's Niro types: the main graph's input dim
    names, which ONNX inference carries only to dims its op semantics make equal (a broadcast
    of `a` against `1` is `a`; `a` against `b` is left unnamed). Two graph inputs may share a
    name; the lowering checks once, at the function's entry, that their sizes agree (see
    `backends.mlir.lowering`), so every later op can rely on it. Subgraphs keep none: a Loop
    may change a carried value's dims from one iteration to the next."""
    before_declared: dict[str, onnx.TypeProto] = field(default_factory=dict)
    """The main graph's outputs given a declared size where inference left a dim unknown
    (`_fill_unknown_dims`), with the type inference of their producer gave them."""
    shaped_backwards: frozenset[str] = frozenset()
    """The values `_refine_backwards` gave a shape: folding saw them without one."""
    spare_fold_round: bool = False
    """Whether folding stopped on a round that found nothing new before its last round
    (`FOLD_ROUNDS`): a rewrite that makes more fold (`half_plan_types`) is folded within the
    rounds inference of the rewritten model has."""

    def subgraph(self, node_index: int, attribute: str, position: int = 0) -> GraphTypes:
        return self.subgraphs.get((node_index, attribute, position)) or GraphTypes()


def _is_repeated(descriptor) -> bool:
    repeated = getattr(descriptor, "is_repeated", None)  # protobuf >= 5.28; `label` before
    return descriptor.label == descriptor.LABEL_REPEATED if repeated is None else repeated


def copy_fields(source, target, skip: frozenset[str]) -> None:
    """Copy every set field of protobuf message `source` into `target`, except `skip`."""
    for descriptor, value in source.ListFields():
        if descriptor.name in skip:
            continue
        if _is_repeated(descriptor):
            getattr(target, descriptor.name).extend(value)
        elif descriptor.type == descriptor.TYPE_MESSAGE:
            getattr(target, descriptor.name).CopyFrom(value)
        else:
            setattr(target, descriptor.name, value)


def _data_bytes(tensor: onnx.TensorProto) -> int:
    """An upper bound of the tensor's data size from its dims alone (never touching the data:
    upb's ByteSize serialises the message, i.e. copies the weight)."""
    count = 1
    for dim in tensor.dims:
        count *= max(dim, 0)
    return count * 8


def _strip_tensor(
    source: onnx.TensorProto, target: onnx.TensorProto, split_raw: Mapping[str, memoryview] | None = None
) -> None:
    if source.data_location == onnx.TensorProto.EXTERNAL or _data_bytes(source) <= STRIP_THRESHOLD_BYTES:
        target.CopyFrom(source)
        if split_raw is not None and source.name in split_raw:
            target.raw_data = bytes(split_raw[source.name])  # small: shape data to propagate
        return
    target.name = source.name
    target.data_type = source.data_type
    target.dims.extend(source.dims)
    target.data_location = onnx.TensorProto.EXTERNAL
    entry = target.external_data.add()
    entry.key = "location"
    entry.value = _PLACEHOLDER_LOCATION


def _strip_attribute(source: onnx.AttributeProto, target: onnx.AttributeProto) -> None:
    copy_fields(source, target, frozenset({"t", "tensors", "g", "graphs"}))
    if source.HasField("t"):
        _strip_tensor(source.t, target.t)
    for tensor in source.tensors:
        _strip_tensor(tensor, target.tensors.add())
    if source.HasField("g"):
        _strip_graph(source.g, target.g)
    for graph in source.graphs:
        _strip_graph(graph, target.graphs.add())


def _strip_graph(
    source: onnx.GraphProto, target: onnx.GraphProto, split_raw: Mapping[str, memoryview] | None = None
) -> None:
    copy_fields(source, target, frozenset({"initializer", "node"}))
    for tensor in source.initializer:
        _strip_tensor(tensor, target.initializer.add(), split_raw)
    _strip_nodes(source.node, target.node)


def _strip_nodes(source, target) -> None:
    """Copy the nodes of `source` into `target`, stripping their tensor attributes.

    NOTE: most nodes hold no tensor or graph: those are copied whole, a run of them at a time
    (protobuf copies in C; field by field in Python cost ~6 us a node)."""
    plain: list[onnx.NodeProto] = []
    for node in source:
        if not _needs_stripping(node):
            plain.append(node)
            continue
        target.extend(plain)
        plain.clear()
        copy = target.add()
        copy_fields(node, copy, frozenset({"attribute"}))
        for attribute in node.attribute:
            _strip_attribute(attribute, copy.attribute.add())
        _spell_out_defaults(copy)
    target.extend(plain)


def _needs_stripping(node: onnx.NodeProto) -> bool:
    """Whether copying `node` whole could copy a weight or skip a fix (see `_strip_attribute`
    and `_spell_out_defaults`)."""
    if node.op_type == "STFT":
        return True
    for attribute in node.attribute:
        if attribute.HasField("t") or attribute.tensors or attribute.HasField("g") or attribute.graphs:
            return True
    return False


def _spell_out_defaults(node: onnx.NodeProto) -> None:
    """Work around ONNX shape inference reading a missing attribute with the wrong default.

    NOTE: onnx 1.23 types STFT without `onesided` as two-sided (its inference reads 0); the
    schema's default, which onnx.reference and the lowering use, is 1 (one-sided)."""
    if node.op_type == "STFT" and node.domain in ("", "ai.onnx"):
        if not any(attribute.name == "onesided" for attribute in node.attribute):
            node.attribute.append(onnx.helper.make_attribute("onesided", 1))


def strip_weights(model: onnx.ModelProto, split_raw: Mapping[str, memoryview] | None = None) -> onnx.ModelProto:
    """A copy of `model` whose large tensors carry no data (see the module docstring).

    `split_raw` holds the raw_data of main-graph initializers that was split out of the
    message before parsing (see `wire`); the small ones are put back for data propagation.
    """
    stripped = onnx.ModelProto()
    copy_fields(model, stripped, frozenset({"graph"}))
    _strip_graph(model.graph, stripped.graph, split_raw)
    return stripped


def _collect(graph: onnx.GraphProto) -> GraphTypes:
    types = GraphTypes()
    for info in chain(graph.input, graph.value_info, graph.output):  # NOTE: see _has_long_vector
        # an output declared by name only has an empty type after inference (`type {}`) when
        # its producer has no schema (a contrib op): no type, as if it were not declared
        if info.HasField("type") and info.type.WhichOneof("value") is not None:
            types.values[info.name] = info.type
    for index, node in enumerate(graph.node):
        for attribute in node.attribute:
            if attribute.HasField("g"):
                types.subgraphs[(index, attribute.name, 0)] = _collect(attribute.g)
            for position, subgraph in enumerate(attribute.graphs):
                types.subgraphs[(index, attribute.name, position)] = _collect(subgraph)
    return types


FOLD_ROUNDS = 8
"""Rounds of folding and re-inference (each round folds every chain inference typed)."""

DATA_PROPAGATION_LIMIT = 1 << 16
"""Longest 1-D value a model may have for inference to run with data propagation.

ONNX's data propagation materialises every element of a 1-D tensor it meets (shape arithmetic
is its purpose) at ~100 bytes and real time per element, whether or not the tensor is a shape:
a graph input float[2**31] feeding a Mul kept niroc busy for minutes, growing past any memory
limit. Such a model is inferred without data propagation (only shape arithmetic folding is lost).
"""


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and every subgraph in it, at any depth (If branches, Loop and Scan bodies)."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield current
        for node in current.node:
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    stack.append(attribute.g)
                stack.extend(attribute.graphs)


def _has_long_vector(graph: onnx.GraphProto) -> bool:
    """Whether `graph` (or a subgraph) types any value as 1-D longer than the limit."""
    for current in all_graphs(graph):
        # NOTE: streamed, not unpacked into a tuple: protobuf then makes one wrapper at a time
        # (2.5x faster over 20,000 values)
        for info in chain(current.input, current.value_info, current.output):
            dims = info.type.tensor_type.shape.dim
            if len(dims) == 1 and dims[0].dim_value > DATA_PROPAGATION_LIMIT:
                return True
    return False


_SHAPE_DATA_SOURCES = frozenset({"Shape", "Size", "Constant", "If", "Loop", "Scan"})
"""Ops whose outputs (or bodies) can start shape data for ONNX's data propagation; the rest
only carry it on from these and from integer initializers."""

_INTEGER_TENSORS = frozenset({onnx.TensorProto.INT32, onnx.TensorProto.INT64})


def _has_shape_data(model: onnx.ModelProto) -> bool:
    """Whether data propagation could learn anything: a node that makes shape data, an
    integer initializer or a model-local function (whose body may hold either).

    NOTE: data propagation costs ~2.5x a plain inference pass (20,000 float ops: ~190 ms vs
    ~70 ms) and, without a source of shape data, infers the same types."""
    if model.functions:
        return True
    graph = model.graph
    if any(tensor.data_type in _INTEGER_TENSORS for tensor in graph.initializer):
        return True
    return any(node.op_type in _SHAPE_DATA_SOURCES for node in graph.node)


def _infer(model: onnx.ModelProto, *, data_prop: bool) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=data_prop)
    except Exception as error:  # onnx raises InferenceError, ValidationError, RuntimeError...
        raise InferenceFailure(str(error)) from error


def infer_types(model: onnx.ModelProto, split_raw: Mapping[str, memoryview] | None = None) -> GraphTypes:
    """The inferred types of `model`'s values (the model itself is left untouched).

    A first pass without data propagation (cheap) finds the value types; unless one of them is a
    long vector (see DATA_PROPAGATION_LIMIT) or nothing in the model makes shape data
    (`_has_shape_data`), a second pass adds data propagation. Then shape
    arithmetic of the main graph is folded (`folding`) and dims proved static by symbolic
    dims (`symbolic_dims`) are written in, re-inferring after each round that changed
    something, at most `FOLD_ROUNDS` times."""
    stripped = strip_weights(model, split_raw)
    declared = _forget_declared_dims(stripped)

    before_declared: dict[str, onnx.TypeProto] = {}

    def infer(data_prop: bool) -> onnx.ModelProto:
        inferred = _infer(stripped, data_prop=data_prop)
        before_declared.clear()
        before_declared.update(_fill_unknown_dims(inferred.graph, declared))
        return inferred

    inferred = infer(False)
    data_prop = _has_shape_data(stripped) and not _has_long_vector(inferred.graph)
    if data_prop:
        inferred = infer(True)
    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 1)
    folded: dict[int, tuple[onnx.TensorProto, ...]] = {}
    types = _collect(inferred.graph)
    spare_fold_round = False
    for round_number in range(1, FOLD_ROUNDS + 1):
        symbolic = analyse(stripped.graph, types, opset)
        folds = fold_shape_arithmetic(stripped.graph, types.values, opset, folded, symbolic.constants)
        tightened = [_tighten(graph, refined) for graph, refined in symbolic.refined_in_subgraphs]
        if not _tighten(stripped.graph, symbolic.refined) and not any(tightened) and not folds:
            spare_fold_round = round_number < FOLD_ROUNDS
            break
        inferred = infer(data_prop)
        types = _collect(inferred.graph)
    types.folded = folded
    types.before_declared = before_declared
    types.spare_fold_round = spare_fold_round
    types.shaped_backwards = _refine_backwards(inferred.graph, types.values)
    initializers = {initializer.name for initializer in model.graph.initializer}
    types.dim_names = frozenset(
        dim.dim_param
        for value in model.graph.input
        if value.name not in initializers and value.type.HasField("tensor_type")
        for dim in value.type.tensor_type.shape.dim
        if dim.dim_param and not dim.HasField("dim_value")
    )
    return types


def _forget_declared_dims(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Clear the dims (names `dim_param` and sizes `dim_value`) that `model` declares on
    value_info and on main-graph outputs, and the names declared on subgraph inputs and outputs.
    The ranks and element types stay. Returns the main-graph outputs' declared types, by name:
    after inference a declared size fills only a dim inference left unknown
    (`_fill_unknown_dims`).

    ONNX inference keeps a declared dim over the one it infers, and nothing checks it at run
    time: a value_info or a graph output that calls `Relu(x)` [3, 4] when x is [b, 4] would type
    the Relu static 3, and a 1-row x would come out as 3 rows; a declared name `batch` on a dim
    that is not would make the lowering skip a run-time check. Exporters write such
    declarations with the dims they traced, on models exported with dynamic axes. Only the
    graph inputs' dims are checked (once, on entry; see `GraphTypes.dim_names`), so every dim
    inference carries is one it derived from them by the ops' semantics.

    Still taken as declared, unchecked: a main-graph output's size where inference knows
    nothing of that dim (ONNX's node tests declare the outputs of ops whose shape comes from a
    data input: Reshape's shape, TopK's k, Resize's sizes; 19 are refused without them), the
    sizes on subgraph inputs and outputs (ONNX inference leaves a Loop-carried value unsized
    without its body's declarations, and folding in Loop bodies needs them), and the value_info
    and outputs of ops ONNX has no schema for (custom domains: nothing else types them)."""
    graph = model.graph
    initializers = {initializer.name for initializer in graph.initializer}
    declared: dict[str, onnx.TypeProto] = {}
    for current in all_graphs(graph):
        inputs = current.input
        if current is graph:  # the data inputs keep theirs
            inputs = [value for value in inputs if value.name in initializers]
        for info in inputs:
            _forget_dims(info, sizes=False)
        _drop_duplicate_value_info(current)
        unknown = {name for node in current.node if not onnx.defs.has(node.op_type, node.domain) for name in node.output}
        for info in current.value_info:  # an op ONNX has no schema for is typed by nothing else
            _forget_dims(info, sizes=info.name not in unknown)
        for info in current.output:
            sizes = current is graph and info.name not in initializers and info.name not in unknown
            if sizes:
                declared[info.name] = onnx.TypeProto()
                declared[info.name].CopyFrom(info.type)
            _forget_dims(info, sizes=sizes)
    return declared


def _drop_duplicate_value_info(graph: onnx.GraphProto) -> None:
    """Remove the value_info entries that name one of `graph`'s initializers, inputs or outputs,
    which declare those values already: an initializer's dims are the tensor's own, an input's
    its declaration's (checked on entry), and a value_info entry whose dims were forgotten would
    hide them from inference. PyTorch's dynamo exporter declares every initializer and value so
    (a GatherND of a constant [1, 1] index and a Slice of a [1, max] buffer were left unsized,
    and the 1s in them with it); `onnx.utils.extract_model` declares the inputs so (a Conv of a
    [N, 3, 64, 64] input was left unsized). An output declared without a type takes its
    value_info entry's: ONNX inference types the value_info entry and leaves such an output
    untyped (`niroc check` exposes a value of a dynamo export as an output declared so)."""
    if not graph.value_info:
        return
    own = {tensor.name for tensor in graph.initializer} | {value.name for value in graph.input}
    outputs = {value.name: value for value in graph.output}
    if not any(info.name in own or info.name in outputs for info in graph.value_info):
        return
    kept = []
    for info in graph.value_info:
        output = outputs.get(info.name)
        if output is not None and not output.HasField("type"):
            output.type.CopyFrom(info.type)
        if info.name not in own and output is None:
            kept.append(info)
    del graph.value_info[:]
    graph.value_info.extend(kept)


def _forget_dims(info: onnx.ValueInfoProto, *, sizes: bool) -> None:
    """Clear the names of `info`'s declared dims, and their sizes too if `sizes`."""
    if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
        for dim in info.type.tensor_type.shape.dim:
            if sizes:
                dim.Clear()
            else:
                dim.ClearField("dim_param")


UNKNOWN_DIM_PREFIX = "unk__"
"""The prefix of the names ONNX inference makes up for dims it knows nothing of."""


def _unknown(dim: onnx.TensorShapeProto.Dimension) -> bool:
    """Whether inference left `dim` unknown: no size, and no name or one it made up."""
    return not dim.HasField("dim_value") and (
        not dim.HasField("dim_param") or dim.dim_param.startswith(UNKNOWN_DIM_PREFIX)
    )


def _fill_unknown_dims(graph: onnx.GraphProto, declared: Mapping[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """Give each output of the inferred main `graph` its `declared` size on every dim inference
    left unknown (`_unknown`), and its whole declared shape where inference gave none. Returns
    the type inference gave each output it changed."""
    before: dict[str, onnx.TypeProto] = {}
    for info in graph.output:
        source = declared.get(info.name)
        if source is None or not source.tensor_type.HasField("shape"):
            continue
        inferred = onnx.TypeProto()
        inferred.CopyFrom(info.type)
        target = info.type.tensor_type
        if not target.HasField("shape"):
            target.shape.CopyFrom(source.tensor_type.shape)
            before[info.name] = inferred
            continue
        if len(target.shape.dim) != len(source.tensor_type.shape.dim):
            continue
        for dim, given in zip(target.shape.dim, source.tensor_type.shape.dim, strict=True):
            if given.HasField("dim_value") and _unknown(dim):
                dim.dim_value = given.dim_value
                before[info.name] = inferred
    return before


def _tighten(graph: onnx.GraphProto, refined: Mapping[str, onnx.TypeProto]) -> bool:
    """Write `refined` types into `graph`'s value_info or outputs (ONNX inference keeps a
    declared dim it cannot infer and carries it on). True if any was written."""
    if not refined:
        return False
    pending = dict(refined)
    for info in chain(graph.value_info, graph.output):
        if info.name in pending:
            info.type.CopyFrom(pending.pop(info.name))
    for name, type_ in pending.items():
        graph.value_info.add(name=name).type.CopyFrom(type_)
    return True


_SHAPE_PRESERVING = frozenset(
    {
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cast", "CastLike", "Ceil", "Cos",
        "Cosh", "Erf", "Exp", "Floor", "Identity", "IsInf", "IsNaN", "Log", "Neg", "Not",
        "Reciprocal", "Relu", "Round", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign",
        "Sqrt", "Tan", "Tanh",
    }
)  # fmt: skip
"""Ops whose output has exactly the shape of their first input (element-wise, unary)."""


def _refine_backwards(graph: onnx.GraphProto, values: dict[str, onnx.TypeProto]) -> frozenset[str]:
    """Give a value of unknown shape the shape of a shape-preserving op's typed output.

    ONNX infers forwards only: `ReduceSum(x, axes)` with run-time axes has no shape, though the
    Sqrt after it (ReduceL2's body) ends in a graph output declared [3, 1, 2]. An element-wise
    unary op's input has its output's shape, so walking the graph backwards carries the known
    shape up to the value. Graph inputs and initializers keep their declared types. Returns the
    values it gave a shape."""
    fixed = {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer}
    shaped: set[str] = set()
    for node in reversed(graph.node):
        if node.op_type not in _SHAPE_PRESERVING or node.domain not in ("", "ai.onnx"):
            continue
        if not node.input or not node.output or not node.input[0] or node.input[0] in fixed:
            continue
        known, unknown = values.get(node.output[0]), values.get(node.input[0])
        if known is None or unknown is None or not known.tensor_type.HasField("shape"):
            continue
        if unknown.WhichOneof("value") != "tensor_type" or unknown.tensor_type.HasField("shape"):
            continue
        refined = onnx.TypeProto()
        refined.CopyFrom(unknown)
        refined.tensor_type.shape.CopyFrom(known.tensor_type.shape)
        values[node.input[0]] = refined
        shaped.add(node.input[0])
    return frozenset(shaped)
