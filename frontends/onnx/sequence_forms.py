"""The machinery of the sequence rewrite (`sequences`): the two forms a sequence takes at import,
the scopes that map sequence names to them, and the context a handler rewrites one node in.

A handler reads its node through `RewriteContext` (inputs, constants, inferred types, the
sequences in scope), emits replacement nodes named like the node (`emit`, `const`...) and binds
the node's sequence outputs to their forms (`define`). Names it makes are fresh across the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .context import describe_node, node_label
from .inference import GraphTypes, copy_fields

__all__ = [
    "DEFAULT_DOMAINS",
    "SEQUENCE_OPS",
    "Listed",
    "RewriteContext",
    "Rewriter",
    "SequenceForm",
    "SequenceRewriteError",
    "SequenceScope",
    "Stacked",
    "all_names",
    "constant_node_tensor",
    "dims_of",
    "graphs_in",
    "int_attribute",
    "used_names",
    "with_dims",
]

SEQUENCE_OPS = frozenset(
    {
        "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase",
        "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap",
    }
)  # fmt: skip
"""Default-domain ops that make or read sequences: a graph holding one is rewritten."""

DEFAULT_DOMAINS = ("", "ai.onnx")
_LARGEST_CONSTANT = 4096
"""Most elements of a constant read at import (split sizes and positions are tiny)."""


class SequenceRewriteError(ValueError):
    """A sequence the rewrite cannot express with tensors; the message names the place and why."""


@dataclass(frozen=True, slots=True)
class Listed:
    """A sequence of static length: the names of its element tensors, in order."""

    elements: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Stacked:
    """A sequence of elements of one shape: `tensor` stacks them along a new leading axis;
    `element` is the elements' type (its shape may be unknown)."""

    tensor: str
    element: onnx.TypeProto | None


SequenceForm = Listed | Stacked


def copy_node(node: onnx.NodeProto) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy


def graphs_in(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attribute in node.attribute:
        if attribute.HasField("g"):
            yield attribute.g
        yield from attribute.graphs


# -- types -------------------------------------------------------------------------------------


def dims_of(type_proto: onnx.TypeProto | None) -> tuple[int | None, ...] | None:
    """A tensor type's dims (None for a dynamic one), or None for an unknown shape."""
    if type_proto is None or type_proto.WhichOneof("value") != "tensor_type":
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim)


def with_dims(type_proto: onnx.TypeProto | None, dims: tuple[int | None, ...] | None) -> onnx.TypeProto | None:
    if type_proto is None or type_proto.WhichOneof("value") != "tensor_type":
        return None
    return helper.make_tensor_type_proto(type_proto.tensor_type.elem_type, None if dims is None else list(dims))


