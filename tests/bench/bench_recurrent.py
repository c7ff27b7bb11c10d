"""Run time of a compiled LSTM against the sequence length: niroc + iree-compile (llvm-cpu,
static and dynamic sequence) next to onnxruntime (one thread), to see that it grows about
linearly (IREE copies a loop-carried tensor at every iteration, so Y is written in chunks: see
`backends/mlir/onnx_ops/recurrent.py`). Every number is the fastest of several calls after a
warm-up (the fastest: the machine is shared). Run: `python tests/bench/bench_recurrent.py
[seq,seq,...]`.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import import_model
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.backends.mlir.mlir_harness import call, compile_module, load_vmfb  # noqa: E402

HIDDEN, INPUT, BATCH = 64, 32, 4
SEQS = (100, 200, 400, 800, 1600)
CALLS = 9


def lstm_model(seq: int | str) -> onnx.ModelProto:
    """One forward LSTM (W, R, B initializers) with all three outputs; `seq` a str: dynamic."""
    rng = np.random.default_rng(0)
    rows = 4 * HIDDEN
    weights = {"W": (1, rows, INPUT), "R": (1, rows, HIDDEN), "B": (1, 2 * rows)}
    initializers = [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)
        for name, shape in weights.items()
    ]
    node = helper.make_node(
        "LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=HIDDEN, name="lstm"
    )
    state = [1, BATCH, HIDDEN]
    graph = helper.make_graph(
        [node],
        "lstm",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, BATCH, INPUT])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [seq, 1, BATCH, HIDDEN]),
            helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, state),
            helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, state),
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def fastest(run) -> float:
    """The fastest of CALLS calls after one warm-up, in ms."""
    run()
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def compiled(model: onnx.ModelProto, directory: Path, name: str):
    return load_vmfb(compile_module(lower_to_mlir(import_model(model)), directory, name))


def main(seqs: tuple[int, ...]) -> None:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        dynamic = compiled(lstm_model("seq"), directory, "dynamic")
        print(f"LSTM hidden {HIDDEN}, input {INPUT}, batch {BATCH}: ms, fastest of {CALLS}")
        print(f"{'seq':>6} {'static':>9} {'dynamic':>9} {'onnxruntime':>12}  max |diff|")
        rows = []
        for seq in seqs:
            model = lstm_model(seq)
            static = compiled(model, directory, f"static_{seq}")
            session = onnxruntime.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
            x = np.random.default_rng(seq).standard_normal((seq, BATCH, INPUT)).astype(np.float32)
            expected = session.run(None, {"X": x})
            diff = 0.0
            times = []
            for module in (static, dynamic):

                def run(module=module, x=x):
                    return [np.asarray(r.to_host()) for r in call(module, "lstm", x)]

                pairs = zip(run(), expected, strict=True)
                diff = max([diff, *(float(np.abs(a - b).max()) for a, b in pairs)])
                times.append(fastest(run))
            times.append(fastest(lambda session=session, x=x: session.run(None, {"X": x})))
            rows.append((seq, *times))
            print(f"{seq:>6} {times[0]:>9.2f} {times[1]:>9.2f} {times[2]:>12.2f}  {diff:.1e}")
        if len(rows) > 1:
            (first, *a), (last, *b) = rows[0], rows[-1]
            slopes = [math.log(y / x) / math.log(last / first) for x, y in zip(a, b, strict=True)]
            print(
                f"growth exponent {first}..{last} (1: linear, 2: quadratic): static "
                f"{slopes[0]:.2f}, dynamic {slopes[1]:.2f}, onnxruntime {slopes[2]:.2f}"
            )


if __name__ == "__main__":
    main(tuple(int(s) for s in sys.argv[1].split(",")) if len(sys.argv) > 1 else SEQS)
