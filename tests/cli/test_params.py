"""`--params FILE.irpa`: weights to an IREE parameter archive, the MLIR naming them.

Real runs only: the CLI writes the module and the archive, iree-compile compiles the module
(which must stay small: the weights are not embedded), iree.runtime and iree-run-module run it
with the archive, and the results match onnxruntime. The archive is compared byte for byte with
the one iree.runtime's own writer makes of the same arrays.
"""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest
from niro.backends.mlir import find_tool

from niroc.checking import IREE_COMPILE_FLAGS, load_iree_module
from niroc.cli import main

from .niroc_runner import VENV_BIN, run_niroc
from .test_weights_output import SIDE, write_model


def compile_vmfb(source, folder):
    output = folder / "module.vmfb"
    completed = subprocess.run(
        [find_tool("iree-compile"), *IREE_COMPILE_FLAGS, str(source), "-o", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return output


def expected_output(folder, x):
    import onnxruntime

    session = onnxruntime.InferenceSession(
        str(folder / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("suffix", [".mlir", ".mlirbc"])
def test_compiled_with_the_archive_it_matches_onnxruntime(tmp_path, suffix):
    weight, bias = write_model(tmp_path, external=True)
    completed = run_niroc(
        str(tmp_path / "model.onnx"), "--params", "model.irpa", "-o", f"model{suffix}", cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    module = tmp_path / f"model{suffix}"
    # the 96x96 weight is a parameter, the 96-element bias (under 100 elements) stays inline
    assert module.stat().st_size < len(weight) / 4
    if suffix == ".mlir":
        text = module.read_text()
        assert 'ml_program.global private @w(#stream.parameter.named<"model"::"w"> : ' in text
        assert "tensor<96x96xf32>" in text and "dense_resource<b>" in text
        assert "dense_resource<w>" not in text
    vmfb = compile_vmfb(module, tmp_path)
    assert vmfb.stat().st_size < len(weight) / 2  # iree-compile did not embed the weight
    x = np.random.default_rng(3).standard_normal((1, SIDE)).astype(np.float32)
    got = load_iree_module(vmfb, tmp_path / "model.irpa")[_function(tmp_path)](x).to_host()
    np.testing.assert_allclose(got, expected_output(tmp_path, x), rtol=1e-4, atol=1e-4)


def _function(folder) -> str:
    return onnx.load(str(folder / "model.onnx"), load_external_data=False).graph.name


def test_iree_run_module_takes_the_archive(tmp_path):
    write_model(tmp_path, external=False)
    completed = run_niroc(
        str(tmp_path / "model.onnx"), "--params", "p.irpa", "-o", "m.mlir", cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    vmfb = compile_vmfb(tmp_path / "m.mlir", tmp_path)
    x = np.ones((1, SIDE), np.float32)
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run(
        [
            str(VENV_BIN / "iree-run-module"),
            f"--module={vmfb}",
            f"--parameters=model={tmp_path / 'p.irpa'}",
            f"--function={_function(tmp_path)}",
            f"--input=@{tmp_path / 'x.npy'}",
            f"--output=@{tmp_path / 'y.npy'}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(
        np.load(tmp_path / "y.npy"), expected_output(tmp_path, x), rtol=1e-4, atol=1e-4
    )
    # without the archive the module cannot run: the weight is not in it
    bare = subprocess.run(
        [str(VENV_BIN / "iree-run-module"), f"--module={vmfb}", f"--function={_function(tmp_path)}",
         f"--input=@{tmp_path / 'x.npy'}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bare.returncode != 0


def test_the_archive_is_what_irees_own_writer_makes(tmp_path):
    import iree.runtime as runtime

    weight, bias = write_model(tmp_path, external=True)
    completed = run_niroc(
        str(tmp_path / "model.onnx"), "--params", "ours.irpa", "--params-threshold", "1",
        "-o", "m.mlir", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    arrays = {
        "w": np.frombuffer(weight, np.float32).reshape(SIDE, SIDE),
        "b": np.frombuffer(bias, np.float32),
    }
    runtime.save_archive_file(arrays, str(tmp_path / "theirs.irpa"))
    assert (tmp_path / "ours.irpa").read_bytes() == (tmp_path / "theirs.irpa").read_bytes()


def test_a_failed_write_leaves_both_outputs_as_they_were(tmp_path, monkeypatch, capsys):
    from niro.backends.mlir import LoweredModule

    write_model(tmp_path, external=True)
    (tmp_path / "model.irpa").write_bytes(b"old archive")

    def fail(self, stream, **_):
        stream.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(LoweredModule, "write_text", fail)
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "model.onnx"), "--params", str(tmp_path / "model.irpa"),
              "-o", str(tmp_path / "model.mlir")])  # fmt: skip
    assert exit_.value.code == 1
    assert "No space left on device" in capsys.readouterr().err
    assert (tmp_path / "model.irpa").read_bytes() == b"old archive"
    assert not (tmp_path / "model.mlir").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "model.irpa",
        "model.onnx",
        "weights.bin",
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--params", "p.irpa", "--emit", "niro"), "--params needs MLIR output, not --emit niro"),
        (("--params-threshold", "5"), "--params-threshold needs --params FILE.irpa"),
        (("--params", "-"), "--params needs a file, not stdout"),
        (("--params", "same.mlir", "-o", "same.mlir"), "--params and -o name the same file"),
        (("--params", "p.irpa", "--params-threshold", "0"), "0 is not in the range x>=1"),
    ],
)
def test_usage_errors(tmp_path, arguments, message):
    write_model(tmp_path, external=False)
    completed = run_niroc(str(tmp_path / "model.onnx"), *arguments, cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr
    assert message in completed.stderr
    assert not (tmp_path / "p.irpa").exists()
