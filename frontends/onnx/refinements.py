"""The types the conversion gives ONNX values: graph typing's answer, refined where the walk knows more.

Graph typing (`graph_typing`, before the conversion) writes what ONNX shape inference, folding
and symbolic dims find (and the fp16/bf16 plan, for the values it makes), bound to onnx_ir
values (`value_types`). The conversion reads a
value's type only through this module, which refines that answer where the walk has learnt
more since:

- a node's result of unknown rank, or with dynamic dims while an operand is a known constant
  or typed better than inference saw it, is inferred again on the node alone from its
  operands' Niro types and constant data (`node_inference`) - kept if more precise;
- an op ONNX has no schema for (onnxruntime's quantized contrib ops) gets its result types
  from `contrib_types` where the model declares none;
- Scan/Loop/If results of unknown rank take the types their imported bodies yield, and a Loop
  body's undeclared inputs the types of the Loop's operands (`region_types`).

Each only fills in what typing left unknown: a re-inferred type is kept only with typing's
element type and a shape typing's admits; contrib and body types only where typing has no
rank. They happen during the walk, not in graph typing, because each reads what only the walk
has made, and what the walk makes of one node feeds the next:

- the Niro types of a node's operands: a native converter's result follows Niro's own rules
  (`converters`), a Call's is what the function body specialised to that call site's operand
  types returns (`calls`; which nodes become Calls depends on which converters decline), an If
  on a constant is its taken branch, and each may itself have been refined here;
- the data of constants the walk made: folds in subgraphs and on constants the walk made known
  (`Converter._fold`), the taken branch of an If, and the constants a subgraph reads from an
  enclosing graph (ONNX infers a subgraph without their data);
- the imported bodies of Scan/Loop/If for their results, and a Loop's operands for its body's
  inputs.

Graph typing could only give these types by computing all of that itself, the Calls' result
types included (each function body typed per call site before the conversion): a second walk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import onnx
import onnx_ir
from niro.ir import Region, ScalarType, TensorType, Type, Value, Yield
from niro.ir.shapes import shape_refines

from .context import NodeContext, describe_node
from .contrib_functions import contrib_function_ops
from .contrib_types import CONTRIB_DOMAIN, ContribTypeError, contrib_op_types, contrib_result_types
from .errors import OnnxImportError
from .node_inference import infer_node
from .onnx_types import UnsupportedTypeError, niro_type_from_proto, schema_element_type
from .region_types import (
    if_result_types,
    loop_body_input_types,
    loop_result_types,
    refine_type,
    scan_result_types,
)

__all__ = ["ResultTypes", "body_result_types", "input_type", "resolve_type"]

DEFAULT_DOMAINS = ("", "ai.onnx")


def resolve_type(
    type_proto: onnx.TypeProto | None,
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


def input_type(
    types: Mapping[onnx_ir.Value, onnx.TypeProto],
    onnx_value: onnx_ir.Value,
    what: str,
    filename: str,
    trusted_names: frozenset[str],
    known: Type | None = None,
) -> Type:
    """The type of a graph input: as typed, or `known`'s shape (a Loop body's input from the
    Loop's operand, `loop_body_input_types`) where typing left its rank unknown."""
    type_ = resolve_type(types.get(onnx_value), onnx_value, what, filename, trusted_names=trusted_names)
    return refine_type(type_, known)


def body_input_types(ctx: NodeContext, attribute: str) -> tuple[Type | None, ...]:
    """What the walk knows of the inputs of `ctx.node`'s subgraph `attribute`, by position
    (None: nothing more than typing); see `region_types.loop_body_input_types`."""
    return loop_body_input_types(ctx.node, attribute, ctx.inputs)


def _yielded(region: Region) -> tuple[Value, ...]:
    """The values a one-block region's Yield gives (none if it ends otherwise)."""
    terminator = region.blocks[0].operations[-1] if region.blocks[0].operations else None
    return terminator.operands if isinstance(terminator, Yield) else ()


def body_result_types(ctx: NodeContext, regions: Sequence[Region]) -> dict[int, TensorType]:
    """Scan/Loop/If result types derived from the imported bodies (see `region_types`)."""
    if ctx.node.domain not in DEFAULT_DOMAINS:
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


