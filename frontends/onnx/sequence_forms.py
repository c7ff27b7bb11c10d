"""The machinery of the sequence rewrite (`sequences`): the two forms a sequence takes at import,
the scopes that map sequence values to them, and the context a handler rewrites one node in.

The rewrite works on the onnx_ir model in place. A handler reads its node through
`RewriteContext` (inputs, constants, inferred types, the sequences in scope), emits replacement
nodes named like the node (`emit`, `const`...), which take the node's place, and binds the
node's sequence outputs to their forms (`define`). Names it makes are fresh across the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx_ir
from onnx import helper, numpy_helper

from .context import describe_node, node_label
from .graph_walks import node_bodies, value_names
from .value_types import ValueTypes

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
    "constant_node_tensor",
    "dims_of",
    "name_of",
    "detach",
    "replace_value",
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
    """A sequence of static length: its element tensors, in order."""

    elements: tuple[onnx_ir.Value, ...]


@dataclass(frozen=True, slots=True)
class Stacked:
    """A sequence of elements of one shape: `tensor` stacks them along a new leading axis;
    `element` is the elements' type (its shape may be unknown)."""

    tensor: onnx_ir.Value
    element: onnx.TypeProto | None


SequenceForm = Listed | Stacked


# -- types and graphs ----------------------------------------------------------------------------


def dims_of(type_proto: onnx.TypeProto | None) -> tuple[int | None, ...] | None:
    """A tensor type's dims (None for a dynamic one), or None for an unknown shape."""
    if type_proto is None or type_proto.WhichOneof("value") != "tensor_type":
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim)


def with_dims(
    type_proto: onnx.TypeProto | None, dims: tuple[int | None, ...] | None
) -> onnx.TypeProto | None:
    if type_proto is None or type_proto.WhichOneof("value") != "tensor_type":
        return None
    return helper.make_tensor_type_proto(
        type_proto.tensor_type.elem_type, None if dims is None else list(dims)
    )


def constant_node_tensor(node: onnx_ir.Node) -> onnx.TensorProto | None:
    """The tensor a Constant node makes, for its `value`, `value_int` or `value_ints` (None for
    another attribute, or one of another type than its name says)."""
    for name, attribute in node.attributes.items():
        if name == "value" and attribute.type is onnx_ir.AttributeType.TENSOR:
            return onnx_ir.serde.serialize_tensor(attribute.value)
        if name == "value_int" and attribute.type is onnx_ir.AttributeType.INT:
            return numpy_helper.from_array(np.array(attribute.value, np.int64))
        if name == "value_ints" and attribute.type is onnx_ir.AttributeType.INTS:
            return numpy_helper.from_array(np.array(list(attribute.value), np.int64))
    return None


def name_of(value: onnx_ir.Value | None) -> str:
    """A value's name, '' for an absent one, for names made from it and messages."""
    return "" if value is None else value.name or ""


def detach(node: onnx_ir.Node) -> None:
    """Make `node` no longer a reader of its inputs: it is replaced (its outputs may still be
    read by nodes the rewrite replaces later)."""
    for position in range(len(node.inputs)):
        node.replace_input_with(position, None)


def replace_value(old: onnx_ir.Value, new: onnx_ir.Value) -> None:
    """Make every reader of `old` (graph outputs included) read `new`."""
    old.replace_all_uses_with(new, replace_graph_outputs=True)


# -- scopes --------------------------------------------------------------------------------------


@dataclass
class SequenceScope:
    """The sequences known in one graph (and, through `parent`, in the graphs around it)."""

    parent: SequenceScope | None = None
    sequences: dict[onnx_ir.Value, SequenceForm] = field(default_factory=dict)

    def sequence(self, value: onnx_ir.Value | None) -> SequenceForm | None:
        if value is None:
            return None
        scope: SequenceScope | None = self
        while scope is not None:
            found = scope.sequences.get(value)
            if found is not None:
                return found
            scope = scope.parent
        return None


