"""Where an fp16/bf16 model is computed in f32 and where it is rounded: onnxruntime's CPU plan.

ONNX gives every op of an fp16 graph an fp16 result, but the runtime users compare against does
not round there. onnxruntime's CPU execution provider has fp16 kernels for only a few ops (data
movement, LayerNormalization, Clip/Max/Min...); every other node with an fp16 input runs its f32
kernel between inserted Casts (`InsertCastTransformer`), a Cast pair between two such nodes is
removed (`RemoveDuplicateCastTransformer`), and an fp16-capable node whose neighbours all run in
f32 is run in f32 too ("isolated" nodes). So a LeNet exported in fp16 is computed in f32 from
its input to its output, and a transformer block is rounded to fp16 only around its
LayerNormalizations and its reshape/split/transpose chains. Rounding per op instead differs by
tens of ulps on outputs that cancel.

`plan_half_precision` rewrites the model's graphs (onnx_ir, in place) the same way, from their
inferred types: a node that onnxruntime would run in f32 reads f32 values (a Cast from the fp16/bf16 value, or its f32
producer's result directly) and yields f32; a Cast back to fp16/bf16 is written only where a
node that keeps its half type, a graph output or a subgraph reads the value. A user's Cast to
f32 of such a value reads the f32 value (onnxruntime removes that Cast pair too), and an f32
node reading a user's Cast of an f32 value to fp16 reads the f32 value. onnxruntime's
MatMul+Add fusion (level basic, the default runs it) reads a rank-3 MatMul input through an fp16
Reshape, which keeps that input's fp16 producer from being isolated: modelled in
`_fused_reshape_reader`. An f32 node's half result keeps its value, renamed and held in f32
(its readers in f32 read it as it is); the Cast back makes a new value with the half name.
The plan changes no shape, so it gives the values it makes their types itself
(`half_plan_types`) where inference would learn nothing more. Every op is then
lowered as before: with no half operand it computes in f32; LayerNormalization and the
data-movement ops keep fp16 and round once.

Subgraph bodies (If branches, Loop and Scan bodies) are planned the same way, each on its own:
onnxruntime partitions and casts every subgraph separately, so a body reads its half inputs and
the outer values it uses through Casts of its own, and rounds its half outputs (a Loop's carried
values each iteration). The control-flow node itself has a kernel for both types and keeps them.

onnxruntime folds a BatchNormalization, or a Mul or Add by a per-channel constant, into a
Conv's fp16 weights before any Cast (`half_conv_folds`, run before the plan). The fusions it
runs after the Casts (Gelu, MatMul+Transpose and MatMul+scale into
FusedMatMul, Conv and Gemm with their activation, NCHWc Convs) match f32 nodes and compute in
f32 from the same f32 values: they change f32 arithmetic by an ulp at most, no fp16 rounding
point. SkipLayerNorm and the Attention fusions do not match torch's fp16 exports (a Cast sits
between the f32 Add and the fp16 LayerNormalization).

bf16: onnxruntime's Cast insertion handles fp16 only, and its CPU provider has no bf16 Conv,
MatMul or Gemm. The same rule is applied with its bf16 kernels (`BF16_KERNELS`), so a bf16
model is computed as its fp16 twin would be.

The kernel tables are onnxruntime 1.32's CPU registrations (ai.onnx and com.microsoft domains;
tests/frontends/onnx/test_half_precision.py checks them against the installed onnxruntime).
A model with no fp16/bf16 value is left alone (None): f32 models are never changed.
Calls of model-local functions keep per-op rounding (onnxruntime inlines them first; not
modelled).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import onnx
import onnx_ir
from onnx import TensorProto

from .graph_walks import node_bodies, value_names
from .half_plan_types import PlannedGraph, initializer_dims, planned_types, values_read_by_bodies
from .value_types import ValueTypes

__all__ = [
    "BF16_KERNELS",
    "F16_KERNELS",
    "HALF_TYPES",
    "HalfPlan",
    "fresh_name",
    "plan_half_precision",
]

HALF_TYPES = frozenset({TensorProto.FLOAT16, TensorProto.BFLOAT16})

_Ranges = tuple[tuple[int, int | None], ...]
_ALWAYS: _Ranges = ((1, None),)

_SHARED: dict[tuple[str, str], _Ranges] = {
    **{
        ("", op): _ALWAYS
        for op in (
            "DynamicSlice", "Flatten", "Gather", "Identity", "If", "LayerNormalization", "Loop",
            "MemcpyFromHost", "MemcpyToHost", "RandomNormalLike", "RandomUniformLike", "Reshape",
            "Shape", "SimplifiedLayerNormalization", "Slice", "Squeeze", "Transpose", "Unsqueeze",
        )
    },
    ("", "BitCast"): ((26, None),), ("", "Cast"): ((6, None),), ("", "Celu"): ((28, None),),
    ("", "Compress"): ((9, None),), ("", "Concat"): ((4, None),), ("", "ConstantOfShape"): ((9, None),),
    ("", "GatherElements"): ((11, None),), ("", "GatherND"): ((11, None),), ("", "IsInf"): ((20, None),),
    ("", "Optional"): ((15, None),), ("", "OptionalGetElement"): ((15, None),),
    ("", "OptionalHasElement"): ((18, None),), ("", "ReverseSequence"): ((10, None),),
    ("", "Scan"): ((8, None),), ("", "Scatter"): ((9, 10),), ("", "ScatterElements"): ((11, None),),
    ("", "ScatterND"): ((11, None),), ("", "SequenceAt"): ((11, None),),
    ("", "SequenceConstruct"): ((11, None),), ("", "Shrink"): ((9, None),), ("", "Sign"): ((9, None),),
    ("", "Split"): ((2, None),), ("", "TensorScatter"): ((24, None),),
    **{
        ("com.microsoft", op): _ALWAYS
        for op in (
            "BranchwiseRMSNorm", "ExpandDims", "GatedDeltaNet", "GatedRMSNorm", "GatherND",
            "GatherPacked", "HyperConnectionPostMix", "HyperConnectionPreMix", "LinearAttentionGate",
            "MoEGroupRouter", "QMoE", "ScaledSiLU", "SkipLayerNormalization",
            "SkipSimplifiedLayerNormalization", "UnfoldTensor", "VarlenCausalConvWithState",
        )
    },
}  # fmt: skip
"""The kernels onnxruntime's CPU provider has for both fp16 and bf16 (mostly data movement)."""

