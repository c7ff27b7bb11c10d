"""Shared helpers for the ONNX frontend tests: import a model, check it verifies, and describe
ops compactly (independent of the printer's exact text)."""

from __future__ import annotations

from pathlib import Path

import niro.ir as nir
import onnx
from niro.frontends.onnx import ImportedModel, import_model_with_info

TESTDATA = Path(__file__).resolve().parents[3] / "testdata" / "onnx"


def import_verified(source, **kwargs) -> ImportedModel:
    """Import `source` (a testdata file name, a path or a ModelProto) and assert it verifies."""
    if isinstance(source, str) and not source.startswith("/") and source.endswith(".onnxtxt"):
        source = TESTDATA / source
    imported = import_model_with_info(source, **kwargs)
    diagnostics = nir.verify(imported.module)
    assert diagnostics == [], "\n".join(str(diagnostic) for diagnostic in diagnostics)
    return imported


def import_text(text: str, **kwargs) -> ImportedModel:
    return import_verified(onnx.parser.parse_model(text), **kwargs)


def describe(op: nir.Op) -> str:
    """`niro.add(tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> @Add_0`."""
    operands = ", ".join(nir.format_type(value.type) for value in nir.operands_of(op))
    results = ", ".join(nir.format_type(value.type) for value in nir.results_of(op))
    return f"{nir.op_name(op)}({operands}) -> ({results}) @{op.loc}"


def describe_block(block: nir.Block) -> list[str]:
    return [describe(op) for op in block.operations]


def main_block(imported: ImportedModel) -> nir.Block:
    function = imported.module.get_function(imported.main)
    assert function is not None
    return function.first_block
