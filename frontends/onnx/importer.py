"""ONNX model -> Niro Module: the driver of the import steps and the graph walk that converts.

The steps: load (`loading`: the ModelProto and its weights' bytes, then onnx_ir's model), check
(`validation`), rewrite (`sequences`: sequence values into tensor ops), type (`inference`: ONNX
shape inference, folding and symbolic dims), convert (here). The main graph becomes a Function named after the graph; initializers (of any graph) become
Globals read through GetGlobal where used; each node goes to its converter in `CONVERTERS`, to a
Call of a specialised model-local function, or else to an UnknownOp named `onnx.<OpType>`
(`<domain>.<OpType>` for other domains) whose graph attributes become regions. Types come from
`inference` (ONNX shape inference on a weightless copy); tensor data from `tensors` and
`external_data` without copies.

This module must not let a raw exception escape for bad input: every failure is an
OnnxImportError naming the node, value or initializer.
"""

from __future__ import annotations

import gc
import hashlib
import math
import os
from collections.abc import Container, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import onnx
import onnx_ir
from niro.ir import (
    Block,
    Buffer,
    Call,
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
from .context import FunctionBuilder, NodeContext, Scope, describe_node, node_label, resolve_type
from .contrib_functions import ContribFunctionError, contrib_function
from .converters import CONVERTERS
from .errors import OnnxImportError, first_line
from .external_data import ExternalDataError, ExternalDataReader
from .folding import FOLD_LIMIT, fold_node, may_fold
from .functions import FunctionKey, specialization_key, specialize
from .half_precision import fold_half_convs, plan_half_precision
from .inference import GraphTypes, InferenceFailure, infer_types
from .input_shapes import InputShapes, declared_types_rewritten
from .loading import LoadedModel, deserialize_inputs, deserialize_model, load_model
from .onnx_types import type_proto_from_niro
from .region_types import (
    if_result_types,
    loop_body_input_types,
    loop_result_types,
    refine_type,
    scan_result_types,
)
from .schema_functions import (
    ExpandPredicate,
    has_schema_function,
    schema_function,
    with_schema_defaults,
)
from .sequences import SequenceRewriteError, eliminate_sequences, has_sequences
from .symbols import SymbolTable
from .tensors import TensorDataError, pack_tensor_proto, scalar_type_for
from .validation import StructureError, check_graph, check_ir_version, check_opsets, check_text
from .value_types import ValueTypes, bind_types

__all__ = ["ImportedModel", "import_model", "import_model_with_info"]

_DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass
class ImportedModel:
    """An imported Module and what ties it back to the ONNX model.

    `onnx_names` maps every module symbol to the ONNX name it came from (the graph's name for
    the main Function, an initializer's name for a Global, a function's name for each of its
    specialisations). `input_defaults` maps each graph input that is also an initializer (old IR
    versions) to the Global holding its default value; the input itself stays a Function input.
    """

    module: Module
    main: str
    onnx_names: dict[str, str] = field(default_factory=dict)
    input_defaults: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """What the user should know about how the model was read (e.g. a negative declared dim
    read as unknown): not errors; the CLI prints them as notes unless --quiet."""


def _node_proto(node: onnx_ir.Node) -> onnx.NodeProto | None:
    """The node as a NodeProto again, or None when onnx_ir cannot write one of its attributes
    back (an attribute of type UNDEFINED in a malformed model)."""
    try:
        return onnx_ir.serde.serialize_node(node)
    except Exception:  # noqa: BLE001 - onnx_ir raises TypeError/ValueError wrapped in its own
        return None


def _small_static(type_: TensorType) -> bool:
    """A fully static type of at most FOLD_LIMIT elements (what import-time folding may make)."""
    return type_.shape is not None and None not in type_.shape and math.prod(type_.shape) <= FOLD_LIMIT


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


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {("" if entry.domain == "ai.onnx" else entry.domain): entry.version for entry in model.opset_import}


def _op_name(node: onnx_ir.Node) -> str:
    domain = "onnx" if node.domain in _DEFAULT_DOMAINS else node.domain
    return f"{domain}.{node.op_type}"


def _yielded(region: Region) -> tuple[Value, ...]:
    """The values a one-block region's Yield gives (none if it ends otherwise)."""
    terminator = region.blocks[0].operations[-1] if region.blocks[0].operations else None
    return terminator.operands if isinstance(terminator, Yield) else ()


class _Importer:
    """One import: the module being built and the tables that outlive a single graph."""

    def __init__(
        self,
        source: LoadedModel,
        expand_functions: ExpandPredicate | None = None,
        input_shapes: InputShapes | None = None,
    ) -> None:
        model = self.model = source.model
        self.input_shapes = input_shapes
        self.expand_functions = expand_functions
        self.filename = source.display
        self.reader = ExternalDataReader(source.base_dir)
        self.raw_views = source.raw_views
        self.symbols = SymbolTable()
        self.module = Module()
        self.global_for: dict[onnx_ir.Value, Global] = {}
        self.input_defaults: dict[str, str] = {}
        self.function_protos: dict[FunctionKey, onnx.FunctionProto] = {
            (function.domain, function.name, function.overload): function for function in model.functions
        }
        self.specializations: dict[tuple, Function] = {}
        self.in_progress: list[FunctionKey] = []
        self.main_graph: onnx_ir.Graph | None = None
        self.types = ValueTypes()

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(message, filename=self.filename)

    # -- driver --------------------------------------------------------------------------------

    def _check(self, model: onnx.ModelProto, what: str, raw_elsewhere: Container[str] = frozenset()) -> None:
        try:
            check_ir_version(model.ir_version)
            check_opsets(model.opset_import, "opset_import")
            for function in model.functions:
                check_text(function.name, "function name")
                check_text(function.domain, f"function '{function.name}': domain")
                check_opsets(function.opset_import, f"function '{function.name}': opset_import")
            check_graph(model.graph, what, _opsets(model), self.function_protos, raw_elsewhere=raw_elsewhere)
        except StructureError as error:
            raise self.error(str(error)) from None

    def run(self) -> ImportedModel:
        if not self.model.HasField("graph"):
            raise self.error("not an ONNX model: it has no graph")
        with declared_types_rewritten(self.model, self.filename, self.input_shapes) as notes:
            imported = self._run()
        imported.notes = tuple(notes)
        return imported

    def _run(self) -> ImportedModel:
        """The steps in order, each in one direction: the proto is checked, rewritten and typed
        (every rewrite needs ONNX shape inference, which reads protos), then read into onnx_ir
        once and converted."""
        self._check(self.model, f"graph '{self.model.graph.name}'", self.raw_views)
        self._check_input_types(self.model)
        if has_sequences(self.model):
            self.model = self._without_sequences(self.model, self.raw_views, self.error)
        types = self._infer(self.model)
        folded = fold_half_convs(self.model, self._half_array)
        if folded is not None:
            self.model = folded
            types = self._infer(self.model)
        planned = plan_half_precision(self.model, types)
        if planned is not None:
            self.model = planned
            types = self._infer(self.model)
        ir_model = deserialize_model(self.model, self.filename)
        graph = self.main_graph = ir_model.graph
        bind_types(graph, types, self.types)
        main = self.symbols.claim(graph.name or "main", fallback="main")
        opsets = dict(ir_model.opset_imports)
        function = self._import_function(graph, opsets, main, f"graph '{graph.name}'")
        self.module.functions.insert(0, function)
        return ImportedModel(self.module, main, dict(self.symbols.onnx_names), self.input_defaults)

    def _check_input_types(self, model: onnx.ModelProto) -> None:
        """Refuse a graph input of a type Niro cannot hold before shape inference sees it (ONNX's
        C++ code is not robust to every odd input type)."""
        graph = model.graph
        for declared, value in zip(graph.input, deserialize_inputs(model, self.filename), strict=True):
            resolve_type(declared.type, value, f"input of graph '{graph.name}'", self.filename)

    @staticmethod
    def _without_sequences(model: onnx.ModelProto, split_raw, error) -> onnx.ModelProto:
        """A copy of `model` whose sequence values are rewritten into tensor ops (see
        `sequences`); `error(message)` makes the OnnxImportError for what cannot be."""
        try:
            return eliminate_sequences(model, infer_types(model, split_raw), split_raw)
        except InferenceFailure as failure:
            raise error(f"shape inference failed: {first_line(failure)}") from failure
        except SequenceRewriteError as refusal:
            raise error(str(refusal)) from None

    def _infer(self, model: onnx.ModelProto) -> GraphTypes:
        try:
            return infer_types(model, self.raw_views)
        except InferenceFailure as error:
            raise self.error(f"shape inference failed: {first_line(error)}") from error

    # -- tensors and globals -------------------------------------------------------------------

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
            dims = tuple(int(dim) for dim in tensor.shape.dims)
            data = np.ascontiguousarray(tensor.numpy())
            return TensorType(scalar, dims), memoryview(data).cast("B")
        except (TensorDataError, ExternalDataError) as error:
            raise self.error(f"{what}: {error}") from None

    def _half_array(self, name: str) -> np.ndarray | None:
        """Main-graph initializer `name` as a float16/bfloat16 array, None for other types."""
        proto = next((tensor for tensor in self.model.graph.initializer if tensor.name == name), None)
        if proto is None:
            return None
        tensor_type, data = self.read_tensor(
            onnx_ir.serde.deserialize_tensor(proto), f"initializer '{name}'", self.raw_views.get(name)
        )
        dtype = {ScalarType.F16: np.float16, ScalarType.BF16: ml_dtypes.bfloat16}.get(
            tensor_type.element_type
        )
        if dtype is None:
            return None
        return np.frombuffer(data, dtype).reshape(tensor_type.shape)

    def _read_external(self, tensor: onnx_ir.ExternalTensor) -> tuple[TensorType, Buffer]:
        scalar = scalar_type_for(int(tensor.dtype))
        dims = tuple(tensor.shape.dims)
        if any(not isinstance(dim, int) or dim < 0 for dim in dims):
            raise TensorDataError(f"has invalid dims {list(dims)}")
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

    # -- graphs --------------------------------------------------------------------------------

    def _typed_inputs(
        self,
        graph: onnx_ir.Graph,
        builder: FunctionBuilder,
        scope: Scope,
        what: str,
        known: tuple[Type | None, ...] = (),
    ) -> tuple[Value, ...]:
        """The graph's inputs as new values; `known[i]` types input i where inference could not
        (see `region_types`)."""
        arguments = []
        types = self.types.of_graph(graph)
        for position, onnx_value in enumerate(graph.inputs):
            type_ = resolve_type(types.get(onnx_value), onnx_value, f"input of {what}", self.filename)
            if position < len(known):
                type_ = refine_type(type_, known[position])
            value = builder.new_value(type_)
            scope.bind(onnx_value, value)
            arguments.append(value)
        return tuple(arguments)

    def _import_function(
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
        known = loop_body_input_types(ctx.node, attribute, ctx.inputs)
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
            inputs = []
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
        if self.function_protos:
            key = (node.domain, node.op_type, node.overload)
            if key in self.function_protos:
                self._call_function(ctx, key, self.function_protos[key], self._call_attributes(ctx))
                return
        if node.domain in _DEFAULT_DOMAINS:
            if self._fold(ctx):
                return
            converter = CONVERTERS.get(node.op_type)
            if converter is not None and converter(ctx):
                return
        if self._call_contrib_function(ctx):
            return
        if self.expand_functions is not None and self._expand_schema_function(ctx):
            return
        self._convert_generic(ctx)

    def _fold(self, ctx: NodeContext) -> bool:
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
            static = tensor_type is not None and tensor_type.shape is not None and None not in tensor_type.shape
            dims.append(list(tensor_type.shape) if static else None)
            proto = None if value is None else ctx.builder.constant_data(value)
            arrays.append(None if proto is None else numpy_helper.to_array(proto))
        if node.op_type not in ("Shape", "Size") and any(
            array is None for array, value in zip(arrays, ctx.inputs, strict=True) if value is not None
        ):
            return False
        # NOTE: the results' types must be known small before anything is evaluated: a
        # Range or ConstantOfShape on constants can ask for any amount of memory
        expected_types = [ctx.result_type(position) for position in range(len(node.outputs))]
        if not all(_small_static(type_) for type_ in expected_types):
            return False
        node_proto = _node_proto(node)
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

    def _call_contrib_function(self, ctx: NodeContext) -> bool:
        """Call the body `contrib_functions` defines for an onnxruntime contrib op (ONNX has no
        schema for it); False when the op is not one of those."""
        node = ctx.node
        if onnx.defs.has(node.op_type, "" if node.domain in _DEFAULT_DOMAINS else node.domain):
            return False
        input_types = []
        for value in ctx.inputs:
            if value is not None and not isinstance(value.type, TensorType):
                raise ctx.error(f"needs tensor inputs, got {format_type(value.type)}")
            input_types.append(None if value is None else value.type)
        attributes = {name: attribute.value for name, attribute in node.attributes.items()}
        wanted = tuple(bool(output.name) for output in node.outputs)
        try:
            function_proto = contrib_function(node.domain, node.op_type, input_types, attributes, wanted)
        except ContribFunctionError as error:
            raise ctx.error(f"cannot be compiled: {error}") from None
        if function_proto is None:
            return False
        # NOTE: the body depends on the node's attributes, which are not call attributes: call
        # sites share a specialization only when their bodies are the same
        digest = hashlib.sha256(function_proto.SerializeToString()).hexdigest()[:16]
        key = (function_proto.domain, f"{node.domain or 'onnx'}.{node.op_type}", f"contrib-{digest}")
        positions = tuple(position for position, used in enumerate(wanted) if used)
        self._call_function(ctx, key, function_proto, {}, positions)
        return True

    def _expand_schema_function(self, ctx: NodeContext) -> bool:
        """Call the op's ONNX function body (see `schema_functions`) if it has one and the
        caller asks for it; False leaves the node to `_convert_generic`."""
        node = ctx.node
        domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
        opset = ctx.opset(node.domain)
        if not has_schema_function(node.op_type, domain, opset):
            return False
        if not self.expand_functions(_op_name(node), opset):
            return False
        if any(value is not None and not isinstance(value.type, TensorType) for value in ctx.inputs):
            return False
        serialized = _node_proto(node)
        if serialized is None:
            return False  # an attribute onnx_ir cannot write back: the generic path says which
        node_proto = with_schema_defaults(serialized, domain, opset)
        input_types = [None if value is None else type_proto_from_niro(value.type) for value in ctx.inputs]
        function_proto = schema_function(node_proto, domain, opset, input_types)
        if function_proto is None:
            return False
        call_attributes = {attribute.name: attribute for attribute in node_proto.attribute}
        key = (domain, node.op_type, f"opset{opset}")
        # NOTE: a body built per call site computes only the outputs the node asks for
        wanted = tuple(position for position, output in enumerate(node.outputs) if output.name)
        self._call_function(ctx, key, function_proto, call_attributes, wanted)
        return True

    # -- everything else -----------------------------------------------------------------------

    def _convert_generic(self, ctx: NodeContext) -> None:
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
        from_body = self._body_result_types(ctx, list(regions.values()))
        outputs: list[Value | None] = []
        for position, output in enumerate(node.outputs):
            if not output.name:
                outputs.append(None)
                continue
            type_ = ctx.result_type(position)
            if type_.shape is None and position in from_body:
                type_ = from_body[position]
            result = ctx.new_value(type_)
            outputs.append(result)
            ctx.bind(position, result)
        imported = ImportedOp(
            name=_op_name(node),
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

    @staticmethod
    def _body_result_types(ctx: NodeContext, regions: list[Region]) -> dict[int, TensorType]:
        """Scan/Loop/If result types derived from the imported bodies (see `region_types`)."""
        if ctx.node.domain not in _DEFAULT_DOMAINS:
            return {}
        if ctx.node.op_type == "If" and len(regions) == 2:
            return if_result_types(*(_yielded(region) for region in regions))
        if len(regions) != 1:
            return {}
        yielded = _yielded(regions[0])
        if ctx.node.op_type == "Scan" and ctx.opset() >= 9:
            return scan_result_types(
                ctx.inputs,
                yielded,
                ctx.int_attribute("num_scan_inputs", 0),
                ctx.ints_attribute("scan_input_axes"),
                ctx.ints_attribute("scan_output_axes"),
            )
        if ctx.node.op_type == "Loop":
            return loop_result_types(yielded, max(0, len(ctx.inputs) - 2))
        return {}

    # -- model-local functions -----------------------------------------------------------------

    def _call_attributes(self, ctx: NodeContext) -> dict[str, onnx.AttributeProto]:
        call_attributes = {}
        for name, attribute in ctx.node.attributes.items():
            if attribute.is_ref():
                raise ctx.error(f"attribute '{name}' refers to a function attribute outside a function")
            try:
                call_attributes[name] = onnx_ir.serde.serialize_attribute(attribute)
            except Exception:  # noqa: BLE001 - onnx_ir raises TypeError/ValueError for odd attributes
                raise ctx.error(
                    f"attribute '{name}' of kind {attribute.type.name} cannot be passed to the function"
                ) from None
        return call_attributes

    def _call_function(
        self,
        ctx: NodeContext,
        key: FunctionKey,
        function_proto: onnx.FunctionProto,
        call_attributes: dict[str, onnx.AttributeProto],
        outputs: tuple[int, ...] | None = None,
    ) -> None:
        """A Call of the Niro Function specialised for this call site (built on first use).

        `outputs`: the positions of the function outputs the Function returns (None: all)."""
        if len(ctx.inputs) > len(function_proto.input):
            raise ctx.error(f"passes {len(ctx.inputs)} inputs to a function of {len(function_proto.input)}")
        if len(ctx.node.outputs) > len(function_proto.output):
            raise ctx.error(f"expects {len(ctx.node.outputs)} outputs from a function of {len(function_proto.output)}")
        input_types = []
        for value in ctx.inputs:
            if value is not None and not isinstance(value.type, TensorType):
                raise ctx.error(f"function input has non-tensor type {format_type(value.type)}")
            input_types.append(None if value is None else value.type)
        spec_key = (specialization_key(key, input_types, call_attributes), outputs)
        function = self.specializations.get(spec_key)
        if function is None:
            if key in self.in_progress:
                raise ctx.error(f"function '{key[0]}.{key[1]}' calls itself (recursion is not allowed)")
            self.in_progress.append(key)
            try:
                function = self._specialize(ctx, key, function_proto, input_types, call_attributes, outputs)
            finally:
                self.in_progress.pop()
            self.specializations[spec_key] = function
            self.module.functions.append(function)
        results = tuple(ctx.new_value(type_) for type_ in function.type.outputs)
        ctx.emit(Call(function.name, tuple(value for value in ctx.inputs if value is not None), results, loc=ctx.loc))
        for position, result in zip(outputs or range(len(results)), results, strict=True):
            ctx.bind(position, result)

    def _specialize(self, ctx, key, function_proto, input_types, call_attributes, outputs) -> Function:
        if outputs is not None:
            if any(position >= len(function_proto.output) for position in outputs):
                raise ctx.error(f"expects output #{max(outputs)} of a function of {len(function_proto.output)}")
            trimmed = onnx.FunctionProto()
            trimmed.CopyFrom(function_proto)
            del trimmed.output[:]
            trimmed.output.extend(function_proto.output[position] for position in outputs)
            function_proto = trimmed
        model = specialize(self.model, function_proto, input_types, call_attributes)
        self._check(model, f"function '{function_proto.name}'")
        if has_sequences(model):
            model = self._without_sequences(model, None, lambda message: ctx.error(f"function '{key[1]}': {message}"))
        try:
            types = infer_types(model)
        except InferenceFailure as error:
            raise ctx.error(f"shape inference of function '{key[1]}' failed: {first_line(error)}") from error
        ir_model = deserialize_model(model, self.filename)
        bind_types(ir_model.graph, types, self.types)
        symbol = self.symbols.claim(function_proto.name, fallback="function")
        present = tuple(name for name, type_ in zip(function_proto.input, input_types, strict=False) if type_ is not None)
        return self._import_function(
            ir_model.graph,
            dict(ir_model.opset_imports),
            symbol,
            f"function '{function_proto.name}'",
            input_names=present,
            output_names=tuple(function_proto.output),
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one import (if it was running).

    NOTE: an import allocates an object graph the size of the model (onnx_ir nodes, protobuf
    wrappers, Niro ops) and frees almost none of it until the end; with the default thresholds
    the collector rescans that growing heap again and again (~30% of a 20,000-node import,
    the start-up budget). What an import leaves as cyclic garbage (the onnx_ir model) is collected by the
    next collection after it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def import_model_with_info(
    source,
    *,
    filename: str | None = None,
    expand_functions: ExpandPredicate | None = None,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int | None]] | None = None,
) -> ImportedModel:
    """Import `source` (a `.onnx` / `.onnxtxt` path or an `onnx.ModelProto`), with the tables
    that tie the Module back to the ONNX model. `filename` names the model in messages (and,
    for a ModelProto, locates the folder its external data lives in).

    `expand_functions(name, opset)` is asked about each op that ONNX defines by a function body
    (`onnx.Attention`...) and has no native converter: True calls that body (a specialised
    Function, as for model-local functions) instead of keeping an UnknownOp. A backend passes
    "I cannot lower it myself"; None keeps every such op as it is.

    `dims` (dim name -> size) and `input_shapes` (main-graph input name -> its sizes, None
    keeping a declared dim) make symbolic input dims static (see `input_shapes`); a request that
    does not fit the model raises InputShapeError, a ValueError a malformed one (a negative
    size). The caller's ModelProto is left as it was."""
    request = InputShapes.of(dims, input_shapes)
    loaded = load_model(source, filename)
    try:
        with _collector_paused():
            return _Importer(loaded, expand_functions, request).run()
    except UnicodeDecodeError as error:
        # protobuf (proto2) does not check string fields; Python decodes them on access
        raise OnnxImportError(
            f"not an ONNX model: a name or string attribute is not valid UTF-8 ({first_line(error)})",
            filename=loaded.display,
        ) from error


def import_model(
    source,
    *,
    filename: str | None = None,
    expand_functions: ExpandPredicate | None = None,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int | None]] | None = None,
) -> Module:
    """Import an ONNX model as a Niro Module; raises OnnxImportError for a model it refuses.
    See `import_model_with_info` for the arguments."""
    return import_model_with_info(
        source, filename=filename, expand_functions=expand_functions, dims=dims, input_shapes=input_shapes
    ).module
