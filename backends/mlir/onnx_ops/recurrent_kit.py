"""The kit the RNN, GRU and LSTM lowerings share (`recurrent.py` drives them): the activation
table, the checked operands of one op (`Recurrence`), and the structured builders of the gate
math: projections through W or R (`project`, a `linalg.generic` contraction plus bias) and the
element-wise `linalg.generic` over (batch, hidden) that reads gates, states and peepholes.

Activations: `activation_alpha`/`activation_beta` are consumed in order by the activations that
take them (as onnxruntime); a missing value takes the default of the ONNX operator of that name
(LeakyRelu 0.01, ThresholdedRelu 1.0, HardSigmoid 0.2/0.5, Elu 1.0; Affine 1.0/0.0, as the
retired Affine op); ScaledTanh without both values is refused, as is any other name. `clip`
bounds every gate activation's input to [-clip, clip] after biases and peepholes.

Operands are widened once to the compute type: f32 for f16/bf16, else the type itself.

Sizes: the hidden and input sizes (from W and R) are static; the sequence length and the batch
may be dynamic (as PyTorch exports recurrent models), in which case `Recurrence.seq`/`.batch`
hold the `tensor.dim` of X (built once, before any loop, so every hoisted builder may use them)
and every builder takes such mixed sizes (an int, or an index value), and the types they make
have a `?` there (`static_size`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from niro.ir import ScalarType, format_type

from ..bindings import arith, mlir_ir, tensor
from ..builders import DYNAMIC, dim_size, empty, fill, generic, tensor_sizes
from ..context import LoweringRuleContext
from .common import attribute, element_type, input_value, static_shape
from .elementwise import FloatMath

__all__ = [
    "ACTIVATIONS",
    "ActivationSpec",
    "Activation",
    "Cell",
    "Recurrence",
    "parse_recurrence",
    "static_size",
    "shape_text",
    "slab",
    "project",
    "project_state",
    "project_gates",
    "gate",
    "x_gate",
    "input_bias_offsets",
    "Sum",
    "state",
    "peephole",
    "elementwise",
]

FLOATS = (ScalarType.F16, ScalarType.BF16, ScalarType.F32, ScalarType.F64)

# ONNX input positions
X, W, R, B, SEQUENCE_LENS, INITIAL_H, INITIAL_C, P = range(8)


# -- activations --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActivationSpec:
    """One activation function an RNN-family op may name: which of alpha/beta it takes, their
    defaults (None: the value must be given), and its kernel on one compute-type element."""

    name: str
    kernel: Callable[[FloatMath, mlir_ir.Value, float, float], mlir_ir.Value]
    alpha: tuple[bool, float | None] = (False, None)
    beta: tuple[bool, float | None] = (False, None)


def _leaky_relu(m: FloatMath, x, alpha, _):
    return m.select(m.ge(x, m.zero()), x, m.mul(m.const(alpha), x))


def _elu(m: FloatMath, x, alpha, _):
    negative = m.mul(m.const(alpha), m.sub(m.exp(x), m.one()))
    return m.select(m.ge(x, m.zero()), x, negative)


ACTIVATIONS: dict[str, ActivationSpec] = {
    spec.name.lower(): spec
    for spec in (
        ActivationSpec("Relu", lambda m, x, a, b: m.maximum(x, m.zero())),
        ActivationSpec("Tanh", lambda m, x, a, b: m.tanh(x)),
        ActivationSpec("Sigmoid", lambda m, x, a, b: m.sigmoid(x)),
        ActivationSpec(
            "Affine",
            lambda m, x, a, b: m.add(m.mul(m.const(a), x), m.const(b)),
            (True, 1.0),
            (True, 0.0),
        ),
        ActivationSpec("LeakyRelu", _leaky_relu, (True, 0.01)),
        ActivationSpec(
            "ThresholdedRelu",
            lambda m, x, a, b: m.select(m.gt(x, m.const(a)), x, m.zero()),
            (True, 1.0),
        ),
        ActivationSpec(
            "ScaledTanh",
            lambda m, x, a, b: m.mul(m.const(a), m.tanh(m.mul(m.const(b), x))),
            (True, None),
            (True, None),
        ),
        ActivationSpec(
            "HardSigmoid",
            lambda m, x, a, b: m.clamp(m.add(m.mul(m.const(a), x), m.const(b)), 0.0, 1.0),
            (True, 0.2),
            (True, 0.5),
        ),
        ActivationSpec("Elu", _elu, (True, 1.0)),
        ActivationSpec("Softsign", lambda m, x, a, b: m.div(x, m.add(m.one(), m.abs(x)))),
        ActivationSpec("Softplus", lambda m, x, a, b: m.softplus(x)),
    )
}
"""The activations ONNX lists for RNN, GRU and LSTM, by lower-case name (names match
case-insensitively, as in onnxruntime)."""


@dataclass(frozen=True, slots=True)
class Activation:
    spec: ActivationSpec
    alpha: float
    beta: float


def _activations(ctx: LoweringRuleContext, cell: Cell, directions: int) -> list[list[Activation]]:
    """The activations of each direction, with their alpha/beta resolved."""
    names = attribute(ctx, "activations")
    names = list(cell.activations * directions) if names is None else list(names)
    expected = len(cell.activations) * directions
    if len(names) != expected:
        raise ctx.error(
            f"has {len(names)} activations, expected {expected} ({len(cell.activations)} per "
            f"direction: {', '.join(cell.activations)})"
        )
    alphas = iter(attribute(ctx, "activation_alpha", ()) or ())
    betas = iter(attribute(ctx, "activation_beta", ()) or ())
    resolved: list[Activation] = []
    for name in names:
        spec = ACTIVATIONS.get(str(name).lower())
        if spec is None:
            supported = ", ".join(sorted(spec.name for spec in ACTIVATIONS.values()))
            raise ctx.error(f"does not support activation '{name}' (supported: {supported})")
        values = []
        for (takes, default), given, what in (
            (spec.alpha, alphas, "activation_alpha"),
            (spec.beta, betas, "activation_beta"),
        ):
            value = next(given, default) if takes else 0.0
            if value is None:
                raise ctx.error(f"activation '{name}' needs a value in '{what}'")
            values.append(float(value))
        resolved.append(Activation(spec, *values))
    per_direction = len(cell.activations)
    return [resolved[d * per_direction : (d + 1) * per_direction] for d in range(directions)]


# -- the operands ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cell:
    """What differs between RNN, GRU and LSTM: the gate count (rows of W and R per hidden unit),
    the default activations of one direction, the state count (LSTM carries the cell state
    too), and the step building one time step's gate math."""

    name: str
    gates: int
    activations: tuple[str, ...]
    states: int
    step: Callable[[Recurrence, int, mlir_ir.Value, list[mlir_ir.Value]], list[mlir_ir.Value]]


