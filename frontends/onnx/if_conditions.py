"""What an If's condition depends on, for the refusal of an If no static type can describe.

An If whose branches yield values of different ranks (a voice-activity detector squeezes a
frame axis when there is one frame: `If(Shape(x)[-1] == 1)`) has no tensor type: it can only
be compiled once its condition folds, which static input shapes make happen. The refusal must
say so usefully: which dims the condition reads (`Shape` and the `Gather` index or the `start`
attribute that picks a dim) and which dynamic graph-input dims those follow from, so the user
knows what to pass to `--dim` / `--input-shape`.

Only reads the onnx_ir graph; never raises for an odd graph (what it cannot trace it leaves out).
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir

__all__ = ["describe_condition_origin"]

_MAX_NODES = 10_000
"""How many producer nodes a trace visits at most (a refusal message must stay cheap)."""


def _dims_text(value: onnx_ir.Value) -> str:
    if value.shape is None:
        return "of unknown shape"
    return (
        "["
        + ", ".join(
            str(dim.value if isinstance(dim, onnx_ir.SymbolicDim) else dim) for dim in value.shape
        )
        + "]"
    )


def _name(value: onnx_ir.Value) -> str:
    producer = value.producer()
    if producer is None:
        return f"'{value.name}'"
    return f"'{value.name}' (output of node '{producer.name or producer.op_type}')"


ConstantInts = Callable[[onnx_ir.Value], "list[int] | None"]
"""An ONNX value's data as ints when the importer knows it (a constant), else None.

NOTE: asked of the importer rather than read from onnx_ir: a `.onnx` file's inline weights are
split out of the message before onnx_ir sees it (see `wire`), so its tensors read as empty."""


def _shape_reads(
    condition: onnx_ir.Value, constant_ints: ConstantInts
) -> tuple[list[str], list[onnx_ir.Value]]:
    """The dims the condition reads through Shape ops, as text, and those Shape ops' sources."""
    reads: list[str] = []
    sources: list[onnx_ir.Value] = []
    stack: list[tuple[onnx_ir.Value, list[int] | None]] = [(condition, None)]
    seen: set[int] = set()
    while stack and len(seen) < _MAX_NODES:
        value, picked = stack.pop()
        producer = value.producer()
        if producer is None or id(producer) in seen:
            continue
        seen.add(id(producer))
        if producer.op_type == "Shape" and producer.inputs and producer.inputs[0] is not None:
            source = producer.inputs[0]
            start = producer.attributes.get("start")
            offset = 0 if start is None else start.value
            if picked is not None and offset == 0:
                dims = ", ".join(str(index) for index in picked)
                reads.append(f"dim {dims} of {_name(source)}")
            elif start is not None:
                reads.append(f"dims from {offset} of {_name(source)}")
            else:
                reads.append(f"the shape of {_name(source)}")
            sources.append(source)
            continue
        if producer.op_type == "Gather" and len(producer.inputs) > 1 and producer.inputs[0] is not None:
            indices = None if producer.inputs[1] is None else constant_ints(producer.inputs[1])
            stack.append((producer.inputs[0], indices))
            continue
        for operand in producer.inputs:
            if operand is not None:
                stack.append((operand, None))
    return reads, sources


def _dynamic_inputs(sources: list[onnx_ir.Value]) -> list[onnx_ir.Value]:
    """The graph inputs with a dynamic dim that `sources` are computed from."""
    found: dict[int, onnx_ir.Value] = {}
    stack = list(sources)
    seen: set[int] = set()
    while stack and len(seen) < _MAX_NODES:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        producer = value.producer()
        if producer is None:
            if value.is_graph_input() and (value.shape is None or not value.shape.is_static()):
                found[id(value)] = value
            continue
        stack.extend(operand for operand in producer.inputs if operand is not None)
    return list(found.values())


def describe_condition_origin(node: onnx_ir.Node, constant_ints: ConstantInts) -> str:
    """`its condition reads dim -1 of 'features' (output of node 'conv'), which follows from
    the dynamic dims of graph input 'input' [batch, samples]`, or '' when nothing is found."""
    if not node.inputs or node.inputs[0] is None:
        return ""
    reads, sources = _shape_reads(node.inputs[0], constant_ints)
    if not reads:
        return ""
    text = f"its condition reads {' and '.join(reads)}"
    inputs = _dynamic_inputs(sources)
    if inputs:
        listed = ", ".join(f"'{value.name}' {_dims_text(value)}" for value in inputs)
        noun = "input" if len(inputs) == 1 else "inputs"
        text += f", which follows from the dynamic dims of graph {noun} {listed}"
    return text
