"""The closed union of Niro operations, and the generic accessors every pass uses.

Ops are mutable dataclasses compared by identity (`eq=False`): two `Add`s with equal fields are
still two operations. Use `structurally_equal` to compare IR by content. Each op may carry a
`loc`, the source location (the ONNX node name), kept by the printer and parser so diagnostics
and MLIR locations can point back at the model.

Generic code never inspects op classes by name: it calls `operands_of`, `results_of`,
`regions_of`, `successors_of`, or matches exhaustively over `Op` with an `assert_never` arm, so
adding an op kind shows every place that must learn it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from ._never import assert_never
from .attributes import Attribute, Literal
from .values import Value

if TYPE_CHECKING:
    from .structure import Block, Region

__all__ = [
    "Const",
    "GetGlobal",
    "Transpose",
    "TensorExtract",
    "Add",
    "Mul",
    "MatMul",
    "Call",
    "Branch",
    "CondBranch",
    "Return",
    "Yield",
    "If",
    "UnknownOp",
    "Op",
    "OP_KINDS",
    "op_name",
    "operands_of",
    "results_of",
    "regions_of",
    "successors_of",
    "is_terminator",
]


def _tuple(items) -> tuple:
    return items if isinstance(items, tuple) else tuple(items)


@dataclass(eq=False, slots=True)
class Const:
    """Introduces `literal` as the typed SSA value `result`."""

    result: Value
    literal: Literal
    loc: str | None = field(default=None, kw_only=True)


@dataclass(eq=False, slots=True)
class GetGlobal:
    """Reads the module Global named `name` as the SSA value `result`."""

    result: Value
    name: str
    loc: str | None = field(default=None, kw_only=True)


@dataclass(eq=False, slots=True)
class Transpose:
    """`result` dim i is `operand` dim `permutation[i]`."""

    result: Value
    operand: Value
    permutation: tuple[int, ...]
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.permutation = _tuple(self.permutation)


@dataclass(eq=False, slots=True)
class TensorExtract:
    """Reads one element of a ranked tensor; one I32/I64 scalar index per axis."""

    result: Value
    operand: Value
    indices: tuple[Value, ...] = ()
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.indices = _tuple(self.indices)


@dataclass(eq=False, slots=True)
class Add:
    """Scalar or broadcasting element-wise addition."""

    result: Value
    lhs: Value
    rhs: Value
    loc: str | None = field(default=None, kw_only=True)


@dataclass(eq=False, slots=True)
class Mul:
    """Scalar or broadcasting element-wise multiplication."""

    result: Value
    lhs: Value
    rhs: Value
    loc: str | None = field(default=None, kw_only=True)


@dataclass(eq=False, slots=True)
class MatMul:
    """Rank-2 matrix multiplication: (M, K) x (K, N) -> (M, N)."""

    result: Value
    lhs: Value
    rhs: Value
    loc: str | None = field(default=None, kw_only=True)


@dataclass(eq=False, slots=True)
class Call:
    """Calls the Function named `callee` (a definition or a declaration in the same module)."""

    callee: str
    arguments: tuple[Value, ...] = ()
    results: tuple[Value, ...] = ()
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.arguments = _tuple(self.arguments)
        self.results = _tuple(self.results)


@dataclass(eq=False, slots=True)
class Branch:
    """Terminator: jumps to `target`, binding `arguments` to its block arguments."""

    target: Block
    arguments: tuple[Value, ...] = ()
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.arguments = _tuple(self.arguments)


@dataclass(eq=False, slots=True)
class CondBranch:
    """Terminator: jumps to `true_target` when the scalar BOOL `condition` holds, else `false_target`."""

    condition: Value
    true_target: Block
    false_target: Block
    true_arguments: tuple[Value, ...] = ()
    false_arguments: tuple[Value, ...] = ()
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.true_arguments = _tuple(self.true_arguments)
        self.false_arguments = _tuple(self.false_arguments)


@dataclass(eq=False, slots=True)
class Return:
    """Terminator of a function body: returns `operands` to the caller."""

    operands: tuple[Value, ...] = ()
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.operands = _tuple(self.operands)


@dataclass(eq=False, slots=True)
class Yield:
    """Terminator of a nested region: passes `operands` to the op that owns the region."""

    operands: tuple[Value, ...] = ()
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.operands = _tuple(self.operands)


@dataclass(eq=False, slots=True)
class If:
    """Runs `then_region` or `else_region` by a scalar BOOL; their Yields become `results`.

    Owns both regions: each holds exactly one argument-free block ending in Yield.
    """

    results: tuple[Value, ...]
    condition: Value
    then_region: Region
    else_region: Region
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.results = _tuple(self.results)


@dataclass(eq=False, slots=True)
class UnknownOp:
    """An operation whose semantics Niro does not model yet (e.g. `onnx.Relu`).

    It keeps a complete SSA interface. `regions` are owned and may be empty; `successors` make it
    a terminator whose targets lie in the enclosing region (their operand conventions are opaque,
    so successor operands travel in `operands`).
    """

    name: str
    operands: tuple[Value, ...] = ()
    results: tuple[Value, ...] = ()
    attributes: dict[str, Attribute] = field(default_factory=dict)
    regions: tuple[Region, ...] = ()
    successors: tuple[Block, ...] = ()
    loc: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        self.operands = _tuple(self.operands)
        self.results = _tuple(self.results)
        self.regions = _tuple(self.regions)
        self.successors = _tuple(self.successors)
        if self.attributes is None:
            self.attributes = {}


Op = Union[
    Const,
    GetGlobal,
    Transpose,
    TensorExtract,
    Add,
    Mul,
    MatMul,
    Call,
    Branch,
    CondBranch,
    Return,
    Yield,
    If,
    UnknownOp,
]

OP_KINDS: tuple[type, ...] = (
    Const,
    GetGlobal,
    Transpose,
    TensorExtract,
    Add,
    Mul,
    MatMul,
    Call,
    Branch,
    CondBranch,
    Return,
    Yield,
    If,
    UnknownOp,
)
"""Every member of the `Op` union, in the spec's order."""