@dataclass(slots=True)
class Recurrence:
    """The checked operands and attributes of one RNN/GRU/LSTM op, its operands already in the
    compute type (`math.type`). `seq` and `batch` are sizes (an int, or the `tensor.dim` of X
    when dynamic); the others are static. `reverse[d]` says direction d walks time
    backwards. `hoist` is set by the loop driver while it builds a direction's steps: the
    insertion point before them, where `invariant()` builds step-independent values once."""

    ctx: LoweringRuleContext
    cell: Cell
    math: FloatMath
    seq: int | mlir_ir.Value
    batch: int | mlir_ir.Value
    input_size: int
    hidden: int
    layout: int
    reverse: tuple[bool, ...]
    clip: float | None
    activations: list[list[Activation]]
    x: mlir_ir.Value
    w: mlir_ir.Value
    r: mlir_ir.Value
    bias: mlir_ir.Value | None
    lengths: mlir_ir.Value | None
    initial: list[mlir_ir.Value | None]
    peepholes: mlir_ir.Value | None
    hoist: mlir_ir.InsertionPoint | None = None
    hoisted: dict[tuple, mlir_ir.Value] = field(default_factory=dict)
    gates_apart: bool = False
    """The step projects the state through R per gate (`project_gates`, set for looped steps
    of a cell that can), and the input projection carries R's bias."""
    bias_in_step: bool = False
    """The input projection is summed from zero and each step's gate math adds its bias
    (`x_gate`): set when the projection has a run-time number of rows.

    NOTE: IREE 3.13 compiles a contraction with a run-time number of rows 3-4x slower when an
    element-wise op is fused into its dispatch (a broadcast bias it starts from, or a bias
    added to its result): 16384x16 by 16x128 takes 2.9 ms so against 0.7 ms summed from zero
    (0.56-0.68 ms either way with static rows; iree-benchmark-module, local-task). A bias
    added to a step's projection row before its gate math is a dispatch of its own, one more
    per step (the bench's LSTM at 1024x16x16: 72-75 -> 84-92 ms a call), so the gate math
    reads the bias itself."""

    @property
    def rows(self) -> int:
        return self.cell.gates * self.hidden

    @property
    def compute(self) -> mlir_ir.Type:
        return self.math.type

    def hoist_before(self, operation: mlir_ir.Operation | None) -> None:
        """Step-independent values of the steps built next go before `operation` (None: where
        they are asked for, as outside any steps)."""
        self.hoist = None if operation is None else mlir_ir.InsertionPoint(operation)
        self.hoisted = {}

    def invariant(self, key: tuple, build: Callable[[], mlir_ir.Value]) -> mlir_ir.Value:
        """The value `build()` makes, the same at every step (a weight slice, a broadcast bias,
        a peephole): built once per direction's steps, before them (`key` names it among
        them), so neither a loop body nor unrolled steps repeat it."""
        if self.hoist is None:
            return build()
        if key not in self.hoisted:
            with self.hoist:
                self.hoisted[key] = build()
        return self.hoisted[key]

    def activate(
        self, direction: int, index: int, value: mlir_ir.Value, *, clipped: bool = True
    ) -> mlir_ir.Value:
        """Activation `index` of `direction` on one element, its input clipped first (unless
        `clipped` is False: LSTM's h(C), as onnxruntime)."""
        if clipped and self.clip is not None:
            value = self.math.clamp(value, -self.clip, self.clip)
        activation = self.activations[direction][index]
        return activation.spec.kernel(self.math, value, activation.alpha, activation.beta)


