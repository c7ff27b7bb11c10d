"""`niroc check MODEL`: niroc + iree-compile + iree.runtime against onnxruntime, output by output.

On a mismatch it names the first ONNX node whose output differs (checking.localize) and, with
--repro DIR, writes that node as a model of its own with the inputs it got, which `niroc check`
reports the same way. Rendering lives here, the work in checking.py. Exit codes: 0 every output
matches, 1 a mismatch or a failing step, 2 a usage error.
"""

from __future__ import annotations

from pathlib import Path

import click
from niro.ir import NirocError

from .command_steps import progress_for
from .dims import parse_dims
from .inputs import detect_format
from .output import open_output
from .render import error_record, make_console, print_block, print_error, write_json_line
from .session import current_session, format_option, session_options

__all__ = ["check_command"]

_EPILOG = """\b
Examples:
  niroc check model.onnx                          random inputs (--seed 0)
  niroc check model.onnx --dim batch=8 --seed 3   size a dynamic dim named 'batch'
  niroc check model.onnx --inputs feeds.npz --repro bad/
  niroc check bad/model.onnx --inputs bad/inputs.npz

\b
Tolerances by element type (|got - expected| <= atol + rtol * |expected|):
  float16 1e-2/1e-2, bfloat16 2e-2/2e-2, float32 1e-4/1e-4, float64 1e-7/1e-7,
  integers and booleans exact; a float32 output a Cast widens from float16 or bfloat16 takes
  the half type's; --rtol/--atol replace them for every output.
Needs the check extra: pip install 'niroc[check]' (iree-base-runtime, onnxruntime).
"""


class CheckUnavailable(NirocError):
    """The optional runtimes `check` needs are not installed."""


@click.command(
    "check",
    epilog=_EPILOG,
    short_help="Run a model with IREE and onnxruntime; compare the outputs.",
    context_settings={"max_content_width": 100},
)
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--inputs",
    "inputs_file",
    metavar="FILE.npz",
    type=click.Path(exists=True, dir_okay=False),
    help="The inputs, one array per graph input name (np.savez). [default: random]",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option(
    "--dim",
    "dim_values",
    metavar="NAME=SIZE",
    multiple=True,
    help="Run-time size of the dynamic dim NAME of the random inputs (repeatable); "
    "unnamed or unsized dynamic dims are 1.",
)
@click.option("--rtol", type=float, help="Relative tolerance for every output.")
@click.option("--atol", type=float, help="Absolute tolerance for every output.")
@click.option(
    "--repro",
    "repro_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="On a mismatch, write DIR/model.onnx (the first differing node alone) and "
    "DIR/inputs.npz (its inputs).",
)
@format_option(
    'one object per line ({"type": "output"|"node"|"repro"|"note"|"diagnostic"|"summary", ...})'
)
@session_options
def check_command(
    model_path: str,
    inputs_file: str | None,
    seed: int,
    dim_values: tuple[str, ...],
    rtol: float | None,
    atol: float | None,
    repro_dir: str | None,
    output_format: str,
) -> int:
    """Compile MODEL (.onnx, .onnxtxt) with niroc and iree-compile for the local CPU, run it
    with iree.runtime and with onnxruntime on the same inputs, and compare every output.

    On a mismatch, the first ONNX node whose output differs is found (its intermediate values
    exposed as outputs on both sides: all at once for small graphs, by bisection for large
    ones) and named with its op type. Exits 0 when every output matches, 1 on a mismatch or
    when a step fails (import, iree-compile, run, onnxruntime), 2 on a usage error.
    """
    dims = parse_dims(dim_values)
    if inputs_file is not None and dims:
        raise click.UsageError("--dim sizes random inputs; with --inputs the arrays give the sizes")
    path = Path(model_path)
    if detect_format(path) == "niro":
        raise click.UsageError(
            f"'{model_path}' is Niro assembly; check needs an ONNX model (.onnx, .onnxtxt), "
            "which onnxruntime runs as the reference"
        )
    report = _Report(path, as_json=output_format == "json", quiet=current_session().quiet)
    from .checking import CHECK_EXTRA, CheckStepFailed, missing_check_extra

    missing = missing_check_extra()
    if missing:
        raise CheckUnavailable(f"niroc check needs {' and '.join(missing)}: {CHECK_EXTRA}")
    try:
        return _check(path, inputs_file, seed, dims, rtol, atol, repro_dir, report)
    except CheckStepFailed as error:
        current_session().print_traceback()
        report.failure(error)
        return 1


