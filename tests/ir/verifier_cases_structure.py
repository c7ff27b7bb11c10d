"""Modules that break the verifier's structural, symbol, CFG and SSA rules (one Case each)."""

from __future__ import annotations

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
    Module,
    Region,
    Return,
    UnknownOp,
    Yield,
)

from .builders import (
    BOOL,
    F32,
    F64,
    I32,
    Case,
    declaration,
    function,
    one_block,
    tensor,
    v,
    with_globals,
)


def _arm(*ops) -> Region:
    return Region([Block(operations=list(ops))])


def _if(results, condition, then_ops, else_ops, **fields) -> If:
    return If(results, condition, _arm(*then_ops), _arm(*else_ops), **fields)


def _bad_field() -> Module:
    return one_block([Add(result=v(1), lhs=5, rhs=v(0), loc="add_1"), Return()], (v(0),))


def _not_an_op() -> Module:
    return one_block(["not an op", Return()])


def _dup_symbol() -> Module:
    return with_globals(one_block([Return()], name="x"), Global("x", F32, 1.0))


def _empty_symbol() -> Module:
    return with_globals(one_block([Return()]), Global("", F32, 1.0))


def _negative_dim() -> Module:
    return one_block([Const(v(0, tensor(F32, -2)), b""), Return()])


def _global(type_, initializer) -> Module:
    return with_globals(one_block([Return()]), Global("g", type_, initializer))


def _get_global(name: str, type_=F32) -> Module:
    module = one_block([GetGlobal(v(0, type_), name), Return()])
    return with_globals(module, Global("g", F32, 1.0))


def _entry_args() -> Module:
    return Module(functions=[function("main", [Block((v(0, I32),), [Return()])], inputs=(F32,))])


def _io_names(**names) -> Module:
    return Module(
        functions=[function("main", [Block((v(0),), [Return((v(0),))])], (F32,), **names)]
    )


def _call(callee: str, arguments=(), results=()) -> Module:
    module = one_block([Call(callee, arguments, results), Return()], (v(0, I32),))
    module.functions.append(declaration("print_f32", (F32,)))
    module.globals.append(Global("g", F32, 1.0))
    return module


def _empty_body() -> Module:
    return Module(functions=[Function("main", FunctionType(), Region([]))])


def _shared_block() -> Module:
    target = Block(operations=[Return()])
    entry = Block(operations=[Branch(target)])
    return Module(functions=[function("main", [entry, target, target])])


def _shared_region() -> Module:
    arm = _arm(Yield())
    return one_block([If((), v(0, BOOL), arm, arm), Return()], (v(0, BOOL),))


def _unreachable() -> Module:
    return Module(
        functions=[function("main", [Block(operations=[Return()]), Block(operations=[Return()])])]
    )


def _branch_out_of_region() -> Module:
    exit_block = Block(operations=[Return()])
    inner = Region([Block(operations=[Branch(exit_block)])])
    entry = Block(operations=[UnknownOp("test.scope", regions=(inner,)), Branch(exit_block)])
    return Module(functions=[function("main", [entry, exit_block])])


def _branch_to_entry() -> Module:
    entry = Block(operations=[])
    entry.operations.append(Branch(entry))
    return Module(functions=[function("main", [entry])])


def _branch_arguments() -> Module:
    join = Block((v(1, I32),), [Return()])
    entry = Block((v(0),), [Branch(join, (v(0),))])
    return Module(functions=[function("main", [entry, join])])


def _branch_count() -> Module:
    join = Block((), [Return()])
    entry = Block((v(0),), [Branch(join, (v(0),))])
    return Module(functions=[function("main", [entry, join])])


def _cond_branch_condition() -> Module:
    left, right = Block(operations=[Return()]), Block(operations=[Return()])
    entry = Block((v(0, I32),), [CondBranch(v(0, I32), left, right)])
    return Module(functions=[function("main", [entry, left, right])])


def _no_terminator() -> Module:
    return one_block([Add(v(1), v(0), v(0))], (v(0),))


def _empty_block() -> Module:
    return one_block([])


def _terminator_not_last() -> Module:
    return one_block([Return(), Add(v(1), v(0), v(0)), Return()], (v(0),))