def parse_recurrence(ctx: LoweringRuleContext, cell: Cell) -> Recurrence:
    """The op's operands and attributes, checked (static shapes of the sizes ONNX demands but
    the sequence length and the batch, one float element type) and widened to the compute
    type."""
    x_value = ctx.niro_operands[0]
    scalar = element_type(x_value)
    if scalar not in FLOATS:
        raise ctx.error(f"expects float inputs, got {format_type(x_value.type)}")
    x_shape = ctx.ranked(x_value, "input X").shape
    if len(x_shape) != 3:
        raise ctx.error(f"expects a rank-3 input X, got {format_type(x_value.type)}")
    layout = int(attribute(ctx, "layout", 0))
    if layout not in (0, 1):
        raise ctx.error(f"attribute 'layout' must be 0 or 1, got {layout}")
    seq_axis, batch_axis = (0, 1) if layout == 0 else (1, 0)
    seq, batch, input_size = x_shape[seq_axis], x_shape[batch_axis], x_shape[2]
    direction = attribute(ctx, "direction", "forward")
    reverse = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}.get(
        direction
    )
    if reverse is None:
        raise ctx.error(
            f"attribute 'direction' must be forward, reverse or bidirectional, got '{direction}'"
        )
    directions = len(reverse)
    r_shape = static_shape(ctx, ctx.niro_operands[2], "input R")
    hidden = r_shape[-1] if r_shape else 0
    hidden = int(attribute(ctx, "hidden_size", hidden))
    if input_size is None:
        w_shape = static_shape(ctx, ctx.niro_operands[1], "input W")
        input_size = w_shape[-1] if w_shape else 0
    rows = cell.gates * hidden
    math = FloatMath(scalar)

    def operand(
        position: int, what: str, shape: tuple[int | None, ...], batch_axis: int | None = None
    ) -> mlir_ir.Value | None:
        """Input `position` in the compute type; only its batch dim (`batch_axis`, whose
        expected size is None when X's is dynamic) may be dynamic."""
        found = input_value(ctx, position)
        if found is None:
            return None
        value, niro_value = found
        if element_type(niro_value) is not scalar:
            raise ctx.error(
                f"expects input {what} of X's element type, got {format_type(niro_value.type)}"
            )
        actual: tuple[int | None, ...]
        if batch_axis is None:
            actual = static_shape(ctx, niro_value, f"input {what}")
        else:
            actual = ctx.ranked(niro_value, f"input {what}").shape
            _check_static_but_batch(ctx, niro_value, what, batch_axis)
        if not _fits(actual, shape):
            raise ctx.error(
                f"expects input {what} of shape {shape_text(shape)}, got "
                f"{format_type(niro_value.type)}"
            )
        return _to_compute(value, math.type)

    state_shape = (directions, batch, hidden) if layout == 0 else (batch, directions, hidden)
    state_batch_axis = 1 if layout == 0 else 0
    lengths = input_value(ctx, SEQUENCE_LENS)
    if lengths is not None:
        lengths_shape = ctx.ranked(lengths[1], "input sequence_lens").shape
        if element_type(lengths[1]) is not ScalarType.I32 or not _fits(lengths_shape, (batch,)):
            raise ctx.error(
                f"expects input sequence_lens of type tensor<{'?' if batch is None else batch}"
                f"xi32>, got {format_type(lengths[1].type)}"
            )
    clip = attribute(ctx, "clip")
    activations = _activations(ctx, cell, directions)
    x = ctx.operands[0]
    # NOTE: the dynamic sizes are read here, before any loop: every builder may use them
    seq_size = dim_size(x, seq_axis) if seq is None else seq
    batch_size = dim_size(x, batch_axis) if batch is None else batch
    x = _to_compute(x, math.type)
    w = operand(W, "W", (directions, rows, input_size))
    r = operand(R, "R", (directions, rows, hidden))
    bias = operand(B, "B", (directions, 2 * rows))
    initial = [
        operand(INITIAL_H, "initial_h", state_shape, state_batch_axis),
        operand(INITIAL_C, "initial_c", state_shape, state_batch_axis)
        if cell.states == 2
        else None,
    ][: cell.states]
    peepholes = operand(P, "P", (directions, 3 * hidden)) if cell.states == 2 else None
    return Recurrence(
        ctx=ctx,
        cell=cell,
        math=math,
        seq=seq_size,
        batch=batch_size,
        input_size=input_size,
        hidden=hidden,
        layout=layout,
        reverse=reverse,
        clip=None if clip is None else float(clip),
        activations=activations,
        x=x,
        w=w,
        r=r,
        bias=bias,
        lengths=None if lengths is None else lengths[0],
        initial=initial,
        peepholes=peepholes,
    )


