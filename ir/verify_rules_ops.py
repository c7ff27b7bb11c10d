"""Per-op rules: field types, placement, CFG edges and type rules, one entry per op kind.

`OP_RULES` maps every member of the Op union to the function that checks it (an op kind with
no entry is an error at import). Each function reads the current op's site from the
`FunctionCheck` and reports under the rule ids of VERIFIER_RULES. UnknownOps get the generic
checks here plus, when an operator library registered one for their name, a type rule
(`register_op_type_rule`).

Operator libraries are found through the `niro.op_type_rules` entry points (the ONNX frontend
declares one in pyproject.toml), loaded the first time verify() meets an UnknownOp name that
no loaded library has a rule for: a module gets the same diagnostics whatever the process
imported before. ir itself still imports no library.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import metadata
from typing import Any

from .attributes import attribute_problem
from .literals import classify_literal_problem
from .ops import (
    OP_KINDS,
    Add,
    Branch,
    Call,
    CondBranch,
    Const,
    GetGlobal,
    If,
    MatMul,
    Mul,
    Return,
    TensorExtract,
    Transpose,
    UnknownOp,
    Yield,
)
from .shapes import broadcast_shapes, shape_refines
from .structure import Block, Function, FunctionType, Global, Region
from .types import ScalarType, TensorType, format_type
from .values import Value
from .verify_context import FunctionCheck, RegionKind, describe

__all__ = [
    "OP_RULES",
    "check_op_fields",
    "register_op_type_rule",
    "register_op_type_rule_source",
    "unregister_op_type_rule",
    "OpTypeRule",
    "OpTypeRuleSource",
]

ReportFn = Callable[..., None]
OpTypeRule = Callable[[UnknownOp, ReportFn], None]
"""`rule(op, report)`; `report(rule_id, message, *values)` records a diagnostic on `op`."""

OpTypeRuleSource = Callable[[str], "OpTypeRule | None"]
"""`source(op_name)`: the type rule for UnknownOps of that name, or None when it has none."""

_UNKNOWN_OP_TYPE_RULES: dict[str, OpTypeRule] = {}
_RULE_SOURCES: list[OpTypeRuleSource] = []
_NAMES_WITHOUT_RULE: set[str] = set()
_LIBRARIES_LOADED: list[bool] = []
OP_TYPE_RULE_ENTRY_POINTS = "niro.op_type_rules"
_RULE_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def register_op_type_rule(name: str, rule: OpTypeRule) -> None:
    """Register the type rule verify() runs on every UnknownOp named `name` (e.g. `onnx.Relu`).

    `rule(op, report)` inspects the op (its fields are already known to be well-typed) and calls
    `report(rule_id, message, *values)` for each problem: `rule_id` is kebab-case, `message`
    follows the op name (`'onnx.Relu' op <message>`), `values` are the Values involved. If the
    rule raises, verify() reports `internal-error` instead of propagating.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"an op type rule needs a non-empty op name, got {name!r}")
    if not callable(rule):
        raise TypeError(f"the type rule for '{name}' must be callable, got {rule!r}")
    if name in _UNKNOWN_OP_TYPE_RULES:
        raise ValueError(f"a type rule for '{name}' is already registered")
    _UNKNOWN_OP_TYPE_RULES[name] = rule
    _NAMES_WITHOUT_RULE.discard(name)


def register_op_type_rule_source(source: OpTypeRuleSource) -> None:
    """Register `source(name) -> rule | None`, asked once for each UnknownOp name that has no
    registered rule; its rule is then kept as if registered under that name.

    A library with hundreds of ops (the ONNX operator library) makes the rule of an op when
    verify() first meets it, instead of registering them all when it is imported: building the
    whole table cost ~40 ms of every niroc start-up. Sources are asked in the order
    they were registered; the first rule wins.
    """
    if not callable(source):
        raise TypeError(f"an op type rule source must be callable, got {source!r}")
    _RULE_SOURCES.append(source)
    _NAMES_WITHOUT_RULE.clear()


def unregister_op_type_rule(name: str) -> None:
    """Remove the type rule registered for `name` (KeyError when there is none)."""
    del _UNKNOWN_OP_TYPE_RULES[name]


