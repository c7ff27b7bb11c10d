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

`plan_half_precision` rewrites the model's graphs the same way, from their inferred types: a node that
onnxruntime would run in f32 reads f32 values (a Cast from the fp16/bf16 value, or its f32
producer's result directly) and yields f32; a Cast back to fp16/bf16 is written only where a
node that keeps its half type, a graph output or a subgraph reads the value. A user's Cast to
f32 of such a value reads the f32 value (onnxruntime removes that Cast pair too), and an f32
node reading a user's Cast of an f32 value to fp16 reads the f32 value. onnxruntime's
MatMul+Add fusion (level basic, the default runs it) reads a rank-3 MatMul input through an fp16
Reshape, which keeps that input's fp16 producer from being isolated: modelled in
`_fused_reshape_reader`. The plan changes no shape, so it gives the values it makes their
types itself (`half_plan_types`) where inference would learn nothing more. Every op is then
lowered as before: with no half operand it computes in f32; LayerNormalization and the
data-movement ops keep fp16 and round once.

Subgraph bodies (If branches, Loop and Scan bodies) are planned the same way, each on its own:
onnxruntime partitions and casts every subgraph separately, so a body reads its half inputs and
the outer values it uses through Casts of its own, and rounds its half outputs (a Loop's carried
values each iteration). The control-flow node itself has a kernel for both types and keeps them.

onnxruntime's basic-level Conv rewrite rules fold a BatchNormalization, or a Mul or Add by a
per-channel constant, into the Conv's fp16 weights before any Cast, rounding every step in fp16:
`fold_half_convs` makes the same weights (`graph_typing` runs it before the first inference).
The fusions it runs after the Casts (Gelu, MatMul+Transpose and MatMul+scale into
FusedMatMul, Conv and Gemm with their activation, NCHWc Convs) match f32 nodes and compute in
f32 from the same f32 values: they change f32 arithmetic by an ulp at most, no fp16 rounding
point. SkipLayerNorm and the Attention fusions do not match torch's fp16 exports (a Cast sits
between the f32 Add and the fp16 LayerNormalization).

bf16: onnxruntime's Cast insertion handles fp16 only, and its CPU provider has no bf16 Conv,
MatMul or Gemm. The same rule is applied with its bf16 kernels (`BF16_KERNELS`), so a bf16
model is computed as its fp16 twin would be.

