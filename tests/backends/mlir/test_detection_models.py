"""torchvision's detection models, niroc + IREE vs onnxruntime: run by `make detection`, not
`make test` (each compiles for minutes).

`make detection` first exports the models with testdata/detection/export.py (random weights
with calibrated BatchNorm statistics, low score thresholds, one 3x320x320 image) into
testdata/generated/detection/. Each model is imported, lowered and compiled once (niroc check's
code path: bytecode to iree-compile), run with iree.runtime and compared with onnxruntime on that
image: the same number of detections, labels exact, boxes, scores, masks and keypoints within
the tolerances below. A row of figures per model (compile and run times, detections, largest
errors) goes to testdata/generated/detection/report.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from niroc.checking import ModelRunner, from_abi, run_onnxruntime
from niroc.progress import Progress

FOLDER = Path(__file__).resolve().parents[3] / "testdata" / "generated" / "detection"
REPORT = FOLDER / "report.md"

MODELS = (
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "maskrcnn_resnet50_fpn",
    "keypointrcnn_resnet50_fpn",
    "retinanet_resnet50_fpn",
    "ssdlite320_mobilenet_v3_large",
)

RTOL = 1e-3
ATOL = {"boxes": 1e-2, "keypoints": 1e-2}
"""Pixel coordinates up to 320 take 1e-2 absolute; scores, masks (probabilities) and keypoint
scores take 1e-3 (the default below)."""
DEFAULT_ATOL = 1e-3


def _report(row: str) -> None:
    if not REPORT.exists():
        REPORT.write_text(
            "| model | detections | compile (niroc + iree-compile) | IREE run | onnxruntime run "
            "| largest abs error per output |\n|---|---|---|---|---|---|\n"
        )
    with REPORT.open("a") as stream:
        stream.write(row + "\n")


@pytest.mark.parametrize("name", MODELS)
def test_detection_model_matches_onnxruntime(name: str) -> None:
    path = FOLDER / f"{name}.onnx"
    assert path.exists(), f"{path} is missing: `make detection` exports it first"
    model = onnx.load(path)
    feeds = dict(np.load(FOLDER / f"{name}.npz"))
    runner = ModelRunner(path, Progress.off())

    start = time.perf_counter()
    vmfb, function = runner.compile(model, name)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    got = runner.run_iree(vmfb, function, feeds)
    ran = time.perf_counter() - start
    start = time.perf_counter()
    expected = run_onnxruntime(model, feeds)
    reference = time.perf_counter() - start

    names = [output.name for output in model.graph.output]
    assert len(got) == len(expected)
    errors = {}
    for output, value, wanted in zip(names, got, expected, strict=True):
        actual = from_abi(value, wanted)
        assert actual.shape == wanted.shape, (
            f"{output}: shape {actual.shape}, expected {wanted.shape}"
        )
        if wanted.dtype.kind in "iub":
            np.testing.assert_array_equal(actual, wanted, err_msg=output)
        else:
            atol = ATOL.get(output, DEFAULT_ATOL)
            np.testing.assert_allclose(actual, wanted, rtol=RTOL, atol=atol, err_msg=output)
        difference = np.abs(actual.astype(np.float64) - wanted)
        errors[output] = float(difference.max()) if difference.size else 0.0
    detections = len(expected[0])
    largest = ", ".join(f"{output} {error:.2g}" for output, error in errors.items())
    _report(
        f"| {name} | {detections} | {compiled:.0f} s | {ran:.1f} s | {reference:.2f} s | {largest} |"
    )
