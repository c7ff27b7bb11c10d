"""Shape arithmetic folded at import, so shapes that are static in fact are static in the IR.

Exported models and ONNX's own function bodies compute shapes at run time: `Reshape(x,
Shape(y))`, `Range(0, Size(axes))`, `Concat(Shape(x)[0:1], [-1])`. ONNX shape inference folds
only some of it, and every dim it leaves unknown costs later: a dynamic dim that is 1 at run
time cannot be broadcast statically, and ops whose rank is unknown cannot be lowered at all.

`fold_shape_arithmetic` walks a graph (in the weightless copy shape inference runs on) and
replaces each node it can evaluate now by a `Constant` node with the node's outputs:
- `Shape` and `Size` of a value whose inferred shape is fully static;
- integer values that symbolic dims (`symbolic_dims`) proved constant although computed from
  the `Shape` of a value with dynamic dims: `x.shape[-1]` of an [N, 7] value as PyTorch
  exports it (`Gather(Shape(x), 1)`, which ONNX inference does not evaluate for ops like
  TopK's K);
- any deterministic default-domain node whose inputs are all known small constants, when one
  of them is itself folded shape data or all of them are integers (so float weights and their
  arithmetic are never folded: only shape computations, never the model's numbers).
Known constants are small initializers and Constant nodes (at most `FOLD_LIMIT` elements) and
what was folded. Values are computed by ONNX's reference implementation of the node's own
op-set version, and a node is folded only if its inferred outputs have at most `FOLD_LIMIT`
elements. Subgraphs are left to the importer: the caller re-runs inference after a round that
folded something, until nothing more folds (`infer_types`), and the importer then folds, with
`fold_node`, what it meets in any graph: Shape/Size of values its own typing made static, and
nodes on integer constants it knows (in Loop, Scan and If bodies too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["FOLD_LIMIT", "KnownConstants", "constant_value", "fold_node", "fold_shape_arithmetic", "may_fold"]

FOLD_LIMIT = 1024
"""Most elements a folded value (or a constant it is computed from) may have."""

_NEVER_FOLDED = frozenset(
    {
        "Constant",  # already one
        "Bernoulli",
        "Multinomial",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Dropout",  # random in training mode
        "If",
        "Loop",
        "Scan",
    }
)
_INTEGER_TYPES = frozenset(
    {
        onnx.TensorProto.INT8,
        onnx.TensorProto.INT16,
        onnx.TensorProto.INT32,
        onnx.TensorProto.INT64,
        onnx.TensorProto.UINT8,
        onnx.TensorProto.UINT16,
        onnx.TensorProto.UINT32,
        onnx.TensorProto.UINT64,
        onnx.TensorProto.BOOL,
    }
)
_INTEGER_KINDS = ("b", "i", "u")
"""numpy kinds of the integer (and boolean) arrays `fold_node` evaluates a node on."""
_NUMERIC_TYPES: frozenset[int] = _INTEGER_TYPES | {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.FLOAT16,
}


def _static_dims(type_: onnx.TypeProto | None) -> list[int] | None:
    if type_ is None or not type_.HasField("tensor_type") or not type_.tensor_type.HasField("shape"):
        return None
    dims = []
    for dim in type_.tensor_type.shape.dim:
        if not dim.HasField("dim_value"):
            return None
        dims.append(dim.dim_value)
    return dims


def _small_output(type_: onnx.TypeProto | None) -> bool:
    dims = _static_dims(type_)
    return (
        type_ is not None
        and dims is not None
        and math.prod(dims) <= FOLD_LIMIT
        and type_.tensor_type.elem_type in _NUMERIC_TYPES
    )


def _qualifies(tensor: onnx.TensorProto) -> bool:
    """Whether an initializer may feed folding (checked from its header only: cheap)."""
    return (
        tensor.data_location != onnx.TensorProto.EXTERNAL
        and tensor.data_type in _NUMERIC_TYPES
        and math.prod(tensor.dims) <= FOLD_LIMIT
    )


def _known_tensor(tensor: onnx.TensorProto) -> np.ndarray | None:
    if not _qualifies(tensor):
        return None
    try:
        return numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 - malformed data: the importer reports it later
        return None


class KnownConstants:
    """The constants of a graph by value name: initializers read only when a node needs them
    (most graphs have many small weights and few shape computations)."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self._initializers = {tensor.name: tensor for tensor in graph.initializer if _qualifies(tensor)}
        self._arrays: dict[str, np.ndarray | None] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._arrays or name in self._initializers

    def is_integer(self, name: str) -> bool:
        array = self._arrays.get(name)
        if array is not None:
            return array.dtype.kind in "biu"
        tensor = self._initializers.get(name)
        return tensor is not None and tensor.data_type in _INTEGER_TYPES

    def get(self, name: str) -> np.ndarray | None:
        if name not in self._arrays and name in self._initializers:
            self._arrays[name] = _known_tensor(self._initializers[name])
        return self._arrays.get(name)

    def set(self, name: str, array: np.ndarray) -> None:
        self._arrays[name] = array


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    if len(node.attribute) != 1 or len(node.output) != 1:
        return None
    attribute = node.attribute[0]
    if attribute.name == "value" and attribute.type == onnx.AttributeProto.TENSOR:
        return _known_tensor(attribute.t)
    if attribute.name == "value_int":
        return np.array(attribute.i, dtype=np.int64)
    if attribute.name == "value_ints" and len(attribute.ints) <= FOLD_LIMIT:
        return np.array(attribute.ints, dtype=np.int64)
    return None


