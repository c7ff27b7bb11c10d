"""`niroc compile` (the default command): ONNX or Niro in, verified, lowered, MLIR out.

The module is always verified before it is lowered or printed, so nothing invalid reaches the
MLIR backend. The output format comes from --emit, else from the output file's suffix, else
MLIR text on stdout. The work happens before the output file is opened, and the file is written
atomically, so a failure at any step leaves the output path as it was.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import click
from niro.ir import Module, NirocError

from .command_steps import attributed_to, check, load, progress_for, write_niro_text
from .inputs import InputShapeRequest
from .output import check_output_path, is_stdout, open_output
from .progress import CountingWriter, Progress
from .render import make_console, print_error
from .session import current_session, session_options
from .shape_options import input_shape_options

__all__ = ["compile_command", "EMIT_FORMATS", "emit_format_for"]

EMIT_FORMATS = ("mlir", "mlirbc", "niro")
_EMIT_BY_SUFFIX = {".mlir": "mlir", ".mlirbc": "mlirbc", ".niro": "niro"}

_EPILOG = """\b
Examples:
  niroc model.onnx -o model.mlir
  niroc compile model.onnxtxt --emit mlirbc -o model.mlirbc
  niroc model.onnx --elide-weights | less
  niroc model.onnx --params model.irpa -o model.mlir (weights to an IREE parameter archive)
  niroc model.onnx -o model.niro                     (stop after import: Niro assembly)
  niroc model.niro -o model.mlir                     (re-enter from Niro assembly)
  niroc model.onnx --allow-unknown -o model.mlir     (keep unknown ops as generic MLIR ops)
  niroc model.onnx --dim batch=1 -o model.mlir       (static batch: iree-compile specializes)
  niroc model.onnx --input-shape input=1x3x224x224 -o model.mlir
  niroc model.onnx --mlir-opt iree-opt \\
      --pass-pipeline 'builtin.module(canonicalize,cse)' -o model.mlir
"""


def emit_format_for(output: str | None, emit: str | None) -> str:
    """--emit if given, else the output suffix's format; stdout defaults to MLIR text."""
    if emit is not None:
        return emit
    if is_stdout(output):
        return "mlir"
    suffix = Path(output).suffix.lower()
    if suffix in _EMIT_BY_SUFFIX:
        return _EMIT_BY_SUFFIX[suffix]
    raise click.UsageError(
        f"cannot tell the output format from '{output}'; "
        "name it .mlir, .mlirbc or .niro, or pass --emit mlir|mlirbc|niro"
    )


