"""Loops that carry sequences, for the sequence rewrite (`sequences`).

A loop-carried sequence the body passes on unchanged keeps its form inside and after the Loop. One
the body appends exactly one tensor to per iteration (and never reads) becomes a scan output: the
append is an Identity yielding the tensor, and the sequence after the Loop is the stacked scan
output (after any elements it started with). PyTorch's dynamo exporter writes `for` loops as
`while k < n` without a max trip count; a scan output needs a bound on the iterations, which such
a counter gives (`_trip_bound`). Anything else a body does with a carried sequence is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .context import describe_node, node_label
from .inference import copy_fields
from .sequence_forms import (
    DEFAULT_DOMAINS,
    Listed,
    RewriteContext,
    SequenceRewriteError,
    SequenceScope,
    Stacked,
    constant_node_tensor,
    graphs_in,
    used_names,
)

__all__ = ["rewrite_loop"]


def rewrite_loop(at: RewriteContext) -> None:
    """A Loop carrying sequences: one the body passes on unchanged keeps its form; one the body
    appends one tensor to per iteration becomes a scan output (stacked after any initial
    elements). Anything else the body does with a carried sequence is refused."""
    node = at.node
    body = at.graph_attribute("body")
    states = list(node.input[2:])
    carried = len(states)
    if len(body.input) != carried + 2 or len(body.output) < carried + 1:
        raise at.error("its body's inputs and outputs do not match its loop-carried values")
    found = {position: at.scope.sequence(name) for position, name in enumerate(states) if name}
    forms = {position: form for position, form in found.items() if form is not None}
    inside = SequenceScope(at.scope)
    appends: dict[int, tuple[int, str]] = {}  # state -> (SequenceInsert's index, the appended tensor)
    for position, form in forms.items():
        argument, result = body.input[2 + position].name, body.output[1 + position].name
        if _passes_through(body, argument, result):
            inside.sequences[argument] = form
        else:
            appends[position] = _appended(at, body, argument, result)
    scans = {position: at.rewriter.fresh(f"{states[position]}_stacked") for position in appends}
    edited = onnx.GraphProto()
    copy_fields(body, edited, frozenset({"input", "output", "node", "value_info"}))
    kept = [position for position in range(carried) if position not in forms]
    edited.input.extend([body.input[0], body.input[1], *(body.input[2 + position] for position in kept)])
    edited.output.extend([body.output[0], *(body.output[1 + position] for position in kept)])
    edited.output.extend(body.output[1 + carried :])
    edited.output.extend(onnx.ValueInfoProto(name=scans[position]) for position in appends)
    edited.value_info.extend(info for info in body.value_info if not info.type.HasField("sequence_type"))
    inserts = {index: position for position, (index, _) in appends.items()}
    for index, body_node in enumerate(body.node):
        if index in inserts:
            position = inserts[index]
            body_node = helper.make_node(
                "Identity", [appends[position][1]], [scans[position]], name=node_label(body_node, index)
            )
        edited.node.append(body_node)
    trip_count = at.input(0)
    if appends and not trip_count:
        trip_count = _trip_bound(at, body, states) or ""
        if not trip_count:
            sequence = states[next(iter(appends))]
            raise at.error(
                f"appends to sequence '{sequence}' in a loop without a max trip count M whose condition "
                "is not a counter compared with a loop-invariant bound: the number of elements cannot "
                "be bounded to stack them"
            )
    starts = {position: at.stacked(forms[position], like=appends[position][1]) for position in appends
              if forms[position] != Listed(())}
    what = f"attribute 'body' of {describe_node(node, at.index)}"
    rewritten_body = at.rewriter.rewrite_graph(edited, inside, f"graph '{body.name}' ({what})")
    outputs = list(node.output) + [""] * max(0, carried - len(node.output))
    rewritten = onnx.NodeProto()
    copy_fields(node, rewritten, frozenset({"input", "output", "attribute"}))
    rewritten.name = at.label
    rewritten.input.extend([trip_count, at.input(1), *(states[position] for position in kept)])
    rewritten.output.extend([*(outputs[position] for position in kept), *outputs[carried:], *scans.values()])
    for attribute in node.attribute:
        if attribute.name == "body":
            rewritten.attribute.append(helper.make_attribute("body", rewritten_body))
        else:
            rewritten.attribute.append(attribute)
    at.out.append(rewritten)
    for position, form in forms.items():
        if position not in appends:
            at.define(outputs[position], form)
            continue
        element = at.type_of(appends[position][1])
        start = starts.get(position)
        stacked = scans[position] if start is None else at.emit("Concat", [start.tensor, scans[position]], axis=0)
        at.define(outputs[position], Stacked(stacked, element))


def _passes_through(body: onnx.GraphProto, argument: str, result: str) -> bool:
    """Whether the body yields loop-carried `argument` unchanged as `result` (Identity or not)."""
    producers = {output: body_node for body_node in body.node for output in body_node.output}
    while result != argument:
        producer = producers.get(result)
        if producer is None or producer.op_type != "Identity" or producer.domain not in DEFAULT_DOMAINS:
            return False
        result = producer.input[0]
    return True


def _appended(at: RewriteContext, body: onnx.GraphProto, argument: str, result: str) -> tuple[int, str]:
    """(index of the body's SequenceInsert appending to loop-carried `argument` to give
    `result`, the tensor appended); refuses a body that does anything else with them."""
    loop = describe_node(at.node, at.index)
    found = None
    for index, body_node in enumerate(body.node):
        reads = argument in body_node.input or result in body_node.input
        reads = reads or any({argument, result} & used_names(graph) for graph in graphs_in(body_node))
        is_append = (
            body_node.op_type == "SequenceInsert"
            and body_node.domain in DEFAULT_DOMAINS
            and list(body_node.input[:1]) == [argument]
            and list(body_node.output) == [result]
        )
        if is_append and found is None:
            if len(body_node.input) > 2 and body_node.input[2]:
                raise SequenceRewriteError(
                    f"{describe_node(body_node, index)}: inserts into sequence '{argument}' carried by "
                    f"{loop} at a position input; only appending one tensor per iteration can become a "
                    "scan output"
                )
            found = (index, body_node.input[1])
        elif reads:
            raise SequenceRewriteError(
                f"{describe_node(body_node, index)}: reads sequence '{argument if argument in body_node.input else result}' "
                f"carried by {loop} inside its body; only a sequence the body appends to and never "
                "reads can become a scan output"
            )
    outputs = [value.name for value in body.output]
    if found is None or outputs.count(result) != 1:
        raise at.error(
            f"its body does not append exactly one tensor per iteration to loop-carried sequence "
            f"'{argument}'; only such a sequence can become a scan output"
        )
    return found


_INTEGER_TYPES = frozenset(
    {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64}
)


def _trip_bound(at: RewriteContext, body: onnx.GraphProto, states: list[str]) -> str | None:
    """A max trip count for a Loop without one, when its condition is `counter + 1 < bound`
    with an integer counter carried from `start` and `bound` from outside the body (PyTorch's
    dynamo exporter writes `for` loops this way): max(bound - start, 1), which the condition
    can only cut short. None for any other condition."""
    producers = {output: body_node for body_node in body.node for output in body_node.output}
    less = producers.get(body.output[0].name)
    if less is None or less.op_type != "Less" or len(less.input) != 2:
        return None
    counter, bound = less.input
    local = {value.name for value in body.input} | {tensor.name for tensor in body.initializer}
    if bound in producers or bound in local:
        return None
    counter_type = at.type_of(counter)
    if counter_type is None or counter_type.tensor_type.elem_type not in _INTEGER_TYPES:
        return None
    step = producers.get(counter)
    if step is None or step.op_type != "Add" or len(step.input) != 2:
        return None
    for position, start in enumerate(states):
        argument = body.input[2 + position].name
        if body.output[1 + position].name != counter or argument not in step.input:
            continue
        increment = step.input[1] if step.input[0] == argument else step.input[0]
        if start and _is_one(at, increment, producers):
            whole = onnx.TensorProto.INT64
            difference = at.emit("Sub", [at.emit("Cast", [bound], to=whole), at.emit("Cast", [start], to=whole)])
            return at.emit("Max", [difference, at.const(np.array(1, np.int64))])
    return None


def _is_one(at: RewriteContext, name: str, producers: Mapping[str, onnx.NodeProto]) -> bool:
    """Whether `name` is a constant 1 (possibly through a Cast or CastLike in the body)."""
    producer = producers.get(name)
    if producer is not None and producer.op_type in ("Cast", "CastLike") and producer.input:
        name = producer.input[0]
        producer = producers.get(name)
    if producer is not None:
        tensor = constant_node_tensor(producer) if producer.op_type == "Constant" else None
        value = None if tensor is None else numpy_helper.to_array(tensor)
    else:
        value = at.rewriter.constant(name)
    return value is not None and value.size == 1 and value.reshape(-1)[0] == 1
