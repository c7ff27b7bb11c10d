"""The same module gets the same diagnostics whatever the process imported before verify().

The ONNX operator library's type rules are found through the `niro.op_type_rules` entry
point when verify() first meets an op no loaded library has a rule for, so a `.niro` module
with an ill-typed `onnx.Relu` is diagnosed the same in a process that never imported
niro.frontends.onnx as in one that did. Each check runs in a fresh interpreter, since the
test process itself has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

MODULE = """niro.func @main(tensor<2xf32> {name = "x"}) -> (tensor<2xi64> {name = "y"}) {
^bb0(%0: tensor<2xf32>):
  %1 = "onnx.Relu"(%0) {niro.opset = 17} : (tensor<2xf32>) -> tensor<2xi64> loc("relu")
  niro.return %1 : tensor<2xi64>
}
"""

_VERIFY = """
import json, sys
{prelude}
from niro.ir import parse_module, verify
diagnostics = verify(parse_module(sys.stdin.read()))
print(json.dumps([[d.rule, d.message] for d in diagnostics]))
"""


def _diagnostics(prelude: str) -> list[list[str]]:
    completed = subprocess.run(
        [sys.executable, "-c", _VERIFY.format(prelude=prelude)],
        input=MODULE,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(completed.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "prelude", ["", "import niro.frontends.onnx"], ids=["ir-only", "frontend-imported"]
)
def test_an_ill_typed_onnx_op_gets_the_onnx_rule_in_every_process(prelude) -> None:
    assert _diagnostics(prelude) == [
        [
            "onnx-element-type",
            "'onnx.Relu' op output #0 'Y' has element type i64, but T is f32 (from input #0 'X')"
            " in Relu-14",
        ]
    ]
