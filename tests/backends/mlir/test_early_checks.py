"""Run-time size checks sit at the top of the function, before the ops that compute tensors
(backends/mlir/early_checks.py): IREE cuts the device work at every check left between two
tensor ops. A check still stops a call that breaks it, with its message, and the numbers of a
call that passes stay right (real iree-compile, run, compared with onnxruntime)."""

from __future__ import annotations

import iree.compiler as iree_compiler
import iree.runtime as iree_runtime
import numpy as np
import onnx
import onnxruntime
import pytest
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper, numpy_helper


def _model(path) -> tuple[str, str]:
    """y = x @ W (x: [a, 4]), r = Reshape(y, [Shape(x)[0], 2, 4]), z = r + v (v: [c, 2, 4]):
    the Add's check of dim 0 (a against c) reads the dim of the Reshape's result, which the
    hoisting must trace back to x's dim."""
    weight = np.arange(32, dtype=np.float32).reshape(4, 8) / 10.0
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["y"]),
        helper.make_node("Shape", ["x"], ["s"], end=1),
        helper.make_node("Concat", ["s", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["y", "shape"], ["r"]),
        helper.make_node("Add", ["r", "v"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "early",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", 4]),
            helper.make_tensor_value_info("v", TensorProto.FLOAT, ["c", 2, 4]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(weight, "W"),
            numpy_helper.from_array(np.array([2, 4], np.int64), "tail"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    file = path / "model.onnx"
    onnx.save(model, file)
    return str(file), lower_to_mlir(import_model(str(file))).to_text()


def _run(text: str, *inputs: np.ndarray) -> np.ndarray:
    vmfb = iree_compiler.compile_str(
        text, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=host"]
    )
    module = iree_runtime.load_vm_flatbuffer(vmfb, driver="local-task")
    return module.early(*inputs).to_host()


def test_checks_come_before_the_tensor_ops(tmp_path):
    _, text = _model(tmp_path)
    lines = text.splitlines()
    check = next(i for i, line in enumerate(lines) if "'niro.add' op: dynamic dim 0" in line)
    first_compute = next(i for i, line in enumerate(lines) if "linalg." in line)
    assert check < first_compute, "\n".join(lines[: check + 1])
    reshape = next(i for i, line in enumerate(lines) if "tensor.reshape" in line)
    assert check < reshape


def test_hoisted_checks_keep_numbers_and_messages(tmp_path):
    path, text = _model(tmp_path)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    v = np.random.default_rng(1).standard_normal((3, 2, 4)).astype(np.float32)
    (expected,) = session.run(None, {"x": x, "v": v})
    np.testing.assert_allclose(_run(text, x, v), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match=r"'niro.add' op: dynamic dim 0 of operand #1 differs"):
        _run(text, x, np.ones((2, 2, 4), np.float32))


PARTS = 70
"""More parts than the 64-deep affine expressions IREE 3.13 reads from bytecode."""


def _concat_model(path) -> str:
    """z = Concat(x0..x69) + v, every dim its own: the Add's check compares v's dim with the
    concatenation's, which the dim resolution makes an affine sum of 70 sizes."""
    names = [f"x{index}" for index in range(PARTS)]
    nodes = [
        helper.make_node("Concat", names, ["joined"], axis=0),
        helper.make_node("Add", ["joined", "v"], ["z"]),
    ]
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [f"n{name}"]) for name in names]
    graph = helper.make_graph(
        nodes,
        "early",
        [*inputs, helper.make_tensor_value_info("v", TensorProto.FLOAT, ["m"])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    file = path / "concat.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), file)
    return str(file)


def test_a_resolved_sum_of_many_sizes_is_arith_not_a_deep_affine_apply(tmp_path):
    text = lower_to_mlir(import_model(_concat_model(tmp_path))).to_text()
    assert "affine.apply" not in text
    assert text.count("arith.addi") >= PARTS - 1


def test_a_resolved_sum_of_many_sizes_compiles_from_bytecode(tmp_path):
    """iree-compile read of the .mlirbc (before: 'AffineExpr work stack overflow'), numbers as
    onnxruntime's, and a call that breaks the check still stops with its message."""
    path = _concat_model(tmp_path)
    lowered = lower_to_mlir(import_model(path))
    source = tmp_path / "concat.mlirbc"
    with open(source, "wb") as stream:
        lowered.write_bytecode(stream)
    vmfb = iree_compiler.compile_file(
        str(source), target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=host"]
    )
    module = iree_runtime.load_vm_flatbuffer(vmfb, driver="local-task")
    rng = np.random.default_rng(2)
    parts = [rng.standard_normal(index % 3 + 1).astype(np.float32) for index in range(PARTS)]
    total = sum(len(part) for part in parts)
    v = rng.standard_normal(total).astype(np.float32)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {f"x{index}": part for index, part in enumerate(parts)} | {"v": v}
    (expected,) = session.run(None, feeds)
    np.testing.assert_array_equal(module.early(*parts, v).to_host(), expected)
    with pytest.raises(Exception, match=r"'niro.add' op: dynamic dim 0 of operand #1 differs"):
        module.early(*parts, v[:-1])


def _calls_model(path) -> str:
    """A model-local function F(p, q) = (p + q) @ W, called twice: y = F(x, v), z = F(y, u),
    then out = z + t. F's check (dim 0 of p against q's) opens F; the last Add's check reads
    dim 0 of the second call's result. x: [a, 4]; v, u, t: [b, 4], [c, 4], [d, 4]."""
    weight = helper.make_tensor(
        "W", TensorProto.FLOAT, [4, 4], (np.arange(16, dtype=np.float32) / 8.0).tolist()
    )
    function = helper.make_function(
        "local",
        "F",
        ["p", "q"],
        ["r"],
        [
            helper.make_node("Constant", [], ["W"], value=weight),
            helper.make_node("Add", ["p", "q"], ["s"]),
            helper.make_node("MatMul", ["s", "W"], ["r"]),
        ],
        opset_imports=[helper.make_opsetid("", 17)],
    )
    nodes = [
        helper.make_node("F", ["x", "v"], ["y"], domain="local"),
        helper.make_node("F", ["y", "u"], ["z"], domain="local"),
        helper.make_node("Add", ["z", "t"], ["out"]),
    ]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, [dim, 4])
        for name, dim in (("x", "a"), ("v", "b"), ("u", "c"), ("t", "d"))
    ]
    graph = helper.make_graph(
        nodes, "early", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[function],
    )
    file = path / "calls.onnx"
    onnx.save(model, file)
    return str(file)


def _function_bodies(text: str) -> dict[str, list[str]]:
    """The lines of each `func.func` of `text`, by name."""
    bodies: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("func.func"):
            current = bodies.setdefault(line.split("@")[1].split("(")[0], [])
        current.append(line)
    return bodies


def test_checks_opening_a_called_function_are_made_at_its_call_sites(tmp_path):
    """F's check runs at each call site, and there it moves up with the caller's own: every
    check of the call comes before the first call and the first tensor op, F keeps none."""
    text = lower_to_mlir(import_model(_calls_model(tmp_path))).to_text()
    bodies = _function_bodies(text)
    main = bodies.pop("early")
    assert bodies and all("cf.assert" not in "\n".join(body) for body in bodies.values()), text
    checks = [index for index, line in enumerate(main) if "cf.assert" in line]
    work = [index for index, line in enumerate(main) if "call @" in line or "linalg." in line]
    assert len(checks) >= 3 and max(checks) < min(work), "\n".join(main)
    # the last Add's check reads the size the second call made: computed from its operands
    assert any("'niro.add' op: dynamic dim 0 of operand #1" in main[index] for index in checks)


def test_checks_made_at_call_sites_keep_one_submission_numbers_and_messages(tmp_path):
    """IREE makes one command submission of the whole call (before: one more per call of F,
    whose checks landed between the caller's tensor ops), the numbers are onnxruntime's, and a
    wrong size in either call, or after them, stops the call with the check's message."""
    path = _calls_model(tmp_path)
    text = lower_to_mlir(import_model(path)).to_text()
    stream = iree_compiler.compile_str(
        text,
        target_backends=["llvm-cpu"],
        extra_args=["--iree-llvmcpu-target-cpu=host", "--compile-to=stream"],
    ).decode()
    assert stream.count("stream.cmd.execute") == 1
    rng = np.random.default_rng(3)
    x, v, u, t = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(4))
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x, "v": v, "u": u, "t": t})
    np.testing.assert_allclose(_run(text, x, v, u, t), expected, rtol=1e-5, atol=1e-5)
    short = np.ones((2, 4), np.float32)
    for inputs in ((x, short, u, t), (x, v, short, t), (x, v, u, short)):
        with pytest.raises(Exception, match=r"'niro.add' op: dynamic dim 0 of operand #1 differs"):
            _run(text, *inputs)