def _load_operator_libraries() -> None:
    """Import every library declared under the `niro.op_type_rules` entry points, once; each
    registers its rules when imported (or when its entry point, a callable, is called)."""
    _LIBRARIES_LOADED.append(True)
    for entry_point in metadata.entry_points(group=OP_TYPE_RULE_ENTRY_POINTS):
        loaded = entry_point.load()
        if callable(loaded):
            loaded()


def _type_rule_for(name: object) -> OpTypeRule | None:
    if not isinstance(name, str):
        return None
    rule = _UNKNOWN_OP_TYPE_RULES.get(name)
    if rule is not None or name in _NAMES_WITHOUT_RULE:
        return rule
    if not _LIBRARIES_LOADED:
        _load_operator_libraries()
        rule = _UNKNOWN_OP_TYPE_RULES.get(name)
        if rule is not None:
            return rule
    for source in _RULE_SOURCES:
        rule = source(name)
        if rule is not None:
            _UNKNOWN_OP_TYPE_RULES[name] = rule
            return rule
    _NAMES_WITHOUT_RULE.add(name)
    return None


# -- field types ----------------------------------------------------------------------------


def _expect_value(value: object) -> str | None:
    return None if isinstance(value, Value) else "a Value"


def _expect_values(value: object) -> str | None:
    if isinstance(value, tuple) and all(isinstance(item, Value) for item in value):
        return None
    return "a tuple of Values"


def _expect_block(value: object) -> str | None:
    return None if isinstance(value, Block) else "a Block"


def _expect_blocks(value: object) -> str | None:
    if isinstance(value, tuple) and all(isinstance(item, Block) for item in value):
        return None
    return "a tuple of Blocks"


def _expect_region(value: object) -> str | None:
    return None if isinstance(value, Region) else "a Region"


def _expect_regions(value: object) -> str | None:
    if isinstance(value, tuple) and all(isinstance(item, Region) for item in value):
        return None
    return "a tuple of Regions"


def _expect_str(value: object) -> str | None:
    return None if isinstance(value, str) else "a str"


def _expect_optional_str(value: object) -> str | None:
    return None if value is None or isinstance(value, str) else "a str or None"


def _expect_ints(value: object) -> str | None:
    if isinstance(value, tuple) and all(
        isinstance(item, int) and not isinstance(item, bool) for item in value
    ):
        return None
    return "a tuple of ints"


def _expect_anything(value: object) -> str | None:
    return None


_VALUE = _expect_value
_VALUES = _expect_values
_LOC = ("loc", _expect_optional_str)

FIELD_SPECS: dict[type, tuple[tuple[str, Callable[[object], str | None]], ...]] = {
    # Const.literal and UnknownOp.attributes have rules of their own.
    Const: (("result", _VALUE), ("literal", _expect_anything), _LOC),
    GetGlobal: (("result", _VALUE), ("name", _expect_str), _LOC),
    Transpose: (("result", _VALUE), ("operand", _VALUE), ("permutation", _expect_ints), _LOC),
    TensorExtract: (("result", _VALUE), ("operand", _VALUE), ("indices", _VALUES), _LOC),
    Add: (("result", _VALUE), ("lhs", _VALUE), ("rhs", _VALUE), _LOC),
    Mul: (("result", _VALUE), ("lhs", _VALUE), ("rhs", _VALUE), _LOC),
    MatMul: (("result", _VALUE), ("lhs", _VALUE), ("rhs", _VALUE), _LOC),
    Call: (("callee", _expect_str), ("arguments", _VALUES), ("results", _VALUES), _LOC),
    Branch: (("target", _expect_block), ("arguments", _VALUES), _LOC),
    CondBranch: (
        ("condition", _VALUE),
        ("true_target", _expect_block),
        ("false_target", _expect_block),
        ("true_arguments", _VALUES),
        ("false_arguments", _VALUES),
        _LOC,
    ),
    Return: (("operands", _VALUES), _LOC),
    Yield: (("operands", _VALUES), _LOC),
    If: (
        ("results", _VALUES),
        ("condition", _VALUE),
        ("then_region", _expect_region),
        ("else_region", _expect_region),
        _LOC,
    ),
    UnknownOp: (
        ("name", _expect_str),
        ("operands", _VALUES),
        ("results", _VALUES),
        ("attributes", _expect_anything),
        ("regions", _expect_regions),
        ("successors", _expect_blocks),
        _LOC,
    ),
}

