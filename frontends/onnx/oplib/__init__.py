"""ONNX operator library: ONNX knowledge about ops imported as UnknownOps (`onnx.Relu`, ...).

Importing it registers, for every op the installed onnx has a schema for, the schema-driven
type rule `niro.ir.verify` runs on that op (type_rules.py: counts, element types, attributes,
result types by ONNX shape inference). Pure Python plus `onnx`: it knows nothing of MLIR; which
ops niroc can lower, and at which opsets, is the MLIR backend's registry (`niroc ops` joins the
two).

    from niro.frontends.onnx.oplib import signature_for
    signature_for("", "Relu", 14).label        # 'Relu-14'
"""

from .schemas import (
    FormalParameter,
    OpSignature,
    niro_op_name,
    schema_op_names,
    schema_versions,
    signature_for,
)
from .type_rules import (
    check_onnx_op,
    register_onnx_type_rules,
    registered_type_rule_names,
)

__all__ = [
    "FormalParameter",
    "OpSignature",
    "check_onnx_op",
    "niro_op_name",
    "register_onnx_type_rules",
    "registered_type_rule_names",
    "schema_op_names",
    "schema_versions",
    "signature_for",
]

register_onnx_type_rules()
