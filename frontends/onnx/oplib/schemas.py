"""ONNX op schemas as the type rules read them: one `OpSignature` per (domain, op type, opset).

An `OpSignature` is the part of an `onnx.defs.OpSchema` a verifier needs, compiled once: the
formal inputs and outputs with the Niro element types each allows, the arity bounds, and the
attribute kinds. `signature_for` caches it per (domain, op type, opset), so verifying a model of
a hundred thousand ops asks ONNX for each distinct op once. Pure data plus the `onnx` package:
nothing here knows Niro's verifier or MLIR.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, cast

import onnx.defs
from niro.ir import ScalarType

from ..onnx_types import _SCHEMA_TYPE_STRINGS

__all__ = [
    "kind_name",
    "kind_value",
    "AttributeKind",
    "FormalOption",
    "FormalParameter",
    "OpSignature",
    "domain_label",
    "niro_op_name",
    "onnx_type_string",
    "schema_versions",
    "has_schema",
    "schema_op_names",
    "signature_for",
]

_OpSchema = onnx.defs.OpSchema
AttributeKind = _OpSchema.AttrType
"""The ONNX attribute kinds (INT, FLOAT, STRING, TENSOR, GRAPH, INTS, ...)."""


class _EnumMember(Protocol):
    name: str
    value: int


def kind_name(kind: AttributeKind) -> str:
    """The name of an attribute kind (`INTS`): the pybind11 enum has it, onnx's type stubs do
    not declare it."""
    return cast(_EnumMember, kind).name


def kind_value(kind: AttributeKind) -> onnx.AttributeProto.AttributeType:
    """An attribute kind's `AttributeProto.AttributeType` number (see `kind_name`)."""
    return cast("onnx.AttributeProto.AttributeType", cast(_EnumMember, kind).value)

_DEFAULT_DOMAINS = ("", "ai.onnx")

# NOTE: one table for ONNX type strings <-> Niro element types; onnx_types.py owns it.
_ONNX_TYPE_STRINGS: dict[ScalarType, str] = {
    scalar: text for text, scalar in _SCHEMA_TYPE_STRINGS.items()
}


def onnx_type_string(element_type: ScalarType) -> str:
    """`tensor(float)` for F32: how an ONNX schema spells a tensor of `element_type`."""
    return _ONNX_TYPE_STRINGS[element_type]


def niro_op_name(domain: str, op_type: str) -> str:
    """The UnknownOp name the frontend gives a node: `onnx.Relu`, `ai.onnx.ml.Scaler`."""
    prefix = "onnx" if domain in _DEFAULT_DOMAINS else domain
    return f"{prefix}.{op_type}"


def domain_label(domain: str) -> str:
    """How messages name a domain: the default one is `ai.onnx`."""
    return "ai.onnx" if domain in _DEFAULT_DOMAINS else domain


class FormalOption(enum.Enum):
    SINGLE = "single"
    OPTIONAL = "optional"
    VARIADIC = "variadic"


_OPTIONS = {
    _OpSchema.FormalParameterOption.Single: FormalOption.SINGLE,
    _OpSchema.FormalParameterOption.Optional: FormalOption.OPTIONAL,
    _OpSchema.FormalParameterOption.Variadic: FormalOption.VARIADIC,
}


@dataclass(frozen=True, slots=True)
class FormalParameter:
    """One formal input or output of a schema.

    `type_var` is the constraint name (`T`) or, for a fixed type, the type string itself
    (`tensor(int64)`); `allowed` the Niro element types it admits (a Niro tensor of any other
    element type cannot be this parameter); `homogeneous` is False only for a variadic whose
    members may differ in type (Loop's `V`), which then takes no part in type agreement.
    """

    name: str
    type_var: str
    allowed: frozenset[ScalarType]
    type_strings: tuple[str, ...]  # the schema's own spelling of what it allows (messages)
    option: FormalOption
    homogeneous: bool

    @property
    def shares_type(self) -> bool:
        """Whether every value bound to `type_var` must have one element type."""
        return self.homogeneous and len(self.allowed) > 1