class Rewriter:
    """One model's rewrite: the names taken, the known types and constants, the opset, and the
    handler of each op type that makes or reads sequences (`sequences.HANDLERS`)."""

    def __init__(
        self,
        model: onnx_ir.Model,
        types: ValueTypes,
        split_raw: Mapping[str, memoryview],
        handlers: Mapping[str, Callable[[RewriteContext], None]],
    ) -> None:
        self.opset = next(
            (
                version
                for domain, version in model.opset_imports.items()
                if domain in DEFAULT_DOMAINS
            ),
            1,
        )
        self.taken = value_names(model.graph)
        self.types: dict[onnx_ir.Value, onnx.TypeProto] = {}
        for table in types.graphs.values():
            self.types.update(table)
        self.folded = types.folded
        self.constants: dict[onnx_ir.Value, onnx.TensorProto] = {}
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

    def constant(self, value: onnx_ir.Value | None) -> np.ndarray | None:
        """The value of a small constant (initializer, Constant node or folded value)."""
        tensor = self.constants.get(value) if value is not None else None
        if (
            tensor is None
            or any(dim < 0 for dim in tensor.dims)
            or int(np.prod(tensor.dims)) > _LARGEST_CONSTANT
        ):
            return None
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            return None
        if value is not None and value.name in self.split_raw and not tensor.raw_data:
            copy = onnx.TensorProto()
            copy.CopyFrom(tensor)
            copy.raw_data = bytes(self.split_raw[value.name or ""])
            tensor = copy
        try:
            return numpy_helper.to_array(tensor)
        except Exception:  # noqa: BLE001 - a malformed tensor is simply not a known constant
            return None

    # -- graphs ----------------------------------------------------------------------------------

    def rewrite_graph(self, graph: onnx_ir.Graph, scope: SequenceScope, what: str) -> None:
        """Rewrite the sequence ops of `graph` in place; `what` names the graph in messages."""
        for value in graph.initializers.values():
            tensor = _initializer_tensor(value)
            if tensor is not None:
                self.constants[value] = tensor
        for index, node in enumerate(list(graph)):
            folded = self.folded.get(node)
            if folded:
                for output, tensor in zip(node.outputs, folded, strict=False):
                    self.constants[output] = tensor
            out: list[onnx_ir.Node] = []
            self.rewrite_node(node, index, scope, out)
            if out != [node]:
                graph.insert_before(node, out)
                graph.remove(node)
        for value in graph.outputs:
            if scope.sequence(value) is not None:
                raise SequenceRewriteError(
                    f"value '{value.name}' (output of {what}): a sequence output has no tensor form "
                    "(niroc rewrites only sequences used inside the model into tensor ops)"
                )

    def rewrite_node(
        self, node: onnx_ir.Node, index: int, scope: SequenceScope, out: list[onnx_ir.Node]
    ) -> None:
        """Put into `out` what takes `node`'s place: the nodes its handler emits, or the node
        itself (its bodies rewritten)."""
        at = RewriteContext(self, node, index, scope, out)
        if node.domain in DEFAULT_DOMAINS:
            if node.op_type == "Constant":
                tensor = constant_node_tensor(node)
                if tensor is not None and node.outputs:
                    self.constants[node.outputs[0]] = tensor
            handler = self.handlers.get(node.op_type)
            if handler is not None and (node.op_type in SEQUENCE_OPS or at.takes_sequences()):
                handler(at)
                detach(node)
                return
        for position, value in enumerate(node.inputs):
            if value is not None and scope.sequence(value) is not None:
                raise at.error(
                    f"takes sequence '{value.name}' as input #{position}; niroc rewrites sequences into "
                    "tensors only for the sequence ops, Identity and Loop"
                )
        at.rewrite_subgraphs()
        if not node.name:
            # NOTE: the importer names an unnamed node by its position, which the rewrite shifts
            node.name = node_label(node, index)
        out.append(node)


