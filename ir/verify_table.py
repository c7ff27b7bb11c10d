"""The verifier's rule table: one named entry per rule the spec's validity sections state.

Every diagnostic the verifier emits names a rule from this table (an UnknownOp type rule
registered by an operator library may add its own ids). `checks` lists what each rule applies
to (an op kind, or Module / Global / Function / Region / Block); an op kind that no rule checks
is an error at import, not a silent pass.
"""

from __future__ import annotations

from typing import NamedTuple

from .ops import (
    OP_KINDS,
    Add,
    Branch,
    Call,
    CondBranch,
    Const,
    GetGlobal,
    If,
    MatMul,
    Mul,
    Return,
    TensorExtract,
    Transpose,
    UnknownOp,
    Yield,
)
from .structure import Block, Function, Global, Module, Region

__all__ = ["VerifierRule", "VERIFIER_RULES"]


class VerifierRule(NamedTuple):
    """What a rule means (`description`) and which nodes it applies to (`checks`)."""

    description: str
    checks: tuple[type, ...]


_ALL = (Module, Global, Function, Region, Block, *OP_KINDS)
_TERMINATORS = (Branch, CondBranch, Return, Yield, UnknownOp)


def _arith_rules(kind: type, short: str) -> dict[str, VerifierRule]:
    name = f"niro.{short}"
    return {
        f"{short}-operands": VerifierRule(
            f"{name} takes two scalars of one type, or two tensors of one element type", (kind,)
        ),
        f"{short}-bool": VerifierRule(f"{name} does no arithmetic on BOOL (i1)", (kind,)),
        f"{short}-broadcast": VerifierRule(
            f"{name}'s tensor operand shapes broadcast (ONNX/NumPy rules, dynamic dims allowed)",
            (kind,),
        ),
        f"{short}-result-type": VerifierRule(
            f"{name}'s result is the operand scalar type, or a tensor of the operand element type "
            "with the broadcast shape (a dynamic or unranked inferred dim may be refined)",
            (kind,),
        ),
    }


