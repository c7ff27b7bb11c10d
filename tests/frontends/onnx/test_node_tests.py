"""ONNX's own node test models: each imports into IR that verifies, or is refused with one of
the documented clear errors. Prints the counts (run with -s to see them)."""

from __future__ import annotations

import collections
import re
import time

import niro.ir as nir
from niro.frontends.onnx import OnnxImportError, import_model

from ...onnx_node_cases import node_test_cases

# Every reason a node test model may be refused (the message after `file: `).
DOCUMENTED_REFUSALS = [
    r"value '[^']*' \((input of graph|output of node) '[^']*'\): element type [A-Z0-9]+ is not supported",
    r"value '[^']*' \((input of graph|output of node) '[^']*'\): (sequence|optional|map) types are not supported",
    r"value '[^']*' \(output of node '[^']*'\): element type is unknown \(shape inference could not type it\)",
    r"node '[^']*' \([A-Za-z]+\): attribute '(to|dtype)': element type [A-Z0-9]+ is not supported",
    # sequences niroc cannot rewrite into tensor ops (frontends/onnx/sequences.py)
    r"value '[^']*' \(output of graph '[^']*'( \(attribute '[a-z_]+' of node '[^']*' \([A-Za-z]+\)\))?\): a sequence "
    r"output has no tensor form \(niroc rewrites only sequences used inside the model into tensor ops\)",
    r"node '[^']*' \(SplitToSequence\): its split sizes are not constant: the sequence length would depend on "
    r"run-time data",
    r"node '[^']*' \([A-Za-z]+\): takes sequence '[^']*' as input #\d+; niroc rewrites sequences into tensors "
    r"only for the sequence ops, Identity and Loop",
]


def test_every_node_test_imports_and_verifies_or_is_refused_clearly() -> None:
    cases = node_test_cases()
    assert len(cases) > 1500
    started = time.perf_counter()
    imported = 0
    refusals: collections.Counter[str] = collections.Counter()
    unexpected: list[str] = []
    failed_verification: list[str] = []
    for case in cases:
        try:
            module = import_model(case.model, filename=case.name)
        except OnnxImportError as error:
            message = str(error)
            assert message.startswith(f"{case.name}: "), message
            reason = message.removeprefix(f"{case.name}: ")
            pattern = next((p for p in DOCUMENTED_REFUSALS if re.fullmatch(p, reason)), None)
            if pattern is None:
                unexpected.append(message)
            refusals[re.sub(r"'[^']*'", "'…'", reason)] += 1
            continue
        diagnostics = nir.verify(module)
        if diagnostics:
            failed_verification.append(f"{case.name}: {diagnostics[0]}")
        imported += 1
    elapsed = time.perf_counter() - started
    print(f"\nONNX node tests: {len(cases)} models, {imported} imported and verified, "
          f"{sum(refusals.values())} refused ({elapsed:.1f} s)")
    for reason, count in refusals.most_common():
        print(f"  {count:4d}  {reason}")
    assert unexpected == []
    assert failed_verification == []
    assert imported > 1600