def _initializer_tensor(value: onnx_ir.Value) -> onnx.TensorProto | None:
    """An initializer's tensor as a proto (without its data when that was split out of the
    file, `Rewriter.constant`), None for external data."""
    tensor = value.const_value
    if tensor is None or isinstance(tensor, onnx_ir.ExternalTensor):
        return None
    if isinstance(tensor, onnx_ir.serde.TensorProtoTensor):
        return tensor.raw
    return onnx_ir.serde.serialize_tensor(tensor)


@dataclass
class RewriteContext:
    """The node being rewritten, and where its replacement nodes go."""

    rewriter: Rewriter
    node: onnx_ir.Node
    index: int
    scope: SequenceScope
    out: list[onnx_ir.Node]

    @property
    def label(self) -> str:
        """The name every replacement node takes: the node's, or its label in messages."""
        return node_label(self.node, self.index)

    def error(self, reason: str) -> SequenceRewriteError:
        return SequenceRewriteError(f"{describe_node(self.node, self.index)}: {reason}")

    def int_attribute(self, name: str, default: int) -> int:
        """The node's int attribute `name` (`default` when absent), as `NodeContext` reads it."""
        found = self.node.attributes.get(name)
        if found is None:
            return default
        if found.type is not onnx_ir.AttributeType.INT:
            raise self.error(f"attribute '{name}' must be an int, got {found.type.name}")
        return int(found.value)

    def graph_attribute(self, name: str) -> onnx_ir.Graph:
        """The node's graph attribute `name` (a SequenceMap's or Loop's body), or a clear error:
        the rewrite runs before the verifier checks the node's attributes."""
        found = self.node.attributes.get(name)
        if found is None or found.is_ref() or found.type is not onnx_ir.AttributeType.GRAPH:
            raise self.error(f"missing graph attribute '{name}'")
        return found.value

    def takes_sequences(self) -> bool:
        return any(
            value is not None and self.scope.sequence(value) is not None
            for value in self.node.inputs
        )

    def input(self, position: int) -> onnx_ir.Value | None:
        """Input `position`, or None when absent."""
        return self.node.inputs[position] if position < len(self.node.inputs) else None

    def name(self, position: int) -> str:
        """The name of input `position` ('' when absent), for messages."""
        return name_of(self.input(position))

    def output(self, position: int = 0) -> onnx_ir.Value | None:
        """Output `position`, or None when absent."""
        if position >= len(self.node.outputs):
            return None
        value = self.node.outputs[position]
        return value if value.name else None

    def sequence(self, position: int) -> SequenceForm:
        value = self.input(position)
        found = self.scope.sequence(value)
        if found is None:
            raise self.error(
                f"input #{position} '{self.name(position)}' is not a sequence built inside the model"
            )
        return found

    def define(self, value: onnx_ir.Value | None, form: SequenceForm) -> None:
        if value is not None:
            self.scope.sequences[value] = form

    def type_of(self, value: onnx_ir.Value | None) -> onnx.TypeProto | None:
        return None if value is None else self.rewriter.types.get(value)

    def emit(
        self,
        op_type: str,
        inputs: Sequence[onnx_ir.Value | None],
        output: onnx_ir.Value | None = None,
        *,
        named: str | None = None,
        **attributes: Any,
    ) -> onnx_ir.Value:
        """A node named like the node being rewritten; its (one) output. Given `output` (one of
        the node's), the node emitted yields it in its place (a new value of its name, which its
        readers read instead); else a new value, called `named` if given."""
        if output is not None:
            result = self.takes_place_of(output)
        else:
            result = onnx_ir.Value(
                name=named or self.rewriter.fresh(f"{self.label}_{op_type.lower()}")
            )
        self.out.append(
            onnx_ir.Node(
                "",
                op_type,
                inputs,
                onnx_ir.convenience.convert_attributes(attributes),
                outputs=[result],
                name=self.label,
            )
        )
        return result

    def takes_place_of(self, output: onnx_ir.Value) -> onnx_ir.Value:
        """A new value named like `output` (of the node being rewritten), with its declared and
        inferred types, that its readers read instead."""
        result = onnx_ir.Value(name=output.name, type=output.type, shape=output.shape)
        replace_value(output, result)
        types = self.rewriter.types
        if output in types:
            types[result] = types[output]
        return result

    def const(self, array: np.ndarray) -> onnx_ir.Value:
        tensor = numpy_helper.from_array(np.asarray(array))
        name = self.emit("Constant", [], value=tensor)
        self.rewriter.constants[name] = tensor
        return name

    def ints(self, values: list[int]) -> onnx_ir.Value:
        return self.const(np.array(values, np.int64))

    def unsqueeze(
        self, value: onnx_ir.Value, axes: list[int], output: onnx_ir.Value | None = None
    ) -> onnx_ir.Value:
        if self.rewriter.opset >= 13:
            return self.emit("Unsqueeze", [value, self.ints(axes)], output)
        return self.emit("Unsqueeze", [value], output, axes=axes)

    def slice(
        self, value: onnx_ir.Value, start: onnx_ir.Value, end: onnx_ir.Value, axis: int = 0
    ) -> onnx_ir.Value:
        return self.emit("Slice", [value, start, end, self.ints([axis])])

    def scalar_position(self, position: int) -> onnx_ir.Value | None:
        """Input `position` (a sequence position) as a rank-0 tensor."""
        value = self.input(position)
        if dims_of(self.type_of(value)) == (1,):
            return self.emit("Reshape", [value, self.ints([])])
        return value

    def constant_position(self, position: int) -> int | None:
        array = self.rewriter.constant(self.input(position))
        return None if array is None or array.size != 1 else int(array.reshape(-1)[0])

    def rewrite_subgraphs(self) -> None:
        """Rewrite the sequences of the node's graph attributes, in place."""
        for name, position, graph in node_bodies(self.node):
            attribute = self.node.attributes[name]
            where = (
                f"attribute '{name}'"
                if attribute.type is onnx_ir.AttributeType.GRAPH
                else f"attribute '{name}' #{position}"
            )
            self.subgraph(graph, where)

    def subgraph(
        self, graph: onnx_ir.Graph, where: str, scope: SequenceScope | None = None
    ) -> None:
        what = f"graph '{graph.name}' ({where} of {describe_node(self.node, self.index)})"
        self.rewriter.rewrite_graph(graph, scope or SequenceScope(self.scope), what)

    def stacked(self, form: SequenceForm, like: onnx_ir.Value | None = None) -> Stacked:
        """`form` as one stacked tensor. Its elements (and `like`, a tensor to be inserted)
        must be known to share one static shape (or be one value)."""
        if isinstance(form, Stacked) and like is None:
            return form
        values = list(form.elements) if isinstance(form, Listed) else []
        types = (
            [self.type_of(value) for value in values]
            if isinstance(form, Listed)
            else [form.element]
        )
        if like is not None:
            values.append(like)
            types.append(self.type_of(like))
        shapes = {dims_of(type_) for type_ in types}
        only = next(iter(shapes)) if len(shapes) == 1 else None
        static = only is not None and None not in only
        if not types or not (static or (isinstance(form, Listed) and len(set(values)) == 1)):
            raise self.error(
                "needs its sequence as one stacked tensor, but the elements (and the tensor inserted) "
                "are not known to share one static shape"
            )
        if isinstance(form, Stacked):
            return form
        pieces = [self.unsqueeze(value, [0]) for value in form.elements]
        stacked = pieces[0] if len(pieces) == 1 else self.emit("Concat", pieces, axis=0)
        return Stacked(stacked, types[0])
