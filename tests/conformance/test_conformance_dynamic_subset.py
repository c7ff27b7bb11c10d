"""`make test`'s slice of the dynamic-shape conformance run (`make conformance-dynamic`): a few
ONNX node tests with their declared input dims made symbolic (tests/onnx_node_cases.py
`dynamic_variant`), end to end. Each must pass or be refused clearly (a niroc error, or a
niroc run-time check stopping the run), never be a bug; those marked "pass" must pass, those
marked "refused" must be refused. Several
were bugs before: a SIGFPE in Reshape, IREE rejecting valid inputs of And/Or/Xor, a wrong
MatMul shape, wrong MatMulInteger numbers, Resize failing in iree-compile, a wrong Resize
result shape with keep_aspect_ratio_policy, RotaryEmbedding failing in iree-compile, a valid
Resize rejected by ONNX's inference in the verifier, lowerings refusing (or failing MLIR
verification) where they knew a dim static that the result's type left dynamic."""

from __future__ import annotations

import pytest

from ..onnx_node_cases import node_test_case
from .pipeline import run_case

CASES = (
    ("test_reshape_allowzero_reordered", "realistic", "pass"),
    ("test_reshape_zero_and_negative_dim", "realistic", "pass"),
    ("test_and_bcast4v4d", "realistic", "pass"),
    ("test_xor_bcast4v4d", "realistic", "pass"),
    ("test_or_bcast4v4d", "all", "refused or pass"),
    ("test_matmul_bcast", "all", "refused or pass"),
    ("test_matmul_4d", "all", "pass"),
    ("test_matmulinteger", "all", "pass"),
    ("test_resize_upsample_scales_nearest", "realistic", "pass"),
    ("test_resize_downsample_scales_linear", "realistic", "pass"),
    ("test_add_bcast", "all", "pass"),
    ("test_gemm_default_matrix_bias", "all", "pass"),
    # The result size of keep_aspect_ratio_policy comes out of the scales, not the sizes: a
    # wrong result shape at dynamic dims before it was refused.
    ("test_resize_downsample_sizes_nearest_not_larger", "realistic", "refused or pass"),
    ("test_resize_upsample_sizes_nearest_not_smaller", "realistic", "refused or pass"),
    ("test_reduce_sum_keepdims_random", "realistic", "pass"),
    ("test_split_variable_parts_1d_opset18", "realistic", "pass"),
    # A Split by run-time sizes concatenated back: iree-compile failed on the Concat.
    ("test_rotary_embedding_expanded", "realistic", "pass"),
    # A strided Slice of a dynamic tensor read by a broadcasting Mul: iree-compile failed.
    ("test_rotary_embedding_with_interleaved_rotary_dim_expanded", "realistic", "pass"),
    # A `sizes` of unknown length: ONNX's Resize inference rejected the valid op in niroc's
    # verifier; niroc's lowering refuses it, naming `sizes`.
    ("test_resize_downsample_sizes_nearest", "all", "refused"),
    # Lowerings that know a dim the result's type leaves dynamic (a static operand's size, the
    # static channels) built that static type: refused ("lowering returned tensor<5x2x4xf64>,
    # expected tensor<?x2x4xf64>"), or MLIR verification failed (GroupNormalization's
    # collapse); Resize refused a dynamic result dim over a static non-resized input dim.
    ("test_einsum_batch_matmul", "realistic", "pass"),
    ("test_mvn", "realistic", "pass"),
    ("test_group_normalization_example", "realistic", "pass"),
    ("test_resize_upsample_scales_nearest_axes_2_3", "realistic", "pass"),
    # Refused with dynamic dims before: Dropout's mask, Det with one matrix dim dynamic,
    # MaxUnpool whose X is dynamic where I is static, with a run-time output_shape.
    ("test_dropout_default_mask", "realistic", "pass"),
    ("test_det_nd", "realistic", "pass"),
    ("test_maxunpool_export_with_output_shape", "realistic", "pass"),
    # TfIdfVectorizer with a run-time row length C.
    ("test_tfidfvectorizer_tf_uniandbigrams_skip5", "realistic", "pass"),
    # Col2Im with a dynamic batch and column count, block_shape and image_shape at run time.
    ("test_col2im_strides", "realistic", "pass"),
    # The expanded Attention pads its mask by run-time pads, then adds it to the scores: Pad's
    # gather form fused into the softmax's dispatch and iree-compile failed ("exceeded stack
    # allocation limit"); constant-mode Pad by run-time pads is a fill and an insert.
    ("test_attention_24_qk_matmul_output_mode3_softmax_precision_expanded", "all", "pass"),
    ("test_constant_pad_negative_axes", "all", "refused or pass"),
)


@pytest.mark.parametrize(("name", "mode", "expected"), CASES)
def test_dynamic_node_test_end_to_end(name: str, mode: str, expected: str) -> None:
    case = node_test_case(name, mode)
    assert case is not node_test_case(name), f"{name}: mode '{mode}' changes no dim"
    outcome = run_case(case)
    assert not outcome.is_bug, (
        f"{name} ({mode}): a niroc bug at stage '{outcome.stage}': {outcome.message}"
    )
    if expected == "pass":
        assert outcome.passed, f"{name} ({mode}) stops at '{outcome.stage}': {outcome.message}"
    if expected == "refused":
        assert outcome.refused, f"{name} ({mode}) is not refused: {outcome.stage}"
