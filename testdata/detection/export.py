"""Export torchvision's detection models to ONNX, offline, with deterministic random weights.

Needs torchvision, which niroc does not depend on and which does not import beside the project's
pinned torch; `make detection` builds its own venv for this script (.venv-tv: torch 2.14.1,
torchvision 0.29.1). Usage: `python testdata/detection/export.py OUT_DIR [NAME...]`.

No weights are downloaded (`weights=None, weights_backbone=None`); parameters come from
`torch.manual_seed`. Two things make random-weight detections worth comparing:

- BatchNorm statistics are calibrated: with the initial running statistics (mean 0, var 1) the
  features grow layer after layer until every score saturates and ties, so the comparison
  checks nothing. A few forward passes in train mode over fixed random images set statistics
  that keep activations O(1).
- Score thresholds are low enough that detections survive (random heads score about 1/classes),
  so the box, mask and keypoint paths after NMS really run. RetinaNet's head starts every score
  at its prior 0.01, under any such threshold, so its class logits are scaled up
  (`CLASS_LOGIT_SCALE`).

Each model is exported by TorchScript (`dynamo=False`, opset 17) with a dynamic height and width,
at 3x320x320, the size the tests run. `OUT_DIR/NAME.onnx` and `OUT_DIR/NAME.npz` (the input image
as `image`) are written; an existing model file is kept unless `--force` is given.
"""

import os
import sys

import numpy as np
import torch
import torchvision.models.detection as det

SIZE = 320

# name -> (builder, keyword arguments). Thresholds are the builders' own names.
MODELS = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": (
        det.fasterrcnn_mobilenet_v3_large_320_fpn,
        {"box_score_thresh": 0.0125},
    ),
    "maskrcnn_resnet50_fpn": (
        det.maskrcnn_resnet50_fpn,
        {"box_score_thresh": 0.0125, "min_size": SIZE, "max_size": SIZE},
    ),
    "keypointrcnn_resnet50_fpn": (
        det.keypointrcnn_resnet50_fpn,
        {"box_score_thresh": 0.0125, "min_size": SIZE, "max_size": SIZE},
    ),
    "retinanet_resnet50_fpn": (
        det.retinanet_resnet50_fpn,
        {"score_thresh": 0.0125, "min_size": SIZE, "max_size": SIZE},
    ),
    "ssdlite320_mobilenet_v3_large": (det.ssdlite320_mobilenet_v3_large, {"score_thresh": 0.0125}),
}

def image(seed: int) -> torch.Tensor:
    """A smooth random image in [0, 1]: blobs, not noise, so features and boxes vary over it."""
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, SIZE // 32, SIZE // 32, generator=generator)
    return torch.nn.functional.interpolate(coarse, size=(SIZE, SIZE), mode="bilinear")[0]


def calibrate(model: torch.nn.Module) -> None:
    """Set BatchNorm running statistics from forward passes in train mode (see the docstring)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over the passes
    model.eval()
    for norm in norms:
        norm.train()
    with torch.no_grad():  # a batch of images: SSDlite's last extra layers are 1x1 per image
        for first in (100, 104):
            model([image(first + seed) for seed in range(4)])
    model.eval()


CLASS_LOGIT_SCALE = 30.0
"""RetinaNet's class logits are multiplied by this (its last conv's weights, not its bias).

Its classification head starts every class at the prior 0.01 (bias -log(99)) with weights of
std 0.01, so with random weights every score lies in 0.0108-0.0114: under the 0.0125 threshold
(no detection at all, a comparison that checks nothing) and, below it, tied within 1e-5 for 286
of the top 300. Scaled by 30 the top 300 scores spread over 0.10-0.33 across 50 labels, 12
neighbours tied."""


def build(name: str) -> torch.nn.Module:
    builder, kwargs = MODELS[name]
    torch.manual_seed(0)
    model = builder(weights=None, weights_backbone=None, **kwargs)
    if name.startswith("retinanet"):
        with torch.no_grad():
            model.head.classification_head.cls_logits.weight.mul_(CLASS_LOGIT_SCALE)
    calibrate(model)
    return model


def export(name: str, out_dir: str, force: bool) -> None:
    path = os.path.join(out_dir, f"{name}.onnx")
    x = image(0)
    np.savez(os.path.join(out_dir, f"{name}.npz"), image=x.numpy())
    if os.path.exists(path) and not force:
        print(f"{path}: kept")
        return
    model = build(name)
    with torch.no_grad():
        found = model([x])[0]
    print(name, {k: tuple(v.shape) for k, v in found.items()})
    # the graph's outputs are the dict's values in its order, which differs between models
    # (R-CNNs: boxes, labels, scores...; RetinaNet and SSD: boxes, scores, labels)
    outputs = list(found)
    torch.onnx.export(
        model,
        ([x],),
        path,
        dynamo=False,
        opset_version=17,
        input_names=["image"],
        output_names=outputs,
        dynamic_axes={"image": {1: "height", 2: "width"}} | {o: {0: "detections"} for o in outputs},
    )
    print(f"{path}: written")


def main(argv: list[str]) -> None:
    force = "--force" in argv
    args = [a for a in argv if a != "--force"]
    out_dir, names = args[0], args[1:] or list(MODELS)
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        export(name, out_dir, force)


if __name__ == "__main__":
    main(sys.argv[1:])
