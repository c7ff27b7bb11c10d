"""Declared input shapes, rewritten before import: user-given static sizes and negative dims.

Two rewrites of the graph's declared types happen on the protobuf before anything reads it
(validation, shape inference, onnx_ir), so every later stage sees one consistent model:

- `InputShapes` (the CLI's `--dim NAME=SIZE` and `--input-shape INPUT=1x3x224x224`, or
  `import_model(..., dims=..., input_shapes=...)`) makes symbolic dims of the main graph's
  inputs static: by dim name (every input dim named so, and graph outputs and value_info that
  use the name) or per input (for dims without a name, as onnx-mlir's --shapeInformation does).
  A size given per input also binds that dim's name, if it has one, for the other inputs: one
  name is one size. A name or input the model does not have, a size that contradicts a static
  dim or another use of the name, a rank mismatch, or a negative size is an `InputShapeError`.
- A negative declared dim (`dim_value: -1`, PaddlePaddle's way to say "dynamic") on a graph's
  inputs, outputs or value_info is read as unknown, and a note says so. Negative dims that are
  data (initializer shapes, Reshape targets) are not declarations and are still refused.

`declared_types_rewritten` applies both and puts the caller's protobuf back as it was on exit:
the importer mutates in place rather than copying a model whose weights may be gigabytes.

This module knows ONNX protobufs only; it never imports the CLI.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain

import onnx

from .errors import OnnxImportError
from .inference import all_graphs

__all__ = [
    "InputShapeError",
    "InputShapes",
    "declared_types_rewritten",
    "parse_dim_assignment",
    "parse_input_shape",
]

UNCHANGED = None
"""A dim of an `--input-shape` written `?`: keep the declared dim (static or symbolic)."""


class InputShapeError(OnnxImportError):
    """A requested input shape that does not fit the model. `option` names the flag it came
    from (`--dim`, `--input-shape`), so the CLI can report it as a usage error."""

    def __init__(self, message: str, *, filename: str, option: str):
        super().__init__(message, filename=filename)
        self.option = option


_NAME_SIZE = re.compile(r"^(?P<name>.+?)=(?P<size>.*)$")


def _size(text: str, what: str) -> int:
    text = text.strip()
    if re.fullmatch(r"-?[0-9]+", text) is None:
        raise ValueError(f"{what}: '{text}' is not a size (a whole number)")
    size = int(text)
    if size < 0:
        raise ValueError(f"{what}: size {size} is negative")
    return size


def parse_dim_assignment(text: str) -> tuple[str, int]:
    """`batch=1` -> ('batch', 1). Raises ValueError with a one-line reason."""
    match = _NAME_SIZE.match(text)
    if match is None or not match["name"].strip():
        raise ValueError(f"'{text}' is not NAME=SIZE (e.g. batch=1)")
    name = match["name"].strip()
    return name, _size(match["size"], f"dim '{name}'")


def parse_input_shape(text: str) -> tuple[str, tuple[int | None, ...]]:
    """`x=1x3x224x224` -> ('x', (1, 3, 224, 224)); `?` keeps a dim as declared, an empty shape
    (`x=`) is a scalar. Raises ValueError with a one-line reason."""
    match = _NAME_SIZE.match(text)
    if match is None or not match["name"].strip():
        raise ValueError(f"'{text}' is not INPUT=DIMS (e.g. input=1x3x224x224)")
    name, dims_text = match["name"].strip(), match["size"].strip()
    if not dims_text:
        return name, ()
    dims: list[int | None] = []
    for position, part in enumerate(dims_text.split("x")):
        if part.strip() == "?":
            dims.append(UNCHANGED)
        else:
            dims.append(_size(part, f"input '{name}' dim {position}"))
    return name, tuple(dims)


@dataclass(frozen=True)
class InputShapes:
    """Static sizes requested for the main graph's inputs: `dims` by dim name, `shapes` by
    input name (a dim of None keeps the declared one)."""

    dims: Mapping[str, int] = field(default_factory=dict)
    shapes: Mapping[str, Sequence[int | None]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.dims) or bool(self.shapes)

    @classmethod
    def of(
        cls, dims: Mapping[str, int] | None, shapes: Mapping[str, Sequence[int | None]] | None
    ) -> InputShapes:
        for name, size in (dims or {}).items():
            if not isinstance(size, int) or size < 0:
                raise ValueError(f"dim '{name}': size {size} is not a whole number >= 0")
        for name, dims_ in (shapes or {}).items():
            for position, given in enumerate(dims_):
                if given is not None and (not isinstance(given, int) or given < 0):
                    raise ValueError(
                        f"input '{name}' dim {position}: size {given} is not a whole number >= 0"
                    )
        return cls(dict(dims or {}), {name: tuple(value) for name, value in (shapes or {}).items()})


def _dims_text(shape: onnx.TensorShapeProto) -> str:
    parts = []
    for dim in shape.dim:
        if dim.HasField("dim_value"):
            parts.append(str(dim.dim_value))
        else:
            parts.append(dim.dim_param or "?")
    return "[" + ", ".join(parts) + "]"


class _Rewriter:
    """One rewrite of a model's declared types; remembers each changed type to restore it."""

    def __init__(self, model: onnx.ModelProto, filename: str) -> None:
        self.model = model
        self.filename = filename
        self.saved: list[tuple[onnx.TypeProto, onnx.TypeProto]] = []
        self.notes: list[str] = []

    def _save(self, type_: onnx.TypeProto) -> None:
        original = onnx.TypeProto()
        original.CopyFrom(type_)
        self.saved.append((type_, original))

    def restore(self) -> None:
        for type_, original in reversed(self.saved):
            type_.CopyFrom(original)

    # -- negative declared dims ----------------------------------------------------------------

    def unknown_negative_dims(self) -> None:
        """Clear negative declared dims in every graph (subgraphs included); note each graph
        input or output that had one, and how many value_info entries did."""
        hinted = 0
        for graph in all_graphs(self.model.graph):
            for role, values in (
                ("input", graph.input),
                ("output", graph.output),
                ("value_info", graph.value_info),
            ):
                for value in values:
                    shape = _shape_of(value)
                    if shape is None or not any(
                        dim.HasField("dim_value") and dim.dim_value < 0 for dim in shape.dim
                    ):
                        continue
                    before = _dims_text(shape)
                    self._save(value.type)
                    for dim in shape.dim:
                        if dim.HasField("dim_value") and dim.dim_value < 0:
                            dim.Clear()
                    if role == "value_info":
                        hinted += 1
                    else:
                        where = "" if graph is self.model.graph else f" of graph '{graph.name}'"
                        self.notes.append(
                            f"{role} '{value.name}'{where} declares shape {before}: "
                            "negative dims read as unknown (dynamic)"
                        )
        if hinted:
            entries = "entry declares" if hinted == 1 else "entries declare"
            self.notes.append(
                f"{hinted} value_info {entries} negative dims: read as unknown (dynamic)"
            )

    # -- requested static shapes ---------------------------------------------------------------

    def error(self, message: str, option: str) -> InputShapeError:
        return InputShapeError(message, filename=self.filename, option=option)

    def apply(self, request: InputShapes) -> None:
        graph = self.model.graph
        initializers = {tensor.name for tensor in graph.initializer}
        inputs = {value.name: value for value in graph.input if value.name not in initializers}
        named = self._named_dims(inputs.values())
        sizes: dict[str, tuple[int, str]] = {}  # dim name -> (size, which flag set it)
        for name, size in request.dims.items():
            if name not in named:
                known = ", ".join(sorted(named)) or "none"
                raise self.error(
                    f"no input of the model has a dim named '{name}' (named dims: {known})", "--dim"
                )
            sizes[name] = (size, f"dim {name}={size}")
        shapes: dict[str, list[int | None]] = {}
        for input_name, dims in request.shapes.items():
            value = inputs.get(input_name)
            if value is None:
                known = ", ".join(f"'{name}'" for name in inputs) or "none"
                raise self.error(
                    f"the model has no input '{input_name}' (its inputs: {known})", "--input-shape"
                )
            shapes[input_name] = self._shape_for(value, dims, sizes)
        for name, value in inputs.items():
            shape = _shape_of(value)
            if shape is None:
                continue
            wanted = shapes.get(name, [None] * len(shape.dim))
            for position, dim in enumerate(shape.dim):
                if wanted[position] is None and dim.dim_param in sizes:
                    wanted[position] = sizes[dim.dim_param][0]
            shapes[name] = wanted
        for name, dims in shapes.items():
            self._write(inputs[name], dims)
        self._bind_names_elsewhere({name: size for name, (size, _) in sizes.items()})

    @staticmethod
    def _named_dims(values) -> set[str]:
        names: set[str] = set()
        for value in values:
            shape = _shape_of(value)
            if shape is not None:
                names.update(
                    dim.dim_param
                    for dim in shape.dim
                    if dim.dim_param and not dim.HasField("dim_value")
                )
        return names

    def _shape_for(
        self,
        value: onnx.ValueInfoProto,
        dims: Sequence[int | None],
        sizes: dict[str, tuple[int, str]],
    ) -> list[int | None]:
        """The sizes `--input-shape` gives `value`, checked against its declaration and the
        other requests; binds the dim names it covers in `sizes`."""
        given = "x".join("?" if size is None else str(size) for size in dims)
        flag = f"input '{value.name}' given {given or 'a scalar shape'}"
        if value.type.WhichOneof("value") != "tensor_type":
            raise self.error(f"input '{value.name}' is not a tensor", "--input-shape")
        shape = _shape_of(value)
        if shape is None:
            if None in dims:
                raise self.error(
                    f"{flag}: it declares no rank, so no dim to keep ('?')", "--input-shape"
                )
            return list(dims)
        declared = _dims_text(shape)
        if len(dims) != len(shape.dim):
            raise self.error(
                f"{flag} (rank {len(dims)}): it is declared rank {len(shape.dim)} {declared}",
                "--input-shape",
            )
        for position, (size, dim) in enumerate(zip(dims, shape.dim, strict=True)):
            if size is None:
                continue
            if dim.HasField("dim_value") and dim.dim_value != size:
                raise self.error(
                    f"{flag}: dim {position} is {size}, but it is declared static {dim.dim_value} {declared}",
                    "--input-shape",
                )
            if dim.dim_param and not dim.HasField("dim_value"):
                bound = sizes.get(dim.dim_param)
                if bound is not None and bound[0] != size:
                    raise self.error(
                        f"{flag}: dim {position} ('{dim.dim_param}') is {size}, but {bound[1]} makes "
                        f"it {bound[0]}",
                        "--input-shape",
                    )
                sizes[dim.dim_param] = (size, flag)
        return list(dims)

    def _write(self, value: onnx.ValueInfoProto, dims: Sequence[int | None]) -> None:
        if all(size is None for size in dims) and _shape_of(value) is not None:
            return
        self._save(value.type)
        tensor = value.type.tensor_type
        if not tensor.HasField("shape"):
            tensor.shape.SetInParent()
            for _ in dims:
                tensor.shape.dim.add()
        for dim, size in zip(tensor.shape.dim, dims, strict=True):
            if size is not None:
                dim.Clear()
                dim.dim_value = size

    def _bind_names_elsewhere(self, sizes: Mapping[str, int]) -> None:
        """Graph outputs and value_info that use a bound name get its size too, so inference
        never merges a static inferred dim with a stale symbolic declaration."""
        if not sizes:
            return
        graph = self.model.graph
        for value in chain(graph.output, graph.value_info):
            shape = _shape_of(value)
            if shape is None or not any(dim.dim_param in sizes for dim in shape.dim):
                continue
            self._save(value.type)
            for dim in shape.dim:
                if dim.dim_param in sizes and not dim.HasField("dim_value"):
                    size = sizes[dim.dim_param]
                    dim.Clear()
                    dim.dim_value = size


def _shape_of(value: onnx.ValueInfoProto) -> onnx.TensorShapeProto | None:
    if value.type.WhichOneof("value") != "tensor_type" or not value.type.tensor_type.HasField(
        "shape"
    ):
        return None
    return value.type.tensor_type.shape


@contextmanager
def declared_types_rewritten(
    model: onnx.ModelProto, filename: str, request: InputShapes | None = None
) -> Iterator[list[str]]:
    """Within the block, `model`'s declared types read negative dims as unknown and carry the
    requested static sizes; yields the notes to show the user. The model is restored on exit."""
    rewriter = _Rewriter(model, filename)
    try:
        if model.HasField("graph"):
            rewriter.unknown_negative_dims()
            if request:
                rewriter.apply(request)
        yield rewriter.notes
    finally:
        rewriter.restore()
