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

__all__ = [
    "DYNAMIC_MODES",
    "NodeTestCase",
    "dynamic_variant",
    "is_tensor_typed",
    "node_test_case",
    "node_test_cases",
]


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


def node_test_case(name: str, dynamic: str = "none") -> NodeTestCase:
    """The node test `name`, as ONNX ships it or made dynamic (`dynamic_variant`)."""
    for case in node_test_cases():
        if case.name == name:
            return case if dynamic == "none" else dynamic_variant(case, dynamic)
    raise KeyError(name)


DYNAMIC_MODES = ("none", "realistic", "all")
"""How `dynamic_variant` makes a node test's declared input dims symbolic:

- none: as ONNX ships it (every dim static);
- realistic: the data input (the first tensor input of rank >= 1) gets a symbolic batch dim
  (dim 0) and, at rank >= 3, symbolic dims 2 and on (NCHW's spatial dims, a sequence's length);
  its channels (dim 1) and every other input (weights, zero points, shapes) stay static, as
  exporters declare them;
- all: every dim of every tensor graph input is symbolic (weights and zero points too).

Either way every graph output keeps its rank with all dims symbolic (an exporter names them),
and the data sets are the same arrays, so a test's reference results still hold."""


def dynamic_variant(case: NodeTestCase, mode: str) -> NodeTestCase:
    """`case` with the dims `mode` says made symbolic (dim_param), each dim its own name so
    nothing ties two dims together; the same case when `mode` changes no dim."""
    if mode not in DYNAMIC_MODES:
        raise ValueError(f"unknown dynamic mode '{mode}' (modes: {', '.join(DYNAMIC_MODES)})")
    if mode == "none":
        return case
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    initializers = {initializer.name for initializer in graph.initializer}
    inputs = [
        value
        for value in graph.input
        if value.name not in initializers and _tensor_dims(value) is not None
    ]
    changed = False
    for index, value in enumerate(inputs):
        rank = len(value.type.tensor_type.shape.dim)
        if mode == "all":
            axes = range(rank)
        elif index == _data_input_index(inputs):
            axes = [0, *range(2, rank)] if rank >= 3 else [0]
        else:
            axes = []
        changed |= _make_symbolic(value, axes, f"{value.name}_d")
    if not changed:
        return case
    for value in graph.output:
        if _tensor_dims(value) is not None:
            _make_symbolic(value, range(len(value.type.tensor_type.shape.dim)), f"{value.name}_d")
    del graph.value_info[:]
    return NodeTestCase(case.name, model, case.data_sets, case.rtol, case.atol)


def _tensor_dims(value: onnx.ValueInfoProto):
    """The declared dims of a tensor value with a shape, else None."""
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return None
    return value.type.tensor_type.shape.dim


def _data_input_index(inputs: list[onnx.ValueInfoProto]) -> int:
    ranked = [index for index, value in enumerate(inputs) if len(_tensor_dims(value)) >= 1]
    return ranked[0] if ranked else -1


def _make_symbolic(value: onnx.ValueInfoProto, axes, prefix: str) -> bool:
    """Declare `value`'s dims at `axes` symbolic; whether any dim changed."""
    dims = _tensor_dims(value)
    changed = False
    for axis in axes:
        dim = dims[axis]
        if dim.HasField("dim_param"):
            continue
        dim.Clear()
        dim.dim_param = f"{prefix}{axis}"
        changed = True
    return changed