F16_KERNELS: Mapping[tuple[str, str], _Ranges] = {
    **_SHARED,
    ("", "Attention"): ((23, None),), ("", "Clip"): ((12, None),), ("", "DequantizeLinear"): ((19, None),),
    ("", "Dropout"): ((7, 11),), ("", "Expand"): ((8, None),), ("", "IsNaN"): ((9, None),),
    ("", "Max"): ((12, None),), ("", "Min"): ((12, None),), ("", "Mod"): ((10, None),),
    ("", "QuantizeLinear"): ((19, None),), ("", "RMSNormalization"): ((23, None),),
    ("", "RotaryEmbedding"): ((23, None),), ("", "Round"): ((11, None),),
    ("", "SplitToSequence"): ((11, None),),
    **{
        ("com.microsoft", op): _ALWAYS
        for op in (
            "EngramGate", "GatedAdd", "GatherBlockQuantized", "GroupQueryAttention", "Inverse",
            "MRotaryEmbedding", "MatMulNBits", "RotaryEmbedding", "SparseAttention",
        )
    },
}  # fmt: skip
"""(domain, op type) -> the opset ranges (last None: open) onnxruntime's CPU provider has an
fp16 kernel for."""

BF16_KERNELS: Mapping[tuple[str, str], _Ranges] = {
    **_SHARED,
    ("", "Einsum"): ((28, None),), ("", "IsNaN"): ((20, None),), ("", "OneHot"): ((28, None),),
    ("", "Pad"): ((21, None),), ("", "Unique"): ((28, None),),
}  # fmt: skip
"""(domain, op type) -> the opset ranges onnxruntime's CPU provider has a bf16 kernel for."""