@click.command(
    "compile",
    epilog=_EPILOG,
    short_help="Compile a model to MLIR (the default command).",
    context_settings={"max_content_width": 100},
)
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--output",
    default="-",
    metavar="FILE",
    show_default=True,
    help="Where to write; '-' is stdout. Written atomically (a failure leaves FILE untouched).",
)
@click.option(
    "--emit",
    type=click.Choice(EMIT_FORMATS),
    help="Output format: MLIR text, MLIR bytecode, or Niro assembly. "
    "[default: from FILE's suffix (.mlir, .mlirbc, .niro); mlir on stdout]",
)
@click.option(
    "--allow-unknown",
    is_flag=True,
    help="Keep ops Niro does not model as generic MLIR ops instead of failing.",
)
@click.option(
    "--mlir-opt",
    "opt_tool",
    metavar="TOOL",
    help="Pipe the MLIR through an mlir-opt compatible TOOL (e.g. iree-opt, mlir-opt).",
)
@click.option(
    "--pass-pipeline",
    metavar="PIPELINE",
    help="Pass pipeline for the TOOL, e.g. 'builtin.module(canonicalize,cse)'. "
    "Uses iree-opt when --mlir-opt is not given.",
)
@click.option(
    "--params",
    "params_path",
    metavar="FILE.irpa",
    help="Write the weights to an IREE parameter archive (scope 'model', keyed by global name); "
    "the MLIR then names them with IREE's #stream.parameter.named attributes (IREE's dialects, "
    "not upstream MLIR) and stays small. Run with iree-run-module --parameters=model=FILE.irpa.",
)
@click.option(
    "--params-threshold",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --params: only globals of at least N elements go to the archive. [default: 100]",
)
@click.option(
    "--elide-weights",
    is_flag=True,
    help="Leave weight data out of text output, for a readable listing (not compilable).",
)
@input_shape_options
@session_options
def compile_command(
    input_path: str,
    output: str,
    emit: str | None,
    allow_unknown: bool,
    opt_tool: str | None,
    pass_pipeline: str | None,
    params_path: str | None,
    params_threshold: int | None,
    elide_weights: bool,
    shapes: InputShapeRequest,
) -> int:
    """Compile INPUT (.onnx, .onnxtxt or .niro) to MLIR.

    INPUT is imported (or parsed), verified, and lowered to upstream MLIR dialects (func, arith,
    linalg, tensor, scf, cf, ml_program). Verification errors are all printed, as are all the
    ops the lowering refuses; then niroc exits with code 1 without writing anything.
    """
    check_output_path(output)
    emit_format = emit_format_for(output, emit)
    if pass_pipeline is not None and opt_tool is None:
        opt_tool = "iree-opt"
    _check_combination(emit_format, output, opt_tool, elide_weights)
    parameters = _parameter_plan(params_path, params_threshold, emit_format, output)

    session = current_session()
    progress = progress_for(session)
    path = Path(input_path)
    module = load(path, progress, shapes)
    check(module, path, progress)
    writer, lowered = _prepare_writer(
        module,
        path,
        emit_format,
        progress,
        allow_unknown,
        opt_tool,
        pass_pipeline,
        elide_weights,
        parameters,
    )
    target = "stdout" if is_stdout(output) else output
    if is_stdout(output) and sys.stdout.isatty():
        # NOTE: a spinner would be drawn into the text being printed
        progress = Progress.off(progress.step_times)
    with contextlib.ExitStack() as outputs:
        if parameters is not None:
            # NOTE: both files commit only when both are written: the archive's temporary file
            # is renamed after the module's, and neither is if anything fails before.
            archive = outputs.enter_context(open_output(params_path))
            with progress.step(f"writing {params_path}") as step:
                lowered.write_parameters(CountingWriter(archive, step))
        # NOTE: the step outside the file: its time includes the fsync and rename on closing.
        with progress.step(f"writing {target}") as step, open_output(output) as stream:
            writer(CountingWriter(stream, step))
    return 0


def _parameter_plan(params_path: str | None, threshold: int | None, emit_format: str, output: str):
    """The ParameterPlan for --params, after checking the options fit together."""
    if params_path is None:
        if threshold is not None:
            raise click.UsageError("--params-threshold needs --params FILE.irpa")
        return None
    if emit_format == "niro":
        raise click.UsageError("--params needs MLIR output, not --emit niro")
    if is_stdout(params_path):
        raise click.UsageError("--params needs a file, not stdout")
    if not is_stdout(output) and Path(params_path).resolve() == Path(output).resolve():
        raise click.UsageError("--params and -o name the same file")
    check_output_path(params_path)
    from niro.backends.mlir import BINDING, DEFAULT_PARAMETER_THRESHOLD, ParameterPlan

    if BINDING != "iree.compiler":
        raise click.UsageError(
            "--params needs IREE's MLIR bindings (iree-base-compiler): the upstream ones "
            "installed as 'mlir' do not know IREE's parameter attributes"
        )
    return ParameterPlan(threshold=DEFAULT_PARAMETER_THRESHOLD if threshold is None else threshold)