def _shape_data(node: onnx.NodeProto, dims: list[int]) -> np.ndarray:
    if node.op_type == "Size":
        return np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
    start, end = 0, len(dims)
    for attribute in node.attribute:
        if attribute.name == "start":
            start = attribute.i
        elif attribute.name == "end":
            end = attribute.i
    return np.array(dims[slice(start, end)], dtype=np.int64)  # ONNX clamps as slicing does


def _evaluate(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    feeds = {name: value for name, value in zip(node.input, inputs, strict=True) if name}
    try:
        evaluator = ReferenceEvaluator(node, opsets={"": opset})
        results = evaluator.run(None, feeds)
    except Exception:  # noqa: BLE001 - the node is left for the backend (which reports errors)
        return None
    arrays = [np.asarray(result) for result in results]
    if any(array.dtype == object or array.size > FOLD_LIMIT for array in arrays):
        return None
    return arrays


def schema_attributes_only(node: onnx.NodeProto, opset: int) -> bool:
    """Whether every attribute of `node` is one its schema defines, of the type it declares: a
    folded node is never verified, so a malformed one must stay for the verifier to report, and
    the passes that read attributes before it (folding, symbolic dims) read them only so (a
    Shape whose `start` says FLOAT crashed the symbolic-dims pass: test_fuzz.py)."""
    if not node.attribute:
        return True
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return False
    return all(
        attribute.name in schema.attributes
        and attribute.type == _SCHEMA_TYPE_CODES.get(schema.attributes[attribute.name].type)
        for attribute in node.attribute
    )


_SCHEMA_TYPE_CODES = {
    getattr(onnx.defs.OpSchema.AttrType, name): code
    for name, code in onnx.AttributeProto.AttributeType.items()
    if hasattr(onnx.defs.OpSchema.AttrType, name)
}
"""A schema's attribute type (`OpSchema.AttrType`) as the AttributeProto type code of the same
name."""


def may_fold(op_type: str, operands: Sequence[str | None]) -> bool:
    """Whether `fold_node` could fold a default-domain node, decided before any operand's data
    is read. `operands` holds, per input, None where absent, else the numpy kind of its
    elements (`b`, `i`, `u`, `f`...) if it is a known constant, or "" if it is not. False
    means `fold_node` would return None; True means it is worth asking.

    NOTE: most nodes of a model never fold (float arithmetic on weights); building their
    constants' TensorProtos just to learn that cost ~40 us a node."""
    if op_type in ("Shape", "Size"):
        return bool(operands) and operands[0] is not None
    if op_type in _NEVER_FOLDED:
        return False
    present = False
    for kind in operands:
        if kind is None:
            continue
        if kind not in _INTEGER_KINDS:
            return False
        present = True
    return present


def fold_node(
    node: onnx.NodeProto, inputs: list[np.ndarray | None], input_dims: list[list[int] | None], opset: int
) -> list[np.ndarray] | None:
    """The outputs of one node folded where the importer meets it (in any graph, subgraphs
    included): `Shape`/`Size` of a statically shaped input (`input_dims[0]`), or a node whose
    inputs are all known integer constants (`inputs`, None where absent). None when the node
    does not fold by those rules (see the module docstring)."""
    if node.domain not in ("", "ai.onnx") or node.op_type in _NEVER_FOLDED or not node.output:
        return None
    if any(attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for attribute in node.attribute):
        return None
    if not schema_attributes_only(node, opset):
        return None
    if node.op_type in ("Shape", "Size"):
        dims = input_dims[0] if input_dims else None
        return None if dims is None else [_shape_data(node, dims)]
    present = [array for name, array in zip(node.input, inputs, strict=True) if name]
    if not present or any(array is None or array.dtype.kind not in _INTEGER_KINDS for array in present):
        return None
    return _evaluate(node, inputs, opset)


def fold_shape_arithmetic(
    graph: onnx.GraphProto,
    types: Mapping[str, onnx.TypeProto],
    opset: int,
    folded: dict[int, tuple[onnx.TensorProto, ...]],
    proven: Mapping[str, np.ndarray],
) -> bool:
    """Replace the nodes of `graph` that fold now by Constant nodes; record their outputs in
    `folded` (node index -> one TensorProto per output). `proven` holds integer values that
    symbolic dims found constant (`symbolic_dims.SymbolicDims.constants`). True if anything
    new was folded."""
    changed = False
    known = KnownConstants(graph)
    shape_data: set[str] = set()
    for index, node in enumerate(graph.node):
        if index in folded:
            for tensor in folded[index]:
                known.set(tensor.name, numpy_helper.to_array(tensor))
                shape_data.add(tensor.name)
            continue
        op_type = node.op_type
        picks = len(node.output) == 1 and node.output[0] in proven
        if (
            op_type not in ("Shape", "Size", "Constant")
            and not picks
            and not all(name in known for name in node.input if name)
        ):
            continue  # the common case, decided by name lookups alone (before any other field)
        if node.domain not in ("", "ai.onnx"):
            continue
        if op_type == "Constant":
            value = constant_value(node)
            if value is not None:
                known.set(node.output[0], value)
            continue
        if op_type in _NEVER_FOLDED or not node.output or not all(node.output):
            continue
        if any(attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for attribute in node.attribute):
            continue
        if not schema_attributes_only(node, opset):
            continue
        if not all(_small_output(types.get(name)) for name in node.output):
            continue
        if picks:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(types[node.output[0]].tensor_type.elem_type)
            results = [proven[node.output[0]].astype(dtype)] if dtype.kind in "biu" else None
        else:
            results = _fold(node, known, shape_data, types, opset)
        if results is None or len(results) != len(node.output):
            continue
        if any(
            onnx.helper.np_dtype_to_tensor_dtype(array.dtype) != types[name].tensor_type.elem_type
            or list(array.shape) != _static_dims(types[name])
            for name, array in zip(node.output, results, strict=True)
        ):
            continue  # the reference disagrees with inference: leave the node to the backend
        tensors = tuple(numpy_helper.from_array(array, name) for name, array in zip(node.output, results, strict=True))
        for tensor, array in zip(tensors, results, strict=True):
            known.set(tensor.name, array)
            shape_data.add(tensor.name)
        folded[index] = tensors
        changed = True
        if len(tensors) == 1:  # NOTE: a multi-output node (Split) stays; its inputs now fold
            graph.node[index].CopyFrom(
                onnx.helper.make_node("Constant", [], [node.output[0]], name=node.name, value=tensors[0])
            )
    return changed


def _fold(node, known, shape_data, types, opset) -> list[np.ndarray] | None:
    if node.op_type in ("Shape", "Size"):
        dims = _static_dims(types.get(node.input[0])) if node.input else None
        return None if dims is None else [_shape_data(node, dims)]
    present = [name for name in node.input if name]
    if not present or not all(name in known for name in present):
        return None
    if not any(name in shape_data for name in present) and not all(known.is_integer(name) for name in present):
        return None
    return _evaluate(node, [known.get(name) if name else None for name in node.input], opset)
