"""UnknownOps: rejected by default with one listing, kept as generic ops on request, or lowered
by a registered rule (onnx.Relu here, compiled and run end to end)."""

from __future__ import annotations

import numpy as np
import pytest
from mlir_harness import Ids, call, check_lowered, compile_module, from_abi, load_vmfb, tensor
from niro.backends.mlir import (
    LoweringError,
    LoweringRuleContext,
    lower_to_mlir,
    register_lowering,
    registered_lowerings,
    unregister_lowering,
)
from niro.backends.mlir.bindings import arith
from niro.backends.mlir.builders import constant, elementwise, index_constant
from niro.ir import (
    Add,
    Block,
    Function,
    FunctionType,
    Module,
    Region,
    Return,
    ScalarType,
    UnknownOp,
    Yield,
    walk_ops,
)

F32 = ScalarType.F32


UNLOWERED = "test.NoLowering"
"""An op name no library registers (the op library now lowers onnx.Relu and onnx.Conv)."""


def relu_chain_module(
    count: int, *, with_conv: bool = False, relu: str = "onnx.Relu", conv: str = UNLOWERED
) -> Module:
    """x -> `relu` ... (`count` times), optionally one `conv` op, on tensor<?x4xf32>."""
    ids = Ids()
    dyn = tensor(F32, None, 4)
    x = ids(dyn)
    operations, current = [], x
    for index in range(count):
        result = ids(dyn)
        operations.append(UnknownOp(relu, (current,), (result,), loc=f"relu_{index + 1}"))
        current = result
    if with_conv:
        result = ids(dyn)
        operations.append(UnknownOp(conv, (current,), (result,), loc="conv0"))
        current = result
    operations.append(Return((current,)))
    function = Function("main", FunctionType((dyn,), (dyn,)), Region([Block((x,), operations)]))
    return Module(functions=[function])


def test_unknown_ops_are_listed_by_name_with_count_and_first_node():
    with pytest.raises(
        LoweringError,
        match=r"^13 operations have no MLIR lowering: test\.Unlowered \(x12, first at node 'relu_1'\), "
        r"test\.NoLowering \(x1, first at node 'conv0'\)$",
    ) as caught:
        lower_to_mlir(relu_chain_module(12, with_conv=True, relu="test.Unlowered"))
    assert "allow_unknown=True" in caught.value.notes[0]


def test_unknown_op_without_loc_is_located_by_path():
    ids = Ids()
    x, y = ids(F32), ids(F32)
    body = Region([Block((x,), [UnknownOp("test.Mystery", (x,), (y,)), Return((y,))])])
    module = Module(functions=[Function("f", FunctionType((F32,), (F32,)), body)])
    with pytest.raises(
        LoweringError,
        match=r"^1 operation has no MLIR lowering: test\.Mystery \(x1, first at @f \^bb0 op#0\)$",
    ):
        lower_to_mlir(module)


def generic_module() -> Module:
    """An UnknownOp with every attribute kind, a region (with a Yield) and successors."""
    ids = Ids()
    x = ids(tensor(F32, 2))
    kept = ids(tensor(F32, 2))
    inner = ids(tensor(F32, 2))
    region = Region([Block((), [Add(inner, x, x), Yield((inner,))])])
    attributes = {
        "alpha": 0.5,
        "axis": -1,
        "mode": "constant",
        "flag": True,
        "nothing": None,
        "shape": (1, 2, (3, "x")),
        "nested": {"k": 1, "v": 2.0},
        "payload": b"\x00\x01\xff",
        "empty": b"",
    }
    target_a, target_b = Block((), [Return((kept,))]), Block((), [Return((x,))])
    branch = UnknownOp("test.switch", (kept,), (), successors=(target_a, target_b), loc="switch")
    entry = Block(
        (x,),
        [
            UnknownOp(
                "onnx.Custom", (x,), (kept,), attributes, regions=(region, Region()), loc="custom"
            ),
            branch,
        ],
    )
    function = Function(
        "main", FunctionType((x.type,), (x.type,)), Region([entry, target_a, target_b])
    )
    return Module(functions=[function])


def test_allow_unknown_keeps_generic_ops_with_attributes_regions_and_successors():
    lowered = lower_to_mlir(generic_module(), allow_unknown=True)
    assert lowered.has_generic_ops
    text = check_lowered(lowered)  # parses back, and iree-opt takes it (unregistered allowed)
    assert '"onnx.Custom"(%arg0) <{' not in text  # generic attributes are discardable ones
    assert '"onnx.Custom"(%arg0) ({' in text
    for fragment in (
        "alpha = 5.000000e-01 : f64",
        "axis = -1 : i64",
        'mode = "constant"',
        "flag = true",
        "nothing",
        'shape = [1, 2, [3, "x"]]',
        "nested = {k = 1 : i64, v = 2.000000e+00 : f64}",
        "payload = dense_resource<main.onnx.Custom.payload> : tensor<3xi8>",
        "empty = dense<0> : tensor<0xi8>",
        '"niro.yield"(%',
        '"test.switch"(%0)[^bb1, ^bb2]',
        'main.onnx.Custom.payload: "0x010000000001FF"',
    ):
        assert fragment in text, fragment


