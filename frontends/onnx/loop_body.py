"""Types of a Loop body's inputs from what the importer knows, where ONNX inference dropped them.

ONNX's Loop inference clears the shapes of the loop-carried values before it types the body
(they may change from one iteration to the next), so a body whose inputs are not declared (the
Loop in ONNX's own function body of Range, for one) comes out of unknown rank, and so does every
op in it: nothing of unknown rank can be lowered. The importer knows each input's first value:
the iteration number is a scalar int64, the condition a scalar bool, and each loop-carried value
starts as the node's operand. An undeclared input takes that type; a backend must then check that
the body yields the same type again (else the value changes type across iterations).

This module must not override what a model declares: a declared rank or dim stays as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir
from niro.ir import ScalarType, TensorType, Type, Value

__all__ = ["loop_body_input_types", "refine_type"]


def loop_body_input_types(
    node: ir.Node, attribute: str, inputs: Sequence[Value | None]
) -> tuple[Type | None, ...]:
    """The first-iteration types of the inputs of `node`'s graph attribute `attribute`, by
    position, when it is a Loop body; empty for any other node or graph attribute."""
    if node.domain not in ("", "ai.onnx") or node.op_type != "Loop" or attribute != "body":
        return ()
    carried = tuple(None if value is None else value.type for value in inputs[2:])
    return (TensorType(ScalarType.I64, ()), TensorType(ScalarType.BOOL, ()), *carried)


def refine_type(declared: Type, known: Type | None) -> Type:
    """`declared`, or `known` when `declared` is a tensor of unknown rank and `known` a tensor
    of the same element type."""
    if (
        isinstance(declared, TensorType)
        and declared.shape is None
        and isinstance(known, TensorType)
        and known.element_type is declared.element_type
    ):
        return known
    return declared
