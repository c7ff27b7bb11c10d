"""What an op imported from another framework's graph carries: the frontend-backend contract.

A frontend keeps a node it does not turn into Niro's own ops as an `UnknownOp` named
`<domain>.<op type>` (`onnx.Relu`, `com.microsoft.QLinearConcat`). Its operands and results are
the node's present inputs and outputs in order, its regions the node's graph attributes, and its
attributes the node's own plus this bookkeeping:

    niro.opset           int   version of the domain's op set whose semantics the op has
    absent_inputs        ints  input positions the node leaves empty (the operands skip them)
    absent_outputs       ints  output positions the node leaves empty (the results skip them)
    regions              strs  the graph attribute each region stands for, in region order
                               (`body`, `then_branch`; `branches#1` for a list of graphs)
    niro.generic_reason  str   why the frontend kept an op it usually converts (for messages)

`ImportedOp` is the typed view of such an op: inputs and outputs by the node's positions (None
where absent), the op set version, the node's own attributes, regions by name. The frontend
writes it (`write_imported_op`); type rules and lowerings read it (`read_imported_op`). This is
the one module that spells the bookkeeping keys; everything else uses the names below.

Pure Python like the rest of `niro.ir`: it knows the encoding, not any framework's ops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .attributes import Attribute
from .ops import UnknownOp
from .structure import Region
from .values import Value

__all__ = [
    "ABSENT_INPUTS_ATTRIBUTE",
    "ABSENT_OUTPUTS_ATTRIBUTE",
    "BOOKKEEPING_ATTRIBUTES",
    "GENERIC_REASON_ATTRIBUTE",
    "OPSET_ATTRIBUTE",
    "REGIONS_ATTRIBUTE",
    "ImportedOp",
    "ImportedOpError",
    "absent_positions",
    "by_position",
    "read_imported_op",
    "region_names",
    "write_imported_op",
]

OPSET_ATTRIBUTE = "niro.opset"
"""UnknownOp attribute: the version of the op set (e.g. the ONNX opset of the op's domain) whose
semantics the op has, so a registered lowering can refuse versions it does not implement."""

GENERIC_REASON_ATTRIBUTE = "niro.generic_reason"
"""UnknownOp attribute (optional str): why a frontend kept as an UnknownOp an op it usually
turns into Niro's own ops (an ONNX Transpose of unknown rank), for the backend's message when
no lowering takes it."""

ABSENT_INPUTS_ATTRIBUTE = "absent_inputs"
"""UnknownOp attribute (tuple of ints): the input positions the node leaves empty."""

ABSENT_OUTPUTS_ATTRIBUTE = "absent_outputs"
"""UnknownOp attribute (tuple of ints): the output positions the node leaves empty."""

REGIONS_ATTRIBUTE = "regions"
"""UnknownOp attribute (tuple of strs): the graph attribute each of the op's regions stands for."""

BOOKKEEPING_ATTRIBUTES = frozenset(
    {
        OPSET_ATTRIBUTE,
        GENERIC_REASON_ATTRIBUTE,
        ABSENT_INPUTS_ATTRIBUTE,
        ABSENT_OUTPUTS_ATTRIBUTE,
        REGIONS_ATTRIBUTE,
    }
)
"""The attributes the contract adds to an UnknownOp; none of them is the node's own."""


class ImportedOpError(ValueError):
    """An UnknownOp whose bookkeeping does not follow the contract, or a view that cannot be
    written as one; the message names the attribute and what it must be."""


@dataclass(frozen=True, eq=False, slots=True)
class ImportedOp:
    """An imported op by the node's positions (see the module docstring).

    Invariants: `inputs` has one entry per input position the node lists, None where the node
    leaves it empty, the others being the op's operands in order; `outputs` likewise for
    results. `attributes` holds none of `BOOKKEEPING_ATTRIBUTES`. `regions` keeps the op's region
    order. The view shares its values and regions with the op it was read from or written to.
    """

    name: str
    inputs: tuple[Value | None, ...]
    outputs: tuple[Value | None, ...]
    attributes: Mapping[str, Attribute] = field(default_factory=dict)
    regions: Mapping[str, Region] = field(default_factory=dict)
    opset: int | None = None
    generic_reason: str | None = None
    loc: str | None = None

    @property
    def domain(self) -> str:
        """The name up to its last dot: the op set the op belongs to (`onnx`, `ai.onnx.ml`)."""
        return self.name.rpartition(".")[0]

    @property
    def op_type(self) -> str:
        """The name after its last dot (`Relu`)."""
        return self.name.rpartition(".")[2]

    def input(self, position: int) -> Value | None:
        """Input `position`, or None when the node leaves it empty or lists fewer inputs."""
        return self.inputs[position] if 0 <= position < len(self.inputs) else None

    def output(self, position: int) -> Value | None:
        """Output `position`, or None when the node leaves it empty or lists fewer outputs."""
        return self.outputs[position] if 0 <= position < len(self.outputs) else None

    def operand_index(self, position: int) -> int | None:
        """Where input `position` is among the op's operands, or None when it is absent."""
        if self.input(position) is None:
            return None
        return sum(1 for value in self.inputs[:position] if value is not None)

    @property
    def absent_inputs(self) -> tuple[int, ...]:
        return tuple(position for position, value in enumerate(self.inputs) if value is None)

    @property
    def absent_outputs(self) -> tuple[int, ...]:
        return tuple(position for position, value in enumerate(self.outputs) if value is None)

    @property
    def output_positions(self) -> tuple[int, ...]:
        """The positions of the outputs the op has results for, in result order."""
        return tuple(position for position, value in enumerate(self.outputs) if value is not None)


def absent_positions(value: object, present: int) -> tuple[int, ...] | None:
    """An `absent_inputs`/`absent_outputs` attribute read beside `present` values: its
    positions, or None unless it is a tuple of distinct ints below `present` plus its length."""
    if not isinstance(value, tuple):
        return None
    total = present + len(value)
    if not all(
        isinstance(position, int) and not isinstance(position, bool) and 0 <= position < total
        for position in value
    ):
        return None
    return value if len(set(value)) == len(value) else None


def region_names(value: object) -> tuple[str, ...] | None:
    """A `regions` attribute as names, or None unless it is a tuple of strs."""
    if isinstance(value, tuple) and all(isinstance(name, str) for name in value):
        return value
    return None


def by_position(values: Sequence[Value], absent: tuple[int, ...]) -> tuple[Value | None, ...]:
    """`values` placed at the positions `absent` leaves free (None at those it lists)."""
    if not absent:
        return tuple(values)
    remaining = iter(values)
    return tuple(
        None if position in absent else next(remaining)
        for position in range(len(values) + len(absent))
    )


def read_imported_op(op: UnknownOp) -> ImportedOp:
    """The view of `op`; ImportedOpError when its bookkeeping breaks the contract (a verified
    module's ops never do: the operator libraries' type rules report it)."""
    attributes = op.attributes
    absent_inputs = absent_positions(attributes.get(ABSENT_INPUTS_ATTRIBUTE, ()), len(op.operands))
    if absent_inputs is None:
        raise ImportedOpError(
            f"attribute '{ABSENT_INPUTS_ATTRIBUTE}' must be a tuple of distinct input positions"
        )
    absent_outputs = absent_positions(attributes.get(ABSENT_OUTPUTS_ATTRIBUTE, ()), len(op.results))
    if absent_outputs is None:
        raise ImportedOpError(
            f"attribute '{ABSENT_OUTPUTS_ATTRIBUTE}' must be a tuple of distinct output positions"
        )
    names = region_names(attributes.get(REGIONS_ATTRIBUTE, ()))
    if names is None or len(names) != len(op.regions) or len(set(names)) != len(names):
        raise ImportedOpError(
            f"attribute '{REGIONS_ATTRIBUTE}' must name each of the op's {len(op.regions)} "
            "regions once"
        )
    opset = attributes.get(OPSET_ATTRIBUTE)
    if opset is not None and (not isinstance(opset, int) or isinstance(opset, bool) or opset < 1):
        raise ImportedOpError(f"attribute '{OPSET_ATTRIBUTE}' must be a positive int")
    reason = attributes.get(GENERIC_REASON_ATTRIBUTE)
    if reason is not None and not isinstance(reason, str):
        raise ImportedOpError(f"attribute '{GENERIC_REASON_ATTRIBUTE}' must be a str")
    return ImportedOp(
        name=op.name,
        inputs=by_position(op.operands, absent_inputs),
        outputs=by_position(op.results, absent_outputs),
        attributes={
            name: value for name, value in attributes.items() if name not in BOOKKEEPING_ATTRIBUTES
        },
        regions=dict(zip(names, op.regions, strict=True)),
        opset=opset,
        generic_reason=reason,
        loc=op.loc,
    )


def write_imported_op(imported: ImportedOp) -> UnknownOp:
    """The UnknownOp carrying `imported`: the node's attributes first, then the bookkeeping
    (only what is not empty). ImportedOpError when a node attribute has a bookkeeping name."""
    clashes = BOOKKEEPING_ATTRIBUTES.intersection(imported.attributes)
    if clashes:
        raise ImportedOpError(
            f"has attribute '{min(clashes)}', a name niroc keeps for its own bookkeeping"
        )
    attributes: dict[str, Attribute] = dict(imported.attributes)
    if imported.regions:
        attributes[REGIONS_ATTRIBUTE] = tuple(imported.regions)
    if any(value is None for value in imported.inputs):
        attributes[ABSENT_INPUTS_ATTRIBUTE] = imported.absent_inputs
    if any(value is None for value in imported.outputs):
        attributes[ABSENT_OUTPUTS_ATTRIBUTE] = imported.absent_outputs
    if imported.generic_reason is not None:
        attributes[GENERIC_REASON_ATTRIBUTE] = imported.generic_reason
    if imported.opset is not None:
        attributes[OPSET_ATTRIBUTE] = imported.opset
    return UnknownOp(
        imported.name,
        tuple(value for value in imported.inputs if value is not None),
        tuple(value for value in imported.outputs if value is not None),
        attributes,
        tuple(imported.regions.values()),
        loc=imported.loc,
    )
