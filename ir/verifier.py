"""The Niro IR verifier: `verify(module)` returns every problem as a Diagnostic.

It checks each rule of the spec's validity sections; each rule is a named entry of
VERIFIER_RULES (verify_table.py). This module checks the module level (symbols, globals,
function signatures) and drives the two per-function passes: structure (verify_structure:
regions, blocks, ops, CFG, dominator trees) and uses (verify_ssa: dominance). It never raises on
malformed input: the verifier guards the CLI against hostile IR, so a wrong Python type in a
field is a `field-type` diagnostic, and a crash is an `internal-error` diagnostic naming the
function. Linear in the module's size.
"""

from __future__ import annotations

from typing import Any

from .diagnostics import Diagnostic, Location
from .literals import classify_literal_problem
from .structure import Function, FunctionType, Global, Module, Region
from .verify_context import FunctionCheck, Reporter, check_type, describe
from .verify_rules_ops import (
    register_op_type_rule,
    register_op_type_rule_source,
    unregister_op_type_rule,
)
from .verify_ssa import check_uses
from .verify_structure import check_regions
from .verify_table import VERIFIER_RULES, VerifierRule

__all__ = [
    "verify",
    "VERIFIER_RULES",
    "VerifierRule",
    "register_op_type_rule",
    "register_op_type_rule_source",
    "unregister_op_type_rule",
]

_INITIALIZER_RULES = {
    "kind": "global-initializer-type",
    "static-shape": "global-static-shape",
    "size": "global-initializer-size",
}


def verify(module: Module) -> list[Diagnostic]:
    """Every problem in `module`, in a deterministic order; [] when it is valid."""
    reporter = Reporter()
    if not isinstance(module, Module):
        reporter.report("field-type", f"expected a Module, got {describe(module)}", Location())
        return reporter.diagnostics
    globals_ = _items(reporter, module.globals, Global, "Module.globals")
    functions = _items(reporter, module.functions, Function, "Module.functions")
    symbols = _collect_symbols(reporter, globals_, functions)
    for global_ in globals_:
        try:
            _check_global(reporter, global_)
        except Exception as error:  # e.g. a hostile buffer whose len() raises
            symbol = global_.name if isinstance(global_.name, str) else None
            _report_crash(reporter, error, symbol, "global")
    seen_blocks: dict = {}  # id(Block) -> where first seen (symbol, RegionInfo, index)
    seen_regions: dict = {}  # id(Region) -> where first seen (symbol, RegionInfo)
    for function in functions:
        symbol = function.name if isinstance(function.name, str) else None
        try:
            _check_function(reporter, symbols, function, symbol, seen_blocks, seen_regions)
        except Exception as error:  # never a traceback for the user; the diagnostic says it is ours
            _report_crash(reporter, error, symbol, "function")
    return reporter.diagnostics


def _report_crash(reporter: Reporter, error: Exception, symbol: str | None, kind: str) -> None:
    reporter.report(
        "internal-error",
        f"the verifier failed on this {kind} ({type(error).__name__}: {error}); this is a bug in "
        "niroc, please report it",
        Location(symbol=symbol),
    )


def _items(reporter: Reporter, items: object, kind: type, what: str) -> list[Any]:
    if not isinstance(items, (list, tuple)):
        reporter.report("field-type", f"{what} expects a list, got {describe(items)}", Location())
        return []
    good = []
    for position, item in enumerate(items):
        if isinstance(item, kind):
            good.append(item)
        else:
            reporter.report(
                "field-type",
                f"{what}[{position}] expects a {kind.__name__}, got {describe(item)}",
                Location(),
            )
    return good


def _collect_symbols(
    reporter: Reporter, globals_: list[Global], functions: list[Function]
) -> dict[str, Global | Function]:
    symbols: dict[str, Global | Function] = {}
    entries: list[Global | Function] = [*globals_, *functions]
    for entry in entries:
        kind = "global" if isinstance(entry, Global) else "function"
        name = entry.name
        if not isinstance(name, str) or not name:
            reporter.report(
                "symbol-name",
                f"a {kind} name must be a non-empty str, got {describe(name)}",
                Location(),
            )
            continue
        previous = symbols.get(name)
        if previous is not None:
            first = "global" if isinstance(previous, Global) else "function"
            reporter.report(
                "symbol-unique",
                f"symbol @{name} is defined twice (a {first}, then a {kind}); globals and functions "
                "share one namespace",
                Location(symbol=name),
            )
            continue
        symbols[name] = entry
    return symbols


def _type_reporter(reporter: Reporter, symbol: str | None):
    def report(rule: str, message: str) -> None:
        reporter.report(rule, message, Location(symbol=symbol))

    return report


def _check_global(reporter: Reporter, global_: Global) -> None:
    symbol = global_.name if isinstance(global_.name, str) else None
    report = _type_reporter(reporter, symbol)
    type_ = global_.type
    if not check_type(type_, f"global @{symbol}", report):
        return
    found = classify_literal_problem(type_, global_.initializer)
    if found is not None:
        kind, message = found
        report(_INITIALIZER_RULES[kind], f"global @{symbol} initializer: {message}")


def _check_function(
    reporter: Reporter,
    symbols: dict[str, Global | Function],
    function: Function,
    symbol: str | None,
    seen_blocks: dict,
    seen_regions: dict,
) -> None:
    report = _type_reporter(reporter, symbol)
    signature = function.type
    # The signature's sides, or None when malformed (then nothing is compared against them).
    inputs: tuple | None = None
    outputs: tuple | None = None
    if not isinstance(signature, FunctionType):
        report("field-type", f"Function.type expects a FunctionType, got {describe(signature)}")
    else:
        sides = []
        for side, types in (("input", signature.inputs), ("output", signature.outputs)):
            sound = [
                check_type(type_, f"{side} #{position}", report)
                for position, type_ in enumerate(types)
            ]
            sides.append(types if all(sound) else None)
        inputs, outputs = sides
        _check_io_names(
            report, function.input_names, len(signature.inputs), "input_names", "inputs"
        )
        _check_io_names(
            report, function.output_names, len(signature.outputs), "output_names", "outputs"
        )
    body = function.body
    if body is None:
        return
    if not isinstance(body, Region):
        report("field-type", f"Function.body expects a Region or None, got {describe(body)}")
        return
    check = FunctionCheck(reporter, symbols, function, symbol, seen_blocks, seen_regions)
    check.outputs = outputs
    root = check_regions(check, body)
    if inputs is not None and root.blocks and root.blocks[0][0] == 0:
        arguments = root.blocks[0][1].arguments
        if isinstance(arguments, tuple):
            got = tuple(getattr(argument, "type", None) for argument in arguments)
            if got != inputs:
                check.fail_at(
                    "function-entry-args",
                    f"entry block arguments have types {_types(got)}, but the signature's inputs are "
                    f"{_types(inputs)}",
                    ("^bb0",),
                    None,
                    arguments,
                )
    check_uses(check, root)


def _types(types: tuple) -> str:
    return "(" + ", ".join(describe(type_) for type_ in types) + ")"


def _check_io_names(report, names: object, arity: int, field: str, side: str) -> None:
    if names is None:
        return
    if not isinstance(names, tuple):
        report("function-io-names", f"{field} must be a tuple or None, got {describe(names)}")
        return
    if len(names) != arity:
        report(
            "function-io-names",
            f"{field} has {len(names)} entries, but the function has {arity} {side}",
        )
    for position, name in enumerate(names):
        if name is not None and (not isinstance(name, str) or not name):
            report(
                "function-io-names",
                f"{field}[{position}] must be a non-empty str or None, got {describe(name)}",
            )
