"""Times verify() on a 100k-op module: a chain of scalar Adds, and a chain of broadcasting
tensor Adds spread over 1,000 blocks (so dominance crosses blocks). Run: `python tests/bench/bench_verifier.py`."""

from __future__ import annotations

import sys
import time

from niro.ir import (
    Add,
    Block,
    Branch,
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


def scalar_chain(count: int) -> Module:
    value = Value(ValueId(0), ScalarType.F32)
    first = value
    ops = []
    for index in range(1, count + 1):
        result = Value(ValueId(index), ScalarType.F32)
        ops.append(Add(result=result, lhs=value, rhs=first))
        value = result
    ops.append(Return((value,)))
    body = Region([Block(arguments=(first,), operations=ops)])
    signature = FunctionType((ScalarType.F32,), (ScalarType.F32,))
    return Module(functions=[Function("chain", signature, body)])


def tensor_blocks(count: int, per_block: int) -> Module:
    row = TensorType(ScalarType.F32, (None, 4))
    bias = TensorType(ScalarType.F32, (4,))
    first = Value(ValueId(0), row)
    weight = Value(ValueId(1), bias)
    next_id = 2
    blocks = [Block(arguments=(first, weight))]
    value = first
    for block_index in range(count // per_block):
        ops = blocks[-1].operations
        for _ in range(per_block - 1):
            result = Value(ValueId(next_id), row)
            next_id += 1
            ops.append(Add(result=result, lhs=value, rhs=weight))
            value = result
        if block_index == count // per_block - 1:
            ops.append(Return((value,)))
        else:
            successor = Block()
            ops.append(Branch(successor))
            blocks.append(successor)
    signature = FunctionType((row, bias), (row,))
    return Module(functions=[Function("blocks", signature, Region(blocks))])


def measure(name: str, module: Module) -> float:
    start, cpu_start = time.perf_counter(), time.process_time()
    diagnostics = verify(module)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    assert diagnostics == [], diagnostics[:3]
    # CPU time too: on a shared machine the wall clock also measures the neighbours.
    print(f"{name}: {elapsed:.3f} s wall, {cpu:.3f} s CPU")
    return elapsed


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    measure(f"{count} scalar Adds in one block", scalar_chain(count))
    measure(f"{count} tensor Adds in {count // 100} blocks", tensor_blocks(count, 100))
