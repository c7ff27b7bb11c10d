"""Calls of functions the conversion specialises per call site.

A node becomes a Call of a Niro Function when it names a model-local function, when it is an
onnxruntime contrib op `contrib_functions` defines a body for, or when ONNX defines its op by
a function body and the caller asks for it (`schema_functions`). Each body is specialised to
the call site's input types and attributes (`functions.specialize`), taken through the proto
steps of the import (check, rewrite, type: the driver's `prepare`) and converted by the same
`Converter`; a Function is built once per distinct specialisation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import onnx
import onnx_ir
from niro.ir import Call, Function, TensorType, format_type

from .context import NodeContext
from .contrib_functions import ContribFunctionError, contrib_function
from .conversion import DEFAULT_DOMAINS, Converter, op_name, serialized_node
from .functions import FunctionKey, specialization_key
from .onnx_types import type_proto_from_niro
from .schema_functions import (
    ExpandPredicate,
    has_schema_function,
    schema_function,
    with_schema_defaults,
)

__all__ = ["FunctionCalls", "PrepareFunction"]

PrepareFunction = Callable[
    [NodeContext, FunctionKey, onnx.FunctionProto, list[TensorType | None], dict[str, onnx.AttributeProto]],
    onnx_ir.Model,
]
"""(call site, key, body, input types, call attributes) -> the specialised body as a model in
onnx_ir, checked, rewritten and typed (its types bound in the converter's `types`)."""


def _tensor_types(ctx: NodeContext, refusal: str) -> list[TensorType | None]:
    """The types of the node's inputs (None where absent); an input that is not a tensor is
    refused with `refusal` followed by its type."""
    types: list[TensorType | None] = []
    for value in ctx.inputs:
        if value is None:
            types.append(None)
        elif isinstance(value.type, TensorType):
            types.append(value.type)
        else:
            raise ctx.error(f"{refusal} {format_type(value.type)}")
    return types


class FunctionCalls:
    """The functions specialised so far, and the ones being specialised (to refuse recursion)."""

    def __init__(
        self,
        converter: Converter,
        function_protos: dict[FunctionKey, onnx.FunctionProto],
        expand_functions: ExpandPredicate | None,
        prepare: PrepareFunction,
    ) -> None:
        self.converter = converter
        self.function_protos = function_protos
        self.expand_functions = expand_functions
        self.prepare = prepare
        self.specializations: dict[tuple, Function] = {}
        self.in_progress: list[FunctionKey] = []

    def call_model_function(self, ctx: NodeContext) -> bool:
        """Call the model-local function the node names, if it names one."""
        if not self.function_protos:
            return False
        node = ctx.node
        key = (node.domain, node.op_type, node.overload)
        if key not in self.function_protos:
            return False
        self._call_function(ctx, key, self.function_protos[key], self._call_attributes(ctx))
        return True

    def call_contrib_function(self, ctx: NodeContext) -> bool:
        """Call the body `contrib_functions` defines for an onnxruntime contrib op (ONNX has no
        schema for it); False when the op is not one of those."""
        node = ctx.node
        if onnx.defs.has(node.op_type, "" if node.domain in DEFAULT_DOMAINS else node.domain):
            return False
        input_types = _tensor_types(ctx, "needs tensor inputs, got")
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

    def expand_schema_function(self, ctx: NodeContext) -> bool:
        """Call the op's ONNX function body (see `schema_functions`) if it has one and the
        caller asks for it; False leaves the node to the generic conversion."""
        if self.expand_functions is None:
            return False
        node = ctx.node
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        opset = ctx.opset(node.domain)
        if not has_schema_function(node.op_type, domain, opset):
            return False
        if not self.expand_functions(op_name(node), opset):
            return False
        if any(value is not None and not isinstance(value.type, TensorType) for value in ctx.inputs):
            return False
        serialized = serialized_node(node)
        if serialized is None:
            return False  # an attribute onnx_ir cannot write back: the generic path says which
        node_proto = with_schema_defaults(serialized, domain, opset)
        input_types = [
            None if type_ is None else type_proto_from_niro(type_)
            for type_ in _tensor_types(ctx, "needs tensor inputs, got")
        ]
        function_proto = schema_function(node_proto, domain, opset, input_types)
        if function_proto is None:
            return False
        call_attributes = {attribute.name: attribute for attribute in node_proto.attribute}
        key = (domain, node.op_type, f"opset{opset}")
        # NOTE: a body built per call site computes only the outputs the node asks for
        wanted = tuple(position for position, output in enumerate(node.outputs) if output.name)
        self._call_function(ctx, key, function_proto, call_attributes, wanted)
        return True

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
        input_types = _tensor_types(ctx, "function input has non-tensor type")
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
            self.converter.module.functions.append(function)
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
        ir_model = self.prepare(ctx, key, function_proto, input_types, call_attributes)
        symbol = self.converter.symbols.claim(function_proto.name, fallback="function")
        present = tuple(name for name, type_ in zip(function_proto.input, input_types, strict=False) if type_ is not None)
        return self.converter.import_function(
            ir_model.graph,
            dict(ir_model.opset_imports),
            symbol,
            f"function '{function_proto.name}'",
            input_names=present,
            output_names=tuple(function_proto.output),
        )
