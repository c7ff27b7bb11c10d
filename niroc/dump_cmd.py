"""`niroc dump FILE`: show the Niro IR of a model, as assembly or as a tree.

Assembly (the default) is the printer's round-trippable text: `niroc dump m.onnx -o m.niro`
then `niroc m.niro` compiles the same module. `--pretty` renders `format_tree` with rich (types
on every value; weights elided unless --no-elide-weights). Dump does not verify, so it also
shows modules the verifier rejects; use `niroc verify` for that.
"""

from __future__ import annotations

import io
from pathlib import Path

import click
from niro.ir import Module

from .command_steps import attributed_to, load, progress_for, write_niro_text
from .output import check_output_path, is_stdout, open_output
from .render import make_console, print_block
from .session import current_session, session_options

__all__ = ["dump_command"]

_EPILOG = """\b
Examples:
  niroc dump model.onnx                       Niro assembly on stdout
  niroc dump model.onnx -o model.niro         ... to a file (niroc model.niro compiles it)
  niroc dump --pretty model.onnx              a tree with types, weights elided
  niroc dump --pretty --depth 2 --function main model.onnx
"""

# NOTE: when the tree goes to a file or a pipe, no line is folded or cut (rich would at 80
# columns); rich pads no tree line to the width, so a wide "page" costs nothing.
_UNFOLDED_WIDTH = 1_000_000


@click.command(
    "dump",
    epilog=_EPILOG,
    short_help="Print a model's Niro IR (assembly or a tree).",
    context_settings={"max_content_width": 100},
)
@click.argument("input_path", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--output",
    default="-",
    metavar="FILE",
    show_default=True,
    help="Where to write; '-' is stdout. Written atomically.",
)
@click.option("--pretty", is_flag=True, help="Render the IR as a tree with types (rich).")
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    metavar="N",
    help="With --pretty: expand N levels below the module; deeper parts are summarized.",
)
@click.option(
    "--function",
    "functions",
    multiple=True,
    metavar="NAME",
    help="With --pretty: show only function NAME (repeatable).",
)
@click.option(
    "--elide-weights/--no-elide-weights",
    default=None,
    help="Leave weight data out. [default: on with --pretty, off for assembly]",
)
@session_options
def dump_command(
    input_path: str,
    output: str,
    pretty: bool,
    depth: int | None,
    functions: tuple[str, ...],
    elide_weights: bool | None,
) -> int:
    """Print the Niro IR of FILE (.onnx, .onnxtxt or .niro).

    Assembly (the default) is the text niroc reads back; --pretty draws a tree with every
    value's type. dump does not verify, so it also shows modules that `niroc verify` rejects.
    """
    if not pretty and (depth is not None or functions):
        raise click.UsageError("--depth and --function apply to --pretty output")
    check_output_path(output)
    elide = pretty if elide_weights is None else elide_weights
    session = current_session()
    progress = progress_for(session)
    module = load(Path(input_path), progress)
    if pretty:
        names = tuple(name.removeprefix("@") for name in functions)
        with attributed_to(Path(input_path)):
            _write_tree(module, output, depth, names or None, elide)
    else:
        with open_output(output) as stream:
            write_niro_text(module, stream, elide_data=elide)
    return 0


def _write_tree(
    module: Module, output: str, depth: int | None, functions: tuple[str, ...] | None, elide: bool
) -> None:
    from niro.ir import format_tree

    tree = format_tree(module, depth=depth, elide_data=elide, functions=functions)
    if is_stdout(output):
        console = make_console()
        if not console.is_terminal:
            console.width = _UNFOLDED_WIDTH
        print_block(console, tree)
        return
    buffer = io.StringIO()
    file_console = make_console(file=buffer)
    file_console.width = _UNFOLDED_WIDTH
    print_block(file_console, tree)
    with open_output(output) as stream:
        stream.write(buffer.getvalue().encode("utf-8"))
