"""`niroc ops [NAME]`: which ONNX ops niroc compiles, at which opsets, before you try a model.

An ONNX op is supported when the frontend converts it to Niro's own ops (native: Add, Mul,
MatMul, Transpose, Gemm, Identity, Constant, If), when the MLIR backend has a lowering
registered for its UnknownOp (`onnx.Relu`), which declares the opsets it implements, or when
ONNX defines it by a function body (Attention, the losses...), which niroc then compiles as a
call of that body (ops in the body must be supported in turn), or when it is one of
onnxruntime's transformer contrib ops that niroc defines by a body of ONNX ops itself
(niro.frontends.onnx.contrib_functions: GroupQueryAttention, MatMulNBits...). The tables
are read at run time (niro.frontends.onnx.CONVERTERS, niro.backends.mlir.registered_lowering),
so the listing is what this build does, never a hand-kept copy. ONNX's own schema versions come
from the installed onnx package.

A table on a terminal, plain columns when piped; `--format json` writes one object per op and
line. `niroc ops NAME` describes one op and exits 1 when it is not supported (at `--opset`).
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from .render import make_console, print_block, print_error, write_json_line
from .session import current_session, format_option, session_options

__all__ = ["OpSupport", "collect_op_support", "find_op", "ops_command"]

_EPILOG = """\b
Examples:
  niroc ops                        the supported ops and their opsets
  niroc ops --all                  every ONNX op, supported or not
  niroc ops Softmax --opset 11     can niroc compile Softmax at opset 11? (exit 1 if not)
  niroc ops --format json | jq -r 'select(.native) | .op'
