"""`niroc verify FILE...`: load and verify each file, print every diagnostic, summarize.

A file that cannot be loaded counts as one error and the others are still checked. Text output
goes to stdout (it is what the command produces), colored on a terminal; `--format json` writes
one JSON object per line: each diagnostic, each file's stats with --stats, then a summary.
"""

from __future__ import annotations

from pathlib import Path

import click
from niro.ir import Diagnostic, NirocError, verify

from .command_steps import errors_in, load, progress_for
from .render import (
    diagnostic_record,
    error_record,
    make_console,
    print_block,
    print_diagnostics,
    print_error,
    summary_text,
    write_json_line,
)
from .session import current_session, format_option, session_options
from .stats import collect_stats, stats_table

__all__ = ["verify_command"]

_EPILOG = """\b
Examples:
  niroc verify model.onnx
  niroc verify --stats model.onnx other.onnxtxt
  niroc verify --format json model.niro | jq .message
"""


@click.command(
    "verify",
    epilog=_EPILOG,
    short_help="Check models; print every diagnostic.",
    context_settings={"max_content_width": 100},
)
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@format_option('one object per line ({"type": "diagnostic"|"stats"|"summary", ...})')
@click.option(
    "--stats",
    is_flag=True,
    help="Also show each module's functions, globals, weight bytes, and ops by kind with "
    "whether each will compile (native, lowered, no lowering, refused with the reason), "
    "then how many ops will compile. Runs the MLIR lowering without writing it.",
)
@session_options
def verify_command(files: tuple[str, ...], output_format: str, stats: bool) -> int:
    """Import or parse each FILE (.onnx, .onnxtxt, .niro) and verify it.

    Every diagnostic names the rule, where it is (function, block, op), the message and the
    ONNX node when known. Exits with code 1 if any file has an error.
    """
    session = current_session()
    progress = progress_for(session)
    console = make_console()
    as_json = output_format == "json"
    error_count = warning_count = 0
    for name in files:
        path = Path(name)
        try:
            module = load(path, progress)
        except NirocError as error:
            session.print_traceback()
            error_count += 1
            if as_json:
                write_json_line(error_record(name, error))
            else:
                print_error(console, error, filename=name)
            continue
        with progress.step(f"verifying {path}"):
            diagnostics: list[Diagnostic] = verify(module)
        errors = len(errors_in(diagnostics))
        if stats:
            with progress.step(f"checking the lowering of {path}"):
                module_stats = collect_stats(module, check=not errors)
            if as_json:
                write_json_line({"type": "stats", "file": name, **module_stats.to_dict()})
            else:
                print_block(console, stats_table(name, module_stats))
        error_count += errors
        warning_count += len(diagnostics) - errors
        if as_json:
            for diagnostic in diagnostics:
                write_json_line(diagnostic_record(name, diagnostic))
        else:
            print_diagnostics(console, name, diagnostics)
    if as_json:
        write_json_line(
            {
                "type": "summary",
                "files": len(files),
                "errors": error_count,
                "warnings": warning_count,
            }
        )
    elif not session.quiet:
        console.print(summary_text(len(files), error_count, warning_count))
    return 1 if error_count else 0
