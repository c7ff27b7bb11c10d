"""The builders package (backends/mlir/builders) and the rule context's region service.

The builders are the one vocabulary every lowering rule uses; these pin the contracts the rules
rely on: integer constants wrap to their type's width, `fill` takes the init then the value,
the generic operation builder makes the same ops as MLIR's generated classes, and a rule lowers
a nested block through `ctx.lower_block` with the argument values it chooses.
"""

from __future__ import annotations

import pytest
from mlir_harness import Ids, check_lowered
from niro.backends.mlir import (
    LoweringError,
    LoweringRuleContext,
    lower_to_mlir,
    register_lowering,
    unregister_lowering,
)
from niro.backends.mlir.bindings import func, linalg, make_context, mlir_ir, scf, tensor
from niro.backends.mlir.builders import (
    as_i64,
    as_index,
    constant,
    dense_constant,
    empty,
    expand_dim,
    expand_shape,
    fill,
    generic,
    i64_constant,
    i64_tensor,
    index_constant,
    named_op,
    reassociation,
)
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
)

F32 = ScalarType.F32


def _built(build) -> str:
    """The text of a module whose one function's body `build()` makes (it returns nothing)."""
    with make_context(), mlir_ir.Location.unknown():
        module = mlir_ir.Module.create()
        with mlir_ir.InsertionPoint(module.body):
            function = func.FuncOp("f", mlir_ir.FunctionType.get([], []))
            with mlir_ir.InsertionPoint(function.add_entry_block()):
                build()
                func.ReturnOp([])
        assert module.operation.verify()
        return str(module)


@pytest.mark.parametrize(
    ("width", "value", "printed"),
    [(8, 255, "-1 : i8"), (8, -1, "-1 : i8"), (8, 300, "44 : i8"), (64, 2**64 - 1, "-1 : i64")],
)
def test_integer_constants_wrap_to_their_width(width, value, printed):
    text = _built(lambda: constant(mlir_ir.IntegerType.get_signless(width), value))
    assert f"arith.constant {printed}" in text


def test_i1_and_float_and_index_constants():
    def build():
        constant(mlir_ir.IntegerType.get_signless(1), 1)
        constant(mlir_ir.F32Type.get(), 2)
        index_constant(7)

    text = _built(build)
    assert "arith.constant true" in text
    assert "arith.constant 2.000000e+00 : f32" in text
    assert "arith.constant 7 : index" in text


def test_dense_constant_wraps_unsigned_values():
    import numpy as np

    text = _built(lambda: dense_constant(np.array([1, 255], dtype=np.uint8), ScalarType.U8))
    assert "dense<[1, -1]> : tensor<2xi8>" in text


def test_as_index_and_as_i64_cast_only_the_other_integer_type():
    """An int becomes a constant of the type; a value of the type is itself (no op); a value of
    the other integer type is cast, signed."""
    same: list[bool] = []

    def build():
        index, i64 = index_constant(3), i64_constant(4)
        same.extend([as_index(index) is index, as_i64(i64) is i64])
        as_index(i64)
        as_i64(index)
        as_index(5)
        as_i64(6)

    text = _built(build)
    assert same == [True, True]
    assert text.count("arith.index_cast") == 2
    assert "arith.index_cast %c4_i64 : i64 to index" in text
    assert "arith.index_cast %c3 : index to i64" in text
    assert "arith.constant 5 : index" in text and "arith.constant 6 : i64" in text


def test_i64_tensor_is_one_constant_when_static_else_from_elements():
    def build():
        vector = mlir_ir.RankedTensorType.get([2], mlir_ir.IntegerType.get_signless(64))
        i64_tensor([2, 3], vector)
        i64_tensor([2, index_constant(3)], vector)

    text = _built(build)
    assert "arith.constant dense<[2, 3]> : tensor<2xi64>" in text
    assert "arith.index_cast %c3 : index to i64" in text
    assert "tensor.from_elements %c2_i64, %0 : tensor<2xi64>" in text


def test_fill_takes_the_init_then_the_value():
    def build():
        f32 = mlir_ir.F32Type.get()
        fill(empty([2, 3], f32), constant(f32, 1))

    text = _built(build)
    assert "linalg.fill ins(%cst : f32) outs(%0 : tensor<2x3xf32>) -> tensor<2x3xf32>" in text


def test_generic_makes_the_op_the_generated_class_makes():
    """The generic operation builder and `linalg.GenericOp` print the same op."""

    def by_builder():
        f32 = mlir_ir.F32Type.get()
        source = empty([4, 3], f32)
        init = fill(empty([3], f32), constant(f32, 0))
        generic(
            [(source, [0, 1])],
            [(init, [1])],
            2,
            (0,),
            lambda args: [mlir_ir.Operation.create("arith.addf", [f32], list(args)).result],
        )

    def by_class():
        f32 = mlir_ir.F32Type.get()
        source = empty([4, 3], f32)
        init = fill(empty([3], f32), constant(f32, 0))
        maps = [mlir_ir.AffineMap.get(2, 0, [mlir_ir.AffineDimExpr.get(d) for d in dims]) for dims in ([0, 1], [1])]
        op = linalg.GenericOp(
            [init.type],
            [source],
            [init],
            mlir_ir.ArrayAttr.get([mlir_ir.AffineMapAttr.get(map_) for map_ in maps]),
            mlir_ir.ArrayAttr.get(
                [
                    mlir_ir.Attribute.parse("#linalg.iterator_type<reduction>"),
                    mlir_ir.Attribute.parse("#linalg.iterator_type<parallel>"),
                ]
            ),
        )
        block = op.regions[0].blocks.append(f32, f32)
        with mlir_ir.InsertionPoint(block):
            linalg.YieldOp([mlir_ir.Operation.create("arith.addf", [f32], list(block.arguments)).result])

    assert _built(by_builder) == _built(by_class)


