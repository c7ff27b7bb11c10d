"""Pass 2 of verifying a function: every use sees its definition (SSA dominance).

Walks each region's dominator tree in preorder with a scope of visible values: a block's
arguments become visible at its start, an op's results after the op, and a nested region is
walked at its owning op, seeing exactly what is visible there. Leaving a block's dominator
subtree hides its definitions again (an undo log), so each definition and each use costs O(1):
the pass is linear in the function's size.

Blocks unreachable from their region's entry (reported by pass 1) are walked leniently: a use
there only needs a definition somewhere in the function with the same type.
"""

from __future__ import annotations

from collections.abc import Iterator

from .ops import If, UnknownOp, operands_of, regions_of, results_of
from .types import format_type
from .values import Value
from .verify_context import FunctionCheck, RegionInfo
from .verify_rules_ops import OP_RULES

__all__ = ["check_uses"]

_HIDDEN = object()
_KNOWN = frozenset(OP_RULES)
_WITH_REGIONS = (If, UnknownOp)


class _Scope:
    """Visible values by id, with an undo log so a dominator subtree's definitions can be dropped."""

    __slots__ = ("visible", "undo")

    def __init__(self) -> None:
        # Keyed by ValueId.index: hashing the ValueId dataclass would dominate the run time.
        self.visible: dict[int, Value] = {}
        self.undo: list[tuple[int, object]] = []

    def define(self, value: Value) -> None:
        index = value.id.index
        self.undo.append((index, self.visible.get(index, _HIDDEN)))
        self.visible[index] = value

    def restore(self, mark: int) -> None:
        undo, visible = self.undo, self.visible
        while len(undo) > mark:
            value_id, previous = undo.pop()
            if previous is _HIDDEN:
                del visible[value_id]
            else:
                visible[value_id] = previous  # type: ignore[assignment]


def check_uses(check: FunctionCheck, root: RegionInfo) -> None:
    """Checks every operand in `root` (a checked function body) against the visible definitions."""
    scope = _Scope()
    # Each walker is a generator that yields the nested regions to walk at the current point.
    stack: list[Iterator[tuple[RegionInfo, bool]]] = [_walk_region(check, scope, root, False)]
    while stack:
        nested = next(stack[-1], None)
        if nested is None:
            stack.pop()
        else:
            stack.append(_walk_region(check, scope, *nested))


def _walk_region(
    check: FunctionCheck, scope: _Scope, info: RegionInfo, lenient: bool
) -> Iterator[tuple[RegionInfo, bool]]:
    tree = info.tree
    blocks = dict(info.blocks)
    roots: list[tuple[int, bool]] = []
    if tree is not None and not lenient:
        roots.append((0, False))
        roots.extend((index, True) for index in blocks if not tree.reachable[index])
    else:
        roots.extend((index, True) for index in blocks)
    for root, root_lenient in roots:
        # (block index, undo mark); a mark >= 0 is the exit event of that block's subtree.
        events: list[tuple[int, int]] = [(root, -1)]
        while events:
            block_index, mark = events.pop()
            if mark >= 0:
                scope.restore(mark)
                continue
            events.append((block_index, len(scope.undo)))
            block = blocks[block_index]
            if isinstance(block.arguments, tuple):
                for argument in block.arguments:
                    if isinstance(argument, Value):
                        scope.define(argument)
            operations = block.operations if isinstance(block.operations, (list, tuple)) else ()
            for op_index, op in enumerate(operations):
                if id(op) in check.bad_ops or type(op) not in _KNOWN:
                    continue
                for operand in operands_of(op):
                    visible = scope.visible.get(operand.id.index)
                    if visible is not operand and visible != operand:
                        check.info, check.block_index, check.op_index, check.op = (
                            info,
                            block_index,
                            op_index,
                            op,
                        )
                        _report_use(check, info, operand, visible, root_lenient)
                for region_index, region in enumerate(
                    regions_of(op) if type(op) in _WITH_REGIONS else ()
                ):
                    nested = check.region_infos.get(id(region))
                    if (
                        nested is not None
                        and nested.owner is op
                        and nested.owner_index == region_index
                    ):
                        yield nested, root_lenient
                for result in results_of(op):
                    scope.define(result)
            if tree is not None and not root_lenient:
                for child in reversed(tree.children[block_index]):
                    if child in blocks:
                        events.append((child, -1))


def _report_use(
    check: FunctionCheck, info: RegionInfo, operand: Value, visible: Value | None, lenient: bool
) -> None:
    if visible is not None:
        check.fail(
            "ssa-use-type",
            f"uses {operand.id} as {format_type(operand.type)}, but it is defined as {format_type(visible.type)}",
            operand,
        )
        return
    definition = check.definitions.get(operand.id.index)
    if definition is None:
        check.fail(
            "ssa-defined", f"uses {operand.id}, which is not defined in @{check.symbol}", operand
        )
        return
    if definition.value != operand:
        check.fail(
            "ssa-use-type",
            f"uses {operand.id} as {format_type(operand.type)}, but it is defined as "
            f"{format_type(definition.value.type)}",
            operand,
        )
    if lenient:
        return
    where = " ".join(definition.path())
    if definition.info.encloses(info):
        check.fail(
            "ssa-dominance",
            f"uses {operand.id}, whose definition at {where} does not dominate this use",
            operand,
        )
    else:
        region = " ".join(definition.info.prefix)
        check.fail(
            "ssa-region-escape",
            f"uses {operand.id}, defined inside the region at {region} (at {where}); values defined "
            "in a region leave it only through its owning op's results",
            operand,
        )
