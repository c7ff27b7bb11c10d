"""DFT and STFT (backends/mlir/onnx_ops/spectral.py) run end to end against onnx.reference.

ONNX's node tests (in the conformance subset) feed `axis`, `frame_step` and `frame_length` as
graph inputs; these models give them as initializers, as exported models do, and cover what the
node tests miss: zero-padding and truncating `dft_length`, an odd-length IRFFT, complex and
f16/f64 inputs, a run-time `dft_length` the shapes leave two choices for, a complex STFT with a
window, an STFT of a dynamic batch and signal length (rank 3, and rank 2 as onnxruntime takes
it). A run-time axis or frame_step that disagrees with the shapes, or a signal shorter than a
frame, must stop the program; a dynamic DFT length is refused, and an STFT result typed
two-sided by ONNX's shape inference when the op is one-sided is typed one-sided instead.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase, node_test_case

from .model_cases import one_node_case
from .test_shape_ops import graph_case

RNG = np.random.default_rng(17)


def _signal(shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _stft_model(signal: np.ndarray, initializers: dict, output_shape) -> onnx.ModelProto:
    node = helper.make_node(
        "STFT", ["signal", "frame_step", "", "frame_length"], ["y"], name="STFT_0"
    )
    dtype = helper.np_dtype_to_tensor_dtype(signal.dtype)
    graph = helper.make_graph(
        [node],
        "stft",
        [helper.make_tensor_value_info("signal", dtype, signal.shape)],
        [helper.make_tensor_value_info("y", dtype, output_shape)],
        [numpy_helper.from_array(value, key) for key, value in initializers.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _declared_stft_case(name: str, signal: np.ndarray, initializers: dict) -> NodeTestCase:
    """An STFT without a window (its input #2 is absent, so `one_node_case` cannot order the
    initializers), the output type declared from onnx.reference's result."""
    (expected,) = ReferenceEvaluator(_stft_model(signal, initializers, None)).run(
        None, {"signal": signal}
    )
    model = _stft_model(signal, initializers, expected.shape)
    return NodeTestCase(name, model, (((signal,), (expected,)),), 1e-3, 1e-5)


