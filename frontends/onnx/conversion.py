"""Convert: the onnx_ir graph walk that builds the Niro Module, the import's last step.

It reads what the earlier steps left: the graph in onnx_ir, and its inferred types and folded
nodes (`value_types`). The main graph becomes a Function named after the graph; initializers
(of any graph) become Globals read through GetGlobal where used; each node goes to its
converter in `CONVERTERS`, to a Call of a specialised function (`calls`), or else to an
UnknownOp named `onnx.<OpType>` (`<domain>.<OpType>` for other domains) whose graph
attributes become regions. Tensor data comes from `tensors` and `external_data` without copies.

The walk reads every type it gives an ONNX value through `refinements` (graph typing's answer,
refined where the walk knows more: a node re-typed from its operands' Niro types and constant
data, Scan/Loop/If results from their imported bodies, onnxruntime's contrib ops); the Niro ops
a converter builds type their results by Niro's own rules; and shape arithmetic on constants
the walk made known is folded here (`_fold`).

Every failure is an OnnxImportError naming the node, value or initializer.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, cast

import numpy as np
import onnx
import onnx_ir
from niro.ir import (
    Block,
    Buffer,
    Const,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    ImportedOp,
    ImportedOpError,
    Module,
    Region,
    Return,
    ScalarType,
    TensorType,
    Type,
    Value,
    Yield,
    format_type,
    write_imported_op,
)
from niro.ir.shapes import shape_refines
from onnx import numpy_helper

from .attributes import AttributeConversionError, generic_attribute
from .context import FunctionBuilder, NodeContext, Scope, describe_node, node_label
from .converters import CONVERTERS
from .errors import OnnxImportError
from .external_data import ExternalDataError, ExternalDataReader
from .folding import FOLD_LIMIT, fold_node, may_fold
from .loading import LoadedModel
from .refinements import ResultTypes, body_input_types, body_result_types, input_type
from .symbols import SymbolTable
from .tensors import TensorDataError, pack_tensor_proto, scalar_type_for
from .value_types import ValueTypes

if TYPE_CHECKING:
    from .calls import FunctionCalls

__all__ = ["DEFAULT_DOMAINS", "Converter", "op_name", "serialized_node"]

DEFAULT_DOMAINS = ("", "ai.onnx")


def serialized_node(node: onnx_ir.Node) -> onnx.NodeProto | None:
    """The node as a NodeProto again, or None when onnx_ir cannot write one of its attributes
    back (the check refuses the kind known to do that, UNDEFINED, before; this stays for any
    other, since the callers only lose a fold or a function expansion)."""
    try:
        return onnx_ir.serde.serialize_node(node)
    except Exception:  # noqa: BLE001 - onnx_ir raises TypeError/ValueError wrapped in its own
        return None


def _small_static(type_: TensorType) -> bool:
    """A fully static type of at most FOLD_LIMIT elements (what import-time folding may make)."""
    shape = type_.static_shape
    return shape is not None and math.prod(shape) <= FOLD_LIMIT


def _numpy_kind(element: ScalarType) -> str:
    """The numpy kind of an element type's arrays (`f` for every floating-point type)."""
    if element.is_bool:
        return "b"
    if element.is_signed_integer:
        return "i"
    return "u" if element.is_unsigned_integer else "f"


_ELEMENT_KINDS = {element: _numpy_kind(element) for element in ScalarType}


def _constant_kind(type_: Type) -> str:
    """A known constant's element kind for `folding.may_fold` (`?` if it is no tensor)."""
    return _ELEMENT_KINDS[type_.element_type] if isinstance(type_, TensorType) else "?"


def op_name(node: onnx_ir.Node) -> str:
    domain = "onnx" if node.domain in DEFAULT_DOMAINS else node.domain
    return f"{domain}.{node.op_type}"


