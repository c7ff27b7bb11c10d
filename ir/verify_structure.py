"""Pass 1 of verifying a function: regions, blocks, ops, definitions and CFGs.

Walks a function body and every nested region once (iteratively: deep nesting must not hit the
recursion limit). For each region it registers the blocks (unique ownership), checks each
block's arguments, ops and terminator, runs each op's rules (verify_rules_ops.OP_RULES), records
every definition (ValueId uniqueness), and computes the region's dominator tree. Uses of values
are left to pass 2 (verify_ssa), which needs the dominator trees of every region it enters.
"""

from __future__ import annotations

from .dominance import compute_dominators
from .ops import If, UnknownOp, is_terminator, regions_of, results_of
from .structure import Block, Region
from .values import Value
from .verify_context import FunctionCheck, RegionInfo, RegionKind, describe, safe_op_name
from .verify_rules_ops import OP_RULES, check_op_fields

__all__ = ["check_regions"]


def check_regions(check: FunctionCheck, body: Region) -> RegionInfo:
    """Checks `body` (a function body) and everything nested in it; returns its RegionInfo."""
    root = RegionInfo(body, RegionKind.FUNCTION_BODY, ())
    work = [root]
    while work:
        _check_region(check, work.pop(), work)
    return root


def _check_region(check: FunctionCheck, info: RegionInfo, work: list[RegionInfo]) -> None:
    region = info.region
    seen = check.seen_regions.get(id(region))
    if seen is not None:
        first_seen = check.path_text(seen[0], seen[1].prefix)
        check.fail_region(
            "unique-ownership",
            info,
            f"this Region object also appears at {first_seen}; each region has one owner",
        )
        return
    check.seen_regions[id(region)] = (check.symbol, info)
    check.region_infos[id(region)] = info
    blocks = region.blocks
    if not isinstance(blocks, (list, tuple)):
        check.fail_region(
            "field-type", info, f"Region.blocks expects a list of Blocks, got {describe(blocks)}"
        )
        return
    if info.kind is RegionKind.IF_ARM and len(blocks) != 1:
        check.fail_region(
            "if-region-shape",
            info,
            f"an If region holds exactly one block, got {len(blocks)}",
        )
    elif not blocks and info.kind is RegionKind.FUNCTION_BODY:
        check.fail_region("region-non-empty", info, "a function body needs at least an entry block")
    for block_index, block in enumerate(blocks):
        if not isinstance(block, Block):
            check.fail_block(
                "field-type",
                info,
                block_index,
                f"Region.blocks expects Blocks, got {describe(block)}",
            )
            continue
        block_seen = check.first_seen_block(block)
        if block_seen is not None:
            check.fail_block(
                "unique-ownership",
                info,
                block_index,
                f"this Block object also appears at {block_seen}; each block has one owner",
            )
            continue
        check.seen_blocks[id(block)] = (check.symbol, info, block_index)
        info.index_of[id(block)] = block_index
        info.blocks.append((block_index, block))
    info.successors = [[] for _ in blocks]
    nested: list[RegionInfo] = []
    for block_index, block in info.blocks:
        _check_block(check, info, block_index, block, nested)
    work.extend(reversed(nested))  # popped in source order: diagnostics follow the text
    if info.blocks and info.blocks[0][0] == 0:
        info.tree = compute_dominators(info.successors)
        if info.kind is not RegionKind.IF_ARM:  # if-region-shape already covers extra If blocks
            for block_index, _block in info.blocks[1:]:
                if not info.tree.reachable[block_index]:
                    check.fail_block(
                        "block-reachable",
                        info,
                        block_index,
                        f"block ^bb{block_index} is not reachable from the region's entry block ^bb0",
                    )


def _check_block(
    check: FunctionCheck, info: RegionInfo, block_index: int, block: Block, nested: list[RegionInfo]
) -> None:
    arguments = block.arguments
    if not isinstance(arguments, tuple):
        check.fail_block(
            "field-type",
            info,
            block_index,
            f"Block.arguments expects a tuple of Values, got {describe(arguments)}",
        )
    else:
        if arguments and info.kind is RegionKind.IF_ARM:
            check.fail_block(
                "if-region-shape",
                info,
                block_index,
                f"an If region's block takes no arguments, got {len(arguments)}",
                *arguments,
            )
        for argument in arguments:
            if isinstance(argument, Value):
                check.define(argument, info, block_index, -1)
            else:
                check.fail_block(
                    "field-type",
                    info,
                    block_index,
                    f"Block.arguments expects Values, got {describe(argument)}",
                )
    operations = block.operations
    if not isinstance(operations, (list, tuple)):
        check.fail_block(
            "field-type",
            info,
            block_index,
            f"Block.operations expects a list of ops, got {describe(operations)}",
        )
        operations = ()
    last = len(operations) - 1
    check.info = info
    check.block_index = block_index
    for op_index, op in enumerate(operations):
        rule = OP_RULES.get(type(op))
        check.op_index = op_index
        check.op = op
        if rule is None:
            check.fail_at(
                "op-kind",
                f"{describe(op)} is not a Niro op (an op is a member of the Op union)",
                (*info.prefix, f"^bb{block_index}", f"op#{op_index}"),
            )
            continue
        if not check_op_fields(check, op):
            check.bad_ops.add(id(op))
            for name in ("result", "results"):
                value = getattr(op, name, None)
                for result in value if isinstance(value, tuple) else (value,):
                    if isinstance(result, Value):
                        check.define(result, info, block_index, op_index)
            continue
        terminator = is_terminator(op)
        if terminator and op_index != last:
            check.fail(
                "terminator-last",
                f"is a terminator but is followed by {last - op_index} more op(s) in ^bb{block_index}",
            )
        for result in results_of(op):
            check.define(result, info, block_index, op_index)
        rule(check, op)
        if type(op) not in (If, UnknownOp):
            continue
        kind = RegionKind.IF_ARM if isinstance(op, If) else RegionKind.OPAQUE
        for region_index, region in enumerate(regions_of(op)):
            nested.append(
                RegionInfo(
                    region,
                    kind,
                    (f"^bb{block_index}", f"op#{op_index}", f"region#{region_index}"),
                    parent=info,
                    owner=op,
                    owner_index=region_index,
                )
            )
    if not operations:
        check.fail_block(
            "block-terminator",
            info,
            block_index,
            f"block ^bb{block_index} is empty; every block ends with a terminator",
        )
        return
    last_op = operations[-1]
    # A malformed last op was reported already; whether it terminates is unknowable.
    if (
        type(last_op) in OP_RULES
        and id(last_op) not in check.bad_ops
        and not is_terminator(last_op)
    ):
        check.fail_block(
            "block-terminator",
            info,
            block_index,
            f"block ^bb{block_index} ends with '{safe_op_name(last_op)}', which is not a terminator",
        )
