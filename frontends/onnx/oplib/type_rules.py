"""The schema-driven type rule every ONNX op imported as an UnknownOp gets.

One generic rule, registered for each op the installed onnx has a schema for (`onnx.Relu`,
`ai.onnx.ml.Scaler`, ...), checks an op against the schema in effect at its `niro.opset`:

    onnx-opset           the op exists at that opset (and is not deprecated there)
    onnx-operand-count   inputs (operands + `absent_inputs`) within the schema's bounds,
                         no required input absent
    onnx-result-count    outputs (results + `absent_outputs`) likewise
    onnx-element-type    each element type allowed by its type constraint; values sharing a
                         type variable agree
    onnx-attribute       required attributes present, none unknown, each of the schema's kind
    onnx-result-type     result types agree with ONNX's node-level shape inference
    onnx-shape           ONNX's shape inference rejects the operands

Messages name ONNX positions (`input #2 'B'`, counting absent inputs) and the schema version
(`Add-14`), since that is what a user finds in the ONNX operator docs. The bookkeeping of
`niro.ir.ImportedOp` (`niro.opset`, `absent_inputs`, `absent_outputs`, `regions`) is read
through that contract's names and checked here with the schema's context in the messages.

NOTE: an `onnx.*` op without `niro.opset` (hand-built IR; the frontend always sets it) has no
version, hence no schema in effect: the rule checks nothing rather than guess one. The rule never
raises on a malformed op: the verifier's own checks report those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from niro.ir import (
    ABSENT_INPUTS_ATTRIBUTE,
    ABSENT_OUTPUTS_ATTRIBUTE,
    BOOKKEEPING_ATTRIBUTES,
    OPSET_ATTRIBUTE,
    REGIONS_ATTRIBUTE,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    absent_positions,
    buffer_nbytes,
    by_position,
    format_type,
    is_buffer,
    literal_problem,
    region_names,
    register_op_type_rule_source,
)

from .inference_check import Bound, check_inferred_types
from .schemas import (
    AttributeKind,
    FormalOption,
    FormalParameter,
    OpSignature,
    domain_label,
    has_schema,
    kind_name,
    niro_op_name,
    schema_op_names,
    schema_versions,
    signature_for,
)

__all__ = [
    "check_onnx_op",
    "register_onnx_type_rules",
    "registered_type_rule_names",
]

Report = Callable[..., None]
_UNBOUNDED = 2**31 - 1  # what ONNX schemas use for "no maximum"
_ELEMENT_ORDER = {scalar: index for index, scalar in enumerate(ScalarType)}


def check_onnx_op(domain: str, op_type: str, op: UnknownOp, report: Report) -> None:
    """Check `op` against the schema of `op_type` in `domain` at the op's `niro.opset`."""
    attributes = op.attributes
    if not isinstance(attributes, dict) or OPSET_ATTRIBUTE not in attributes:
        return
    key = verdict_key(op)
    if key is not None and key in _VALID:
        return
    reported = False

    def counting_report(*arguments) -> None:
        nonlocal reported
        reported = True
        report(*arguments)

    inference_key = None if key is None else (key[0], key[1], len(op.results), key[4])
    _check(domain, op_type, op, attributes, counting_report, inference_key)
    if key is not None and not reported:
        if len(_VALID) >= _VALID_LIMIT:
            _VALID.clear()
        _VALID.add(key)


# NOTE: the verdict depends only on the op's name, attributes, operand and result types and
# region count, so an op equal in those to one found valid before is valid: a model repeating
# one layer a thousand times pays for its checks (and ONNX's inference) once.
_VALID: set[tuple] = set()
_VALID_LIMIT = 1 << 16


def verdict_key(op: UnknownOp) -> tuple | None:
    """What the rule's verdict on `op` depends on, hashable; None when an attribute holds a
    large buffer (not worth hashing)."""
    try:
        frozen = _freeze(op.attributes)
        if frozen is None:
            return None
        key = (
            op.name,
            tuple(value.type for value in op.operands),
            tuple(value.type for value in op.results),
            len(op.regions),
            frozen,
        )
        hash(key)
    except Exception:  # a hostile type or buffer: no caching, the checks still run
        return None
    return key


_FREEZE_LIMIT = 4096  # bytes of buffer data worth hashing


def _freeze(value: object):
    """A hashable stand-in for a generic attribute that tells apart what the rules tell apart
    (`1`, `1.0` and `True` differ); None when too big."""
    if isinstance(value, dict):
        items = []
        for name, item in value.items():
            frozen = _freeze(item)
            if frozen is None:
                return None
            items.append((name, frozen))
        return ("dict", tuple(sorted(items, key=lambda pair: str(pair[0]))))
    if isinstance(value, tuple):
        items = []
        for item in value:
            frozen = _freeze(item)
            if frozen is None:
                return None
            items.append(frozen)
        return ("tuple", tuple(items))
    if is_buffer(value):
        view = memoryview(value).cast("B")
        return ("buffer", view.tobytes()) if view.nbytes <= _FREEZE_LIMIT else None
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value), value)
    return None  # not a generic attribute: the verifier reports it