def _fits(actual: tuple[int | None, ...], expected: tuple[int | None, ...]) -> bool:
    """`actual` has `expected`'s rank and agrees with it wherever both sizes are known."""
    return len(actual) == len(expected) and all(
        a is None or e is None or a == e for a, e in zip(actual, expected, strict=True)
    )


def _check_static_but_batch(ctx: LoweringRuleContext, value, what: str, batch_axis: int) -> None:
    """Refuses a state operand with a dynamic dim other than its batch dim."""
    shape = ctx.ranked(value, f"input {what}").shape
    if any(size is None for axis, size in enumerate(shape) if axis != batch_axis):
        raise ctx.error(
            f"needs a static shape for input {what} but its batch dim (axis {batch_axis}), "
            f"got {format_type(value.type)}"
        )


def shape_text(shape: Sequence[int | None]) -> str:
    """A shape as `[1, ?, 3]`: as `list(shape)` prints a static one."""
    return "[" + ", ".join("?" if size is None else str(size) for size in shape) + "]"


def static_size(size: int | mlir_ir.Value) -> int:
    """A size as a static dim of an MLIR type: the dynamic marker for an index value."""
    return size if isinstance(size, int) else DYNAMIC


def _to_compute(value: mlir_ir.Value, compute: mlir_ir.Type) -> mlir_ir.Value:
    """`value` with its elements widened to the compute type (itself when already there)."""
    shaped = mlir_ir.RankedTensorType(value.type)
    if shaped.element_type == compute:
        return value
    identity = list(range(shaped.rank))
    return generic(
        [(value, identity)],
        [(empty(tensor_sizes(value), compute), identity)],
        shaped.rank,
        (),
        lambda arguments: [arith.ExtFOp(compute, arguments[0]).result],
    )[0]


# -- structured builders --------------------------------------------------------------------------


def slab(
    value: mlir_ir.Value, offsets: Sequence[int], sizes: Sequence[int | mlir_ir.Value], dropped: int = 0
) -> mlir_ir.Value:
    """The slice of `value` at the static `offsets` of `sizes` (a dynamic one: the batch), its
    first `dropped` dims (of size 1) dropped.

    NOTE: gates, weight rows and peepholes are sliced out rather than read through offset
    affine maps (`d1 + 2 * hidden`): linalg infers a loop's range from the first operand that
    indexes it by a bare dim, and an offset of 0 folds to a bare dim over the whole tensor."""
    element = mlir_ir.RankedTensorType(value.type).element_type
    static = [static_size(size) for size in sizes]
    return tensor.ExtractSliceOp(
        mlir_ir.RankedTensorType.get(static[dropped:], element),
        value,
        [],
        [size for size in sizes if not isinstance(size, int)],
        [],
        list(offsets),
        static,
        [1] * len(sizes),
    ).result