def _return_in_opaque_region() -> Module:
    inner = Region([Block(operations=[Return()])])
    return one_block([UnknownOp("test.scope", regions=(inner,)), Return()])


def _yield_in_body() -> Module:
    return one_block([Yield()])


def _if_condition() -> Module:
    return one_block([_if((), v(0, I32), [Yield()], [Yield()]), Return()], (v(0, I32),))


def _if_two_blocks() -> Module:
    then_region = Region([Block(operations=[Yield()]), Block(operations=[Yield()])])
    return one_block([If((), v(0, BOOL), then_region, _arm(Yield())), Return()], (v(0, BOOL),))


def _if_block_args() -> Module:
    then_region = Region([Block((v(1),), [Yield()])])
    return one_block([If((), v(0, BOOL), then_region, _arm(Yield())), Return()], (v(0, BOOL),))


def _if_empty_arm() -> Module:
    return one_block([If((), v(0, BOOL), _arm(Yield()), Region([])), Return()], (v(0, BOOL),))


def _return_in_if() -> Module:
    return one_block([_if((), v(0, BOOL), [Yield()], [Return()]), Return()], (v(0, BOOL),))


def _if_yield_types() -> Module:
    condition, value = v(0, BOOL), v(1)
    if_op = _if((v(2),), condition, [Yield((value,))], [Const(v(3, F64), 1.0), Yield((v(3, F64),))])
    return one_block([if_op, Return((v(2),))], (condition, value), (F32,))


def _if_yield_count() -> Module:
    condition, value = v(0, BOOL), v(1)
    if_op = _if((v(2),), condition, [Yield()], [Yield((value,))])
    return one_block([if_op, Return((v(2),))], (condition, value), (F32,))


def _duplicate_id() -> Module:
    return one_block([Add(v(1), v(0), v(0)), Add(v(1), v(0), v(0)), Return()], (v(0),))


def _undefined() -> Module:
    return one_block([Add(v(1), v(0), v(7)), Return()], (v(0),))


def _use_before_def() -> Module:
    return one_block([Add(v(1), v(0), v(2)), Add(v(2), v(0), v(0)), Return()], (v(0),))


def _one_arm_at_join() -> Module:
    condition, x = v(0, BOOL), v(1)
    join = Block(operations=[Return((v(2),))])
    left = Block(operations=[Add(v(2), x, x), Branch(join)])
    right = Block(operations=[Branch(join)])
    entry = Block((condition, x), [CondBranch(condition, left, right)])
    return Module(functions=[function("main", [entry, left, right, join], (F32,))])


def _capture_later_value() -> Module:
    condition, x = v(0, BOOL), v(1)
    if_op = _if((v(3),), condition, [Yield((v(2),))], [Yield((x,))])
    return one_block([if_op, Add(v(2), x, x), Return((v(3),))], (condition, x), (F32,))


def _region_escape() -> Module:
    condition, x = v(0, BOOL), v(1)
    if_op = _if((), condition, [Add(v(2), x, x), Yield()], [Yield()])
    return one_block([if_op, Return((v(2),))], (condition, x), (F32,))


def _use_type() -> Module:
    return one_block([Add(v(1, F64), v(0, F64), v(0, F64)), Return()], (v(0),))


def _registered_rule_crash() -> Module:
    return one_block([UnknownOp("test.boom", (v(0),)), Return()], (v(0),))


def _empty_unknown_name() -> Module:
    return one_block([UnknownOp("", (v(0),)), Return()], (v(0),))


def _bad_attributes() -> Module:
    return one_block([UnknownOp("test.attr", attributes={"alpha": [0.1]}), Return()])


def _bad_attribute_key() -> Module:
    return one_block([UnknownOp("test.attr", attributes={1: 0.1}), Return()])


def _unknown_successor_entry() -> Module:
    entry = Block()
    entry.operations.append(UnknownOp("test.jump", successors=(entry,)))
    return Module(functions=[function("main", [entry])])


OP = ("^bb0", "op#0")
OP1 = ("^bb0", "op#1")

