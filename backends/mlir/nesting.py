"""Deeply nested regions (an If inside an If, 500 deep) and the lowering's recursion.

The lowering follows the IR's nesting with Python calls (an op's rule lowers its regions, whose
ops' rules lower theirs), about `FRAMES_PER_LEVEL` frames per level, so a few hundred levels
exceed Python's default recursion limit of 1000. Rather than fail with a RecursionError (an
internal error to the user), `recursion_headroom` raises the limit for the duration of one
lowering to what the module's measured depth needs, and a module nested deeper than
`MAX_NESTING` is refused with a LoweringError before anything is built. (The verifier, parser,
printer and walks are iterative already; MLIR's own C++ recursion over nesting is why the cap
stays modest.)

This module only measures and guards; it builds nothing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from niro.ir import Module, regions_of

from .errors import LoweringError

__all__ = ["MAX_NESTING", "nesting_depth", "recursion_headroom"]

MAX_NESTING = 1000
"""Deepest region nesting the lowering takes (500-deep models are the documented target)."""
FRAMES_PER_LEVEL = 8
"""Python frames one level of nesting costs in the lowering, with slack (measured: 4)."""


def nesting_depth(module: Module) -> int:
    """The deepest region nesting in `module` (0 for functions whose ops own no regions),
    measured with an explicit stack."""
    deepest = 0
    stack = [(block, 0) for function in module.functions if function.body is not None for block in function.body.blocks]
    while stack:
        block, depth = stack.pop()
        deepest = max(deepest, depth)
        for op in block.operations:
            for region in regions_of(op):
                stack.extend((inner, depth + 1) for inner in region.blocks)
    return deepest


@contextlib.contextmanager
def recursion_headroom(module: Module) -> Iterator[None]:
    """Room on Python's stack for lowering `module`; LoweringError if it nests too deeply."""
    depth = nesting_depth(module)
    if depth > MAX_NESTING:
        raise LoweringError(f"regions nest {depth} deep; the MLIR lowering takes at most {MAX_NESTING} levels")
    previous = sys.getrecursionlimit()
    needed = previous + depth * FRAMES_PER_LEVEL
    sys.setrecursionlimit(max(previous, needed))
    try:
        yield
    except RecursionError as error:  # NOTE: a rule recursing more than measured: still one line
        raise LoweringError(f"regions nest too deeply to lower ({depth} levels)") from error
    finally:
        sys.setrecursionlimit(previous)
