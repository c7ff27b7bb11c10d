"""Iterative walks over nested IR (no recursion, so 500-deep nesting is fine)."""

from __future__ import annotations

from collections.abc import Iterator

from .ops import Op, regions_of
from .structure import Block, Function, Module, Region

__all__ = ["walk_ops", "walk_blocks"]


def _root_regions(node: Module | Function | Region | Block | Op) -> list[Region]:
    if isinstance(node, Module):
        return [function.body for function in node.functions if function.body is not None]
    if isinstance(node, Function):
        return [] if node.body is None else [node.body]
    if isinstance(node, Region):
        return [node]
    if isinstance(node, Block):
        return [Region(blocks=[node])]
    return list(regions_of(node))


def walk_blocks(node: Module | Function | Region | Block | Op) -> Iterator[Block]:
    """Every block under `node`, outer blocks before the blocks nested in their ops."""
    for op in _walk(node):
        if isinstance(op, Block):
            yield op


def walk_ops(node: Module | Function | Region | Block | Op) -> Iterator[Op]:
    """Every op under `node` in pre-order (an op before the ops in its regions)."""
    for item in _walk(node):
        if not isinstance(item, Block):
            yield item


def _walk(node) -> Iterator:
    stack: list = [block for region in _root_regions(node) for block in region.blocks][::-1]
    while stack:
        item = stack.pop()
        yield item
        if isinstance(item, Block):
            stack.extend(reversed(item.operations))
        else:
            for region in reversed(regions_of(item)):
                stack.extend(reversed(region.blocks))
