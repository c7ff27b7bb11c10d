"""Run-time checks first: moves each top-level `cf.assert` of a function as early as its
condition allows, so the sizes a call is checked against are all checked before any heavy op.

Why: the lowerings put a size check (`builders/checks.py`) right before the op that relies on
it, between the ops that compute tensors. IREE (3.13) cannot move an assert across the tensor
ops around it, so every assert left between two of them cuts the function's device work into one
more command submission (`stream.cmd.execute`) and host round trip: the dynamic GPT/Llama
decoders of the run-time bench made 9-11 submissions where iree-import-onnx's made 5-7, and spent
a third of a call more. A check's condition is nearly always plain index arithmetic on the
inputs' dims once each `tensor.dim` of a computed tensor is resolved to the dims it was made from
(MLIR's `resolve-ranked-shaped-type-result-dims`), so the check can sit with the others at the top.

What moves: an assert and the ops of its condition's backward slice that are pure and cheap
(`arith`, `tensor.dim`, small shape-tensor ops); the slice lands right after the last op it
reads that does not move. Asserts keep their order (a call that breaks two checks still reports
the first one), and nothing moves above a loop, a branch or a call (they may hold checks of
their own). Checks in nested regions stay where they are. This module must not change what a
check tests or drop one.
"""

from __future__ import annotations

from .bindings import PassManager, arith, mlir_ir
from .builders import index_constant

__all__ = ["hoist_checks"]

_RESOLVE_DIMS = "builtin.module(func.func(resolve-ranked-shaped-type-result-dims))"

_MOVABLE = frozenset(
    {
        "tensor.dim",
        "tensor.extract",
        "tensor.from_elements",
        "tensor.expand_shape",
        "tensor.collapse_shape",
    }
)
"""Ops besides `arith`'s that may move up with a check's condition: pure, and on sizes or on
the small shape tensors sizes are read from."""

_BARRIERS = ("cf.assert", "func.call", "scf.")
"""Ops nothing moves above: other checks (order kept), and ops that may hold checks inside."""


def hoist_checks(module: mlir_ir.Module) -> bool:
    """Moves the top-level checks of every function of `module` up (see the module docstring);
    True when any op moved. Runs in the module's context."""
    functions = [
        op
        for op in module.body.operations
        if op.operation.name == "func.func" and op.regions[0].blocks and _has_check(op)
    ]
    if not functions:
        return False
    PassManager.parse(_RESOLVE_DIMS).run(module.operation)
    _lower_deep_affine_applies(module)
    moved = False
    for function in functions:
        block = function.regions[0].blocks[0]
        _resolve_reshape_dims(block)
        moved |= _hoist_in_block(block)
    return moved


_DEEPEST_AFFINE = 32
"""The deepest `affine.apply` expression the dim resolution may leave (see below)."""


def _lower_deep_affine_applies(module: mlir_ir.Module) -> None:
    """Each `affine.apply` that the dim resolution made with an expression nested deeper than
    `_DEEPEST_AFFINE` becomes the `arith` ops it computes (sums and products of its operands
    and constants; one with a division or modulo stays).

    NOTE: the resolved size of a `tensor.concat` is an affine sum of its operands' sizes,
    nested as deep as it has operands, and IREE 3.13 cannot read an affine expression nested
    more than 64 deep from bytecode: iree-compile fails with "AffineExpr work stack overflow"
    on the .mlirbc (which `niroc check` and `.mlirbc` output use) of torchvision's SSDlite,
    whose post-processing concatenates the top-k of its 90 classes. Text reads fine."""
    applies: list[mlir_ir.Operation] = []

    def visit(op) -> mlir_ir.WalkResult:
        if op.name == "affine.apply":
            applies.append(op)
        return mlir_ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in applies:
        affine_map = mlir_ir.AffineMapAttr(op.attributes["map"]).value
        if len(affine_map.results) != 1 or not _deep_sum_of_products(affine_map.results[0]):
            continue
        with mlir_ir.InsertionPoint(op), op.location:
            value = _arith(affine_map.results[0], list(op.operands), affine_map.n_dims)
        op.results[0].replace_all_uses_with(value)
        op.erase()


