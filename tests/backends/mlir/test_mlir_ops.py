"""Every Niro op lowered, compiled with iree-compile and run with iree.runtime, against numpy.

One module per element type holds one function per case (static and dynamic shapes,
broadcasting, scalars, constants, globals), so each element type costs one compile.
"""

from __future__ import annotations

import numpy as np
import pytest
from mlir_harness import (
    NUMPY_DTYPES,
    Ids,
    call,
    check_lowered,
    compile_module,
    from_abi,
    load_vmfb,
    tensor,
)
from niro.backends.mlir import lower_to_mlir
from niro.ir import (
    Add,
    Block,
    Const,
    Function,
    FunctionType,
    GetGlobal,
    Global,
    MatMul,
    Module,
    Mul,
    Region,
    Return,
    ScalarType,
    TensorExtract,
    Transpose,
    verify,
)

ELEMENTS = [
    ScalarType.F32,
    ScalarType.F64,
    ScalarType.F16,
    ScalarType.I8,
    ScalarType.I32,
    ScalarType.I64,
    ScalarType.U32,
]
"""Each width once, signed and unsigned, and the float types numpy has (no BF16 in numpy:
BF16 is covered by lowering and iree-opt in test_mlir_output.py)."""

I32, I64 = ScalarType.I32, ScalarType.I64


def _data(element: ScalarType, shape, seed: int) -> np.ndarray:
    """Small integral values (exact in every type, so products and sums compare exactly)."""
    rng = np.random.default_rng(seed)
    low = 0 if element.is_unsigned_integer else -4
    return rng.integers(low, 5, size=shape).astype(NUMPY_DTYPES[element])


class Suite:
    """Collects functions into one module, with each case's inputs and numpy's answer."""

    def __init__(self, element: ScalarType):
        self.element = element
        self.functions: list[Function] = []
        self.globals: list[Global] = []
        self.cases: dict[str, tuple[list, list]] = {}
        self.seed = 0

    def data(self, *shape) -> np.ndarray:
        self.seed += 1
        return _data(self.element, shape, self.seed)

    def add(self, name, input_types, build, inputs, expected):
        """`build(ids, *args) -> (ops, results)` makes the body; one entry block."""
        ids = Ids()
        args = [ids(type_) for type_ in input_types]
        ops, results = build(ids, *args)
        ops.append(Return(tuple(results)))
        self.functions.append(
            Function(
                name,
                FunctionType(tuple(input_types), tuple(value.type for value in results)),
                Region([Block(tuple(args), ops)]),
            )
        )
        self.cases[name] = (inputs, expected)

    def module(self) -> Module:
        return Module(globals=list(self.globals), functions=list(self.functions))


def _binary(op_class, result_type):
    def build(ids, lhs, rhs):
        result = ids(result_type)
        return [op_class(result, lhs, rhs, loc="node")], [result]

    return build


HOST_SCALAR_CASES = frozenset(
    {
        "add_scalar",
        "mul_scalar",
        "extract_static_i64",
        "extract_dynamic_i32",
        "extract_rank0",
        "scalar_constant",
        "scalar_global",
    }
)
"""Cases with scalars at the host level (function arguments, results, scalar arith)."""

F16_HOST_SCALARS = (
    "IREE's VM has no f16 host scalars ('arith.constant' f16 fails to legalize to vm)"
)


def compile_flags(element: ScalarType) -> tuple[str, ...]:
    """iree-compile flags beyond the CPU target for one element type.

    NOTE: IREE demotes f64 to f32 by default, and that pass cannot convert an `arith.constant`
    holding a `dense_resource` (it fails: "all of {value, result} have same type"), so f64
    modules compile with the demotion off. The MLIR itself is valid.
    """
    return ("--iree-input-demote-f64-to-f32=false",) if element is ScalarType.F64 else ()


