"""The typing step: a model inferred, read into onnx_ir, rewritten where its types say, typed.

ONNX shape inference (with folding and symbolic dims, `inference.infer_types`) runs on a
weightless copy of the proto, whose answer is bound once to the onnx_ir values and nodes the
model is read into (`value_types`). Then the rewrites that decide what to write from those
types work on the onnx_ir model in place, in this order: the sequence rewrite (`sequences`: a
sequence's form comes from its elements' shapes and the constants folding found), then, for a
main graph, onnxruntime's Conv folds of fp16/bf16 weights (`half_conv_folds`) and its fp16/bf16
plan (`half_precision`: which nodes read half values). A rewrite either types what it writes
itself or has the model typed again (`typed_again`: inference of a weightless proto of the
onnx_ir model). The sequence rewrite's result is typed again: the tensor ops it writes type more
than ONNX typed the sequence ops they replace (a Concat of a listed sequence has the length
ConcatFromSequence lacked, a SequenceLength of a listed sequence becomes a constant), and that
reaches every node downstream, which only inference carries it to. The Conv folds type the
value a folded Conv now yields (its reader's); the plan changes no shape, so it types the values
it makes itself (`half_plan_types`), its bodies' and the folds of what it writes included,
except where inference would learn more. One pass is the fixpoint: no rewrite makes work for
one before it (the half-precision rewrites write no sequence op, and the plan has nothing to do
that the Conv folds undo). A model without sequences or half values is inferred once.

What leaves this step is the onnx_ir model the conversion walks and its `ValueTypes`. Failures
are raised as they come (`InferenceFailure`, `SequenceRewriteError`): the importer says which
graph or function they belong to.
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx
import onnx_ir

from .errors import first_line, root_cause
from .half_conv_folds import ReadInitializer, fold_half_convs
from .half_precision import plan_half_precision
from .inference import GraphTypes, InferenceFailure, infer_types
from .loading import deserialize_model
from .sequences import eliminate_sequences, has_sequences
from .value_types import ValueTypes, bind_types

__all__ = ["bound_types", "typed_again", "typed_model"]


def typed_model(
    model: onnx.ModelProto,
    display: str,
    split_raw: Mapping[str, memoryview] | None = None,
    read_half: ReadInitializer | None = None,
) -> tuple[onnx_ir.Model, ValueTypes]:
    """`model` (left untouched) read into onnx_ir, rewritten and typed (module docstring);
    `display` names it in messages. `split_raw` holds the main graph's split-out raw_data
    (`inference.strip_weights`). `read_half` reads a main-graph initializer as a
    float16/bfloat16 array for the fp16/bf16 rewrites; None keeps the ONNX rounding of every
    op: a specialised function body, because onnxruntime inlines model-local functions before
    it plans, which niroc does not model."""
    ir_model = deserialize_model(model, display)
    types = bound_types(ir_model, infer_types(model, split_raw))
    if has_sequences(ir_model):
        eliminate_sequences(ir_model, types, split_raw)
        types = typed_again(ir_model, split_raw)
    if read_half is not None:
        fold_half_convs(ir_model, read_half, types)
        planned = plan_half_precision(ir_model, types, split_raw)
        if planned is not None:
            types = planned.types if planned.types is not None else typed_again(ir_model, split_raw)
    return ir_model, types


def bound_types(model: onnx_ir.Model, types: GraphTypes) -> ValueTypes:
    """`types` (inferred for the proto `model` was read from) bound to its values and nodes."""
    bound = ValueTypes()
    bind_types(model.graph, types, bound)
    return bound


def typed_again(
    model: onnx_ir.Model, split_raw: Mapping[str, memoryview] | None = None
) -> ValueTypes:
    """The types of `model` as a rewrite left it: inference of a weightless proto of it."""
    try:
        proto = onnx_ir.serde.serialize_model(model)
    except onnx_ir.serde.SerdeError as error:
        raise InferenceFailure(
            f"the rewritten model cannot be written for inference: {first_line(root_cause(error))}"
        ) from error
    return bound_types(model, infer_types(proto, split_raw))