def _check(
    domain: str,
    op_type: str,
    op: UnknownOp,
    attributes: dict,
    report: Report,
    inference_key: tuple | None,
) -> None:
    signature = _signature(domain, op_type, attributes[OPSET_ATTRIBUTE], report)
    if signature is None:
        return
    inputs = _bind(signature, op.operands, attributes, _INPUT_SIDE, report)
    outputs = _bind(signature, op.results, attributes, _OUTPUT_SIDE, report)
    sound = _check_attributes(signature, op, attributes, report)
    if inputs is None or outputs is None:
        return
    sound = _check_element_types(signature, inputs.bindings, outputs.bindings, report) and sound
    if sound:
        check_inferred_types(signature, op, inputs, outputs, report, inference_key)


# -- opset --------------------------------------------------------------------------------------


def _signature(domain: str, op_type: str, opset: object, report: Report) -> OpSignature | None:
    if not isinstance(opset, int) or isinstance(opset, bool) or opset < 1:
        report(
            "onnx-opset",
            f"attribute '{OPSET_ATTRIBUTE}' must be a positive int (the op-set version), got "
            f"{_describe(opset)}",
        )
        return None
    signature = signature_for(domain, op_type, opset)
    where = f"opset {opset} of domain '{domain_label(domain)}'"
    if signature is None:
        versions = schema_versions(domain, op_type)
        first = f" (first defined in opset {versions[0]})" if versions else ""
        report("onnx-opset", f"is not defined at {where}{first}")
        return None
    if signature.deprecated:
        report("onnx-opset", f"is deprecated at {where} (since opset {signature.since_version})")
        return None
    return signature


# -- operand and result counts ------------------------------------------------------------------

Binding = tuple[int, FormalParameter, Value]
"""(ONNX position, the formal parameter it binds to, the Niro value)."""


class _Side:
    """Inputs or outputs: where their bounds and formals live, how messages name them."""

    def __init__(self, noun: str, rule: str, absent: str, values: str) -> None:
        self.noun = noun
        self.rule = rule
        self.absent = absent
        self.values = values

    def bounds(self, signature: OpSignature) -> tuple[int, int]:
        if self.noun == "input":
            return signature.min_inputs, signature.max_inputs
        return signature.min_outputs, signature.max_outputs

    def formal(self, signature: OpSignature, position: int) -> FormalParameter | None:
        return signature.input(position) if self.noun == "input" else signature.output(position)


_INPUT_SIDE = _Side("input", "onnx-operand-count", ABSENT_INPUTS_ATTRIBUTE, "operands")
_OUTPUT_SIDE = _Side("output", "onnx-result-count", ABSENT_OUTPUTS_ATTRIBUTE, "results")


def _bind(
    signature: OpSignature,
    values: Sequence[Value],
    attributes: dict,
    side: _Side,
    report: Report,
) -> Bound | None:
    """The values bound to their ONNX positions, or None when the counts are wrong."""
    listed = attributes.get(side.absent, ())
    absent = absent_positions(listed, len(values))
    if absent is None:
        total = len(values) + (len(listed) if isinstance(listed, tuple) else 0)
        report(
            side.rule,
            f"attribute '{side.absent}' must be a tuple of distinct {side.noun} positions below "
            f"{total}, got {_describe(listed)}",
        )
        return None
    total = len(values) + len(absent)
    low, high = side.bounds(signature)
    if not low <= total <= high:
        missing = f" ({len(absent)} absent)" if absent else ""
        report(
            side.rule,
            f"expected {_count_text(low, high, side.noun)} ({signature.label}), got "
            f"{total}{missing}",
            *values,
        )
        return None
    sound = True
    for position in sorted(absent):
        formal = side.formal(signature, position)
        if formal is not None and formal.option is not FormalOption.OPTIONAL:
            report(
                side.rule,
                f"{side.noun} #{position} '{formal.name}' of {signature.label} is required, but "
                f"'{side.absent}' lists it",
            )
            sound = False
    bindings: list[Binding] = []
    for position, value in enumerate(by_position(values, absent)):
        if value is None:
            continue
        formal = side.formal(signature, position)
        if formal is None:  # only past the last formal, which the bounds already exclude
            return None
        bindings.append((position, formal, value))
    return Bound(bindings, total) if sound else None