def project(
    rec: Recurrence,
    source: mlir_ir.Value,
    source_map: Sequence[int],
    outer: Sequence[int | mlir_ir.Value],
    weight: mlir_ir.Value,
    direction: int,
    first_row: int,
    rows: int,
    bias_offsets: Sequence[int],
) -> mlir_ir.Value:
    """source * weight[direction, first_row:first_row + rows]^T + bias, of shape (*outer, rows).

    The loops are (*outer, g, k): `source_map` indexes `source` by them (k the reduced input
    dim). The bias is the sum of B[direction, offset + first_row:][:rows] for each of
    `bias_offsets` (W's half of B at offset 0, R's at gates * hidden); without B or offsets the
    sum starts at zero."""
    return _projections(
        rec, source, source_map, outer, weight, direction, [first_row], rows, bias_offsets
    )[0]


def _projections(
    rec: Recurrence,
    source: mlir_ir.Value,
    source_map: Sequence[int],
    outer: Sequence[int | mlir_ir.Value],
    weight: mlir_ir.Value,
    direction: int,
    first_rows: Sequence[int],
    rows: int,
    bias_offsets: Sequence[int],
) -> list[mlir_ir.Value]:
    """`project` for each of `first_rows`, all from one `linalg.generic` with a result each."""
    g, k = len(outer), len(outer) + 1
    out_map = list(range(len(outer) + 1))
    math = rec.math

    def start(first_row: int) -> mlir_ir.Value:
        init = empty([*outer, rows], rec.compute)
        if rec.bias is None or not bias_offsets:
            return fill(init, math.zero())
        halves = [
            (_bias_part(rec, direction, offset + first_row, rows), [g]) for offset in bias_offsets
        ]
        return generic(
            halves,
            [(init, out_map)],
            len(outer) + 1,
            (),
            lambda values: [functools.reduce(math.add, values[: len(halves)])],
        )[0]

    def weight_rows(first_row: int) -> mlir_ir.Value:
        columns = mlir_ir.RankedTensorType(weight.type).shape[2]
        return slab(weight, [direction, first_row, 0], [1, rows, columns], 1)

    inits = [
        rec.invariant(
            ("start", len(outer), direction, first_row, rows, tuple(bias_offsets)),
            functools.partial(start, first_row),
        )
        for first_row in first_rows
    ]
    weights = [
        rec.invariant(
            ("rows", id(weight), direction, first_row, rows),
            functools.partial(weight_rows, first_row),
        )
        for first_row in first_rows
    ]
    count = len(first_rows)

    def body(arguments: Sequence[mlir_ir.Value]) -> list[mlir_ir.Value]:
        element = arguments[0]
        return [
            math.add(math.mul(element, arguments[1 + part]), arguments[1 + count + part])
            for part in range(count)
        ]

    return generic(
        [(source, source_map), *((rows_of_weight, [g, k]) for rows_of_weight in weights)],
        [(init, out_map) for init in inits],
        len(outer) + 2,
        (k,),
        body,
    )


def project_state(
    rec: Recurrence, state: mlir_ir.Value, direction: int, first_row: int, rows: int
) -> mlir_ir.Value:
    """state * R[direction, first_row:first_row + rows]^T + Rb: (batch, rows)."""
    return project(rec, state, [0, 2], (rec.batch,), rec.r, direction, first_row, rows, [rec.rows])


def project_gates(
    rec: Recurrence, state: mlir_ir.Value, direction: int, first_gate: int, count: int
) -> list[mlir_ir.Value]:
    """state * R[direction, gate rows]^T, without Rb (`gates_apart`: the input projection adds
    it), of gates first_gate.. first_gate + count - 1: a (batch, hidden) tensor each, from one
    `linalg.generic` with a result per gate, each summed from zero.

    Why: the cell's gate math reads each gate over (batch, hidden), which IREE then fuses into
    the projection's dispatch: a step is one dispatch. Read as slices of one (batch, gates *
    hidden) projection, the gate math was a dispatch of its own, two a step. The bench's
    dynamic 2-layer bidirectional LSTM (32 steps, looped) ran 0.58 -> 0.51 ms a call. Unrolled
    steps keep the one projection: each fused step reads X's projection and writes Y at its
    own offsets, so IREE shares no executable between steps, and the static LSTM's
    iree-compile took 15 s of CPU against 7 s (0.24 against 0.26 ms a call).
    NOTE: IREE 3.13 mishandles such a many-result reduction whose results start from anything
    but a fill (a broadcast bias): it computes wrong numbers (a bidirectional LSTM with
    sequence_lens, tests/backends/mlir/onnx_ops/test_recurrent_dynamic.py) or fails ("write
    affecting operations on global resources are restricted to workgroup distributed
    contexts"), so Rb goes into the input projection."""
    assert rec.gates_apart, rec.cell.name
    hidden = rec.hidden
    first_rows = [(first_gate + part) * hidden for part in range(count)]
    return _projections(rec, state, [0, 2], (rec.batch,), rec.r, direction, first_rows, hidden, [])