The kernel tables are onnxruntime 1.32's CPU registrations (ai.onnx and com.microsoft domains;
tests/frontends/onnx/test_half_precision.py checks them against the installed onnxruntime).
A model with no fp16/bf16 value is returned as None: f32 models are never copied or changed.
Calls of model-local functions keep per-op rounding (onnxruntime inlines them first; not
modelled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto

from .half_plan_types import PlannedGraph, graph_bodies, names_read_by_bodies, planned_types
from .inference import GraphTypes, all_graphs, copy_fields

__all__ = ["BF16_KERNELS", "F16_KERNELS", "HALF_TYPES", "HalfPlan", "fold_half_convs", "plan_half_precision"]

HALF_TYPES = frozenset({TensorProto.FLOAT16, TensorProto.BFLOAT16})
_HALF_ARRAYS = {
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16,
}

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
    """A model planned by `plan_half_precision`, and its types when the plan could write them."""

    model: onnx.ModelProto
    types: GraphTypes | None
    """The planned model's types, derived from those it was planned on (`half_plan_types`);
    None where the planned model must be inferred again."""


def plan_half_precision(
    model: onnx.ModelProto, types: GraphTypes, split_raw: Mapping[str, memoryview] | None = None
) -> HalfPlan | None:
    """`model` with its graphs computing in f32 where onnxruntime's CPU provider does (module
    docstring), or None when no graph has an fp16/bf16 value or anything to change. `types`
    are the model's inferred types, `split_raw` its main graph's split-out raw_data
    (`inference.strip_weights`)."""
    if not _sees_half(model.graph, types):
        return None
    opsets = {
        ("" if entry.domain in _DEFAULT_DOMAINS else entry.domain): entry.version
        for entry in model.opset_import
    }
    planned = _planned_graph(model.graph, types, opsets, _Scope({}, {}, frozenset()), _names(model))
    if planned is None:
        return None
    rewritten = _with_graph(model, planned.graph)
    return HalfPlan(rewritten, planned_types(planned, types, model.graph, rewritten, split_raw))


def _sees_half(graph: onnx.GraphProto, types: GraphTypes) -> bool:
    """Whether any graph's plan would see an fp16/bf16 value. A plan's half values (`_Plan.half`)
    are its typed values, initializers and inputs of those types, and it moves a node to f32
    only for one of them, so a model with none has nothing to plan.

    NOTE: one pass over element types (~20 ms for 20,000 f32 nodes) instead of the plans'
    per-node bookkeeping (~350 ms)."""
    for current in all_graphs(graph):
        if any(tensor.data_type in HALF_TYPES for tensor in current.initializer):
            return True
        if any(value.type.tensor_type.elem_type in HALF_TYPES for value in current.input):
            return True
    pending = [types]
    while pending:
        current_types = pending.pop()
        if any(type_.tensor_type.elem_type in HALF_TYPES for type_ in current_types.values.values()):
            return True
        pending.extend(current_types.subgraphs.values())
    return False


def _with_graph(model: onnx.ModelProto, graph: onnx.GraphProto) -> onnx.ModelProto:
    """A copy of `model` with `graph` as its main graph."""
    rewritten = onnx.ModelProto()
    copy_fields(model, rewritten, frozenset({"graph"}))
    rewritten.graph.CopyFrom(graph)
    return rewritten


@dataclass(frozen=True)
class _Scope:
    """What a graph sees of the graphs around it: the element types and dims of outer values,
    and which of them are constants (initializers, Constant nodes)."""

    elements: Mapping[str, int]
    dims: Mapping[str, list[int | None] | None]
    constants: frozenset[str]


def _planned_graph(
    graph: onnx.GraphProto,
    types: GraphTypes,
    opsets: Mapping[str, int],
    scope: _Scope,
    taken: set[str],
) -> PlannedGraph | None:
    """`graph` rewritten by its plan, its bodies by theirs; None when nothing changes in it or
    in any body. `taken`: every name in the model, grown by the names the rewrite makes."""
    plan = _Plan(graph, types, opsets, scope)
    inner = _Scope(plan.elements, plan.dims, frozenset(plan.constants))
    bodies: dict[tuple[int, str, int], PlannedGraph] = {}
    for index, node in enumerate(graph.node):
        for attribute in node.attribute:
            for position, body in enumerate(graph_bodies(attribute)):
                planned = _planned_graph(
                    body, types.subgraph(index, attribute.name, position), opsets, inner, taken
                )
                if planned is not None:
                    bodies[(index, attribute.name, position)] = planned
    if not any(plan.in_f32) and not bodies:
        return None
    rewritten = onnx.GraphProto()
    copy_fields(graph, rewritten, frozenset({"node"}))
    origins: list[int | None] = []
    widened: dict[str, str] = {}
    for origin, node in plan.nodes(taken, bodies, widened):
        origins.append(origin)
        rewritten.node.append(node)
    return PlannedGraph(rewritten, origins, widened, plan.in_f32, bodies)


class _Plan:
    """The per-node decision (`in_f32`) and the rewrite of one graph (the main graph or a
    body, which sees the values of the graphs around it through `scope`)."""

    def __init__(
        self,
        graph: onnx.GraphProto,
        types: GraphTypes,
        opsets: Mapping[str, int],
        scope: _Scope,
    ) -> None:
        self.graph = graph
        self.opsets = opsets
        self.elements = {**scope.elements, **self._element_types(graph, types)}
        self.dims = {**scope.dims}
        self.dims.update({name: _dims(type_) for name, type_ in types.values.items()})
        self.dims.update({tensor.name: list(tensor.dims) for tensor in graph.initializer})
        self.half = {name for name, element in self.elements.items() if element in HALF_TYPES}
        self.constants = set(scope.constants) | {tensor.name for tensor in graph.initializer}
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        for index, node in enumerate(graph.node):
            if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS:
                self.constants.update(node.output)  # onnxruntime makes them initializers
            for name in node.output:
                self.producer[name] = index
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(index)
        self.graph_outputs = {output.name for output in graph.output}
        self.read_by_subgraphs = names_read_by_bodies(graph)
        self.no_kernel = [self._lacks_kernel(node) for node in graph.node]
        self.in_f32 = list(self.no_kernel)
        for index in range(len(graph.node)):
            if not self.in_f32[index] and self._isolated(index):
                self.in_f32[index] = True

    @staticmethod
    def _element_types(graph: onnx.GraphProto, types: GraphTypes) -> dict[str, int]:
        elements = {
            name: type_.tensor_type.elem_type
            for name, type_ in types.values.items()
            if type_.HasField("tensor_type")
        }
        for tensor in graph.initializer:
            elements.setdefault(tensor.name, tensor.data_type)
        for value in graph.input:
            if value.type.HasField("tensor_type"):
                elements.setdefault(value.name, value.type.tensor_type.elem_type)
        return elements

    def _half_inputs(self, node: onnx.NodeProto) -> list[str]:
        return [name for name in node.input if name in self.half]

    def _lacks_kernel(self, node: onnx.NodeProto) -> bool:
        """onnxruntime runs `node` in f32 whatever its neighbours: it reads an fp16/bf16 value
        and has no CPU kernel for that type at the model's opset."""
        domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
        if domain not in _KNOWN_DOMAINS or _bodies_of(node):
            return False  # model-local functions, other runtimes' ops, control flow: kept
        if domain == "" and node.op_type in _CAST_LIKE:
            return False
        version = self.opsets.get(domain, 1)
        for element in {self.elements[name] for name in self._half_inputs(node)}:
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
        node = self.graph.node[index]
        if _bodies_of(node) or any(name in self.graph_outputs for name in node.output):
            return False
        if not any(name in self.producer for name in node.input if name):
            return False
        inputs = self._half_inputs(node)
        if not inputs or node.op_type in _CAST_LIKE:
            return False
        for name in inputs:
            if name in self.constants:
                continue
            if name not in self.producer or not self.in_f32[self.producer[name]]:
                return False
        readers = [
            (name, reader)
            for name in node.output
            if name in self.half
            for reader in self.consumers.get(name, ())
        ]
        if not readers or any(name in self.read_by_subgraphs for name in node.output):
            return False
        return all(
            self.no_kernel[reader] and not self._fused_reshape_reader(reader, name)
            for name, reader in readers
        )

    def _fused_reshape_reader(self, index: int, name: str) -> bool:
        """Whether onnxruntime's MatMul+Add fusion turns MatMul `index` into Reshape -> Gemm ->
        Reshape, so that `name`, its first input, is read by an fp16 Reshape: a MatMul whose
        only reader is an Add of a 1-D bias, with a static first input of rank other than 2
        and a static rank-2 second input."""
        node = self.graph.node[index]
        if node.op_type != "MatMul" or node.domain not in _DEFAULT_DOMAINS or node.input[0] != name:
            return False
        result = node.output[0]
        readers = self.consumers.get(result, [])
        if len(readers) != 1 or result in self.graph_outputs:
            return False
        add = self.graph.node[readers[0]]
        if add.op_type != "Add" or add.domain not in _DEFAULT_DOMAINS:
            return False
        a, b = (_static(self.dims.get(operand)) for operand in node.input[:2])
        bias = [operand for operand in add.input if operand != result]
        if a is None or b is None or len(a) == 2 or len(b) != 2 or len(bias) != 1:
            return False
        if self.elements.get(bias[0]) != self.elements.get(name):
            return False
        bias_dims = self.dims.get(bias[0])
        return bias_dims is not None and len(bias_dims) == 1 and bias_dims[0] == b[1]

    def nodes(
        self,
        taken: set[str],
        bodies: Mapping[tuple[int, str, int], PlannedGraph],
        widened: dict[str, str],
    ) -> Iterable[tuple[int | None, onnx.NodeProto]]:
        """The graph's nodes, rewritten, each with the index of the node it was written from
        (None for a Cast the plan makes): Casts to f32 before the nodes that read them, f32
        nodes with renamed half results, Casts back where a half reader needs them, and the
        planned `bodies` ((node index, attribute name, position) -> the body planned) in their
        control-flow nodes. Each value made to hold a half value in f32 goes into `widened` (see
        `PlannedGraph.widened`)."""
        wide: dict[str, str] = {}
        """half value -> the name of its f32 value, once there is one."""

        def fresh(name: str) -> str:
            wide[name] = _fresh(name, "f32", taken)
            widened[wide[name]] = name
            return wide[name]

        for index, node in enumerate(self.graph.node):
            if not self.in_f32[index]:
                for kept in self._kept(_with_bodies(node, index, bodies), wide):
                    yield index, kept
                continue
            inputs = []
            for name in node.input:
                if name in self.half and name not in wide:
                    yield None, _cast(name, fresh(name), TensorProto.FLOAT, node.name)
                inputs.append(wide.get(name, name) if name in self.half else name)
            outputs, narrowed = [], []
            for name in node.output:
                if name in self.half:
                    outputs.append(fresh(name))
                    if self._needs_half(name):
                        narrowed.append(_cast(wide[name], name, self.elements[name], node.name))
                else:
                    outputs.append(name)
            computed = onnx.NodeProto()
            computed.CopyFrom(node)
            computed.ClearField("input")
            computed.input.extend(inputs)
            computed.ClearField("output")
            computed.output.extend(outputs)
            for attribute in computed.attribute:
                if attribute.name == "dtype" and attribute.i in HALF_TYPES:
                    attribute.i = TensorProto.FLOAT
            yield index, computed
            for cast in narrowed:
                yield None, cast

    def _kept(self, node: onnx.NodeProto, wide: dict[str, str]) -> Iterable[onnx.NodeProto]:
        """A node that keeps its types; the two Cast pairs onnxruntime removes become direct
        reads of the f32 value."""
        if node.op_type == "Cast" and node.domain in _DEFAULT_DOMAINS and len(node.input) == 1:
            to = next((attribute.i for attribute in node.attribute if attribute.name == "to"), None)
            source, result = node.input[0], node.output[0]
            if to == TensorProto.FLOAT and source in wide and result not in self.graph_outputs:
                yield onnx.helper.make_node("Identity", [wide[source]], [result], name=node.name)
                return
            if to in HALF_TYPES and self.elements.get(source) == TensorProto.FLOAT:
                wide[result] = source
        yield node

    def _needs_half(self, name: str) -> bool:
        """Whether something reads the half value of `name` (an f32 node's result)."""
        if name in self.graph_outputs or name in self.read_by_subgraphs:
            return True
        return any(
            not self.in_f32[reader] and not self._reads_wide(reader)
            for reader in self.consumers.get(name, ())
        )

    def _reads_wide(self, index: int) -> bool:
        """A user's Cast to f32 that `_kept` turns into a read of the f32 value."""
        node = self.graph.node[index]
        return (
            node.op_type == "Cast"
            and node.domain in _DEFAULT_DOMAINS
            and node.output[0] not in self.graph_outputs
            and any(
                attribute.name == "to" and attribute.i == TensorProto.FLOAT
                for attribute in node.attribute
            )
        )


def _cast(source: str, result: str, to: int, at: str) -> onnx.NodeProto:
    return onnx.helper.make_node(
        "Cast", [source], [result], to=to, name=f"{at}/{result}" if at else result
    )


def _names(model: onnx.ModelProto) -> set[str]:
    """Every value name in `model`, at any depth: what a new name must not be."""
    return {
        name
        for graph in all_graphs(model.graph)
        for name in (
            *(name for node in graph.node for name in (*node.input, *node.output)),
            *(value.name for value in (*graph.input, *graph.output)),
            *(tensor.name for tensor in graph.initializer),
        )
    }


def _fresh(name: str, suffix: str, taken: set[str]) -> str:
    """`name` + `suffix` (numbered if needed), a name not in `taken`, which now holds it."""
    candidate, number = f"{name}_{suffix}", 0
    while candidate in taken:
        number += 1
        candidate = f"{name}_{suffix}_{number}"
    taken.add(candidate)
    return candidate


def _with_bodies(
    node: onnx.NodeProto, index: int, bodies: Mapping[tuple[int, str, int], PlannedGraph]
) -> onnx.NodeProto:
    """`node` (number `index`) with its planned bodies, if any changed."""
    replaced = {
        (attribute.name, position): bodies[(index, attribute.name, position)].graph
        for attribute in node.attribute
        for position in range(len(graph_bodies(attribute)))
        if (index, attribute.name, position) in bodies
    }
    if not replaced:
        return node
    planned = onnx.NodeProto()
    planned.CopyFrom(node)
    for attribute in planned.attribute:
        for position, body in enumerate(graph_bodies(attribute)):
            graph = replaced.get((attribute.name, position))
            if graph is not None:
                body.CopyFrom(graph)
    return planned


def _bodies_of(node: onnx.NodeProto) -> bool:
    return any(graph_bodies(attribute) for attribute in node.attribute)


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


# -- onnxruntime's Conv folds ---------------------------------------------------------------------

ReadInitializer = Callable[[str], "np.ndarray | None"]
"""An initializer's values by name (fp16 as float16, bf16 as ml_dtypes' bfloat16), or None."""


def fold_half_convs(model: onnx.ModelProto, read: ReadInitializer) -> onnx.ModelProto | None:
    """A copy of `model` whose main graph has onnxruntime's Conv folds (`_folded_convs`)
    applied, or None when none applies (always for a model without fp16/bf16 Conv weights).
    Run before `plan_half_precision`, as onnxruntime folds before it casts."""
    half_weights = {
        tensor.name for tensor in model.graph.initializer if tensor.data_type in HALF_TYPES
    }
    if not any(
        node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in half_weights
        for node in model.graph.node
    ):
        return None
    folded = _folded_convs(model.graph, read, _names(model))
    return None if folded is None else _with_graph(model, folded)


def _folded_convs(
    graph: onnx.GraphProto, read: ReadInitializer, taken: set[str]
) -> onnx.GraphProto | None:
    """`graph` with onnxruntime's basic-level Conv rewrite rules applied (ConvBNFusion,
    ConvMulFusion, ConvAddFusion), or None when none applies: a Conv with fp16/bf16 constant
    weights whose only reader is a BatchNormalization, or a Mul or Add by a per-channel
    constant, takes that op into its weights and bias. onnxruntime folds them before it casts
    anything, in the initializers' own type with a rounding after every step
    (`_fold_into_conv`), so the model it runs has other weights than the exported ones; a
    CNN exported with BatchNormalization differs by up to ~1,800 ulp where the outputs cancel
    if the fold is not done as it does it."""
    initializers = {tensor.name for tensor in graph.initializer}
    overridable = {value.name for value in graph.input}
    made: dict[str, np.ndarray] = {}

    def constant(name: str) -> np.ndarray | None:
        if name in made:
            return made[name]
        if name not in initializers or name in overridable:
            return None
        return read(name)

    def fresh(name: str, array: np.ndarray) -> str:
        made[_fresh(name, "folded", taken)] = array
        return next(reversed(made))

    nodes = list(graph.node)
    outputs = {value.name for value in graph.output}
    inner_reads = names_read_by_bodies(graph)
    folded = True
    while folded:
        folded = False
        for index, conv in enumerate(nodes):
            if conv.op_type != "Conv" or conv.domain not in _DEFAULT_DOMAINS:
                continue
            result = conv.output[0]
            readers = [node for node in nodes if result in node.input]
            if len(readers) != 1 or result in outputs or result in inner_reads:
                continue
            reader = readers[0]
            if reader.domain not in _DEFAULT_DOMAINS or [*reader.input].count(result) != 1:
                continue
            weights = _fold_into_conv(conv, reader, constant)
            if weights is None:
                continue
            weight, bias = weights
            replacement = onnx.NodeProto()
            replacement.CopyFrom(conv)
            del replacement.input[1:]
            replacement.input.append(fresh(conv.input[1], weight))
            if bias is not None:
                replacement.input.append(fresh(result, bias))
            replacement.output[0] = reader.output[0]
            nodes[index] = replacement
            nodes.remove(reader)
            folded = True
            break
    if not made:
        return None
    rewritten = onnx.GraphProto()
    copy_fields(graph, rewritten, frozenset({"node", "initializer"}))
    rewritten.node.extend(nodes)
    read_names = {
        name for sub in all_graphs(rewritten) for node in sub.node for name in node.input
    } | {value.name for value in (*graph.input, *graph.output)}
    rewritten.initializer.extend(
        tensor for tensor in graph.initializer if tensor.name in read_names
    )
    for name, array in made.items():
        if name in read_names:
            rewritten.initializer.append(_half_tensor(name, array))
    return rewritten


def _fold_into_conv(
    conv: onnx.NodeProto, reader: onnx.NodeProto, constant: Callable[[str], np.ndarray | None]
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The Conv's new (weight, bias) when onnxruntime folds `reader` (its result's only reader,
    reading it first) into it, else None. Each step computes in f32 and rounds to the weights'
    type, as onnxruntime's `Initializer` arithmetic does on fp16/bf16."""
    weight = constant(conv.input[1])
    if weight is None or weight.dtype not in _HALF_ARRAYS or weight.ndim < 3:
        return None
    half = weight.dtype
    channels = weight.shape[0]
    rank = weight.ndim
    bias = None
    if len(conv.input) == 3:
        bias = constant(conv.input[2]) if conv.input[2] else None
        if bias is None or bias.dtype != half or bias.shape != (channels,):
            return None

    def rounded(value) -> np.ndarray:
        return np.asarray(value, np.float32).astype(half)

    def wide(array: np.ndarray) -> np.ndarray:
        return array.astype(np.float32)

    def per_channel(array: np.ndarray) -> np.ndarray:
        return wide(array).reshape((-1,) + (1,) * (rank - 1))

    if reader.op_type == "BatchNormalization":
        if reader.input[0] != conv.output[0] or len([n for n in reader.output if n]) != 1:
            return None
        parameters = [constant(name) for name in reader.input[1:5]]
        if any(
            array is None or array.dtype != half or array.shape != (channels,)
            for array in parameters
        ):
            return None
        scale, offset, mean, variance = (array for array in parameters if array is not None)
        epsilon = np.float32(
            next((a.f for a in reader.attribute if a.name == "epsilon"), np.float32(1e-5))
        )
        deviation = rounded(np.sqrt(wide(rounded(wide(variance) + epsilon))))
        factor = rounded(wide(scale) / wide(deviation))
        weight = rounded(wide(weight) * per_channel(factor))
        if bias is not None:
            bias = rounded(wide(rounded(wide(bias) - wide(mean))) * wide(factor))
            return weight, rounded(wide(bias) + wide(offset))
        return weight, rounded(wide(offset) - wide(rounded(wide(mean) * wide(factor))))
    if reader.op_type not in ("Mul", "Add") or reader.input[0] != conv.output[0]:
        return None
    operand = constant(reader.input[1])
    if operand is None or weight.ndim < 4:
        return None
    per_channel_shape = (
        operand.ndim == weight.ndim - 1 and operand.ndim > 0 and operand.shape[0] == channels
    )
    if per_channel_shape and any(dim != 1 for dim in operand.shape[1:]):
        return None
    if reader.op_type == "Mul":
        if operand.dtype != half or not (operand.ndim == 0 or per_channel_shape):
            return None
        factor = wide(operand) if operand.ndim == 0 else per_channel(operand)
        weight = rounded(wide(weight) * factor)
        if bias is None:
            return weight, None
        return weight, rounded(wide(bias) * wide(operand).reshape(-1))
    if not per_channel_shape or operand.dtype not in _HALF_ARRAYS:
        return None
    if bias is None:
        return weight, operand.reshape(channels)
    if operand.dtype != half:
        return None
    return weight, rounded(wide(bias) + wide(operand).reshape(channels))


def _half_tensor(name: str, array: np.ndarray) -> onnx.TensorProto:
    tensor = onnx.TensorProto()
    tensor.name = name
    tensor.data_type = _HALF_ARRAYS[array.dtype]
    tensor.dims.extend(array.shape)
    tensor.raw_data = np.ascontiguousarray(array).view(np.uint16).tobytes()
    return tensor
