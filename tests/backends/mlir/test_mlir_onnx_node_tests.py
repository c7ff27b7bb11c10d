"""End to end from ONNX: ONNX's own node tests, imported, lowered, compiled with iree-compile,
run with iree.runtime, and compared with ONNX's reference outputs (rtol 1e-3, atol 1e-5).

The cases come from `onnx.backend.test.case.node.collect_testcases()` (the generator of the
`onnx/backend/test/data/node/*` models and `.pb` files; the installed wheel ships the generator,
not the data folder). Which cases run is decided by importing each model: those that import
without any UnknownOp (and without an import error) are compiled and run; the others are
counted. Run with `-s` to see the lists.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from mlir_harness import call, compile_module, from_abi, load_vmfb
from niro.backends.mlir import lower_to_mlir
from niro.frontends.onnx import OnnxImportError, import_model
from niro.ir import Module, UnknownOp, walk_ops

RTOL, ATOL = 1e-3, 1e-5
CORE_CASES = (
    "test_add",
    "test_mul",
    "test_matmul_2d",
    "test_transpose_default",
    "test_gemm_all_attributes",
    "test_identity",
    "test_constant",
    "test_if",
)
"""Cases that must stay clean, so this test cannot pass by running nothing."""


@functools.lru_cache(maxsize=1)
def classified_cases():
    """(clean cases, {category: [names]}) for every ONNX node test case."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        cases = collect_testcases(None)
    categories: dict[str, list[str]] = {"clean": [], "unknown_ops": [], "import_error": []}
    clean = []
    for case in cases:
        try:
            module = import_model(case.model)
        except OnnxImportError:
            categories["import_error"].append(case.name)
            continue
        if any(isinstance(op, UnknownOp) for op in walk_ops(module)):
            categories["unknown_ops"].append(case.name)
            continue
        categories["clean"].append(case.name)
        clean.append(case)
    return clean, categories


def _merge(modules: list[Module]) -> Module | None:
    """One module holding every function and global, or None when two symbols clash."""
    merged = Module(
        globals=[global_ for module in modules for global_ in module.globals],
        functions=[function for module in modules for function in module.functions],
    )
    names = [global_.name for global_ in merged.globals] + [f.name for f in merged.functions]
    return merged if len(names) == len(set(names)) else None


def _run_case(case, module: Module, vm_module) -> None:
    entry = next(function for function in module.functions if not function.is_declaration)
    for inputs, outputs in case.data_sets:
        results = call(vm_module, entry.name, *inputs)
        assert len(results) == len(outputs)
        for result, expected in zip(results, outputs, strict=True):
            got = from_abi(result, expected)
            assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
            np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_clean_node_tests_match_onnx_reference(tmp_path):
    """All clean models share one module (graph names are distinct): one compile. When that
    compile fails, each model is compiled alone so the failure names its case."""
    clean, categories = classified_cases()
    total = sum(len(names) for names in categories.values())
    print(f"\nONNX node tests: {total} cases")
    for category, names in categories.items():
        print(f"  {category}: {len(names)}")
    names = {case.name for case in clean}
    for core in CORE_CASES:
        assert core in names, f"{core} no longer imports cleanly"

    modules = [import_model(case.model) for case in clean]
    merged = _merge(modules)
    shared_vm = None
    if merged is not None:
        try:
            shared_vm = load_vmfb(compile_module(lower_to_mlir(merged), tmp_path, name="all"))
        except AssertionError:
            shared_vm = None
    passed, failures = [], []
    for case, module in zip(clean, modules, strict=True):
        try:
            vm_module = shared_vm or load_vmfb(
                compile_module(lower_to_mlir(module), tmp_path, name=case.name)
            )
            _run_case(case, module, vm_module)
            passed.append(case.name)
        except Exception as error:  # report every case, not just the first
            failures.append(f"{case.name}: {type(error).__name__}: {str(error)[:400]}")
    how = "in one module" if shared_vm is not None else "one module each"
    print(f"  compiled ({how}), ran and matched: {len(passed)}/{len(clean)}: {', '.join(passed)}")
    assert not failures, "\n".join(failures)