_KNOWN_OP_NAMES: dict[type, str] = {
    Const: "niro.const",
    GetGlobal: "niro.get_global",
    Transpose: "niro.transpose",
    TensorExtract: "niro.tensor_extract",
    Add: "niro.add",
    Mul: "niro.mul",
    MatMul: "niro.matmul",
    Call: "niro.call",
    Branch: "niro.br",
    CondBranch: "niro.cond_br",
    Return: "niro.return",
    Yield: "niro.yield",
    If: "niro.if",
}


def op_name(op: Op) -> str:
    """The assembly name: `niro.add`, ..., or an UnknownOp's own name (`onnx.Relu`)."""
    if isinstance(op, UnknownOp):
        return op.name
    return _KNOWN_OP_NAMES[type(op)]


def operands_of(op: Op) -> tuple[Value, ...]:
    """Every value `op` reads, in order (successor arguments included)."""
    match op:
        case Const() | GetGlobal():
            return ()
        case Transpose():
            return (op.operand,)
        case TensorExtract():
            return (op.operand, *op.indices)
        case Add() | Mul() | MatMul():
            return (op.lhs, op.rhs)
        case Call():
            return op.arguments
        case Branch():
            return op.arguments
        case CondBranch():
            return (op.condition, *op.true_arguments, *op.false_arguments)
        case Return() | Yield():
            return op.operands
        case If():
            return (op.condition,)
        case UnknownOp():
            return op.operands
        case _:
            assert_never(op)


def results_of(op: Op) -> tuple[Value, ...]:
    """Every value `op` defines, in order."""
    match op:
        case Const() | GetGlobal() | Transpose() | TensorExtract() | Add() | Mul() | MatMul():
            return (op.result,)
        case Call() | If() | UnknownOp():
            return op.results
        case Branch() | CondBranch() | Return() | Yield():
            return ()
        case _:
            assert_never(op)


def regions_of(op: Op) -> tuple[Region, ...]:
    """The regions `op` owns."""
    match op:
        case If():
            return (op.then_region, op.else_region)
        case UnknownOp():
            return op.regions
        case (
            Const() | GetGlobal() | Transpose() | TensorExtract() | Add() | Mul() | MatMul()
            | Call() | Branch() | CondBranch() | Return() | Yield()
        ):
            return ()
        case _:
            assert_never(op)


def successors_of(op: Op) -> tuple[tuple[Block, tuple[Value, ...] | None], ...]:
    """The CFG edges leaving `op`: (target, arguments), arguments None when opaque (UnknownOp)."""
    match op:
        case Branch():
            return ((op.target, op.arguments),)
        case CondBranch():
            return ((op.true_target, op.true_arguments), (op.false_target, op.false_arguments))
        case UnknownOp():
            return tuple((target, None) for target in op.successors)
        case (
            Const() | GetGlobal() | Transpose() | TensorExtract() | Add() | Mul() | MatMul()
            | Call() | Return() | Yield() | If()
        ):
            return ()
        case _:
            assert_never(op)


def is_terminator(op: Op) -> bool:
    """Branch, CondBranch, Return, Yield, or an UnknownOp with successors."""
    if isinstance(op, (Branch, CondBranch, Return, Yield)):
        return True
    return isinstance(op, UnknownOp) and bool(op.successors)
