"""Weights come through `niroc` byte for byte and the output is the same every run.

The model keeps its weights where big models do: in an external data file (mapped, streamed
as hex, its pages released while writing) and inline in the `.onnx` (split off the wire). Each
is compiled twice by separate processes; the text holds exactly the weights' hex, and text and
bytecode are identical from run to run. The start-up test checks that the CLI does not pay
for modules it does not need (sympy, which onnx_ir imports eagerly).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .niroc_runner import ROOT, run_niroc

SIDE = 96


def write_model(folder, *, external: bool) -> tuple[bytes, bytes]:
    """`y = x @ w + b` with random weights (never splats); returns (w, b) as packed bytes."""
    rng = np.random.default_rng(11)
    weight = rng.standard_normal((SIDE, SIDE)).astype(np.float32)
    bias = rng.standard_normal(SIDE).astype(np.float32)
    initializers = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")]
    if external:
        (folder / "weights.bin").write_bytes(weight.tobytes() + bias.tobytes())
        for tensor, offset, size in ((initializers[0], 0, weight.nbytes), (initializers[1], weight.nbytes, bias.nbytes)):
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (("location", "weights.bin"), ("offset", offset), ("length", size)):
                tensor.external_data.add(key=key, value=str(value))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
        helper.make_node("Add", ["h", "b"], ["y"], name="bias"),
    ]
    graph = helper.make_graph(
        nodes, "fc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SIDE])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, SIDE])],
        initializers,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "model.onnx")
    return weight.tobytes(), bias.tobytes()


def compile_twice(folder, suffix: str) -> tuple[bytes, bytes]:
    outputs = []
    for run in range(2):
        completed = run_niroc("-q", "model.onnx", "-o", f"out{run}{suffix}", cwd=folder)
        assert completed.returncode == 0, completed.stderr
        outputs.append((folder / f"out{run}{suffix}").read_bytes())
    return outputs[0], outputs[1]


def check_weights_and_determinism(folder, weight: bytes, bias: bytes) -> None:
    first, second = compile_twice(folder, ".mlir")
    assert first == second
    text = first.decode()
    assert f'w: "0x04000000{weight.hex().upper()}"' in text
    assert f'b: "0x04000000{bias.hex().upper()}"' in text
    first, second = compile_twice(folder, ".mlirbc")
    assert first == second
    assert weight in first and bias in first


def test_external_weights_come_through_byte_for_byte_and_deterministically(tmp_path):
    weight, bias = write_model(tmp_path, external=True)
    check_weights_and_determinism(tmp_path, weight, bias)


def test_inline_weights_come_through_byte_for_byte_and_deterministically(tmp_path):
    weight, bias = write_model(tmp_path, external=False)
    check_weights_and_determinism(tmp_path, weight, bias)


def test_importing_the_onnx_frontend_leaves_sympy_unloaded_until_used():
    program = (
        "import sys\n"
        "import niro.frontends.onnx\n"
        "assert 'sympy.core' not in sys.modules, 'sympy was imported'\n"
        "import onnx_ir\n"
        "print(onnx_ir.SymbolicDim('N') + 1)\n"  # symbolic arithmetic still works: it loads sympy
        "assert 'sympy.core' in sys.modules\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "N + 1"