"""


@dataclass(frozen=True)
class OpSupport:
    """What niroc does with one op: `native` (converted to Niro ops; `native_note` says when it
    stays generic), `since`/`until` the opsets its registered lowering implements (None, None
    without one), `onnx_versions` the opsets at which ONNX changed the op."""

    op: str
    domain: str
    name: str  # the UnknownOp name (`onnx.Relu`)
    native: bool
    native_note: str
    lowered: bool
    since: int | None
    until: int | None
    lowered_text: str
    onnx_versions: tuple[int, ...]
    body_since: int | None = None
    """The first opset at which ONNX defines the op by a function body (None: never)."""
    contrib_body: bool = False
    """Whether niroc defines the op by its own body of ONNX ops (onnxruntime's semantics)."""

    @property
    def supported(self) -> bool:
        return self.native or self.lowered or self.body_since is not None or self.contrib_body

    def supports(self, opset: int) -> bool:
        """Whether niroc takes the op at `opset` (native ops: whenever ONNX defines it)."""
        if self.onnx_versions and opset < self.onnx_versions[0]:
            return False
        if self.native or self.contrib_body:
            return True
        if self.body_since is not None and opset >= self.body_since:
            return True
        return self.lowered and opset >= self.since and (self.until is None or opset <= self.until)

    def to_record(self) -> dict:
        return {
            "type": "op",
            "op": self.op,
            "domain": self.domain,
            "name": self.name,
            "supported": self.supported,
            "native": self.native,
            "native_note": self.native_note,
            "lowered": {"since": self.since, "until": self.until} if self.lowered else None,
            "function_body": None if self.body_since is None else {"since": self.body_since},
            "contrib_body": self.contrib_body,
            "onnx_versions": list(self.onnx_versions),
        }


def collect_op_support(include_unsupported: bool = False) -> list[OpSupport]:
    """Every op niroc supports (with `include_unsupported`, every ONNX op too), sorted by
    domain then op type."""
    from niro.backends.mlir import registered_lowering, registered_lowerings
    from niro.frontends.onnx import CONVERTERS
    from niro.frontends.onnx.contrib_functions import contrib_function_ops
    from niro.frontends.onnx.oplib import niro_op_name, schema_op_names, schema_versions
    from niro.frontends.onnx.schema_functions import function_body_since

    keys: dict[str, tuple[str, str]] = {
        niro_op_name(domain, op_type): (domain, op_type) for domain, op_type in schema_op_names()
    }
    bodies = {
        niro_op_name(domain, op_type): since
        for domain, op_type in schema_op_names()
        if (since := function_body_since(domain, op_type)) is not None
    }
    contrib = {niro_op_name(domain, op_type) for domain, op_type in contrib_function_ops()}
    names = (
        set(registered_lowerings()) | {niro_op_name("", op_type) for op_type in CONVERTERS} | set(bodies) | contrib
    )
    if include_unsupported:
        names |= set(keys)
    rows = []
    for name in names:
        domain, op_type = keys.get(name) or _split(name)
        default_domain = domain in ("", "ai.onnx")
        converter = CONVERTERS.get(op_type) if default_domain else None
        registration = registered_lowering(name)
        rows.append(
            OpSupport(
                op=op_type,
                domain="ai.onnx" if default_domain else domain,
                name=name,
                native=converter is not None,
                native_note=_first_line(getattr(converter, "__doc__", None)),
                lowered=registration is not None,
                since=None if registration is None else registration.since,
                until=None if registration is None else registration.until,
                lowered_text="" if registration is None else registration.describe_versions(),
                onnx_versions=schema_versions(domain, op_type),
                body_since=bodies.get(name),
                contrib_body=name in contrib,
            )
        )
    return sorted(rows, key=lambda row: (row.domain != "ai.onnx", row.domain, row.op))


def _split(name: str) -> tuple[str, str]:
    domain, _, op_type = name.rpartition(".")
    return ("" if domain == "onnx" else domain), op_type


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n")[0].strip()


def find_op(rows: list[OpSupport], wanted: str) -> OpSupport | None:
    """The row `wanted` names: an op type (`Relu`, any case) or an UnknownOp name
    (`onnx.Relu`, `ai.onnx.ml.Scaler`)."""
    for row in rows:
        if wanted in (row.name, row.op):
            return row
    folded = wanted.casefold()
    matches = [row for row in rows if folded in (row.name.casefold(), row.op.casefold())]
    return matches[0] if len(matches) == 1 else None


@click.command(
    "ops",
    epilog=_EPILOG,
    short_help="List the ONNX ops niroc supports, with opset ranges.",
    context_settings={"max_content_width": 100},
)
@click.argument("name", required=False)
@click.option(
    "--opset",
    type=click.IntRange(min=1),
    metavar="N",
    help="With NAME: check support at this opset of the op's domain.",
)
@click.option(
    "--all", "include_all", is_flag=True, help="Also list the ONNX ops niroc does not support."
)
@format_option('one {"type": "op", ...} object per line')
@session_options
def ops_command(name: str | None, opset: int | None, include_all: bool, output_format: str) -> int:
    """List the ONNX ops niroc compiles: op type, domain, the opsets niroc lowers, and whether
    the frontend converts the op to Niro's own ops (native).

    With NAME (`Relu`, `onnx.Relu`), describe that op; exit 1 if niroc does not support it
    (at --opset N, when given).
    """
    if opset is not None and name is None:
        raise click.UsageError("--opset needs an op NAME")
    as_json = output_format == "json"
    rows = collect_op_support(include_unsupported=include_all or name is not None)
    if name is None:
        if as_json:
            for row in rows:
                write_json_line(row.to_record())
        else:
            _print_listing(make_console(), rows, summary=not current_session().quiet)
        return 0
    row = find_op(rows, name)
    if row is None:
        _fail(_unknown_op_message(rows, name))
        return 1
    problem = _support_problem(row, opset)
    if as_json:
        record = row.to_record()
        if opset is not None:
            record["opset"] = opset
            record["supported_at_opset"] = problem is None
        write_json_line(record)
    else:
        print_block(make_console(), _details(row))
    if problem is not None:
        _fail(problem)
        return 1
    return 0


def _support_problem(row: OpSupport, opset: int | None) -> str | None:
    label = f"{row.op} ({row.domain})"
    if not row.supported:
        versions = ", ".join(map(str, row.onnx_versions))
        plural = "s" if len(row.onnx_versions) > 1 else ""
        defined = f" (ONNX defines it at opset{plural} {versions})" if versions else ""
        return f"{label} is not supported: niroc has no lowering for it{defined}"
    if opset is None or row.supports(opset):
        return None
    if row.onnx_versions and opset < row.onnx_versions[0]:
        return f"{label} does not exist at opset {opset} (ONNX defines it from opset {row.onnx_versions[0]})"
    return f"{label} is not supported at opset {opset}: niroc lowers {row.lowered_text}"


def _unknown_op_message(rows: list[OpSupport], name: str) -> str:
    candidates = sorted({row.op for row in rows} | {row.name for row in rows})
    import difflib  # NOTE: here: only an unknown name pays its import

    close = difflib.get_close_matches(name, candidates, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"'{name}' is not an ONNX op niroc knows{hint}"


def _fail(message: str) -> None:
    from niro.ir import NirocError

    print_error(make_console(stderr=True), NirocError(message))


def _lowered_cell(row: OpSupport) -> str:
    if row.lowered_text:
        return row.lowered_text
    if row.body_since is not None:
        return f"its ONNX function body, opset {row.body_since} and later"
    if row.contrib_body:
        return "onnxruntime's semantics, as a body of ONNX ops"
    return "-"


def _native_cell(row: OpSupport) -> str:
    return "yes" if row.native else "no"


_HEADINGS = ("op", "domain", "lowered to MLIR at", "native", "ONNX versions")


def _cells(row: OpSupport) -> tuple[str, ...]:
    versions = ", ".join(map(str, row.onnx_versions)) or "-"
    return (row.op, row.domain, _lowered_cell(row), _native_cell(row), versions)


def _summary(rows: list[OpSupport]) -> str:
    supported = sum(row.supported for row in rows)
    text = f"{supported} supported op{'' if supported == 1 else 's'}"
    if len(rows) != supported:
        text += f", {len(rows) - supported} not supported"
    return text


def _print_listing(console, rows: list[OpSupport], *, summary: bool = True) -> None:
    """A rich table on a terminal; plain aligned columns otherwise (the same whatever the
    width, so grep and FileCheck see one op per line)."""
    if console.is_terminal:
        table = _table(rows)
        table.caption = _summary(rows) if summary else None
        console.print(table)
        return
    table = [_HEADINGS, *(_cells(row) for row in rows)]
    widths = [max(len(line[column]) for line in table) for column in range(len(_HEADINGS))]
    for line in table:
        text = "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        console.file.write(text.rstrip() + "\n")
    if summary:
        console.file.write(_summary(rows) + "\n")
    console.file.flush()


def _table(rows: list[OpSupport]):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for heading in _HEADINGS:
        table.add_column(heading)
    for row in rows:
        style = "" if row.supported else "dim"
        cells = [Text(cell, style=style) for cell in _cells(row)]
        if row.native:
            cells[3].stylize("green")
        table.add_row(*cells)
    return table


def _details(row: OpSupport):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    status = "supported" if row.supported else "not supported"
    heading = Text(f"{row.op} ({row.domain}): ", style="bold")
    heading.append(status, style="green" if row.supported else "red")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("niro op", row.name)
    grid.add_row("lowered to MLIR at", _lowered_cell(row))
    native = _native_cell(row) + (f" ({row.native_note})" if row.native and row.native_note else "")
    grid.add_row("native", native)
    grid.add_row("ONNX versions", ", ".join(map(str, row.onnx_versions)) or "-")
    return Group(heading, grid)