def _check_combination(
    emit_format: str, output: str, opt_tool: str | None, elide_weights: bool
) -> None:
    if emit_format == "niro" and opt_tool is not None:
        raise click.UsageError("--mlir-opt/--pass-pipeline need MLIR output, not --emit niro")
    if emit_format == "mlirbc" and elide_weights:
        raise click.UsageError("--elide-weights applies to text output (mlir, niro), not mlirbc")
    if emit_format == "mlirbc" and is_stdout(output) and sys.stdout.isatty():
        raise click.UsageError(
            "refusing to write MLIR bytecode to a terminal; use -o FILE or a pipe"
        )


Writer = Callable[[BinaryIO], None]


def _prepare_writer(
    module: Module,
    path: Path,
    emit_format: str,
    progress: Progress,
    allow_unknown: bool,
    opt_tool: str | None,
    pass_pipeline: str | None,
    elide_weights: bool,
    parameters=None,
) -> tuple[Writer, object]:
    """Do every step that can fail before the output is opened; return what writes the bytes,
    and the LoweredModule (None for Niro output)."""
    if emit_format == "niro":
        return lambda stream: write_niro_text(module, stream, elide_data=elide_weights), None

    with progress.step("loading the MLIR backend"):
        from niro.backends.mlir import LoweringError, lower_to_mlir

    try:
        with progress.step(f"lowering {path} to MLIR"), attributed_to(path):
            lowered = lower_to_mlir(module, allow_unknown=allow_unknown, parameters=parameters)
    except LoweringError as error:
        for each in (error, *error.refusals):
            _suggest_the_flag(each)
        if error.refusals:
            raise _report_refusals(error, path) from error
        raise
    if opt_tool is not None:
        from niro.backends.mlir import run_opt_tool

        with progress.step(f"running {opt_tool}"), attributed_to(path):
            data = run_opt_tool(
                lowered,
                tool=opt_tool,
                pass_pipeline=pass_pipeline,
                extra_args=_opt_tool_flags(emit_format, elide_weights),
            )
        return (lambda stream: stream.write(data)), lowered
    if emit_format == "mlirbc":
        return lowered.write_bytecode, lowered
    return (lambda stream: lowered.write_text(stream, elide_weights=elide_weights)), lowered


def _suggest_the_flag(error: NirocError) -> None:
    """The backend's note on ops without a lowering speaks of its Python API
    (allow_unknown=True); a CLI user needs the flag instead. Only that error gets it: a
    registered lowering that refuses an op (e.g. legacy broadcasting) refuses it either way."""
    api_notes = tuple(note for note in error.notes if "allow_unknown=True" in note)
    if api_notes:
        error.notes = tuple(note for note in error.notes if note not in api_notes)
        error.notes += ("pass --allow-unknown to keep them as generic MLIR ops",)


def _report_refusals(error, path: Path) -> NirocError:
    """Prints each op the lowering refused as its own error line (with its notes), as the
    verifier's diagnostics are; returns the one-line summary to raise."""
    from niro.backends.mlir import MAX_LISTED_REFUSALS, LoweringError

    console = make_console(stderr=True)
    for refusal in error.refusals[:MAX_LISTED_REFUSALS]:
        print_error(console, refusal, filename=str(path))
    count = len(error.refusals)
    shown = "" if count <= MAX_LISTED_REFUSALS else f", the first {MAX_LISTED_REFUSALS} shown"
    return LoweringError(f"lowering to MLIR failed ({count} errors{shown})", location=str(path))


def _opt_tool_flags(emit_format: str, elide_weights: bool) -> tuple[str, ...]:
    """Flags every MlirOptMain-based tool understands, so its output matches ours.

    NOTE: debug info is kept so the tool's output still names the ONNX nodes, as niroc's does.
    """
    flags = ["--mlir-print-debuginfo"]
    if emit_format == "mlirbc":
        flags.append("--emit-bytecode")
    if elide_weights:
        flags.append("--mlir-elide-resource-strings-if-larger=1")
    return tuple(flags)
