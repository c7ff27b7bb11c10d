"""The lowering-rule context, the rule tables, and the registry for UnknownOp lowerings.

Every rule, built in or registered, receives one `LoweringRuleContext` (as JAX's lowering rules
receive a `LoweringRuleContext`): the Niro op, its MLIR operand values, the MLIR types its
results must have, the location and insertion point to build at, and helpers. A rule builds ops
and returns the MLIR values of the op's results, in order (terminators return nothing).

Two tables: `KNOWN_LOWERINGS` keyed by Niro op class (`@lowering(Add)`, filled by `rules.py`,
checked complete against `niro.ir.OP_KINDS`), and the public registry keyed by UnknownOp name
(`@register_lowering("onnx.Relu")`), which op libraries fill.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from niro.ir import Location, Op, ScalarType, TensorType, Value, format_type, op_name

from .bindings import arith, cf, ir, linalg, tensor
from .errors import LoweringError
from .run_time_broadcast import broadcast_size, is_one_or
from .types import index_type, type_key

if TYPE_CHECKING:
    from .lowering import FunctionLowering

__all__ = [
    "LoweringRuleContext",
    "LoweringRule",
    "lowering",
    "KNOWN_LOWERINGS",
    "register_lowering",
    "unregister_lowering",
    "registered_lowerings",
    "lowering_for",
    "registered_lowering",
    "RegisteredLowering",
]


@dataclass(frozen=True, slots=True)
class LoweringRuleContext:
    """What a lowering rule gets: one per Niro op lowered.

    `operands` are the MLIR values of `niro_operands` (`operands_of(op)`) in order;
    `result_types` the MLIR types of `niro_results` (`results_of(op)`). The rule runs with
    `location` and `insertion_point` already entered, so builders pick them up implicitly.
    `niro_location` says where the op is in the Niro module (its function and `path`), for error
    messages. `lowering` is the function being lowered: its blocks and nested regions
    (control-flow rules) and, through `lowering.module`, the module's symbols and blobs.
    """

    op: Op
    operands: tuple[ir.Value, ...]
    result_types: tuple[ir.Type, ...]
    niro_operands: tuple[Value, ...]
    niro_results: tuple[Value, ...]
    location: ir.Location
    insertion_point: ir.InsertionPoint
    path: tuple[str, ...]
    lowering: FunctionLowering

    @property
    def niro_location(self) -> Location:
        """Where the op is in the Niro module, made when asked (an error, a run-time check's
        message): most ops never need it, and a 20,000-op model would make 20,000."""
        op = self.op
        return Location(
            symbol=self.lowering.function.name, path=self.path, op_name=op_name(op), source=op.loc
        )

    # -- errors ---------------------------------------------------------------------------------

    def error(self, message: str) -> LoweringError:
        """A LoweringError in MLIR's form (`'niro.add' op ...`) located at this op."""
        return LoweringError(f"'{op_name(self.op)}' op {message}", location=str(self.niro_location))

    # -- Niro views of the operands ---------------------------------------------------------------

    def ranked(self, value: Value, what: str) -> TensorType:
        """`value`'s type when it is a ranked tensor, else an error naming the op and operand."""
        type_ = value.type
        if not isinstance(type_, TensorType):
            raise self.error(f"expected a tensor {what}, got {format_type(type_)}")
        if type_.shape is None:
            raise self.error(f"needs a ranked tensor {what}, got {format_type(type_)}")
        return type_

    def constant_operand(self, index: int) -> np.ndarray | None:
        """Operand `index` as a numpy array when it is a compile-time constant (defined by a
        Const or a GetGlobal), else None: for axes, shapes, pads given as ONNX inputs."""
        return self.lowering.constant_value(self.niro_operands[index])

    # -- builders ---------------------------------------------------------------------------------

    def index_constant(self, value: int) -> ir.Value:
        return arith.ConstantOp(index_type(), ir.IntegerAttr.get(index_type(), value)).result

    def dim_size(self, value: ir.Value, axis: int) -> ir.Value:
        """`tensor.dim` of a ranked tensor value, as an index."""
        return tensor.DimOp(value, self.index_constant(axis)).result

    def empty_tensor(self, result: TensorType, sizes: Sequence[ir.Value | None]) -> ir.Value:
        """`tensor.empty` of `result`; `sizes[i]` is the index value of dynamic dim i (else None)."""
        dynamic: list[ir.Value] = []
        for dim, size in zip(result.shape, sizes, strict=True):
            if dim is not None:
                continue
            if size is None:
                raise self.error(f"cannot find the size of a dynamic dim of {format_type(result)}")
            dynamic.append(size)
        # NOTE: the generic builder with the memoised result type: the `tensor.EmptyOp` wrapper
        # rebuilds the type from mixed sizes on every call (3x the time; same op).
        return ir.Operation.create(
            "tensor.empty", results=[self.mlir_type(result)], operands=dynamic
        ).result

    def mlir_type(self, type_: ScalarType | TensorType) -> ir.Type:
        """`lower_type(type_)` in this lowering's context, made once per type."""
        return self.lowering.module.mlir_type(type_)

    def zero(self, element: ir.Type) -> ir.Value:
        """A scalar 0 of an integer or float MLIR type."""
        if isinstance(element, ir.IntegerType):
            return arith.ConstantOp(element, ir.IntegerAttr.get(element, 0)).result
        return arith.ConstantOp(element, ir.FloatAttr.get(element, 0.0)).result

    def elementwise(
        self,
        body: Callable[[Sequence[ir.Value]], ir.Value],
        inputs: Sequence[tuple[ir.Value, Value]] | None = None,
        result: Value | None = None,
    ) -> ir.Value:
        """A broadcasting element-wise `linalg.generic`: `body(elements)` computes one element.

        `inputs` pairs each MLIR value with its Niro value (default: the op's operands); `result`
        is the Niro result (default: the op's only result). Shapes broadcast as in NumPy,
        right-aligned; a static size-1 dim against a larger result dim reads index 0.

        A *dynamic* operand dim is 1 or the result dim at run time (a `cf.assert` checks it, so
        a mismatch stops the program with a message naming the op instead of reading out of
        bounds), and ONNX broadcasts a 1. Against a result dim known to be a static N > 1 (the
        result's type, or another operand's static dim) such an operand is read by a clamped
        `tensor.extract` (`_extract_broadcast`: index min(i, size - 1) is 0 for a 1). Where
        two or more operands are dynamic on a dim no static size fixes (`_run_time_axes`), the
        result's size there is ONNX's broadcast of theirs (`run_time_broadcast.broadcast_size`)
        and those operands are read the same clamped way. A dim only one operand has dynamic is
        the result's. Static shapes never take these paths: their MLIR is the same.

        NOTE: an outer-product-like op (operands broadcast along different dims, as in
        `s[:, :, None] - s[:, None, :]`) reads all its operands but the first with
        `tensor.extract` in the body, not as `ins`: IREE (3.13) fuses such an op into the
        dispatch of a reduction that produces both operands (a ReduceSum, a CumSum) and then
        computes only the elements where the two reads coincide, the rest wrong.
        """
        if inputs is None:
            inputs = tuple(zip(self.operands, self.niro_operands, strict=True))
        result = self.niro_results[0] if result is None else result
        plan = self.lowering.module.shared_object(
            ("broadcast", type_key(result.type), *[type_key(niro.type) for _, niro in inputs]),
            lambda: self._broadcast_plan(inputs, result),
        )
        if plan.is_static:
            init = ir.Operation.create("tensor.empty", results=[plan.result_type]).result
        else:
            result_type: TensorType = result.type  # type: ignore[assignment]
            sizes = [
                None if dim is not None else self._broadcast_size(axis, inputs, plan.shapes)
                for axis, dim in enumerate(result_type.shape)
            ]
            init = self.empty_tensor(result_type, sizes)
            self._assert_dynamic_dims_match(inputs, plan.shapes, result_type, sizes)
        lasts = {
            index: self._last_indices(inputs[index][0], plan.shapes[index][1])
            for index in plan.extracted
        }
        # NOTE: the generic builder with the plan's attributes: `linalg.GenericOp` re-derives
        # the operand segments and checks each attribute in Python (3x the time; same op).
        generic = ir.Operation.create(
            "linalg.generic",
            results=[plan.result_type],
            operands=[
                *[value for index, (value, _) in enumerate(inputs) if index not in plan.extracted],
                init,
            ],
            attributes=plan.attributes,
            regions=1,
        )
        block = generic.regions[0].blocks.append(*plan.block_types)
        with ir.InsertionPoint(block):
            arguments = iter(block.arguments)
            elements = [
                self._extract_broadcast(value, plan, index, lasts[index])
                if index in plan.extracted
                else next(arguments)
                for index, (value, _) in enumerate(inputs)
            ]
            element = body(elements)
            ir.Operation.create("linalg.yield", operands=[element])
        return generic.result

    def _extract_broadcast(
        self, value: ir.Value, plan: _BroadcastPlan, index: int, lasts: list[ir.Value]
    ) -> ir.Value:
        """Operand `index`'s element at the current position, read by `tensor.extract` (inside
        the body) with the indices its broadcasting map would give, each clamped to the dim's
        last index (`lasts`, made outside the body).

        NOTE: the clamp (a no-op) keeps IREE from raising the read back into an `ins` operand
        with an indexing map, which would bring back the miscompile `elementwise` avoids."""
        offset, shape = plan.shapes[index]
        result_shape = ir.RankedTensorType(plan.result_type).shape
        indices = []
        for axis, dim in enumerate(shape):
            if dim == 1 and result_shape[offset + axis] != 1:
                indices.append(self.index_constant(0))
                continue
            position = linalg.IndexOp(offset + axis).result
            indices.append(arith.MinUIOp(position, lasts[axis]).result)
        return tensor.ExtractOp(value, indices).result

    def _last_indices(self, value: ir.Value, shape: tuple) -> list[ir.Value]:
        """Per dim of `value`, its last index (size - 1) as an index value."""
        lasts = []
        for axis, dim in enumerate(shape):
            if dim is not None:
                lasts.append(self.index_constant(max(dim - 1, 0)))
            else:
                one = self.index_constant(1)
                lasts.append(arith.SubIOp(self.dim_size(value, axis), one).result)
        return lasts

    def _broadcast_plan(
        self, inputs: Sequence[tuple[ir.Value, Value]], result: Value
    ) -> _BroadcastPlan:
        """What `elementwise` builds from the Niro types alone (checked here, once per type
        signature per lowering; the errors name the operand)."""
        result_type = self.ranked(result, "result")
        rank = len(result_type.shape)
        shapes = []
        for index, (_, niro_value) in enumerate(inputs):
            shape = self.ranked(niro_value, f"operand #{index}").shape
            if len(shape) > rank:
                raise self.error(
                    f"operand #{index} {format_type(niro_value.type)} has a higher rank than the "
                    f"result {format_type(result_type)}"
                )
            shapes.append((rank - len(shape), shape))
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        extents = _static_extents(result_type.shape, shapes)
        run_time_axes = _run_time_axes(result_type.shape, shapes)
        extracted = _outer_operands(result_type.shape, shapes) | {
            index
            for index, (offset, shape) in enumerate(shapes)
            if any(
                dim is None
                and (extents[offset + axis] not in (None, 1) or offset + axis in run_time_axes)
                for axis, dim in enumerate(shape)
            )
        }
        kept = [index for index in range(len(inputs)) if index not in extracted]
        return _BroadcastPlan(
            shapes=tuple(shapes),
            result_type=self.mlir_type(result_type),
            block_types=(
                *[self.mlir_type(inputs[index][1].type.element_type) for index in kept],
                self.mlir_type(result_type.element_type),
            ),
            attributes={
                "indexing_maps": _broadcast_maps(
                    result_type.shape, [shapes[index] for index in kept]
                ),
                "iterator_types": ir.ArrayAttr.get([parallel] * rank),
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(kept), 1]),
            },
            extracted=extracted,
            is_static=result_type.is_static and all(None not in shape for _, shape in shapes),
        )

    def _assert_dynamic_dims_match(self, inputs, shapes, result_type, sizes) -> None:
        """A run-time check per dynamic operand dim that it equals the result dim it maps to,
        or is 1 where that dim is a static N > 1 or a `_run_time_axes` dim (broadcast, see
        `elementwise`)."""
        extents = _static_extents(result_type.shape, shapes)
        run_time_axes = _run_time_axes(result_type.shape, shapes)
        for index, ((value, _), (offset, shape)) in enumerate(zip(inputs, shapes, strict=True)):
            for axis, dim in enumerate(shape):
                if dim is not None:
                    continue
                result_axis = offset + axis
                expected = sizes[result_axis]
                if expected is None:
                    expected = self.index_constant(result_type.shape[result_axis])
                size = self.dim_size(value, axis)
                if result_axis in run_time_axes:
                    cf.AssertOp(
                        is_one_or(size, expected),
                        f"{self.niro_location}: '{op_name(self.op)}' op: dynamic dim {axis} of "
                        f"operand #{index} is neither 1 nor the result dim",
                    )
                    continue
                equal = arith.CmpIOp(arith.CmpIPredicate.eq, size, expected).result
                extent = extents[result_axis]
                if extent is not None and extent != 1:
                    one = arith.CmpIOp(arith.CmpIPredicate.eq, size, self.index_constant(1)).result
                    cf.AssertOp(
                        arith.OrIOp(equal, one).result,
                        f"{self.niro_location}: '{op_name(self.op)}' op: dynamic dim {axis} of "
                        f"operand #{index} is neither 1 nor the result dim {extent}",
                    )
                    continue
                cf.AssertOp(
                    equal,
                    f"{self.niro_location}: '{op_name(self.op)}' op: dynamic dim {axis} of operand "
                    f"#{index} differs from the result dim",
                )

    def _broadcast_size(self, axis, inputs, shapes) -> ir.Value | None:
        """The index value of dynamic result dim `axis`: a static non-1 operand size, else
        that of the one operand dynamic there, else (`_run_time_axes`) ONNX's broadcast of the
        operands' run-time sizes there."""
        dynamic_sources = []
        for (value, _), (offset, shape) in zip(inputs, shapes, strict=True):
            if axis < offset:
                continue
            dim = shape[axis - offset]
            if dim is not None and dim != 1:
                return self.index_constant(dim)
            if dim is None:
                dynamic_sources.append((value, axis - offset))
        if not dynamic_sources:
            return None
        if len(dynamic_sources) == 1:
            return self.dim_size(*dynamic_sources[0])
        return broadcast_size([self.dim_size(*source) for source in dynamic_sources])


