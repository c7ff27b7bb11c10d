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
the first one), and nothing moves above a loop, a branch or a call that may run a check of its
own. Checks in nested regions stay where they are.

Calls: IREE inlines every call, so a check that opens a private function (the Functions an
onnxruntime contrib op or a model-local function becomes) lands between the caller's tensor ops,
once per call: onnxruntime-genai's Llama at one decode step made 5 submissions, one per
GroupQueryAttention call, and with its batch and sequence fixed by `--dim` ran 9-10 ms a step
where one submission runs 5-6 (iree-benchmark-module, 2 workers; onnxruntime 5.5). So the
functions are handled callee first: a private function's opening checks are made at each call
site instead (on the call's operands), its results' sizes, where its body computes them from its
arguments' sizes, are read at the call sites from the call's operands (the dim resolution does
not look into calls), and a call of a function left with no check is no barrier.

This module must not change what a check tests; it drops only a check the dim resolution folded
to true (two sizes it found to be one), which cannot fail.
"""

from __future__ import annotations

import itertools

from .bindings import PassManager, arith, mlir_ir, tensor
from .builders import VERSION_ATTRIBUTE, index_constant

__all__ = [
    "call_sites",
    "callee_name",
    "clone_ops",
    "functions_by_name",
    "hoist_checks",
    "is_private",
    "is_size_op",
    "opening_ops",
    "resolve_sizes",
    "size_slice",
]

_RESOLVE_DIMS = "builtin.module(func.func(resolve-ranked-shaped-type-result-dims))"
_RESOLVE_FUNCTION_DIMS = "func.func(resolve-ranked-shaped-type-result-dims)"

_MOVABLE = frozenset(
    {
        "affine.apply",
        "tensor.dim",
        "tensor.extract",
        "tensor.from_elements",
        "tensor.expand_shape",
        "tensor.collapse_shape",
    }
)
"""Ops besides `arith`'s that may move up with a check's condition: pure, and on sizes (the
dim resolution writes some as `affine.apply`) or on the small shape tensors sizes are read
from."""


def hoist_checks(module: mlir_ir.Module) -> bool:
    """Moves the top-level checks of every function of `module` up, and the checks that open a
    private function out to its call sites (see the module docstring); True when any op moved.
    Runs in the module's context."""
    functions = functions_by_name(module)
    if not any(_holds_assert(function) for function in functions.values()):
        return False
    context = module.context
    allowed = context.allow_unregistered_dialects
    context.allow_unregistered_dialects = True  # for the holders of `_ResultSizes`
    try:
        _resolve_dims(module.operation, _RESOLVE_DIMS)
        return _Hoisting(functions).run()
    finally:
        context.allow_unregistered_dialects = allowed


class _Hoisting:
    """The functions of a module, each handled after the functions it calls: its dims resolved
    (again where its callees gave it ops), the sizes its calls made read from their operands,
    its checks moved up, and, for a private function, its opening checks made at its call sites
    and its results' sizes prepared for its callers."""

    def __init__(self, functions: dict) -> None:
        self.functions = functions
        self.calls = call_sites(functions)
        self.order, self.recursive = _callees_first(functions, self.calls)
        self.checking: dict[str, bool] = {}
        self.stale: set[str] = set()  # given ops by their callees since their dims were resolved
        self.sizes: dict[str, _ResultSizes] = {}

    def run(self) -> bool:
        moved = False
        try:
            for name in self.order:
                moved |= self._function(name)
        finally:
            for sizes in self.sizes.values():
                sizes.erase()
        return moved

    def _function(self, name: str) -> bool:
        function = self.functions[name]
        block = function.regions[0].blocks[0]
        if name in self.stale:
            _resolve_dims(function, _RESOLVE_FUNCTION_DIMS)
        moved = False
        while _read_call_sizes(function, self.sizes):
            moved = True
            _resolve_dims(function, _RESOLVE_FUNCTION_DIMS)
        _resolve_dims_by_rule(block)
        moved |= _drop_proven_checks(block)
        moved |= _hoist_in_block(block, self.checking)
        sites = self.calls.get(name, [])
        if sites and name not in self.recursive and is_private(function):
            if _move_opening_checks(block, sites):
                moved = True
                self.stale |= {caller for _, caller in sites}
            sizes = _ResultSizes.of(function)
            if sizes is not None:
                self.sizes[name] = sizes
        self.checking[name] = _holds_checks(function, self.checking)
        return moved


def functions_by_name(module: mlir_ir.Module) -> dict[str, mlir_ir.Operation]:
    """The `func.func`s of `module` that have a body, by symbol name."""
    return {
        mlir_ir.StringAttr(op.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func" and op.operation.regions[0].blocks
    }


def _resolve_dims(op: mlir_ir.Operation, pipeline: str) -> None:
    PassManager.parse(pipeline).run(op)
    _lower_deep_affine_applies(op)


def resolve_sizes(function: mlir_ir.Operation) -> None:
    """Each `tensor.dim` of `function` computed from the sizes it was made from, as far as the
    dim resolution and the rules of `_resolve_dims_by_rule` reach (what `hoist_checks` does for
    a function with checks)."""
    _resolve_dims(function, _RESOLVE_FUNCTION_DIMS)
    _resolve_dims_by_rule(function.regions[0].blocks[0])
    _resolve_dims(function, _RESOLVE_FUNCTION_DIMS)


CallSites = dict[str, list[tuple[mlir_ir.Operation, str]]]
"""The `func.call`s of each callee, with the name of the function each sits in."""


def call_sites(functions: dict) -> CallSites:
    """The `func.call`s in `functions` (func ops by name), by callee."""
    calls: CallSites = {}
    for caller, function in functions.items():

        def visit(op, caller=caller) -> mlir_ir.WalkResult:
            if op.name == "func.call":
                calls.setdefault(callee_name(op), []).append((op, caller))
            return mlir_ir.WalkResult.ADVANCE

        function.walk(visit)
    return calls


def callee_name(call: mlir_ir.Operation) -> str:
    return mlir_ir.FlatSymbolRefAttr(call.attributes["callee"]).value


def is_private(function: mlir_ir.Operation) -> bool:
    """Private functions are reached through the `func.call`s of this module only (niroc makes
    no other reference to one), so every caller of one is among its call sites."""
    attributes = function.attributes
    return (
        "sym_visibility" in attributes
        and mlir_ir.StringAttr(attributes["sym_visibility"]).value == "private"
    )


def _callees_first(functions: dict, calls: CallSites) -> tuple[list[str], set[str]]:
    """The functions in an order where each comes after those it calls, and the ones that reach
    themselves through calls (their checks stay where they are)."""
    callees: dict[str, set[str]] = {name: set() for name in functions}
    for callee, sites in calls.items():
        for _, caller in sites:
            if callee in functions:
                callees[caller].add(callee)
    order: list[str] = []
    recursive: set[str] = set()
    done: set[str] = set()
    for root in functions:
        if root in done:
            continue
        path, pending = [root], [iter(sorted(callees[root]))]
        while path:
            following = next(pending[-1], None)
            if following is None:
                order.append(path.pop())
                done.add(order[-1])
                pending.pop()
            elif following in path:
                recursive.update(path[path.index(following) :])
            elif following not in done:
                path.append(following)
                pending.append(iter(sorted(callees[following])))
    return order, recursive


def _holds_assert(op: mlir_ir.Operation) -> bool:
    found = False

    def visit(inner) -> mlir_ir.WalkResult:
        nonlocal found
        found = inner.name == "cf.assert"
        return mlir_ir.WalkResult.INTERRUPT if found else mlir_ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _holds_checks(op: mlir_ir.Operation, checking: dict[str, bool]) -> bool:
    """Whether running `op` may run a check: a `cf.assert` in it, or a call of a function that
    may (one not seen yet may)."""
    found = False

    def visit(inner) -> mlir_ir.WalkResult:
        nonlocal found
        if inner.name == "cf.assert":
            found = True
        elif inner.name == "func.call":
            found = checking.get(callee_name(inner), True)
        return mlir_ir.WalkResult.INTERRUPT if found else mlir_ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


_DEEPEST_AFFINE = 32
"""The deepest `affine.apply` expression the dim resolution may leave (see below)."""


def _lower_deep_affine_applies(root: mlir_ir.Operation) -> None:
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

    root.walk(visit)
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


def is_size_op(name: str) -> bool:
    return name.startswith("arith.") or name in _MOVABLE


def _resolve_dims_by_rule(block: mlir_ir.Block) -> None:
    """The sizes MLIR's dim resolution leaves, read where they were made: each `tensor.dim` (of
    a constant axis) of a `tensor.reshape` result whose shape is built by `tensor.from_elements`
    of indices reads that element, known before the reshaped data is; one of a `tensor.cast`
    result reads the dim of the cast's source (a cast changes no size); one of a versioned
    product reads the size both versions yield (`_versioned_size`: the resolution does not see
    through `scf.if`)."""
    for op in list(block.operations):
        operation = op.operation
        if operation.name != "tensor.dim":
            continue
        source = operation.operands[0].owner
        axis = _constant_integer(operation.operands[1])
        if isinstance(source, mlir_ir.Block) or axis is None:
            continue
        size: mlir_ir.Value | None = None
        if source.name == "tensor.cast":
            operation.operands[0] = source.operands[0]
        elif VERSION_ATTRIBUTE in source.attributes:
            size = _versioned_size(source, axis)
        elif source.name == "tensor.reshape":
            shape = source.operands[1].owner
            if not isinstance(shape, mlir_ir.Block) and shape.name == "tensor.from_elements":
                size = shape.operands[axis]
        if size is not None and size.type == operation.results[0].type:
            operation.results[0].replace_all_uses_with(size)
            operation.erase()


def _versioned_size(branch: mlir_ir.Operation, axis: int) -> mlir_ir.Value | None:
    """The size along `axis` of the product a versioned `scf.if` makes (`VERSION_ATTRIBUTE`):
    the result after the product that both versions yield alike, a value from before the
    choice."""
    product = mlir_ir.RankedTensorType(branch.results[0].type)
    if not product.is_dynamic_dim(axis):
        return None
    position = 1 + sum(1 for earlier in range(axis) if product.is_dynamic_dim(earlier))
    then_size, else_size = (
        list(region.blocks[0].operations)[-1].operation.operands[position]
        for region in branch.regions
    )
    # one value yielded by both versions is defined before the choice
    return then_size if then_size == else_size else None


def _drop_proven_checks(block: mlir_ir.Block) -> bool:
    """Erases each check of `block` whose condition the dim resolution folded to true (a
    broadcast check of two sizes it found to be one): it cannot fail. True when any went."""
    proven = [
        op.operation
        for op in block.operations
        if op.operation.name == "cf.assert"
        and _constant_integer(op.operation.operands[0]) in (1, -1)
    ]
    for check in proven:
        check.erase()
    return bool(proven)


def _hoist_in_block(block: mlir_ir.Block, checking: dict[str, bool]) -> bool:
    """Moves each check of `block` up, above everything but what its condition reads, the check
    before it and an op that may run a check itself (a loop, a branch or a call holding one).

    Each check gets a home: the last op it must stay below (an op its slice reads that does not
    move, such an op holding checks, or the home of the check before it). The check lands right
    after its home's earlier checks, with the ops of its slice that sit below the home, so the
    block is reordered once (one position table, whatever the number of checks)."""
    operations = [op.operation for op in block.operations]
    order = {operation: index for index, operation in enumerate(operations)}
    groups: dict[int, list[mlir_ir.Operation]] = {}  # home index (-1: the top) -> ops placed
    placed: set = set()
    home = -1  # the home of the check before
    barrier = -1  # the last op passed that may run a check
    for index, operation in enumerate(operations):
        name = operation.name
        if name != "cf.assert":
            if (name == "func.call" or len(operation.regions) > 0) and _holds_checks(
                operation, checking
            ):
                barrier = index
            continue
        members, anchors = size_slice([operation], order)
        home = max([home, barrier, *(order[anchor] for anchor in anchors)])
        moving = sorted(
            (member for member in members if order[member] > home and member not in placed),
            key=order.__getitem__,
        )
        groups.setdefault(home, []).extend([*moving, operation])
        placed.update(moving)
        placed.add(operation)
    arranged = list(groups.get(-1, []))
    for index, operation in enumerate(operations):
        if operation not in placed:
            arranged.append(operation)
            arranged.extend(groups.get(index, []))
    if arranged == operations:
        return False
    if arranged[0] != operations[0]:
        arranged[0].move_before(operations[0])
    for before, operation in itertools.pairwise(arranged):
        operation.move_after(before)
    return True


def size_slice(roots: list[mlir_ir.Operation], order: dict) -> tuple[set, list]:
    """The movable ops the operands of `roots` are computed by (in this block), and the ops of
    this block they read that cannot move (`anchors`)."""
    members: set = set()
    anchors: list = []
    pending = list(roots)
    while pending:
        for operand in pending.pop().operands:
            owner = operand.owner
            if isinstance(owner, mlir_ir.Block):
                continue
            owner = owner.operation
            if owner not in order or owner in members:
                continue  # defined outside this block, or seen
            if is_size_op(owner.name):
                members.add(owner)
                pending.append(owner)
            else:
                anchors.append(owner)
    return members, anchors


def opening_ops(block: mlir_ir.Block) -> list[mlir_ir.Operation]:
    """The ops that open `block`: its checks and size ops before the first other op."""
    opening: list[mlir_ir.Operation] = []
    for op in block.operations:
        operation = op.operation
        if operation.name != "cf.assert" and not is_size_op(operation.name):
            break
        opening.append(operation)
    return opening


def _move_opening_checks(block: mlir_ir.Block, sites: list[tuple[mlir_ir.Operation, str]]) -> bool:
    """The checks that open a private function (each with the ops its condition is computed by,
    on the function's arguments) are made at each call site instead, just before the call, on
    the call's operands; the function keeps its other checks. True when any moved.

    Why: IREE inlines the calls, and a check at the top of a callee lands between the caller's
    tensor ops (one more submission per call, as above); at the call site it can move up with
    the caller's own checks."""
    opening = opening_ops(block)
    checks = [op for op in opening if op.name == "cf.assert"]
    if not checks:
        return False
    order = {op: index for index, op in enumerate(opening)}
    members, _ = size_slice(checks, order)  # nothing before a check of the opening is an anchor
    made = [op for op in opening if op in members or op.name == "cf.assert"]
    for call, _ in sites:
        mapping = dict(zip(block.arguments, call.operands, strict=True))
        clone_ops(made, mapping, mlir_ir.InsertionPoint(call))
    sizes = [op for op in made if op in members]
    for check in checks:
        check.erase()
    _erase_unused(sizes)
    return True


class _ResultSizes:
    """The run-time sizes of a private function's results as its body computes them, held by an
    op of no dialect before its return (the dim resolution drops unused pure ops) until every
    caller has read them (`_read_call_sizes`)."""

    def __init__(self, function, holder: mlir_ir.Operation, axes: list[tuple[int, int]]) -> None:
        self.block = function.regions[0].blocks[0]
        self.holder = holder
        self.index = {axis: position for position, axis in enumerate(axes)}

    @staticmethod
    def of(function) -> _ResultSizes | None:
        blocks = function.regions[0].blocks
        if len(blocks) != 1:
            return None
        ret = list(blocks[0].operations)[-1].operation
        axes = [
            (index, axis)
            for index, value in enumerate(ret.operands)
            if isinstance(value.type, mlir_ir.RankedTensorType)
            for axis in range(value.type.rank)
            if value.type.is_dynamic_dim(axis)
        ]
        if not axes:
            return None
        with mlir_ir.InsertionPoint(ret), ret.location:
            sizes = [
                tensor.DimOp(ret.operands[index], index_constant(axis)).result
                for index, axis in axes
            ]
            holder = mlir_ir.Operation.create("niro.result_sizes", operands=sizes)
        resolve_sizes(function)
        return _ResultSizes(function, holder, axes)

    def slice(self, index: int, axis: int) -> tuple[mlir_ir.Value, list] | None:
        """The size of result `index` along `axis` and the ops that compute it from the
        arguments (in order), or None where it reads what the body makes."""
        position = self.index.get((index, axis))
        if position is None:
            return None
        size = self.holder.operands[position]
        owner = size.owner
        if isinstance(owner, mlir_ir.Block):
            return None
        order = {op.operation: place for place, op in enumerate(self.block.operations)}
        members, anchors = size_slice([owner.operation], order)
        if anchors or not is_size_op(owner.operation.name):
            return None
        members.add(owner.operation)
        return size, sorted(members, key=order.__getitem__)

    def erase(self) -> None:
        order = {op.operation: place for place, op in enumerate(self.block.operations)}
        members, _ = size_slice([self.holder], order)
        self.holder.erase()
        _erase_unused(sorted(members, key=order.__getitem__))


def _read_call_sizes(function: mlir_ir.Operation, sizes: dict[str, _ResultSizes]) -> bool:
    """Each `tensor.dim` of a call's result in `function` is computed from the call's operands
    instead, where the callee computes that size from its arguments' sizes alone (`sizes`):
    MLIR's dim resolution does not look into calls, so a check on a size a call made would
    otherwise stay below the call. True when any changed (the new ops' dims want resolving)."""
    reads: list[mlir_ir.Operation] = []

    def visit(op) -> mlir_ir.WalkResult:
        if op.name == "tensor.dim":
            source = op.operands[0].owner
            if not isinstance(source, mlir_ir.Block) and source.name == "func.call":
                reads.append(op)
        return mlir_ir.WalkResult.ADVANCE

    function.walk(visit)
    changed = False
    for dim in reads:
        call = dim.operands[0].owner
        callee = sizes.get(callee_name(call))
        axis = _constant_integer(dim.operands[1])
        if callee is None or axis is None:
            continue
        found = callee.slice(mlir_ir.OpResult(dim.operands[0]).result_number, axis)
        if found is None:
            continue
        size, made = found
        mapping = dict(zip(callee.block.arguments, call.operands, strict=True))
        clone_ops(made, mapping, mlir_ir.InsertionPoint(dim))
        dim.results[0].replace_all_uses_with(mapping[size])
        dim.erase()
        changed = True
    return changed


def _constant_integer(value: mlir_ir.Value) -> int | None:
    """The value of an `arith.constant` integer (a bool: 1 or -1, as MLIR reads an i1), else None."""
    owner = value.owner
    if isinstance(owner, mlir_ir.Block) or owner.name != "arith.constant":
        return None
    return mlir_ir.IntegerAttr(owner.attributes["value"]).value


def clone_ops(
    operations: list[mlir_ir.Operation], mapping: dict, where: mlir_ir.InsertionPoint
) -> dict[mlir_ir.Operation, mlir_ir.Operation]:
    """Copies of `operations` (in order) at `where`, each reading, in its nested regions too,
    the copy of what it read or `mapping[value]`; `mapping` grows by the copies' results.
    Returns the copy of each op, by op."""
    copies: dict = {}

    def remap(inner) -> mlir_ir.WalkResult:
        for position, operand in enumerate(inner.operands):
            if operand in mapping:
                inner.operands[position] = mapping[operand]
        return mlir_ir.WalkResult.ADVANCE

    with where:
        for operation in operations:
            copy = operation.clone()
            copy.walk(remap)
            copies[operation] = copy
            for old, new in zip(operation.results, copy.results, strict=True):
                mapping[old] = new
    return copies


def _erase_unused(ops: list) -> None:
    """Erases each op of `ops` (last first) that nothing reads any more."""
    for op in reversed(ops):
        operation = op.operation
        if all(not list(result.uses) for result in operation.results):
            operation.erase()