_MISSING = object()


def check_op_fields(check: FunctionCheck, op: object) -> bool:
    """Reports every field of the current op holding the wrong Python type; True when none does."""
    sound = True
    for name, expect in FIELD_SPECS[type(op)]:
        value = getattr(op, name, _MISSING)
        # Inline the two commonest checks: this runs once per op of every module verified.
        if expect is _expect_value:
            if isinstance(value, Value):
                continue
        elif expect is _expect_optional_str:
            if value is None or isinstance(value, str):
                continue
        problem = expect(value)
        if problem is not None:
            got = "nothing (unset)" if value is _MISSING else describe(value)
            check.fail("field-type", f"field '{name}' expects {problem}, got {got}")
            sound = False
    return sound


# -- shared helpers -------------------------------------------------------------------------


def _types_text(types: tuple) -> str:
    return "(" + ", ".join(format_type(type_) for type_ in types) + ")"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _check_value_types(
    check: FunctionCheck,
    rule: str,
    values: tuple[Value, ...],
    expected: tuple,
    what: str,
    against: str,
) -> None:
    """`values` must have the types `expected`, in number and order."""
    if len(values) != len(expected):
        check.fail(
            rule,
            f"{what}: got {_plural(len(values), 'value')} {_types_text(tuple(v.type for v in values))}, "
            f"expected {len(expected)} {_types_text(expected)} {against}",
            *values,
        )
        return
    for position, (value, want) in enumerate(zip(values, expected, strict=True)):
        if value.type != want:
            check.fail(
                rule,
                f"{what}: #{position} ({value.id}) has type {format_type(value.type)}, "
                f"expected {format_type(want)} {against}",
                value,
            )


def _resolve_edge(
    check: FunctionCheck, target: Block, arguments: tuple[Value, ...] | None, edge: str
) -> None:
    """Records a CFG edge of the current region; checks the target and the edge's arguments."""
    info = check.info
    assert info is not None
    index = info.index_of.get(id(target))
    if index is None:
        elsewhere = check.first_seen_block(target)
        where = f"a block at {elsewhere}" if elsewhere else "a block that is not in the region"
        check.fail(
            "branch-target-region",
            f"{edge}targets {where}; branches must stay in their immediately containing region",
        )
        return
    if index == 0:
        check.fail("branch-target-entry", f"{edge}targets ^bb0, the entry block of its region")
        return
    info.successors[check.block_index].append(index)
    if arguments is None or not isinstance(target.arguments, tuple):
        return
    parameters = tuple(arg for arg in target.arguments if isinstance(arg, Value))
    if len(arguments) != len(parameters):
        check.fail(
            "branch-arguments",
            f"{edge}passes {_plural(len(arguments), 'argument')} to ^bb{index}, which takes "
            f"{len(parameters)} {_types_text(tuple(p.type for p in parameters))}",
            *arguments,
        )
        return
    for position, (argument, parameter) in enumerate(zip(arguments, parameters, strict=True)):
        if argument.type != parameter.type:
            check.fail(
                "branch-arguments",
                f"{edge}argument #{position} ({argument.id}) has type {format_type(argument.type)}, "
                f"but ^bb{index} argument {parameter.id} has type {format_type(parameter.type)}",
                argument,
                parameter,
            )


def _in_if_arm(check: FunctionCheck) -> bool:
    """Reports a non-Yield terminator placed directly in an If arm."""
    assert check.info is not None
    if check.info.kind is RegionKind.IF_ARM:
        check.fail(
            "if-arm-terminator",
            "cannot terminate an If arm; an If arm ends with 'niro.yield'",
        )
        return True
    return False


# -- op rules -------------------------------------------------------------------------------


def _check_const(check: FunctionCheck, op: Const) -> None:
    type_ = op.result.type
    if (
        isinstance(type_, TensorType)
        and type_.shape
        and any(d is not None and d < 0 for d in type_.shape)
    ):
        return  # dim-non-negative already says it
    found = classify_literal_problem(type_, op.literal)
    if found is not None:
        kind, message = found
        rule = {
            "kind": "const-literal-type",
            "static-shape": "const-static-shape",
            "size": "const-literal-size",
        }[kind]
        check.fail(rule, message, op.result)