def _run_time_axes(result_shape: tuple, shapes) -> frozenset[int]:
    """The result dims whose size only the run decides between operands: no static size
    other than 1 there (in the result or an operand) and two or more operands dynamic there.
    Each of those is 1 or the result's size, and a 1 is broadcast (`run_time_broadcast`)."""
    extents = _static_extents(result_shape, shapes)
    counts = [0] * len(result_shape)
    for offset, shape in shapes:
        for axis, dim in enumerate(shape):
            if dim is None:
                counts[offset + axis] += 1
    return frozenset(
        axis for axis, count in enumerate(counts) if count >= 2 and extents[axis] is None
    )


def _static_extents(result_shape: tuple, shapes) -> list[int | None]:
    """Per result dim, its size when the types fix it: the result's static dim, else a static
    non-1 operand dim there (ONNX's broadcast makes every other operand 1 or that size)."""
    extents = list(result_shape)
    for offset, shape in shapes:
        for axis, dim in enumerate(shape):
            if extents[offset + axis] is None and dim is not None and dim != 1:
                extents[offset + axis] = dim
    return extents


def _outer_operands(result_shape: tuple, shapes: list[tuple[int, tuple]]) -> frozenset[int]:
    """The operands an element-wise op reads by `tensor.extract` (see `elementwise`): when two
    operands broadcast along different dims (each lacks a result dim the other has), all but
    the first; else none."""
    rank = len(result_shape)
    missing = [
        frozenset(
            axis
            for axis in range(rank)
            if result_shape[axis] != 1 and (axis < offset or shape[axis - offset] == 1)
        )
        for offset, shape in shapes
    ]
    outer = any(
        missing[i] - missing[j] and missing[j] - missing[i]
        for i in range(len(missing))
        for j in range(i + 1, len(missing))
    )
    return frozenset(range(1, len(shapes))) if outer else frozenset()


