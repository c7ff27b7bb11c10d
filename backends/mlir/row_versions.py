"""One version of a function body per row count: the products that run in two versions chosen
at run time by their number of rows (`builders.contraction._versioned`) are chosen once, at the
top of the function, when there are several.

Why: each versioned product is an `scf.if` between the function's tensor ops, and IREE (3.13)
cuts the device work at every one: onnxruntime-genai's fp32 Llama made about 40 submissions a
decode step, and on 2 cores the host, waiting on each layer's outputs in turn, often stalls the
worker that signals them (see `early_checks.py`): 9-11 ms a step where the same model with its
rows fixed by `--dim` (no versions, one submission) runs 6-7. With the choice made once, the
step is one submission again.

How: where a function's top level holds at least two versioned products whose conditions are
computed from its arguments' sizes alone (after `early_checks`, which reads the sizes calls
make from their operands), the body after its opening checks is held twice in one `scf.if` on
the conjunction of those conditions: the "few rows" body takes the static version of each of
those products (each condition holds there), the other body is the function as it was (each
product still chooses). The MLIR grows by the body once; the work on weights alone (their
reads, transposes, unpacking) stays above the choice, shared. A private function whose body
holds a versioned product (an int4 MatMulNBits') is inlined where such calls add up to several
versions, since IREE would inline it anyway and each call would cut the function again.
"""

from __future__ import annotations

from .bindings import arith, mlir_ir, scf
from .builders import VERSION_ATTRIBUTE
from .early_checks import (
    call_sites,
    callee_name,
    clone_ops,
    functions_by_name,
    is_private,
    is_size_op,
    opening_ops,
    resolve_sizes,
    size_slice,
)

__all__ = ["choose_row_versions_once", "inline_versioned_calls"]

_LEAST_VERSIONS = 2
"""Fewer versioned products than this are left as they are: one `scf.if` costs less than a
second copy of the body."""


def inline_versioned_calls(module: mlir_ir.Module) -> bool:
    """Inlines, into each public function of `module`, the calls of private functions whose
    body holds a versioned product at its top level (an int4 MatMulNBits' body), where the
    function then holds at least `_LEAST_VERSIONS` of them, so that `choose_row_versions_once`
    sees them; functions no longer called are dropped. True when any call was inlined. Runs
    before `early_checks.hoist_checks`, which then resolves the inlined sizes."""
    functions = functions_by_name(module)
    holding = {
        name
        for name, function in functions.items()
        if is_private(function)
        and len(function.regions[0].blocks) == 1
        and any(_is_version(op.operation) for op in function.regions[0].blocks[0].operations)
    }
    inlined: set[str] = set()
    for function in functions.values():
        if is_private(function):
            continue
        block = function.regions[0].blocks[0]
        operations = [op.operation for op in block.operations]
        calls = [op for op in operations if op.name == "func.call" and callee_name(op) in holding]
        own = sum(1 for op in operations if _is_version(op))
        if not calls or own + len(calls) < _LEAST_VERSIONS:
            continue
        for call in calls:
            callee = callee_name(call)
            _inline(call, functions[callee])
            inlined.add(callee)
    for name in inlined - set(call_sites(functions)):
        functions[name].erase()
    return bool(inlined)


def _is_version(operation: mlir_ir.Operation) -> bool:
    return operation.name == "scf.if" and VERSION_ATTRIBUTE in operation.attributes


def _inline(call: mlir_ir.Operation, callee: mlir_ir.Operation) -> None:
    """Replaces `call` by a copy of `callee`'s body (one block) on the call's operands."""
    block = callee.regions[0].blocks[0]
    operations = [op.operation for op in block.operations]
    mapping = dict(zip(block.arguments, call.operands, strict=True))
    clone_ops(operations[:-1], mapping, mlir_ir.InsertionPoint(call))
    for result, value in zip(call.results, operations[-1].operands, strict=True):
        result.replace_all_uses_with(mapping.get(value, value))
    call.erase()


def choose_row_versions_once(module: mlir_ir.Module) -> bool:
    """Chooses the row versions once per public function of `module` (see the module
    docstring); True when any function changed. Runs in the module's context."""
    changed = False
    for operation in functions_by_name(module).values():
        if is_private(operation):
            continue  # private: its calls are inlined where the choice is made
        blocks = operation.regions[0].blocks
        if len(blocks) != 1 or list(blocks[0].operations)[-1].operation.name != "func.return":
            continue
        versions = sum(1 for inner in blocks[0].operations if _is_version(inner.operation))
        if versions >= _LEAST_VERSIONS:
            resolve_sizes(operation)  # a product's rows from the sizes before the products
            changed |= _choose_once(blocks[0])
    return changed