def _check_get_global(check: FunctionCheck, op: GetGlobal) -> None:
    target = check.symbols.get(op.name)
    if target is None:
        check.fail("get-global-symbol", f"refers to @{op.name}, which is not defined in the module")
    elif not isinstance(target, Global):
        check.fail("get-global-symbol", f"refers to @{op.name}, which is a function, not a global")
    elif target.type != op.result.type:
        check.fail(
            "get-global-type",
            f"result type {format_type(op.result.type)} does not match global @{op.name} of type "
            f"{describe(target.type)}",
            op.result,
        )


def _check_transpose(check: FunctionCheck, op: Transpose) -> None:
    operand = op.operand.type
    if not isinstance(operand, TensorType) or operand.shape is None:
        check.fail(
            "transpose-operand",
            f"expected a ranked tensor operand, got {format_type(operand)}",
            op.operand,
        )
        return
    rank = len(operand.shape)
    if sorted(op.permutation) != list(range(rank)):
        check.fail(
            "transpose-permutation",
            f"permutation {op.permutation} is not a permutation of range({rank}) for operand "
            f"{format_type(operand)}",
            op.operand,
        )
        return
    expected = TensorType(
        operand.element_type, tuple(operand.shape[axis] for axis in op.permutation)
    )
    result = op.result.type
    if not (
        isinstance(result, TensorType)
        and result.element_type is operand.element_type
        and shape_refines(result.shape, expected.shape)
    ):
        check.fail(
            "transpose-result-type",
            f"expected result type {format_type(expected)}, got {format_type(result)}",
            op.result,
        )


def _check_tensor_extract(check: FunctionCheck, op: TensorExtract) -> None:
    operand = op.operand.type
    if not isinstance(operand, TensorType) or operand.shape is None:
        check.fail(
            "tensor-extract-operand",
            f"expected a ranked tensor operand, got {format_type(operand)}",
            op.operand,
        )
    else:
        rank = len(operand.shape)
        if len(op.indices) != rank:
            check.fail(
                "tensor-extract-indices",
                f"expected {rank} {'index' if rank == 1 else 'indices'} for {format_type(operand)} (one per axis), "
                f"got {len(op.indices)}",
                *op.indices,
            )
    for position, index in enumerate(op.indices):
        if index.type not in (ScalarType.I32, ScalarType.I64):
            check.fail(
                "tensor-extract-indices",
                f"index #{position} ({index.id}) must be a scalar i32 or i64, got {format_type(index.type)}",
                index,
            )
    if isinstance(operand, TensorType) and op.result.type is not operand.element_type:
        check.fail(
            "tensor-extract-result-type",
            f"expected result type {format_type(operand.element_type)} (the element type of "
            f"{format_type(operand)}), got {format_type(op.result.type)}",
            op.result,
        )


