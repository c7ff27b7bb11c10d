"""A dynamic dim that is 1 at run time is not broadcast by the element-wise lowering; a run-time
check must stop the program with a message naming the op, never compute a wrong-shaped result."""

from __future__ import annotations

import iree.compiler as iree_compiler
import iree.runtime as iree_runtime
import numpy as np
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.ir import (
    Add,
    Block,
    Function,
    FunctionType,
    Module,
    Region,
    Return,
    ScalarType,
    TensorType,
    Value,
    ValueId,
    verify,
)

DYNAMIC = TensorType(ScalarType.F32, (None, 4))


@pytest.fixture(scope="module")
def add_dynamic():
    lhs, rhs, result = (Value(ValueId(index), DYNAMIC) for index in range(3))
    body = Block((lhs, rhs), [Add(result, lhs, rhs, loc="add_1"), Return((result,))])
    module = Module(functions=[Function("main", FunctionType((DYNAMIC, DYNAMIC), (DYNAMIC,)), Region([body]))])
    assert verify(module) == []
    vmfb = iree_compiler.compile_str(
        lower_to_mlir(module).to_text(),
        target_backends=["llvm-cpu"],
        extra_args=["--iree-llvmcpu-target-cpu=host"],
    )
    return iree_runtime.load_vm_flatbuffer(vmfb, driver="local-task")


def test_equal_dynamic_dims_add(add_dynamic):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(add_dynamic.main(x, x).to_host(), x + x)


def test_dynamic_one_is_refused_at_run_time(add_dynamic):
    ones, full = np.ones((1, 4), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(Exception, match=r"\[node 'add_1'\]: 'niro.add' op: dynamic dim 0 of operand #1 differs"):
        add_dynamic.main(ones, full)
