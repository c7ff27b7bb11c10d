"""What a user wants to know about a module at a glance, before compiling it.

`collect_stats` counts; `check_lowering` is the pre-flight: for each op kind whether it will
compile (native Niro op, lowered by a registered rule, no lowering, or refused with the rule's
own reason); `stats_table` renders with rich; `ModuleStats.to_dict` is the JSON form.

NOTE: the pre-flight runs the MLIR lowering (with unknown ops kept generic) without printing
anything: the rules' checks of attribute values and shapes live in the rules themselves, and
the lowering already reports every refused op in one run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from niro.ir import Const, Module, UnknownOp, buffer_nbytes, is_buffer, op_name, walk_ops

__all__ = ["KindStatus", "ModuleStats", "check_lowering", "collect_stats", "stats_table"]

NATIVE, LOWERED, NO_LOWERING, REFUSED = "native", "lowered", "no lowering", "refused"


@dataclass
class KindStatus:
    """One op kind in the pre-flight: how its ops fare in the lowering.

    `status` is NATIVE (a Niro op, lowered by a built-in rule), LOWERED (an UnknownOp with a
    registered lowering), NO_LOWERING (an UnknownOp without one: needs --allow-unknown) or
    REFUSED (at least one op of the kind refused: `refused` of them, `reasons` the distinct
    messages, in module order)."""

    status: str
    refused: int = 0
    reasons: list[str] = field(default_factory=list)


@dataclass
class ModuleStats:
    functions: int = 0
    declarations: int = 0
    globals: int = 0
    weight_bytes: int = 0
    constant_bytes: int = 0
    ops_by_kind: Counter = field(default_factory=Counter)
    unknown_ops: Counter = field(default_factory=Counter)
    kinds: dict[str, KindStatus] = field(default_factory=dict)
    lowering_checked: bool = False
    """Whether the lowering ran (it does not for a module with verifier errors)."""
    module_error: str | None = None
    """A lowering failure that is no op's refusal (the lowered module fails MLIR verification)."""

    @property
    def op_count(self) -> int:
        return sum(self.ops_by_kind.values())

    @property
    def compiling_op_count(self) -> int:
        """Ops that will lower: none of a kind without a lowering, none refused."""
        if self.module_error is not None:
            return 0
        total = 0
        for name, count in self.ops_by_kind.items():
            kind = self.kinds.get(name)
            if kind is None or kind.status == NO_LOWERING:
                continue
            total += count - kind.refused
        return total

    def to_dict(self) -> dict:
        record = {
            "functions": self.functions,
            "declarations": self.declarations,
            "globals": self.globals,
            "weight_bytes": self.weight_bytes,
            "constant_bytes": self.constant_bytes,
            "ops": self.op_count,
            "ops_by_kind": dict(sorted(self.ops_by_kind.items())),
            "unknown_ops": dict(sorted(self.unknown_ops.items())),
            "lowering_checked": self.lowering_checked,
        }
        if self.lowering_checked:
            record["ops_will_compile"] = self.compiling_op_count
            record["lowering"] = {
                name: _kind_record(self.kinds[name], count)
                for name, count in sorted(self.ops_by_kind.items())
            }
            if self.module_error is not None:
                record["lowering_error"] = self.module_error
        return record


def _kind_record(kind: KindStatus, count: int) -> dict:
    record: dict = {"status": kind.status, "count": count}
    if kind.status == REFUSED:
        record["refused"] = kind.refused
        record["reasons"] = kind.reasons
    return record


def collect_stats(module: Module, *, check: bool = False) -> ModuleStats:
    """Counts; with `check`, also the pre-flight (`check_lowering`)."""
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
    if check:
        check_lowering(module, stats)
    return stats


def check_lowering(module: Module, stats: ModuleStats) -> None:
    """Fills `stats.kinds`: each kind's status from the registry, then every refusal of a run
    of the lowering (unknown ops kept generic, so the other ops' rules all run)."""
    from niro.backends.mlir import LoweringError, lower_to_mlir, registered_lowering

    for name in stats.ops_by_kind:
        if name not in stats.unknown_ops:
            stats.kinds[name] = KindStatus(NATIVE)
        elif registered_lowering(name) is None:
            stats.kinds[name] = KindStatus(NO_LOWERING)
        else:
            stats.kinds[name] = KindStatus(LOWERED)
    stats.lowering_checked = True
    try:
        lower_to_mlir(module, allow_unknown=True)
    except LoweringError as error:
        for refusal in error.refusals or (error,):
            kind = stats.kinds.get(refusal.op_kind) if refusal.op_kind else None
            if kind is None:
                stats.module_error = str(refusal)
                continue
            kind.status = REFUSED
            kind.refused += 1
            if refusal.message not in kind.reasons:
                kind.reasons.append(refusal.message)


def stats_table(filename: str, stats: ModuleStats):
    """A rich renderable: a totals grid, then ops by kind with whether each will compile."""
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
    unknown = "" if stats.lowering_checked else f" ({unknown_total} unknown)"
    totals.add_row("ops", f"{stats.op_count}{unknown}")

    kinds = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    kinds.add_column("op")
    kinds.add_column("count", justify="right")
    kinds.add_column("lowering" if stats.lowering_checked else "")
    for name, count in sorted(stats.ops_by_kind.items(), key=lambda item: (-item[1], item[0])):
        kinds.add_row(name, str(count), _status_text(stats, name, count))
    parts = [Text(f"{filename}:", style="bold"), totals, Text(""), kinds]
    # NOTE: the reasons below the table, one a line: long, and whole when piped (grep, FileCheck)
    for name, kind in sorted(stats.kinds.items()):
        for reason in kind.reasons:
            parts.append(Text.assemble((f"{name} refused: ", "red"), reason))
    if stats.module_error is not None:
        parts.append(Text(f"lowering fails: {stats.module_error}", style="red"))
    if stats.lowering_checked:
        will, total = stats.compiling_op_count, stats.op_count
        style = "green" if will == total else "yellow"
        parts.append(Text(f"{will} of {total} ops will compile", style=style))
    else:
        parts.append(Text("lowering not checked: the module has verifier errors", style="dim"))
    return Group(*parts)


def _status_text(stats: ModuleStats, name: str, count: int):
    from rich.text import Text

    kind = stats.kinds.get(name)
    if kind is None:  # the lowering did not run
        return Text("unknown", style="yellow") if name in stats.unknown_ops else Text("")
    if kind.status == NO_LOWERING:
        return Text("no lowering (needs --allow-unknown)", style="yellow")
    if kind.status != REFUSED:
        return Text(kind.status)
    share = "refused" if kind.refused == count else f"{kind.refused} refused"
    return Text(share, style="red")


def _byte_size(count: int) -> str:
    """`8 bytes`, or `1.5 KiB (1,536 bytes)`: the exact count stays visible."""
    from .progress import format_bytes

    if count < 1024:
        return f"{count} byte" + ("" if count == 1 else "s")
    return f"{format_bytes(count)} ({count:,} bytes)"
