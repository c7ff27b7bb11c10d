"""ONNX model -> Niro Module: the driver of the import's steps, each in its own module.

1. Load (`loading`): the ModelProto, its main graph's weights as views of the file.
2. Check (`validation`, `input_shapes`): what must hold before anything reads the model.
3-5. Type, read and rewrite (`graph_typing`): ONNX shape inference on a weightless copy,
   folding and symbolic dims in rounds (`inference`), answered in the proto's names; the model
   read into onnx_ir once (`loading.deserialize_model`) and the types bound to its values and
   nodes (`value_types`); then the rewrites that read those types (sequence values into tensor
   ops, fp16/bf16 graphs computed where onnxruntime computes) on the onnx_ir model in place,
   each typing what it writes or having the model typed again.
6. Convert (`conversion`, with `calls` for specialised functions): the graph walk that builds
   the Module.

This module must not let a raw exception escape for bad input: every failure is an
OnnxImportError naming the node, value or initializer.
"""

from __future__ import annotations

import gc
from collections.abc import Container, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import onnx
import onnx_ir
from niro.ir import Module, ScalarType, TensorType

from .calls import FunctionCalls
from .context import NodeContext
from .conversion import Converter
from .errors import OnnxImportError, first_line
from .functions import FunctionKey, specialize
from .graph_typing import typed_model
from .inference import InferenceFailure
from .input_shapes import InputShapes, declared_types_rewritten
from .loading import LoadedModel, deserialize_inputs, load_model
from .refinements import resolve_type
from .schema_functions import ExpandPredicate
from .sequences import SequenceRewriteError
from .validation import StructureError, check_graph, check_ir_version, check_opsets, check_text

__all__ = ["ImportedModel", "import_model", "import_model_with_info"]


@dataclass
class ImportedModel:
    """An imported Module and what ties it back to the ONNX model.

    `onnx_names` maps every module symbol to the ONNX name it came from (the graph's name for
    the main Function, an initializer's name for a Global, a function's name for each of its
    specialisations). `input_defaults` maps each graph input that is also an initializer (old IR
    versions) to the Global holding its default value; the input itself stays a Function input.
    """

    module: Module
    main: str
    onnx_names: dict[str, str] = field(default_factory=dict)
    input_defaults: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """What the user should know about how the model was read (e.g. a negative declared dim
    read as unknown): not errors; the CLI prints them as notes unless --quiet."""


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {("" if entry.domain == "ai.onnx" else entry.domain): entry.version for entry in model.opset_import}


