"""Every combination of the window pools' attributes, at static and at dynamic spatial dims.

Static shapes fold AveragePool's divisor into a constant table, dynamic ones compute it at run
time; at unit strides each window's taps (shifted slices) are combined in one element-wise
generic, strided ones reduce over each window, so these
are separate code paths that must agree with onnxruntime on the same
attributes. One model holds a node per combination (kernel, strides, explicit pads or
auto_pad, count_include_pad, ceil_mode, dilations) reading one input, so each form is compiled
once with iree-compile; the dynamic form is run at several image sizes.
"""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper

from ..mlir_harness import assert_matches_onnxruntime, compile_module, compile_onnx
from .dynamic_models import graph_model

KERNELS = ([2, 2], [3, 2], [3, 3])
STRIDES = ([1, 1], [2, 2], [3, 2])
PADDINGS = (
    {},
    {"pads": [1, 1, 1, 1]},
    {"pads": [0, 1, 1, 0]},
    {"auto_pad": "SAME_UPPER"},
    {"auto_pad": "SAME_LOWER"},
    {"auto_pad": "VALID"},
)
DILATIONS = ([1, 1], [2, 1])
# Image sizes the dynamic model runs at; the static models are typed with each. All are at
# least the widest window (3 taps, dilation 2) plus a stride.
SIZES = ((1, 3, 7, 10), (2, 3, 9, 8), (1, 3, 6, 6))


