"""Dominator trees (Cooper-Harvey-Kennedy) over block-index CFGs."""

from __future__ import annotations

from niro.ir.dominance import compute_dominators


def test_diamond() -> None:
    #   0 -> 1, 2 ; 1 -> 3 ; 2 -> 3
    tree = compute_dominators([[1, 2], [3], [3], []])
    assert tree.idom == (0, 0, 0, 0)
    assert tree.dominates(0, 3) and not tree.dominates(1, 3) and not tree.dominates(2, 3)
    assert sorted(tree.children[0]) == [1, 2, 3]


def test_loop_and_unreachable() -> None:
    # 0 -> 1 ; 1 -> 2, 3 ; 2 -> 1 ; 4 -> 3 (4 unreachable)
    tree = compute_dominators([[1], [2, 3], [1], [], [3]])
    assert tree.idom == (0, 0, 1, 1, None)
    assert tree.reachable == (True, True, True, True, False)
    assert tree.dominates(1, 2) and tree.dominates(1, 3) and not tree.dominates(2, 3)
    assert not tree.dominates(0, 4)


def test_irreducible_cfg() -> None:
    # 0 -> 1, 2 ; 1 <-> 2 ; both -> 3
    tree = compute_dominators([[1, 2], [2, 3], [1, 3], []])
    assert tree.idom == (0, 0, 0, 0)


def test_long_chain_is_iterative() -> None:
    count = 50_000
    tree = compute_dominators([[index + 1] for index in range(count - 1)] + [[]])
    assert tree.idom[-1] == count - 2
    assert tree.dominates(0, count - 1)


def test_empty() -> None:
    assert compute_dominators([]).idom == ()