def _broadcast_maps(result_shape: tuple, shapes: list[tuple[int, tuple]]) -> ir.ArrayAttr:
    """The indexing maps of a broadcasting `linalg.generic`: per operand (right-aligned at
    `offset`), a dim that is a static 1 against a larger result dim reads index 0; then the
    result's identity map."""
    rank = len(result_shape)
    maps = []
    for offset, shape in shapes:
        exprs = [
            ir.AffineConstantExpr.get(0)
            if dim == 1 and result_shape[offset + axis] != 1
            else ir.AffineDimExpr.get(offset + axis)
            for axis, dim in enumerate(shape)
        ]
        maps.append(ir.AffineMap.get(rank, 0, exprs))
    maps.append(ir.AffineMap.get_identity(rank))
    return ir.ArrayAttr.get([ir.AffineMapAttr.get(map_) for map_ in maps])


@dataclass(frozen=True, slots=True)
class _BroadcastPlan:
    """The parts of an element-wise `linalg.generic` that depend only on the Niro types of its
    operands and result, made once per type signature: a 20,000-node model has a handful.

    `shapes` is (offset, shape) per operand, right-aligned against the result; `block_types`
    the body's argument types (operand elements, then the result's); `attributes` the op's
    indexing maps, parallel iterators and operand segments; `is_static` says no dim anywhere is
    dynamic (no sizes to compute, nothing to check at run time); `extracted` the operands read
    by `tensor.extract` in the body instead of as `ins` (no map, no block argument)."""

    shapes: tuple[tuple[int, tuple[int | None, ...]], ...]
    result_type: ir.Type
    block_types: tuple[ir.Type, ...]
    attributes: dict[str, ir.Attribute]
    is_static: bool
    extracted: frozenset[int]