class ResultTypes:
    """The types of one node's results, as the conversion gives them (see the module
    docstring); the node's re-inference and contrib typing run at most once."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self._retyped: dict[int, TensorType] | None = None
        self._contrib: tuple[dict[int, TensorType] | None] | None = None

    def of(self, output_index: int, from_body: Mapping[int, TensorType] | None = None) -> TensorType:
        """The type of output `output_index`: typing's, refined by the node's re-inference or
        contrib typing, and, where still of unknown rank, by `from_body` (`body_result_types`)."""
        found = self._refined(output_index)
        if from_body is not None and found.shape is None and output_index in from_body:
            return from_body[output_index]
        return found

    def _refined(self, output_index: int) -> TensorType:
        ctx = self.ctx
        node = ctx.node
        output = node.outputs[output_index]
        what = f"output of node '{ctx.loc}'"
        because = "shape inference could not type it"
        if node.domain not in DEFAULT_DOMAINS and not onnx.defs.has(node.op_type, node.domain):
            # NOTE: ONNX shape inference knows no operator of another domain (onnxruntime's
            # com.microsoft contrib ops, a user's custom ops): the quantized contrib ops niroc
            # types itself (`contrib_types`) where the model declares nothing; for any other,
            # say which op it is and what would type it, rather than leave the user guessing
            # why inference gave up.
            declared = self._typed(output_index)
            if declared is None or declared.shape is None:
                contrib = self._contrib_types()
                if contrib is not None and output_index in contrib:
                    return contrib[output_index]
            what = f"output of {describe_node(node, ctx.index)}"
            because = (
                f"ONNX shape inference has no schema for domain '{node.domain}' "
                "and the model declares no type for it in value_info"
            )  # (a domain ONNX knows, e.g. ai.onnx.ml, keeps the generic reason)
            if node.domain == CONTRIB_DOMAIN:
                supported = sorted(
                    {*contrib_op_types()}
                    | {op for domain, op in contrib_function_ops() if domain == CONTRIB_DOMAIN}
                )
                because += f"; the {CONTRIB_DOMAIN} ops niroc compiles are {', '.join(supported)}"
        found = resolve_type(
            ctx.types.get(output),
            output,
            what,
            ctx.filename,
            lambda: schema_element_type(node, output_index, ctx.inputs, ctx.opset(node.domain)),
            because,
            ctx.trusted_names,
        )
        if found.shape is None or (
            None in found.shape and (self._has_constant_operand() or self._operand_typed_better())
        ):
            if self._retyped is None:
                self._retyped = infer_node(node, ctx.inputs, ctx.builder.constant_data, ctx.opset(node.domain))
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
            node = self.ctx.node
            try:
                attributes = {name: attribute.value for name, attribute in node.attributes.items()}
                types = contrib_result_types(node.domain, node.op_type, self.ctx.inputs, attributes)
                self._contrib = (types,)
            except ContribTypeError as error:
                raise self.ctx.error(f"cannot type its outputs: {error}") from None
        return self._contrib[0]

    def _has_constant_operand(self) -> bool:
        literals = self.ctx.builder.literals
        return any(value is not None and value.id in literals for value in self.ctx.inputs)

    def _operand_typed_better(self) -> bool:
        """Whether the conversion typed an operand more precisely than graph inference did (a
        Loop's scan output typed from its imported body, see `region_types`): inference then
        typed this node from less than the conversion knows."""
        ctx = self.ctx
        for onnx_value, value in zip(ctx.node.inputs, ctx.inputs, strict=False):
            if value is None or onnx_value is None or not isinstance(value.type, TensorType):
                continue
            inferred = ctx.types.get(onnx_value)  # None for a value captured from outside the graph
            known = value.type.shape
            if inferred is None and known is not None and onnx_value.producer() is not None:
                return True  # an output inference could not type (a contrib op's): the conversion did
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

    def _typed(self, output_index: int) -> TensorType | None:
        """Typing's type of an output, or None when it has none Niro can hold."""
        output = self.ctx.node.outputs[output_index]
        try:
            return niro_type_from_proto(self.ctx.types.get(output))
        except UnsupportedTypeError:
            return None
