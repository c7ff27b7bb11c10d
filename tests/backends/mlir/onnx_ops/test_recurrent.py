"""RNN, GRU and LSTM lowered and run end to end (import -> lower -> iree-compile -> run -> compare).

ONNX's node tests (in tests/conformance/subset.py) cover the defaults, one direction at a time
and a single initial state. These one-node models add what they miss: bidirectional ops with
every optional input, batch-major layout, absent outputs, f16/f64, and the attributes
onnx.reference ignores (activations, clip, input_forget, per-entry `sequence_lens`), which are
compared with onnxruntime instead; and the refusals, with their exact messages. A static
sequence is unrolled up to UNROLLED_STEPS steps (every case here but two) and walked by
`scf.for` loops beyond (the looped cases); dynamic sequence and batch dims: test_recurrent_dynamic.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from niro.backends.mlir.onnx_ops.recurrent import UNROLLED_STEPS
from onnx import helper
from onnx.reference import ReferenceEvaluator

from tests.conformance.pipeline import run_case
from tests.onnx_node_cases import NodeTestCase

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
INPUT_NAMES = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


def _model(op, node_inputs, outputs, feeds, output_types, attributes) -> onnx.ModelProto:
    node = helper.make_node(op, node_inputs, outputs, name=f"{op}_0", **attributes)
    graph = helper.make_graph(
        [node],
        f"{op.lower()}_case",
        [
            helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape
            )
            for name, value in feeds.items()
        ],
        [
            helper.make_tensor_value_info(name, *output_type)
            if output_type
            else helper.make_value_info(name, onnx.TypeProto())
            for name, output_type in zip([o for o in outputs if o], output_types, strict=True)
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


def recurrent_case(
    name: str,
    op: str,
    *,
    hidden: int = 3,
    seq: int = 4,
    batch: int = 2,
    input_size: int = 3,
    direction: str = "forward",
    layout: int = 0,
    optional: tuple[str, ...] = (),
    lengths: list[int] | None = None,
    outputs: tuple[str, ...] = ("Y", "Y_h", "Y_c"),
    dtype=np.float32,
    reference: str = "onnx",
    seed: int = 0,
    **attributes,
) -> NodeTestCase:
    """A model of one `op` node with random weights. `optional` names the optional inputs
    given (the others are absent, as ""); an output named "" is absent. Expected outputs come
    from onnx.reference ("onnx"), from onnx.reference in float64 rounded to `dtype` ("f64":
    f16 computed step by step in f16 is further from the truth than niroc's f32 compute), or
    from onnxruntime ("onnxruntime", layout 0 only)."""
    rng = np.random.default_rng(seed)
    directions = 2 if direction == "bidirectional" else 1
    rows = GATES[op] * hidden
    state = (directions, batch, hidden) if layout == 0 else (batch, directions, hidden)
    shapes = {
        "X": (seq, batch, input_size) if layout == 0 else (batch, seq, input_size),
        "W": (directions, rows, input_size),
        "R": (directions, rows, hidden),
        "B": (directions, 2 * rows),
        "initial_h": state,
        "initial_c": state,
        "P": (directions, 3 * hidden),
    }
    values = {key: rng.standard_normal(shape) for key, shape in shapes.items()}
    values["sequence_lens"] = np.array(lengths if lengths else [seq] * batch, np.int32)
    names = INPUT_NAMES[: 8 if op == "LSTM" else 6]
    node_inputs = [key if key in ("X", "W", "R") or key in optional else "" for key in names]
    while node_inputs[-1] == "":
        node_inputs.pop()
    outputs = outputs[: 3 if op == "LSTM" else 2]
    attributes = {"hidden_size": hidden, "direction": direction, **attributes}
    if layout:
        attributes["layout"] = layout

    feeds = {
        key: values[key] if key == "sequence_lens" else values[key].astype(dtype)
        for key in node_inputs
        if key
    }
    wide = {
        key: value.astype(np.float64) if key != "sequence_lens" else value
        for key, value in feeds.items()
    }
    untyped = [None] * len([o for o in outputs if o])
    if reference == "onnxruntime":
        import onnxruntime

        model = _model(op, node_inputs, outputs, feeds, untyped, attributes)
        session = onnxruntime.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        expected = session.run(None, feeds)
    elif reference == "f64":
        model = _model(op, node_inputs, outputs, wide, untyped, attributes)
        expected = [value.astype(dtype) for value in ReferenceEvaluator(model).run(None, wide)]
    else:
        model = _model(op, node_inputs, outputs, feeds, untyped, attributes)
        expected = ReferenceEvaluator(model).run(None, feeds)
    output_types = [
        (helper.np_dtype_to_tensor_dtype(value.dtype), value.shape) for value in expected
    ]
    model = _model(op, node_inputs, outputs, feeds, output_types, attributes)
    onnx.checker.check_model(model)
    data = ((tuple(feeds.values()), tuple(expected)),)
    return NodeTestCase(name, model, data, 1e-3, 1e-5)


ALL_LSTM_INPUTS = ("B", "initial_h", "initial_c", "P")

CASES = {
    # every optional input but sequence_lens, both directions, batch-major, all three outputs
    "lstm_bidirectional_batch_major_peepholes": lambda: recurrent_case(
        "lstm_bidirectional_batch_major_peepholes",
        "LSTM",
        direction="bidirectional",
        layout=1,
        optional=ALL_LSTM_INPUTS,
    ),
    # only Y_c: Y and Y_h absent
    "lstm_reverse_only_cell_state": lambda: recurrent_case(
        "lstm_reverse_only_cell_state",
        "LSTM",
        direction="reverse",
        optional=("initial_h", "initial_c"),
        outputs=("", "", "Y_c"),
    ),
    "lstm_f64": lambda: recurrent_case(
        "lstm_f64", "LSTM", optional=ALL_LSTM_INPUTS, dtype=np.float64
    ),
    "gru_reverse_linear_before_reset_initial_h": lambda: recurrent_case(
        "gru_reverse_linear_before_reset_initial_h",
        "GRU",
        direction="reverse",
        optional=("B", "initial_h"),
        linear_before_reset=1,
    ),
    "gru_bidirectional_f16_batch_major": lambda: recurrent_case(
        "gru_bidirectional_f16_batch_major",
        "GRU",
        direction="bidirectional",
        layout=1,
        optional=("B", "initial_h"),
        dtype=np.float16,
        reference="f64",
    ),
    # Y absent
    "rnn_bidirectional_only_final_state": lambda: recurrent_case(
        "rnn_bidirectional_only_final_state",
        "RNN",
        direction="bidirectional",
        optional=("B", "initial_h"),
        outputs=("", "Y_h"),
    ),
    # per-entry lengths (one of them 0) in both directions: onnx.reference ignores them
    "lstm_bidirectional_sequence_lens": lambda: recurrent_case(
        "lstm_bidirectional_sequence_lens",
        "LSTM",
        batch=3,
        direction="bidirectional",
        optional=("B", "sequence_lens", "initial_h", "initial_c", "P"),
        lengths=[4, 2, 0],
        reference="onnxruntime",
    ),
    "gru_reverse_sequence_lens": lambda: recurrent_case(
        "gru_reverse_sequence_lens",
        "GRU",
        batch=3,
        direction="reverse",
        optional=("sequence_lens", "initial_h"),
        lengths=[1, 3, 4],
        reference="onnxruntime",
    ),
    # activations, their alpha/beta consumed in order across both directions, and clip
    "rnn_relu_leaky_relu_clip": lambda: recurrent_case(
        "rnn_relu_leaky_relu_clip",
        "RNN",
        direction="bidirectional",
        optional=("B",),
        activations=["Relu", "LeakyRelu"],
        activation_alpha=[0.3],
        clip=0.8,
        reference="onnxruntime",
    ),
    "gru_hard_sigmoid_affine": lambda: recurrent_case(
        "gru_hard_sigmoid_affine",
        "GRU",
        optional=("B",),
        activations=["HardSigmoid", "Affine"],
        activation_alpha=[0.3, 0.5],
        activation_beta=[0.4, 0.1],
        reference="onnxruntime",
    ),
    # a static sequence longer than the unrolled limit: the scf.for over time, with lengths
    "lstm_bidirectional_looped_sequence_lens": lambda: recurrent_case(
        "lstm_bidirectional_looped_sequence_lens",
        "LSTM",
        seq=UNROLLED_STEPS + 1,
        batch=2,
        direction="bidirectional",
        optional=("B", "sequence_lens", "initial_h", "initial_c"),
        lengths=[UNROLLED_STEPS + 1, 5],
        reference="onnxruntime",
    ),
    # the same without lengths: the steps read their hidden state from Y, the second block's
    # first step the one the first block left
    "lstm_bidirectional_looped": lambda: recurrent_case(
        "lstm_bidirectional_looped",
        "LSTM",
        seq=UNROLLED_STEPS + 1,
        batch=2,
        direction="bidirectional",
        optional=("B", "initial_h", "initial_c"),
        reference="onnxruntime",
    ),
    "lstm_input_forget_clip_activations": lambda: recurrent_case(
        "lstm_input_forget_clip_activations",
        "LSTM",
        optional=("B", "initial_h", "initial_c"),
        activations=["Sigmoid", "Softsign", "Elu"],
        input_forget=1,
        clip=1.2,
        reference="onnxruntime",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_case_passes(name: str) -> None:
    outcome = run_case(CASES[name]())
    assert outcome.passed, f"{outcome.stage}: {outcome.message}"


def _refused(case: NodeTestCase) -> str:
    outcome = run_case(case)
    assert (outcome.stage, outcome.refused) == ("lower", True), outcome
    return outcome.message


def test_unsupported_activation_is_refused() -> None:
    case = _untyped_case("RNN", activations=["Gelu"])
    assert _refused(case).endswith(
        "'onnx.RNN' op does not support activation 'Gelu' (supported: Affine, Elu, HardSigmoid, "
        "LeakyRelu, Relu, ScaledTanh, Sigmoid, Softplus, Softsign, Tanh, ThresholdedRelu)"
    )


def test_scaled_tanh_without_alpha_is_refused() -> None:
    case = _untyped_case("GRU", activations=["ScaledTanh", "Tanh"])
    assert _refused(case).endswith(
        "'onnx.GRU' op activation 'ScaledTanh' needs a value in 'activation_alpha'"
    )


def test_wrong_activation_count_is_refused() -> None:
    case = _untyped_case("LSTM", direction="bidirectional", activations=["Sigmoid", "Tanh", "Tanh"])
    assert _refused(case).endswith(
        "'onnx.LSTM' op has 3 activations, expected 6 (3 per direction: Sigmoid, Tanh, Tanh)"
    )


def _untyped_case(op: str, **attributes) -> NodeTestCase:
    """A forward model the lowering refuses (so it has no reference outputs): X of shape
    (4, 2, 3), hidden size 3, output Y typed by ONNX shape inference."""
    rng = np.random.default_rng(0)
    rows = GATES[op] * 3
    directions = 2 if attributes.get("direction") == "bidirectional" else 1
    feeds = {
        "X": rng.standard_normal((4, 2, 3)).astype(np.float32),
        "W": rng.standard_normal((directions, rows, 3)).astype(np.float32),
        "R": rng.standard_normal((directions, rows, 3)).astype(np.float32),
    }
    node = helper.make_node(op, list(feeds), ["Y"], name=f"{op}_0", hidden_size=3, **attributes)
    inputs = [
        helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, value.shape)
        for name, value in feeds.items()
    ]
    output = helper.make_value_info("Y", onnx.TypeProto())
    graph = helper.make_graph([node], f"{op.lower()}_refused", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    return NodeTestCase(f"{op.lower()}_refused", model, ((tuple(feeds.values()), ()),), 1e-3, 1e-5)
