"""The load step of the import: a path or ModelProto -> a ModelProto and its weights' bytes, and
the ModelProto -> onnx_ir's model.

A `.onnx` file is mapped and its main graph's inline raw_data split out before protobuf parses
the rest (`wire`), so the weights are views into the mapped file, never copies; `.onnxtxt` goes
through onnx's text parser, guarded against nesting that would overflow it. Every failure is an
OnnxImportError naming the file; nothing here looks at what the graph computes.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import onnx
import onnx_ir

from .context import describe_node
from .errors import OnnxImportError, first_line, root_cause
from .wire import split_raw_data

__all__ = ["MAX_TEXT_NESTING", "LoadedModel", "deserialize_inputs", "deserialize_model", "load_model", "load_onnx_text"]


def load_onnx_text(path: str | os.PathLike, *, filename: str | None = None) -> onnx.ModelProto:
    """Parse a model written in ONNX's text syntax (`.onnxtxt`)."""
    display = filename or os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        raise OnnxImportError(f"cannot read model: {first_line(error)}", filename=display) from error
    return _parse_text(text, display)


_PARSE_ERROR = re.compile(
    r"\[ParseError at position \(line: (\d+) column: (\d+)\)\]\s*Error context:(.*?)\n(.*)", re.DOTALL
)


def _parse_error_text(error: Exception) -> str:
    """onnx's parser error as one line: `line 4, column 1: Expected character ) not found
    (at '}')`. onnx raises it with bytes as its argument, a three-line report inside."""
    argument = error.args[0] if error.args else str(error)
    text = argument.decode("utf-8", "replace") if isinstance(argument, bytes) else str(argument)
    match = _PARSE_ERROR.match(text.strip())
    if match is None:
        return first_line(RuntimeError(text))
    line, column, context, message = match.groups()
    message = " ".join(message.split())
    context = " ".join(context.split())
    return f"line {line}, column {column}: {message}" + (f" (at '{context}')" if context else "")


MAX_TEXT_NESTING = 200
"""Deepest bracket nesting of ONNX text handed to onnx's parser. Its C++ recursive descent
overflows the stack (a segfault) somewhere past a few thousand levels; protobuf refuses a model
nested past 100 messages anyway (each graph in a graph costs three), so no model it could load
nests anywhere near this."""


def _text_nesting(text: str) -> int:
    """The deepest nesting of `{`, `(` and `[` in ONNX text, outside string literals."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{([":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "})]":
            depth -= 1
    return deepest


def _parse_text(text: str, display: str) -> onnx.ModelProto:
    nesting = _text_nesting(text)
    if nesting > MAX_TEXT_NESTING:
        raise OnnxImportError(
            f"cannot parse ONNX text: brackets nest {nesting} deep, more than the {MAX_TEXT_NESTING} "
            "niroc hands to onnx's parser (protobuf takes at most 100 nested messages)",
            filename=display,
        )
    try:
        return onnx.parser.parse_model(text)
    except Exception as error:  # onnx.parser.ParseError and friends
        raise OnnxImportError(f"cannot parse ONNX text: {_parse_error_text(error)}", filename=display) from error


def _load_binary(path: str, display: str) -> tuple[onnx.ModelProto, dict[str, memoryview]]:
    """The model in a `.onnx` file, and its main-graph initializers' raw_data as views into the
    mapped file (see `wire`): inline weights are then never copied."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            data: bytes | mmap.mmap
            if stat.S_ISREG(info.st_mode) and info.st_size:
                data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            else:  # empty, or a pipe such as /dev/stdin: read what comes
                data = handle.read()
    except OSError as error:
        raise OnnxImportError(f"cannot read model: {first_line(error)}", filename=display) from error
    split = split_raw_data(data)
    remainder, spans = split if split is not None else (bytes(data), {})
    model = onnx.ModelProto()
    try:
        model.ParseFromString(remainder)
    except Exception as error:  # google.protobuf.message.DecodeError
        message = first_line(error)
        if "MaxDepth" in message or "recursion" in message.lower():
            # NOTE: protobuf (upb and C++ alike) stops at 100 nested messages; each nested graph
            # (an If in an If...) costs three (graph, node, attribute)
            message = "it nests messages deeper than protobuf's limit of 100 (graphs nested ~30 deep)"
        raise OnnxImportError(f"not an ONNX model: {message}", filename=display) from error
    whole = memoryview(data)
    return model, {name: whole[start:end] for name, (start, end) in spans.items()}


@dataclass
class LoadedModel:
    """A loaded model: the message, its name for messages, the folder its external data lives
    in, and (for a binary file) its main-graph initializers' raw_data, split out of the message
    as views into the mapped file."""

    model: onnx.ModelProto
    display: str
    base_dir: str | None
    raw_views: dict[str, memoryview] = field(default_factory=dict)


def load_model(source, filename: str | None) -> LoadedModel:
    if isinstance(source, onnx.ModelProto):
        base_dir = os.path.dirname(os.path.abspath(filename)) if filename else None
        return LoadedModel(source, filename or "<model>", base_dir)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        display = filename or path
        base_dir = os.path.dirname(os.path.abspath(path))
        if path.endswith(".onnxtxt"):
            return LoadedModel(load_onnx_text(path, filename=display), display, base_dir)
        model, raw_views = _load_binary(path, display)
        return LoadedModel(model, display, base_dir, raw_views)
    raise TypeError(f"import_model takes a path or an onnx.ModelProto, got {type(source).__name__}")


@contextmanager
def _quiet_onnx_ir() -> Iterator[None]:
    """onnx_ir logs a warning per dangling name; we report those ourselves, as errors."""
    logger = logging.getLogger("onnx_ir")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def deserialize_model(model: onnx.ModelProto, display: str) -> onnx_ir.Model:
    try:
        with _quiet_onnx_ir():
            return onnx_ir.serde.deserialize_model(model)
    except Exception as error:
        message = first_line(root_cause(error))
        if "Map types are not supported" in message:
            raise OnnxImportError(_describe_map_value(model), filename=display) from error
        raise OnnxImportError(f"cannot read model: {message}", filename=display) from error


def deserialize_inputs(model: onnx.ModelProto, display: str) -> list[onnx_ir.Value]:
    """The main graph's inputs as onnx_ir values, without reading the rest of the model (the
    importer checks their types before shape inference); when onnx_ir cannot read one, the
    whole model is read, which reports it as `deserialize_model` does."""
    try:
        with _quiet_onnx_ir():
            return [onnx_ir.serde.deserialize_value_info_proto(info, None) for info in model.graph.input]
    except Exception:  # noqa: BLE001 - onnx_ir raises many kinds; the whole model's reading names it
        return list(deserialize_model(model, display).graph.inputs)


def _describe_map_value(model: onnx.ModelProto) -> str:
    """Names the first declared map-typed value (onnx_ir refuses maps before we see values)."""
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        producers = {
            output: describe_node(node, index)
            for index, node in enumerate(graph.node)
            for output in node.output
        }
        for value in (*graph.input, *graph.output, *graph.value_info):
            if value.type.WhichOneof("value") == "map_type":
                where = producers.get(value.name)
                if where is None:
                    role = "input" if value in graph.input else "value"
                    return f"value '{value.name}' ({role} of graph '{graph.name}'): map types are not supported"
                return f"value '{value.name}' (output of {where}): map types are not supported"
        for node in graph.node:
            for attribute in node.attribute:
                graphs.extend(attribute.graphs)
                if attribute.HasField("g"):
                    graphs.append(attribute.g)
    return "map types are not supported"