def _deep_sum_of_products(expr: mlir_ir.AffineExpr) -> bool:
    """Whether `expr` nests deeper than `_DEEPEST_AFFINE` and has no division or modulo."""
    pending, deepest = [(expr, 1)], 0
    while pending:
        current, depth = pending.pop()
        deepest = max(deepest, depth)
        current = current.maybe_downcast()
        if isinstance(current, (mlir_ir.AffineAddExpr, mlir_ir.AffineMulExpr)):
            pending += [(current.lhs, depth + 1), (current.rhs, depth + 1)]
        elif isinstance(current, mlir_ir.AffineBinaryExpr):
            return False
    return deepest > _DEEPEST_AFFINE


def _arith(expr: mlir_ir.AffineExpr, operands: list[mlir_ir.Value], dims: int) -> mlir_ir.Value:
    """`expr` (sums and products) of the `affine.apply` operands (dims, then symbols) in
    `arith` index ops."""
    expr = expr.maybe_downcast()
    if isinstance(expr, mlir_ir.AffineDimExpr):
        return operands[expr.position]
    if isinstance(expr, mlir_ir.AffineSymbolExpr):
        return operands[dims + expr.position]
    if isinstance(expr, mlir_ir.AffineConstantExpr):
        return index_constant(expr.value)
    assert isinstance(expr, (mlir_ir.AffineAddExpr, mlir_ir.AffineMulExpr))
    lhs, rhs = _arith(expr.lhs, operands, dims), _arith(expr.rhs, operands, dims)
    build = arith.AddIOp if isinstance(expr, mlir_ir.AffineAddExpr) else arith.MulIOp
    return build(lhs, rhs).result


def _has_check(function) -> bool:
    return any(op.operation.name == "cf.assert" for op in function.regions[0].blocks[0].operations)


def _movable(name: str) -> bool:
    return name.startswith("arith.") or name in _MOVABLE


def _resolve_reshape_dims(block: mlir_ir.Block) -> None:
    """Each `tensor.dim` of a `tensor.reshape` result whose shape is built by
    `tensor.from_elements` of indices reads that element instead: the size it was made from,
    known before the reshaped data is (MLIR's dim resolution does not see through
    `tensor.reshape`)."""
    for op in list(block.operations):
        operation = op.operation
        if operation.name != "tensor.dim":
            continue
        source, axis = (operand.owner for operand in operation.operands)
        if isinstance(source, mlir_ir.Block) or isinstance(axis, mlir_ir.Block):
            continue
        if source.name != "tensor.reshape" or axis.name != "arith.constant":
            continue
        shape = source.operands[1].owner
        if isinstance(shape, mlir_ir.Block) or shape.name != "tensor.from_elements":
            continue
        size = shape.operands[mlir_ir.IntegerAttr(axis.attributes["value"]).value]
        if size.type != operation.results[0].type:
            continue
        operation.results[0].replace_all_uses_with(size)
        operation.erase()


def _hoist_in_block(block: mlir_ir.Block) -> bool:
    moved = False
    barrier: mlir_ir.Operation | None = None  # the last check placed, or loop/call passed
    for op in list(block.operations):
        operation = op.operation
        name = operation.name
        if name != "cf.assert":
            if name.startswith(_BARRIERS):
                barrier = operation
            continue
        order = {candidate.operation: index for index, candidate in enumerate(block.operations)}
        members, anchors = _slice(operation, order)
        if barrier is not None:
            anchors.append(barrier)
        floor = max((order[anchor] for anchor in anchors), default=-1)
        to_move = sorted(
            (member for member in members if order[member] > floor), key=order.__getitem__
        )
        to_move.append(operation)
        if order[operation] - floor > len(to_move):  # something else sits between: move
            after = block.operations[floor] if floor >= 0 else None
            for member in to_move:
                if after is None:
                    member.move_before(block.operations[0])
                else:
                    member.move_after(after)
                after = member
            moved = True
        barrier = operation
    return moved


def _slice(check: mlir_ir.Operation, order: dict) -> tuple[set, list]:
    """The movable ops `check`'s condition is computed by (in this block), and the ops of this
    block they read that cannot move (`anchors`)."""
    members: set = set()
    anchors: list = []
    pending = [check]
    while pending:
        for operand in pending.pop().operands:
            owner = operand.owner
            if isinstance(owner, mlir_ir.Block):
                continue
            owner = owner.operation
            if owner not in order or owner in members:
                continue  # defined outside this block, or seen
            if _movable(owner.name):
                members.add(owner)
                pending.append(owner)
            else:
                anchors.append(owner)
    return members, anchors