VERIFIER_RULES: dict[str, VerifierRule] = {
    # -- well-formedness of the Python objects themselves
    "field-type": VerifierRule(
        "every field holds the Python type the data model declares (a Value where a Value is "
        "expected, a tuple of Values, a Block, a Region, a str, a Type...)",
        _ALL,
    ),
    "op-kind": VerifierRule(
        "every item of Block.operations is a member of the closed Op union", (Block,)
    ),
    "internal-error": VerifierRule(
        "a registered type rule (or the verifier itself) raised; reported instead of a traceback",
        (Global, Function, UnknownOp),
    ),
    # -- symbols
    "symbol-name": VerifierRule("global and function names are non-empty str", (Global, Function)),
    "symbol-unique": VerifierRule(
        "globals and functions share one symbol namespace; each name is defined once",
        (Module, Global, Function),
    ),
    # -- types
    "dim-non-negative": VerifierRule(
        "tensor dims are non-negative (or dynamic) wherever a type appears",
        (Global, Function, Block, *OP_KINDS),
    ),
    # -- globals and constants
    "global-initializer-type": VerifierRule(
        "a global's initializer is the literal kind its type takes (bool / in-range int / float, "
        "a buffer for a tensor)",
        (Global,),
    ),
    "global-static-shape": VerifierRule("a global tensor has a static shape", (Global,)),
    "global-initializer-size": VerifierRule(
        "a global tensor initializer has exactly element-count * byte-width bytes", (Global,)
    ),
    "const-literal-type": VerifierRule(
        "a Const literal is the kind its result type takes (bool / in-range int / float, "
        "a buffer for a tensor)",
        (Const,),
    ),
    "const-static-shape": VerifierRule("a tensor Const has a static shape", (Const,)),
    "const-literal-size": VerifierRule(
        "a tensor Const literal has exactly element-count * byte-width bytes", (Const,)
    ),
    "get-global-symbol": VerifierRule(
        "GetGlobal names a global of the module (not a function)", (GetGlobal,)
    ),
    "get-global-type": VerifierRule("GetGlobal's result type is the global's type", (GetGlobal,)),
    # -- functions
    "function-entry-args": VerifierRule(
        "a definition's entry block arguments have the types of FunctionType.inputs, in order",
        (Function,),
    ),
    "function-io-names": VerifierRule(
        "input_names / output_names, when present, have one entry per input / output, each a "
        "non-empty str or None",
        (Function,),
    ),
    "return-types": VerifierRule(
        "Return's operands match the function's output types in number and order", (Return,)
    ),
    "call-callee": VerifierRule(
        "Call names a function (definition or declaration) of the module", (Call,)
    ),
    "call-signature": VerifierRule(
        "Call's argument and result types match the callee's FunctionType", (Call,)
    ),
    # -- regions, blocks and the CFG
    "region-non-empty": VerifierRule(
        "a function body has at least one block (only UnknownOp regions may be empty)",
        (Region, Function),
    ),
    "unique-ownership": VerifierRule(
        "each Block and Region object appears in exactly one place of the module", (Region, Block)
    ),
    "block-reachable": VerifierRule(
        "every non-entry block is reachable from its region's entry through branches",
        (Region, Block),
    ),
    "branch-target-region": VerifierRule(
        "branch targets lie in the branch's immediately containing region",
        (Branch, CondBranch, UnknownOp),
    ),
    "branch-target-entry": VerifierRule(
        "no branch targets its region's entry block", (Branch, CondBranch, UnknownOp)
    ),
    "branch-arguments": VerifierRule(
        "each Branch / CondBranch edge passes arguments matching the target's block arguments in "
        "number, order and type",
        (Branch, CondBranch),
    ),
    "cond-branch-condition": VerifierRule(
        "CondBranch's condition is a scalar BOOL (i1)", (CondBranch,)
    ),
    "block-terminator": VerifierRule(
        "every block ends with a terminator (Branch, CondBranch, Return, Yield, UnknownOp with "
        "successors)",
        (Block,),
    ),
    "terminator-last": VerifierRule("a terminator is the last op of its block", _TERMINATORS),
    "return-placement": VerifierRule("Return appears only in a function body region", (Return,)),
    "yield-placement": VerifierRule(
        "Yield appears only in a nested region (of an If or an UnknownOp)", (Yield,)
    ),
    # -- If
    "if-condition": VerifierRule("If's condition is a scalar BOOL (i1)", (If,)),
    "if-region-shape": VerifierRule(
        "each If region holds exactly one block, without arguments", (If, Region)
    ),
    "if-arm-terminator": VerifierRule(
        "an If arm ends in Yield: Return, Branch, CondBranch and UnknownOps with successors cannot "
        "appear directly in it",
        (If, Return, Branch, CondBranch, UnknownOp),
    ),
    "if-yield-types": VerifierRule(
        "each If arm yields values matching If.results in number, order and type", (If, Yield)
    ),
    # -- SSA
    "value-id-unique": VerifierRule(
        "a ValueId is defined once per function, nested regions included",
        (Function, Block, *OP_KINDS),
    ),
    "ssa-defined": VerifierRule("every operand names a value defined in the function", OP_KINDS),
    "ssa-dominance": VerifierRule(
        "every use is dominated by its definition: block arguments from the block start, op "
        "results after the op, other blocks only when the defining block dominates; nested "
        "regions capture only values available before their owning op",
        OP_KINDS,
    ),
    "ssa-region-escape": VerifierRule(
        "values defined inside a region are not used outside it", OP_KINDS
    ),
    "ssa-use-type": VerifierRule(
        "an operand is the same Value (id and type) as its definition", OP_KINDS
    ),
    # -- per-op type rules
    **_arith_rules(Add, "add"),
    **_arith_rules(Mul, "mul"),
    "matmul-rank": VerifierRule("MatMul's operands are rank-2 tensors", (MatMul,)),
    "matmul-element-type": VerifierRule("MatMul's operands share one element type", (MatMul,)),
    "matmul-bool": VerifierRule("MatMul does no arithmetic on BOOL (i1)", (MatMul,)),
    "matmul-contraction": VerifierRule(
        "MatMul's contraction dims agree (lhs dim 1 == rhs dim 0) when both are static", (MatMul,)
    ),
    "matmul-result-type": VerifierRule(
        "MatMul's result is a tensor<M x N> of the operand element type", (MatMul,)
    ),
    "transpose-operand": VerifierRule("Transpose's operand is a ranked tensor", (Transpose,)),
    "transpose-permutation": VerifierRule(
        "Transpose's permutation is a permutation of range(rank)", (Transpose,)
    ),
    "transpose-result-type": VerifierRule(
        "Transpose's result has the operand element type and the permuted shape", (Transpose,)
    ),
    "tensor-extract-operand": VerifierRule(
        "TensorExtract's operand is a ranked tensor", (TensorExtract,)
    ),
    "tensor-extract-indices": VerifierRule(
        "TensorExtract takes one scalar I32 or I64 index per axis", (TensorExtract,)
    ),
    "tensor-extract-result-type": VerifierRule(
        "TensorExtract's result is the operand's element type", (TensorExtract,)
    ),
    "unknown-op-name": VerifierRule("an UnknownOp has a non-empty name", (UnknownOp,)),
    "unknown-op-attributes": VerifierRule(
        "an UnknownOp's attributes are a dict from str to generic attributes (None, bool, int, "
        "float, str, buffer, tuple, dict)",
        (UnknownOp,),
    ),
}


def _check_table() -> None:
    unchecked = [
        kind.__name__
        for kind in OP_KINDS
        if not any(kind in rule.checks for rule in VERIFIER_RULES.values())
    ]
    if unchecked:
        raise AssertionError(f"op kinds without verifier rules: {', '.join(unchecked)}")


_check_table()