def build_suite(element: ScalarType, *, host_scalars: bool = True) -> Suite:
    suite = Suite(element)
    e = element
    if not host_scalars:
        original_add = suite.add

        def add_without_host_scalars(name, *args):
            if name not in HOST_SCALAR_CASES:
                original_add(name, *args)

        suite.add = add_without_host_scalars  # type: ignore[method-assign]
    np_dtype = NUMPY_DTYPES[e]
    for op_class, np_op, word in ((Add, np.add, "add"), (Mul, np.multiply, "mul")):
        for label, lhs_type, rhs_type, result_type, lhs_shape, rhs_shape in (
            ("static", tensor(e, 2, 3), tensor(e, 2, 3), tensor(e, 2, 3), (2, 3), (2, 3)),
            ("bcast_row", tensor(e, 2, 3), tensor(e, 3), tensor(e, 2, 3), (2, 3), (3,)),
            ("bcast_ones", tensor(e, 2, 1), tensor(e, 1, 3), tensor(e, 2, 3), (2, 1), (1, 3)),
            ("bcast_rank0", tensor(e, 2, 3), tensor(e), tensor(e, 2, 3), (2, 3), ()),
            ("rank0", tensor(e), tensor(e), tensor(e), (), ()),
            (
                "dynamic",
                tensor(e, None, None),
                tensor(e, None, None),
                tensor(e, None, None),
                (4, 5),
                (4, 5),
            ),
            (
                "dynamic_bcast",
                tensor(e, None, 3),
                tensor(e, 1, 3),
                tensor(e, None, 3),
                (5, 3),
                (1, 3),
            ),
            (
                "dynamic_rank_ext",
                tensor(e, 2, None, 4),
                tensor(e, None, 4),
                tensor(e, 2, None, 4),
                (2, 3, 4),
                (3, 4),
            ),
        ):
            lhs, rhs = suite.data(*lhs_shape), suite.data(*rhs_shape)
            suite.add(
                f"{word}_{label}",
                [lhs_type, rhs_type],
                _binary(op_class, result_type),
                [lhs, rhs],
                [np_op(lhs, rhs).astype(np_dtype)],
            )
        lhs, rhs = suite.data(), suite.data()
        suite.add(
            f"{word}_scalar",
            [e, e],
            _binary(op_class, e),
            [lhs[()], rhs[()]],
            [np_op(lhs, rhs).astype(np_dtype)],
        )

    for label, lhs_type, rhs_type, result_type in (
        ("static", tensor(e, 2, 3), tensor(e, 3, 4), tensor(e, 2, 4)),
        ("dynamic", tensor(e, None, 3), tensor(e, 3, None), tensor(e, None, None)),
        ("dynamic_k", tensor(e, 2, None), tensor(e, None, 4), tensor(e, 2, 4)),
    ):
        lhs, rhs = suite.data(2, 3), suite.data(3, 4)
        suite.add(
            f"matmul_{label}",
            [lhs_type, rhs_type],
            _binary(MatMul, result_type),
            [lhs, rhs],
            [(lhs @ rhs).astype(np_dtype)],
        )

    for label, source_type, permutation, result_type in (
        ("static", tensor(e, 2, 3, 4), (2, 0, 1), tensor(e, 4, 2, 3)),
        ("dynamic", tensor(e, None, 3, None), (1, 2, 0), tensor(e, 3, None, None)),
        ("matrix", tensor(e, 2, 3), (1, 0), tensor(e, 3, 2)),
        ("scalar", tensor(e), (), tensor(e)),  # (IREE 3.13's MLIR crashed on it: builders.structured.transpose)
    ):
        source = suite.data(*{3: (2, 3, 4), 2: (2, 3), 0: ()}[len(permutation)])

        def build(ids, operand, permutation=permutation, result_type=result_type):
            result = ids(result_type)
            return [Transpose(result, operand, permutation)], [result]

        suite.add(
            f"transpose_{label}",
            [source_type],
            build,
            [source],
            [np.transpose(source, permutation)],
        )

    for label, source_type, index_type in (
        ("static_i64", tensor(e, 2, 3), I64),
        ("dynamic_i32", tensor(e, None, None), I32),
    ):
        source = suite.data(2, 3)

        def build(ids, operand, row, column, source_type=source_type):
            result = ids(e)
            return [TensorExtract(result, operand, (row, column))], [result]

        suite.add(
            f"extract_{label}",
            [source_type, index_type, index_type],
            build,
            [source, NUMPY_DTYPES[index_type](1), NUMPY_DTYPES[index_type](2)],
            [source[1, 2]],
        )
    source = suite.data()

    def build_rank0(ids, operand):
        result = ids(e)
        return [TensorExtract(result, operand, ())], [result]

    suite.add("extract_rank0", [tensor(e)], build_rank0, [source], [source[()]])

    # Constants: a blob, a splat, a rank-0 tensor; added to the input so that the numbers come
    # from a real computation.
    blob, splat = suite.data(2, 3), np.full((2, 3), 3, dtype=np_dtype)
    rank0 = suite.data()

    def build_consts(ids, operand):
        blob_value, splat_value, rank0_value = (
            ids(tensor(e, 2, 3)),
            ids(tensor(e, 2, 3)),
            ids(tensor(e)),
        )
        sum1, sum2, sum3 = ids(tensor(e, 2, 3)), ids(tensor(e, 2, 3)), ids(tensor(e, 2, 3))
        return [
            Const(blob_value, blob.tobytes()),
            Const(splat_value, splat.tobytes()),
            Const(rank0_value, rank0.tobytes()),
            Add(sum1, operand, blob_value),
            Mul(sum2, sum1, splat_value),
            Add(sum3, sum2, rank0_value),
        ], [sum3]

    source = suite.data(2, 3)
    suite.add(
        "constants",
        [tensor(e, 2, 3)],
        build_consts,
        [source],
        [((source + blob) * splat + rank0).astype(np_dtype)],
    )

    def build_scalar_const(ids, operand):
        scalar, total = ids(e), ids(e)
        return [Const(scalar, 2), Add(total, operand, scalar)], [total]

    source = suite.data()
    suite.add(
        "scalar_constant",
        [e],
        build_scalar_const,
        [source[()]],
        [np.asarray(source + 2, dtype=np_dtype)],
    )

    # Globals: a blob tensor, a splat tensor, a scalar (stored as a 0-d tensor).
    weight, ones = suite.data(3, 2), np.ones((2, 2), dtype=np_dtype)
    suite.globals += [
        Global("weight", tensor(e, 3, 2), weight.tobytes()),
        Global("ones", tensor(e, 2, 2), ones.tobytes()),
        Global("scale", e, 3),
    ]

    def build_globals(ids, operand):
        w, o = ids(tensor(e, 3, 2)), ids(tensor(e, 2, 2))
        product, biased = ids(tensor(e, 2, 2)), ids(tensor(e, 2, 2))
        return [
            GetGlobal(w, "weight"),
            GetGlobal(o, "ones"),
            MatMul(product, operand, w),
            Add(biased, product, o),
        ], [biased]

    source = suite.data(2, 3)
    suite.add(
        "globals",
        [tensor(e, 2, 3)],
        build_globals,
        [source],
        [(source @ weight + ones).astype(np_dtype)],
    )

    def build_scalar_global(ids, operand):
        scale, scaled = ids(e), ids(e)
        return [GetGlobal(scale, "scale"), Mul(scaled, operand, scale)], [scaled]

    source = suite.data()
    suite.add(
        "scalar_global",
        [e],
        build_scalar_global,
        [source[()]],
        [np.asarray(source * 3, dtype=np_dtype)],
    )
    return suite


