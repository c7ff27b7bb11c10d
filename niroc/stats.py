"""What a user wants to know about a module at a glance, before compiling it.

`collect_stats` counts; `stats_table` renders with rich; `ModuleStats.to_dict` is the JSON form.
Unknown ops are listed by name because they decide whether a model lowers without
--allow-unknown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from niro.ir import Const, Module, UnknownOp, buffer_nbytes, is_buffer, op_name, walk_ops

__all__ = ["ModuleStats", "collect_stats", "stats_table"]


@dataclass
class ModuleStats:
    functions: int = 0
    declarations: int = 0
    globals: int = 0
    weight_bytes: int = 0
    constant_bytes: int = 0
    ops_by_kind: Counter = field(default_factory=Counter)
    unknown_ops: Counter = field(default_factory=Counter)

    @property
    def op_count(self) -> int:
        return sum(self.ops_by_kind.values())

    def to_dict(self) -> dict:
        return {
            "functions": self.functions,
            "declarations": self.declarations,
            "globals": self.globals,
            "weight_bytes": self.weight_bytes,
            "constant_bytes": self.constant_bytes,
            "ops": self.op_count,
            "ops_by_kind": dict(sorted(self.ops_by_kind.items())),
            "unknown_ops": dict(sorted(self.unknown_ops.items())),
        }


def collect_stats(module: Module) -> ModuleStats:
    stats = ModuleStats(
        functions=len(module.functions),
        declarations=sum(1 for function in module.functions if function.is_declaration),
        globals=len(module.globals),
        weight_bytes=sum(
            buffer_nbytes(global_.initializer)
            for global_ in module.globals
            if is_buffer(global_.initializer)
        ),
    )
    for op in walk_ops(module):
        stats.ops_by_kind[op_name(op)] += 1
        if isinstance(op, UnknownOp):
            stats.unknown_ops[op.name] += 1
        elif isinstance(op, Const) and is_buffer(op.literal):
            stats.constant_bytes += buffer_nbytes(op.literal)
    return stats


def stats_table(filename: str, stats: ModuleStats):
    """A rich renderable: a totals grid, then ops by kind with unknown ones marked."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    totals = Table.grid(padding=(0, 2))
    totals.add_column(style="bold")
    totals.add_column()
    declared = f" ({stats.declarations} external)" if stats.declarations else ""
    totals.add_row("functions", f"{stats.functions}{declared}")
    totals.add_row("globals", str(stats.globals))
    totals.add_row("weights", _byte_size(stats.weight_bytes))
    totals.add_row("constants", _byte_size(stats.constant_bytes))
    unknown_total = sum(stats.unknown_ops.values())
    totals.add_row("ops", f"{stats.op_count} ({unknown_total} unknown)")

    kinds = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    kinds.add_column("op")
    kinds.add_column("count", justify="right")
    kinds.add_column("")
    for name, count in sorted(stats.ops_by_kind.items(), key=lambda item: (-item[1], item[0])):
        marker = Text("unknown", style="yellow") if name in stats.unknown_ops else Text("")
        kinds.add_row(name, str(count), marker)
    return Group(Text(f"{filename}:", style="bold"), totals, Text(""), kinds)


def _byte_size(count: int) -> str:
    """`8 bytes`, or `1.5 KiB (1,536 bytes)`: the exact count stays visible."""
    from .progress import format_bytes

    if count < 1024:
        return f"{count} byte" + ("" if count == 1 else "s")
    return f"{format_bytes(count)} ({count:,} bytes)"