def _choose_once(block: mlir_ir.Block) -> bool:
    operations = [op.operation for op in block.operations]
    order = {operation: index for index, operation in enumerate(operations)}
    chosen: list[tuple[mlir_ir.Operation, set]] = []
    for operation in operations:
        if not _is_version(operation):
            continue
        condition = operation.operands[0].owner
        if isinstance(condition, mlir_ir.Block) or not is_size_op(condition.name):
            continue
        members, anchors = size_slice([condition.operation], order)
        if not anchors:
            chosen.append((operation, members | {condition.operation}))
    if len(chosen) < _LEAST_VERSIONS:
        return False
    split = len(opening_ops(block))
    ret = operations[-1]
    body = operations[split:-1]
    if not body or any(version not in body for version, _ in chosen):
        return False
    moved = _move_constant_work_above(block.arguments, operations[:split], body)
    body = [operation for operation in body if operation not in moved]
    start = body[0]
    needed = set().union(*(members for _, members in chosen))
    mapping: dict = {}
    clone_ops(sorted(needed, key=order.__getitem__), mapping, mlir_ir.InsertionPoint(start))
    with mlir_ir.InsertionPoint(start), start.location:
        conditions = [mapping[version.operands[0]] for version, _ in chosen]
        few = conditions[0]
        for condition in conditions[1:]:
            few = arith.AndIOp(few, condition).result
        branch = scf.IfOp(few, [value.type for value in ret.operands], has_else=True)
    copies = _clone_into(body, ret, branch.then_block)
    for version, _ in chosen:
        _take_then_region(copies[version])
    with mlir_ir.InsertionPoint(branch.else_block), ret.location:
        kept = scf.YieldOp(list(ret.operands))
    for operation in body:
        operation.move_before(kept)
    for position, result in enumerate(branch.results):
        ret.operands[position] = result
    return True


def _move_constant_work_above(
    arguments, opening: list[mlir_ir.Operation], body: list[mlir_ir.Operation]
) -> set[mlir_ir.Operation]:
    """Moves the ops of `body` (which follows the function's `opening`) that read nothing its
    `arguments` reach (a weight read, transposed or unpacked from a Global) above the first
    that does, in order, so that the two bodies share them: IREE (3.13) evaluates such work
    once at load time only outside an `scf.if` (inside one, an int4 Llama's step unpacked its
    weights on every call: 6.5 -> 26 ms). Returns the ops moved."""
    variable: set = set(arguments)  # what the arguments reach
    for operation in opening:
        if any(value in variable for value in _outer_operands(operation)):
            variable.update(operation.results)
    constant: list[mlir_ir.Operation] = []
    for operation in body:
        if operation.name in _STAYS or any(
            value in variable for value in _outer_operands(operation)
        ):
            variable.update(operation.results)
        else:
            constant.append(operation)
    moved = set(constant)
    anchor = next((operation for operation in body if operation not in moved), None)
    if anchor is None:
        return set()
    for operation in constant:
        operation.move_before(anchor)
    return moved


_STAYS = frozenset({"cf.assert", "func.call", "scf.if", "scf.for", "scf.while"})
"""Ops that stay in the bodies whatever they read: checks, calls and control flow."""


def _outer_operands(operation: mlir_ir.Operation) -> list[mlir_ir.Value]:
    """The values `operation` reads, in its nested regions too, that it does not define."""
    inside: set = set()
    reads: list = []

    def visit(inner) -> mlir_ir.WalkResult:
        for region in inner.regions:
            for block in region.blocks:
                inside.update(block.arguments)
        inside.update(inner.results)
        reads.extend(inner.operands)
        return mlir_ir.WalkResult.ADVANCE

    operation.walk(visit)
    return [value for value in reads if value not in inside]


def _clone_into(
    body: list[mlir_ir.Operation], ret: mlir_ir.Operation, block: mlir_ir.Block
) -> dict[mlir_ir.Operation, mlir_ir.Operation]:
    """Copies of `body` at the end of `block` (`clone_ops`), then a yield of what `ret`
    returns; the copy of each op, by op."""
    mapping: dict = {}
    copies = clone_ops(body, mapping, mlir_ir.InsertionPoint(block))
    with mlir_ir.InsertionPoint(block), ret.location:
        scf.YieldOp([mapping.get(value, value) for value in ret.operands])
    return copies


def _take_then_region(branch: mlir_ir.Operation) -> None:
    """Replaces the `scf.if` `branch` by the ops of its then-region."""
    block = branch.regions[0].blocks[0]
    inner = [op.operation for op in block.operations]
    for operation in inner[:-1]:
        operation.move_before(branch)
    for result, value in zip(branch.results, inner[-1].operands, strict=True):
        result.replace_all_uses_with(value)
    branch.erase()