def _arith_rule(short: str) -> Callable[[FunctionCheck, Add | Mul], None]:
    def check_arith(check: FunctionCheck, op: Add | Mul) -> None:
        lhs, rhs, result = op.lhs.type, op.rhs.type, op.result.type
        key = (short, id(lhs), id(rhs), id(result))
        if key in check.valid_types:
            return
        if _arith_problem(check, op, lhs, rhs, result):
            return
        check.valid_types.add(key)

    def _arith_problem(check: FunctionCheck, op: Add | Mul, lhs, rhs, result) -> bool:
        """Reports the first problem of the operand and result types; True when there is one."""
        if isinstance(lhs, ScalarType) and isinstance(rhs, ScalarType):
            if lhs is not rhs:
                check.fail(
                    f"{short}-operands",
                    f"expected operands of one scalar type, got {lhs.spelling} and {rhs.spelling}",
                    op.lhs,
                    op.rhs,
                )
                return True
            if lhs.is_bool:
                check.fail(
                    f"{short}-bool", "does no arithmetic on i1 (BOOL) operands", op.lhs, op.rhs
                )
                return True
            if result is not lhs:
                check.fail(
                    f"{short}-result-type",
                    f"expected result type {lhs.spelling}, got {format_type(result)}",
                    op.result,
                )
                return True
            return False
        if not (isinstance(lhs, TensorType) and isinstance(rhs, TensorType)):
            check.fail(
                f"{short}-operands",
                f"expected two scalars or two tensors, got {format_type(lhs)} and {format_type(rhs)}",
                op.lhs,
                op.rhs,
            )
            return True
        element = lhs.element_type
        if element is not rhs.element_type:
            check.fail(
                f"{short}-operands",
                f"expected tensors of one element type, got {format_type(lhs)} and {format_type(rhs)}",
                op.lhs,
                op.rhs,
            )
            return True
        if element.is_bool:
            check.fail(
                f"{short}-bool",
                f"does no arithmetic on i1 (BOOL) elements, got {format_type(lhs)}",
                op.lhs,
                op.rhs,
            )
            return True
        try:
            shape = broadcast_shapes(lhs.shape, rhs.shape)
        except ValueError as error:
            check.fail(f"{short}-broadcast", f"operand {error}", op.lhs, op.rhs)
            return True
        if not (
            isinstance(result, TensorType)
            and result.element_type is element
            and shape_refines(result.shape, shape)
        ):
            expected = format_type(TensorType(element, shape))
            check.fail(
                f"{short}-result-type",
                f"expected result type {expected} (the broadcast of {format_type(lhs)} and "
                f"{format_type(rhs)}), got {format_type(result)}",
                op.result,
            )
            return True
        return False

    return check_arith


def _check_matmul(check: FunctionCheck, op: MatMul) -> None:
    lhs, rhs = op.lhs.type, op.rhs.type
    not_matrices = [
        format_type(type_)
        for type_ in (lhs, rhs)
        if not (isinstance(type_, TensorType) and type_.rank == 2)
    ]
    if not_matrices:
        check.fail(
            "matmul-rank",
            f"expected rank-2 operands, got {' and '.join(not_matrices)}",
            op.lhs,
            op.rhs,
        )
        return
    assert isinstance(lhs, TensorType) and isinstance(rhs, TensorType)
    if lhs.element_type is not rhs.element_type:
        check.fail(
            "matmul-element-type",
            f"expected operands of one element type, got {format_type(lhs)} and {format_type(rhs)}",
            op.lhs,
            op.rhs,
        )
        return
    if lhs.element_type.is_bool:
        check.fail(
            "matmul-bool",
            f"does no arithmetic on i1 (BOOL) elements, got {format_type(lhs)}",
            op.lhs,
            op.rhs,
        )
        return
    (rows, lhs_k), (rhs_k, columns) = lhs.shape, rhs.shape  # type: ignore[misc]
    if lhs_k is not None and rhs_k is not None and lhs_k != rhs_k:
        check.fail(
            "matmul-contraction",
            f"contraction dims differ: lhs {format_type(lhs)} has K={lhs_k}, rhs {format_type(rhs)} has K={rhs_k}",
            op.lhs,
            op.rhs,
        )
        return
    expected = TensorType(lhs.element_type, (rows, columns))
    result = op.result.type
    if not (
        isinstance(result, TensorType)
        and result.element_type is lhs.element_type
        and shape_refines(result.shape, expected.shape)
    ):
        check.fail(
            "matmul-result-type",
            f"expected result type {format_type(expected)}, got {format_type(result)}",
            op.result,
        )


def _check_call(check: FunctionCheck, op: Call) -> None:
    target = check.symbols.get(op.callee)
    if target is None:
        check.fail("call-callee", f"calls @{op.callee}, which is not defined in the module")
        return
    if not isinstance(target, Function):
        check.fail("call-callee", f"calls @{op.callee}, which is a global, not a function")
        return
    signature = target.type
    if not isinstance(signature, FunctionType):
        return  # field-type is reported on the callee
    against = f"by @{op.callee}'s signature"
    _check_value_types(
        check, "call-signature", op.arguments, signature.inputs, "arguments", against
    )
    _check_value_types(check, "call-signature", op.results, signature.outputs, "results", against)


def _check_branch(check: FunctionCheck, op: Branch) -> None:
    if not _in_if_arm(check):
        _resolve_edge(check, op.target, op.arguments, "")


