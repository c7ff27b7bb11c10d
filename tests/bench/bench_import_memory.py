"""Peak memory of importing a model with ~1 GB of float32 external weights.

Generates (once) `testdata/generated/big_external/model.onnx` with 16 MatMul weights of
4096x4096 float32 (64 MiB each, 1 GiB in all) in one side file, then imports it in a fresh
process and reports that process's peak RSS before and after `import_model`. The weights are
mapped, not copied, so importing should add a few MB, far below one copy of the weights.
The same is measured for `testdata/generated/big_inline/model.onnx`, 256 MiB of weights inline
(raw_data), which the importer splits out of the message before parsing (frontends/onnx/wire.py).
Run: `python tests/bench/bench_import_memory.py` (not collected by pytest).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "testdata" / "generated" / "big_external"
INLINE_FOLDER = ROOT / "testdata" / "generated" / "big_inline"
INLINE_LAYERS = 4
SIDE = 4096
LAYERS = 16
WEIGHT_BYTES = SIDE * SIDE * 4 * LAYERS


def generate() -> Path:
    model_path = FOLDER / "model.onnx"
    data_path = FOLDER / "weights.bin"
    if model_path.exists() and data_path.exists() and data_path.stat().st_size == WEIGHT_BYTES:
        return model_path
    FOLDER.mkdir(parents=True, exist_ok=True)
    rows = np.arange(SIDE * SIDE, dtype=np.float32).reshape(SIDE, SIDE) / (SIDE * SIDE)
    with open(data_path, "wb") as handle:
        for _ in range(LAYERS):
            rows.tofile(handle)  # written layer by layer: the generator never holds 1 GB either
    initializers, nodes = [], []
    previous = "x"
    for layer in range(LAYERS):
        weight = TensorProto(name=f"layer{layer}.weight", data_type=TensorProto.FLOAT, dims=[SIDE, SIDE])
        weight.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", layer * SIDE * SIDE * 4), ("length", SIDE * SIDE * 4)):
            weight.external_data.add(key=key, value=str(value))
        initializers.append(weight)
        output = f"h{layer}"
        nodes.append(helper.make_node("MatMul", [previous, weight.name], [output], name=f"layer{layer}"))
        previous = output
    graph = helper.make_graph(
        nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SIDE])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [1, SIDE])], initializers,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_path)
    return model_path


def generate_inline() -> Path:
    model_path = INLINE_FOLDER / "model.onnx"
    if model_path.exists():
        return model_path
    INLINE_FOLDER.mkdir(parents=True, exist_ok=True)
    weight = np.ones((SIDE, SIDE), dtype=np.float32)
    initializers = [onnx.numpy_helper.from_array(weight, f"layer{layer}.weight") for layer in range(INLINE_LAYERS)]
    nodes = [
        helper.make_node("MatMul", ["x" if layer == 0 else f"h{layer - 1}", f"layer{layer}.weight"], [f"h{layer}"])
        for layer in range(INLINE_LAYERS)
    ]
    graph = helper.make_graph(
        nodes, "inline", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SIDE])],
        [helper.make_tensor_value_info(f"h{INLINE_LAYERS - 1}", TensorProto.FLOAT, [1, SIDE])], initializers,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_path)
    return model_path


CHILD = """
import json, resource, sys, time
import niro.ir as nir
from niro.frontends.onnx import import_model
def peak_mib():
    # VmHWM: this process image's peak RSS (ru_maxrss would carry the parent's peak over fork)
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = peak_mib()
started = time.perf_counter()
module = import_model(sys.argv[1])
seconds = time.perf_counter() - started
after_import = peak_mib()
diagnostics = nir.verify(module)
after_verify = peak_mib()
view = module.globals[0].initializer
print(json.dumps({"before": before, "after_import": after_import, "after_verify": after_verify,
                  "seconds": seconds, "globals": len(module.globals), "verify": len(diagnostics),
                  "mapped": type(getattr(view, "obj", None)).__name__}))
"""


def measure(model_path: Path, weight_mib: float, kind: str) -> bool:
    """Import in a fresh process and print its peak RSS; False if it added a copy's worth."""
    output = subprocess.run([sys.executable, "-c", CHILD, str(model_path)], check=True, capture_output=True, text=True)
    figures = json.loads(output.stdout)
    added = figures["after_import"] - figures["before"]
    print(f"== {model_path.relative_to(ROOT)}: {weight_mib:.0f} MiB of {kind} float32 weights")
    print(f"   peak RSS before import: {figures['before']:.0f} MiB")
    print(f"   peak RSS after import:  {figures['after_import']:.0f} MiB (+{added:.0f} MiB; import took {figures['seconds']:.2f} s)")
    print(f"   peak RSS after verify:  {figures['after_verify']:.0f} MiB")
    print(f"   globals: {figures['globals']}, initializer buffers: memoryview into {figures['mapped']}, "
          f"verify diagnostics: {figures['verify']}")
    if added > weight_mib:
        print(f"   FAIL: import added {added:.0f} MiB, more than one copy of the weights ({weight_mib:.0f} MiB)")
        return False
    return True


def main() -> int:
    started = time.perf_counter()
    external = generate()
    inline = generate_inline()
    print(f"models ready in {time.perf_counter() - started:.1f} s")
    ok = measure(external, WEIGHT_BYTES / 2**20, "external")
    ok &= measure(inline, INLINE_LAYERS * SIDE * SIDE * 4 / 2**20, "inline")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
