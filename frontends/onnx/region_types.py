"""Types of Scan, Loop and If values from what the importer knows, where graph inference lost them.

The rules only; `refinements` decides where the conversion applies them.

Results (below) come from the imported body. A Loop body's *inputs* come from their first
values: ONNX's Loop inference clears the shapes of the loop-carried values before it types the
body (they may change from one iteration to the next), so a body whose inputs are not declared
(the Loop in ONNX's own function body of Range, for one) comes out of unknown rank, and so does
every op in it. The iteration number is a scalar int64, the condition a scalar bool, and each
loop-carried value starts as the node's operand; an undeclared input takes that type (a backend
must then check that the body yields the same type again). A declared rank or dim is never
overridden.

Results:

ONNX infers a Scan's or Loop's outputs from its body's output types; when those were unknown
to ONNX (a body using captured constants, see `node_inference`) the outputs are too, although
the importer has typed the body since. The rules here are the ops' own: a state (loop-carried
value) has the type the body yields for it; a scan output stacks the yielded slices along a new
axis, of the sequence length (Scan) or of the run-time iteration count (Loop: dynamic). An If
whose branches yield one rank (ONNX types its output only when both branches are typed alike)
yields the join: each dim the branches agree on, dynamic where they differ.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir
from niro.ir import ScalarType, TensorType, Type, Value

__all__ = ["if_result_types", "loop_body_input_types", "loop_result_types", "refine_type", "scan_result_types"]


def _stacked(slice_type: object, axis: int, length: int | None) -> TensorType | None:
    if not isinstance(slice_type, TensorType) or slice_type.shape is None:
        return None
    shape = list(slice_type.shape)
    if axis < 0:
        axis += len(shape) + 1
    if not 0 <= axis <= len(shape):
        return None
    shape.insert(axis, length)
    return TensorType(slice_type.element_type, tuple(shape))


def scan_result_types(
    inputs: Sequence[Value | None], yielded: Sequence[Value], num_scan_inputs: int, input_axes, output_axes
) -> dict[int, TensorType]:
    """Scan (opset 9+): states first, then scan outputs of the scan inputs' sequence length."""
    present = [value for value in inputs if value is not None]
    states = len(present) - num_scan_inputs
    if states < 0 or num_scan_inputs < 1 or len(yielded) < states:
        return {}
    length = None
    first = present[states].type
    input_axis = input_axes[0] if input_axes else 0
    if isinstance(first, TensorType) and first.shape is not None and -len(first.shape) <= input_axis < len(first.shape):
        length = first.shape[input_axis]
    found: dict[int, TensorType] = {}
    for position, value in enumerate(yielded):
        if position < states:
            if isinstance(value.type, TensorType):
                found[position] = value.type
            continue
        index = position - states
        axis = output_axes[index] if output_axes and index < len(output_axes) else 0
        stacked = _stacked(value.type, axis, length)
        if stacked is not None:
            found[position] = stacked
    return found


def loop_result_types(yielded: Sequence[Value], carried: int) -> dict[int, TensorType]:
    """Loop: the body yields cond, the `carried` values, then the scan-output slices."""
    found: dict[int, TensorType] = {}
    for position, value in enumerate(yielded[1:]):
        if position < carried:
            if isinstance(value.type, TensorType):
                found[position] = value.type
            continue
        stacked = _stacked(value.type, 0, None)
        if stacked is not None:
            found[position] = stacked
    return found


def if_result_types(then_yielded: Sequence[Value], else_yielded: Sequence[Value]) -> dict[int, TensorType]:
    """If: each output both branches yield as a ranked tensor of one element type and rank."""
    found: dict[int, TensorType] = {}
    for position, (then_value, else_value) in enumerate(zip(then_yielded, else_yielded, strict=False)):
        then_type, else_type = then_value.type, else_value.type
        if not (isinstance(then_type, TensorType) and isinstance(else_type, TensorType)):
            continue
        if then_type.shape is None or else_type.shape is None or then_type.element_type is not else_type.element_type:
            continue
        if len(then_type.shape) != len(else_type.shape):
            continue
        dims = tuple(left if left == right else None for left, right in zip(then_type.shape, else_type.shape, strict=True))
        found[position] = TensorType(then_type.element_type, dims)
    return found


def loop_body_input_types(
    node: onnx_ir.Node, attribute: str, inputs: Sequence[Value | None]
) -> tuple[Type | None, ...]:
    """The first-iteration types of the inputs of `node`'s graph attribute `attribute`, by
    position, when it is a Loop body; empty for any other node or graph attribute."""
    if node.domain not in ("", "ai.onnx") or node.op_type != "Loop" or attribute != "body":
        return ()
    carried = tuple(None if value is None else value.type for value in inputs[2:])
    return (TensorType(ScalarType.I64, ()), TensorType(ScalarType.BOOL, ()), *carried)


def refine_type(declared: Type, known: Type | None) -> Type:
    """`declared`, or `known`'s shape when `declared` is a tensor of unknown rank and `known` a
    tensor of the same element type. Without `known`'s dim names: a Loop's carried value may
    change its dims from one iteration to the next (`TensorType.dim_names`)."""
    if (
        isinstance(declared, TensorType)
        and declared.shape is None
        and isinstance(known, TensorType)
        and known.element_type is declared.element_type
    ):
        return TensorType(known.element_type, known.shape)
    return declared
