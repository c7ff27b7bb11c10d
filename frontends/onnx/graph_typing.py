"""The typing step: a model typed, with the rewrites that read its types, in one place.

Two rewrites decide what to write from inferred types: the sequence rewrite (`sequences`: a
sequence's form comes from its elements' shapes and the constants folding found) and
onnxruntime's fp16/bf16 plan (`half_precision.plan_half_precision`: which nodes read half
values). So typing runs in a fixed order, not to a fixpoint: infer (`inference.infer_types`),
let each type-directed rewrite run once on the types of the model as it stands, then type what
it wrote. The sequence rewrite's result is inferred again: the tensor ops it writes type more
than ONNX typed the sequence ops they replace (a Concat of a listed sequence has the length
ConcatFromSequence lacked, a SequenceLength of a listed sequence becomes a constant), and that
reaches every node downstream, which only inference carries it to. The plan changes no shape, so
it types the values it makes itself (`half_precision.HalfPlan.types`), its bodies' and the folds
of what it writes included, except where inference would learn more (then the planned model is
inferred again). The Conv folds of fp16/bf16 weights (`half_precision.fold_half_convs`) read no
types: they run before the first inference and cost none. A model without sequences is inferred
once, unless the plan says otherwise.

The rewrites work on the proto because ONNX shape inference reads protos: a rewrite on onnx_ir
would have to be written back to a proto to be typed again. What leaves this step is the final
proto and its types; the importer reads that proto into onnx_ir once and binds the types
(`value_types`). Failures are raised as they come (`InferenceFailure`,
`SequenceRewriteError`): the importer says which graph or function they belong to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import onnx
import onnx_ir

from .half_conv_folds import ReadInitializer, fold_half_convs
from .half_precision import plan_half_precision
from .inference import GraphTypes, infer_types
from .sequences import eliminate_sequences, has_sequences
from .value_types import ValueTypes, bind_types

__all__ = ["TypedModel", "bound_types", "compute_as_onnxruntime", "type_model"]


@dataclass(frozen=True)
class TypedModel:
    """A model after the typing step, and its inferred types (node for node, name for name)."""

    model: onnx.ModelProto
    types: GraphTypes


def type_model(
    model: onnx.ModelProto, split_raw: Mapping[str, memoryview] | None = None
) -> TypedModel:
    """`model` (left untouched) with its sequences rewritten, and typed (module docstring).
    `split_raw` holds the main graph's split-out raw_data (`inference.strip_weights`)."""
    types = infer_types(model, split_raw)
    if has_sequences(model):
        model = eliminate_sequences(model, types, split_raw)
        types = infer_types(model, split_raw)
    return TypedModel(model, types)


def bound_types(model: onnx_ir.Model, types: GraphTypes) -> ValueTypes:
    """`types` (inferred for the proto `model` was read from) bound to its values and nodes."""
    bound = ValueTypes()
    bind_types(model.graph, types, bound)
    return bound


def compute_as_onnxruntime(
    model: onnx_ir.Model,
    types: ValueTypes,
    read_half: ReadInitializer,
    split_raw: Mapping[str, memoryview] | None = None,
) -> ValueTypes:
    """Rewrite `model` (typed by `types`) in place where onnxruntime computes an fp16/bf16
    model otherwise than ONNX rounds it: its Conv folds of half weights
    (`half_conv_folds.fold_half_convs`), then its Casts to f32 and back
    (`half_precision.plan_half_precision`); the types of the model so rewritten. `read_half`
    reads a main-graph initializer as a float16/bfloat16 array."""
    fold_half_convs(model, read_half, types)
    planned = plan_half_precision(model, types, split_raw)
    if planned is None:
        return types
    if planned.types is not None:
        return planned.types
    return bound_types(model, infer_types(onnx_ir.serde.serialize_model(model), split_raw))