def _check_bool_condition(check: FunctionCheck, rule: str, condition: Value) -> None:
    if condition.type is not ScalarType.BOOL:
        check.fail(
            rule, f"expected a scalar i1 condition, got {format_type(condition.type)}", condition
        )


def _check_cond_branch(check: FunctionCheck, op: CondBranch) -> None:
    _check_bool_condition(check, "cond-branch-condition", op.condition)
    if not _in_if_arm(check):
        _resolve_edge(check, op.true_target, op.true_arguments, "true edge ")
        _resolve_edge(check, op.false_target, op.false_arguments, "false edge ")


def _check_return(check: FunctionCheck, op: Return) -> None:
    info = check.info
    assert info is not None
    if info.kind is RegionKind.IF_ARM:
        _in_if_arm(check)
    elif info.kind is RegionKind.OPAQUE:
        check.fail(
            "return-placement",
            "is only valid in a function body region; nested regions end with 'niro.yield'",
        )
    elif check.outputs is not None:
        _check_value_types(
            check,
            "return-types",
            op.operands,
            check.outputs,
            "operands",
            f"by @{check.symbol}'s outputs",
        )


def _check_yield(check: FunctionCheck, op: Yield) -> None:
    info = check.info
    assert info is not None
    if info.kind is RegionKind.FUNCTION_BODY:
        check.fail(
            "yield-placement",
            "is only valid in a nested region; a function body ends with 'niro.return'",
        )
    elif info.kind is RegionKind.IF_ARM:
        owner = info.owner
        assert isinstance(owner, If)
        arm = "then" if info.owner_index == 0 else "else"
        _check_value_types(
            check,
            "if-yield-types",
            op.operands,
            tuple(result.type for result in owner.results),
            f"yielded values of the {arm} arm",
            "by the If results",
        )


def _check_if(check: FunctionCheck, op: If) -> None:
    _check_bool_condition(check, "if-condition", op.condition)


def _check_unknown(check: FunctionCheck, op: UnknownOp) -> None:
    if not op.name:
        check.fail("unknown-op-name", "has an empty name; an UnknownOp is named like 'onnx.Relu'")
    attributes = op.attributes
    if not isinstance(attributes, dict):
        check.fail(
            "unknown-op-attributes", f"attributes must be a dict, got {describe(attributes)}"
        )
    else:
        problem = attribute_problem(attributes)
        if problem is not None:
            check.fail("unknown-op-attributes", f"has an invalid attribute: {problem}")
    if op.successors and not _in_if_arm(check):
        for position, target in enumerate(op.successors):
            _resolve_edge(check, target, None, f"successor #{position} ")
    rule = _type_rule_for(op.name)
    if rule is not None:
        _run_registered_rule(check, op, rule)


def _run_registered_rule(check: FunctionCheck, op: UnknownOp, rule: OpTypeRule) -> None:
    path = check.op_path()

    def report(rule_id: str, message: str, *values: Value) -> None:
        if not isinstance(rule_id, str) or not _RULE_ID.match(rule_id):
            raise ValueError(f"rule ids are kebab-case, got {rule_id!r}")
        check.fail_at(rule_id, f"'{op.name}' op {message}", path, op, values, registered=True)

    try:
        rule(op, report)
    except Exception as error:  # a library's bug must not become the user's traceback
        check.fail_at(
            "internal-error",
            f"'{op.name}' op type rule {getattr(rule, '__name__', rule)!r} raised "
            f"{type(error).__name__}: {error}",
            path,
            op,
        )


OP_RULES: dict[type, Callable[[FunctionCheck, Any], None]] = {
    Const: _check_const,
    GetGlobal: _check_get_global,
    Transpose: _check_transpose,
    TensorExtract: _check_tensor_extract,
    Add: _arith_rule("add"),
    Mul: _arith_rule("mul"),
    MatMul: _check_matmul,
    Call: _check_call,
    Branch: _check_branch,
    CondBranch: _check_cond_branch,
    Return: _check_return,
    Yield: _check_yield,
    If: _check_if,
    UnknownOp: _check_unknown,
}

_missing = [kind.__name__ for kind in OP_KINDS if kind not in OP_RULES or kind not in FIELD_SPECS]
if _missing:
    raise AssertionError(f"op kinds without verifier rules: {', '.join(_missing)}")