MODEL_CASES = {
    # opset 17: axis attribute (negative), dft_length shorter than the axis, one-sided
    "dft17_rfft_truncated": lambda: one_node_case(
        "dft17_rfft_truncated",
        "DFT",
        {"x": _signal((2, 9, 3, 1))},
        initializers={"dft_length": np.array(6, np.int64)},
        axis=-3,
        onesided=1,
        opset=17,
    ),
    # opset 20: complex f64 inverse, zero-padded to a longer dft_length, constant axis
    "dft20_f64_inverse_padded": lambda: one_node_case(
        "dft20_f64_inverse_padded",
        "DFT",
        {"x": _signal((3, 5, 2), np.float64)},
        initializers={"dft_length": np.array(8, np.int32), "axis": np.array(1, np.int64)},
        inverse=1,
        opset=20,
    ),
    # IRFFT of odd length 7 from 6 bins (only the first 4 are read), real input
    "dft20_irfft_odd_length": lambda: one_node_case(
        "dft20_irfft_odd_length",
        "DFT",
        {"x": _signal((6, 4, 2))},
        initializers={"dft_length": np.array(7, np.int64), "axis": np.array(-3, np.int64)},
        inverse=1,
        onesided=1,
        opset=20,
    ),
    "dft20_f16_complex_default_axis": lambda: one_node_case(
        "dft20_f16_complex_default_axis",
        "DFT",
        {"x": _signal((2, 4, 6, 2), np.float16)},
        opset=20,
    ),
    # a run-time dft_length whose result (4 bins) allows 6 or 7: one scf.if branch each
    "dft20_rfft_runtime_length": lambda: one_node_case(
        "dft20_rfft_runtime_length",
        "DFT",
        {"x": _signal((7, 3, 1)), "dft_length": np.array(7, np.int64)},
        initializers={"axis": np.array(0, np.int64)},
        onesided=1,
        opset=20,
    ),
    "stft_complex_window_twosided": lambda: one_node_case(
        "stft_complex_window_twosided",
        "STFT",
        {"signal": _signal((2, 20, 2))},
        initializers={
            "frame_step": np.array(3, np.int64),
            "window": np.hanning(6).astype(np.float32),
        },
        onesided=0,
        opset=17,
    ),
    "stft_f64_frame_length_no_window": lambda: _declared_stft_case(
        "stft_f64_frame_length_no_window",
        _signal((1, 33, 1), np.float64),
        {"frame_step": np.array(4, np.int64), "frame_length": np.array(9, np.int64)},
    ),
}


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(MODEL_CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def test_runtime_frame_step_that_misfits_the_shapes_fails_the_run() -> None:
    case = node_test_case("test_stft")
    ((inputs, expected),) = case.data_sets
    signal, _, frame_length = inputs
    wrong = ((signal, np.array(7, np.int64), frame_length), expected)
    outcome = run_case(NodeTestCase(case.name, case.model, (wrong,), 1e-3, 1e-5))
    assert outcome.stage == "run", outcome
    assert (
        "'onnx.STFT' op: the run-time frame_step and frame_length must give 15 frames of a "
        "length in [16, 17] from 128 samples" in outcome.message
    ), outcome.message


def test_runtime_axis_that_misfits_the_shapes_fails_the_run() -> None:
    case = node_test_case("test_dft_axis")
    ((inputs, expected),) = case.data_sets
    wrong = ((inputs[0], np.array(-1, np.int64)), expected)  # the real/imaginary dim
    outcome = run_case(NodeTestCase(case.name, case.model, (wrong,), 1e-3, 1e-5))
    assert outcome.stage == "run", outcome
    assert (
        "'onnx.DFT' op: the run-time axis must be one of 0, 1, 2 to fit the static input "
        "tensor<1x10x10x1xf32> and result tensor<1x10x10x2xf32>" in outcome.message
    ), outcome.message


def test_dynamic_transform_length_is_refused() -> None:
    case = graph_case(
        "dynamic_length",
        [helper.make_node("DFT", ["x"], ["y"], axis=1)],
        {"x": (_signal((2, 5, 1)), [2, "N", 1])},
        opset=17,
    )
    outcome = run_case(case)
    assert (outcome.stage, outcome.refused) == ("lower", True), outcome
    assert outcome.message.endswith(
        "'onnx.DFT' op needs a static shape for the input, got (2, None, 1)"
    ), outcome.message


def _dynamic_stft_case(
    name: str,
    inputs: list[str],
    signals: list[np.ndarray],
    declared: list,
    initializers: dict,
    **attributes,
) -> NodeTestCase:
    """An STFT of a signal declared `declared` (strings: dynamic dims), compiled once and run
    on each of `signals`; the result's type left to the frontend (ONNX's inference cannot type
    it: the length is dynamic), expected outputs from onnxruntime, which (unlike
    onnx.reference) also takes a rank-2 signal."""
    dtype = helper.np_dtype_to_tensor_dtype(signals[0].dtype)
    graph = helper.make_graph(
        [helper.make_node("STFT", inputs, ["y"], name="STFT_0", **attributes)],
        name,
        [helper.make_tensor_value_info("signal", dtype, declared)],
        [helper.make_tensor_value_info("y", dtype, None)],
        [numpy_helper.from_array(value, key) for key, value in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    data = tuple(((signal,), tuple(session.run(None, {"signal": signal}))) for signal in signals)
    return NodeTestCase(name, model, data, 1e-3, 1e-5)


def test_dynamic_batch_and_signal_length_compute_the_frames_at_run_time() -> None:
    # frames = (length - 8) // 3 + 1: 3, 1 (exactly one frame) and 5
    signals = [_signal((2, 15, 1)), _signal((1, 8, 1)), _signal((3, 21, 1))]
    window = np.hanning(8).astype(np.float32)
    case = _dynamic_stft_case(
        "dynamic_stft",
        ["signal", "frame_step", "window"],
        signals,
        ["B", "L", 1],
        {"frame_step": np.array(3, np.int64), "window": window},
    )
    (reference,) = ReferenceEvaluator(case.model).run(None, {"signal": signals[0]})
    np.testing.assert_allclose(case.data_sets[0][1][0], reference, rtol=1e-5, atol=1e-5)
    outcome = run_case(case)
    assert outcome.passed, outcome


def test_rank_2_signal_is_real_as_onnxruntime_reads_it() -> None:
    # TorchScript's torch.stft export feeds [batch, samples]; onnxruntime reads it as
    # [batch, samples, 1] (onnx.reference refuses it). Two-sided, f64, no window.
    signals = [_signal((1, 12), np.float64), _signal((2, 17), np.float64)]
    case = _dynamic_stft_case(
        "rank2_stft",
        ["signal", "frame_step", "", "frame_length"],
        signals,
        ["B", "L"],
        {"frame_step": np.array(2, np.int64), "frame_length": np.array(5, np.int64)},
        onesided=0,
    )
    assert case.data_sets[1][1][0].shape == (2, 7, 5, 2)
    outcome = run_case(case)
    assert outcome.passed, outcome


def test_signal_shorter_than_a_frame_fails_the_run() -> None:
    case = _dynamic_stft_case(
        "short_signal",
        ["signal", "frame_step", "window"],
        [_signal((1, 16, 1))],
        [1, "L", 1],
        {"frame_step": np.array(4, np.int64), "window": np.ones(8, np.float32)},
    )
    ((inputs, expected),) = case.data_sets
    short = (((_signal((1, 7, 1)),), expected),)
    outcome = run_case(NodeTestCase(case.name, case.model, short, 1e-3, 1e-5))
    assert outcome.stage == "run", outcome
    assert "'onnx.STFT' op: needs at run time a signal of at least 8 samples" in outcome.message, (
        outcome.message
    )


def test_dynamic_signal_length_without_a_frame_length_is_refused() -> None:
    # the frame is the whole signal (onnxruntime fails to run it): its bins are not static
    signal = _signal((1, 16, 1))
    graph = helper.make_graph(
        [helper.make_node("STFT", ["signal", "frame_step"], ["y"], name="STFT_0")],
        "no_frame_length",
        [helper.make_tensor_value_info("signal", onnx.TensorProto.FLOAT, [1, "L", 1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(4, np.int64), "frame_step")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = (((signal,), (np.zeros((1, 1, 9, 2), np.float32),)),)
    outcome = run_case(NodeTestCase("no_frame_length", model, data, 1e-3, 1e-5))
    assert (outcome.stage, outcome.refused) == ("lower", True), outcome
    assert outcome.message.endswith(
        "'onnx.STFT' op expects a result [1, frames, bins, 2] with static bins, got "
        "tensor<1x?x?x2xf32>"
    ), outcome.message


def test_stft_whose_type_comes_from_inference_is_one_sided() -> None:
    # ONNX's shape inference reads the absent `onesided` as 0 (the op's default is 1) and would
    # type the result [1, 7, 9, 2]; the frontend spells the default out for inference, so the
    # result is typed [1, 7, 5, 2] as onnx.reference computes it.
    initializers = {"frame_step": np.array(4, np.int64), "frame_length": np.array(9, np.int64)}
    signal = _signal((1, 33, 1))
    model = _stft_model(signal, initializers, None)
    (expected,) = ReferenceEvaluator(model).run(None, {"signal": signal})
    assert expected.shape == (1, 7, 5, 2)
    outcome = run_case(NodeTestCase("inferred", model, (((signal,), (expected,)),), 1e-3, 1e-5))
    assert outcome.passed, outcome