def gate(rec: Recurrence, value: mlir_ir.Value, index: int) -> tuple[mlir_ir.Value, list]:
    """Gate `index` of a (batch, gates * hidden) projection, read over (batch, hidden) loops."""
    return slab(value, [0, index * rec.hidden], [rec.batch, rec.hidden]), [0, 1]


def input_bias_offsets(rec: Recurrence) -> list[int]:
    """The halves of B an input projection's rows get: W's (at 0), and R's (at gates *
    hidden) when the step projects the state per gate without it (`gates_apart`)."""
    return [0, rec.rows] if rec.gates_apart else [0]


@dataclass(frozen=True, slots=True)
class Sum:
    """Inputs of an `elementwise` op whose elements its body gets added into one."""

    parts: tuple[tuple[mlir_ir.Value, list], ...]


def x_gate(
    rec: Recurrence, direction: int, x_step: mlir_ir.Value, index: int
) -> tuple[mlir_ir.Value, list] | Sum:
    """Gate `index` of a step's row of its direction's input projection, read over (batch,
    hidden) loops: with the gate's bias added when the projection was summed from zero
    (`Recurrence.bias_in_step`)."""
    read = gate(rec, x_step, index)
    if not rec.bias_in_step or rec.bias is None:
        return read
    first = index * rec.hidden
    halves = [
        (_bias_part(rec, direction, offset + first, rec.hidden), [1])
        for offset in input_bias_offsets(rec)
    ]
    return Sum((read, *halves))


def _bias_part(rec: Recurrence, direction: int, first: int, size: int) -> mlir_ir.Value:
    """B[direction, first:first + size] (W's half of B from 0, R's from gates * hidden), built
    once per direction's steps (`Recurrence.invariant`)."""
    bias = rec.bias
    assert bias is not None, "only a recurrence with B has a bias to read"
    return rec.invariant(
        ("bias", direction, first, size),
        functools.partial(slab, bias, [direction, first], [1, size], 1),
    )


def state(value: mlir_ir.Value) -> tuple[mlir_ir.Value, list]:
    """A (batch, hidden) tensor read over (batch, hidden) loops."""
    return value, [0, 1]


def peephole(rec: Recurrence, direction: int, index: int) -> tuple[mlir_ir.Value, list]:
    """Peephole `index` (i, o, f) of `direction`, read over (batch, hidden) loops."""
    peepholes = rec.peepholes
    assert peepholes is not None
    value = rec.invariant(
        ("peephole", direction, index),
        lambda: slab(peepholes, [direction, index * rec.hidden], [1, rec.hidden], 1),
    )
    return value, [1]


def elementwise(
    rec: Recurrence,
    inputs: Sequence[tuple[mlir_ir.Value, list] | Sum],
    outputs: int,
    body: Callable[..., Sequence[mlir_ir.Value]],
) -> list[mlir_ir.Value]:
    """A `linalg.generic` over (batch, hidden) computing `outputs` (batch, hidden) tensors;
    `body(*elements)` gets one element of each input (of a `Sum`, its parts' elements added)."""
    groups = [entry.parts if isinstance(entry, Sum) else (entry,) for entry in inputs]
    flat = [part for group in groups for part in group]

    def summed(arguments: Sequence[mlir_ir.Value]) -> list[mlir_ir.Value]:
        elements, at = [], 0
        for group in groups:
            elements.append(functools.reduce(rec.math.add, arguments[at : at + len(group)]))
            at += len(group)
        return list(body(*elements))

    return generic(
        flat,
        [(empty([rec.batch, rec.hidden], rec.compute), [0, 1]) for _ in range(outputs)],
        2,
        (),
        summed,
    )
