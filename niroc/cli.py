"""The `niroc` command: a click group whose default command is `compile`.

`niroc model.onnx -o model.mlir` needs no command word, like `mlir-opt`; `niroc verify` and
`niroc dump` are the other commands. `main()` is the console script: it runs click without its
standalone error handling and turns every failure into one line and an exit code:

    0  success
    1  invalid input, failed verification, failed lowering, an output that cannot be written
    2  usage error (unknown option, missing file, bad combination of options)
    130  interrupted (Ctrl-C)

A traceback is shown only with --debug. The commands import the heavy layers (onnx, the MLIR
bindings) when they run, so `niroc --help` and `niroc --version` stay fast.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import NoReturn

import click

from .check_cmd import check_command
from .compile_cmd import compile_command
from .dump_cmd import dump_command
from .session import SESSION_FLAGS, Session, session_options
from .verify_cmd import verify_command

__all__ = ["cli", "main"]

DEFAULT_COMMAND = "compile"

_HELP = f"""Compile ONNX models to MLIR through Niro IR.

Without a command word, niroc runs `{DEFAULT_COMMAND}`: it reads an ONNX model (.onnx, ONNX text
.onnxtxt) or Niro assembly (.niro), verifies it, and writes MLIR (upstream dialects only) that
iree-compile and mlir-opt take.

\b
Examples:
  niroc model.onnx -o model.mlir          compile to MLIR text
  niroc model.onnx -o model.mlirbc        compile to MLIR bytecode
  niroc verify --stats model.onnx         check a model, count its ops
  niroc dump --pretty model.onnx          show the Niro IR as a tree
  niroc check model.onnx                  run with IREE and onnxruntime, compare
  iree-compile model.mlir --iree-hal-target-device=local \\
      --iree-hal-local-target-device-backends=llvm-cpu \\
      --iree-llvmcpu-target-cpu=host -o model.vmfb
  (add --iree-opt-data-tiling for faster matrix products and convolutions)

\b
Exit codes: 0 ok, 1 invalid input / failed verification / failed lowering,
2 usage error. Run `niroc COMMAND --help` for a command's options.
"""


class DefaultCommandGroup(click.Group):
    """A click Group that runs `default_command` when the first argument names no command.

    The group's own flags (--quiet, --debug) may come first: `niroc --debug m.onnx` compiles.
    A first word that is no file but looks like a mistyped command (`niroc verfy m.onnx`) is a
    usage error with a suggestion, rather than "file 'verfy' does not exist". A model file
    named like a command needs the command word: `niroc compile verify`.
    """

    def __init__(self, *args, default_command: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.default_command = default_command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        index = 0
        while index < len(args) and args[index] in SESSION_FLAGS:
            index += 1
        if index < len(args):
            word = args[index]
            if word not in self.commands and word not in ctx.help_option_names + ["--version"]:
                self._reject_mistyped_command(ctx, word)
                args = [*args[:index], self.default_command, *args[index:]]
        return super().parse_args(ctx, args)

    def _reject_mistyped_command(self, ctx: click.Context, word: str) -> None:
        if word.startswith("-") or os.path.exists(word) or "." in os.path.basename(word):
            return
        import difflib  # NOTE: here, not at the top: only a mistyped word pays its import

        matches = difflib.get_close_matches(word, list(self.commands), n=1)
        if matches:
            raise click.UsageError(
                f"No such command '{word}'. Did you mean '{matches[0]}'?", ctx=ctx
            )

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, "[OPTIONS] INPUT [-o OUTPUT]")
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="   or: ")


def _print_versions(ctx: click.Context, _parameter: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from .versions import version_lines

    click.echo("\n".join(version_lines()))
    ctx.exit()


@click.group(
    cls=DefaultCommandGroup,
    default_command=DEFAULT_COMMAND,
    help=_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    no_args_is_help=True,
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_versions,
    help="Show the versions of niroc, onnx, onnx-ir and the MLIR bindings.",
)
@session_options
def cli() -> None:
    pass


from .ops_cmd import ops_command  # noqa: E402 - kept next to the registration below

for _command in (compile_command, verify_command, check_command, dump_command, ops_command):
    cli.add_command(_command)


def run() -> NoReturn:
    """The console script (`niroc`, `python -m niroc`): `main()`, then a fast exit.

    NOTE: once the work is done and written, the process ends with `os._exit` after flushing
    stdout and stderr, skipping the interpreter's teardown: freeing every module and object one
    by one (onnx, protobuf, numpy, the MLIR libraries, the whole IR) cost ~0.12 s on a one-node
    model, a quarter of niroc's start-up, for memory the OS takes back anyway, as
    clang's -disable-free does. Every output file is closed (and fsynced) before `main` returns.
    """
    code = 0
    try:
        main()
    except SystemExit as exit_:  # NOTE: main() always ends in sys.exit
        code = _exit_code(exit_.code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away; a closed stream
            code = code or 1
    os._exit(code)


def _peak_resident_bytes() -> int | None:
    """This process's peak resident memory, where the OS says (Linux and macOS)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # NOTE: bytes on macOS, KiB on Linux