def _count_text(low: int, high: int, noun: str) -> str:
    plural = f"{noun}s"
    if high >= _UNBOUNDED:
        return f"at least {low} {noun if low == 1 else plural}"
    if low == high:
        return f"{low} {noun if low == 1 else plural}"
    return f"{low} to {high} {plural}"


# -- element types ------------------------------------------------------------------------------


def _check_element_types(
    signature: OpSignature, inputs: list[Binding], outputs: list[Binding], report: Report
) -> bool:
    sound = True
    first_binding: dict[str, tuple[ScalarType, str]] = {}  # type variable -> (type, where)
    for noun, bindings in (("input", inputs), ("output", outputs)):
        for position, formal, value in bindings:
            where = f"{noun} #{position} '{formal.name}'"
            type_ = value.type
            if not isinstance(type_, TensorType):
                report(
                    "onnx-element-type",
                    f"{where} must be a tensor, got {format_type(type_)}",
                    value,
                )
                sound = False
                continue
            element = type_.element_type
            if element not in formal.allowed:
                report("onnx-element-type", _disallowed(signature, formal, where, element), value)
                sound = False
                continue
            if not formal.shares_type:
                continue
            first = first_binding.setdefault(formal.type_var, (element, where))
            if first[0] is not element:
                report(
                    "onnx-element-type",
                    f"{where} has element type {element.spelling}, but {formal.type_var} is "
                    f"{first[0].spelling} (from {first[1]}) in {signature.label}",
                    value,
                )
                sound = False
    return sound


def _disallowed(
    signature: OpSignature, formal: FormalParameter, where: str, element: ScalarType
) -> str:
    if not formal.allowed:
        shown = ", ".join(formal.type_strings[:3]) + (
            ", ..." if len(formal.type_strings) > 3 else ""
        )
        return f"{where} of {signature.label} cannot be a tensor (it takes {shown})"
    allowed = sorted(formal.allowed, key=_ELEMENT_ORDER.__getitem__)
    if len(allowed) == 1:
        return (
            f"{where} has element type {element.spelling}, but {signature.label} requires "
            f"{allowed[0].spelling}"
        )
    spelled = ", ".join(scalar.spelling for scalar in allowed)
    return (
        f"{where} has element type {element.spelling}, which {signature.label} does not allow "
        f"for {formal.type_var} (allowed: {spelled})"
    )


# -- attributes ---------------------------------------------------------------------------------

