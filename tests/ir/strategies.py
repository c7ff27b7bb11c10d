"""Hypothesis strategies for random WELL-FORMED Niro modules (for round-trip and verifier tests).

    from tests.ir.strategies import modules, scalar_types, types, attributes

`modules()` draws a Module that `niro.ir.verify` must accept: globals of every scalar type and
static tensors (zero-size ones included), functions whose signatures use dynamic and unranked
tensors, CFGs with loops through block arguments (every non-entry block reachable, no branch to
an entry), nested Ifs, calls, UnknownOps with generic attributes, regions and successors, and
names (symbols, input/output names, locs, attribute keys, op names) with odd characters.

How well-formedness is kept: every value a block uses is visible there by construction. A
region's non-entry blocks only use what its entry block sees or defines (the entry dominates
them), their own arguments, and values defined before in the same block; nested regions capture
what is visible before their op. Branch arguments and block argument types come from values
visible at the region's entry, so every edge can be fed; anything else that is needed (a BOOL
condition, an operand of a static type) is made on the spot with a Const.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st
from niro.ir import (
    Add,
    Block,
    Branch,
    Call,
    CondBranch,
    Const,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    If,
    MatMul,
    Module,
    Mul,
    Region,
    Return,
    ScalarType,
    TensorExtract,
    TensorType,
    Transpose,
    UnknownOp,
    Value,
    ValueId,
    Yield,
)

__all__ = [
    "modules",
    "scalar_types",
    "static_tensor_types",
    "types",
    "literals_for",
    "attributes",
    "names",
    "symbol_names",
]

scalar_types = st.sampled_from(list(ScalarType))
_NUMERIC = [scalar for scalar in ScalarType if not scalar.is_bool]

names = st.one_of(
    st.text(min_size=1, max_size=8),
    st.sampled_from(
        ["x", "conv 1/weight", 'quo"te', "back\\slash", "new\nline", "ünï", "@odd", "inf"]
    ),
)
"""Non-empty names with odd characters (unicode, quotes, backslashes, newlines)."""

symbol_names = st.one_of(names, st.from_regex(r"[A-Za-z_][A-Za-z0-9_$.]{0,6}", fullmatch=True))


def static_tensor_types(element=scalar_types, max_rank: int = 3, max_dim: int = 3):
    return st.builds(
        TensorType, element, st.lists(st.integers(0, max_dim), max_size=max_rank).map(tuple)
    )


def _dynamic_tensor_types(element=scalar_types):
    dims = st.lists(st.one_of(st.integers(0, 4), st.none()), max_size=3).map(tuple)
    return st.builds(TensorType, element, st.one_of(dims, st.none()))


types = st.one_of(scalar_types, static_tensor_types(), _dynamic_tensor_types())
"""Any type: scalars, static, dynamic-dim, rank-zero and unranked tensors."""

_FLOAT_WIDTH = {ScalarType.F16: 16, ScalarType.BF16: 16, ScalarType.F32: 32, ScalarType.F64: 64}


def literals_for(type_) -> st.SearchStrategy:
    """Literals `verify` accepts for `type_` (static tensors: exactly as many bytes as needed)."""
    if isinstance(type_, TensorType):
        count = 1
        for dim in type_.shape:
            count *= dim
        size = type_.element_type.buffer_size(count)
        return st.binary(min_size=size, max_size=size)
    if type_.is_bool:
        return st.booleans()
    if type_.is_integer:
        low, high = type_.integer_range
        return st.integers(low, high)
    if type_.is_narrow_float:  # FP8/FP4: within every one's range (FP4 tops out at 6)
        return st.one_of(st.floats(-6, 6, width=16), st.integers(-6, 6))
    return st.one_of(st.floats(width=_FLOAT_WIDTH[type_]), st.integers(-1000, 1000))


attributes = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.text(max_size=6),
        st.binary(max_size=12),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(names, children, max_size=3),
    ),
    max_leaves=6,
)
"""Generic attribute values of every kind, nested."""

_UNKNOWN_NAMES = st.one_of(
    st.sampled_from(["onnx.Split", "onnx.LeakyRelu", "custom.op", 'my op "1"']), names
)


@dataclass
class _ModuleShape:
    globals: list[Global]
    signatures: dict[str, FunctionType]


@dataclass
class _FunctionBuilder:
    """Builds one function body; `next_id` hands out unique (gapped) ValueIds."""

    draw: object
    module: _ModuleShape
    max_depth: int
    next_id: int = 0
    value_ids: list[int] = field(default_factory=list)

    def new_value(self, type_) -> Value:
        value = Value(ValueId(self.next_id), type_)
        self.next_id += self.draw(st.sampled_from([1, 1, 1, 2, 7]))
        return value

    def loc(self):
        return self.draw(st.one_of(st.none(), names))

    # -- getting a value of a type -------------------------------------------------------

    def value_of(self, type_, visible: list[Value], ops: list) -> Value:
        """A visible value of `type_`, or a new Const of it (needs a static type)."""
        matching = [value for value in visible if value.type == type_]
        if matching and self.draw(st.integers(0, 3)) > 0:
            return self.draw(st.sampled_from(matching))
        if not _constable(type_):
            return self.draw(st.sampled_from(matching))
        result = self.new_value(type_)
        ops.append(Const(result, self.draw(literals_for(type_)), loc=self.loc()))
        visible.append(result)
        return result

    def obtainable_type(self, visible: list[Value]):
        """A type a value can be found or made for."""
        pool = [value.type for value in visible]
        if pool and self.draw(st.booleans()):
            return self.draw(st.sampled_from(pool))
        return self.draw(st.one_of(scalar_types, static_tensor_types()))

    # -- blocks and regions ----------------------------------------------------------------

    def body_ops(self, visible: list[Value], ops: list, depth: int) -> None:
        """Appends 0..4 non-terminator ops to `ops`; their results join `visible`."""
        for _ in range(self.draw(st.integers(0, 4))):
            kinds = ["const", "add", "mul", "matmul", "transpose", "extract", "unknown"]
            if self.module.globals:
                kinds.append("get_global")
            if self.module.signatures:
                kinds.append("call")
            if depth < self.max_depth:
                kinds += ["if", "unknown_regions"]
            getattr_table = _OP_MAKERS[self.draw(st.sampled_from(kinds))]
            getattr_table(self, visible, ops, depth)

    def region(
        self, outer: list[Value], exit_kind: str, exit_types, depth: int, entry_types=()
    ) -> Region:
        """A CFG region: 1..3 blocks (1 when nested deep), exits by Return/Yield or loops."""
        max_blocks = 3 if depth <= 1 else 1
        count = self.draw(st.integers(1, max_blocks))
        entry = Block(arguments=tuple(self.new_value(type_) for type_ in entry_types))
        blocks = [entry] + [Block() for _ in range(count - 1)]
        entry_visible = [*outer, *entry.arguments]
        pool = [value.type for value in entry_visible]
        for block in blocks[1:]:
            if pool:
                arg_types = self.draw(st.lists(st.sampled_from(pool), max_size=2))
                block.arguments = tuple(self.new_value(type_) for type_ in arg_types)
        children: list[list[Block]] = [[] for _ in blocks]
        for index in range(1, count):
            children[self.draw(st.integers(0, index - 1))].append(blocks[index])
        self.body_ops(entry_visible, entry.operations, depth)
        for index, block in enumerate(blocks):
            if index == 0:
                visible = entry_visible
            else:
                visible = [*entry_visible, *block.arguments]
                self.body_ops(visible, block.operations, depth)
            self.terminate(block, visible, children[index], blocks[1:], exit_kind, exit_types)
        return Region(blocks)

    def terminate(self, block, visible, required, non_entry, exit_kind, exit_types) -> None:
        ops = block.operations
        choices = []
        if not required:
            choices.append("exit")
        if non_entry and len(required) <= 1:
            choices.append("br")
        if non_entry and len(required) <= 2:
            choices.append("cond_br")
        if non_entry:
            choices.append("unknown")
        kind = self.draw(st.sampled_from(choices))
        if kind == "exit":
            operands = (
                [self.value_of(type_, visible, ops) for type_ in exit_types]
                if exit_types is not None
                else self.draw(st.lists(st.sampled_from(visible), max_size=2))
                if visible
                else []
            )
            terminator = Return if exit_kind == "return" else Yield
            ops.append(terminator(tuple(operands), loc=self.loc()))
            return
        wanted = {"br": 1, "cond_br": 2, "unknown": len(required) + self.draw(st.integers(0, 2))}[
            kind
        ]
        wanted = max(wanted, 1)
        targets = list(required)
        while len(targets) < wanted:
            targets.append(self.draw(st.sampled_from(non_entry)))
        targets = self.draw(st.permutations(targets))
        if kind == "unknown":
            operands = (
                tuple(self.draw(st.lists(st.sampled_from(visible), max_size=2))) if visible else ()
            )
            ops.append(
                UnknownOp(
                    self.draw(_UNKNOWN_NAMES),
                    operands,
                    (),
                    self.draw(st.dictionaries(names, attributes, max_size=2)),
                    successors=tuple(targets),
                    loc=self.loc(),
                )
            )
            return
        edges = [(target, self.edge_arguments(target, visible, ops)) for target in targets]
        if kind == "br":
            ops.append(Branch(edges[0][0], edges[0][1], loc=self.loc()))
        else:
            condition = self.value_of(ScalarType.BOOL, visible, ops)
            (true_target, true_args), (false_target, false_args) = edges
            ops.append(
                CondBranch(
                    condition, true_target, false_target, true_args, false_args, loc=self.loc()
                )
            )

    def edge_arguments(self, target: Block, visible, ops) -> tuple[Value, ...]:
        return tuple(self.value_of(argument.type, visible, ops) for argument in target.arguments)


def _constable(type_) -> bool:
    return not isinstance(type_, TensorType) or type_.is_static


def _numeric_static_type(builder: _FunctionBuilder, visible: list[Value]):
    candidates = [
        value.type
        for value in visible
        if _constable(value.type)
        and not (
            value.type if isinstance(value.type, ScalarType) else value.type.element_type
        ).is_bool
    ]
    if candidates and builder.draw(st.booleans()):
        return builder.draw(st.sampled_from(candidates))
    element = builder.draw(st.sampled_from(_NUMERIC))
    return builder.draw(st.one_of(st.just(element), static_tensor_types(st.just(element))))


def _make_const(builder, visible, ops, depth):
    type_ = builder.draw(st.one_of(scalar_types, static_tensor_types()))
    result = builder.new_value(type_)
    ops.append(Const(result, builder.draw(literals_for(type_)), loc=builder.loc()))
    visible.append(result)


def _make_get_global(builder, visible, ops, depth):
    global_ = builder.draw(st.sampled_from(builder.module.globals))
    result = builder.new_value(global_.type)
    ops.append(GetGlobal(result, global_.name, loc=builder.loc()))
    visible.append(result)


def _make_arith(builder, visible, ops, depth):
    type_ = _numeric_static_type(builder, visible)
    lhs = builder.value_of(type_, visible, ops)
    rhs = builder.value_of(type_, visible, ops)
    kind = builder.draw(st.sampled_from([Add, Mul]))
    result = builder.new_value(type_)
    ops.append(kind(result, lhs, rhs, loc=builder.loc()))
    visible.append(result)


def _make_matmul(builder, visible, ops, depth):
    element = builder.draw(st.sampled_from(_NUMERIC))
    rows, inner, columns = (builder.draw(st.integers(0, 3)) for _ in range(3))
    lhs = builder.value_of(TensorType(element, (rows, inner)), visible, ops)
    rhs = builder.value_of(TensorType(element, (inner, columns)), visible, ops)
    result = builder.new_value(TensorType(element, (rows, columns)))
    ops.append(MatMul(result, lhs, rhs, loc=builder.loc()))
    visible.append(result)


def _make_transpose(builder, visible, ops, depth):
    type_ = builder.draw(static_tensor_types())
    operand = builder.value_of(type_, visible, ops)
    permutation = tuple(builder.draw(st.permutations(range(len(type_.shape)))))
    result = builder.new_value(
        TensorType(type_.element_type, tuple(type_.shape[axis] for axis in permutation))
    )
    ops.append(Transpose(result, operand, permutation, loc=builder.loc()))
    visible.append(result)


def _make_extract(builder, visible, ops, depth):
    type_ = builder.draw(static_tensor_types(max_rank=2))
    operand = builder.value_of(type_, visible, ops)
    index_type = builder.draw(st.sampled_from([ScalarType.I32, ScalarType.I64]))
    indices = tuple(builder.value_of(index_type, visible, ops) for _ in type_.shape)
    result = builder.new_value(type_.element_type)
    ops.append(TensorExtract(result, operand, indices, loc=builder.loc()))
    visible.append(result)


def _make_call(builder, visible, ops, depth):
    visible_types = {value.type for value in visible}
    callable_names = [
        name
        for name, signature in builder.module.signatures.items()
        if all(_constable(type_) or type_ in visible_types for type_ in signature.inputs)
    ]
    if not callable_names:
        return
    name = builder.draw(st.sampled_from(sorted(callable_names)))
    signature = builder.module.signatures[name]
    arguments = tuple(builder.value_of(type_, visible, ops) for type_ in signature.inputs)
    results = tuple(builder.new_value(type_) for type_ in signature.outputs)
    ops.append(Call(name, arguments, results, loc=builder.loc()))
    visible.extend(results)


def _make_if(builder, visible, ops, depth):
    condition = builder.value_of(ScalarType.BOOL, visible, ops)
    result_types = [
        builder.obtainable_type(visible) for _ in range(builder.draw(st.integers(0, 2)))
    ]
    arms = []
    for _ in range(2):
        arm_visible = list(visible)
        arm_ops: list = []
        builder.body_ops(arm_visible, arm_ops, depth + 1)
        yielded = tuple(builder.value_of(type_, arm_visible, arm_ops) for type_ in result_types)
        arm_ops.append(Yield(yielded, loc=builder.loc()))
        arms.append(Region([Block(operations=arm_ops)]))
    results = tuple(builder.new_value(type_) for type_ in result_types)
    ops.append(If(results, condition, arms[0], arms[1], loc=builder.loc()))
    visible.extend(results)


def _make_unknown(builder, visible, ops, depth, with_regions: bool = False):
    operands = (
        tuple(builder.draw(st.lists(st.sampled_from(visible), max_size=3))) if visible else ()
    )
    regions = ()
    if with_regions:
        regions = []
        for _ in range(builder.draw(st.integers(0, 2))):
            if builder.draw(st.booleans()):
                regions.append(Region())
                continue
            entry_types = builder.draw(st.lists(types, max_size=1))
            regions.append(builder.region(list(visible), "yield", None, depth + 1, entry_types))
        regions = tuple(regions)
    results = tuple(builder.new_value(type_) for type_ in builder.draw(st.lists(types, max_size=2)))
    ops.append(
        UnknownOp(
            builder.draw(_UNKNOWN_NAMES),
            operands,
            results,
            builder.draw(st.dictionaries(names, attributes, max_size=3)),
            regions,
            loc=builder.loc(),
        )
    )
    visible.extend(results)


def _make_unknown_with_regions(builder, visible, ops, depth):
    _make_unknown(builder, visible, ops, depth, with_regions=True)


_OP_MAKERS = {
    "const": _make_const,
    "get_global": _make_get_global,
    "add": _make_arith,
    "mul": _make_arith,
    "matmul": _make_matmul,
    "transpose": _make_transpose,
    "extract": _make_extract,
    "call": _make_call,
    "if": _make_if,
    "unknown": _make_unknown,
    "unknown_regions": _make_unknown_with_regions,
}


@st.composite
def _globals(draw, names_: list[str]) -> list[Global]:
    result = []
    for name in names_:
        type_ = draw(st.one_of(scalar_types, static_tensor_types()))
        result.append(Global(name, type_, draw(literals_for(type_))))
    return result


def _io_names(draw, count: int):
    return draw(
        st.one_of(
            st.none(),
            st.lists(st.one_of(st.none(), names), min_size=count, max_size=count).map(tuple),
        )
    )


@st.composite
def modules(draw, max_functions: int = 3, max_globals: int = 3, max_depth: int = 2) -> Module:
    """A random well-formed Module (see the module docstring)."""
    symbols = draw(st.lists(symbol_names, unique=True, max_size=max_functions + max_globals))
    split = draw(st.integers(0, min(max_globals, len(symbols))))
    global_names, function_names = symbols[:split], symbols[split:][:max_functions]
    globals_ = draw(_globals(global_names))
    signatures = {}
    for name in function_names:
        inputs = tuple(draw(st.lists(types, max_size=3)))
        outputs = tuple(
            draw(
                st.lists(
                    st.one_of(st.sampled_from(inputs), scalar_types, static_tensor_types())
                    if inputs
                    else st.one_of(scalar_types, static_tensor_types()),
                    max_size=2,
                )
            )
        )
        signatures[name] = FunctionType(inputs, outputs)
    shape = _ModuleShape(globals_, signatures)
    functions = []
    for name, signature in signatures.items():
        body = None
        if draw(st.integers(0, 4)) > 0:
            builder = _FunctionBuilder(draw, shape, max_depth, next_id=draw(st.integers(0, 3)))
            body = builder.region([], "return", signature.outputs, 0, signature.inputs)
        functions.append(
            Function(
                name,
                signature,
                body,
                input_names=_io_names(draw, len(signature.inputs)),
                output_names=_io_names(draw, len(signature.outputs)),
            )
        )
    return Module(globals=globals_, functions=functions)
