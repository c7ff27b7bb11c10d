"""The state a node converter sees: value ids, scopes, the node, its inputs and result types.

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
from niro.ir import Block, Buffer, Const, Op, Region, ScalarType, TensorType, Type, Value, ValueId
from niro.ir.shapes import shape_refines

from .contrib_types import CONTRIB_DOMAIN, ContribTypeError, contrib_op_types, contrib_result_types
from .errors import OnnxImportError
from .node_inference import constant_proto, infer_node
from .onnx_types import UnsupportedTypeError, niro_type_from_proto, schema_element_type

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


def resolve_type(
    type_proto,
    onnx_value: onnx_ir.Value,
    what: str,
    filename: str,
    fallback_element: Callable[[], ScalarType | None] | None = None,
    unknown_because: str = "shape inference could not type it",
    trusted_names: frozenset[str] = frozenset(),
) -> TensorType:
    """The Niro type of a value from its inferred `type_proto` (or its declared type).

    A value without a known shape becomes an unranked tensor (its element type from the
    declaration, else from `fallback_element`, the op schema's answer); one without even a
    known element type, or of a type Niro lacks (sequence, map, string, ...), is an
    OnnxImportError naming it.
    """
    prefix = f"value '{onnx_value.name}' ({what})"
    try:
        found = niro_type_from_proto(type_proto, trusted_names)
    except UnsupportedTypeError as error:
        raise OnnxImportError(f"{prefix}: {error}", filename=filename) from None
    if found is None and onnx_value.type is not None:
        try:
            declared = onnx_ir.serde.serialize_type(onnx_value.type)
            found = niro_type_from_proto(declared)
        except UnsupportedTypeError as error:
            raise OnnxImportError(f"{prefix}: {error}", filename=filename) from None
        except Exception:  # an onnx_ir type it cannot serialise: treat as unknown
            found = None
        if found is not None:
            found = TensorType(found.element_type, None)
    if found is None and fallback_element is not None:
        element = fallback_element()
        if element is not None:
            found = TensorType(element, None)
    if found is None:
        raise OnnxImportError(
            f"{prefix}: element type is unknown ({unknown_because})",
            filename=filename,
        )
    return found


@dataclass(eq=False)
class NodeContext:
    """One ONNX node being converted: its resolved inputs (None where absent) and where to emit."""

    node: onnx_ir.Node
    index: int
    inputs: tuple[Value | None, ...]
    builder: FunctionBuilder
    scope: Scope
    types: Mapping[onnx_ir.Value, onnx.TypeProto]
    """Inferred types of the values of the node's graph (see `value_types`)."""
    opsets: dict[str, int]
    filename: str
    read_tensor: Callable[[onnx_ir.TensorProtocol, str], tuple[TensorType, Buffer]]
    """(tensor, what) -> its Niro type and packed bytes; `what` names it in errors."""
    build_region: Callable[[NodeContext, str, int], tuple[Region, tuple[Value, ...]]]
    trusted_names: frozenset[str] = frozenset()
    """The dim names its graph's Niro types keep (`inference.GraphTypes.dim_names`)."""
    """(ctx, graph attribute name, position) -> the subgraph as a Region and its yielded values."""
    _retyped: dict[int, TensorType] | None = field(default=None, init=False)
    _contrib: tuple[dict[int, TensorType] | None] | None = field(default=None, init=False)
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

    def result_type(self, output_index: int) -> TensorType:
        """The inferred type of output `output_index`.

        When graph inference left it of unknown rank, or with dynamic dims while an operand is a
        known constant, the node is inferred again on its own from its operands' Niro types and
        constant data (`node_inference`), and the result kept if it is more precise."""
        output = self.node.outputs[output_index]
        what = f"output of node '{node_label(self.node, self.index)}'"
        because = "shape inference could not type it"
        if self.node.domain not in ("", "ai.onnx") and not onnx.defs.has(self.node.op_type, self.node.domain):
            # NOTE: ONNX shape inference knows no operator of another domain (onnxruntime's
            # com.microsoft contrib ops, a user's custom ops): the quantized contrib ops niroc
            # types itself (`contrib_types`) where the model declares nothing; for any other,
            # say which op it is and what would type it, rather than leave the user guessing
            # why inference gave up.
            declared = self.inferred_type(output_index)
            if declared is None or declared.shape is None:
                contrib = self._contrib_types()
                if contrib is not None and output_index in contrib:
                    return contrib[output_index]
            what = f"output of {describe_node(self.node, self.index)}"
            because = (
                f"ONNX shape inference has no schema for domain '{self.node.domain}' "
                "and the model declares no type for it in value_info"
            )  # (a domain ONNX knows, e.g. ai.onnx.ml, keeps the generic reason)
            if self.node.domain == CONTRIB_DOMAIN:
                because += f"; niroc types only these {CONTRIB_DOMAIN} ops: {', '.join(contrib_op_types())}"
        found = resolve_type(
            self.types.get(output),
            output,
            what,
            self.filename,
            lambda: schema_element_type(self.node, output_index, self.inputs, self.opset(self.node.domain)),
            because,
            self.trusted_names,
        )
        if found.shape is None or (
            None in found.shape and (self._has_constant_operand() or self._operand_typed_better())
        ):
            if self._retyped is None:
                self._retyped = infer_node(
                    self.node, self.inputs, self.builder.constant_data, self.opset(self.node.domain)
                )
            retyped = self._retyped.get(output_index)
            if (
                retyped is not None
                and retyped.element_type is found.element_type
                and retyped.shape is not None
                and shape_refines(retyped.shape, found.shape)
            ):
                return retyped
        return found

    def _contrib_types(self) -> dict[int, TensorType] | None:
        """`contrib_result_types` of the node (None: an op niroc does not type), once."""
        if self._contrib is None:
            try:
                node = self.node
                attributes = {name: attribute.value for name, attribute in node.attributes.items()}
                types = contrib_result_types(node.domain, node.op_type, self.inputs, attributes)
                self._contrib = (types,)
            except ContribTypeError as error:
                raise self.error(f"cannot type its outputs: {error}") from None
        return self._contrib[0]

    def _has_constant_operand(self) -> bool:
        return any(value is not None and value.id in self.builder.literals for value in self.inputs)

    def _operand_typed_better(self) -> bool:
        """Whether the importer typed an operand more precisely than graph inference did (a
        Loop's scan output typed from its imported body, see `region_types`): inference then
        typed this node from less than the importer knows."""
        for onnx_value, value in zip(self.node.inputs, self.inputs, strict=False):
            if value is None or onnx_value is None or not isinstance(value.type, TensorType):
                continue
            inferred = self.types.get(onnx_value)  # None for a value captured from outside the graph
            known = value.type.shape
            if inferred is None and known is not None and onnx_value.producer() is not None:
                return True  # an output inference could not type (a contrib op's): the importer did
            if inferred is None or inferred.WhichOneof("value") != "tensor_type":
                continue
            tensor = inferred.tensor_type
            if known is not None and not tensor.HasField("shape"):
                return True
            if known is not None and any(
                dim is not None and not onnx_dim.HasField("dim_value")
                for dim, onnx_dim in zip(known, tensor.shape.dim, strict=False)
            ):
                return True
        return False

    def inferred_type(self, output_index: int) -> TensorType | None:
        """The inferred type of an output, or None when inference has none Niro can hold."""
        output = self.node.outputs[output_index]
        try:
            return niro_type_from_proto(self.types.get(output))
        except UnsupportedTypeError:
            return None

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