_GRAPH_KINDS = (AttributeKind.GRAPH, AttributeKind.GRAPHS)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_float(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tensor_problem(value: object) -> str | None:
    """Why `value` is not a tensor attribute `{"dtype", "shape", "data"}`, or None."""
    if not isinstance(value, dict) or set(value) != {"dtype", "shape", "data"}:
        return "a tensor {dtype, shape, data}"
    try:
        element = ScalarType(value["dtype"])
    except ValueError:
        return "a tensor whose dtype is a Niro element type"
    shape = value["shape"]
    if not isinstance(shape, tuple) or not all(_is_int(dim) and dim >= 0 for dim in shape):
        return "a tensor whose shape is a tuple of non-negative ints"
    if not is_buffer(value["data"]):
        return "a tensor whose data is a buffer"
    problem = literal_problem(TensorType(element, shape), value["data"])
    return None if problem is None else f"a tensor whose data fits its dtype and shape ({problem})"


def _kind_checker(test: Callable[[object], bool], expected: str):
    return lambda value: None if test(value) else expected


def _tuple_of(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, tuple) and all(test(item) for item in value)


def _tensors_problem(value: object) -> str | None:
    if isinstance(value, tuple) and all(_tensor_problem(item) is None for item in value):
        return None
    return "a tuple of tensors {dtype, shape, data}"


_KIND_PROBLEMS: dict[AttributeKind, Callable[[object], str | None]] = {
    AttributeKind.INT: _kind_checker(_is_int, "an int"),
    AttributeKind.FLOAT: _kind_checker(_is_float, "a float"),
    AttributeKind.STRING: _kind_checker(lambda value: isinstance(value, str), "a str"),
    AttributeKind.INTS: _kind_checker(_tuple_of(_is_int), "a tuple of ints"),
    AttributeKind.FLOATS: _kind_checker(_tuple_of(_is_float), "a tuple of floats"),
    AttributeKind.STRINGS: _kind_checker(
        _tuple_of(lambda value: isinstance(value, str)), "a tuple of strs"
    ),
    AttributeKind.TENSOR: _tensor_problem,
    AttributeKind.TENSORS: _tensors_problem,
    AttributeKind.TYPE_PROTO: _kind_checker(lambda value: isinstance(value, str), "a str"),
    AttributeKind.TYPE_PROTOS: _kind_checker(
        _tuple_of(lambda value: isinstance(value, str)), "a tuple of strs"
    ),
    AttributeKind.GRAPH: lambda value: f"a region (named in attribute '{REGIONS_ATTRIBUTE}')",
    AttributeKind.GRAPHS: lambda value: (
        f"regions (named in attribute '{REGIONS_ATTRIBUTE}' as NAME#i)"
    ),
    AttributeKind.SPARSE_TENSOR: lambda value: "a sparse tensor, which Niro cannot hold",
    AttributeKind.SPARSE_TENSORS: lambda value: "sparse tensors, which Niro cannot hold",
}


def _check_attributes(
    signature: OpSignature, op: UnknownOp, attributes: dict, report: Report
) -> bool:
    sound = True

    def fail(message: str) -> None:
        nonlocal sound
        sound = False
        report("onnx-attribute", message)

    graphs = _graph_attributes(signature, op, attributes.get(REGIONS_ATTRIBUTE, ()), fail)
    for name, value in attributes.items():
        if name in BOOKKEEPING_ATTRIBUTES:
            continue
        spec = signature.attributes.get(name)
        if spec is None:
            fail(f"has attribute '{name}', which {signature.label} does not define")
            continue
        check = _KIND_PROBLEMS.get(spec[0])
        expected = None if check is None else check(value)
        if expected is not None:
            fail(
                f"attribute '{name}' must be {expected} ({kind_name(spec[0])} in {signature.label}), "
                f"got {_describe(value)}"
            )
    for name, (kind, required) in signature.attributes.items():
        if required and name not in attributes and name not in graphs:
            fail(f"is missing required attribute '{name}' ({kind_name(kind)} in {signature.label})")
    return sound


def _graph_attributes(
    signature: OpSignature, op: UnknownOp, names: object, fail: Callable[[str], None]
) -> set[str]:
    """The graph attributes the op's regions stand for (from `regions`), checked."""
    listed = region_names(names)
    if listed is None:
        fail(
            f"attribute '{REGIONS_ATTRIBUTE}' must be a tuple of graph attribute names, got "
            f"{_describe(names)}"
        )
        return set()
    if len(listed) != len(op.regions):
        fail(
            f"attribute '{REGIONS_ATTRIBUTE}' names {len(listed)} "
            f"region{'' if len(listed) == 1 else 's'}, but the op has {len(op.regions)}"
        )
    found: set[str] = set()
    for name in listed:
        base, _, index = name.partition("#")
        spec = signature.attributes.get(base)
        if spec is None or spec[0] not in _GRAPH_KINDS:
            fail(f"region '{name}' is not a graph attribute of {signature.label}")
            continue
        if (spec[0] is AttributeKind.GRAPHS) != index.isdigit():
            form = "NAME#i" if spec[0] is AttributeKind.GRAPHS else "NAME"
            fail(f"region '{name}' must be named {form} ({kind_name(spec[0])} in {signature.label})")
            continue
        found.add(base)
    return found


def _describe(value: object) -> str:
    if is_buffer(value):
        return f"{type(value).__name__} of {buffer_nbytes(value)} bytes"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


# -- registration -------------------------------------------------------------------------------


def _make_rule(domain: str, op_type: str):
    def onnx_schema_rule(op: UnknownOp, report: Report) -> None:
        check_onnx_op(domain, op_type, op, report)

    onnx_schema_rule.__qualname__ = f"onnx_schema_rule[{niro_op_name(domain, op_type)}]"
    return onnx_schema_rule


_SOURCE_REGISTERED: list[bool] = []


def register_onnx_type_rules() -> None:
    """Make niro.ir.verify check every op the installed onnx has a schema for; idempotent.

    The rules are made on demand (`register_op_type_rule_source`): the op's schema is looked up
    when verify() first meets its name, so start-up does not pay for listing all of ONNX.
    """
    if not _SOURCE_REGISTERED:
        register_op_type_rule_source(_schema_rule_for)
        _SOURCE_REGISTERED.append(True)


def _schema_rule_for(name: str):
    """The schema rule for the UnknownOp name `name` (`onnx.Relu`, `ai.onnx.ml.Scaler`)."""
    domain, _, op_type = name.rpartition(".")
    if domain == "onnx":
        domain = ""
    elif domain in ("", "ai.onnx"):  # NOTE: the default domain's ops are named `onnx.X` only
        return None
    if not op_type or not has_schema(domain, op_type):
        return None
    return _make_rule(domain, op_type)


def registered_type_rule_names() -> tuple[str, ...]:
    """The UnknownOp names this library has a type rule for."""
    return tuple(niro_op_name(domain, op_type) for domain, op_type in schema_op_names())
