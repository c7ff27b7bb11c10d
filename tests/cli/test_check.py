"""`niroc check`: real niroc + iree-compile + iree.runtime runs against onnxruntime.

A wrong result is injected by replacing one registered lowering inside the test (onnx.Sigmoid
lowered as onnx.Tanh): the check must report it, name the Sigmoid node (all at once for a
small graph, by bisection for a large one), and write a repro that reproduces it. The CLI runs
in-process (`niroc.cli.main`) so that the replaced lowering is the one it uses.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import pytest
from niro.backends.mlir import register_lowering, registered_lowering
from onnx import TensorProto, helper, numpy_helper

from niroc import checking
from niroc.cli import main

from .niroc_runner import ROOT, run_niroc
from .test_progress import ANSI_ESCAPE, run_with_terminal_stderr

MLP = ROOT / "testdata" / "cli" / "mlp.onnxtxt"


def run_check(capsys, *arguments: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `niroc check ARGUMENTS` run in this process."""
    with pytest.raises(SystemExit) as exit_:
        main(["check", *arguments])
    captured = capsys.readouterr()
    return exit_.value.code, captured.out, captured.err


def json_records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.fixture
def sigmoid_lowered_as_tanh():
    """A wrong lowering: onnx.Sigmoid built by the onnx.Tanh rule, restored afterwards."""
    original = registered_lowering("onnx.Sigmoid")
    wrong = registered_lowering("onnx.Tanh").rule
    register_lowering("onnx.Sigmoid", since=original.since, until=original.until, replace=True)(
        wrong
    )
    try:
        yield
    finally:
        register_lowering("onnx.Sigmoid", since=original.since, until=original.until, replace=True)(
            original.rule
        )


def chain_model(path, length: int, sigmoid_at: int, declared: bool = False) -> str:
    """x -> `length` nodes (Add/Mul by constants, a Sigmoid at `sigmoid_at`, skip connections
    every few nodes) -> y; a dynamic batch dim. `declared`: every value typed in value_info, as
    PyTorch's dynamo exporter writes them, and node 2 a Cast. Returns the Sigmoid's node name."""
    nodes, initializers = [], []
    current = "x"
    for index in range(length):
        output = f"v{index}"
        if index == sigmoid_at:
            nodes.append(helper.make_node("Sigmoid", [current], [output], name=f"node{index}"))
        elif declared and index == 2:  # dynamo's `_to_copy`: a Cast to the type it has
            cast = helper.make_node("Cast", [current], [output], name=f"node{index}", to=1)
            nodes.append(cast)
        elif index % 5 == 4 and index >= 8:
            nodes.append(
                helper.make_node("Add", [current, f"v{index - 3}"], [output], name=f"node{index}")
            )
        else:
            constant = f"c{index}"
            initializers.append(
                numpy_helper.from_array(
                    np.full((4,), 0.5 if index % 2 else 0.01 * index, np.float32), constant
                )
            )
            op_type = "Mul" if index % 2 else "Add"
            nodes.append(
                helper.make_node(op_type, [current, constant], [output], name=f"node{index}")
            )
        current = output
    nodes.append(helper.make_node("Identity", [current], ["y"], name="out"))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        initializer=initializers,
    )
    if declared:
        graph.value_info.extend(
            helper.make_tensor_value_info(f"v{index}", TensorProto.FLOAT, ["batch", 4])
            for index in range(length)
        )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return f"node{sigmoid_at}"


def test_a_model_that_matches(capsys):
    code, out, err = run_check(capsys, str(MLP), "--seed", "3")
    assert code == 0, err
    assert "y        [2,4]   float32" in out
    assert out.splitlines()[2].endswith("   match")
    assert out.strip().endswith("1 output, 0 mismatches")


def test_dynamic_dims_default_to_one_with_a_note(capsys, tmp_path):
    chain_model(tmp_path / "m.onnx", 6, sigmoid_at=2)
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"))
    assert code == 0, err
    assert "note: dynamic dim 'batch' of input 'x' set to 1; pass --dim batch=SIZE" in err
    assert "y        [1,4]" in out
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"), "--dim", "batch=7")
    assert code == 0, err
    assert "note:" not in err
    assert "y        [7,4]" in out


def test_inputs_from_npz(capsys, tmp_path):
    chain_model(tmp_path / "m.onnx", 6, sigmoid_at=2)
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.arange(12, dtype=np.float32).reshape(3, 4))
    code, out, err = run_check(
        capsys, str(tmp_path / "m.onnx"), "--inputs", str(feeds), "--format", "json"
    )
    assert code == 0, err
    records = json_records(out)
    assert records[0] == {
        "type": "output",
        "file": str(tmp_path / "m.onnx"),
        "name": "y",
        "shape": [3, 4],
        "dtype": "float32",
        "max_abs_error": records[0]["max_abs_error"],
        "max_rel_error": records[0]["max_rel_error"],
        "verdict": "match",
    }
    assert records[0]["max_abs_error"] < 1e-4
    assert records[-1] == {
        "type": "summary",
        "file": str(tmp_path / "m.onnx"),
        "outputs": 1,
        "mismatches": 0,
    }