class Converter:
    """The Module being built and the tables that outlive a single graph: symbols, the Global
    of each initializer, the inferred types of every graph read so far (`value_types`)."""

    def __init__(self, source: LoadedModel) -> None:
        self.filename = source.display
        self.reader = ExternalDataReader(source.base_dir)
        self.raw_views = source.raw_views
        self.symbols = SymbolTable()
        self.module = Module()
        self.types = ValueTypes()
        self.global_for: dict[onnx_ir.Value, Global] = {}
        self.input_defaults: dict[str, str] = {}
        self.main_graph: onnx_ir.Graph | None = None
        self.calls: FunctionCalls
        """Calls of specialised functions (set by the driver: they need its proto steps)."""

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(message, filename=self.filename)

    def read_tensor(
        self, tensor: onnx_ir.TensorProtocol | None, what: str, raw_view: memoryview | None = None
    ) -> tuple[TensorType, Buffer]:
        """A tensor's Niro type and bytes: inline data as views, external data mapped.

        `raw_view` is the tensor's raw_data found in the model file's bytes, if known."""
        if tensor is None:
            raise self.error(f"{what} has no data")
        try:
            if isinstance(tensor, onnx_ir.ExternalTensor):
                return self._read_external(tensor)
            if isinstance(tensor, onnx_ir.serde.TensorProtoTensor):
                return pack_tensor_proto(tensor.raw, raw_view)
            scalar = scalar_type_for(int(tensor.dtype))
            dims = tuple(int(cast(int, dim)) for dim in tensor.shape.dims)
            data = np.ascontiguousarray(tensor.numpy())
            return TensorType(scalar, dims), data.data.cast("B")
        except (TensorDataError, ExternalDataError) as error:
            raise self.error(f"{what}: {error}") from None

    def _read_external(self, tensor: onnx_ir.ExternalTensor) -> tuple[TensorType, Buffer]:
        scalar = scalar_type_for(int(tensor.dtype))
        given = tuple(tensor.shape.dims)
        if any(not isinstance(dim, int) or dim < 0 for dim in given):
            raise TensorDataError(f"has invalid dims {list(given)}")
        dims = cast(tuple[int, ...], given)
        tensor_type = TensorType(scalar, dims)
        count = 1
        for dim in dims:
            count *= dim
        data = self.reader.view(os.fspath(tensor.location), tensor.offset, tensor.length, scalar.buffer_size(count))
        return tensor_type, data

    def _register_initializers(self, graph: onnx_ir.Graph, *, main: bool = False) -> None:
        for name, value in graph.initializers.items():
            raw_view = self.raw_views.get(name) if main else None
            tensor_type, data = self.read_tensor(value.const_value, f"initializer '{name}'", raw_view)
            symbol = self.symbols.claim(name, fallback="weight")
            global_ = Global(symbol, tensor_type, data)
            self.module.globals.append(global_)
            if value.is_graph_input():
                self.input_defaults[name] = symbol
            else:
                self.global_for[value] = global_

    def _typed_inputs(
        self,
        graph: onnx_ir.Graph,
        builder: FunctionBuilder,
        scope: Scope,
        what: str,
        known: tuple[Type | None, ...] = (),
    ) -> tuple[Value, ...]:
        """The graph's inputs as new values; `known[i]` is what the walk knows of input i
        (`refinements.body_input_types`)."""
        arguments = []
        types = self.types.of_graph(graph)
        names = self.types.names_of(graph)
        for position, onnx_value in enumerate(graph.inputs):
            type_ = input_type(
                types,
                onnx_value,
                f"input of {what}",
                self.filename,
                names,
                known[position] if position < len(known) else None,
            )
            value = builder.new_value(type_)
            scope.bind(onnx_value, value)
            arguments.append(value)
        return tuple(arguments)

    def import_function(
        self,
        graph: onnx_ir.Graph,
        opsets: dict[str, int],
        symbol: str,
        what: str,
        input_names: tuple[str, ...] | None = None,
        output_names: tuple[str, ...] | None = None,
    ) -> Function:
        builder = FunctionBuilder()
        entry = Block()
        scope = Scope(entry)
        entry.arguments = self._typed_inputs(graph, builder, scope, what)
        self._register_initializers(graph, main=graph is self.main_graph)
        self._convert_nodes(graph, scope, builder, opsets)
        outputs = tuple(self._resolve_output(scope, builder, value, what) for value in graph.outputs)
        entry.operations.append(Return(outputs))
        return Function(
            name=symbol,
            type=FunctionType(
                tuple(argument.type for argument in entry.arguments), tuple(value.type for value in outputs)
            ),
            body=Region([entry]),
            input_names=input_names or tuple(value.name or None for value in graph.inputs),
            output_names=output_names or tuple(value.name or None for value in graph.outputs),
        )

    def build_region(self, ctx: NodeContext, attribute: str, position: int) -> tuple[Region, tuple[Value, ...]]:
        """The subgraph in `ctx.node`'s graph attribute as a one-block Region ending in Yield.

        The block's arguments are the subgraph's inputs (a Loop or Scan body's); values the
        subgraph uses from outside resolve through the scope chain and stay captures.
        """
        found = ctx.node.attributes[attribute]
        graph = found.value if found.type is onnx_ir.AttributeType.GRAPH else found.value[position]
        block = Block()
        scope = Scope(block, parent=ctx.scope)
        what = f"graph '{graph.name}' (attribute '{attribute}' of {describe_node(ctx.node, ctx.index)})"
        known = body_input_types(ctx, attribute)
        block.arguments = self._typed_inputs(graph, ctx.builder, scope, what, known)
        self._register_initializers(graph)
        self._convert_nodes(graph, scope, ctx.builder, ctx.opsets)
        yielded = tuple(self._resolve_output(scope, ctx.builder, value, what) for value in graph.outputs)
        block.operations.append(Yield(yielded, loc=ctx.loc))
        return Region([block]), yielded

    def _lookup(self, scope: Scope, builder: FunctionBuilder, onnx_value: onnx_ir.Value, loc: str | None) -> Value | None:
        found = scope.lookup(onnx_value)
        if found is not None:
            return found
        global_ = self.global_for.get(onnx_value)
        if global_ is None:
            return None
        value = builder.new_value(global_.type)
        builder.note_constant(value, global_.initializer)
        scope.block.operations.append(GetGlobal(value, global_.name, loc=loc))
        scope.bind(onnx_value, value)
        return value

    def _resolve_output(self, scope: Scope, builder: FunctionBuilder, onnx_value: onnx_ir.Value, what: str) -> Value:
        found = self._lookup(scope, builder, onnx_value, None)
        if found is None:
            raise self.error(f"{what}: output '{onnx_value.name}' is not produced by any node, input or initializer")
        self._check_declared_output(onnx_value, found, what)
        return found

    def _check_declared_output(self, onnx_value: onnx_ir.Value, found: Value, what: str) -> None:
        """Refuse a graph output whose declared type contradicts the type its producer computes
        (another element type or rank, or another size of a static dim): ONNX's checker does not
        compare them, and non-strict shape inference keeps the declaration, so the model's
        interface would lie about what the function returns."""
        computed = found.type
        if not isinstance(computed, TensorType) or onnx_value.dtype is None:
            return
        try:
            element = scalar_type_for(int(onnx_value.dtype))
        except TensorDataError as error:
            raise self.error(f"{what}: output '{onnx_value.name}': {error}") from None
        declared_shape = None
        if onnx_value.shape is not None:
            declared_shape = tuple(dim if isinstance(dim, int) else None for dim in onnx_value.shape.dims)
        declared = TensorType(element, declared_shape)
        agrees = element is computed.element_type
        if agrees and declared_shape is not None and computed.shape is not None:
            agrees = len(declared_shape) == len(computed.shape) and all(
                left is None or right is None or left == right
                for left, right in zip(declared_shape, computed.shape, strict=True)
            )
        if not agrees:
            raise self.error(
                f"{what}: output '{onnx_value.name}' is declared {format_type(declared)} "
                f"but its producer computes {format_type(computed)}"
            )

    def _convert_nodes(
        self, graph: onnx_ir.Graph, scope: Scope, builder: FunctionBuilder, opsets: dict[str, int]
    ) -> None:
        types = self.types.of_graph(graph)
        folded_nodes = self.types.folded
        for index, node in enumerate(graph):
            inputs: list[Value | None] = []
            loc = node_label(node, index)
            for onnx_value in node.inputs:
                if onnx_value is None or not onnx_value.name:
                    inputs.append(None)
                    continue
                value = self._lookup(scope, builder, onnx_value, loc)
                if value is None:
                    raise self.error(
                        f"{describe_node(node, index)}: input '{onnx_value.name}' is not defined before the node"
                    )
                inputs.append(value)
            folded = folded_nodes.get(node)
            if folded is not None:
                self._emit_folded(node, index, folded, scope, builder)
                continue
            ctx = NodeContext(
                node=node,
                index=index,
                inputs=tuple(inputs),
                builder=builder,
                scope=scope,
                types=types,
                opsets=opsets,
                filename=self.filename,
                read_tensor=self.read_tensor,
                build_region=self.build_region,
                trusted_names=self.types.names_of(graph),
            )
            self._convert_node(ctx)

    def _emit_folded(
        self, node: onnx_ir.Node, index: int, tensors: tuple[onnx.TensorProto, ...], scope: Scope, builder: FunctionBuilder
    ) -> None:
        """A node whose outputs shape inference's folding computed (see `folding`): one Const
        per output, located at the node."""
        loc = node_label(node, index)
        for output, tensor in zip(node.outputs, tensors, strict=True):
            tensor_type, data = pack_tensor_proto(tensor)
            value = builder.new_value(tensor_type)
            builder.note_constant(value, data)
            scope.block.operations.append(Const(value, data, loc=loc))
            scope.bind(output, value)

    def _convert_node(self, ctx: NodeContext) -> None:
        node = ctx.node
        if self.calls.call_model_function(ctx):
            return
        result_types = ResultTypes(ctx)
        if node.domain in DEFAULT_DOMAINS:
            if self._fold(ctx, result_types):
                return
            converter = CONVERTERS.get(node.op_type)
            if converter is not None and converter(ctx):
                return
        if self.calls.call_contrib_function(ctx):
            return
        if self.calls.expand_schema_function(ctx):
            return
        self._convert_generic(ctx, result_types)

    def _fold(self, ctx: NodeContext, result_types: ResultTypes) -> bool:
        """Fold shape arithmetic where graph-level folding could not see it (in subgraphs, or
        on constants that typing at import made known): see `folding.fold_node`."""
        node = ctx.node
        literals = ctx.builder.literals
        operands = [
            None if value is None else _constant_kind(value.type) if value.id in literals else ""
            for value in ctx.inputs
        ]
        if not may_fold(node.op_type, operands):
            return False
        if any(not output.name for output in node.outputs):
            return False
        arrays: list[np.ndarray | None] = []
        dims: list[list[int] | None] = []
        for value in ctx.inputs:
            tensor_type = value.type if value is not None and isinstance(value.type, TensorType) else None
            static = None if tensor_type is None else tensor_type.static_shape
            dims.append(None if static is None else list(static))
            proto = None if value is None else ctx.builder.constant_data(value)
            arrays.append(None if proto is None else numpy_helper.to_array(proto))
        if node.op_type not in ("Shape", "Size") and any(
            array is None for array, value in zip(arrays, ctx.inputs, strict=True) if value is not None
        ):
            return False
        # NOTE: the results' types must be known small before anything is evaluated: a
        # Range or ConstantOfShape on constants can ask for any amount of memory
        expected_types = [result_types.of(position) for position in range(len(node.outputs))]
        if not all(_small_static(type_) for type_ in expected_types):
            return False
        node_proto = serialized_node(node)
        if node_proto is None:
            return False  # an attribute onnx_ir cannot write back: the generic path says which
        results = fold_node(node_proto, arrays, dims, ctx.opset())
        if results is None or len(results) != len(node.outputs):
            return False
        tensors = []
        for array, expected in zip(results, expected_types, strict=True):
            tensor = numpy_helper.from_array(array)
            tensor_type, _ = pack_tensor_proto(tensor)
            if tensor_type.element_type is not expected.element_type or not shape_refines(
                tensor_type.shape, expected.shape
            ):
                return False
            tensors.append(tensor)
        self._emit_folded(node, ctx.index, tuple(tensors), ctx.scope, ctx.builder)
        return True

    def _convert_generic(self, ctx: NodeContext, result_types: ResultTypes) -> None:
        """An UnknownOp keeping the node's operands, attributes, subgraphs (as regions) and
        typed results, by the contract of `niro.ir.ImportedOp` (absent inputs and outputs,
        region names, the opset of the node's domain)."""
        node = ctx.node
        attributes: dict = {}
        regions: dict[str, Region] = {}
        for name, attribute in node.attributes.items():
            if attribute.type is onnx_ir.AttributeType.GRAPH and not attribute.is_ref():
                regions[name] = self.build_region(ctx, name, 0)[0]
            elif attribute.type is onnx_ir.AttributeType.GRAPHS and not attribute.is_ref():
                for position in range(len(attribute.value)):
                    regions[f"{name}#{position}"] = self.build_region(ctx, name, position)[0]
            else:
                try:
                    attributes[name] = generic_attribute(name, attribute, ctx.read_node_tensor)
                except AttributeConversionError as error:
                    raise ctx.error(str(error)) from None
        from_body = body_result_types(ctx, list(regions.values()))
        outputs: list[Value | None] = []
        for position, output in enumerate(node.outputs):
            if not output.name:
                outputs.append(None)
                continue
            result = ctx.new_value(result_types.of(position, from_body))
            outputs.append(result)
            ctx.bind(position, result)
        imported = ImportedOp(
            name=op_name(node),
            inputs=tuple(ctx.inputs),
            outputs=tuple(outputs),
            attributes=attributes,
            regions=regions,
            # NOTE: the opset in effect for the node's domain travels with the op, so an
            # operator library can pick the semantics of that version (e.g. Softmax before and
            # after 13).
            opset=ctx.opset(node.domain),
            generic_reason=ctx.generic_reason,
            loc=ctx.loc,
        )
        try:
            ctx.emit(write_imported_op(imported))
        except ImportedOpError as error:
            raise ctx.error(str(error)) from None