@dataclass(frozen=True, slots=True)
class OpSignature:
    """The compiled schema of one op at one opset: counts, element types, attributes.

    `label` names the schema version in messages (`Relu-14`: the version that defines the op's
    semantics at the opset in effect). `attributes` maps each attribute to (kind, required).
    """

    domain: str
    op_type: str
    since_version: int
    deprecated: bool
    inputs: tuple[FormalParameter, ...]
    outputs: tuple[FormalParameter, ...]
    min_inputs: int
    max_inputs: int
    min_outputs: int
    max_outputs: int
    attributes: Mapping[str, tuple[AttributeKind, bool]]
    schema: _OpSchema

    @property
    def label(self) -> str:
        return f"{self.op_type}-{self.since_version}"

    def input(self, position: int) -> FormalParameter | None:
        return _formal(self.inputs, position)

    def output(self, position: int) -> FormalParameter | None:
        return _formal(self.outputs, position)


def _formal(formals: tuple[FormalParameter, ...], position: int) -> FormalParameter | None:
    """The formal parameter an actual at `position` binds to (a trailing variadic takes the
    rest); None past the end."""
    if position < len(formals):
        return formals[position]
    if formals and formals[-1].option is FormalOption.VARIADIC:
        return formals[-1]
    return None


def _allowed(type_strings) -> frozenset[ScalarType]:
    return frozenset(
        _SCHEMA_TYPE_STRINGS[text] for text in type_strings if text in _SCHEMA_TYPE_STRINGS
    )


def _compile(schema: _OpSchema) -> OpSignature:
    constraints = {
        constraint.type_param_str: tuple(constraint.allowed_type_strs)
        for constraint in schema.type_constraints
    }

    def formal(parameter) -> FormalParameter:
        type_strings = constraints.get(parameter.type_str, (parameter.type_str,))
        return FormalParameter(
            name=parameter.name,
            type_var=parameter.type_str,
            allowed=_allowed(type_strings),
            type_strings=type_strings,
            option=_OPTIONS[parameter.option],
            homogeneous=bool(parameter.is_homogeneous),
        )

    def formals(parameters) -> tuple[FormalParameter, ...]:
        return tuple(formal(parameter) for parameter in parameters)

    return OpSignature(
        domain=schema.domain,
        op_type=schema.name,
        since_version=schema.since_version,
        deprecated=bool(schema.deprecated),
        inputs=formals(schema.inputs),
        outputs=formals(schema.outputs),
        min_inputs=schema.min_input,
        max_inputs=schema.max_input,
        min_outputs=schema.min_output,
        max_outputs=schema.max_output,
        attributes={
            name: (attribute.type, bool(attribute.required))
            for name, attribute in schema.attributes.items()
        },
        schema=schema,
    )


@functools.lru_cache(maxsize=4096)
def signature_for(domain: str, op_type: str, opset: int) -> OpSignature | None:
    """The signature in effect at `opset` of `domain`, or None when the op is not defined
    there (not yet, or no such op). A deprecated schema is returned as is (`deprecated`)."""
    schema_domain = "" if domain in _DEFAULT_DOMAINS else domain
    try:
        schema = onnx.defs.get_schema(op_type, opset, schema_domain)
    except onnx.defs.SchemaError:
        return None
    return _compile(schema)


@functools.cache
def _all_versions() -> Mapping[tuple[str, str], tuple[int, ...]]:
    versions: dict[tuple[str, str], set[int]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        versions.setdefault((schema.domain, schema.name), set()).add(schema.since_version)
    return {key: tuple(sorted(found)) for key, found in versions.items()}


def has_schema(domain: str, op_type: str) -> bool:
    """Whether the installed onnx defines `op_type` in `domain` at any opset (cheap: no listing)."""
    schema_domain = "" if domain in _DEFAULT_DOMAINS else domain
    return onnx.defs.has(op_type, schema_domain)


def schema_op_names() -> tuple[tuple[str, str], ...]:
    """Every (domain, op type) the installed onnx has a schema for, sorted."""
    return tuple(sorted(_all_versions()))


def schema_versions(domain: str, op_type: str) -> tuple[int, ...]:
    """The opsets at which the op's schema changed (`(1, 6, 13, 14)` for Relu); () if none."""
    schema_domain = "" if domain in _DEFAULT_DOMAINS else domain
    return _all_versions().get((schema_domain, op_type), ())