def _combinations(op: str) -> list[dict]:
    """Attribute sets of one pool op: every padding x stride x ceil_mode (x count_include_pad
    for AveragePool), with kernels and dilations cycling through their values so that each
    meets every padding. ceil_mode only with explicit pads, as ONNX defines it. NOTE: SAME
    auto_pad with dilations is left out: onnxruntime 1.32 sizes that output from the undilated
    kernel (3 rows where ONNX's ceil(7 / 2) and its reference evaluator give 4), and niroc
    follows ONNX."""
    include_pads = (0, 1) if op == "AveragePool" else (None,)
    cases = []
    rounds = itertools.product(PADDINGS, STRIDES, (0, 1), include_pads)
    for index, (padding, strides, ceil_mode, include_pad) in enumerate(rounds):
        if ceil_mode and "auto_pad" in padding:
            continue
        dilations = DILATIONS[(index // len(KERNELS)) % len(DILATIONS)]
        if padding.get("auto_pad", "").startswith("SAME"):
            dilations = [1, 1]
        attributes = {
            "kernel_shape": KERNELS[index % len(KERNELS)],
            "strides": strides,
            "dilations": dilations,
            "ceil_mode": ceil_mode,
            **padding,
        }
        if include_pad is not None:
            attributes["count_include_pad"] = include_pad
        if op == "LpPool":
            attributes["p"] = 2
        cases.append(attributes)
    return cases


def _last_window_starts_in_the_padding(attributes: dict, x_shape: tuple) -> bool:
    """Whether ceil_mode adds a window that starts in the end padding on a static axis of
    `x_shape`: onnxruntime drops it (as PyTorch does), ONNX's shape inference counts it, so
    niroc refuses the node's inferred type (test below) rather than guess."""
    if not attributes["ceil_mode"]:
        return False
    pads = attributes.get("pads", [0, 0, 0, 0])
    for axis, size in enumerate(x_shape[2:]):
        if not isinstance(size, int):
            continue
        begin, end = pads[axis], pads[axis + 2]
        extent = (attributes["kernel_shape"][axis] - 1) * attributes["dilations"][axis] + 1
        stride = attributes["strides"][axis]
        output = -(-(size + begin + end - extent) // stride) + 1
        if (output - 1) * stride >= size + begin:
            return True
    return False


POOLS = ("AveragePool", "MaxPool", "LpPool")


def _model(x_shape: tuple, *, typed_apart: bool = False) -> onnx.ModelProto:
    """One node per pool op and attribute combination; `typed_apart` keeps only the
    combinations whose last window starts in the padding at this static shape (the others
    without them)."""
    nodes = [
        helper.make_node(op, ["x"], [f"{op}_{index}"], name=f"{op}_{index}", **attributes)
        for op in POOLS
        for index, attributes in enumerate(_combinations(op))
        if _last_window_starts_in_the_padding(attributes, x_shape) == typed_apart
    ]
    outputs = {node.output[0]: TensorProto.FLOAT for node in nodes}
    return graph_model(nodes, x_shape, outputs=outputs, opset=19)


@functools.cache
def _compiled(x_shape: tuple, directory):
    model = _model(x_shape)
    return model, compile_onnx(model, directory, "pools_" + "x".join(map(str, x_shape)))


def _feeds(shape: tuple) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(sum(shape))
    return {"x": rng.standard_normal(shape).astype(np.float32)}


def test_every_attribute_combination_matches_at_dynamic_spatial_dims(tmp_path_factory):
    model, vm_module = _compiled(("n", 3, "h", "w"), tmp_path_factory.getbasetemp())
    assert_matches_onnxruntime(
        vm_module, model, [_feeds(shape) for shape in SIZES], function="g", rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("shape", SIZES, ids=lambda shape: "x".join(map(str, shape)))
def test_every_attribute_combination_matches_at_static_spatial_dims(shape, tmp_path_factory):
    model, vm_module = _compiled(shape, tmp_path_factory.getbasetemp())
    assert_matches_onnxruntime(
        vm_module, model, [_feeds(shape)], function="g", rtol=1e-5, atol=1e-5
    )


def _text(model: onnx.ModelProto) -> str:
    return str(lower_to_mlir(import_model(model)).module)


def _attribute(node: onnx.NodeProto, name: str) -> list[int]:
    return list(next(a.ints for a in node.attribute if a.name == name))


REDUCING = '"parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]'


def test_unit_stride_pools_combine_window_taps_and_the_others_reduce() -> None:
    pools = sum(len(_combinations(op)) for op in POOLS)
    static = _model(SIZES[0])
    static_text = _text(static)
    unit = [node for node in static.graph.node if _attribute(node, "strides") == [1, 1]]
    assert 0 < len(unit) < pools
    # one shifted slice of the padded input per tap of every unit-stride window (2x2, 3x2 or
    # 3x3); every strided one reduces over its window, the accumulator first in its body
    taps = sum(int(np.prod(_attribute(node, "kernel_shape"))) for node in unit)
    assert static_text.count("tensor.extract_slice") >= taps
    assert static_text.count(REDUCING) == len(static.graph.node) - len(unit)
    dynamic = _model(("n", 3, "h", "w"))
    dynamic_text = _text(dynamic)
    unit_dynamic = [node for node in dynamic.graph.node if _attribute(node, "strides") == [1, 1]]
    assert dynamic_text.count(REDUCING) == pools - len(unit_dynamic)
    # a dynamic batch of static spatial dims: the same forms as static
    batch_text = _text(_model(("n", 3, *SIZES[0][2:])))
    assert batch_text.count(REDUCING) == len(static.graph.node) - len(unit)
    for text in (static_text, dynamic_text, batch_text):
        combiners = re.findall(r"arith\.(?:maximumf|addf) %out, ", text)
        assert len(combiners) == text.count(REDUCING)


def test_a_window_onnx_and_onnxruntime_count_differently_is_refused_not_guessed() -> None:
    model = _model(SIZES[0], typed_apart=True)
    assert [node.op_type for node in model.graph.node][:1] == ["AveragePool"]
    with pytest.raises(LoweringError) as refusal:
        lower_to_mlir(import_model(model))
    assert "'onnx.AveragePool' op computed output shape (1, 3, 4, 6) but the result type says" in (
        str(refusal.value)
    )


def test_the_combinations_cover_every_attribute_value() -> None:
    cases = _combinations("AveragePool")
    seen = {
        key: {str(case.get(key)) for case in cases}
        for key in ("kernel_shape", "strides", "dilations", "ceil_mode", "count_include_pad")
    }
    assert seen["kernel_shape"] == {str(kernel) for kernel in KERNELS}
    assert seen["strides"] == {str(stride) for stride in STRIDES}
    assert seen["dilations"] == {str(dilation) for dilation in DILATIONS}
    assert seen["ceil_mode"] == {"0", "1"} and seen["count_include_pad"] == {"0", "1"}
    paddings = {str(case.get("pads", case.get("auto_pad"))) for case in cases}
    assert len(paddings) == len(PADDINGS)


@pytest.mark.parametrize("x_shape", [(1, 3, 12, 12), ("n", 3, "h", "w")], ids=["static", "dynamic"])
def test_strided_pools_compile_as_iree_pooling_ops(x_shape, tmp_path) -> None:
    """The reducing form's body reads the accumulator first, so IREE 3.13 compiles it with its
    convolution pipeline (`_window_reduce`'s NOTE): with `maximumf(in, out)` it took the generic
    one and ran 4-5x slower."""
    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node(
            "AveragePool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
        ),
    ]
    model = graph_model(nodes, x_shape, outputs={"m": TensorProto.FLOAT, "a": TensorProto.FLOAT})
    configurations = tmp_path / "configurations"
    compile_module(
        lower_to_mlir(import_model(model)),
        tmp_path,
        extra_flags=(f"--iree-hal-dump-executable-configurations-to={configurations}",),
    )
    dispatches = [path.read_text() for path in configurations.iterdir()]
    pools = [text for text in dispatches if '"reduction", "reduction"]' in text]
    assert len(pools) == 2
    assert all("ConvTileAndDecomposeExpert" in text for text in pools)