class _Importer:
    """One import, step by step: the proto is checked, rewritten and typed, then read into
    onnx_ir once and converted (`conversion`). Function bodies specialised during the
    conversion go through the same proto steps (`prepare_function`)."""

    def __init__(
        self,
        source: LoadedModel,
        expand_functions: ExpandPredicate | None = None,
        input_shapes: InputShapes | None = None,
    ) -> None:
        model = self.model = source.model
        self.input_shapes = input_shapes
        self.filename = source.display
        self.raw_views = source.raw_views
        self.function_protos: dict[FunctionKey, onnx.FunctionProto] = {
            (function.domain, function.name, function.overload): function for function in model.functions
        }
        self.converter = Converter(source)
        self.converter.calls = FunctionCalls(
            self.converter, self.function_protos, expand_functions, self.prepare_function
        )

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(message, filename=self.filename)

    def run(self) -> ImportedModel:
        if not self.model.HasField("graph"):
            raise self.error("not an ONNX model: it has no graph")
        with declared_types_rewritten(self.model, self.filename, self.input_shapes) as notes:
            imported = self._run()
        imported.notes = tuple(notes)
        return imported

    def _run(self) -> ImportedModel:
        """The steps in order, each in one direction: the proto is checked, then rewritten and
        typed in one step (`graph_typing`: the rewrites read inferred types, and ONNX shape
        inference reads protos), then read into onnx_ir once and converted."""
        self._check(self.model, f"graph '{self.model.graph.name}'", self.raw_views)
        self._check_input_types(self.model)
        try:
            ir_model, types = typed_model(self.model, self.filename, self.raw_views, self._read_half)
        except InferenceFailure as error:
            raise self.error(f"shape inference failed: {first_line(error)}") from error
        except SequenceRewriteError as refusal:
            raise self.error(str(refusal)) from None
        converter = self.converter
        converter.types.add(types)
        graph = converter.main_graph = ir_model.graph
        main = converter.symbols.claim(graph.name or "main", fallback="main")
        opsets = dict(ir_model.opset_imports)
        function = converter.import_function(graph, opsets, main, f"graph '{graph.name}'")
        converter.module.functions.insert(0, function)
        return ImportedModel(converter.module, main, dict(converter.symbols.onnx_names), converter.input_defaults)

    def prepare_function(
        self,
        ctx: NodeContext,
        key: FunctionKey,
        function_proto: onnx.FunctionProto,
        input_types: list[TensorType | None],
        call_attributes: dict[str, onnx.AttributeProto],
    ) -> onnx_ir.Model:
        """A function body specialised to one call site, as a model: checked, rewritten, typed,
        read into onnx_ir and its types bound for the conversion (see `calls.PrepareFunction`)."""
        model = specialize(self.model, function_proto, input_types, call_attributes)
        self._check(model, f"function '{function_proto.name}'")
        try:
            ir_model, types = typed_model(model, self.filename)
        except InferenceFailure as error:
            raise ctx.error(f"shape inference of function '{key[1]}' failed: {first_line(error)}") from error
        except SequenceRewriteError as refusal:
            raise ctx.error(f"function '{key[1]}': {refusal}") from None
        self.converter.types.add(types)
        return ir_model

    # -- the proto steps -----------------------------------------------------------------------

    def _read_half(self, name: str) -> np.ndarray | None:
        """Main-graph initializer `name` as a float16/bfloat16 array, None for other types."""
        proto = next((tensor for tensor in self.model.graph.initializer if tensor.name == name), None)
        if proto is None:
            return None
        tensor_type, data = self.converter.read_tensor(
            onnx_ir.serde.deserialize_tensor(proto), f"initializer '{name}'", self.raw_views.get(name)
        )
        dtype = {ScalarType.F16: np.float16, ScalarType.BF16: ml_dtypes.bfloat16}.get(
            tensor_type.element_type
        )
        if dtype is None:
            return None
        return np.frombuffer(data, dtype).reshape(tensor_type.shape)

    def _check(self, model: onnx.ModelProto, what: str, raw_elsewhere: Container[str] = frozenset()) -> None:
        try:
            check_ir_version(model.ir_version)
            check_opsets(model.opset_import, "opset_import")
            for function in model.functions:
                check_text(function.name, "function name")
                check_text(function.domain, f"function '{function.name}': domain")
                check_opsets(function.opset_import, f"function '{function.name}': opset_import")
            check_graph(model.graph, what, _opsets(model), self.function_protos, raw_elsewhere=raw_elsewhere)
        except StructureError as error:
            raise self.error(str(error)) from None

    def _check_input_types(self, model: onnx.ModelProto) -> None:
        """Refuse a graph input of a type Niro cannot hold before shape inference sees it (ONNX's
        C++ code is not robust to every odd input type)."""
        graph = model.graph
        for declared, value in zip(graph.input, deserialize_inputs(model, self.filename), strict=True):
            resolve_type(declared.type, value, f"input of graph '{graph.name}'", self.filename)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one import (if it was running).

    NOTE: an import allocates an object graph the size of the model (onnx_ir nodes, protobuf
    wrappers, Niro ops) and frees almost none of it until the end; with the default thresholds
    the collector rescans that growing heap again and again (~30% of a 20,000-node import,
    the start-up budget). What an import leaves as cyclic garbage (the onnx_ir model) is collected by the
    next collection after it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def import_model_with_info(
    source,
    *,
    filename: str | None = None,
    expand_functions: ExpandPredicate | None = None,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int | None]] | None = None,
) -> ImportedModel:
    """Import `source` (a `.onnx` / `.onnxtxt` path or an `onnx.ModelProto`), with the tables
    that tie the Module back to the ONNX model. `filename` names the model in messages (and,
    for a ModelProto, locates the folder its external data lives in).

    `expand_functions(name, opset)` is asked about each op that ONNX defines by a function body
    (`onnx.Attention`...) and has no native converter: True calls that body (a specialised
    Function, as for model-local functions) instead of keeping an UnknownOp. A backend passes
    "I cannot lower it myself"; None keeps every such op as it is.

    `dims` (dim name -> size) and `input_shapes` (main-graph input name -> its sizes, None
    keeping a declared dim) make symbolic input dims static (see `input_shapes`); a request that
    does not fit the model raises InputShapeError, a ValueError a malformed one (a negative
    size). The caller's ModelProto is left as it was."""
    request = InputShapes.of(dims, input_shapes)
    loaded = load_model(source, filename)
    try:
        with _collector_paused():
            return _Importer(loaded, expand_functions, request).run()
    except UnicodeDecodeError as error:
        # protobuf (proto2) does not check string fields; Python decodes them on access
        raise OnnxImportError(
            f"not an ONNX model: a name or string attribute is not valid UTF-8 ({first_line(error)})",
            filename=loaded.display,
        ) from error


def import_model(
    source,
    *,
    filename: str | None = None,
    expand_functions: ExpandPredicate | None = None,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int | None]] | None = None,
) -> Module:
    """Import an ONNX model as a Niro Module; raises OnnxImportError for a model it refuses.
    See `import_model_with_info` for the arguments."""
    return import_model_with_info(
        source, filename=filename, expand_functions=expand_functions, dims=dims, input_shapes=input_shapes
    ).module