def test_an_injected_wrong_lowering_is_found_at_its_node(capsys, tmp_path, sigmoid_lowered_as_tanh):
    culprit = chain_model(tmp_path / "m.onnx", 12, sigmoid_at=5)
    repro = tmp_path / "repro"
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"), "--repro", str(repro))
    assert code == 1, err
    assert "y        [1,4]   float32" in out and "mismatch" in out
    assert f"first differing node: '{culprit}' (Sigmoid), node 6 of 13;" in out
    assert "(found in 1 compile)" in out
    assert out.strip().endswith("1 output, 1 mismatch")
    # the repro is the Sigmoid alone, and reproduces the mismatch at that node
    single = onnx.load(str(repro / "model.onnx"))
    assert [node.op_type for node in single.graph.node] == ["Sigmoid"]
    code, out, err = run_check(
        capsys, str(repro / "model.onnx"), "--inputs", str(repro / "inputs.npz"), "--format", "json"
    )
    assert code == 1, err
    records = json_records(out)
    assert records[0]["verdict"] == "mismatch"
    node = next(record for record in records if record["type"] == "node")
    assert (node["node"], node["op_type"], node["index"]) == (culprit, "Sigmoid", 0)


def test_values_declared_in_value_info_are_exposed(capsys, tmp_path, sigmoid_lowered_as_tanh):
    """A dynamo export types every value in value_info; exposing one as an output (declared by
    name only) must still import, or the search for the node stops at its first compile."""
    culprit = chain_model(tmp_path / "m.onnx", 12, sigmoid_at=5, declared=True)
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"), "--format", "json")
    assert code == 1, err
    node = next(record for record in json_records(out) if record["type"] == "node")
    assert (node["node"], node["op_type"], node["index"]) == (culprit, "Sigmoid", 5)


def test_the_repro_matches_with_the_right_lowering(capsys, tmp_path, sigmoid_lowered_as_tanh):
    chain_model(tmp_path / "m.onnx", 6, sigmoid_at=1)
    repro = tmp_path / "repro"
    code, _, err = run_check(capsys, str(tmp_path / "m.onnx"), "--repro", str(repro), "-q")
    assert code == 1, err
    completed = run_niroc(
        "check", str(repro / "model.onnx"), "--inputs", str(repro / "inputs.npz"), cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().endswith("1 output, 0 mismatches")


def test_a_large_graph_is_bisected(capsys, tmp_path, sigmoid_lowered_as_tanh):
    length = checking.ALL_AT_ONCE_LIMIT + 16
    culprit = chain_model(tmp_path / "big.onnx", length, sigmoid_at=47)
    code, out, err = run_check(capsys, str(tmp_path / "big.onnx"), "--format", "json")
    assert code == 1, err
    node = next(record for record in json_records(out) if record["type"] == "node")
    assert (node["node"], node["op_type"], node["index"]) == (culprit, "Sigmoid", 47)
    assert [output["verdict"] for output in node["outputs"]] == ["mismatch"]
    assert 2 <= node["compiles"] <= 8  # log2(81) probes, not one per node


def test_a_failing_step_is_named(capsys, tmp_path):
    # MaxPool's Indices at dynamic spatial dims: onnxruntime runs it, niroc refuses it at lowering.
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", "w"])],
            [
                helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("i", TensorProto.INT64, None),
            ],
        ),
        opset_imports=[helper.make_opsetid("", 18)],
    )
    onnx.save(model, str(tmp_path / "m.onnx"))
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"))
    assert code == 1
    assert out == ""
    # (after the notes on the dynamic dims it sets to 1)
    assert [line for line in err.splitlines() if not line.startswith("note: ")][0].startswith(
        f"error: {tmp_path / 'm.onnx'}: import failed: "
    ), err
    assert "Traceback" not in err
    code, out, _ = run_check(capsys, str(tmp_path / "m.onnx"), "--format", "json")
    (record,) = [record for record in json_records(out) if record.get("severity") == "error"]
    assert (record["type"], record["rule"], record["severity"]) == ("diagnostic", "import", "error")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--dim", "batch"), "Invalid value for '--dim': 'batch' is not NAME=SIZE (e.g. batch=1)"),
        (("--dim", "batch=x"), "dim 'batch': 'x' is not a size (a whole number)"),
        (("--dim", "seq=3"), "no input has a dynamic dim named 'seq' (named dims: batch)"),
        (("--format", "yaml"), "Invalid value for '--format'"),
    ],
)
def test_usage_errors(capsys, tmp_path, arguments, message):
    chain_model(tmp_path / "m.onnx", 3, sigmoid_at=1)
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"), *arguments)
    assert code == 2
    assert message in err, err
    assert out == ""