def _check(path, inputs_file, seed, dims, rtol, atol, repro_dir, report) -> int:
    from niro.frontends.onnx.surgery import input_names

    from .checking import (
        RANDOM_INTEGERS,
        CheckStepFailed,
        ModelRunner,
        compare,
        fused_low_bit_products_note,
        localize,
        random_feeds,
        tolerance_for,
        widened_from_half,
    )

    model = _load_onnx(path)
    fused_note = fused_low_bit_products_note(model)
    if fused_note is not None:
        report.note(fused_note)
    names = input_names(model.graph)
    if inputs_file is not None:
        feeds = _read_feeds(inputs_file, model, names)
    else:
        _check_dims_exist(model, dims)
        feeds, notes = random_feeds(model, names, seed, dims)
        for note in notes:
            report.note(note)
    progress = progress_for(current_session())
    runner = ModelRunner(path, progress)

    try:
        outputs, got, expected = runner.run_both(model, feeds, str(path))
    except CheckStepFailed as error:
        if inputs_file is None and error.step in ("run", "onnxruntime"):
            integers = [name for name, value in feeds.items() if value.dtype.kind in "iu"]
            if integers:
                low, high = RANDOM_INTEGERS
                report.note(
                    f"the inputs were random, integer ones ({', '.join(integers)}) in "
                    f"[{low}, {high}): a model that needs valid ids, indices or masks takes them "
                    "from --inputs"
                )
        raise
    # typed once the model has imported (a model that does not gets the import's error)
    half_origin = widened_from_half(model)
    for output in model.graph.output:
        if output.name in half_origin and rtol is None and atol is None:
            half = half_origin[output.name].name
            report.note(
                f"output '{output.name}' is a {half} value widened by a Cast: compared at "
                f"{half}'s tolerance"
            )

    def tolerance(name, expected):
        return tolerance_for(half_origin.get(name, expected.dtype), rtol, atol)

    comparisons = [
        compare(name, value, wanted, tolerance(name, wanted))
        for name, value, wanted in zip(outputs, got, expected, strict=True)
    ]
    report.outputs(comparisons)
    mismatches = sum(1 for comparison in comparisons if not comparison.matches)
    if mismatches:
        culprit = localize(model, feeds, runner, tolerance)
        report.culprit(culprit, len(model.graph.node), runner.compile_count - 1)
        if culprit is not None and _rounding_flip(culprit):
            report.note(
                f"'{culprit.name}' rounds to integers and is one step off only: float inputs "
                "equal within tolerance but not to the last bit round apart next to a boundary "
                "(common with 16-bit quantization); the --repro of the node, run on "
                "onnxruntime's input, matches if that is all"
            )
        if culprit is not None and repro_dir is not None:
            report.repro(_write_repro(model, feeds, culprit.index, Path(repro_dir)))
    report.summary(len(comparisons), mismatches)
    return 1 if mismatches else 0


_QUANTIZING = frozenset({"QuantizeLinear", "DynamicQuantizeLinear"})


def _rounding_flip(culprit) -> bool:
    """Whether the first differing node quantizes and its integer outputs are one step off."""
    differing = [each for each in culprit.comparisons if not each.matches]
    return (
        culprit.op_type in _QUANTIZING
        and bool(differing)
        and all(
            each.dtype.startswith(("int", "uint")) and each.max_abs_error <= 1 for each in differing
        )
    )


def _load_onnx(path: Path):
    """The model as a ModelProto with its weights (onnxruntime and niroc both take it)."""
    import onnx
    from niro.frontends.onnx import load_onnx_text

    from .checking import CheckStepFailed

    try:
        if detect_format(path) == "onnxtxt":
            return load_onnx_text(path, filename=str(path))
        return onnx.load(str(path))
    except NirocError as error:
        raise CheckStepFailed("import", error.message) from error
    except Exception as error:  # noqa: BLE001 - protobuf's and onnx's errors share no base
        raise CheckStepFailed("import", f"cannot load the model: {error}") from error


def _check_dims_exist(model, dims: dict[str, int]) -> None:
    from .checking import dynamic_dim_names

    known = dynamic_dim_names(model)
    for name in dims:
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise click.BadParameter(
                f"no input has a dynamic dim named '{name}' (named dims: {listed})",
                param_hint="--dim",
            )


def _read_feeds(inputs_file: str, model, names) -> dict:
    import numpy as np
    from onnx import helper

    try:
        with np.load(inputs_file, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError) as error:
        raise click.BadParameter(
            f"cannot read '{inputs_file}': {error}", param_hint="--inputs"
        ) from error
    missing = [name for name in names if name not in arrays]
    unknown = [key for key in arrays if key not in names]
    if missing or unknown:
        problems = [f"no array for input '{name}'" for name in missing]
        problems += [f"'{key}' is no input of the model" for key in unknown]
        raise click.BadParameter(f"{inputs_file}: {'; '.join(problems)}", param_hint="--inputs")
    declared = {value.name: value.type.tensor_type.elem_type for value in model.graph.input}
    for name in names:
        wanted = np.dtype(helper.tensor_dtype_to_np_dtype(declared[name]))
        if _saved_as_void(arrays[name].dtype, wanted):
            arrays[name] = arrays[name].view(wanted)
        if arrays[name].dtype != wanted:
            raise click.BadParameter(
                f"{inputs_file}: input '{name}' is {arrays[name].dtype}, the model takes {wanted}",
                param_hint="--inputs",
            )
    return {name: arrays[name] for name in names}


