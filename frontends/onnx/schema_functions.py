"""ONNX ops whose schema defines them by a function body (Attention, the losses, windows...).

ONNX gives many composite ops a body made of simpler ops, fixed (`Shrink`, `HannWindow`) or
built per call site from its attributes and input types (`Attention`, `RotaryEmbedding`,
`SoftmaxCrossEntropyLoss`). When the caller's backend cannot lower such an op itself, the
importer calls this body instead, as it calls a model-local function: one specialised Niro
Function per distinct (input types, attributes), reached by a Call. The body is ONNX's own
definition, so the semantics are the standard's, version for version.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Protocol, cast

import onnx
import onnx.defs

__all__ = ["ExpandPredicate", "function_body_since", "has_schema_function", "schema_function", "with_schema_defaults"]

ExpandPredicate = Callable[[str, int], bool]
"""Called with an op's Niro name (`onnx.Attention`) and its op-set version: True to use the
op's ONNX function body instead of keeping it as an UnknownOp."""


class _FunctionSchema(Protocol):
    """The part of `onnx.defs.OpSchema` that gives an op's function bodies (the C++ binding
    has it; onnx's type stubs do not declare it)."""

    name: str
    domain: str
    attributes: dict[str, onnx.defs.OpSchema.Attribute]
    has_function: bool
    has_context_dependent_function: bool
    function_opset_versions: Sequence[int]
    context_dependent_function_opset_versions: Sequence[int]

    def get_function_with_opset_version(self, opset: int) -> bytes: ...

    def get_context_dependent_function_with_opset_version(
        self, opset: int, node: bytes, input_types: list[bytes]
    ) -> bytes: ...


def _schema(op_type: str, domain: str, opset: int) -> _FunctionSchema | None:
    try:
        return cast(_FunctionSchema, onnx.defs.get_schema(op_type, opset, domain))
    except onnx.defs.SchemaError:
        return None


@functools.cache  # NOTE: asked once per node that has no converter; a schema lookup is ~2 us
def has_schema_function(op_type: str, domain: str, opset: int) -> bool:
    schema = _schema(op_type, domain, opset)
    return schema is not None and (schema.has_function or schema.has_context_dependent_function)


def function_body_since(domain: str, op_type: str) -> int | None:
    """The first opset at which ONNX defines `op_type` by a function body, or None."""
    return _first_bodies().get((domain, op_type))


@functools.cache
def _first_bodies() -> dict[tuple[str, str], int]:
    first: dict[tuple[str, str], int] = {}
    for schema in cast(list[_FunctionSchema], onnx.defs.get_all_schemas_with_history()):
        versions = (*schema.function_opset_versions, *schema.context_dependent_function_opset_versions)
        if versions:
            key = (schema.domain, schema.name)
            first[key] = min(min(versions), first.get(key, min(versions)))
    return first


def schema_function(
    node: onnx.NodeProto, domain: str, opset: int, input_types: Sequence[onnx.TypeProto | None]
) -> onnx.FunctionProto | None:
    """The body ONNX defines for `node` at `opset`, or None when its schema has none (or the
    body builder declines this call site, e.g. for an attribute combination it does not cover).

    `node` must carry every attribute, defaults included (`with_schema_defaults`): a body built
    per call site reads them from the node. `input_types[i]` is None for an absent input."""
    schema = _schema(node.op_type, domain, opset)
    if schema is None:
        return None
    body = b""
    fixed = [version for version in schema.function_opset_versions if version <= opset]
    dependent = [version for version in schema.context_dependent_function_opset_versions if version <= opset]
    if dependent and (not fixed or max(dependent) >= max(fixed)):
        types = [(type_ or onnx.TypeProto()).SerializeToString() for type_ in input_types]
        try:
            body = schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(), types
            )
        except Exception:  # noqa: BLE001 - ONNX's builder raises bare RuntimeErrors for cases it skips
            return None
    elif fixed:
        body = schema.get_function_with_opset_version(max(fixed))
    if not body:
        return None
    function = onnx.FunctionProto()
    function.ParseFromString(body)
    if not function.node:
        return None
    return function


def with_schema_defaults(node: onnx.NodeProto, domain: str, opset: int) -> onnx.NodeProto:
    """A copy of `node` with each attribute it leaves out set to its schema default, if any."""
    schema = _schema(node.op_type, domain, opset)
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    if schema is None:
        return copy
    present = {attribute.name for attribute in node.attribute}
    for name, attribute in sorted(schema.attributes.items()):
        default = attribute.default_value
        if name not in present and default.type != onnx.AttributeProto.UNDEFINED:
            copy.attribute.append(default)
    return copy