@pytest.fixture
def relu_registered():
    """onnx.Relu -> linalg.generic of arith.maximumf(x, 0), registered for one test."""
    previous = None
    if "onnx.Relu" in registered_lowerings():  # the op library may own it; restore it after
        previous = unregister_lowering("onnx.Relu")

    @register_lowering("onnx.Relu")
    def lower_relu(ctx: LoweringRuleContext):
        return [
            elementwise(
                ctx, lambda elements: arith.maximumf(elements[0], constant(elements[0].type, 0))
            )
        ]

    yield lower_relu
    unregister_lowering("onnx.Relu")
    if previous is not None:
        register_lowering("onnx.Relu")(previous)


def test_registered_lowering_compiles_and_runs(relu_registered, tmp_path):
    assert "onnx.Relu" in registered_lowerings()
    lowered = lower_to_mlir(relu_chain_module(2))
    text = check_lowered(lowered)
    assert "arith.maximumf" in text and not lowered.has_generic_ops
    vm_module = load_vmfb(compile_module(lowered, tmp_path))
    x = np.array([[-1.0, 2.0, -3.0, 4.0], [0.5, -0.5, 0.0, -7.0]], dtype=np.float32)
    (result,) = call(vm_module, "main", x)
    np.testing.assert_array_equal(from_abi(result, x), np.maximum(x, 0))


def test_registered_lowering_still_rejects_other_unknown_ops(relu_registered):
    with pytest.raises(
        LoweringError,
        match=r"^1 operation has no MLIR lowering: test\.NoLowering \(x1, first at node 'conv0'\)$",
    ):
        lower_to_mlir(relu_chain_module(3, with_conv=True))


def test_registering_twice_is_an_error(relu_registered):
    with pytest.raises(ValueError, match=r"^'onnx\.Relu' already has a registered MLIR lowering$"):
        register_lowering("onnx.Relu")(relu_registered)


def test_registered_rule_returning_a_wrong_type_is_reported():
    @register_lowering("test.Wrong")
    def lower_wrong(ctx: LoweringRuleContext):
        return [index_constant(0)]

    ids = Ids()
    x, y = ids(F32), ids(F32)
    body = Region([Block((x,), [UnknownOp("test.Wrong", (x,), (y,), loc="w"), Return((y,))])])
    module = Module(functions=[Function("f", FunctionType((F32,), (F32,)), body)])
    try:
        with pytest.raises(
            LoweringError,
            match=r"^@f \^bb0 op#0 \(test\.Wrong\) \[node 'w'\]: 'test\.Wrong' op lowering "
            r"returned index for result #0, expected f32$",
        ):
            lower_to_mlir(module)
    finally:
        unregister_lowering("test.Wrong")


def test_registered_lowering_takes_an_onnx_relu_model_end_to_end(relu_registered, tmp_path):
    """An ONNX Relu imports as UnknownOp onnx.Relu; the registered rule makes it compile."""
    from niro.frontends.onnx import import_model
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu_node")],
        "relu_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    module = import_model(model)
    assert any(isinstance(op, UnknownOp) and op.name == "onnx.Relu" for op in walk_ops(module))
    lowered = lower_to_mlir(module)
    assert 'loc("relu_node")' in lowered.to_text()
    vm_module = load_vmfb(compile_module(lowered, tmp_path))
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    (result,) = call(vm_module, module.functions[0].name, x)
    np.testing.assert_array_equal(from_abi(result, x), np.maximum(x, 0))


def test_first_unknown_op_is_the_first_in_text_order_even_when_nested():
    from niro.ir import If

    ids = Ids()
    condition, x = ids(ScalarType.BOOL), ids(F32)
    inner, outer, later = ids(F32), ids(F32), ids(F32)
    if_op = If(
        (outer,),
        condition,
        Region([Block((), [UnknownOp("onnx.Foo", (x,), (inner,), loc="inner"), Yield((inner,))])]),
        Region([Block((), [Yield((x,))])]),
    )
    entry = Block(
        (condition, x),
        [if_op, UnknownOp("onnx.Foo", (outer,), (later,), loc="later"), Return((later,))],
    )
    function = Function("f", FunctionType((ScalarType.BOOL, F32), (F32,)), Region([entry]))
    with pytest.raises(
        LoweringError,
        match=r"^2 operations have no MLIR lowering: onnx\.Foo \(x2, first at node 'inner'\)$",
    ):
        lower_to_mlir(Module(functions=[function]))