_KERNELS: Mapping[int, Mapping[tuple[str, str], _Ranges]] = {
    TensorProto.FLOAT16: F16_KERNELS,
    TensorProto.BFLOAT16: BF16_KERNELS,
}
_DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})
_KNOWN_DOMAINS = _DEFAULT_DOMAINS | {"com.microsoft"}
_CAST_LIKE = frozenset({"Cast", "CastLike"})
"""CastLike has no kernel; onnxruntime inlines its body, a Cast, which has one."""


@dataclass(frozen=True)
class HalfPlan:
    """What `plan_half_precision` did to a model (rewritten in place)."""

    types: ValueTypes | None
    """The planned model's types, derived from those it was planned on (`half_plan_types`);
    None where the planned model must be inferred again."""


def plan_half_precision(
    model: onnx_ir.Model, types: ValueTypes, split_raw: Mapping[str, memoryview] | None = None
) -> HalfPlan | None:
    """Rewrite `model` in place so that its graphs compute in f32 where onnxruntime's CPU
    provider does (module docstring); None (nothing changed) when no graph has an fp16/bf16
    value or anything to change. `types` are the model's inferred types, `split_raw` its main
    graph's split-out raw_data (`inference.strip_weights`)."""
    if not _sees_half(model.graph, types):
        return None
    opsets = {
        ("" if domain in _DEFAULT_DOMAINS else domain): version
        for domain, version in model.opset_imports.items()
    }
    plan = _Plan(model.graph, types, opsets, _Scope({}, {}, frozenset()))
    if not plan.changes():
        return None
    planned = plan.rewrite(value_names(model.graph))
    return HalfPlan(planned_types(model, planned, types, split_raw))


def _sees_half(graph: onnx_ir.Graph, types: ValueTypes) -> bool:
    """Whether any graph's plan would see an fp16/bf16 value. A plan's half values (`_Plan.half`)
    are its typed values, initializers and inputs of those types, and it moves a node to f32
    only for one of them, so a model with none has nothing to plan.

    NOTE: one pass over element types (~20 ms for 20,000 f32 nodes) instead of the plans'
    per-node bookkeeping (~350 ms)."""
    for current in (graph, *graph.subgraphs()):
        for value in current.initializers.values():
            if value.const_value is not None and int(value.const_value.dtype) in HALF_TYPES:
                return True
        if any(_element(value.type) in HALF_TYPES for value in current.inputs):
            return True
        table = types.of_graph(current)
        if any(type_.tensor_type.elem_type in HALF_TYPES for type_ in table.values()):
            return True
    return False


def _element(type_: onnx_ir.TypeProtocol | None) -> int | None:
    """A declared tensor type's element type (ONNX's number), None for another type."""
    if not isinstance(type_, onnx_ir.TensorType):
        return None
    return int(type_.dtype)


@dataclass(frozen=True)
class _Scope:
    """What a graph sees of the graphs around it: the element types and dims of outer values,
    and which of them are constants (initializers, Constant nodes)."""

    elements: Mapping[onnx_ir.Value, int]
    dims: Mapping[onnx_ir.Value, list[int | None] | None]
    constants: frozenset[onnx_ir.Value]


