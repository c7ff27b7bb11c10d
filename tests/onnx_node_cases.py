"""ONNX's own node tests, regenerated in memory from the installed onnx package.

The onnx wheel ships the generators, not the files (`onnx/backend/test/data/node` is absent), so
every suite that needs them (frontend import test, backend end-to-end test, conformance) calls
`node_test_cases()`, which runs `collect_testcases` once per process (about 7 s).
"""

from __future__ import annotations

import contextlib
import functools
import io
import warnings
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.numpy_helper

__all__ = ["NodeTestCase", "node_test_cases", "node_test_case", "is_tensor_typed"]


@dataclass(frozen=True)
class NodeTestCase:
    """One ONNX node test: its model and its reference data sets (inputs, expected outputs)."""

    name: str
    model: onnx.ModelProto
    data_sets: tuple[tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]], ...]
    rtol: float
    atol: float


@functools.cache
def node_test_cases() -> tuple[NodeTestCase, ...]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        collected = node.collect_testcases(None)
    cases = []
    for case in collected:
        if case.model is None:
            continue
        data_sets = tuple(
            (tuple(map(_as_array, inputs)), tuple(map(_as_array, outputs)))
            for inputs, outputs in (case.data_sets or ())
        )
        cases.append(NodeTestCase(case.name, case.model, data_sets, case.rtol, case.atol))
    return tuple(sorted(cases, key=lambda case: case.name))


def _as_array(value):
    """Reference data as numpy; sequences (lists) and optionals stay as they are."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def is_tensor_typed(model: onnx.ModelProto) -> bool:
    """Every graph input and output is a tensor (the denominator peers report against)."""
    values = list(model.graph.input) + list(model.graph.output)
    return all(value.type.HasField("tensor_type") for value in values)


def node_test_case(name: str) -> NodeTestCase:
    for case in node_test_cases():
        if case.name == name:
            return case
    raise KeyError(name)
