"""An exception niroc did not expect (a bug, here in a registered lowering plugin) is still one
line and exit code 1; --debug adds the traceback. Runs `niroc.cli.main` in-process, because the
plugin has to be registered in the same process."""

import pytest
from niro.backends.mlir import register_lowering, unregister_lowering

from niroc.cli import main

MODULE = """\
niro.func @main(tensor<2xf32>) -> (tensor<2xf32>) {
^bb0(%0: tensor<2xf32>):
  %1 = "test.explode"(%0) : (tensor<2xf32>) -> tensor<2xf32> loc("boom")
  niro.return %1 : tensor<2xf32>
}
"""


@pytest.fixture
def exploding_lowering():
    @register_lowering("test.explode")
    def explode(ctx):
        raise ZeroDivisionError("a plugin divided by zero")

    yield
    unregister_lowering("test.explode")


def run_main(arguments: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    return exit_info.value.code


def test_an_unexpected_exception_is_one_line(tmp_path, capsys, exploding_lowering):
    source = tmp_path / "model.niro"
    source.write_text(MODULE)
    assert run_main([str(source), "-o", str(tmp_path / "out.mlir")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "error: internal error: ZeroDivisionError: a plugin divided by zero "
        "(run with --debug for a traceback)\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model.niro"]


def test_debug_adds_the_traceback(tmp_path, capsys, exploding_lowering):
    source = tmp_path / "model.niro"
    source.write_text(MODULE)
    assert run_main(["--debug", str(source)]) == 1
    error = capsys.readouterr().err
    assert error.startswith("Traceback (most recent call last):\n")
    assert "in explode\n" in error
    assert error.endswith("error: internal error: ZeroDivisionError: a plugin divided by zero\n")