def _saved_as_void(found, wanted) -> bool:
    """Whether `found` is how np.savez stores an array of `wanted`, an ml_dtypes type (bfloat16,
    float8, int4...): numpy knows no such dtype, so the file holds raw void elements of its
    width (`|V2` for bfloat16), which np.load cannot type back."""
    return (
        wanted.type.__module__ == "ml_dtypes"
        and found.kind == "V"
        and found.fields is None
        and found.itemsize == wanted.itemsize
    )


def _write_repro(model, feeds, index: int, folder: Path) -> dict:
    """The culprit node alone, fed with onnxruntime's values of its inputs (which IREE agreed
    with), written atomically as folder/model.onnx and folder/inputs.npz."""
    import numpy as np
    from niro.frontends.onnx.surgery import exposed, node_inputs, single_node_model

    from .checking import run_onnxruntime

    node = model.graph.node[index]
    initializers = {initializer.name for initializer in model.graph.initializer}
    wanted = [name for name in node_inputs(node) if name not in initializers]
    wanted += [name for name in node.output if name]
    with exposed(model, wanted) as outputs:
        values = dict(zip(outputs, run_onnxruntime(model, feeds), strict=True))
    single, single_feeds = single_node_model(model, index, values, values)
    folder.mkdir(parents=True, exist_ok=True)
    model_path, inputs_path = folder / "model.onnx", folder / "inputs.npz"
    with open_output(str(model_path)) as stream:
        stream.write(single.SerializeToString())
    with open_output(str(inputs_path)) as stream:
        np.savez(stream, **single_feeds)
    return {"model": str(model_path), "inputs": str(inputs_path)}


class _Report:
    """Writes the results as they come: rich text on stdout, or one JSON object per line."""

    def __init__(self, path: Path, *, as_json: bool, quiet: bool):
        self.file = str(path)
        self.as_json = as_json
        self.quiet = quiet
        self.console = make_console()

    def note(self, text: str) -> None:
        if self.as_json:
            write_json_line({"type": "note", "file": self.file, "message": text})
        else:
            from rich.text import Text

            make_console(stderr=True).print(Text.assemble(("note:", "bold cyan"), " ", text))

    def failure(self, error: NirocError) -> None:
        if self.as_json:
            record = error_record(self.file, error)
            record["rule"] = error.step
            write_json_line(record)
        else:
            print_error(make_console(stderr=True), error, filename=self.file)

    def outputs(self, comparisons) -> None:
        if self.as_json:
            for comparison in comparisons:
                write_json_line({"type": "output", "file": self.file, **comparison.to_dict()})
            return
        print_block(self.console, _comparison_table(comparisons))

    def culprit(self, culprit, node_count: int, compiles: int) -> None:
        """`compiles`: how many compiles the search took (one for a small graph)."""
        if self.as_json:
            record = {"type": "node", "file": self.file, "compiles": compiles}
            record.update(culprit.to_dict() if culprit is not None else {"node": None})
            write_json_line(record)
            return
        from rich.text import Text

        if culprit is None:
            self.console.print(
                "no intermediate value differs: the difference arises in forming the outputs"
            )
            return
        worst = max(culprit.comparisons, key=lambda each: each.max_abs_error)
        self.console.print(
            Text.assemble(
                "first differing node: ",
                (f"'{culprit.name}' ({culprit.op_type})", "bold red"),
                f", node {culprit.index + 1} of {node_count}; output '{worst.name}' ",
                f"max abs error {_number(worst.max_abs_error)} ",
                (f"(found in {compiles} compile{'' if compiles == 1 else 's'})", "dim"),
            )
        )

    def repro(self, written: dict) -> None:
        if self.as_json:
            write_json_line({"type": "repro", "file": self.file, **written})
            return
        self.console.print(
            f"repro written: {written['model']}, {written['inputs']}\n"
            f"  niroc check {written['model']} --inputs {written['inputs']}"
        )

    def summary(self, count: int, mismatches: int) -> None:
        if self.as_json:
            write_json_line(
                {"type": "summary", "file": self.file, "outputs": count, "mismatches": mismatches}
            )
            return
        if self.quiet:
            return
        from rich.text import Text

        style = "bold red" if mismatches else "bold green"
        noun = "output" if count == 1 else "outputs"
        verdict = f"{mismatches} mismatch" + ("" if mismatches == 1 else "es")
        self.console.print(Text(f"{count} {noun}, {verdict}", style=style))


def _comparison_table(comparisons):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for title, justify in (
        ("output", "left"),
        ("shape", "left"),
        ("dtype", "left"),
        ("max abs error", "right"),
        ("max rel error", "right"),
        ("verdict", "left"),
    ):
        table.add_column(title, justify=justify)
    for comparison in comparisons:
        style = "green" if comparison.matches else "bold red"
        table.add_row(
            comparison.name,
            "[" + ",".join(str(dim) for dim in comparison.shape) + "]",
            comparison.dtype,
            _number(comparison.max_abs_error),
            _number(comparison.max_rel_error),
            Text(comparison.verdict, style=style),
        )
    return table


def _number(value: float) -> str:
    return f"{value:.3g}"
