"""Dominator trees of a region's CFG (Cooper, Harvey & Kennedy, "A Simple, Fast Dominance
Algorithm", 2001): iterate idom over reverse postorder until stable.

Works on block indices (0 is the entry) and successor lists, so it knows nothing of ops; the
verifier and any later pass can share it. Iterative throughout: a 100k-block chain must not hit
Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DominatorTree", "compute_dominators"]


@dataclass(frozen=True, slots=True)
class DominatorTree:
    """`idom[b]` is b's immediate dominator (the entry's is itself; None when b is unreachable).

    `children[b]` lists the blocks b immediately dominates; `reachable[b]` says whether b can be
    reached from the entry.
    """

    idom: tuple[int | None, ...]
    children: tuple[tuple[int, ...], ...]
    reachable: tuple[bool, ...]

    def dominates(self, dominator: int, block: int) -> bool:
        """Whether every path from the entry to `block` passes through `dominator`."""
        if not self.reachable[block]:
            return False
        current = block
        while True:
            if current == dominator:
                return True
            parent = self.idom[current]
            if parent is None or parent == current:
                return False
            current = parent


def compute_dominators(successors: Sequence[Sequence[int]]) -> DominatorTree:
    """The dominator tree of the CFG `successors` (one list of target indices per block)."""
    count = len(successors)
    if count == 0:
        return DominatorTree((), (), ())
    postorder = _postorder(successors)
    order_of = [-1] * count
    for number, block in enumerate(postorder):
        order_of[block] = number
    predecessors: list[list[int]] = [[] for _ in range(count)]
    for block in postorder:
        for target in successors[block]:
            predecessors[target].append(block)
    idom: list[int | None] = [None] * count
    idom[0] = 0
    reverse_postorder = postorder[::-1]
    changed = True
    while changed:
        changed = False
        for block in reverse_postorder[1:]:
            new_idom = None
            for pred in predecessors[block]:
                if idom[pred] is None:
                    continue
                new_idom = pred if new_idom is None else _intersect(pred, new_idom, idom, order_of)
            if new_idom is not None and idom[block] != new_idom:
                idom[block] = new_idom
                changed = True
    children: list[list[int]] = [[] for _ in range(count)]
    for block in reverse_postorder[1:]:
        parent = idom[block]
        if parent is not None:
            children[parent].append(block)
    reachable = tuple(order_of[block] >= 0 for block in range(count))
    return DominatorTree(tuple(idom), tuple(tuple(kids) for kids in children), reachable)


def _postorder(successors: Sequence[Sequence[int]]) -> list[int]:
    visited = [False] * len(successors)
    visited[0] = True
    order: list[int] = []
    stack = [(0, iter(successors[0]))]
    while stack:
        block, targets = stack[-1]
        for target in targets:
            if not visited[target]:
                visited[target] = True
                stack.append((target, iter(successors[target])))
                break
        else:
            stack.pop()
            order.append(block)
    return order


def _intersect(left: int, right: int, idom: list[int | None], order_of: list[int]) -> int:
    while left != right:
        while order_of[left] < order_of[right]:
            left = idom[left]  # type: ignore[assignment]
        while order_of[right] < order_of[left]:
            right = idom[right]  # type: ignore[assignment]
    return left
