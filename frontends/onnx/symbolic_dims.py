"""Dims that are static in fact, found by computing shapes as products of symbols.

Exporters compute reshape targets at run time from `Shape`: PyTorch's attention reshapes a
[b, t] mask to [b * heads, 1, t], then to [b, heads, -1, t]. ONNX inference knows `b` only
as a name and cannot multiply names, so the -1 stays unknown although it is 1 in every run;
the 1 then cannot be broadcast statically, and a run-time size 1 of a dynamic dim is not
broadcast (the lowering stops with that assertion).

Here a dim is a `Dim`: an integer coefficient times a product of symbols, where a symbol is
one of ONNX's dim names (`batch`, `unk__3`) or, for a dim ONNX left nameless, a name for that
dim of that value alone. Integer 1-D (or scalar) values that hold dims (`Shape`, `Gather`,
`Slice`, `Concat`, `Mul`...) are followed element by element, and the output dims of
`Reshape`, `Expand` and `ConstantOfShape` are computed from them; a `Reshape`'s -1 is the
input's dims divided by the other target dims when that division is exact; a `Slice` at run-time
positions keeps the dims of the axes it does not cut, and the 1 of an axis of size 1
(`_uncut_axes_kept`). `STFT`'s result, which ONNX leaves unranked when the signal length is
dynamic, is ranked here (its bins static). Every step is exact arithmetic on run-time sizes, so
a dim found constant here is that constant in every run in which the model is valid, with three
assumptions, each of which the Slice lowering checks at run time: a tensor Slice that keeps the
last k elements of a dynamic axis (`x[:, -1:]`) takes the axis to be at least that long (see
`_sliced_dims`), a one-element cut at a run-time index (`offsets[i:i+1]`, the ends being the
starts plus 1 by an `Add` of a constant) takes i to lie inside the axis (see
`_one_element_cut`), and a cut of an axis of size 1 at run-time positions takes the cut not to
be empty (see `_uncut_axes_kept`). Subgraphs are walked too, reading the values of the graphs
around them: PyTorch's dynamo exporter makes that cut in a Loop body, with a counter the Loop
carries (see `_Walk._walk_loop_body`).

`analyse` returns the value types to tighten (only dims that ONNX left unknown and that came
out constant), and the integer values that came out constant (`x.shape[1]` of an [N, 7]
value), which `folding` turns into constants. Its caller (`inference.infer_types`) writes the
types into the weightless copy's value_info and re-runs ONNX inference, which carries them to
every later node.
A dim name ONNX made up for such an output (`unk__14`) is resolved to what was computed
(`4 * batch`) wherever it appears later, so chains of reshapes stay exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx

from .folding import KnownConstants, constant_value, schema_attributes_only

__all__ = ["Dim", "SymbolicDims", "analyse"]

SHAPE_VECTOR_LIMIT = 64
"""Longest integer vector followed element by element (shapes are short)."""

_DEFAULT_DOMAINS = ("", "ai.onnx")
_INTEGER_CASTS = frozenset({onnx.TensorProto.INT32, onnx.TensorProto.INT64})


@dataclass(frozen=True, slots=True)
class Dim:
    """`coefficient * symbols[0] * symbols[1] * ...` (symbols sorted; none: a constant)."""

    coefficient: int
    symbols: tuple[str, ...] = ()

    @property
    def constant(self) -> int | None:
        return self.coefficient if not self.symbols else None

    def __mul__(self, other: Dim) -> Dim:
        return Dim(
            self.coefficient * other.coefficient, tuple(sorted(self.symbols + other.symbols))
        )

    def exact_quotient(self, divisor: Dim) -> Dim | None:
        """`self / divisor` when the division leaves no remainder for every value of the
        symbols (divisor's symbols cancel, its coefficient divides); else None."""
        if divisor.coefficient == 0 or self.coefficient % divisor.coefficient:
            return None
        remaining = list(self.symbols)
        for symbol in divisor.symbols:
            if symbol not in remaining:
                return None
            remaining.remove(symbol)
        return Dim(self.coefficient // divisor.coefficient, tuple(remaining))


_ONE = Dim(1)


def _product(dims: Sequence[Dim]) -> Dim:
    result = _ONE
    for dim in dims:
        result = result * dim
    return result


@dataclass(frozen=True, slots=True)
class _Vector:
    """An integer value of rank 0 or 1 holding dims; None where an element is unknown."""

    elements: tuple[Dim | None, ...]
    scalar: bool = False


class _Walk:
    """The dims of one graph's values, computed in node order."""

    def __init__(
        self,
        graph: onnx.GraphProto,
        types: Mapping[str, onnx.TypeProto],
        parent: _Walk | None = None,
        opset: int | None = None,
    ) -> None:
        self.graph = graph
        self.types = types
        self.parent = parent  # the walk of the enclosing graph (a subgraph reads its values)
        # the default domain's opset: a node's attributes are read only when its schema's
        self.opset: int = opset if opset is not None else (parent.opset if parent else 1)
        self.offsets: dict[str, tuple[str, int]] = {}  # value -> (base value, k): value = base + k
        self._initializers: dict[str, onnx.TensorProto] | None = None
        self._producers: dict[str, onnx.NodeProto] | None = None
        self.known = KnownConstants(graph)
        self.vectors: dict[str, _Vector] = {}
        self.dims: dict[str, tuple[Dim, ...]] = {}  # values whose dims were computed here
        self.aliases: dict[str, Dim] = {}  # ONNX dim names resolved to computed dims
        self.seen_names: set[str] = set()
        self.refined: dict[str, onnx.TypeProto] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.subgraphs: list[_Walk] = []

    # -- dims of values ---------------------------------------------------------------------

    def dims_of(self, name: str) -> tuple[Dim, ...] | None:
        if name in self.dims:
            return self.dims[name]
        shape = _shape(self.types.get(name))
        if shape is None:
            own = self._initializer_dims(name)
            return own if own is not None or self.parent is None else self.parent.dims_of(name)
        dims = []
        for axis, dim in enumerate(shape.dim):
            if dim.HasField("dim_value"):
                dims.append(Dim(dim.dim_value))
            elif dim.dim_param:
                self.seen_names.add(dim.dim_param)
                dims.append(self.aliases.get(dim.dim_param) or Dim(1, (dim.dim_param,)))
            else:
                dims.append(Dim(1, (f"{name}[{axis}]",)))  # this dim of this value only
        return tuple(dims)

    def _initializer_dims(self, name: str) -> tuple[Dim, ...] | None:
        """Initializers have no inferred type: their dims are their own."""
        if self._initializers is None:
            self._initializers = {tensor.name: tensor for tensor in self.graph.initializer}
        tensor = self._initializers.get(name)
        return None if tensor is None else tuple(Dim(dim) for dim in tensor.dims)

    def producer(self, name: str) -> onnx.NodeProto | None:
        """The node of this graph (or an enclosing one) that makes value `name`."""
        if self._producers is None:
            self._producers = {output: node for node in self.graph.node for output in node.output if output}
        found = self._producers.get(name)
        return found if found is not None or self.parent is None else self.parent.producer(name)

    def vector(self, name: str) -> _Vector | None:
        if not name:
            return None
        if name in self.vectors:
            return self.vectors[name]
        if not self.known.is_integer(name):  # (before reading data: most constants are weights)
            return None if self.parent is None or name in self.types else self.parent.vector(name)
        array = self.known.get(name)
        if (
            array is None
            or array.dtype.kind not in "biu"
            or array.ndim > 1
            or array.size > SHAPE_VECTOR_LIMIT
        ):
            return None
        vector = _Vector(
            tuple(Dim(int(element)) for element in array.reshape(-1)), scalar=array.ndim == 0
        )
        self.vectors[name] = vector
        return vector

    def integers(self, name: str) -> list[int] | None:
        vector = self.vector(name)
        if vector is None or any(
            element is None or element.constant is None for element in vector.elements
        ):
            return None
        return [element.constant for element in vector.elements]

    # -- nodes ------------------------------------------------------------------------------

    def visit(self, node: onnx.NodeProto, index: int, types) -> None:
        """Follow `node`; `types` has the inferred types of its subgraphs (`GraphTypes`),
        whose values are walked too (a Loop body slices `offsets[i:i+1]`)."""
        if (
            node.op_type == "Add"
            and node.domain in _DEFAULT_DOMAINS
            and len(node.input) == 2
            and node.output
        ):
            self._note_offset(node)
        for attribute in node.attribute:
            subgraphs = [attribute.g] if attribute.HasField("g") else []
            for position, subgraph in enumerate([*subgraphs, *attribute.graphs]):
                inner = types.subgraph(index, attribute.name, position)
                if node.op_type == "Loop" and attribute.name == "body":
                    self.subgraphs.append(self._walk_loop_body(node, subgraph, inner))
                else:
                    self.subgraphs.append(_walk_graph(subgraph, inner, self))
        handler = _HANDLERS.get(node.op_type)
        if (
            handler is None
            or node.domain not in _DEFAULT_DOMAINS
            or not node.output
            or not node.output[0]
            or not schema_attributes_only(node, self.opset)
        ):
            return
        result = handler(self, node)
        if isinstance(result, _Vector):
            if len(result.elements) <= SHAPE_VECTOR_LIMIT:
                self.vectors[node.output[0]] = result
                self._note_constant(node.output[0], result)
        elif result is not None:
            self.set_dims(node.output[0], result)

    def _walk_loop_body(self, node: onnx.NodeProto, body: onnx.GraphProto, types) -> _Walk:
        """The walk of a Loop's body, its iteration number a scalar and each value it carries as
        a counter (the body yields it plus a constant: dynamo's bag index) of its initial
        value's dims, which exporters leave unranked in the body."""
        seeds: dict[str, tuple[Dim, ...]] = {body.input[0].name: ()} if body.input else {}
        walk = _walk_graph(body, types, self, seeds)
        for initial, carried, yielded in zip(
            node.input[2:], body.input[2:], body.output[1:], strict=False
        ):
            dims = self.dims_of(initial) if initial else None
            if dims is not None and walk.offset_of(yielded.name)[0] == carried.name:
                seeds[carried.name] = dims
        return walk if len(seeds) <= 1 else _walk_graph(body, types, self, seeds)

    def _note_offset(self, node: onnx.NodeProto) -> None:
        """`Add(x, c)` with c a known constant (one value): the output is x + c, elementwise."""
        for base, other in (node.input, reversed(node.input)):
            added = self.integers(other)
            if added is not None and len(set(added)) == 1 and self.vector(base) is None:
                root, offset = self.offset_of(base)
                self.offsets[node.output[0]] = (root, offset + added[0])
                return

    def offset_of(self, name: str) -> tuple[str, int]:
        """(base, k) with `name` = base + k, as far as Adds of constants show (else (name, 0))."""
        if name in self.offsets:
            return self.offsets[name]
        if self.parent is not None and name not in self.types:
            return self.parent.offset_of(name)
        return (name, 0)

    def _note_constant(self, name: str, vector: _Vector) -> None:
        values = [None if element is None else element.constant for element in vector.elements]
        if None in values or name in self.known:
            return
        self.constants[name] = np.array(values[0] if vector.scalar else values, dtype=np.int64)

    def set_dims(self, name: str, dims: tuple[Dim | None, ...]) -> None:
        """Record computed output dims, learn the names ONNX made up for them, and note the
        dims ONNX left unknown that came out constant."""
        type_ = self.types.get(name)
        shape = _shape(type_)
        if shape is not None and len(shape.dim) != len(dims):
            return  # ONNX disagrees on the rank: trust neither
        known = tuple(
            dim if dim is not None else Dim(1, (f"{name}[{axis}]",))
            for axis, dim in enumerate(dims)
        )
        if shape is not None:
            known = tuple(
                self._reconcile(old, new) for old, new in zip(shape.dim, known, strict=True)
            )
        self.dims[name] = known
        if type_ is None or not type_.HasField("tensor_type"):
            return
        axes = [
            axis
            for axis, dim in enumerate(known)
            if dim.constant is not None
            and dim.constant >= 0
            and (shape is None or not shape.dim[axis].HasField("dim_value"))
        ]
        if axes or shape is None:  # a constant dim, or the rank ONNX left unknown
            self.refined[name] = _with_static_dims(type_, known, axes)

    def _reconcile(self, inferred: onnx.TensorShapeProto.Dimension, computed: Dim) -> Dim:
        if inferred.HasField("dim_value"):
            return Dim(inferred.dim_value)  # ONNX's constant stands
        name = inferred.dim_param
        if not name:
            return computed
        if name in self.aliases:
            return self.aliases[name]
        if name in self.seen_names:
            return Dim(1, (name,))  # a name used before this node: keep its meaning
        self.seen_names.add(name)
        if computed.symbols != (f"{name}",):
            self.aliases[name] = computed
        return computed


def _shape(type_: onnx.TypeProto | None) -> onnx.TensorShapeProto | None:
    if (
        type_ is None
        or not type_.HasField("tensor_type")
        or not type_.tensor_type.HasField("shape")
    ):
        return None
    return type_.tensor_type.shape


def _with_static_dims(
    type_: onnx.TypeProto, dims: tuple[Dim, ...], axes: list[int]
) -> onnx.TypeProto:
    refined = onnx.TypeProto()
    refined.CopyFrom(type_)
    shape = refined.tensor_type.shape
    if not refined.tensor_type.HasField("shape"):
        shape.SetInParent()  # (a scalar has a shape without dims)
        for _ in dims:
            shape.dim.add()
    for axis in axes:
        shape.dim[axis].Clear()
        shape.dim[axis].dim_value = dims[axis].constant
    return refined


def _attribute(node: onnx.NodeProto, name: str, default):
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


# -- integer vectors ----------------------------------------------------------------------------


def _shape_of(walk: _Walk, node: onnx.NodeProto) -> _Vector | None:
    dims = walk.dims_of(node.input[0]) if node.input else None
    if dims is None:
        return None
    start, end = _attribute(node, "start", 0), _attribute(node, "end", len(dims))
    return _Vector(dims[slice(start, end)])


def _size_of(walk: _Walk, node: onnx.NodeProto) -> _Vector | None:
    dims = walk.dims_of(node.input[0]) if node.input else None
    return None if dims is None else _Vector((_product(dims),), scalar=True)


def _gather(walk: _Walk, node: onnx.NodeProto) -> _Vector | tuple[Dim, ...] | None:
    data = walk.vector(node.input[0])
    indices = walk.known.get(node.input[1]) if len(node.input) > 1 else None
    if data is None:
        unknown = _unknown_dims_picked(walk, node, indices)
        return unknown if unknown is not None else _gathered_dims(walk, node)
    if (
        data.scalar
        or indices is None
        or indices.ndim > 1
        or _attribute(node, "axis", 0) not in (0, -1)
    ):
        return None
    count = len(data.elements)
    picked = []
    for index in indices.reshape(-1).tolist():
        if not -count <= index < count:
            return None
        picked.append(data.elements[index])
    return _Vector(tuple(picked), scalar=indices.ndim == 0)


def _unknown_dims_picked(walk: _Walk, node: onnx.NodeProto, indices) -> _Vector | None:
    """Elements picked from the `Shape` of a value of unknown rank (an onnxruntime contrib op's
    output, which ONNX inference cannot type): as many unknown dims as there are indices, so
    that a shape vector built from them keeps its known elements. onnxruntime's transformer
    optimizer fuses BART's LayerNormalizations into SkipLayerNormalization, and the decoder's
    cross-attention mask is then expanded to [Shape(x)[0], -1, tgt, src] with x such an
    output: its -1 (a 1 kept) was lost with the whole vector."""
    producer = walk.producer(node.input[0])
    if (
        producer is None
        or producer.op_type != "Shape"
        or producer.domain not in _DEFAULT_DOMAINS
        or indices is None
        or indices.ndim > 1
        or _attribute(node, "axis", 0) not in (0, -1)
    ):
        return None
    return _Vector((None,) * indices.size, scalar=indices.ndim == 0)


def _gathered_dims(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim, ...] | None:
    """Gather's result dims: the data's, with the gathered axis replaced by the indices' dims
    (an embedding lookup by `Range(0, seq)` is [seq, width])."""
    data = walk.dims_of(node.input[0])
    indices = walk.dims_of(node.input[1]) if len(node.input) > 1 else None
    if data is None or indices is None:
        return None
    axis = _attribute(node, "axis", 0)
    if not -len(data) <= axis < len(data):
        return None
    axis %= len(data)
    return data[:axis] + indices + data[axis + 1 :]


def _range(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim, ...] | None:
    """Range's length: `limit` itself from 0 by 1 (`torch.arange(seq)`), else when known."""
    start, limit, delta = (walk.vector(name) for name in (list(node.input) + ["", "", ""])[:3])
    if (
        start is None
        or limit is None
        or delta is None
        or not (start.scalar and limit.scalar and delta.scalar)
    ):
        return None
    (first,), (end,), (step,) = start.elements, limit.elements, delta.elements
    if first == Dim(0) and step == _ONE:
        return (end,)
    if (
        None in (first, end, step)
        or first.constant is None
        or end.constant is None
        or not step.constant
    ):
        return None
    return (Dim(max(0, -(-(end.constant - first.constant) // step.constant))),)


def _slice_parameters(walk: _Walk, node: onnx.NodeProto) -> tuple | None:
    """(starts, ends, axes or None, steps or None) as lists of ints, when all are constants."""
    if len(node.input) >= 3:  # op-set 10+: starts, ends, axes, steps as inputs
        parameters = [
            walk.integers(name) if name else None for name in (list(node.input[1:]) + [""] * 2)[:4]
        ]
        starts, ends, axes, steps = parameters
        if (
            starts is None
            or ends is None
            or (len(node.input) > 3 and node.input[3] and axes is None)
        ):
            return None
        if len(node.input) > 4 and node.input[4] and steps is None:
            return None
        return starts, ends, axes, steps
    starts, ends = _attribute(node, "starts", None), _attribute(node, "ends", None)
    if starts is None or ends is None:
        return None
    return list(starts), list(ends), _attribute(node, "axes", None), None


def _slice(walk: _Walk, node: onnx.NodeProto) -> _Vector | tuple[Dim, ...] | None:
    data = walk.vector(node.input[0])
    parameters = _slice_parameters(walk, node)
    if data is None:
        if parameters is None:
            return _one_element_cut(walk, node) or _uncut_axes_kept(walk, node)
        return _sliced_dims(walk, node, *parameters)
    if data.scalar or parameters is None:
        return None
    starts, ends, axes, steps = parameters
    if len(starts) != 1 or len(ends) != 1 or (axes is not None and list(axes) not in ([0], [-1])):
        return None
    step = steps[0] if steps else 1
    if step == 0:
        return None
    positions = np.arange(len(data.elements))[slice(starts[0], ends[0], step)]
    return _Vector(tuple(data.elements[position] for position in positions.tolist()))


_TO_THE_END = 1 << 31
"""An end at least this large takes a slice to the end of its axis (exporters write INT64_MAX
or INT32_MAX)."""


def _sliced_dims(
    walk: _Walk, node: onnx.NodeProto, starts, ends, axes, steps
) -> tuple[Dim, ...] | None:
    """A tensor Slice's result dims: where the last k elements of a dynamic axis are kept
    with a step of 1 (`x[:, -1:]`: 1), that length k, ONNX leaving it unknown.

    NOTE: the one assumption here: the dynamic dim is at least k long (else the slice is
    shorter). The Slice lowering checks it at run time (`cf.assert`), so a run where it does
    not hold stops with that reason instead of reading out of bounds. A cut from the front
    (`x[:k]`) stays dynamic: it is how models cap a count that is often smaller at run time
    (torchvision's detectors keep `keep[:detections_per_img]` of the boxes NMS kept, fewer
    than 100 when the image has fewer objects), and ONNX's result is then the shorter one."""
    data = walk.dims_of(node.input[0])
    if data is None:
        return None
    rank = len(data)
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(axes) == len(starts) == len(ends) == len(steps):
        return None
    dims = list(data)
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        if not -rank <= axis < rank:
            return None
        axis %= rank
        dim = data[axis]
        if dim.constant is not None or step != 1:
            dims[axis] = (
                Dim(1, (f"{node.output[0]}[{axis}]",))
                if dim.constant is None
                else _static_slice(dim.constant, start, end, step)
            )
            continue
        if start < 0 and end >= _TO_THE_END:
            dims[axis] = Dim(-start)  # the last -start
        else:
            dims[axis] = Dim(1, (f"{node.output[0]}[{axis}]",))
    return tuple(dims)


def _one_element_cut(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim, ...] | None:
    """`x[i:i+1]` on a dynamic axis, i known only at run time (PyTorch's dynamo exporter reads
    each bag's `offsets[i:i+1]` in a Loop over the bags): one element, ONNX leaving it unknown.

    NOTE: the assumption, as for `x[-1:]` in `_sliced_dims`: i lies inside the axis (else the
    cut is empty); the Slice lowering checks the length at run time (`cf.assert`)."""
    if len(node.input) < 3 or any(node.input[4:5]) and walk.integers(node.input[4]) != [1]:
        return None
    data, starts, ends = (walk.dims_of(name) for name in node.input[:3])
    if data is None or starts is None or ends is None or starts != (Dim(1),) or ends != (Dim(1),):
        return None
    if walk.offset_of(node.input[2]) != (
        walk.offset_of(node.input[1])[0],
        walk.offset_of(node.input[1])[1] + 1,
    ):
        return None
    axes = walk.integers(node.input[3]) if len(node.input) > 3 and node.input[3] else [0]
    if axes is None or len(axes) != 1 or not -len(data) <= axes[0] < len(data):
        return None
    axis = axes[0] % len(data)
    if data[axis].constant is not None:
        return None
    return tuple(Dim(1) if position == axis else dim for position, dim in enumerate(data))


def _uncut_axes_kept(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim, ...] | None:
    """A tensor Slice whose starts or ends are known only at run time: the axes it does not
    cut keep their dims, the ones it cuts are unknown. ONNX inference then leaves every dim
    unknown, and a dim that stays 1 is lost: Hugging Face's BERT-family embeddings slice
    `position_ids[:, :seq]` of a [1, max_positions] buffer and add its embeddings to the
    [batch, seq, d] token embeddings, which then cannot broadcast it statically (a run-time 1
    of a dynamic dim is not broadcast: the call stops at batch > 1). Exact: a Slice never
    changes an axis outside `axes`.

    A cut axis of size 1 keeps its 1: MPT's ALiBi bias [heads, 1, max] is cut at
    `[:, max(0, 1 - q):, max(0, max - k):]` (run-time starts, from the dynamo exporter's
    `sym_max`) and added to [batch, heads, q, k] scores, so its 1 must broadcast. NOTE: the
    assumption, as in `_sliced_dims`: the cut is not empty; the Slice lowering checks the
    length at run time (`cf.assert`)."""
    if len(node.input) < 3:
        return None  # (op-set < 10: starts and ends are attributes, always known)
    data = walk.dims_of(node.input[0])
    if data is None:
        return None
    rank = len(data)
    if len(node.input) > 3 and node.input[3]:
        axes = walk.integers(node.input[3])
    else:
        starts = walk.dims_of(node.input[1])
        count = starts[0].constant if starts is not None and len(starts) == 1 else None
        axes = None if count is None else list(range(count))
    if axes is None or not all(-rank <= axis < rank for axis in axes):
        return None
    cut = {axis % rank for axis in axes}
    return tuple(
        Dim(1, (f"{node.output[0]}[{axis}]",)) if axis in cut and dim != Dim(1) else dim
        for axis, dim in enumerate(data)
    )


def _static_slice(dim: int, start: int, end: int, step: int) -> Dim:
    return Dim(len(range(dim)[slice(start, end, step)]) if step else 0)


def _concat(walk: _Walk, node: onnx.NodeProto) -> _Vector | None:
    parts = [walk.vector(name) for name in node.input]
    if any(part is None or part.scalar for part in parts) or _attribute(node, "axis", 0) not in (
        0,
        -1,
    ):
        return None
    return _Vector(tuple(element for part in parts for element in part.elements))


def _unsqueeze(walk: _Walk, node: onnx.NodeProto) -> _Vector | tuple[Dim | None, ...] | None:
    data = walk.vector(node.input[0])
    axes = walk.integers(node.input[1]) if len(node.input) > 1 else _attribute(node, "axes", None)
    if axes is None:
        count = _run_time_length(walk, node, 1)
        dims = walk.dims_of(node.input[0])
        return None if count is None or dims is None else (None,) * (len(dims) + count)
    if data is None or not data.scalar or list(axes) not in ([0], [-1]):
        return None
    return _Vector(data.elements)


def _squeeze(walk: _Walk, node: onnx.NodeProto) -> _Vector | tuple[Dim | None, ...] | None:
    data = walk.vector(node.input[0])
    axes = (
        walk.integers(node.input[1])
        if len(node.input) > 1 and node.input[1]
        else _attribute(node, "axes", [0])
    )
    if axes is None:
        count = _run_time_length(walk, node, 1)
        dims = walk.dims_of(node.input[0])
        if count is None or dims is None or count > len(dims):
            return None
        return (None,) * (len(dims) - count)
    if data is None or data.scalar or len(data.elements) != 1 or list(axes) not in ([0], [-1]):
        return None
    return _Vector(data.elements, scalar=True)


def _run_time_length(walk: _Walk, node: onnx.NodeProto, position: int) -> int | None:
    """The static length of input `position`, a 1-D value known only at run time (the axes
    of a Reduce, Squeeze or Unsqueeze fed as a graph input); None when absent or dynamic."""
    if (
        len(node.input) <= position
        or not node.input[position]
        or walk.integers(node.input[position]) is not None
    ):
        return None
    data = walk.dims_of(node.input[0])
    if data is None or all(dim.constant is not None for dim in data):
        return None  # static data: the declared or backward-refined result type stands
    dims = walk.dims_of(node.input[position])
    if dims is None or len(dims) != 1:
        return None
    return dims[0].constant


def _split(walk: _Walk, node: onnx.NodeProto) -> None:
    """The outputs of a Split by run-time sizes, which ONNX leaves unranked: the input's dims
    but the split axis, which is unknown."""
    dims = walk.dims_of(node.input[0])
    if _run_time_length(walk, node, 1) is None or not dims:
        return None
    axis = _attribute(node, "axis", 0)
    if not -len(dims) <= axis < len(dims):
        return None
    split = list(dims)
    split[axis % len(dims)] = None
    for output in node.output:
        if output:
            walk.set_dims(output, tuple(split))
    return None


def _reduce(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim | None, ...] | None:
    """The rank of a reduction over run-time axes of static length k, which ONNX leaves
    unranked: the input's rank with keepdims (a dim is 1 where the input's is, else unknown),
    k fewer without; k = 0 reduces everything, or nothing with `noop_with_empty_axes`. Valid
    axes are distinct (the lowering checks it at run time)."""
    count = _run_time_length(walk, node, 1)
    dims = walk.dims_of(node.input[0])
    if count is None or dims is None or count > len(dims):
        return None
    keepdims = _attribute(node, "keepdims", 1)
    if count == 0:
        if _attribute(node, "noop_with_empty_axes", 0):
            return dims
        return (_ONE,) * len(dims) if keepdims else ()
    if keepdims:
        return tuple(_ONE if dim == _ONE else None for dim in dims)
    return (None,) * (len(dims) - count)


def _constant(walk: _Walk, node: onnx.NodeProto) -> None:
    value = constant_value(node)
    if value is not None:
        walk.known.set(node.output[0], value)


def _identity(walk: _Walk, node: onnx.NodeProto) -> _Vector | None:
    if node.op_type == "Cast" and _attribute(node, "to", None) not in _INTEGER_CASTS:
        return None
    if node.op_type == "CastLike":  # to the element type of input #1
        target = walk.types.get(node.input[1]) if len(node.input) == 2 else None
        if target is None or target.tensor_type.elem_type not in _INTEGER_CASTS:
            return None
    return walk.vector(node.input[0])


def _multiply(left: Dim, right: Dim) -> Dim | None:
    return left * right


def _divide(left: Dim, right: Dim) -> Dim | None:
    if left.constant is not None and right.constant is not None:
        return (
            Dim(left.constant // right.constant)
            if left.constant >= 0 and right.constant > 0
            else None
        )
    return left.exact_quotient(right)


def _add(left: Dim, right: Dim) -> Dim | None:
    if left.constant is not None and right.constant is not None:
        return Dim(left.constant + right.constant)
    return None


def _subtract(left: Dim, right: Dim) -> Dim | None:
    if left.constant is not None and right.constant is not None:
        return Dim(left.constant - right.constant)
    return Dim(0) if left == right else None


def _equal(left: Dim, right: Dim) -> Dim | None:
    """1 or 0 (true or false) when known: a product of dims (positive coefficient) is never
    negative, so it never equals the -1 of PyTorch's `expand(b, -1, -1)`."""
    if left == right:
        return Dim(1)
    if left.constant is not None and right.constant is not None:
        return Dim(0)
    for dims, other in ((left, right), (right, left)):
        if (
            dims.symbols
            and dims.coefficient > 0
            and other.constant is not None
            and other.constant < 0
        ):
            return Dim(0)
    return None


_ARITHMETIC = {"Mul": _multiply, "Div": _divide, "Add": _add, "Sub": _subtract, "Equal": _equal}


def _arithmetic(walk: _Walk, node: onnx.NodeProto) -> _Vector | tuple[Dim | None, ...] | None:
    if len(node.input) != 2:
        return None
    left, right = walk.vector(node.input[0]), walk.vector(node.input[1])
    if left is None or right is None:
        return _elementwise(walk, node)
    count = max(len(left.elements), len(right.elements))
    if {len(left.elements), len(right.elements)} - {1, count}:
        return None
    operation = _ARITHMETIC[node.op_type]
    elements = []
    for position in range(count):
        a = left.elements[position if len(left.elements) > 1 else 0]
        b = right.elements[position if len(right.elements) > 1 else 0]
        elements.append(None if a is None or b is None else operation(a, b))
    return _Vector(tuple(elements), scalar=left.scalar and right.scalar)


def _where(walk: _Walk, node: onnx.NodeProto) -> _Vector | tuple[Dim | None, ...] | None:
    """`Where(cond, a, b)` element by element, where every condition is known (else the
    broadcast dims of a tensor's `Where`)."""
    if len(node.input) != 3:
        return None
    condition, left, right = (walk.vector(name) for name in node.input)
    if condition is None or left is None or right is None:
        return _elementwise(walk, node)
    count = max(len(condition.elements), len(left.elements), len(right.elements))
    if {len(condition.elements), len(left.elements), len(right.elements)} - {1, count}:
        return None
    elements: list[Dim | None] = []
    for position in range(count):
        chosen = condition.elements[position if len(condition.elements) > 1 else 0]
        if chosen is None or chosen.constant is None:
            elements.append(None)  # either side: unknown
            continue
        source = left if chosen.constant else right
        elements.append(source.elements[position if len(source.elements) > 1 else 0])
    return _Vector(tuple(elements), scalar=condition.scalar and left.scalar and right.scalar)


# -- outputs shaped by a vector ------------------------------------------------------------------


def _reshape(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim | None, ...] | _Vector | None:
    target = walk.vector(node.input[1]) if len(node.input) > 1 else None
    data = walk.dims_of(node.input[0])
    if target is None or target.scalar or data is None:
        return None
    vector = walk.vector(node.input[0])
    if (
        vector is not None
        and len(target.elements) == 1
        and target.elements[0] in (Dim(-1), Dim(len(vector.elements)))
    ):
        return _Vector(vector.elements)  # a vector of dims flattened (as PyTorch's expand does)
    allow_zero = _attribute(node, "allowzero", 0)
    dims: list[Dim | None] = []
    inferred = None
    for axis, element in enumerate(target.elements):
        if element is not None and element.constant == 0 and not allow_zero:
            element = data[axis] if axis < len(data) else None
        if element is not None and element.constant == -1:
            if inferred is not None:
                return None
            inferred = axis
        elif element is not None and element.constant is not None and element.constant < 0:
            return None
        dims.append(element)
    if inferred is not None:
        others = [dim for axis, dim in enumerate(dims) if axis != inferred]
        dims[inferred] = None if None in others else _product(data).exact_quotient(_product(others))
    return tuple(dims)


def _expand(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim | None, ...] | None:
    target = walk.vector(node.input[1]) if len(node.input) > 1 else None
    data = walk.dims_of(node.input[0])
    if target is None or target.scalar or data is None:
        return None
    rank = max(len(data), len(target.elements))
    data_dims = (_ONE,) * (rank - len(data)) + data
    target_dims = (_ONE,) * (rank - len(target.elements)) + target.elements
    return tuple(_broadcast(a, b) for a, b in zip(data_dims, target_dims, strict=True))


def _broadcast(a: Dim | None, b: Dim | None) -> Dim | None:
    """One dim of a broadcast (ONNX's multidirectional rule): equal dims stay; a 1 takes the
    other; a constant other than 1 facing a symbol is the result (the symbol must be 1 or that
    constant at run time); two different symbols: unknown (either may be 1)."""
    if a is None or b is None:
        return None
    if b == _ONE or a == b:
        return a
    if a == _ONE:
        return b
    if b.constant is not None and a.constant is None:
        return b
    if a.constant is not None and b.constant is None:
        return a
    return None


def _elementwise(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim | None, ...] | None:
    """The broadcast dims of an element-wise op's tensors (ONNX names a broadcast of two
    differently named dims afresh: `seq` + `unk__0` is `unk__1`, though both are `seq`)."""
    shapes = [walk.dims_of(name) for name in node.input if name]
    if not shapes or any(dims is None for dims in shapes):
        return None
    rank = max(len(dims) for dims in shapes)
    result: list[Dim | None] = [_ONE] * rank
    for dims in shapes:
        padded = (_ONE,) * (rank - len(dims)) + dims
        result = [_broadcast(a, b) for a, b in zip(result, padded, strict=True)]
    return tuple(result)


def _constant_of_shape(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim | None, ...] | None:
    target = walk.vector(node.input[0]) if node.input else None
    return None if target is None or target.scalar else target.elements


def _stft(walk: _Walk, node: onnx.NodeProto) -> tuple[Dim | None, ...] | None:
    """STFT's result [batch, frames, bins, 2], which ONNX leaves untyped when the signal length
    is dynamic: batch is the signal's, bins `n // 2 + 1` (onesided) or `n` for the frame length
    n (the `frame_length` input, else the window's length), frames `(length - n) // step + 1`
    when the length and the step are constants (else a fresh unknown dim).

    A rank-2 signal [batch, length] is taken as real, as onnxruntime takes it (the spec asks
    for [batch, length, 1]; onnx.reference refuses it)."""
    signal = walk.dims_of(node.input[0])
    if signal is None or len(signal) not in (2, 3):
        return None
    inputs = list(node.input) + [""] * 3
    step = walk.integers(inputs[1]) if inputs[1] else None
    n = None
    if inputs[3]:
        lengths = walk.integers(inputs[3])
        n = lengths[0] if lengths is not None and len(lengths) == 1 else None
    elif inputs[2]:
        window = walk.dims_of(inputs[2])
        n = window[0].constant if window is not None and len(window) == 1 else None
    bins = None if n is None else Dim(n // 2 + 1 if _attribute(node, "onesided", 1) else n)
    length = signal[1].constant
    frames = None
    if (
        n is not None
        and length is not None
        and step is not None
        and len(step) == 1
        and step[0] > 0
        and length >= n
    ):
        frames = Dim((length - n) // step[0] + 1)
    return (signal[0], frames, bins, Dim(2))


_HANDLERS = {
    "Constant": _constant,
    "Shape": _shape_of,
    "Size": _size_of,
    "Gather": _gather,
    "Slice": _slice,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Identity": _identity,
    "Cast": _identity,
    "CastLike": _identity,
    "Mul": _arithmetic,
    "Div": _arithmetic,
    "Add": _arithmetic,
    "Sub": _arithmetic,
    "Equal": _arithmetic,
    "Where": _where,
    "Pow": _elementwise,
    "Less": _elementwise,
    "LessOrEqual": _elementwise,
    "Greater": _elementwise,
    "GreaterOrEqual": _elementwise,
    "And": _elementwise,
    "Or": _elementwise,
    "Max": _elementwise,
    "Min": _elementwise,
    "Range": _range,
    "Reshape": _reshape,
    "Expand": _expand,
    "ConstantOfShape": _constant_of_shape,
    "STFT": _stft,
    "Split": _split,
    **dict.fromkeys(
        (
            "ReduceSum",
            "ReduceSumSquare",
            "ReduceMean",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
        ),
        _reduce,
    ),  # fmt: skip
}


@dataclass
class SymbolicDims:
    """What the symbolic walk of one graph found."""

    refined: dict[str, onnx.TypeProto] = field(default_factory=dict)
    """Value types with dims ONNX inference left unknown made static."""
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    """Integer values computed from dims that are all static (`x.shape[1]` of an [N, 7] value),
    by value name: `folding` turns their nodes into constants."""
    refined_in_subgraphs: list[tuple[onnx.GraphProto, dict[str, onnx.TypeProto]]] = field(
        default_factory=list
    )
    """As `refined`, for the values of subgraphs (Loop bodies, If branches), with their graph."""


def analyse(graph: onnx.GraphProto, types, opset: int) -> SymbolicDims:
    """The symbolic dims of `graph`'s values and its subgraphs', given ONNX inference's `types`
    (an `inference.GraphTypes`: the graph's value types and its subgraphs') and the model's
    default-domain `opset`."""
    for node in graph.node:  # NOTE: most graphs have neither: ~1 us a node to learn it
        op_type = node.op_type
        if op_type in _SYMBOL_SOURCES or (
            op_type in _DIMS_COMPUTED_HERE
            and node.output
            and not _is_static(types.values.get(node.output[0]))
        ):
            break
    else:
        return SymbolicDims()
    walk = _walk_graph(graph, types, None, opset=opset)
    refined_in = []
    pending = list(walk.subgraphs)
    while pending:
        inner = pending.pop()
        pending.extend(inner.subgraphs)
        if inner.refined:
            refined_in.append((inner.graph, inner.refined))
    return SymbolicDims(walk.refined, walk.constants, refined_in)


def _walk_graph(
    graph: onnx.GraphProto,
    types,
    parent: _Walk | None,
    seeds: Mapping[str, tuple[Dim, ...]] | None = None,
    opset: int | None = None,
) -> _Walk:
    """The walk of `graph` (`seeds`: dims of its inputs known whatever their types say; `opset`:
    the default domain's, else the parent walk's)."""
    walk = _Walk(graph, types.values, parent, opset)
    walk.dims.update(seeds or {})
    for index, node in enumerate(graph.node):
        walk.visit(node, index, types)
    return walk


_SYMBOL_SOURCES = frozenset({"Shape", "Size", "Loop"})
"""Ops that make the walk worth its cost: dims as data, and Loops (whose bodies count with a
carried counter: `offsets[i:i+1]`)."""
_DIMS_COMPUTED_HERE = frozenset(
    {"Reshape", "Expand", "ConstantOfShape", "Slice", "STFT", "Squeeze", "Unsqueeze", "Split"}
    | {name for name, handler in _HANDLERS.items() if handler is _reduce}
)
"""Ops whose result dims the walk computes where ONNX inference leaves them unknown."""


def _is_static(type_: onnx.TypeProto | None) -> bool:
    shape = _shape(type_)
    return shape is not None and all(dim.HasField("dim_value") for dim in shape.dim)