CASES: list[Case] = [
    Case(
        "bad-field",
        "field-type",
        _bad_field,
        "main",
        OP,
        "niro.add",
        r"^'niro\.add' op field 'lhs' expects a Value, got int 5$",
        source="add_1",
    ),
    Case(
        "not-an-op", "op-kind", _not_an_op, "main", OP, None, r"^str 'not an op' is not a Niro op"
    ),
    Case(
        "registered-rule-raises",
        "internal-error",
        _registered_rule_crash,
        "main",
        OP,
        "test.boom",
        r"^'test\.boom' op type rule 'boom' raised ZeroDivisionError: integer division or modulo by zero$",
    ),
    Case(
        "empty-symbol",
        "symbol-name",
        _empty_symbol,
        None,
        (),
        None,
        r"^a global name must be a non-empty str, got str ''$",
    ),
    Case(
        "duplicate-symbol",
        "symbol-unique",
        _dup_symbol,
        "x",
        (),
        None,
        r"^symbol @x is defined twice \(a global, then a function\)",
    ),
    Case(
        "negative-dim",
        "dim-non-negative",
        _negative_dim,
        "main",
        OP,
        "niro.const",
        r"^value %0 has a negative dimension: tensor<-2xf32>$",
        value_ids=(0,),
    ),
    Case(
        "global-float-for-int",
        "global-initializer-type",
        lambda: _global(I32, 2.5),
        "g",
        (),
        None,
        r"^global @g initializer: expected an int literal for i32, got float 2\.5$",
    ),
    Case(
        "global-dynamic",
        "global-static-shape",
        lambda: _global(tensor(F32, None, 2), b""),
        "g",
        (),
        None,
        r"^global @g initializer: a tensor literal needs a static shape, got tensor<\?x2xf32>$",
    ),
    Case(
        "global-size",
        "global-initializer-size",
        lambda: _global(tensor(F32, 2, 3), bytes(20)),
        "g",
        (),
        None,
        r"^global @g initializer: expected 24 bytes for tensor<2x3xf32> \(6 elements of 4 bytes\), got 20$",
    ),
    Case(
        "get-global-missing",
        "get-global-symbol",
        lambda: _get_global("missing"),
        "main",
        OP,
        "niro.get_global",
        r"^'niro\.get_global' op refers to @missing, which is not defined in the module$",
    ),
    Case(
        "get-global-function",
        "get-global-symbol",
        lambda: _get_global("main"),
        "main",
        OP,
        "niro.get_global",
        r"refers to @main, which is a function, not a global$",
    ),
    Case(
        "get-global-type",
        "get-global-type",
        lambda: _get_global("g", F64),
        "main",
        OP,
        "niro.get_global",
        r"^'niro\.get_global' op result type f64 does not match global @g of type f32$",
    ),
    Case(
        "entry-args",
        "function-entry-args",
        _entry_args,
        "main",
        ("^bb0",),
        None,
        r"^entry block arguments have types \(i32\), but the signature's inputs are \(f32\)$",
    ),
    Case(
        "io-names-arity",
        "function-io-names",
        lambda: _io_names(input_names=("a", "b")),
        "main",
        (),
        None,
        r"^input_names has 2 entries, but the function has 1 inputs$",
    ),
    Case(
        "io-names-empty",
        "function-io-names",
        lambda: _io_names(output_names=("",)),
        "main",
        (),
        None,
        r"^output_names\[0\] must be a non-empty str or None, got str ''$",
    ),
    Case(
        "return-count",
        "return-types",
        lambda: one_block([Return()], outputs=(F32,)),
        "main",
        OP,
        "niro.return",
        r"^'niro\.return' op operands: got 0 values \(\), expected 1 \(f32\) by @main's outputs$",
    ),
    Case(
        "return-type",
        "return-types",
        lambda: one_block([Return((v(0, I32),))], (v(0, I32),), (F32,)),
        "main",
        OP,
        "niro.return",
        r"operands: #0 \(%0\) has type i32, expected f32 by @main's outputs$",
    ),
    Case(
        "call-missing",
        "call-callee",
        lambda: _call("nope"),
        "main",
        OP,
        "niro.call",
        r"^'niro\.call' op calls @nope, which is not defined in the module$",
    ),
    Case(
        "call-global",
        "call-callee",
        lambda: _call("g"),
        "main",
        OP,
        "niro.call",
        r"calls @g, which is a global, not a function$",
    ),
    Case(
        "call-arg-type",
        "call-signature",
        lambda: _call("print_f32", (v(0, I32),)),
        "main",
        OP,
        "niro.call",
        r"^'niro\.call' op arguments: #0 \(%0\) has type i32, expected f32 by @print_f32's signature$",
    ),
    Case(
        "call-result-count",
        "call-signature",
        lambda: _call("print_f32", (v(0, I32),), (v(1),)),
        "main",
        OP,
        "niro.call",
        r"results: got 1 value \(f32\), expected 0 \(\) by @print_f32's signature$",
        also=("call-signature",),
    ),
    Case(
        "empty-body",
        "region-non-empty",
        _empty_body,
        "main",
        (),
        None,
        r"^a function body needs at least an entry block$",
    ),
    Case(
        "shared-block",
        "unique-ownership",
        _shared_block,
        "main",
        ("^bb2",),
        None,
        r"^this Block object also appears at @main \^bb1; each block has one owner$",
    ),
    Case(
        "shared-region",
        "unique-ownership",
        _shared_region,
        "main",
        (*OP, "region#1"),
        "niro.if",
        r"^this Region object also appears at @main \^bb0 op#0 region#0; each region has one owner$",
    ),
    Case(
        "unreachable",
        "block-reachable",
        _unreachable,
        "main",
        ("^bb1",),
        None,
        r"^block \^bb1 is not reachable from the region's entry block \^bb0$",
    ),
    Case(
        "branch-out-of-region",
        "branch-target-region",
        _branch_out_of_region,
        "main",
        (*OP, "region#0", "^bb0", "op#0"),
        "niro.br",
        r"^'niro\.br' op targets a block at @main \^bb1; branches must stay in their immediately containing region$",
    ),
    Case(
        "branch-to-entry",
        "branch-target-entry",
        _branch_to_entry,
        "main",
        OP,
        "niro.br",
        r"^'niro\.br' op targets \^bb0, the entry block of its region$",
    ),
    Case(
        "unknown-successor-entry",
        "branch-target-entry",
        _unknown_successor_entry,
        "main",
        OP,
        "test.jump",
        r"^'test\.jump' op successor #0 targets \^bb0, the entry block of its region$",
    ),
    Case(
        "branch-arg-type",
        "branch-arguments",
        _branch_arguments,
        "main",
        OP,
        "niro.br",
        r"^'niro\.br' op argument #0 \(%0\) has type f32, but \^bb1 argument %1 has type i32$",
        value_ids=(0, 1),
    ),
    Case(
        "branch-arg-count",
        "branch-arguments",
        _branch_count,
        "main",
        OP,
        "niro.br",
        r"^'niro\.br' op passes 1 argument to \^bb1, which takes 0 \(\)$",
    ),
    Case(
        "cond-branch-condition",
        "cond-branch-condition",
        _cond_branch_condition,
        "main",
        OP,
        "niro.cond_br",
        r"^'niro\.cond_br' op expected a scalar i1 condition, got i32$",
    ),
    Case(
        "no-terminator",
        "block-terminator",
        _no_terminator,
        "main",
        ("^bb0",),
        None,
        r"^block \^bb0 ends with 'niro\.add', which is not a terminator$",
    ),
    Case(
        "empty-block",
        "block-terminator",
        _empty_block,
        "main",
        ("^bb0",),
        None,
        r"^block \^bb0 is empty; every block ends with a terminator$",
    ),
    Case(
        "terminator-not-last",
        "terminator-last",
        _terminator_not_last,
        "main",
        OP,
        "niro.return",
        r"^'niro\.return' op is a terminator but is followed by 2 more op\(s\) in \^bb0$",
    ),
    Case(
        "return-in-opaque-region",
        "return-placement",
        _return_in_opaque_region,
        "main",
        (*OP, "region#0", "^bb0", "op#0"),
        "niro.return",
        r"^'niro\.return' op is only valid in a function body region",
    ),
    Case(
        "yield-in-body",
        "yield-placement",
        _yield_in_body,
        "main",
        OP,
        "niro.yield",
        r"^'niro\.yield' op is only valid in a nested region; a function body ends with 'niro\.return'$",
    ),
    Case(
        "if-condition",
        "if-condition",
        _if_condition,
        "main",
        OP,
        "niro.if",
        r"^'niro\.if' op expected a scalar i1 condition, got i32$",
    ),
    Case(
        "if-two-blocks",
        "if-region-shape",
        _if_two_blocks,
        "main",
        (*OP, "region#0"),
        "niro.if",
        r"^an If region holds exactly one block, got 2$",
    ),
    Case(
        "if-block-args",
        "if-region-shape",
        _if_block_args,
        "main",
        (*OP, "region#0", "^bb0"),
        None,
        r"^an If region's block takes no arguments, got 1$",
    ),
    Case(
        "if-empty-arm",
        "if-region-shape",
        _if_empty_arm,
        "main",
        (*OP, "region#1"),
        "niro.if",
        r"^an If region holds exactly one block, got 0$",
    ),
    Case(
        "return-in-if",
        "if-arm-terminator",
        _return_in_if,
        "main",
        (*OP, "region#1", "^bb0", "op#0"),
        "niro.return",
        r"^'niro\.return' op cannot terminate an If arm; an If arm ends with 'niro\.yield'$",
    ),
    Case(
        "if-yield-type",
        "if-yield-types",
        _if_yield_types,
        "main",
        (*OP, "region#1", "^bb0", "op#1"),
        "niro.yield",
        r"^'niro\.yield' op yielded values of the else arm: #0 \(%3\) has type f64, expected f32 by the If results$",
    ),
    Case(
        "if-yield-count",
        "if-yield-types",
        _if_yield_count,
        "main",
        (*OP, "region#0", "^bb0", "op#0"),
        "niro.yield",
        r"yielded values of the then arm: got 0 values \(\), expected 1 \(f32\) by the If results$",
    ),
    Case(
        "duplicate-id",
        "value-id-unique",
        _duplicate_id,
        "main",
        OP1,
        "niro.add",
        r"^value %1 is defined twice in the function \(first at \^bb0 op#0\)$",
        value_ids=(1,),
    ),
    Case(
        "undefined",
        "ssa-defined",
        _undefined,
        "main",
        OP,
        "niro.add",
        r"^'niro\.add' op uses %7, which is not defined in @main$",
        value_ids=(7,),
    ),
    Case(
        "use-before-def",
        "ssa-dominance",
        _use_before_def,
        "main",
        OP,
        "niro.add",
        r"^'niro\.add' op uses %2, whose definition at \^bb0 op#1 does not dominate this use$",
    ),
    Case(
        "one-arm-at-join",
        "ssa-dominance",
        _one_arm_at_join,
        "main",
        ("^bb3", "op#0"),
        "niro.return",
        r"uses %2, whose definition at \^bb1 op#0 does not dominate this use$",
    ),
    Case(
        "capture-later-value",
        "ssa-dominance",
        _capture_later_value,
        "main",
        (*OP, "region#0", "^bb0", "op#0"),
        "niro.yield",
        r"^'niro\.yield' op uses %2, whose definition at \^bb0 op#1 does not dominate this use$",
    ),
    Case(
        "region-escape",
        "ssa-region-escape",
        _region_escape,
        "main",
        OP1,
        "niro.return",
        r"^'niro\.return' op uses %2, defined inside the region at \^bb0 op#0 region#0 \(at \^bb0 op#0 region#0 \^bb0 op#0\)",
    ),
    Case(
        "use-type",
        "ssa-use-type",
        _use_type,
        "main",
        OP,
        "niro.add",
        r"^'niro\.add' op uses %0 as f64, but it is defined as f32$",
        also=("ssa-use-type",),
    ),
    Case(
        "unknown-empty-name",
        "unknown-op-name",
        _empty_unknown_name,
        "main",
        OP,
        "",
        r"^'' op has an empty name",
    ),
    Case(
        "unknown-bad-attribute",
        "unknown-op-attributes",
        _bad_attributes,
        "main",
        OP,
        "test.attr",
        r"^'test\.attr' op has an invalid attribute: list is not an attribute kind",
    ),
    Case(
        "unknown-bad-attribute-key",
        "unknown-op-attributes",
        _bad_attribute_key,
        "main",
        OP,
        "test.attr",
        r"attribute dict keys must be str, got 1$",
    ),
]
