"""Loops that carry sequences, for the sequence rewrite (`sequences`).

A loop-carried sequence the body passes on unchanged keeps its form inside and after the Loop. One
the body appends exactly one tensor to per iteration (and never reads) becomes a scan output: the
append is an Identity yielding the tensor, and the sequence after the Loop is the stacked scan
output (after any elements it started with). PyTorch's dynamo exporter writes `for` loops as
`while k < n` without a max trip count; a scan output needs a bound on the iterations, which such
a counter gives (`_trip_bound`). Anything else a body does with a carried sequence is refused.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir
from onnx import numpy_helper

from .context import describe_node, node_label
from .graph_walks import node_bodies, values_read
from .sequence_forms import (
    DEFAULT_DOMAINS,
    Listed,
    RewriteContext,
    SequenceRewriteError,
    SequenceScope,
    Stacked,
    constant_node_tensor,
    detach,
    name_of,
)

__all__ = ["rewrite_loop"]


def rewrite_loop(at: RewriteContext) -> None:
    """A Loop carrying sequences: one the body passes on unchanged keeps its form; one the body
    appends one tensor to per iteration becomes a scan output (stacked after any initial
    elements). Anything else the body does with a carried sequence is refused."""
    node = at.node
    body = at.graph_attribute("body")
    states = list(node.inputs[2:])
    carried = len(states)
    if len(body.inputs) != carried + 2 or len(body.outputs) < carried + 1:
        raise at.error("its body's inputs and outputs do not match its loop-carried values")
    found = {
        position: at.scope.sequence(value)
        for position, value in enumerate(states)
        if value is not None
    }
    forms = {position: form for position, form in found.items() if form is not None}
    inside = SequenceScope(at.scope)
    appends: dict[
        int, tuple[int, onnx_ir.Value]
    ] = {}  # state -> (SequenceInsert's index, the tensor)
    for position, form in forms.items():
        argument, result = body.inputs[2 + position], body.outputs[1 + position]
        if _passes_through(body, argument, result):
            inside.sequences[argument] = form
        else:
            appends[position] = _appended(at, body, argument, result)
    scans = {
        position: onnx_ir.Value(name=at.rewriter.fresh(f"{name_of(states[position])}_stacked"))
        for position in appends
    }
    trip_count = at.input(0)
    if appends and trip_count is None:
        trip_count = _trip_bound(at, body, states)
        if trip_count is None:
            sequence = name_of(states[next(iter(appends))])
            raise at.error(
                f"appends to sequence '{sequence}' in a loop without a max trip count M whose condition "
                "is not a counter compared with a loop-invariant bound: the number of elements cannot "
                "be bounded to stack them"
            )
    kept = [position for position in range(carried) if position not in forms]
    body_nodes = list(body)
    for position, (index, appended) in appends.items():
        append = body_nodes[index]
        body.insert_before(
            append,
            onnx_ir.Node(
                "",
                "Identity",
                [appended],
                outputs=[scans[position]],
                name=node_label(append, index),
            ),
        )
        detach(append)
        body.remove(append)
    inputs, outputs = list(body.inputs), list(body.outputs)
    body.inputs.clear()
    body.inputs.extend([inputs[0], inputs[1], *(inputs[2 + position] for position in kept)])
    body.outputs.clear()
    body.outputs.extend(
        [
            outputs[0],
            *(outputs[1 + position] for position in kept),
            *outputs[1 + carried :],
            *scans.values(),
        ]
    )
    starts = {
        position: at.stacked(forms[position], like=appends[position][1])
        for position in appends
        if forms[position] != Listed(())
    }
    what = f"attribute 'body' of {describe_node(node, at.index)}"
    at.rewriter.rewrite_graph(body, inside, f"graph '{body.name}' ({what})")
    results: list[onnx_ir.Value | None] = list(node.outputs) + [None] * max(
        0, carried - len(node.outputs)
    )
    stacked_results = {position: onnx_ir.Value(name=scans[position].name) for position in appends}
    loop_outputs = [
        *(_kept(at, results[position]) for position in kept),
        *(_kept(at, result) for result in results[carried:]),
        *stacked_results.values(),
    ]
    at.out.append(
        onnx_ir.Node(
            node.domain,
            "Loop",
            [trip_count, at.input(1), *(states[position] for position in kept)],
            list(node.attributes.values()),
            overload=node.overload,
            outputs=loop_outputs,
            name=at.label,
        )
    )
    for position, form in forms.items():
        if position not in appends:
            at.define(results[position], form)
            continue
        element = at.type_of(appends[position][1])
        start = starts.get(position)
        stacked = (
            stacked_results[position]
            if start is None
            else at.emit("Concat", [start.tensor, stacked_results[position]], axis=0)
        )
        at.define(results[position], Stacked(stacked, element))


def _kept(at: RewriteContext, result: onnx_ir.Value | None) -> onnx_ir.Value:
    """The rewritten Loop's output for `result`, an output of the Loop rewritten (None or
    unnamed: absent)."""
    if result is None or not result.name:
        return onnx_ir.Value(name="")
    return at.takes_place_of(result)


def _producer_in(graph: onnx_ir.Graph, value: onnx_ir.Value) -> onnx_ir.Node | None:
    """The node of `graph` that yields `value`, if any."""
    producer = value.producer()
    return producer if producer is not None and producer.graph is graph else None


def _passes_through(body: onnx_ir.Graph, argument: onnx_ir.Value, result: onnx_ir.Value) -> bool:
    """Whether the body yields loop-carried `argument` unchanged as `result` (Identity or not)."""
    while result is not argument:
        producer = _producer_in(body, result)
        if (
            producer is None
            or producer.op_type != "Identity"
            or producer.domain not in DEFAULT_DOMAINS
        ):
            return False
        source = producer.inputs[0] if producer.inputs else None
        if source is None:
            return False
        result = source
    return True


def _appended(
    at: RewriteContext, body: onnx_ir.Graph, argument: onnx_ir.Value, result: onnx_ir.Value
) -> tuple[int, onnx_ir.Value]:
    """(index of the body's SequenceInsert appending to loop-carried `argument` to give
    `result`, the tensor appended); refuses a body that does anything else with them."""
    loop = describe_node(at.node, at.index)
    carried = {argument, result}
    found = None
    for index, body_node in enumerate(body):
        reads = argument in body_node.inputs or result in body_node.inputs
        reads = reads or any(carried & values_read(graph) for _, _, graph in node_bodies(body_node))
        is_append = (
            body_node.op_type == "SequenceInsert"
            and body_node.domain in DEFAULT_DOMAINS
            and list(body_node.inputs[:1]) == [argument]
            and list(body_node.outputs) == [result]
        )
        if is_append and found is None:
            if len(body_node.inputs) > 2 and body_node.inputs[2] is not None:
                raise SequenceRewriteError(
                    f"{describe_node(body_node, index)}: inserts into sequence '{argument.name}' carried by "
                    f"{loop} at a position input; only appending one tensor per iteration can become a "
                    "scan output"
                )
            appended = body_node.inputs[1] if len(body_node.inputs) > 1 else None
            if appended is None:
                raise SequenceRewriteError(f"{describe_node(body_node, index)}: inserts no tensor")
            found = (index, appended)
        elif reads:
            read = argument if argument in body_node.inputs else result
            raise SequenceRewriteError(
                f"{describe_node(body_node, index)}: reads sequence '{read.name}' "
                f"carried by {loop} inside its body; only a sequence the body appends to and never "
                "reads can become a scan output"
            )
    if found is None or list(body.outputs).count(result) != 1:
        raise at.error(
            f"its body does not append exactly one tensor per iteration to loop-carried sequence "
            f"'{argument.name}'; only such a sequence can become a scan output"
        )
    return found


_INTEGER_TYPES = frozenset(
    {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64}
)


def _trip_bound(
    at: RewriteContext, body: onnx_ir.Graph, states: list[onnx_ir.Value | None]
) -> onnx_ir.Value | None:
    """A max trip count for a Loop without one, when its condition is `counter + 1 < bound`
    with an integer counter carried from `start` and `bound` from outside the body (PyTorch's
    dynamo exporter writes `for` loops this way): max(bound - start, 1), which the condition
    can only cut short. None for any other condition."""
    less = _producer_in(body, body.outputs[0])
    if less is None or less.op_type != "Less" or len(less.inputs) != 2:
        return None
    counter, bound = less.inputs
    if counter is None or bound is None:
        return None
    if (
        _producer_in(body, bound) is not None
        or bound in body.inputs
        or bound.name in body.initializers
    ):
        return None
    counter_type = at.type_of(counter)
    if counter_type is None or counter_type.tensor_type.elem_type not in _INTEGER_TYPES:
        return None
    step = _producer_in(body, counter)
    if step is None or step.op_type != "Add" or len(step.inputs) != 2:
        return None
    for position, start in enumerate(states):
        argument = body.inputs[2 + position]
        if body.outputs[1 + position] is not counter or argument not in step.inputs:
            continue
        increment = step.inputs[1] if step.inputs[0] is argument else step.inputs[0]
        if start is not None and increment is not None and _is_one(at, body, increment):
            whole = onnx.TensorProto.INT64
            difference = at.emit(
                "Sub", [at.emit("Cast", [bound], to=whole), at.emit("Cast", [start], to=whole)]
            )
            return at.emit("Max", [difference, at.const(np.array(1, np.int64))])
    return None


def _is_one(at: RewriteContext, body: onnx_ir.Graph, value: onnx_ir.Value) -> bool:
    """Whether `value` is a constant 1 (possibly through a Cast or CastLike in the body)."""
    producer = _producer_in(body, value)
    if (
        producer is not None
        and producer.op_type in ("Cast", "CastLike")
        and producer.inputs
        and producer.inputs[0] is not None
    ):
        value = producer.inputs[0]
        producer = _producer_in(body, value)
    if producer is not None:
        tensor = constant_node_tensor(producer) if producer.op_type == "Constant" else None
        array = None if tensor is None else numpy_helper.to_array(tensor)
    else:
        array = at.rewriter.constant(value)
    return array is not None and array.size == 1 and array.reshape(-1)[0] == 1