LoweringRule = Callable[[LoweringRuleContext], Sequence[ir.Value]]

KNOWN_LOWERINGS: dict[type, LoweringRule] = {}
"""Niro op class -> rule; `rules.py` fills it and checks it covers `OP_KINDS`."""

_REGISTERED: dict[str, RegisteredLowering] = {}


def lowering(op_class: type) -> Callable[[LoweringRule], LoweringRule]:
    """Registers the built-in rule for a Niro op class (`@lowering(Add)`)."""

    def register(rule: LoweringRule) -> LoweringRule:
        if op_class in KNOWN_LOWERINGS:
            raise ValueError(f"{op_class.__name__} already has a lowering")
        KNOWN_LOWERINGS[op_class] = rule
        return rule

    return register


@dataclass(frozen=True, slots=True)
class RegisteredLowering:
    """A registered UnknownOp lowering and the op-set versions it implements (`until` inclusive,
    None = every later version)."""

    name: str
    rule: LoweringRule
    since: int = 1
    until: int | None = None

    def supports(self, version: int) -> bool:
        return version >= self.since and (self.until is None or version <= self.until)

    def describe_versions(self) -> str:
        if self.until is None:
            return f"opset {self.since} and later"
        return f"opsets {self.since} to {self.until}"


def register_lowering(
    name: str, *, since: int = 1, until: int | None = None, replace: bool = False
) -> Callable[[LoweringRule], LoweringRule]:
    """Registers the lowering of the UnknownOp called `name` (`@register_lowering("onnx.Relu")`).

    The rule gets a `LoweringRuleContext` and returns the MLIR values of the op's results.
    `since`/`until` bound the op-set versions (the op's `niro.opset` attribute) it implements;
    an op of another version is refused with a LoweringError rather than lowered with the wrong
    semantics. Registering a name twice is an error unless `replace=True`.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"an UnknownOp lowering needs a non-empty op name, got {name!r}")

    def register(rule: LoweringRule) -> LoweringRule:
        if name in _REGISTERED and not replace:
            raise ValueError(f"'{name}' already has a registered MLIR lowering")
        _REGISTERED[name] = RegisteredLowering(name, rule, since, until)
        return rule

    return register


def unregister_lowering(name: str) -> LoweringRule:
    """Removes and returns the lowering registered for `name` (KeyError when there is none)."""
    return _REGISTERED.pop(name).rule


def registered_lowerings() -> tuple[str, ...]:
    """The UnknownOp names that have a registered lowering, sorted."""
    return tuple(sorted(_REGISTERED))


def registered_lowering(name: str) -> RegisteredLowering | None:
    """The registration for `name`, with its op-set range (for `niroc ops`)."""
    return _REGISTERED.get(name)


def lowers(name: str, version: int) -> bool:
    """Whether a registered lowering implements UnknownOp `name` at op-set `version`.

    The ONNX frontend asks this (as its `expand_functions`, negated) so that an op we cannot
    lower, but which ONNX defines by a function body, arrives as a call of that body."""
    registration = _REGISTERED.get(name)
    return registration is not None and registration.supports(version)


def cannot_lower(name: str, version: int) -> bool:
    """`not lowers(...)`: the `expand_functions` predicate for `import_model`."""
    return not lowers(name, version)


def lowering_for(name: str) -> LoweringRule | None:
    registration = _REGISTERED.get(name)
    return None if registration is None else registration.rule
