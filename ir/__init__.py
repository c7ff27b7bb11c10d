"""Niro IR: a small, strongly typed SSA IR between ONNX and MLIR.

Pure Python: this package never imports onnx or mlir. Callers import from `niro.ir`, never from
a submodule. `format_tree` is loaded on first use: it needs rich (~25 ms), which a compile that
succeeds never does (the start-up budget).
"""

from .attributes import Attribute, Buffer, Literal, as_memoryview, buffer_nbytes, is_buffer
from .diagnostics import Diagnostic, Location
from .equality import structurally_equal
from .errors import NirocError, ParseError, VerifyError
from .imported import (
    ABSENT_INPUTS_ATTRIBUTE,
    ABSENT_OUTPUTS_ATTRIBUTE,
    BOOKKEEPING_ATTRIBUTES,
    GENERIC_REASON_ATTRIBUTE,
    OPSET_ATTRIBUTE,
    REGIONS_ATTRIBUTE,
    ImportedOp,
    ImportedOpError,
    absent_positions,
    by_position,
    read_imported_op,
    region_names,
    write_imported_op,
)
from .literals import literal_problem
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
    Op,
    Return,
    TensorExtract,
    Transpose,
    UnknownOp,
    Yield,
    is_terminator,
    op_name,
    operands_of,
    regions_of,
    results_of,
    successors_of,
)
from .parser import parse_module
from .printer import print_module, write_module
from .shapes import broadcast_names, broadcast_shapes
from .structure import Block, Function, FunctionType, Global, Module, Region, SymbolName
from .types import (
    Dim,
    ScalarType,
    Shape,
    TensorType,
    Type,
    element_type_of,
    format_type,
    static_element_count,
)
from .values import Value, ValueId
from .verifier import (
    VERIFIER_RULES,
    VerifierRule,
    register_op_type_rule,
    register_op_type_rule_source,
    unregister_op_type_rule,
    verify,
)
from .walk import walk_blocks, walk_ops

__all__ = [
    "OP_KINDS",
    "ABSENT_INPUTS_ATTRIBUTE",
    "ABSENT_OUTPUTS_ATTRIBUTE",
    "BOOKKEEPING_ATTRIBUTES",
    "GENERIC_REASON_ATTRIBUTE",
    "OPSET_ATTRIBUTE",
    "REGIONS_ATTRIBUTE",
    "VERIFIER_RULES",
    "VerifierRule",
    "broadcast_names",
    "broadcast_shapes",
    "literal_problem",
    "register_op_type_rule",
    "register_op_type_rule_source",
    "unregister_op_type_rule",
    "Add",
    "Attribute",
    "Block",
    "Branch",
    "Buffer",
    "Call",
    "CondBranch",
    "Const",
    "Diagnostic",
    "Dim",
    "Function",
    "FunctionType",
    "GetGlobal",
    "Global",
    "If",
    "ImportedOp",
    "ImportedOpError",
    "Literal",
    "Location",
    "MatMul",
    "Module",
    "Mul",
    "NirocError",
    "Op",
    "ParseError",
    "Region",
    "Return",
    "ScalarType",
    "Shape",
    "SymbolName",
    "TensorExtract",
    "TensorType",
    "Transpose",
    "Type",
    "UnknownOp",
    "Value",
    "ValueId",
    "VerifyError",
    "Yield",
    "absent_positions",
    "as_memoryview",
    "buffer_nbytes",
    "by_position",
    "element_type_of",
    "format_tree",
    "format_type",
    "is_buffer",
    "is_terminator",
    "op_name",
    "parse_module",
    "print_module",
    "read_imported_op",
    "region_names",
    "operands_of",
    "regions_of",
    "results_of",
    "static_element_count",
    "structurally_equal",
    "successors_of",
    "verify",
    "walk_blocks",
    "walk_ops",
    "write_imported_op",
    "write_module",
]


def __getattr__(name: str):
    """PEP 562: `format_tree` (and rich with it) loads when first asked for."""
    if name == "format_tree":
        from .tree import format_tree

        return format_tree
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