def test_bad_inputs_files_are_usage_errors(capsys, tmp_path):
    chain_model(tmp_path / "m.onnx", 3, sigmoid_at=1)
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, z=np.zeros((1, 4), np.float32))
    code, _, err = run_check(capsys, str(tmp_path / "m.onnx"), "--inputs", str(feeds))
    assert code == 2
    assert "no array for input 'x'; 'z' is no input of the model" in err
    np.savez(feeds, x=np.zeros((1, 4), np.int32))
    code, _, err = run_check(capsys, str(tmp_path / "m.onnx"), "--inputs", str(feeds))
    assert code == 2
    assert "input 'x' is int32, the model takes float32" in err


def test_niro_assembly_is_refused(capsys):
    code, _, err = run_check(capsys, str(ROOT / "testdata" / "cli" / "scale.niro"))
    assert code == 2
    assert "check needs an ONNX model (.onnx, .onnxtxt)" in err


def test_without_the_runtimes_it_says_what_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    code, out, err = run_check(capsys, str(MLP))
    assert code == 1
    assert out == ""
    assert err == "error: niroc check needs onnxruntime: pip install 'niroc[check]'\n"


def test_compile_steps_show_progress_on_a_terminal(tmp_path):
    _, shown = run_with_terminal_stderr("check", str(MLP), cwd=tmp_path)
    for step in (
        f"importing {MLP} with niroc",
        f"compiling {MLP} with iree-compile",
        f"running {MLP} with iree.runtime",
        f"running {MLP} with onnxruntime",
    ):
        assert f"✓ {step} (" in shown, shown


def test_bisection_steps_show_progress(capsys, tmp_path, monkeypatch, sigmoid_lowered_as_tanh):
    import io

    from rich.console import Console

    from niroc import check_cmd
    from niroc.progress import Progress

    terminal = io.StringIO()
    console = Console(file=terminal, force_terminal=True, width=200, highlight=False)
    monkeypatch.setattr(
        check_cmd, "progress_for", lambda session: Progress(console, enabled=True, delay=0)
    )
    chain_model(tmp_path / "big.onnx", checking.ALL_AT_ONCE_LIMIT + 16, sigmoid_at=47)
    code, _, err = run_check(capsys, str(tmp_path / "big.onnx"), "-q")
    assert code == 1, err
    shown = ANSI_ESCAPE.sub("", terminal.getvalue())
    assert "✓ compiling bisection 1: cut after node 41 of 81 with iree-compile (" in shown, shown
    assert "✓ compiling bisection 2: cut after node 61 of 81 with iree-compile (" in shown, shown


def test_a_module_iree_refuses_to_load_is_a_run_failure(capsys, monkeypatch):
    # Without windows.DYNAMIC_TAPS_LIMIT, IREE 3.13 compiles the 7x7 depthwise convolution of
    # Hugging Face's ConvNeXt at a dynamic batch to a dispatch of 102 push constants, which
    # iree.runtime refuses to load (an IndexError): a step that failed, named, not an internal
    # error.
    from niro.backends.mlir.onnx_ops import windows

    monkeypatch.setattr(windows, "DYNAMIC_TAPS_LIMIT", windows.TAPS_LIMIT)
    model = ROOT / "testdata" / "pytorch" / "convnext_hf_dynamo.onnx"
    code, out, err = run_check(capsys, str(model), "--dim", "s77=2")
    assert code == 1
    assert out == ""
    assert err.startswith(f"error: {model}: run failed: "), err
    assert "exceeds limit of 64" in err
    assert "internal error" not in err and "Traceback" not in err


def test_bfloat16_models(capsys, tmp_path):
    """A bf16 input and output: onnxruntime's Python API has no numpy type for bfloat16 (it
    refuses such feeds and cannot return such results), and np.savez stores a bfloat16 array as
    raw 2-byte voids (the form a `--repro` inputs.npz of a bf16 node has too). Both random and
    saved inputs are checked."""
    import ml_dtypes

    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["wide"], to=TensorProto.FLOAT),
            helper.make_node("Sigmoid", ["wide"], ["narrow"]),
            helper.make_node("Cast", ["narrow"], ["y"], to=TensorProto.BFLOAT16),
        ],
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, ["n", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"), "--dim", "n=5", "--format", "json")
    assert code == 0, err
    assert json_records(out)[0] | {"max_abs_error": 0, "max_rel_error": 0} == {
        "type": "output",
        "file": str(tmp_path / "m.onnx"),
        "name": "y",
        "shape": [5, 3],
        "dtype": "bfloat16",
        "max_abs_error": 0,
        "max_rel_error": 0,
        "verdict": "match",
    }
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.linspace(-3, 3, 6).reshape(2, 3).astype(ml_dtypes.bfloat16))
    code, out, err = run_check(
        capsys, str(tmp_path / "m.onnx"), "--inputs", str(feeds), "--format", "json"
    )
    assert code == 0, err
    assert json_records(out)[0]["shape"] == [2, 3]
    assert json_records(out)[0]["verdict"] == "match"


