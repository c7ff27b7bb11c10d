"""torchvision's detection models, niroc + IREE vs onnxruntime: run by `make detection`, not
`make test` (each compiles for minutes).

`make detection` first exports the models with testdata/detection/export.py (random weights
with calibrated BatchNorm statistics, low score thresholds, one 3x320x320 image) into
testdata/generated/detection/. Each model is imported, lowered and compiled once (niroc check's
code path: bytecode to iree-compile), run with iree.runtime and compared with onnxruntime on that
image: the same number of detections, labels exact, boxes, scores, masks and keypoints within
the tolerances below. Detections come sorted by score, so two whose scores tie (within `TIE`)
may come in either order: inside such a run each detection is compared with the one of the run
that has its label and the nearest box (`_pairing`); everywhere else, and for every value
compared, the order is onnxruntime's. A row of figures per model (compile and run times, detections, largest
errors; for a model that fails, the step and the error) goes to
testdata/generated/detection/report.md.
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

TIE = 1e-5
"""Scores closer than this are tied: float rounding (a few ulps between IREE and onnxruntime)
can order them either way in the top-k. Pairing only permutes detections inside a run of tied
scores, so a detection that differs in label, box or anything else still fails."""


def _tie_runs(scores: np.ndarray) -> list[range]:
    """Runs of consecutive detections (in score order) whose neighbouring scores tie."""
    runs, start = [], 0
    for index in range(1, len(scores) + 1):
        if index == len(scores) or abs(float(scores[index - 1]) - float(scores[index])) > TIE:
            runs.append(range(start, index))
            start = index
    return runs


def _pairing(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> list[int]:
    """For each onnxruntime detection, the index of the IREE detection it is compared with: its
    own index, except inside a run of tied scores, where it is the unpaired detection of the run
    with the same label and the nearest box (its own index when none has its label)."""
    pairing = list(range(len(expected["scores"])))
    for run in _tie_runs(expected["scores"]):
        free = set(run)
        for index in run:
            same = [j for j in sorted(free) if got["labels"][j] == expected["labels"][index]]
            if not same:
                continue
            distance = [
                float(np.abs(got["boxes"][j] - expected["boxes"][index]).max()) for j in same
            ]
            pairing[index] = same[int(np.argmin(distance))]
            free.discard(pairing[index])
    return pairing


def _report(row: str) -> None:
    if not REPORT.exists():
        REPORT.write_text(
            "| model | detections (of them in the other order among tied scores) | compile (niroc + iree-compile) | IREE run | onnxruntime run "
            "| largest abs error per output |\n|---|---|---|---|---|---|\n"
        )
    with REPORT.open("a") as stream:
        stream.write(row + "\n")


@pytest.mark.parametrize("name", MODELS)
def test_detection_model_matches_onnxruntime(name: str) -> None:
    """Each model's row goes to the report, a failing one's with the step and first line of its
    error (the test then fails with it)."""
    times: dict[str, float] = {}
    try:
        row = _compare(name, times)
    except Exception as error:
        reason = " ".join(str(error).split())[:300]
        figures = [f"{times[step]:.0f} s" if step in times else "-" for step in ("compile", "run")]
        _report(f"| {name} | fails: {type(error).__name__}: {reason} | {figures[0]} | {figures[1]} | - | - |")
        raise
    _report(row)


def _compare(name: str, times: dict[str, float]) -> str:
    """The model compiled, run by IREE and by onnxruntime and compared; returns its report row.
    `times` gets each step's seconds as it ends."""
    path = FOLDER / f"{name}.onnx"
    assert path.exists(), f"{path} is missing: `make detection` exports it first"
    model = onnx.load(path)
    feeds = dict(np.load(FOLDER / f"{name}.npz"))
    runner = ModelRunner(path, Progress.off())

    start = time.perf_counter()
    vmfb, function = runner.compile(model, name)
    times["compile"] = time.perf_counter() - start
    start = time.perf_counter()
    got = runner.run_iree(vmfb, function, feeds)
    times["run"] = time.perf_counter() - start
    start = time.perf_counter()
    expected = run_onnxruntime(model, feeds)
    reference = time.perf_counter() - start

    names = [output.name for output in model.graph.output]
    assert len(got) == len(expected)
    wanted_by_name = dict(zip(names, expected, strict=True))
    actual_by_name = {
        output: from_abi(value, wanted)
        for output, value, wanted in zip(names, got, expected, strict=True)
    }
    # both runs kept, so that a mismatch can be studied without compiling again
    np.savez(FOLDER / f"{name}.got.npz", **actual_by_name)
    np.savez(FOLDER / f"{name}.exp.npz", **wanted_by_name)
    kinds = {output: wanted_by_name[output].dtype.kind for output in ("labels", "scores")}
    assert kinds == {"labels": "i", "scores": "f"}, (
        f"the outputs are misnamed (element kinds {kinds}): export the model again"
    )
    for output, wanted in wanted_by_name.items():
        actual = actual_by_name[output]
        assert actual.shape == wanted.shape, (
            f"{output}: shape {actual.shape}, expected {wanted.shape}"
        )
    pairing = _pairing(actual_by_name, wanted_by_name)
    errors = {}
    for output, wanted in wanted_by_name.items():
        actual = actual_by_name[output][pairing]
        if wanted.dtype.kind in "iub":
            np.testing.assert_array_equal(actual, wanted, err_msg=output)
        else:
            atol = ATOL.get(output, DEFAULT_ATOL)
            np.testing.assert_allclose(actual, wanted, rtol=RTOL, atol=atol, err_msg=output)
        difference = np.abs(actual.astype(np.float64) - wanted)
        errors[output] = float(difference.max()) if difference.size else 0.0
    detections = len(expected[0])
    swapped = sum(index != paired for index, paired in enumerate(pairing))
    largest = ", ".join(f"{output} {error:.2g}" for output, error in errors.items())
    return (
        f"| {name} | {detections} ({swapped} in tied order) | {times['compile']:.0f} s "
        f"| {times['run']:.1f} s | {reference:.2f} s | {largest} |"
    )