@pytest.mark.parametrize("element", ELEMENTS, ids=lambda element: element.name)
def test_suite_text_parses_and_passes_iree_opt(element):
    module = build_suite(element).module()
    assert verify(module) == []  # the lowering's contract: verified input
    lowered = lower_to_mlir(module)
    text = check_lowered(lowered)
    assert "dense_resource<weight>" in text
    assert "ml_program.global private @scale(dense<3" in text
    assert "dense_resource<constants.const0>" in text


@pytest.mark.parametrize("element", ELEMENTS, ids=lambda element: element.name)
def test_ops_compute_numpy_results(element, tmp_path):
    """One compile per element type; every case runs and every mismatch is reported."""
    host_scalars = element is not ScalarType.F16  # see F16_HOST_SCALARS
    suite = build_suite(element, host_scalars=host_scalars)
    lowered = lower_to_mlir(suite.module())
    vm_module = load_vmfb(compile_module(lowered, tmp_path, extra_flags=compile_flags(element)))
    failures = []
    for case, (inputs, expected) in suite.cases.items():
        try:
            results = call(vm_module, case, *inputs)
            assert len(results) == len(expected)
            for result, want in zip(results, expected, strict=True):
                got = from_abi(result, want)
                assert got.shape == np.shape(want), f"shape {got.shape} != {np.shape(want)}"
                np.testing.assert_array_equal(got, want)
        except AssertionError as error:
            failures.append(f"{case}: {error}")
    assert not failures, "\n".join(failures)
    expected_cases = 32 if host_scalars else 32 - len(HOST_SCALAR_CASES)
    assert len(suite.cases) == expected_cases