def test_a_matmul_nbits_is_checked_as_onnxruntime_runs_it(capsys, tmp_path):
    """A MatMulNBits at accuracy_level 4 (what onnxruntime-genai's builder writes) quantizes
    the activations to int8 in onnxruntime, and in niroc's module alike: the check runs the
    model as written (no note) and the numbers match."""
    rng = np.random.default_rng(5)
    k, n, block = 64, 16, 32
    weights = {
        "B": rng.integers(0, 256, (n, k // block, block // 2), dtype=np.uint8),
        "scales": rng.uniform(0.5, 1.5, n * k // block).astype(np.float32),
    }
    node = helper.make_node(
        "MatMulNBits", ["a", "B", "scales"], ["y"], domain="com.microsoft",
        K=k, N=n, bits=4, block_size=block, accuracy_level=4,
    )  # fmt: skip
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, n])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "m.onnx"))
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"), "--rtol", "1e-5", "--atol", "1e-4")
    assert code == 0, out + err
    assert "note:" not in err


def test_fused_low_bit_products_are_checked_at_f32_activations(capsys, tmp_path):
    """onnxruntime fuses a blocked DequantizeLinear + MatMul into a MatMulNBits at level 4
    (int8 activations, ~1e-2 off the f32 product ONNX defines and niroc compiles): the check
    has it fuse at level 1 and says so."""
    rng = np.random.default_rng(6)
    k, n, block = 64, 16, 32
    weights = {
        "w": rng.integers(-8, 8, (k, n)).astype(
            onnx.helper.tensor_dtype_to_np_dtype(TensorProto.INT4)
        ),
        "scale": rng.uniform(0.5, 1.5, (k // block, n)).astype(np.float32),
    }
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "scale"], ["dq"], axis=0, block_size=block),
        helper.make_node("MatMul", ["a", "dq"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, n])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "m.onnx"))
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"), "--rtol", "1e-5", "--atol", "1e-4")
    assert code == 0, out + err
    assert "note: onnxruntime fuses the blocked DequantizeLinear + MatMul pairs" in err


def test_outputs_widened_from_half_precision_get_its_tolerance(capsys, tmp_path):
    """An fp16 model with f32 inputs and outputs (onnxruntime's convert_float_to_float16 with
    keep_io_types, autocast exports) ends in Casts to f32 of fp16 values: they carry fp16's
    error and are compared at its tolerance, which the check says."""
    nodes = [
        helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("LayerNormalization", ["h", "scale"], ["n"], axis=-1),
        helper.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["z"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 8]),
        ],
        [numpy_helper.from_array(np.linspace(0.5, 2, 8).astype(np.float16), "scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert checking.widened_from_half(model) == {"y": np.dtype(np.float16)}
    onnx.save(model, str(tmp_path / "m.onnx"))
    code, out, err = run_check(capsys, str(tmp_path / "m.onnx"))
    assert code == 0, out + err
    assert "note: output 'y' is a float16 value widened by a Cast: compared at float16's" in err
    assert "output 'z'" not in err


def test_a_quantizer_one_step_off_is_flagged_as_a_possible_rounding_flip():
    from niroc.check_cmd import _rounding_flip

    def culprit(op_type, dtype, error):
        comparison = checking.Comparison("q", (2,), dtype, error, error, "mismatch")
        return checking.Culprit(0, "node", op_type, (comparison,))

    assert _rounding_flip(culprit("QuantizeLinear", "int16", 1.0))
    assert _rounding_flip(culprit("DynamicQuantizeLinear", "uint8", 1.0))
    assert not _rounding_flip(culprit("QuantizeLinear", "int16", 2.0))
    assert not _rounding_flip(culprit("Conv", "float32", 1.0))


def test_a_failure_on_random_integer_inputs_says_they_were_random(capsys, tmp_path):
    """A Gather of 2 rows at random ids in [0, 4): onnxruntime refuses the ids; the check
    says the integer inputs were random and where valid ones come from."""
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="lookup")],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 3])],
        [numpy_helper.from_array(np.ones((2, 3), np.float32), "table")],
    )
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
        str(tmp_path / "m.onnx"),
    )
    code, _, err = run_check(capsys, str(tmp_path / "m.onnx"))
    assert code == 1
    assert "note: the inputs were random, integer ones (ids) in [0, 4)" in err
    assert "failed:" in err