def flat_types(types: GraphTypes, into: dict[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """Every inferred value type of a graph and its subgraphs, by name (ONNX names are unique
    across a model's graphs)."""
    into.update(types.values)
    for subgraph in types.subgraphs.values():
        flat_types(subgraph, into)
    return into


def all_names(graph: onnx.GraphProto, names: set[str]) -> set[str]:
    for value in (*graph.input, *graph.output, *graph.value_info):
        names.add(value.name)
    names.update(tensor.name for tensor in graph.initializer)
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
        for subgraph in graphs_in(node):
            all_names(subgraph, names)
    return names


def used_names(graph: onnx.GraphProto) -> set[str]:
    """Every name a graph's nodes (at any depth) read, and its outputs."""
    used = {value.name for value in graph.output}
    for node in graph.node:
        used.update(node.input)
        for subgraph in graphs_in(node):
            used |= used_names(subgraph)
    return used


def constant_node_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    for attribute in node.attribute:
        if attribute.name == "value":
            return attribute.t
        if attribute.name == "value_int":
            return numpy_helper.from_array(np.array(attribute.i, np.int64))
        if attribute.name == "value_ints":
            return numpy_helper.from_array(np.array(list(attribute.ints), np.int64))
    return None


def int_attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    for attribute in node.attribute:
        if attribute.name == name:
            return attribute.i
    return default


# -- scopes --------------------------------------------------------------------------------------


@dataclass
class SequenceScope:
    """The sequences known in one graph (and, through `parent`, in the graphs around it)."""

    parent: SequenceScope | None = None
    sequences: dict[str, SequenceForm] = field(default_factory=dict)

    def sequence(self, name: str) -> SequenceForm | None:
        scope: SequenceScope | None = self
        while scope is not None:
            found = scope.sequences.get(name)
            if found is not None:
                return found
            scope = scope.parent
        return None


class Rewriter:
    """One model's rewrite: the names taken, the known types and constants, the opset, and the
    handler of each op type that makes or reads sequences (`sequences.HANDLERS`)."""

    def __init__(
        self,
        model: onnx.ModelProto,
        types: GraphTypes,
        split_raw: Mapping[str, memoryview],
        handlers: Mapping[str, Callable[[RewriteContext], None]],
    ) -> None:
        self.opset = next((entry.version for entry in model.opset_import if entry.domain in DEFAULT_DOMAINS), 1)
        self.taken = all_names(model.graph, set())
        self.types = flat_types(types, {})
        self.constants: dict[str, onnx.TensorProto] = {}
        self.split_raw = split_raw
        self.handlers = handlers

    def fresh(self, base: str) -> str:
        """A value name used nowhere in the model, derived from `base`."""
        count = 0
        name = base
        while name in self.taken or not name:
            count += 1
            name = f"{base}__seq{count}"
        self.taken.add(name)
        return name

    def constant(self, name: str) -> np.ndarray | None:
        """The value of a small constant (initializer, Constant node or folded value)."""
        tensor = self.constants.get(name) if name else None
        if tensor is None or any(dim < 0 for dim in tensor.dims) or int(np.prod(tensor.dims)) > _LARGEST_CONSTANT:
            return None
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            return None
        if name in self.split_raw and not tensor.raw_data:
            copy = onnx.TensorProto()
            copy.CopyFrom(tensor)
            copy.raw_data = bytes(self.split_raw[name])
            tensor = copy
        try:
            return numpy_helper.to_array(tensor)
        except Exception:  # noqa: BLE001 - a malformed tensor is simply not a known constant
            return None

    # -- graphs ----------------------------------------------------------------------------------

    def rewrite_graph(
        self,
        graph: onnx.GraphProto,
        scope: SequenceScope,
        what: str,
        folded: Mapping[int, tuple] | None = None,
        target: onnx.GraphProto | None = None,
    ) -> onnx.GraphProto:
        """A copy of `graph` (written into `target` if given) with its sequence ops rewritten;
        `what` names the graph in messages, `folded` gives the outputs folding computed by node."""
        for tensor in graph.initializer:
            self.constants[tensor.name] = tensor
        nodes: list[onnx.NodeProto] = []
        for index, node in enumerate(graph.node):
            if folded and index in folded:
                for output, tensor in zip(node.output, folded[index], strict=False):
                    self.constants[output] = tensor
            self.rewrite_node(node, index, scope, nodes)
        for value in graph.output:
            if scope.sequence(value.name) is not None:
                raise SequenceRewriteError(
                    f"value '{value.name}' (output of {what}): a sequence output has no tensor form "
                    "(niroc rewrites only sequences used inside the model into tensor ops)"
                )
        rewritten = onnx.GraphProto() if target is None else target
        copy_fields(graph, rewritten, frozenset({"node", "value_info"}))
        rewritten.node.extend(nodes)
        rewritten.value_info.extend(info for info in graph.value_info if not info.type.HasField("sequence_type"))
        return rewritten

    def rewrite_node(self, node: onnx.NodeProto, index: int, scope: SequenceScope, out: list[onnx.NodeProto]) -> None:
        at = RewriteContext(self, node, index, scope, out)
        if node.domain in DEFAULT_DOMAINS:
            if node.op_type == "Constant":
                tensor = constant_node_tensor(node)
                if tensor is not None and node.output:
                    self.constants[node.output[0]] = tensor
            handler = self.handlers.get(node.op_type)
            if handler is not None and (node.op_type in SEQUENCE_OPS or at.takes_sequences()):
                handler(at)
                return
        for position, name in enumerate(node.input):
            if name and scope.sequence(name) is not None:
                raise at.error(
                    f"takes sequence '{name}' as input #{position}; niroc rewrites sequences into "
                    "tensors only for the sequence ops, Identity and Loop"
                )
        kept = at.with_subgraphs_rewritten(node)
        if not kept.name:
            # NOTE: the importer names an unnamed node by its position, which the rewrite shifts
            kept = kept if kept is not node else copy_node(node)
            kept.name = node_label(node, index)
        out.append(kept)


@dataclass
class RewriteContext:
    """The node being rewritten, and where its replacement nodes go."""

    rewriter: Rewriter
    node: onnx.NodeProto
    index: int
    scope: SequenceScope
    out: list[onnx.NodeProto]

    @property
    def label(self) -> str:
        """The name every replacement node takes: the node's, or its label in messages."""
        return node_label(self.node, self.index)

    def error(self, reason: str) -> SequenceRewriteError:
        return SequenceRewriteError(f"{describe_node(self.node, self.index)}: {reason}")

    def graph_attribute(self, name: str) -> onnx.GraphProto:
        """The node's graph attribute `name` (a SequenceMap's or Loop's body), or a clear error:
        the rewrite runs before the verifier checks the node's attributes."""
        for attribute in self.node.attribute:
            if attribute.name == name and attribute.HasField("g"):
                return attribute.g
        raise self.error(f"missing graph attribute '{name}'")

    def takes_sequences(self) -> bool:
        return any(name and self.scope.sequence(name) is not None for name in self.node.input)

    def input(self, position: int) -> str:
        """The name of input `position`, or '' when absent."""
        return self.node.input[position] if position < len(self.node.input) else ""

    def output(self, position: int = 0) -> str:
        return self.node.output[position] if position < len(self.node.output) else ""

    def sequence(self, position: int) -> SequenceForm:
        name = self.input(position)
        found = self.scope.sequence(name) if name else None
        if found is None:
            raise self.error(f"input #{position} '{name}' is not a sequence built inside the model")
        return found

    def define(self, name: str, form: SequenceForm) -> None:
        if name:
            self.scope.sequences[name] = form

    def type_of(self, name: str) -> onnx.TypeProto | None:
        return self.rewriter.types.get(name)

    def emit(self, op_type: str, inputs: list[str], output: str | None = None, **attributes) -> str:
        """A node named like the node being rewritten; its (one) output name."""
        name = output or self.rewriter.fresh(f"{self.label}_{op_type.lower()}")
        self.out.append(helper.make_node(op_type, inputs, [name], name=self.label, **attributes))
        return name

    def const(self, array: np.ndarray) -> str:
        name = self.emit("Constant", [], value=numpy_helper.from_array(np.asarray(array)))
        self.rewriter.constants[name] = self.out[-1].attribute[0].t
        return name

    def ints(self, values: list[int]) -> str:
        return self.const(np.array(values, np.int64))

    def unsqueeze(self, value: str, axes: list[int], output: str | None = None) -> str:
        if self.rewriter.opset >= 13:
            return self.emit("Unsqueeze", [value, self.ints(axes)], output)
        return self.emit("Unsqueeze", [value], output, axes=axes)

    def slice(self, value: str, start: str, end: str, axis: int = 0) -> str:
        return self.emit("Slice", [value, start, end, self.ints([axis])])

    def scalar_position(self, position: int) -> str:
        """Input `position` (a sequence position) as a rank-0 tensor."""
        name = self.input(position)
        if dims_of(self.type_of(name)) == (1,):
            return self.emit("Reshape", [name, self.ints([])])
        return name

    def constant_position(self, position: int) -> int | None:
        array = self.rewriter.constant(self.input(position))
        return None if array is None or array.size != 1 else int(array.reshape(-1)[0])

    def with_subgraphs_rewritten(self, node: onnx.NodeProto) -> onnx.NodeProto:
        """`node` itself, or a copy whose graph attributes have their sequences rewritten."""
        if not any(attribute.HasField("g") or attribute.graphs for attribute in node.attribute):
            return node
        copy = onnx.NodeProto()
        copy_fields(node, copy, frozenset({"attribute"}))
        for attribute in node.attribute:
            if not (attribute.HasField("g") or attribute.graphs):
                copy.attribute.append(attribute)
                continue
            target = copy.attribute.add()
            copy_fields(attribute, target, frozenset({"g", "graphs"}))
            if attribute.HasField("g"):
                target.g.CopyFrom(self.subgraph(attribute.g, f"attribute '{attribute.name}'"))
            for position, graph in enumerate(attribute.graphs):
                target.graphs.append(self.subgraph(graph, f"attribute '{attribute.name}' #{position}"))
        return copy

    def subgraph(self, graph: onnx.GraphProto, where: str, scope: SequenceScope | None = None) -> onnx.GraphProto:
        what = f"graph '{graph.name}' ({where} of {describe_node(self.node, self.index)})"
        return self.rewriter.rewrite_graph(graph, scope or SequenceScope(self.scope), what)

    def stacked(self, form: SequenceForm, like: str | None = None) -> Stacked:
        """`form` as one stacked tensor. Its elements (and `like`, a tensor to be inserted)
        must be known to share one static shape (or be one value)."""
        if isinstance(form, Stacked) and like is None:
            return form
        names = list(form.elements) if isinstance(form, Listed) else []
        types = [self.type_of(name) for name in names] if isinstance(form, Listed) else [form.element]
        if like:
            names.append(like)
            types.append(self.type_of(like))
        shapes = {dims_of(type_) for type_ in types}
        only = next(iter(shapes)) if len(shapes) == 1 else None
        static = only is not None and None not in only
        if not types or not (static or (isinstance(form, Listed) and len(set(names)) == 1)):
            raise self.error(
                "needs its sequence as one stacked tensor, but the elements (and the tensor inserted) "
                "are not known to share one static shape"
            )
        if isinstance(form, Stacked):
            return form
        pieces = [self.unsqueeze(name, [0]) for name in form.elements]
        stacked = pieces[0] if len(pieces) == 1 else self.emit("Concat", pieces, axis=0)
        return Stacked(stacked, types[0])


