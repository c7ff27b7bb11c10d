"""Sequence values (`seq(tensor)`) rewritten into tensor ops, as their inferred types allow (`graph_typing`).

Niro has no sequence type and neither do MLIR's upstream dialects, yet most sequences in real
models have a structure known at import: a list of tensors built and read at constant positions
(SequenceConstruct, SplitToSequence with constant split sizes, SequenceAt...), or the way
PyTorch's dynamo exporter writes a Loop's scan output (SequenceEmpty before the Loop, one
SequenceInsert per iteration in the body, ConcatFromSequence after it). This module rewrites such
graphs into plain ONNX tensor ops, so the rest of the frontend never meets a sequence. A sequence
is tracked at import as one of two forms:

- `Listed`: a sequence of static length, a tuple of tensor value names. SequenceAt at a constant
  position is an Identity of one of them, ConcatFromSequence a Concat, SequenceInsert and
  SequenceErase at constant positions edit the tuple, SequenceMap unrolls its body per element.
- `Stacked`: a sequence of any length whose elements share one shape, one tensor stacking them
  along a new leading axis. SequenceAt is a Gather, SequenceLength a Shape, ConcatFromSequence a
  Transpose (and a Reshape), SplitToSequence without split sizes a Transpose; a Loop that appends
  one tensor per iteration to a loop-carried sequence yields that tensor as a scan output.

Every node written keeps the name of the node it replaces, so later errors and MLIR locations
name the user's node. What has no such form (a sequence graph input or output, a sequence leaving
an If branch, run-time split sizes, a Loop that reads the sequence it grows...) is refused with
`SequenceRewriteError`, naming the node and the reason. The rewrite works on the onnx_ir model
in place (`graph_typing` types it again after). `has_sequences` is one scan of op types: a model
without sequence ops is never rewritten.

This module holds the handler of each op type; `sequence_forms` the forms, scopes and the
context a handler works in; `sequence_loops` the Loop handler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np
import onnx
import onnx_ir
from onnx import numpy_helper

from .graph_walks import node_bodies
from .sequence_forms import (
    DEFAULT_DOMAINS,
    SEQUENCE_OPS,
    Listed,
    RewriteContext,
    Rewriter,
    SequenceRewriteError,
    SequenceScope,
    Stacked,
    dims_of,
    replace_value,
    with_dims,
)
from .sequence_loops import rewrite_loop
from .value_types import ValueTypes

__all__ = ["SEQUENCE_OPS", "SequenceRewriteError", "eliminate_sequences", "has_sequences"]

_INT64_MAX = (1 << 63) - 1

_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
"""Default-domain ops whose graph attributes may hold sequence ops."""


def has_sequences(model: onnx_ir.Model) -> bool:
    """Whether the main graph (or an If/Loop/Scan body in it) uses a sequence op. Model-local
    functions are checked when they are specialised; sequence graph inputs are refused by their
    type.

    NOTE: one set of op types per graph (~0.4 us a node): what a model without sequences pays."""
    stack = [model.graph]
    while stack:
        graph = stack.pop()
        op_types = {node.op_type for node in graph}
        if op_types & SEQUENCE_OPS and any(
            node.op_type in SEQUENCE_OPS and node.domain in DEFAULT_DOMAINS for node in graph
        ):
            return True
        if op_types & _CONTROL_FLOW:
            stack.extend(
                body for node in graph if node.op_type in _CONTROL_FLOW for _, _, body in node_bodies(node)
            )
    return False


# -- handlers ------------------------------------------------------------------------------------


def _sequence_empty(at: RewriteContext) -> None:
    at.define(at.output(), Listed(()))


def _sequence_construct(at: RewriteContext) -> None:
    elements = tuple(at.node.inputs)
    if any(element is None for element in elements):
        raise at.error("has an absent input; every element of a sequence is a tensor")
    at.define(at.output(), Listed(cast(tuple[onnx_ir.Value, ...], elements)))


def _identity(at: RewriteContext) -> None:
    at.define(at.output(), at.sequence(0))


def _normalised(at: RewriteContext, position: int, length: int, allow_end: bool) -> int:
    last = length if allow_end else length - 1
    if not -length <= position <= last:
        raise at.error(f"position {position} is out of range for a sequence of {length} tensors")
    return position + length if position < 0 else position


def _sequence_at(at: RewriteContext) -> None:
    form = at.sequence(0)
    constant = at.constant_position(1)
    if isinstance(form, Listed) and constant is not None:
        element = form.elements[_normalised(at, constant, len(form.elements), False)]
        at.emit("Identity", [element], at.output())
        return
    stacked = at.stacked(form)
    at.emit("Gather", [stacked.tensor, at.scalar_position(1)], at.output(), axis=0)


def _sequence_length(at: RewriteContext) -> None:
    form = at.sequence(0)
    if isinstance(form, Listed):
        at.emit("Constant", [], at.output(), value=numpy_helper.from_array(np.array(len(form.elements), np.int64)))
        return
    shape = at.emit("Shape", [form.tensor])
    at.emit("Gather", [shape, at.const(np.array(0, np.int64))], at.output(), axis=0)


def _sequence_insert(at: RewriteContext) -> None:
    form = at.sequence(0)
    tensor = at.input(1)
    if tensor is None:
        raise at.error("inserts no tensor (its input #1 is absent)")
    has_position = at.input(2) is not None
    constant = at.constant_position(2) if has_position else None
    if isinstance(form, Listed) and (constant is not None or not has_position):
        elements = list(form.elements)
        where = len(elements) if constant is None else _normalised(at, constant, len(elements), True)
        elements.insert(where, tensor)
        at.define(at.output(), Listed(tuple(elements)))
        return
    stacked = at.stacked(form, like=tensor)
    piece = at.unsqueeze(tensor, [0])
    if not has_position:
        joined = at.emit("Concat", [stacked.tensor, piece], axis=0)
    else:
        position = at.emit("Reshape", [at.input(2), at.ints([1])])
        before = at.slice(stacked.tensor, at.ints([0]), position)
        after = at.slice(stacked.tensor, position, at.ints([_INT64_MAX]))
        joined = at.emit("Concat", [before, piece, after], axis=0)
    at.define(at.output(), Stacked(joined, stacked.element or at.type_of(tensor)))


def _sequence_erase(at: RewriteContext) -> None:
    form = at.sequence(0)
    has_position = at.input(1) is not None
    constant = at.constant_position(1) if has_position else -1
    if constant is None:
        raise at.error(
            "erases at a run-time position; niroc rewrites SequenceErase only at a constant position"
        )
    if isinstance(form, Listed):
        if not form.elements:
            raise at.error("erases from an empty sequence")
        elements = list(form.elements)
        del elements[_normalised(at, constant, len(elements), False)]
        at.define(at.output(), Listed(tuple(elements)))
        return
    if constant == -1:
        kept = at.slice(form.tensor, at.ints([0]), at.ints([-1]))
    else:
        before = at.slice(form.tensor, at.ints([0]), at.ints([constant]))
        after = at.slice(form.tensor, at.ints([constant + 1]), at.ints([_INT64_MAX]))
        kept = at.emit("Concat", [before, after], axis=0)
    at.define(at.output(), Stacked(kept, form.element))


def _concat_from_sequence(at: RewriteContext) -> None:
    form = at.sequence(0)
    axis = at.int_attribute("axis", 0)
    new_axis = at.int_attribute("new_axis", 0)
    if isinstance(form, Listed):
        if not form.elements:
            raise at.error("concatenates an empty sequence")
        pieces = [at.unsqueeze(value, [axis]) for value in form.elements] if new_axis else list(form.elements)
        at.emit("Concat", pieces, at.output(), axis=axis)
        return
    dims = dims_of(form.element)
    if dims is None and axis == 0:
        _concat_rows(at, form.tensor, new_axis)
        return
    if dims is None:
        raise at.error(
            f"concatenates along axis {axis} a sequence of run-time length whose elements have an "
            "unknown rank"
        )
    rank = len(dims)
    limit = rank + 1 if new_axis else rank
    if not -limit <= axis < limit:
        raise at.error(f"axis {axis} is out of range for elements of rank {rank}")
    axis = axis + limit if axis < 0 else axis
    perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
    if new_axis:
        if axis:
            at.emit("Transpose", [form.tensor], at.output(), perm=perm)
        else:
            at.emit("Identity", [form.tensor], at.output())
        return
    size = dims[axis]
    if size is None:
        raise at.error(
            f"concatenates along axis {axis} a sequence of run-time length whose elements' size along "
            "that axis is not static (it may differ from one element to the next)"
        )
    moved = at.emit("Transpose", [form.tensor], perm=perm) if axis else form.tensor
    others = [dim for position, dim in enumerate(dims) if position != axis]
    if size and all(dim for dim in others):
        shape = at.ints(cast(list[int], [*dims[:axis], -1, *dims[axis + 1 :]]))  # (all known)
    else:
        whole = at.emit("Shape", [moved])
        head = at.slice(whole, at.ints([0]), at.ints([axis]))
        rows = at.slice(whole, at.ints([axis]), at.ints([axis + 1]))
        each = at.slice(whole, at.ints([axis + 1]), at.ints([axis + 2]))
        tail = at.slice(whole, at.ints([axis + 2]), at.ints([_INT64_MAX]))
        shape = at.emit("Concat", [head, at.emit("Mul", [rows, each]), tail], axis=0)
    extra: dict[str, Any] = {"allowzero": 1} if at.rewriter.opset >= 14 and not (size and all(others)) else {}
    at.emit("Reshape", [moved, shape], at.output(), **extra)


def _concat_rows(at: RewriteContext, stacked: onnx_ir.Value, new_axis: int) -> None:
    """ConcatFromSequence along axis 0 of stacked elements of unknown rank: the stack itself,
    or (without a new axis) its first two axes merged."""
    if new_axis:
        at.emit("Identity", [stacked], at.output())
        return
    whole = at.emit("Shape", [stacked])
    rows = at.emit("Mul", [at.slice(whole, at.ints([0]), at.ints([1])), at.slice(whole, at.ints([1]), at.ints([2]))])
    shape = at.emit("Concat", [rows, at.slice(whole, at.ints([2]), at.ints([_INT64_MAX]))], axis=0)
    extra: dict[str, Any] = {"allowzero": 1} if at.rewriter.opset >= 14 else {}
    at.emit("Reshape", [stacked, shape], at.output(), **extra)


def _split_to_sequence(at: RewriteContext) -> None:
    data = at.input(0)
    data_type = at.type_of(data)
    dims = dims_of(data_type)
    if data is None or dims is None:
        raise at.error("splits a tensor of unknown rank")
    rank = len(dims)
    axis = at.int_attribute("axis", 0)
    if not -rank <= axis < rank:
        raise at.error(f"axis {axis} is out of range for a tensor of rank {rank}")
    axis = axis + rank if axis < 0 else axis
    if at.input(1) is None:
        keepdims = at.int_attribute("keepdims", 1)
        perm = [axis, *(position for position in range(rank) if position != axis)]
        stacked = at.emit("Transpose", [data], perm=perm) if axis else data
        element = [dim for position, dim in enumerate(dims) if position != axis]
        if keepdims:
            stacked = at.unsqueeze(stacked, [axis + 1])
            element.insert(axis, 1)
        at.define(at.output(), Stacked(stacked, with_dims(data_type, tuple(element))))
        return
    split = at.rewriter.constant(at.input(1))
    if split is None:
        raise at.error("its split sizes are not constant: the sequence length would depend on run-time data")
    size = dims[axis]
    if split.ndim == 0:
        chunk = int(split)
        if size is None:
            raise at.error(
                f"splits axis {axis} of run-time size into chunks of {chunk}: the sequence length "
                "would depend on run-time data"
            )
        if chunk <= 0:
            raise at.error(f"split size {chunk} is not positive")
        sizes = [chunk] * (size // chunk) + ([size % chunk] if size % chunk else [])
    else:
        sizes = [int(value) for value in split.reshape(-1)]
    elements = []
    start = 0
    for length in sizes:
        piece = at.slice(data, at.ints([start]), at.ints([start + length]), axis)
        chunk_dims = list(dims)
        chunk_dims[axis] = length
        piece_type = with_dims(data_type, tuple(chunk_dims))
        if piece_type is not None:  # (always: data_type has dims)
            at.rewriter.types[piece] = piece_type
        elements.append(piece)
        start += length
    at.define(at.output(), Listed(tuple(elements)))


def _sequence_map(at: RewriteContext) -> None:
    body = at.graph_attribute("body")
    forms = {position: at.scope.sequence(value) for position, value in enumerate(at.node.inputs) if value is not None}
    sequences = {position: form for position, form in forms.items() if form is not None}
    if 0 not in sequences:
        raise at.error(f"input #0 '{at.name(0)}' is not a sequence built inside the model")
    listed = [form for form in sequences.values() if isinstance(form, Listed)]
    if len(listed) != len(sequences):
        raise at.error("maps over a sequence of run-time length; niroc unrolls SequenceMap only over sequences of static length")
    lengths = {len(form.elements) for form in listed}
    if len(lengths) != 1:
        raise at.error(f"maps over sequences of different lengths {sorted(lengths)}")
    length = lengths.pop()
    results: list[list[onnx_ir.Value | None]] = [[] for _ in body.outputs]
    for element in range(length):
        bindings: dict[onnx_ir.Value, onnx_ir.Value | None] = {}
        for position, value in enumerate(body.inputs):
            form = sequences.get(position)
            bindings[value] = form.elements[element] if isinstance(form, Listed) else at.input(position)
        for output, copied in zip(results, _inline(at, body, bindings), strict=True):
            output.append(copied)
    for position, values in enumerate(results):
        at.define(at.output(position), Listed(tuple(cast(list[onnx_ir.Value], values))))


def _inline(
    at: RewriteContext, body: onnx_ir.Graph, bindings: Mapping[onnx_ir.Value, onnx_ir.Value | None]
) -> list[onnx_ir.Value | None]:
    """Copy `body`'s nodes into the graph being rewritten, its inputs bound to `bindings` and
    every value it defines renamed (at any depth), its initializers made Constants; its
    outputs, as copied."""
    rewriter = at.rewriter
    types = rewriter.types
    copy = body.clone(allow_outer_scope_values=True)
    copied: dict[onnx_ir.Value, onnx_ir.Value | None] = {}
    for value, clone in _pairs(body, copy):
        made: onnx_ir.Value | None = clone
        if value in bindings:
            made = bindings[value]
            _bind(clone, made)
        elif value.is_initializer() and value.graph is body:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(onnx_ir.serde.serialize_tensor(cast(onnx_ir.TensorProtocol, value.const_value)))
            tensor.name = ""
            made = at.emit("Constant", [], named=rewriter.fresh(value.name or ""), value=tensor)
            rewriter.constants[made] = tensor
            copy.initializers.pop(clone.name or "")
            replace_value(clone, made)
        elif clone.name:
            clone.name = rewriter.fresh(value.name or "")
        if made is not None and value in types and made not in types:
            types[made] = types[value]
        copied[value] = made
    nodes = list(copy)
    copy.remove(nodes)
    for index, node in enumerate(nodes):
        rewriter.rewrite_node(node, index, at.scope, at.out)
    return [copied.get(value, value) for value in body.outputs]


def _bind(value: onnx_ir.Value, bound: onnx_ir.Value | None) -> None:
    """Make the readers of `value` (a copied body's input) read `bound` (None: absent)."""
    if bound is not None:
        replace_value(value, bound)
        return
    for reader, position in list(value.uses()):
        reader.replace_input_with(position, None)


def _pairs(graph: onnx_ir.Graph, copy: onnx_ir.Graph) -> list[tuple[onnx_ir.Value, onnx_ir.Value]]:
    """The values `graph` defines (its inputs, initializers, node outputs, at any depth), each
    with its copy in `copy` (`onnx_ir.Graph.clone` of it)."""
    pairs = list(zip(graph.inputs, copy.inputs, strict=True))
    pairs += zip(graph.initializers.values(), copy.initializers.values(), strict=True)
    for node, copied in zip(graph, copy, strict=True):
        pairs += zip(node.outputs, copied.outputs, strict=True)
        for (_, _, body), (_, _, copied_body) in zip(node_bodies(node), node_bodies(copied), strict=True):
            pairs += _pairs(body, copied_body)
    return pairs


HANDLERS: dict[str, Callable[[RewriteContext], None]] = {
    "SequenceEmpty": _sequence_empty,
    "SequenceConstruct": _sequence_construct,
    "SequenceAt": _sequence_at,
    "SequenceLength": _sequence_length,
    "SequenceInsert": _sequence_insert,
    "SequenceErase": _sequence_erase,
    "ConcatFromSequence": _concat_from_sequence,
    "SplitToSequence": _split_to_sequence,
    "SequenceMap": _sequence_map,
    "Identity": _identity,
    "Loop": rewrite_loop,
}


def eliminate_sequences(
    model: onnx_ir.Model, types: ValueTypes, split_raw: Mapping[str, memoryview] | None = None
) -> None:
    """Rewrite `model` in place so that its sequences are tensors (see the module docstring);
    `types` are the model's inferred types, `split_raw` its main-graph initializers'
    split-out raw_data."""
    rewriter = Rewriter(model, types, split_raw or {}, HANDLERS)
    rewriter.rewrite_graph(model.graph, SequenceScope(), f"graph '{model.graph.name}'")
