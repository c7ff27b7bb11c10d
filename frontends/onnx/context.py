"""The state a node converter sees: value ids, scopes, the node and its inputs.

A `FunctionBuilder` hands out ValueIds (one counter per Niro Function, nested regions included,
so ids are unique function-wide). A `Scope` maps ONNX values (onnx_ir `Value` objects, which
onnx_ir already resolves across subgraph boundaries) to Niro values and owns the Block new ops go
into; a subgraph's scope chains to its parent's, so captured outer values resolve and inner
values stay invisible outside. A `NodeContext` is what a converter in `converters.py` gets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import onnx
import onnx_ir
from niro.ir import Block, Buffer, Const, Op, Region, TensorType, Type, Value, ValueId

from .errors import OnnxImportError
from .node_inference import constant_proto

__all__ = ["FunctionBuilder", "NodeContext", "Scope", "describe_node", "node_label", "op_type_label"]


class FunctionBuilder:
    """Hands out the ValueIds of one Niro Function, and remembers which values are constants
    (a Const, or a GetGlobal of an initializer) so a node can be re-typed from their data."""

    def __init__(self) -> None:
        self._next = 0
        self.literals: dict[ValueId, tuple[TensorType, object]] = {}

    def new_value(self, type_: Type) -> Value:
        value = Value(ValueId(self._next), type_)
        self._next += 1
        return value

    def note_constant(self, value: Value, literal: object) -> None:
        if isinstance(value.type, TensorType):
            self.literals[value.id] = (value.type, literal)

    def constant_data(self, value: Value) -> onnx.TensorProto | None:
        found = self.literals.get(value.id)
        return None if found is None else constant_proto(*found)


@dataclass(eq=False)
class Scope:
    """ONNX values visible in one block, chained to the enclosing graph's scope."""

    block: Block
    parent: Scope | None = None
    values: dict[onnx_ir.Value, Value] = field(default_factory=dict)

    def lookup(self, onnx_value: onnx_ir.Value) -> Value | None:
        scope: Scope | None = self
        while scope is not None:
            found = scope.values.get(onnx_value)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def bind(self, onnx_value: onnx_ir.Value, value: Value) -> None:
        self.values[onnx_value] = value


def op_type_label(node: onnx_ir.Node | onnx.NodeProto) -> str:
    """`Conv` for the default domain, `com.microsoft.FusedMatMul` otherwise."""
    if node.domain in ("", "ai.onnx"):
        return node.op_type
    return f"{node.domain}.{node.op_type}"


def node_label(node: onnx_ir.Node | onnx.NodeProto, index: int) -> str:
    """The node's name, or `OpType_index` (its position in its graph) when it has none."""
    return node.name or f"{node.op_type}_{index}"


def describe_node(node: onnx_ir.Node | onnx.NodeProto, index: int) -> str:
    return f"node '{node_label(node, index)}' ({op_type_label(node)})"


@dataclass(eq=False)
class NodeContext:
    """One ONNX node being converted: its resolved inputs (None where absent) and where to emit."""

    node: onnx_ir.Node
    index: int
    inputs: tuple[Value | None, ...]
    builder: FunctionBuilder
    scope: Scope
    types: Mapping[onnx_ir.Value, onnx.TypeProto]
    """Inferred types of the values of the node's graph (see `value_types`); the conversion
    reads them through `refinements`."""
    opsets: dict[str, int]
    filename: str
    read_tensor: Callable[[onnx_ir.TensorProtocol, str], tuple[TensorType, Buffer]]
    """(tensor, what) -> its Niro type and packed bytes; `what` names it in errors."""
    build_region: Callable[[NodeContext, str, int], tuple[Region, tuple[Value, ...]]]
    """(ctx, graph attribute name, position) -> the subgraph as a Region and its yielded values."""
    trusted_names: frozenset[str] = frozenset()
    """The dim names its graph's Niro types keep (`inference.GraphTypes.dim_names`)."""
    generic_reason: str | None = field(default=None, init=False)
    """Set by a converter that declines the node: why it stays an UnknownOp (see
    `niro.ir.GENERIC_REASON_ATTRIBUTE`)."""

    @property
    def loc(self) -> str:
        return node_label(self.node, self.index)

    def operand_origin(self, position: int) -> str:
        """Where input `position` comes from, for messages: `output of node 'n' (STFT)`, a
        graph input or an initializer (what to look at when its type is unknown)."""
        value = self.node.inputs[position]
        if value is None:
            return "absent"
        producer = value.producer()
        if producer is not None:
            graph = producer.graph
            # (an unnamed node is labelled by its position: found by a scan, on this rare path)
            index = 0 if graph is None else next(i for i, node in enumerate(graph) if node is producer)
            return f"output of {describe_node(producer, index)}"
        return f"initializer '{value.name}'" if value.is_initializer() else f"graph input '{value.name}'"

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"{describe_node(self.node, self.index)}: {message}", filename=self.filename)

    def emit(self, op: Op) -> None:
        if isinstance(op, Const):
            self.builder.note_constant(op.result, op.literal)
        self.scope.block.operations.append(op)

    def new_value(self, type_: Type) -> Value:
        return self.builder.new_value(type_)

    def bind(self, output_index: int, value: Value) -> None:
        """Make the node's output `output_index` (if it has one) denote `value`."""
        outputs = self.node.outputs
        if output_index < len(outputs) and outputs[output_index].name:
            self.scope.bind(outputs[output_index], value)

    def opset(self, domain: str = "") -> int:
        if domain in ("", "ai.onnx"):
            return self.opsets.get("", self.opsets.get("ai.onnx", 1))
        return self.opsets.get(domain, 1)

    def read_node_tensor(self, tensor: onnx_ir.TensorProtocol, what: str) -> tuple[TensorType, Buffer]:
        """`read_tensor` for a tensor of this node (`what`: `attribute 'value'`): errors name
        the node."""
        return self.read_tensor(tensor, f"{describe_node(self.node, self.index)}: {what}")

    def attribute(self, name: str) -> onnx_ir.Attr | None:
        return self.node.attributes.get(name)

    def int_attribute(self, name: str, default: int) -> int:
        found = self.attribute(name)
        if found is None:
            return default
        if found.type is not onnx_ir.AttributeType.INT:
            raise self.error(f"attribute '{name}' must be an int, got {found.type.name}")
        return int(found.value)

    def float_attribute(self, name: str, default: float) -> float:
        found = self.attribute(name)
        if found is None:
            return default
        if found.type is not onnx_ir.AttributeType.FLOAT:
            raise self.error(f"attribute '{name}' must be a float, got {found.type.name}")
        return float(found.value)

    def ints_attribute(self, name: str) -> tuple[int, ...] | None:
        found = self.attribute(name)
        if found is None:
            return None
        if found.type is not onnx_ir.AttributeType.INTS:
            raise self.error(f"attribute '{name}' must be a list of ints, got {found.type.name}")
        return tuple(int(item) for item in found.value)