class _Plan:
    """The per-node decision (`in_f32`) and the rewrite of one graph (the main graph or a
    body, which sees the values of the graphs around it through `scope`), and the plans of its
    bodies, made before anything is rewritten."""

    def __init__(
        self,
        graph: onnx_ir.Graph,
        types: ValueTypes,
        opsets: Mapping[str, int],
        scope: _Scope,
    ) -> None:
        self.graph = graph
        self.nodes = list(graph)
        self.index_of = {node: index for index, node in enumerate(self.nodes)}
        self.opsets = opsets
        table = types.of_graph(graph)
        self.elements = {**scope.elements, **self._element_types(graph, table)}
        self.dims = {**scope.dims}
        self.dims.update({value: _dims(type_) for value, type_ in table.items()})
        self.dims.update({value: initializer_dims(value) for value in graph.initializers.values()})
        self.half = {value for value, element in self.elements.items() if element in HALF_TYPES}
        self.constants = set(scope.constants) | set(graph.initializers.values())
        self.producer: dict[onnx_ir.Value, int] = {}
        self.consumers: dict[onnx_ir.Value, list[int]] = {}
        for index, node in enumerate(self.nodes):
            if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS:
                self.constants.update(node.outputs)  # onnxruntime makes them initializers
            for output in node.outputs:
                self.producer[output] = index
            for operand in node.inputs:
                if operand is not None:
                    self.consumers.setdefault(operand, []).append(index)
        self.graph_outputs = set(graph.outputs)
        self.read_by_subgraphs = values_read_by_bodies(graph)
        self.no_kernel = [self._lacks_kernel(node) for node in self.nodes]
        self.in_f32 = list(self.no_kernel)
        for index in range(len(self.nodes)):
            if not self.in_f32[index] and self._isolated(index):
                self.in_f32[index] = True
        inner = _Scope(self.elements, self.dims, frozenset(self.constants))
        self.bodies = {
            body: _Plan(body, types, opsets, inner)
            for node in self.nodes
            for _, _, body in node_bodies(node)
        }

    def changes(self) -> bool:
        """Whether the rewrite changes this graph or any body in it."""
        return any(self.in_f32) or any(body.changes() for body in self.bodies.values())

    @staticmethod
    def _element_types(
        graph: onnx_ir.Graph, table: Mapping[onnx_ir.Value, onnx.TypeProto]
    ) -> dict[onnx_ir.Value, int]:
        elements = {
            value: type_.tensor_type.elem_type
            for value, type_ in table.items()
            if type_.HasField("tensor_type")
        }
        for value in graph.initializers.values():
            if value.const_value is not None:
                elements.setdefault(value, int(value.const_value.dtype))
        for value in graph.inputs:
            element = _element(value.type)
            if element is not None:
                elements.setdefault(value, element)
        return elements

    def _half_inputs(self, node: onnx_ir.Node) -> list[onnx_ir.Value]:
        return [value for value in node.inputs if value is not None and value in self.half]

    def _lacks_kernel(self, node: onnx_ir.Node) -> bool:
        """onnxruntime runs `node` in f32 whatever its neighbours: it reads an fp16/bf16 value
        and has no CPU kernel for that type at the model's opset."""
        domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
        if domain not in _KNOWN_DOMAINS or node_bodies(node):
            return False  # model-local functions, other runtimes' ops, control flow: kept
        if domain == "" and node.op_type in _CAST_LIKE:
            return False
        version = self.opsets.get(domain, 1)
        for element in {self.elements[value] for value in self._half_inputs(node)}:
            ranges = _KERNELS[element].get((domain, node.op_type), ())
            if not any(
                first <= version and (last is None or version <= last) for first, last in ranges
            ):
                return True
        return False

    def _isolated(self, index: int) -> bool:
        """onnxruntime's isolated-node rule: a node with a half kernel still runs in f32 when its
        half inputs all come from f32 nodes or initializers and all readers of its half results
        run in f32 (decided in node order, as onnxruntime does)."""
        node = self.nodes[index]
        if node_bodies(node) or any(value in self.graph_outputs for value in node.outputs):
            return False
        if not any(value in self.producer for value in node.inputs if value is not None):
            return False
        inputs = self._half_inputs(node)
        if not inputs or node.op_type in _CAST_LIKE:
            return False
        for value in inputs:
            if value in self.constants:
                continue
            if value not in self.producer or not self.in_f32[self.producer[value]]:
                return False
        readers = [
            (value, reader)
            for value in node.outputs
            if value in self.half
            for reader in self.consumers.get(value, ())
        ]
        if not readers or any(value in self.read_by_subgraphs for value in node.outputs):
            return False
        return all(
            self.no_kernel[reader] and not self._fused_reshape_reader(reader, value)
            for value, reader in readers
        )

    def _fused_reshape_reader(self, index: int, value: onnx_ir.Value) -> bool:
        """Whether onnxruntime's MatMul+Add fusion turns MatMul `index` into Reshape -> Gemm ->
        Reshape, so that `value`, its first input, is read by an fp16 Reshape: a MatMul whose
        only reader is an Add of a 1-D bias, with a static first input of rank other than 2
        and a static rank-2 second input."""
        node = self.nodes[index]
        if (
            node.op_type != "MatMul"
            or node.domain not in _DEFAULT_DOMAINS
            or node.inputs[0] is not value
        ):
            return False
        result = node.outputs[0]
        readers = self.consumers.get(result, [])
        if len(readers) != 1 or result in self.graph_outputs:
            return False
        add = self.nodes[readers[0]]
        if add.op_type != "Add" or add.domain not in _DEFAULT_DOMAINS:
            return False
        a, b = (
            _static(self.dims.get(operand)) if operand is not None else None
            for operand in node.inputs[:2]
        )
        bias = [operand for operand in add.inputs if operand is not result]
        if (
            a is None
            or b is None
            or len(a) == 2
            or len(b) != 2
            or len(bias) != 1
            or bias[0] is None
        ):
            return False
        if self.elements.get(bias[0]) != self.elements.get(result):
            return False
        bias_dims = self.dims.get(bias[0])
        return bias_dims is not None and len(bias_dims) == 1 and bias_dims[0] == b[1]

    # -- the rewrite -----------------------------------------------------------------------------

    def rewrite(self, taken: set[str]) -> PlannedGraph:
        """Rewrite the graph in place, its bodies first (each by its own plan): Casts to f32
        before the nodes that read them, f32 nodes with their half results renamed and held in
        f32, Casts back where a half reader needs them. `taken`: every name in the model, grown
        by the names the rewrite makes. What ties the result to the graph planned is returned
        for `half_plan_types`."""
        bodies = {body: plan.rewrite(taken) for body, plan in self.bodies.items() if plan.changes()}
        planned = PlannedGraph(
            graph=self.graph,
            before=list(self.nodes),
            op_types=[node.op_type for node in self.nodes],
            input_names=[
                tuple(value.name or "" if value is not None else "" for value in node.inputs)
                for node in self.nodes
            ],
            in_f32=self.in_f32,
            bodies=bodies,
        )
        wide: dict[onnx_ir.Value, onnx_ir.Value] = {}
        """value read -> the f32 value holding it, once there is one."""

        def widen(source: onnx_ir.Value, node: onnx_ir.Node) -> onnx_ir.Value:
            name = source.name or ""
            result = onnx_ir.Value(name=fresh_name(name, "f32", taken))
            cast = _cast(source, result, TensorProto.FLOAT, node.name or "")
            self.graph.insert_before(node, cast)
            planned.made[cast] = None
            planned.widened[result] = (source, name)
            wide[source] = result
            return result

        for index, node in enumerate(self.nodes):
            if not self.in_f32[index]:
                self._kept(node, wide, planned)
                continue
            for position, value in enumerate(node.inputs):
                if value is not None and value in self.half:
                    held = wide.get(value)
                    node.replace_input_with(position, widen(value, node) if held is None else held)
            narrowed = []
            for value in node.outputs:
                if value not in self.half:
                    continue
                half_name = value.name or ""
                planned.widened[value] = (value, half_name)
                wide[value] = value
                half_type, half_shape = value.type, value.shape
                value.name = fresh_name(half_name, "f32", taken)
                value.type, value.shape = None, None
                if self._needs_half(value):
                    half = onnx_ir.Value(name=half_name, type=half_type, shape=half_shape)
                    self._read_in_half(value, half)
                    narrowed.append(_cast(value, half, self.elements[value], node.name or ""))
                    planned.narrowed[half] = value
                    wide[half] = value
            dtype = node.attributes.get("dtype")
            if (
                dtype is not None
                and dtype.type is onnx_ir.AttributeType.INT
                and dtype.value in HALF_TYPES
            ):
                node.attributes["dtype"] = onnx_ir.AttrInt64("dtype", TensorProto.FLOAT)
            if narrowed:
                self.graph.insert_after(node, narrowed)
                for cast in narrowed:
                    planned.made[cast] = None
        return planned

    def _read_in_half(self, value: onnx_ir.Value, half: onnx_ir.Value) -> None:
        """Make `half` (a Cast back of `value`, an f32 node's result held in f32) what the
        readers of the half value read: nodes that keep their types (but not a user's Cast to
        f32, `_reads_wide`), bodies, the graph's outputs."""
        for reader, position in list(value.uses()):
            if reader.graph is self.graph:
                index = self.index_of[reader]
                if self.in_f32[index] or self._reads_wide(index):
                    continue
            reader.replace_input_with(position, half)
        outputs = self.graph.outputs
        for position, output in enumerate(outputs):
            if output is value:
                outputs[position] = half

    def _kept(
        self, node: onnx_ir.Node, wide: dict[onnx_ir.Value, onnx_ir.Value], planned: PlannedGraph
    ) -> None:
        """A node that keeps its types; the two Cast pairs onnxruntime removes become direct
        reads of the f32 value."""
        if node.op_type != "Cast" or node.domain not in _DEFAULT_DOMAINS or len(node.inputs) != 1:
            return
        to = node.attributes.get("to")
        to_type = to.value if to is not None else None
        source, result = node.inputs[0], node.outputs[0]
        if source is None:
            return
        if to_type == TensorProto.FLOAT and source in wide and result not in self.graph_outputs:
            node.op_type = "Identity"
            node.domain = ""
            node.attributes.clear()
            node.replace_input_with(0, wide[source])
            return
        if to_type in HALF_TYPES and self.elements.get(source) == TensorProto.FLOAT:
            wide[result] = source

    def _needs_half(self, value: onnx_ir.Value) -> bool:
        """Whether something reads the half value of `value` (an f32 node's result)."""
        if value in self.graph_outputs or value in self.read_by_subgraphs:
            return True
        return any(
            not self.in_f32[reader] and not self._reads_wide(reader)
            for reader in self.consumers.get(value, ())
        )

    def _reads_wide(self, index: int) -> bool:
        """A user's Cast to f32 that `_kept` turns into a read of the f32 value."""
        node = self.nodes[index]
        if node.op_type != "Cast" or node.domain not in _DEFAULT_DOMAINS:
            return False
        to = node.attributes.get("to")
        return (
            node.outputs[0] not in self.graph_outputs
            and to is not None
            and to.value == TensorProto.FLOAT
        )


def _cast(source: onnx_ir.Value, result: onnx_ir.Value, to: int, at: str) -> onnx_ir.Node:
    name = result.name or ""
    return onnx_ir.Node(
        "",
        "Cast",
        [source],
        [onnx_ir.AttrInt64("to", to)],
        outputs=[result],
        name=f"{at}/{name}" if at else name,
    )


def fresh_name(name: str, suffix: str, taken: set[str]) -> str:
    """`name` + `suffix` (numbered if needed), a name not in `taken`, which now holds it."""
    candidate, number = f"{name}_{suffix}", 0
    while candidate in taken:
        number += 1
        candidate = f"{name}_{suffix}_{number}"
    taken.add(candidate)
    return candidate


def _dims(type_: onnx.TypeProto | None) -> list[int | None] | None:
    if (
        type_ is None
        or not type_.HasField("tensor_type")
        or not type_.tensor_type.HasField("shape")
    ):
        return None
    return [
        dim.dim_value if dim.HasField("dim_value") else None for dim in type_.tensor_type.shape.dim
    ]


def _static(dims: list[int | None] | None) -> list[int | None] | None:
    return None if dims is None or None in dims else dims