def test_named_op_takes_its_attributes():
    def build():
        f32 = mlir_ir.F32Type.get()
        x = empty([1, 2, 5, 5], f32)
        w = empty([3, 2, 3, 3], f32)
        init = fill(empty([1, 3, 2, 2], f32), constant(f32, 0))
        strides = mlir_ir.DenseIntElementsAttr.get_splat(
            mlir_ir.RankedTensorType.get([2], mlir_ir.IntegerType.get_signless(64)),
            mlir_ir.IntegerAttr.get(mlir_ir.IntegerType.get_signless(64), 2),
        )
        named_op("linalg.conv_2d_nchw_fchw", [x, w], init, {"strides": strides})

    text = _built(build)
    assert "linalg.conv_2d_nchw_fchw" in text and "strides = dense<2> : tensor<2xi64>" in text


def test_reassociation_groups():
    with make_context():
        assert str(reassociation([[0, 1], [2]])) == "[[0, 1], [2]]"


def _host_vector_as_rows(shape: list[int], split) -> str:
    """A module whose function `f(a, b, c)` returns [a, b, c, c, b, a] (joined on the host by
    `tensor.from_elements`, as Concat joins shape vectors) split into rows of `shape` by
    `split(vector, result_type)`."""
    with make_context(), mlir_ir.Location.unknown():
        i64 = mlir_ir.IntegerType.get_signless(64)
        module = mlir_ir.Module.create()
        with mlir_ir.InsertionPoint(module.body):
            result = mlir_ir.RankedTensorType.get(shape, i64)
            function = func.FuncOp("f", mlir_ir.FunctionType.get([i64] * 3, [result]))
            with mlir_ir.InsertionPoint(function.add_entry_block()):
                a, b, c = function.arguments
                vector = tensor.FromElementsOp(mlir_ir.RankedTensorType.get([6], i64), [a, b, c, c, b, a])
                func.ReturnOp([split(vector.result, result)])
        assert module.operation.verify()
        return str(module)


@pytest.mark.parametrize(
    ("shape", "split"),
    [
        ([3, 2], lambda vector, result: expand_shape(vector, result, [[0, 1]], [])),
        ([6, 1], lambda vector, result: expand_dim(vector, 0, (6, 1))),
        ([1, 6], lambda vector, result: expand_dim(vector, 0, (1, 6))),
    ],
    ids=["3x2", "6x1", "1x6"],
)
def test_a_vector_joined_on_the_host_splits_into_rows(shape, split):
    """IREE 3.13 miscompiles expand_shape(from_elements) into more than one row (it stops
    compiling: "'stream.async.fill' op has invalid Write access range"); the builder reads such
    a vector by position instead. Compiled and run, the rows hold the elements in order."""
    import iree.compiler as iree_compiler
    import iree.runtime as iree_runtime
    import numpy as np

    vmfb = iree_compiler.compile_str(
        _host_vector_as_rows(shape, split),
        target_backends=["llvm-cpu"],
        extra_args=["--iree-llvmcpu-target-cpu=host"],
    )
    module = iree_runtime.load_vm_flatbuffer(vmfb, driver="local-sync")
    got = np.asarray(module.f(1, 2, 3))
    np.testing.assert_array_equal(got, np.array([1, 2, 3, 3, 2, 1]).reshape(shape))


@pytest.fixture
def twice_registered():
    """test.Twice: its region's block takes one f32 and yields it doubled; the rule lowers the
    block into an scf.execute_region, the block's argument bound to the op's operand."""

    @register_lowering("test.Twice")
    def lower_twice(ctx: LoweringRuleContext):
        op: UnknownOp = ctx.op  # type: ignore[assignment]
        execute = scf.ExecuteRegionOp(list(ctx.result_types))
        entry = execute.region.blocks.append()
        arguments = list(ctx.operands) * int(op.attributes.get("copies", 1))
        ctx.lower_block(
            op.regions[0].blocks[0],
            entry,
            arguments,
            yield_builder=lambda yield_ctx: scf.YieldOp(list(yield_ctx.operands)),
        )
        return list(execute.results)

    yield
    unregister_lowering("test.Twice")


def _twice_module(copies: int = 1) -> Module:
    ids = Ids()
    x, y, a, doubled = ids(F32), ids(F32), ids(F32), ids(F32)
    region = Region([Block((a,), [Add(doubled, a, a), Yield((doubled,))])])
    twice = UnknownOp("test.Twice", (x,), (y,), {"copies": copies}, (region,), loc="twice")
    body = Region([Block((x,), [twice, Return((y,))])])
    return Module(functions=[Function("f", FunctionType((F32,), (F32,)), body)])


def test_a_rule_lowers_its_region_with_the_arguments_it_chooses(twice_registered):
    text = check_lowered(lower_to_mlir(_twice_module()))
    assert "scf.execute_region -> f32" in text
    assert "arith.addf %arg0, %arg0 : f32" in text


def test_binding_a_block_to_the_wrong_number_of_values_is_refused(twice_registered):
    with pytest.raises(
        LoweringError,
        match=r"\[node 'twice'\]: 'test\.Twice' op could not be lowered: a block of 1 "
        r"arguments bound to 2 values$",
    ):
        lower_to_mlir(_twice_module(copies=2))
