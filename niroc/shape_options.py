"""`--dim NAME=SIZE` and `--input-shape INPUT=DIMS`: static sizes for a model's input dims.

One decorator (`input_shape_options`) adds both options to any command that loads a model; it
hands the command one parsed `InputShapeRequest` as `shapes`, which `command_steps.load` passes to
the importer. A malformed value (`batch`, `x=1xa`, a negative size, one name given two sizes) is
click's usage error here; a value that does not fit the model (no such dim or input, a rank or
a static dim it contradicts) is found by the importer and reported by `command_steps.load` as a usage
error of the same option. Both exit with 2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from .inputs import InputShapeRequest

__all__ = ["input_shape_options", "usage_error_for"]

F = TypeVar("F", bound=Callable)

_DIM_HELP = (
    "Make every input dim named NAME static, of SIZE (e.g. --dim batch=1). Repeatable. "
    "Static shapes let iree-compile specialize the code."
)
_INPUT_SHAPE_HELP = (
    "Give input INPUT the static shape DIMS, sizes joined by 'x' (e.g. --input-shape "
    "input=1x3x224x224); '?' keeps a dim as declared. For dims without a name. Repeatable."
)


def parse_all(parse, values: tuple[str, ...], param: click.Parameter) -> dict:
    """Each value parsed by the frontend's parser; a name given twice must agree with itself."""
    parsed: dict = {}
    for text in values:
        try:
            name, value = parse(text)
        except ValueError as error:
            raise click.BadParameter(str(error), param=param) from None
        if name in parsed and parsed[name] != value:
            raise click.BadParameter(
                f"'{name}' is given twice, as {_show(parsed[name])} and {_show(value)}", param=param
            )
        parsed[name] = value
    return parsed


def _show(value) -> str:
    if isinstance(value, tuple):
        return "x".join("?" if size is None else str(size) for size in value) or "a scalar"
    return str(value)


def _dims_callback(_ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict:
    if not values:
        return {}
    from niro.frontends.onnx import parse_dim_assignment  # NOTE: here: onnx loads only when used

    return parse_all(parse_dim_assignment, values, param)


def _input_shapes_callback(
    _ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict:
    if not values:
        return {}
    from niro.frontends.onnx import parse_input_shape  # NOTE: here: onnx loads only when used

    return parse_all(parse_input_shape, values, param)


def input_shape_options(function: F) -> F:
    """Add --dim and --input-shape; the command receives `shapes: InputShapeRequest`."""

    def wrapper(*args, dims: dict, input_shapes: dict, **kwargs):
        return function(*args, shapes=InputShapeRequest(dims, input_shapes), **kwargs)

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    wrapper.__dict__.update(function.__dict__)  # click's __click_params__ of earlier decorators
    wrapper = click.option(
        "--input-shape",
        "input_shapes",
        multiple=True,
        metavar="INPUT=DIMS",
        callback=_input_shapes_callback,
        help=_INPUT_SHAPE_HELP,
    )(wrapper)
    wrapper = click.option(
        "--dim", "dims", multiple=True, metavar="NAME=SIZE", callback=_dims_callback, help=_DIM_HELP
    )(wrapper)
    return wrapper  # type: ignore[return-value]


def usage_error_for(option: str, message: str) -> click.BadParameter:
    """A request the model refuses, as click's usage error of the option it came from."""
    return click.BadParameter(message, param_hint=f"'{option}'")
