"""The MLIR niroc emits for every ONNX node test and every test model, as a manifest of hashes.

A refactor of the importer or the lowerings must not change what niroc emits unless it means
to; this is how that is checked. `write` lowers each model (node tests regenerated from the
installed onnx, testdata's ONNX text and PyTorch exports) and records a SHA-256 of its MLIR
text, or of the first line of the error that refused it; `compare` lists what differs
between two manifests. Usage:

    python -m tests.tools.mlir_snapshot write BEFORE.json [--filter SUBSTRING] [--keep DIR]
        [--generated] [--dynamic realistic|all]
    ... change the code ...
    python -m tests.tools.mlir_snapshot write AFTER.json
    python -m tests.tools.mlir_snapshot compare BEFORE.json AFTER.json

`--keep DIR` also writes each model's MLIR text into DIR, to diff the ones that changed.
`--dynamic realistic|all` makes the node tests' declared input dims symbolic as `make
conformance` does (`tests.onnx_node_cases.dynamic_variant`), for the dynamic-shape paths.
`--generated` adds the models a long suite generates, where they are present
(`GENERATED_FOLDERS`: `make hf`'s 112 Hugging Face exports, TorchScript and dynamo graphs of
58 architectures, and `make test`'s fp16/bf16 PyTorch exports, which a change of the importer
should be checked on too; ~30 s on 2 cores).
None of these has a convolution of 64 outputs or more on one image (`make zoo` has).
Exit status of `compare`: 0 identical, 1 some differ.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.onnx_node_cases import DYNAMIC_MODES

REPO = Path(__file__).resolve().parents[2]
MODEL_FOLDERS = ("testdata/onnx", "testdata/pytorch", "testdata/cli", "tests/cli")
GENERATED_FOLDERS = ("testdata/generated/hf", "testdata/generated/half_exports")


def _models(
    name_filter: str, generated: bool = False, dynamic: str = "none"
) -> Iterator[tuple[str, bytes | Path]]:
    """(name, serialized model or path) of every model the snapshot covers."""
    from tests.onnx_node_cases import dynamic_variant, node_test_cases

    for case in node_test_cases():
        if name_filter in case.name:
            if dynamic != "none":
                case = dynamic_variant(case, dynamic)
            yield f"node/{case.name}", case.model.SerializeToString()
    for folder in MODEL_FOLDERS + (GENERATED_FOLDERS if generated else ()):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in (".onnx", ".onnxtxt") and name_filter in path.name:
                yield f"{folder}/{path.relative_to(REPO / folder)}", path


def _emit(item: tuple[str, bytes | Path, str | None]) -> tuple[str, str]:
    """(name, "mlir <sha256>" or "refused <first error line>") of one model."""
    from niro.backends.mlir import cannot_lower, lower_to_mlir
    from niro.frontends.onnx import import_model
    from niro.ir import NirocError

    name, source, keep = item
    path = name  # where the model is read from, set below
    try:
        with tempfile.TemporaryDirectory(prefix="niroc-snapshot-") as folder:
            if isinstance(source, bytes):
                path = os.path.join(folder, "model.onnx")
                Path(path).write_bytes(source)
            else:
                path = str(source)
            module = import_model(path, expand_functions=cannot_lower)
            text = io.BytesIO()
            lower_to_mlir(module).write_text(text)
    except NirocError as error:
        # the model's path (a temporary file, a checkout) is not part of the result
        return name, "refused " + str(error).splitlines()[0].replace(path, name)
    except Exception as error:  # a crash is a result to compare too
        first = str(error).splitlines()[0].replace(path, name)
        return name, f"crash {type(error).__name__}: " + first[:200]
    if keep:
        target = Path(keep) / (name.replace("/", "__") + ".mlir")
        target.write_bytes(text.getvalue())
    return name, "mlir " + hashlib.sha256(text.getvalue()).hexdigest()


def write(
    manifest: str,
    name_filter: str,
    keep: str | None,
    jobs: int,
    generated: bool = False,
    dynamic: str = "none",
) -> int:
    if keep:
        os.makedirs(keep, exist_ok=True)
    items = [(name, source, keep) for name, source in _models(name_filter, generated, dynamic)]
    context = multiprocessing.get_context("fork")
    with context.Pool(jobs, maxtasksperchild=100) as pool:
        results = dict(pool.imap_unordered(_emit, items, chunksize=8))
    with open(manifest, "w") as file:
        json.dump(dict(sorted(results.items())), file, indent=0)
    emitted = sum(result.startswith("mlir ") for result in results.values())
    print(f"{manifest}: {len(results)} models, {emitted} lowered, {len(results) - emitted} not")
    return 0


def compare(before_path: str, after_path: str) -> int:
    before = json.loads(Path(before_path).read_text())
    after = json.loads(Path(after_path).read_text())
    differ = 0
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name, "(absent)"), after.get(name, "(absent)")
        if old != new:
            differ += 1
            print(f"{name}\n  before: {old[:160]}\n  after:  {new[:160]}")
    print(f"{differ} of {len(before.keys() | after.keys())} models differ")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    write_parser = commands.add_parser("write")
    write_parser.add_argument("manifest")
    write_parser.add_argument("--filter", default="")
    write_parser.add_argument("--keep", default=None)
    write_parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    write_parser.add_argument("--generated", action="store_true")
    write_parser.add_argument("--dynamic", choices=DYNAMIC_MODES, default="none")
    compare_parser = commands.add_parser("compare")
    compare_parser.add_argument("before")
    compare_parser.add_argument("after")
    arguments = parser.parse_args(argv)
    if arguments.command == "write":
        return write(
            arguments.manifest,
            arguments.filter,
            arguments.keep,
            arguments.jobs,
            arguments.generated,
            arguments.dynamic,
        )
    return compare(arguments.before, arguments.after)


if __name__ == "__main__":
    sys.exit(main())
