"""The `ai.onnx.preview.training` optimizers (Adagrad, Momentum, Adam) run end to end against
onnx.reference.

ONNX's node tests (all in tests/conformance/subset.py, so not repeated here) run only the
first update (T = 0); the model cases here take later steps (T > 0: Adagrad's decay,
Momentum's beta, Adam's bias correction), double tensors with a float learning rate, several
tensors at once, and Adam's post-update regularization.
"""

from __future__ import annotations

import numpy as np
import pytest
from niro.backends.mlir import LoweringError, lower_to_mlir
from niro.ir import parse_module

from tests.conformance.pipeline import run_case

from .model_cases import one_node_case

TRAINING = "ai.onnx.preview.training"

RNG = np.random.default_rng(5)


def _tensors(count: int, shape, dtype=np.float32) -> list[np.ndarray]:
    return [RNG.uniform(-2, 2, shape).astype(dtype) for _ in range(count)]


def _optimizer_case(name, op_type, groups, steps, *, rate=0.05, **attributes):
    """`groups` lists, per input kind (X, G, then accumulators), the tensors of that kind."""
    inputs = {
        "R": np.array(rate, np.float32 if isinstance(rate, float) else None),
        "T": np.array(steps, np.int64),
    }
    for kind, tensors in zip("XGVH", groups, strict=False):
        for index, value in enumerate(tensors):
            inputs[f"{kind}{index}"] = value
    outputs = sum(len(tensors) for tensors in groups[1:])
    return one_node_case(name, op_type, inputs, outputs, domain=TRAINING, **attributes)


MODEL_CASES = {
    "adagrad_decay_t5": lambda: _optimizer_case(
        "adagrad_decay_t5",
        "Adagrad",
        [_tensors(2, (3, 4)), _tensors(2, (3, 4)), [np.abs(t) for t in _tensors(2, (3, 4))]],
        5,
        decay_factor=0.2,
        norm_coefficient=0.01,
    ),
    "adagrad_f64_default_attributes": lambda: _optimizer_case(
        "adagrad_f64_default_attributes",
        "Adagrad",
        [_tensors(1, (5,), np.float64), _tensors(1, (5,), np.float64), [np.ones(5)]],
        2,
        rate=np.float64(0.3),
    ),
    "momentum_standard_t3": lambda: _optimizer_case(
        "momentum_standard_t3",
        "Momentum",
        [_tensors(2, (2, 3)), _tensors(2, (2, 3)), _tensors(2, (2, 3))],
        3,
        alpha=0.9,
        beta=0.5,
        mode="standard",
        norm_coefficient=0.02,
    ),
    "momentum_nesterov_t4_f64": lambda: _optimizer_case(
        "momentum_nesterov_t4_f64",
        "Momentum",
        [
            _tensors(1, (4,), np.float64),
            _tensors(1, (4,), np.float64),
            _tensors(1, (4,), np.float64),
        ],
        4,
        alpha=0.8,
        beta=0.3,
        mode="nesterov",
        norm_coefficient=0.0,
    ),
    "adam_bias_correction_t7": lambda: _optimizer_case(
        "adam_bias_correction_t7",
        "Adam",
        [
            _tensors(2, (3,)),
            _tensors(2, (3,)),
            _tensors(2, (3,)),
            [np.abs(t) for t in _tensors(2, (3,))],
        ],
        7,
        alpha=0.85,
        beta=0.95,
        norm_coefficient=0.01,
        norm_coefficient_post=0.1,
    ),
    "adam_f64_defaults_t2": lambda: _optimizer_case(
        "adam_f64_defaults_t2",
        "Adam",
        [
            _tensors(1, (2, 2), np.float64),
            _tensors(1, (2, 2), np.float64),
            _tensors(1, (2, 2), np.float64),
            [np.full((2, 2), 0.5)],
        ],
        2,
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def _lower(op: str, operands: str, results: str, attributes: str) -> None:
    types = operands.split(", ")
    arguments = ", ".join(f'{type_} {{name = "a{i}"}}' for i, type_ in enumerate(types))
    block = ", ".join(f"%{i}: {type_}" for i, type_ in enumerate(types))
    uses = ", ".join(f"%{i}" for i in range(len(types)))
    outs = results.split(", ")
    names = ", ".join(f"%{len(types) + i}" for i in range(len(outs)))
    result_list = ", ".join(f'{type_} {{name = "r{i}"}}' for i, type_ in enumerate(outs))
    module = parse_module(
        f"""
niro.func @main({arguments}) -> ({result_list}) {{
^bb0({block}):
  {names} = "{TRAINING}.{op}"({uses}) {{{attributes}niro.opset = 1}} : ({operands}) -> ({results}) loc("{op}_0")
  niro.return {names} : {results}
}}
"""
    )
    lower_to_mlir(module)


def test_unknown_momentum_mode_is_refused() -> None:
    with pytest.raises(
        LoweringError,
        match=r"'ai\.onnx\.preview\.training\.Momentum' op expects mode 'standard' or "
        r"'nesterov', got 'heavy'$",
    ):
        _lower(
            "Momentum",
            "tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>",
            "tensor<2xf32>, tensor<2xf32>",
            'alpha = 0.9, beta = 1.0, mode = "heavy", norm_coefficient = 0.0, ',
        )


def test_missing_required_attribute_is_refused() -> None:
    with pytest.raises(
        LoweringError,
        match=r"'ai\.onnx\.preview\.training\.Momentum' op needs the attribute 'beta'$",
    ):
        _lower(
            "Momentum",
            "tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>",
            "tensor<2xf32>, tensor<2xf32>",
            'alpha = 0.9, mode = "standard", norm_coefficient = 0.0, ',
        )


def test_inputs_that_do_not_group_are_refused() -> None:
    with pytest.raises(
        LoweringError,
        match=r"'ai\.onnx\.preview\.training\.Adam' op expects R, T and 4 tensors per optimized "
        r"tensor, got 5 inputs$",
    ):
        _lower(
            "Adam",
            "tensor<f32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>",
            "tensor<2xf32>, tensor<2xf32>",
            "",
        )


def test_non_scalar_learning_rate_is_refused() -> None:
    with pytest.raises(
        LoweringError,
        match=r"'ai\.onnx\.preview\.training\.Adagrad' op expects a scalar learning rate R, got "
        r"tensor<2xf32>$",
    ):
        _lower(
            "Adagrad",
            "tensor<2xf32>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>",
            "tensor<2xf32>, tensor<2xf32>",
            "",
        )