def _exit_code(code: object) -> int:
    """sys.exit's argument as a process exit code (None is 0; a message is printed, then 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, exit with its code (`SystemExit`); one line per failure."""
    _never_fail_on_encoding()
    _tune_garbage_collector()
    session = Session()
    try:
        code = _run(argv, session)
    except KeyboardInterrupt:  # NOTE: outside click's own handling (e.g. while printing)
        code = _interrupted()
    if session.timing:
        _print_timing(session)
    sys.exit(code)


def _print_timing(session: Session) -> None:
    from . import STARTED_AT
    from .progress import timing_report

    total = time.perf_counter() - STARTED_AT
    try:
        sys.stderr.write(timing_report(session.step_times, total, _peak_resident_bytes()))
        sys.stderr.flush()
    except BrokenPipeError:
        pass


def _tune_garbage_collector() -> None:
    """niroc is one short run that allocates hundreds of thousands of objects (protobuf
    wrappers, IR ops, MLIR handles) and frees few: with the default thresholds the cyclic
    collector rescans them again and again (~15% of a 20,000-node compile). Rarer
    young collections keep cycles collected, at a few MB more.
    """
    gc.set_threshold(50_000, 20, 100)


def _never_fail_on_encoding() -> None:
    """Names from a model may hold anything (lone surrogates from non-UTF-8 bytes, characters
    the terminal's encoding lacks); printing them must not raise. They are written as
    backslash escapes, which also keeps JSON output valid UTF-8.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _run(argv: list[str] | None, session: Session) -> int:
    from niro.ir import NirocError

    from .render import make_console, print_error

    try:
        result = cli.main(argv, prog_name="niroc", obj=session, standalone_mode=False)
        return result if isinstance(result, int) else 0
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        return _interrupted()
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except NirocError as error:
        session.print_traceback()
        print_error(make_console(stderr=True), error)
        return 1
    except OSError as error:
        session.print_traceback()
        print_error(make_console(stderr=True), error)
        return 1
    except Exception as error:  # noqa: BLE001 - the last line of defence; the message says so
        session.print_traceback()
        kind = type(error).__name__
        message = f"internal error: {kind}: {error}"
        if not session.debug:
            message += " (run with --debug for a traceback)"
        print_error(make_console(stderr=True), RuntimeError(message))
        return 1


def _interrupted() -> int:
    """Ctrl-C: one line, and 130 (128 + SIGINT) as shells expect."""
    print("error: interrupted", file=sys.stderr)
    return 130


def _silence_stdout() -> None:
    """After the reader of a pipe went away (`niroc dump m.onnx | head`), exit quietly.

    NOTE: the Python docs' recipe: point stdout at devnull so the final flush cannot fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    run()
