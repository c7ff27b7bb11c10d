"""onnxruntime's transformer contrib ops defined by bodies of standard ONNX ops, built per call
site, as ONNX defines its own composite ops (`schema_functions`).

onnxruntime-genai's model builder and `onnxruntime.transformers`' optimizer emit ops that ONNX
has no schema for: SimplifiedLayerNormalization (registered by onnxruntime in the default
domain), and in `com.microsoft` SkipSimplifiedLayerNormalization, SkipLayerNormalization,
GroupQueryAttention, MatMulNBits, RotaryEmbedding, the Gelu family, and (from its quantizer)
QuantizeLinear, DequantizeLinear, QAttention, QEmbedLayerNormalization; and the
DynamicQuantizeMatMul, MatMulIntegerToFloat, FusedMatMul, FusedConv and FusedGemm its graph
optimizer fuses (in a model saved optimized). The importer calls the body built here in their place,
exactly as it calls an ONNX function body: one Niro Function per distinct (input types,
attributes), typed by ONNX's inference of the body and checked by the verifier's rules for the
standard ops it is made of; the MLIR backend lowers those ops. So every contrib op here has one
definition, this body, and no second implementation to drift.

The bodies follow onnxruntime's ContribOperators.md and the semantics of its CPU kernels:
- normalizations compute in f32 (`stash_type` 1) and divide by sqrt(mean + epsilon), as the
  kernels do;
- MatMulNBits keeps B packed (uint8, two 4-bit values a byte, low nibble first): the body
  unpacks it at run time, so the module holds the packed bytes, never an f32 copy. At
  `accuracy_level` 4 (int8 A allowed: what onnxruntime-genai's builder writes for CPU) the
  product is the CPU kernel's: A quantized to int8 per block of K (scale max|a| / 127, rounded
  half to even), integer sums per block, scaled in f32 (`_int8_block_product`); onnxruntime
  computes exactly this there, except with g_idx or float zero points (then f32, as here). Any
  other level is computed in f32: per block from B's int8 values q - zero_point where they fit
  (bits < 8, no g_idx or float zero points: `_f32_block_product`), else from B dequantized;
- GroupQueryAttention reads each batch row's total length from `seqlens_k` (+1), its past
  length as that minus the new tokens (zero on the first prompt, when the sequence length
  equals `total_sequence_length`), writes the present KV cache as the CPU kernel does (the
  row's past, its new keys right after, zeros beyond), rotates Q and K at positions past + i,
  masks causally (and to the last `local_window_size` keys, its own included), applies
  `softcap`, and `smooth_softmax` / `head_sink` as an extra logit in the softmax's
  denominator. onnxruntime's CPU kernel wants a head size that is a multiple of 16; the body
  does not.

What a body does not implement (an attribute value, an optional output) raises
ContribFunctionError with the reason; the importer names the node.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import onnx
from niro.ir import ScalarType, TensorType

from .onnx_types import type_proto_from_niro

__all__ = ["ContribFunctionError", "contrib_function", "contrib_function_ops"]

_BODY_OPSET = 21
_MS = "com.microsoft"
_FLOAT = (ScalarType.F32, ScalarType.F16, ScalarType.BF16)
_LOWEST = float(np.finfo(np.float32).min)


class ContribFunctionError(ValueError):
    """The call site uses something the body does not implement (message says what)."""


@dataclass
class _Site:
    """One call site: its inputs' types (None: absent), attributes, wanted outputs."""

    op_type: str
    inputs: tuple[TensorType | None, ...]
    attributes: Mapping[str, object]
    outputs: tuple[bool, ...]
    """Whether each output of the node is used."""

    def type(self, position: int, what: str) -> TensorType:
        found = self.inputs[position] if position < len(self.inputs) else None
        if found is None:
            raise ContribFunctionError(f"needs input {what}")
        return found

    def has(self, position: int) -> bool:
        return position < len(self.inputs) and self.inputs[position] is not None

    def shape(self, position: int, what: str, rank: int | None = None) -> tuple[int | None, ...]:
        shape = self.type(position, what).shape
        if shape is None:
            raise ContribFunctionError(f"needs {what} of known rank")
        if rank is not None and len(shape) != rank:
            raise ContribFunctionError(f"needs a rank-{rank} {what}, got shape {list(shape)}")
        return shape

    def static(self, position: int, what: str, axis: int) -> int:
        size = self.shape(position, what)[axis]
        if size is None:
            raise ContribFunctionError(f"needs a static dim {axis} of {what}")
        return size

    def int(self, name: str, default: int) -> int:
        found = self.attributes.get(name, default)
        if not isinstance(found, int):
            raise ContribFunctionError(f"attribute '{name}' must be an int, got {found!r}")
        return found

    def float(self, name: str, default: float) -> float:
        found = self.attributes.get(name, default)
        if not isinstance(found, (int, float)):
            raise ContribFunctionError(f"attribute '{name}' must be a float, got {found!r}")
        return float(found)

    def refuse_outputs(self, positions: Sequence[builtins.int], why: str) -> None:
        for position in positions:
            if position < len(self.outputs) and self.outputs[position]:
                raise ContribFunctionError(f"output #{position} {why}")


@dataclass
class _Body:
    """A function body under construction: `op` appends a node and returns its output name."""

    inputs: list[str]
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    counter: int = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"t{self.counter}"

    def op(self, op_type: str, *inputs: str, **attributes) -> str:
        return self.op_outputs(op_type, *inputs, outputs=1, **attributes)[0]

    def op_outputs(self, op_type: str, *inputs: str, outputs: int, **attributes) -> list[str]:
        """`op` of a node with `outputs` outputs: their names."""
        names = [self.fresh() for _ in range(outputs)]
        self.nodes.append(onnx.helper.make_node(op_type, list(inputs), names, **attributes))
        return names

    def const(self, value, dtype=np.int64) -> str:
        tensor = onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype))
        return self.op("Constant", value=tensor)

    def f32(self, name: str, scalar: ScalarType) -> str:
        return (
            name if scalar is ScalarType.F32 else self.op("Cast", name, to=onnx.TensorProto.FLOAT)
        )

    def back(self, name: str, scalar: ScalarType) -> str:
        if scalar is ScalarType.F32:
            return name
        return self.op("Cast", name, to=_onnx_element(scalar))

    def dim(self, name: str, axis: int) -> str:
        """Dim `axis` of tensor `name` as a 1-element int64 tensor."""
        return self.op("Shape", name, start=axis, end=axis + 1)

    def scalar_dim(self, name: str, axis: int) -> str:
        return self.op("Squeeze", self.dim(name, axis), self.const([0]))

    def slice(self, name: str, start: int | str, end: int | str, axis: int) -> str:
        def one(bound):
            return self.const([bound]) if isinstance(bound, int) else bound

        return self.op("Slice", name, one(start), one(end), self.const([axis]))

    def function(self, op_type: str, outputs: Sequence[str | None]) -> onnx.FunctionProto:
        names = []
        for position, produced in enumerate(outputs):
            name = f"out{position}"
            if produced is None:
                produced = self.op(
                    "Constant", value=onnx.numpy_helper.from_array(np.zeros((0,), np.float32))
                )
            self.nodes.append(onnx.helper.make_node("Identity", [produced], [name]))
            names.append(name)
        return onnx.helper.make_function(
            _MS,
            op_type,
            self.inputs,
            names,
            self.nodes,
            [onnx.helper.make_opsetid("", _BODY_OPSET)],
        )


def _float_input(site: _Site, position: int, what: str) -> ScalarType:
    scalar = site.type(position, what).element_type
    if scalar not in _FLOAT:
        raise ContribFunctionError(f"needs a float {what}, got {scalar.spelling}")
    return scalar


# -- normalizations ---------------------------------------------------------------------------------


def _rms(body: _Body, x: str, scale: str, axis: int, rank: int, epsilon: float) -> tuple[str, str]:
    """(x / sqrt(mean(x^2 over axes axis..) + epsilon) * scale, 1 / that sqrt), in f32."""
    axes = body.const(list(range(axis, rank)))
    mean_square = body.op("ReduceMean", body.op("Mul", x, x), axes, keepdims=1)
    root = body.op("Sqrt", body.op("Add", mean_square, body.const(epsilon, np.float32)))
    normalized = body.op("Div", x, root)
    return body.op("Mul", normalized, scale), body.op("Reciprocal", root)


def _axis(site: _Site, rank: int) -> int:
    axis = site.int("axis", -1)
    if not -rank <= axis < rank:
        raise ContribFunctionError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _stash(site: _Site) -> None:
    if site.int("stash_type", 1) != 1:
        raise ContribFunctionError("supports stash_type=1 (f32 statistics) only")


def _simplified_layer_normalization(site: _Site) -> onnx.FunctionProto:
    """Y = X / sqrt(mean(X^2) + epsilon) * scale over the axes from `axis`; inv_std_var."""
    scalar = _float_input(site, 0, "X")
    _stash(site)
    rank = len(site.shape(0, "X"))
    body = _Body(["X", "scale"])
    x = body.f32("X", scalar)
    scale = body.f32("scale", site.type(1, "scale").element_type)
    y, inverse = _rms(body, x, scale, _axis(site, rank), rank, site.float("epsilon", 1e-5))
    return body.function(site.op_type, [body.back(y, scalar), inverse])


def _skip_sum(body: _Body, site: _Site, bias: int | None) -> str:
    total = body.op("Add", "input", "skip")
    if bias is not None and site.has(bias):
        total = body.op("Add", total, "bias")
    return total


def _skip_simplified_layer_normalization(site: _Site) -> onnx.FunctionProto:
    """s = input + skip (+ bias); output = RMS-normalized s * gamma; inv_std_var; s."""
    scalar = _float_input(site, 0, "input")
    site.refuse_outputs((1,), "(mean) is not computed by the simplified normalization")
    rank = len(site.shape(0, "input"))
    body = _Body(["input", "skip", "gamma", "bias"])
    total = _skip_sum(body, site, 3)
    gamma = body.f32("gamma", site.type(2, "gamma").element_type)
    y, inverse = _rms(
        body, body.f32(total, scalar), gamma, rank - 1, rank, site.float("epsilon", 1e-12)
    )
    return body.function(site.op_type, [body.back(y, scalar), None, inverse, total])


def _skip_layer_normalization(site: _Site) -> onnx.FunctionProto:
    """s = input + skip (+ bias); output = LayerNormalization(s, gamma, beta) on the last axis;
    mean; inv_std_var; s."""
    scalar = _float_input(site, 0, "input")
    body = _Body(["input", "skip", "gamma", "beta", "bias"])
    total = _skip_sum(body, site, 4)
    x = body.f32(total, scalar)
    gamma = body.f32("gamma", site.type(2, "gamma").element_type)
    beta = body.f32("beta", site.type(3, "beta").element_type) if site.has(3) else ""
    y, mean, inverse = body.op_outputs(
        "LayerNormalization",
        x,
        gamma,
        beta,
        outputs=3,
        axis=-1,
        epsilon=site.float("epsilon", 1e-12),
    )
    return body.function(site.op_type, [body.back(y, scalar), mean, inverse, total])


# -- MatMulNBits ------------------------------------------------------------------------------------


def _unpacked(body: _Body, packed: str, bits: int) -> str:
    """uint8 `packed` [..., n] -> its values [..., n * 8 / bits], the lowest bits first (a byte
    holds two 4-bit values low nibble first, or four 2-bit values)."""
    if bits == 8:
        return packed
    mask = body.const((1 << bits) - 1, np.uint8)
    axis = body.const([-1])
    parts = [
        body.op(
            "Unsqueeze",
            body.op(
                "BitwiseAnd",
                body.op("BitShift", packed, body.const(shift, np.uint8), direction="RIGHT")
                if shift
                else packed,
                mask,
            ),
            axis,
        )
        for shift in range(0, 8, bits)
    ]
    grouped = body.op("Concat", *parts, axis=-1)
    return body.op("Reshape", grouped, _merge_last(body, grouped))


def _merge_last(body: _Body, name: str) -> str:
    """The shape of `name` with its last two dims merged (for Reshape)."""
    leading = body.op("Shape", name, end=-2)
    return body.op("Concat", leading, body.const([-1]), axis=0)


def _matmul_nbits(site: _Site) -> onnx.FunctionProto:
    """Y = A @ dequantize(B)^T + bias, B [N, blocks, block bytes] uint8, dequantized per block
    as (q - zero_point) * scale (zero point 2^(bits-1) when absent); g_idx maps each of the K
    rows to its block."""
    scalar = _float_input(site, 0, "A")
    bits = site.int("bits", 4)
    if bits not in (4, 8):
        raise ContribFunctionError(f"supports bits=4 or 8, got {bits}")
    block_size = site.int("block_size", 0)
    if block_size < 16 or block_size & (block_size - 1):
        raise ContribFunctionError(
            f"needs a block_size that is a power of 2 >= 16, got {block_size}"
        )
    k, n = site.int("K", 0), site.int("N", 0)
    if k <= 0 or n <= 0:
        raise ContribFunctionError(f"needs positive K and N, got K={k}, N={n}")
    blocks = -(-k // block_size)
    blob = block_size * bits // 8
    b_type = site.type(1, "B")
    if b_type.element_type is not ScalarType.U8:
        raise ContribFunctionError(f"needs a uint8 B, got {b_type.element_type.spelling}")
    if b_type.shape is not None and tuple(b_type.shape) not in (
        (n, blocks, blob),
        (n, blocks * blob),
    ):
        raise ContribFunctionError(
            f"needs B of shape [{n}, {blocks}, {blob}], got {list(b_type.shape)}"
        )
    if (
        site.shape(2, "scales")
        and int(np.prod([d or 0 for d in site.shape(2, "scales")])) != n * blocks
    ):
        raise ContribFunctionError(
            f"needs {n * blocks} scales, got shape {list(site.shape(2, 'scales'))}"
        )
    body = _Body(["A", "B", "scales", "zero_points", "g_idx", "bias"])
    grid = body.const([n, blocks])
    values = _unpacked(body, body.op("Reshape", "B", body.const([n, blocks, blob])), bits)
    packed_zeros = site.has(3) and site.type(3, "zero_points").element_type is ScalarType.U8
    int8_activations = site.int("accuracy_level", 0) == _INT8_ACTIVATIONS
    if not site.has(4) and (packed_zeros or not site.has(3)) and (int8_activations or bits < 8):
        block_product = _int8_block_product if int8_activations else _f32_block_product
        product = block_product(body, site, values, grid, bits, block_size, k, n)
        if site.has(5):
            product = body.op("Add", product, body.f32("bias", site.type(5, "bias").element_type))
        return body.function(site.op_type, [body.back(product, scalar)])
    weights = body.op(
        "Cast",
        body.op("Reshape", values, body.const([n, blocks * block_size])),
        to=onnx.TensorProto.FLOAT,
    )
    weights = body.slice(weights, 0, k, 1)  # [N, K]
    scales = body.op("Reshape", body.f32("scales", site.type(2, "scales").element_type), grid)
    if site.has(3):
        zero_type = site.type(3, "zero_points")
        if zero_type.element_type is ScalarType.U8:
            if site.has(4):
                # NOTE: onnxruntime 1.32's CPU kernel reads no packed zero point when g_idx is
                # given (it dequantizes with 2^(bits-1)): which one the model means is unclear
                raise ContribFunctionError("does not implement g_idx with packed uint8 zero_points")
            zeros = body.op(
                "Cast", _packed_zero_points(body, n, blocks, bits), to=onnx.TensorProto.FLOAT
            )
        elif zero_type.element_type is site.type(2, "scales").element_type:
            zeros = body.op("Reshape", body.f32("zero_points", zero_type.element_type), grid)
        else:
            raise ContribFunctionError(
                f"needs uint8 or scale-typed zero_points, got {zero_type.element_type.spelling}"
            )
    else:
        zeros = body.const(float(1 << (bits - 1)), np.float32)
        zeros = body.op("Expand", zeros, grid)
    if site.has(4):
        rows = body.op("Cast", "g_idx", to=onnx.TensorProto.INT64)
        scales = body.op("Gather", scales, rows, axis=1)
        zeros = body.op("Gather", zeros, rows, axis=1)
    else:
        spread = body.const([n, blocks, block_size])
        merged = body.const([n, blocks * block_size])

        def per_row(name: str) -> str:
            grown = body.op("Expand", body.op("Unsqueeze", name, body.const([2])), spread)
            return body.slice(body.op("Reshape", grown, merged), 0, k, 1)

        scales, zeros = per_row(scales), per_row(zeros)
    dequantized = body.op("Mul", body.op("Sub", weights, zeros), scales)
    product = body.op(
        "MatMul", body.f32("A", scalar), body.op("Transpose", dequantized, perm=[1, 0])
    )
    if site.has(5):
        product = body.op("Add", product, body.f32("bias", site.type(5, "bias").element_type))
    return body.function(site.op_type, [body.back(product, scalar)])


_INT8_ACTIVATIONS = 4
"""The MatMulNBits accuracy_level that lets A be quantized to int8 per block."""


def _packed_zero_points(body: _Body, n: int, blocks: int, bits: int) -> str:
    """MatMulNBits' uint8 `zero_points` (each column's `bits`-bit values packed in whole bytes)
    as their values [N, blocks], uint8."""
    row_bytes = -(-blocks * bits // 8)
    zeros = _unpacked(body, body.op("Reshape", "zero_points", body.const([n, row_bytes])), bits)
    return body.slice(zeros, 0, blocks, 1)


def _int8_block_product(
    body: _Body, site: _Site, values: str, grid: str, bits: int, block_size: int, k: int, n: int
) -> str:
    """A @ dequantize(B)^T as onnxruntime's CPU kernel computes it at accuracy_level 4 (MLAS's
    CompInt8): each row of A is cut into the weights' blocks of K (the last one zero-padded),
    each block quantized to int8 with scale max|a| / 127 (a zero block: scale 0), rounded half
    to even; per block and column the integer sum of a_q * (q - zero_point), times
    scale_a * scale_b; the blocks' terms summed in f32. `values` are B's unpacked values
    [N, blocks, block_size].

    The blocks lead ([blocks, rows, block] x [blocks, block, N]), so the integer products are
    one batched int8 product (in tiles, `linalg.batch_mmt4d`: `builders.contraction`), which
    IREE compiles far better than the f32 product of dequantized weights; the scaling and the
    sum over blocks are one Einsum, one reduction (as a Mul by the outer product of the scales
    and a ReduceSum, IREE made three dispatches of it, as long as the product). One 1x1024 by
    1536x1024 int4 product ran 0.18 ms as a batch_matmul against 0.55-0.8 ms as the f32
    product of weights dequantized at every call (iree-benchmark-module). Many rows pay for
    it: the batch writes a partial sum per block for every output (`_f32_block_product`, the
    f32 form of the same shape, alike)."""
    a, blocked = _blocked_rows(body, site, block_size, k)
    largest = body.op("ReduceMax", body.op("Abs", blocked), body.const([2]), keepdims=1)
    a_scale = body.op("Div", largest, body.const(127.0, np.float32))
    zero = body.const(0.0, np.float32)
    inverse = body.op(
        "Where", body.op("Equal", a_scale, zero), zero, body.op("Reciprocal", a_scale)
    )
    a_int8 = body.op(
        "Cast", body.op("Round", body.op("Mul", blocked, inverse)), to=onnx.TensorProto.INT8
    )
    b_columns, zeros = _block_columns(body, site, values, grid, bits, n, -(-k // block_size))
    if bits < 8:
        # q - zero_point fits int8: one int8 x int8 product
        sums = body.op("MatMulInteger", a_int8, _int8_columns(body, b_columns, zeros))
    else:
        # q - zero_point spans [-255, 255]: sum(a_q * q) - zero_point * sum(a_q)
        int32 = onnx.TensorProto.INT32
        a_sums = body.op(
            "ReduceSum", body.op("Cast", a_int8, to=int32), body.const([2]), keepdims=1
        )
        sums = body.op(
            "Sub",
            body.op("MatMulInteger", a_int8, b_columns),
            body.op("Mul", body.op("Cast", zeros, to=int32), a_sums),
        )
    b_scale = _block_scales(body, site, grid)
    a_scale = body.op("Squeeze", a_scale, body.const([2]))  # [blocks, rows]
    product = body.op(
        "Einsum",
        body.op("Cast", sums, to=onnx.TensorProto.FLOAT),
        a_scale,
        b_scale,
        equation="bmn,bm,bn->mn",
    )
    return _rows_back(body, a, product, n)


def _f32_block_product(
    body: _Body, site: _Site, values: str, grid: str, bits: int, block_size: int, k: int, n: int
) -> str:
    """A @ dequantize(B)^T in f32 (below accuracy_level 4) for weights whose q - zero_point
    fits int8 (bits < 8): per block and column the f32 sum of a * (q - zero_point), times the
    block's scale, the blocks' terms summed. The same sum as of a times the dequantized
    weights, in another order (onnxruntime dequantizes, then multiplies).

    Why: the int8 weights (q - zero_point, a byte each) are what iree-compile's const-eval
    keeps, and the product reads them widened in its loop (`builders.contraction`, a product
    by int8 matrices widened to f32); weights dequantized to f32 are 8x the bytes of the
    packed ones, which IREE computes at every call instead (the onnxruntime-genai int4 Llama at
    accuracy_level 1: 41 ms a decode step so)."""
    a, blocked = _blocked_rows(body, site, block_size, k)
    b_columns, zeros = _block_columns(body, site, values, grid, bits, n, -(-k // block_size))
    weights = body.op("Cast", _int8_columns(body, b_columns, zeros), to=onnx.TensorProto.FLOAT)
    product = body.op(
        "Einsum",
        body.op("MatMul", blocked, weights),
        _block_scales(body, site, grid),
        equation="bmn,bn->mn",
    )
    return _rows_back(body, a, product, n)


def _rows_back(body: _Body, a: str, product: str, n: int) -> str:
    """The blocks' summed `product` [rows, N] in A's leading dims: [..., N]."""
    shape = body.op("Concat", body.op("Shape", a, end=-1), body.const([n]), axis=0)
    return body.op("Reshape", product, shape)


def _blocked_rows(body: _Body, site: _Site, block_size: int, k: int) -> tuple[str, str]:
    """MatMulNBits' A in f32 and its rows cut into the weights' blocks of K, [blocks, rows,
    block] (the last block zero-padded)."""
    blocks = -(-k // block_size)
    a = body.f32("A", site.type(0, "A").element_type)
    rank = len(site.shape(0, "A"))
    if blocks * block_size != k:
        a = body.op("Pad", a, body.const([0] * (2 * rank - 1) + [blocks * block_size - k]))
    rows = body.op("Reshape", a, body.const([-1, blocks, block_size]))
    return a, body.op("Transpose", rows, perm=[1, 0, 2])


def _block_columns(
    body: _Body, site: _Site, values: str, grid: str, bits: int, n: int, blocks: int
) -> tuple[str, str]:
    """B's unpacked `values` [N, blocks, block] as [blocks, block, N] (uint8) and their zero
    points [blocks, 1, N] (uint8; 2^(bits-1) when absent)."""
    b_columns = body.op("Transpose", values, perm=[1, 2, 0])
    if site.has(3):
        zeros = _packed_zero_points(body, n, blocks, bits)
    else:
        zeros = body.op("Expand", body.const(1 << (bits - 1), np.uint8), grid)
    zeros = body.op("Transpose", body.op("Unsqueeze", zeros, body.const([2])), perm=[1, 2, 0])
    return b_columns, zeros


def _int8_columns(body: _Body, b_columns: str, zeros: str) -> str:
    """q - zero_point as int8 (it fits for bits < 8)."""
    int8 = onnx.TensorProto.INT8
    return body.op("Sub", body.op("Cast", b_columns, to=int8), body.op("Cast", zeros, to=int8))


def _block_scales(body: _Body, site: _Site, grid: str) -> str:
    """B's scales in f32, [blocks, N]."""
    scales = body.f32("scales", site.type(2, "scales").element_type)
    return body.op("Transpose", body.op("Reshape", scales, grid), perm=[1, 0])


def _gather_block_quantized(site: _Site) -> onnx.FunctionProto:
    """Gather(data, indices, gather_axis) dequantized per block of `block_size` along
    quantize_axis as (q - zero_point) * scale, in f32, of the scales' type, as onnxruntime's
    CPU kernel: data is uint8 holding `bits` (4 or 8; 2) values a byte along its last axis,
    which must be quantize_axis, with gather_axis 0, zero points packed the same way (default
    2^(bits-1)); or int4 / uint4 with any two axes and zero points of its type (default 0).
    Indices may be negative; an index out of range gives a row of zeros. The rows are gathered
    while still quantized (a table is never dequantized whole)."""
    data_type = site.type(0, "data")
    rank = len(site.shape(0, "data"))
    gather_axis, quantize_axis = site.int("gather_axis", 0), site.int("quantize_axis", 1)
    if not (-rank <= gather_axis < rank and -rank <= quantize_axis < rank):
        raise ContribFunctionError(
            f"gather_axis {gather_axis} or quantize_axis {quantize_axis} is out of range for rank {rank}"
        )
    gather_axis, quantize_axis = gather_axis % rank, quantize_axis % rank
    block_size = site.int("block_size", 128)
    if block_size < 16 or block_size & (block_size - 1):
        raise ContribFunctionError(
            f"needs a block_size that is a power of 2 >= 16, got {block_size}"
        )
    bits = site.int("bits", 4)
    packed = data_type.element_type is ScalarType.U8
    if packed:
        if bits not in (2, 4, 8):
            raise ContribFunctionError(f"supports bits=2, 4 or 8 for uint8 data, got {bits}")
        if gather_axis != 0 or quantize_axis != rank - 1:
            raise ContribFunctionError(
                "needs gather_axis 0 and quantize_axis the last axis for uint8 data, got "
                f"{gather_axis} and {quantize_axis}"
            )
    elif data_type.element_type in (ScalarType.I4, ScalarType.U4):
        if bits != 4:
            raise ContribFunctionError(f"needs bits=4 for {data_type.element_type.spelling} data")
    else:
        raise ContribFunctionError(
            f"supports uint8, int4 or uint4 data, got {data_type.element_type.spelling}"
        )
    scale_type = _float_input(site, 2, "scales")
    if len(site.shape(2, "scales")) != rank:
        raise ContribFunctionError(f"needs rank-{rank} scales like data")
    indices_rank = len(site.shape(1, "indices"))
    body = _Body(["data", "indices", "scales", "zero_points"])
    axis_size = body.dim("data", gather_axis)
    indices = body.op("Cast", "indices", to=onnx.TensorProto.INT64)
    valid = body.op(
        "And",
        body.op("GreaterOrEqual", indices, body.op("Neg", axis_size)),
        body.op("Less", indices, axis_size),
    )
    indices = body.op("Where", valid, indices, body.const(0))
    indices = body.op(
        "Where",
        body.op("Less", indices, body.const(0)),
        body.op("Add", indices, axis_size),
        indices,
    )
    # the output's axes: data's before gather_axis, the indices', data's after gather_axis
    out_axis = quantize_axis if quantize_axis < gather_axis else quantize_axis + indices_rank - 1
    if packed:
        rows = _unpacked(body, body.op("Gather", "data", indices, axis=0), bits)
    else:
        rows = body.op(
            "Gather", body.op("Cast", "data", to=onnx.TensorProto.INT8), indices, axis=gather_axis
        )
    length = body.dim(rows, out_axis)
    values = body.op("Cast", rows, to=onnx.TensorProto.FLOAT)

    def per_value(name: str) -> str:
        """`name` (one entry a block) gathered as data is, then spread to one entry a value."""
        if gather_axis == quantize_axis:
            return body.op(
                "Gather", name, body.op("Div", indices, body.const(block_size)), axis=gather_axis
            )
        gathered = body.op("Gather", name, indices, axis=gather_axis)
        spread = body.op("Unsqueeze", gathered, body.const([out_axis + 1]))
        grown = body.op(
            "Expand",
            spread,
            body.op(
                "Concat",
                body.op("Shape", spread, end=out_axis + 1),
                body.const([block_size]),
                body.op("Shape", spread, start=out_axis + 2),
                axis=0,
            ),
        )
        merged = body.op(
            "Concat",
            body.op("Shape", gathered, end=out_axis),
            body.const([-1]),
            body.op("Shape", gathered, start=out_axis + 1),
            axis=0,
        )
        return body.slice(body.op("Reshape", grown, merged), 0, length, out_axis)

    scales = per_value(body.f32("scales", scale_type))
    if site.has(3):
        zero_type = site.type(3, "zero_points").element_type
        if zero_type is not data_type.element_type:
            raise ContribFunctionError(
                f"needs zero_points of data's type {data_type.element_type.spelling}, got "
                f"{zero_type.spelling}"
            )
        if packed:
            blocks = body.dim("scales", rank - 1)
            zeros = body.slice(_unpacked(body, "zero_points", bits), 0, blocks, rank - 1)
        else:
            zeros = body.op("Cast", "zero_points", to=onnx.TensorProto.INT8)
        zeros = per_value(body.op("Cast", zeros, to=onnx.TensorProto.FLOAT))
        values = body.op("Sub", values, zeros)
    elif packed:
        values = body.op("Sub", values, body.const(float(1 << (bits - 1)), np.float32))
    dequantized = body.op("Mul", values, scales)
    trailing = rank - 1 - gather_axis  # data's axes after gather_axis: broadcast over them
    shown = valid
    if trailing:
        shown = body.op(
            "Unsqueeze", valid, body.const(list(range(indices_rank, indices_rank + trailing)))
        )
    output = body.op("Where", shown, dequantized, body.const(0.0, np.float32))
    return body.function(site.op_type, [body.back(output, scale_type)])


# -- rotary embeddings and attention ----------------------------------------------------------------


def _rotate(
    body: _Body, x: str, cos: str, sin: str, rotary: int, head: int, interleaved: bool
) -> str:
    """x [..., head] with its first `rotary` features rotated by cos / sin [..., rotary / 2]
    (broadcast against x's leading dims): pairs (i, i + rotary/2), or (2i, 2i + 1) interleaved."""
    half = rotary // 2
    rotated = x if rotary == head else body.slice(x, 0, rotary, -1)
    if interleaved:
        pairs = body.op("Reshape", rotated, _split_last(body, rotated, half))
        first = body.op("Squeeze", body.slice(pairs, 0, 1, -1), body.const([-1]))
        second = body.op("Squeeze", body.slice(pairs, 1, 2, -1), body.const([-1]))
    else:
        first, second = body.slice(rotated, 0, half, -1), body.slice(rotated, half, rotary, -1)
    out_first = body.op("Sub", body.op("Mul", first, cos), body.op("Mul", second, sin))
    out_second = body.op("Add", body.op("Mul", second, cos), body.op("Mul", first, sin))
    if interleaved:
        axis = body.const([-1])
        stacked = body.op(
            "Concat",
            body.op("Unsqueeze", out_first, axis),
            body.op("Unsqueeze", out_second, axis),
            axis=-1,
        )
        result = body.op("Reshape", stacked, _merge_last(body, stacked))
    else:
        result = body.op("Concat", out_first, out_second, axis=-1)
    if rotary == head:
        return result
    return body.op("Concat", result, body.slice(x, rotary, head, -1), axis=-1)


def _split_last(body: _Body, name: str, half: int) -> str:
    leading = body.op("Shape", name, end=-1)
    return body.op("Concat", leading, body.const([half, 2]), axis=0)


def _cos_sin(
    body: _Body, site: _Site, cos_position: int, positions: str, axis: int
) -> tuple[str, str]:
    """cos_cache / sin_cache (inputs `cos_position` and the next) rows at `positions` [B, S],
    in f32 (an fp16/bf16 cache is read as onnxruntime's kernel reads it, widened), unsqueezed at
    `axis` for the heads."""
    where = body.const([axis])
    cos, sin = (
        body.op(
            "Unsqueeze",
            body.f32(
                body.op("Gather", cache, positions, axis=0),
                _float_input(site, cos_position + offset, cache),
            ),
            where,
        )
        for offset, cache in enumerate(("cos_cache", "sin_cache"))
    )
    return cos, sin


def _rotary_embedding(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.RotaryEmbedding: input [B, S, hidden] or [B, N, S, H] rotated at
    position_ids [B, S] (or [1]: an offset, positions offset + s)."""
    scalar = _float_input(site, 0, "input")
    if site.int("is_packed_batching", 0):
        raise ContribFunctionError("supports is_packed_batching=0 only")
    if site.float("scale", 1.0) != 1.0:
        raise ContribFunctionError("supports scale=1.0 only")
    shape = site.shape(0, "input")
    half = site.static(2, "cos_cache", 1)
    rotary = site.int("rotary_embedding_dim", 0) or 2 * half
    if rotary != 2 * half:
        raise ContribFunctionError(
            f"rotary_embedding_dim {rotary} does not match cos_cache's {half} columns"
        )
    body = _Body(["input", "position_ids", "cos_cache", "sin_cache"])
    x = body.f32("input", scalar)
    if len(shape) == 3:
        hidden = site.static(0, "input", 2)
        heads = site.int("num_heads", 0) or hidden // rotary
        if hidden % heads:
            raise ContribFunctionError(
                f"hidden size {hidden} is not a multiple of num_heads {heads}"
            )
        head = hidden // heads
        x = body.op("Reshape", x, body.const([0, 0, heads, head]))
        sequence_axis, head_axis = 1, 2
    elif len(shape) == 4:
        head = site.static(0, "input", 3)
        sequence_axis, head_axis = 2, 1
    else:
        raise ContribFunctionError(f"needs a rank-3 or rank-4 input, got shape {list(shape)}")
    positions = body.op("Cast", "position_ids", to=onnx.TensorProto.INT64)
    position_shape = site.shape(1, "position_ids")
    if len(position_shape) == 1:
        steps = body.op("Range", body.const(0), body.scalar_dim(x, sequence_axis), body.const(1))
        positions = body.op("Add", body.op("Unsqueeze", steps, body.const([0])), positions)
    cos, sin = _cos_sin(body, site, 2, positions, head_axis)
    rotated = _rotate(body, x, cos, sin, rotary, head, bool(site.int("interleaved", 0)))
    if len(shape) == 3:
        rotated = body.op("Reshape", rotated, body.const([0, 0, -1]))
    return body.function(site.op_type, [body.back(rotated, scalar)])


def _heads(body: _Body, x: str, heads: int, head: int) -> str:
    """[B, S, heads * head] -> [B, heads, S, head]."""
    return body.op(
        "Transpose", body.op("Reshape", x, body.const([0, 0, heads, head])), perm=[0, 2, 1, 3]
    )


_GQA_INPUTS = (
    "query",
    "key",
    "value",
    "past_key",
    "past_value",
    "seqlens_k",
    "total_sequence_length",
    "cos_cache",
    "sin_cache",
    "position_ids",
    "attention_bias",
    "head_sink",
    "k_scale",
    "v_scale",
    "q_norm_weight",
    "k_norm_weight",
    "query_seqlens",
)


@dataclass
class _Keys:
    """The keys and values an attention step reads, [B, KV, Tk, H], and each key column's
    absolute position ([B or 1, Tk]) and, where some columns hold no token, which do."""

    keys: str
    values: str
    position: str
    valid: str | None


def _group_query_attention(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.GroupQueryAttention with the CPU kernel's KV-cache and masking semantics
    (module docstring)."""
    scalar = _float_input(site, 0, "query")
    heads, kv_heads = site.int("num_heads", 0), site.int("kv_num_heads", 0)
    if heads <= 0 or kv_heads <= 0 or heads % kv_heads:
        raise ContribFunctionError(
            f"needs num_heads a positive multiple of kv_num_heads, got {heads}, {kv_heads}"
        )
    if site.int("qk_output", 0):
        raise ContribFunctionError("supports qk_output=0 only")
    site.refuse_outputs((3,), "(output_qk) is not computed")
    for position, why in (
        (9, "position_ids"),
        (12, "k_scale (a quantized KV cache)"),
        (13, "v_scale (a quantized KV cache)"),
        (14, "q_norm_weight"),
        (15, "k_norm_weight"),
        (16, "query_seqlens"),
    ):
        if site.has(position):
            raise ContribFunctionError(f"does not implement {why}")
    for name in ("k_quant_type", "v_quant_type"):
        found = site.attributes.get(name, "NONE")
        if found not in ("NONE", b"NONE"):
            raise ContribFunctionError(
                f"does not implement {name} {found!r} (a quantized KV cache)"
            )
    causal = site.int("causal", 1)
    window = site.int("local_window_size", -1)
    windowed = bool(site.int("sliding_window_cache", 0))
    if causal not in (0, 1) or (not causal and window >= 0):
        raise ContribFunctionError(
            f"needs causal 0 or 1, and local_window_size -1 when causal is 0; got {causal}, {window}"
        )
    packed = not site.has(1)
    if packed == site.has(2):
        raise ContribFunctionError("needs both key and value, or neither (packed QKV)")
    if site.has(3) != site.has(4):
        raise ContribFunctionError("needs both past_key and past_value, or neither")
    if windowed and (window <= 0 or not site.has(3)):
        raise ContribFunctionError(
            "needs local_window_size > 0 and past_key / past_value (the cache's capacity) "
            "with sliding_window_cache"
        )
    width = site.static(0, "query", 2)
    head = width // (heads + 2 * kv_heads) if packed else width // heads
    body = _Body(list(_GQA_INPUTS))
    query = body.f32("query", scalar)
    if packed:
        q = body.slice(query, 0, heads * head, 2)
        k = body.slice(query, heads * head, (heads + kv_heads) * head, 2)
        v = body.slice(query, (heads + kv_heads) * head, (heads + 2 * kv_heads) * head, 2)
    else:
        q, k, v = query, body.f32("key", scalar), body.f32("value", scalar)
    q, k, v = (
        _heads(body, q, heads, head),
        _heads(body, k, kv_heads, head),
        _heads(body, v, kv_heads, head),
    )
    sequence = body.scalar_dim(q, 2)
    total = body.op(
        "Reshape",
        body.op("Cast", "total_sequence_length", to=onnx.TensorProto.INT64),
        body.const([]),
    )
    row_total = body.op(
        "Add", body.op("Cast", "seqlens_k", to=onnx.TensorProto.INT64), body.const(1)
    )  # [B]
    first_prompt = body.op("Equal", sequence, total)
    row_past = body.op(
        "Where", first_prompt, body.const(0), body.op("Sub", row_total, sequence)
    )  # [B]
    past_column = body.op("Unsqueeze", row_past, body.const([1]))  # [B, 1]
    steps = body.op("Range", body.const(0), sequence, body.const(1))  # [S]
    positions = body.op("Add", past_column, body.op("Unsqueeze", steps, body.const([0])))  # [B, S]
    if site.int("do_rotary", 0):
        half = site.static(7, "cos_cache", 1)
        cos, sin = _cos_sin(body, site, 7, positions, 1)
        interleaved = bool(site.int("rotary_interleaved", 0))
        q = _rotate(body, q, cos, sin, 2 * half, head, interleaved)
        k = _rotate(body, k, cos, sin, 2 * half, head, interleaved)
    if windowed:
        cache = _windowed_cache(body, k, v, past_column, window)
    else:
        cache = _full_cache(body, site, k, v, total, past_column, head)
    present_key, present_value, keys = cache
    grouped = body.op("Reshape", q, body.const([0, kv_heads, -1, head]))  # [B, KV, G*S, H]
    scores = body.op("MatMul", grouped, body.op("Transpose", keys.keys, perm=[0, 1, 3, 2]))
    scores = body.op(
        "Reshape",
        scores,
        body.op(
            "Concat", body.dim(q, 0), body.const([heads]), body.dim(q, 2), body.const([-1]), axis=0
        ),
    )  # [B, N, S, Tk]
    scale = site.float("scale", 0.0) or 1.0 / float(np.sqrt(head))
    scores = body.op("Mul", scores, body.const(scale, np.float32))
    softcap = site.float("softcap", 0.0)
    if softcap > 0:
        capped = body.op("Tanh", body.op("Div", scores, body.const(softcap, np.float32)))
        scores = body.op("Mul", capped, body.const(softcap, np.float32))
    key_position = body.op("Unsqueeze", keys.position, body.const([1]))  # [B or 1, 1, Tk]
    if site.has(10):
        scores = body.op("Add", scores, _bias_at(body, site, keys.position, scores))
    # key t is seen by query s of row b when t < past_b + s + 1 (and within the local window);
    # without `causal`, every key of the row's past and new tokens
    causal_end = body.op("Add", positions, body.const(1)) if causal else None
    if causal_end is None:
        causal_end = body.op("Add", past_column, sequence)
    limit = body.op("Unsqueeze", causal_end, body.const([2]))  # [B, S or 1, 1]
    visible = body.op("Less", key_position, limit)
    if window > 0:
        start = body.op("Sub", limit, body.const(window))
        visible = body.op("And", visible, body.op("GreaterOrEqual", key_position, start))
    if keys.valid is not None:
        visible = body.op("And", visible, body.op("Unsqueeze", keys.valid, body.const([1])))
    visible = body.op("Unsqueeze", visible, body.const([1]))  # [B, 1, S, Tk]
    masked = body.op("Where", visible, scores, body.const(_LOWEST, np.float32))
    sink = None
    if site.has(11):
        sink = body.op(
            "Reshape",
            body.f32("head_sink", site.type(11, "head_sink").element_type),
            body.const([1, heads, 1, 1]),
        )
    elif site.int("smooth_softmax", 0):
        sink = body.const(0.0, np.float32)
    if sink is None:
        probabilities = body.op("Softmax", masked, axis=-1)
    else:
        top = body.op("Max", body.op("ReduceMax", masked, body.const([-1]), keepdims=1), sink)
        exps = body.op(
            "Where",
            visible,
            body.op("Exp", body.op("Sub", masked, top)),
            body.const(0.0, np.float32),
        )
        denominator = body.op(
            "Add",
            body.op("ReduceSum", exps, body.const([-1]), keepdims=1),
            body.op("Exp", body.op("Sub", sink, top)),
        )
        probabilities = body.op("Div", exps, denominator)
    probabilities = body.op("Reshape", probabilities, body.const([0, kv_heads, -1, 0]))
    context = body.op("MatMul", probabilities, keys.values)  # [B, KV, G*S, H]
    context = body.op("Reshape", context, body.const([0, heads, -1, head]))
    output = body.op(
        "Reshape",
        body.op("Transpose", context, perm=[0, 2, 1, 3]),
        body.const([0, 0, heads * head]),
    )
    return body.function(
        site.op_type,
        [
            body.back(output, scalar),
            body.back(present_key, scalar),
            body.back(present_value, scalar),
        ],
    )


def _full_cache(
    body: _Body, site: _Site, k: str, v: str, total: str, past_column: str, head: int
) -> tuple[str, str, _Keys]:
    """The present KV cache as the CPU kernel writes a full-length one: row b's past, its new
    keys right after, zeros beyond, max(total_sequence_length, past length) long; attention
    reads it, key t at position t."""
    if site.has(3):
        past_length = body.scalar_dim("past_key", 2)
        past_key = body.f32("past_key", site.type(3, "past_key").element_type)
        past_value = body.f32("past_value", site.type(4, "past_value").element_type)
    else:
        past_length = body.const(0)
    sequence = body.scalar_dim(k, 2)
    length = body.op("Max", total, past_length)
    columns = body.op("Range", body.const(0), length, body.const(1))  # [T]
    column_row = body.op("Unsqueeze", columns, body.const([0]))  # [1, T]
    # present[b, :, t]: the past at t < past_b, new token t - past_b, else 0
    in_past = body.op("Less", column_row, past_column)
    new_end = body.op("Add", past_column, sequence)
    in_new = body.op("And", body.op("Not", in_past), body.op("Less", column_row, new_end))
    keep = body.op("Or", in_past, in_new)

    def present(past: str | None, new: str) -> str:
        if past is None:
            joined, offset = new, body.const(0)
        else:
            joined, offset = body.op("Concat", past, new, axis=2), past_length
        source = body.op(
            "Where",
            in_past,
            column_row,
            body.op("Add", offset, body.op("Sub", column_row, past_column)),
        )
        return _rows_of(body, joined, source, keep)

    present_key = present(past_key if site.has(3) else None, k)
    present_value = present(past_value if site.has(3) else None, v)
    return present_key, present_value, _Keys(present_key, present_value, column_row, None)


def _windowed_cache(
    body: _Body, k: str, v: str, past_column: str, window: int
) -> tuple[str, str, _Keys]:
    """A window-sized cache (sliding_window_cache): past and present hold C rows (C: the
    past's dim 2, at least the window); after T tokens rows [0, L(T)) hold positions
    T - L(T) .. T - 1, L(T) = T up to C, else T - G * ceil((T - C) / G) with G = C - W + 1
    (eviction frees G rows at once), and the rows beyond are zeros (onnxruntime leaves them
    unspecified). Attention reads the past's resident rows and the new keys, so a step never
    misses a key its own tokens evicted."""
    capacity = body.scalar_dim("past_key", 2)
    freed = body.op("Max", body.op("Sub", capacity, body.const(window - 1)), body.const(1))
    sequence = body.scalar_dim(k, 2)

    def resident(count: str) -> str:
        over = body.op("Sub", count, capacity)
        evicted = body.op(
            "Mul",
            freed,
            body.op("Div", body.op("Add", over, body.op("Sub", freed, body.const(1))), freed),
        )
        return body.op(
            "Where", body.op("Greater", count, capacity), body.op("Sub", count, evicted), count
        )

    past_resident = resident(past_column)  # [B, 1]
    end = body.op("Add", past_column, sequence)
    present_resident = resident(end)
    joined_key = body.op("Concat", body.f32("past_key", ScalarType.F32), k, axis=2)
    joined_value = body.op("Concat", body.f32("past_value", ScalarType.F32), v, axis=2)
    # the joined columns: past row i (position past - resident + i, held when i < resident),
    # then new token j at C + j (position past + j)
    columns = body.op(
        "Unsqueeze",
        body.op("Range", body.const(0), body.op("Add", capacity, sequence), body.const(1)),
        body.const([0]),
    )  # [1, C + S]
    from_past = body.op("Less", columns, capacity)
    position = body.op(
        "Where",
        from_past,
        body.op("Add", body.op("Sub", past_column, past_resident), columns),
        body.op("Sub", body.op("Add", past_column, columns), capacity),
    )
    valid = body.op("Or", body.op("Not", from_past), body.op("Less", columns, past_resident))
    # present row r holds position end - resident(end) + r
    rows = body.op(
        "Unsqueeze", body.op("Range", body.const(0), capacity, body.const(1)), body.const([0])
    )  # [1, C]
    held = body.op("Add", body.op("Sub", end, present_resident), rows)
    source = body.op(
        "Where",
        body.op("Less", held, past_column),
        body.op("Add", body.op("Sub", held, past_column), past_resident),
        body.op("Add", capacity, body.op("Sub", held, past_column)),
    )
    keep = body.op("Less", rows, present_resident)
    present_key = _rows_of(body, joined_key, source, keep)
    present_value = _rows_of(body, joined_value, source, keep)
    return present_key, present_value, _Keys(joined_key, joined_value, position, valid)


def _rows_of(body: _Body, joined: str, source: str, keep: str) -> str:
    """Rows `source` [B, R] of `joined` [B, KV, J, H] along its axis 2 (clamped into range),
    zero where `keep` [B, R] is false: [B, KV, R, H]."""
    last = body.op("Sub", body.scalar_dim(joined, 2), body.const(1))
    source = body.op("Max", body.op("Min", source, last), body.const(0))
    index = body.op(
        "Expand",
        body.op("Unsqueeze", source, body.const([1, 3])),
        body.op(
            "Concat",
            body.dim(joined, 0),
            body.dim(joined, 1),
            body.op("Shape", source, start=1),
            body.dim(joined, 3),
            axis=0,
        ),
    )
    gathered = body.op("GatherElements", joined, index, axis=2)
    keep = body.op("Unsqueeze", keep, body.const([1, 3]))
    return body.op("Where", keep, gathered, body.const(0.0, np.float32))


def _bias_at(body: _Body, site: _Site, position: str, scores: str) -> str:
    """attention_bias [B or 1, N or 1, S, total] read at each key column's absolute position
    `position` [B or 1, Tk] (clamped; masked columns do not matter): [B, N or 1, S, Tk]."""
    bias = body.f32("attention_bias", site.type(10, "attention_bias").element_type)
    last = body.op("Sub", body.scalar_dim(bias, 3), body.const(1))
    clamped = body.op("Max", body.op("Min", position, last), body.const(0))
    batch = body.dim(scores, 0)
    bias = body.op(
        "Expand",
        bias,
        body.op("Concat", batch, body.op("Shape", bias, start=1), axis=0),
    )
    index = body.op(
        "Expand",
        body.op("Unsqueeze", clamped, body.const([1, 2])),
        body.op(
            "Concat",
            batch,
            body.op("Shape", bias, start=1, end=3),
            body.op("Shape", clamped, start=1),
            axis=0,
        ),
    )
    return body.op("GatherElements", bias, index, axis=3)


def _embed_layer_normalization(site: _Site) -> onnx.FunctionProto:
    """LayerNormalization(word[input_ids] + position[position_ids or 0..S-1] (+
    segment[segment_ids])); mask_index: each row's count of non-zero mask values (int32);
    embedding_sum: the sum before normalizing."""
    if site.int("mask_index_type", 1) != 1:
        raise ContribFunctionError("supports mask_index_type=1 only")
    if not site.has(7):
        site.refuse_outputs((1,), "(mask_index) needs the mask input")
    body = _Body(
        [
            "input_ids",
            "segment_ids",
            "word_embedding",
            "position_embedding",
            "segment_embedding",
            "gamma",
            "beta",
            "mask",
            "position_ids",
        ]
    )
    scalar = _float_input(site, 2, "word_embedding")

    def rows(table: str, indices: str) -> str:
        return body.op("Gather", body.f32(table, scalar), indices, axis=0)

    positions = body.op("Cast", "position_ids", to=onnx.TensorProto.INT64) if site.has(8) else None
    total = _embedding_sum(body, site, rows, positions)
    gamma = body.f32("gamma", site.type(5, "gamma").element_type)
    beta = body.f32("beta", site.type(6, "beta").element_type)
    normalized = body.op(
        "LayerNormalization", total, gamma, beta, axis=-1, epsilon=site.float("epsilon", 1e-12)
    )
    mask_index = None
    if site.has(7):
        mask = body.op("Cast", "mask", to=onnx.TensorProto.INT64)
        nonzero = body.op("Not", body.op("Equal", mask, body.const(0)))
        mask_index = _row_counts(body, nonzero)
    return body.function(
        site.op_type, [body.back(normalized, scalar), mask_index, body.back(total, scalar)]
    )


def _quantized_embed_layer_normalization(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.QEmbedLayerNormalization (onnxruntime's quantizer on a fused BERT's
    EmbedLayerNormalization): EmbedLayerNormalization of 8-bit tables, gamma and beta, each
    dequantized per tensor as (q - zero_point) * scale (the rows looked up first), positions
    0..S-1; mask_index: each row's count of mask values equal to 1 (zeros without a mask), as
    the CPU kernel counts."""
    names = ["word_embedding", "position_embedding", "segment_embedding", "gamma", "beta"]
    body = _Body(
        [
            "input_ids",
            "segment_ids",
            *(f"{name}_quant" if name != "segment_embedding" else name for name in names),
            "mask",
            *(f"{name}_scale" for name in names),
            *(f"{name}_zero_point" for name in names),
        ]
    )
    quantized = {name: body.inputs[2 + index] for index, name in enumerate(names)}

    def dequantized(name: str, values: str) -> str:
        return body.op("DequantizeLinear", values, f"{name}_scale", f"{name}_zero_point")

    def rows(table: str, indices: str) -> str:
        return dequantized(table, body.op("Gather", quantized[table], indices, axis=0))

    total = _embedding_sum(body, site, rows, None)
    normalized = body.op(
        "LayerNormalization",
        total,
        dequantized("gamma", quantized["gamma"]),
        dequantized("beta", quantized["beta"]),
        axis=-1,
        epsilon=site.float("epsilon", 1e-12),
    )
    if site.has(7):
        ones = body.op("Equal", body.op("Cast", "mask", to=onnx.TensorProto.INT64), body.const(1))
        mask_index = _row_counts(body, ones)
    else:
        mask_index = body.op(
            "ConstantOfShape",
            body.dim("input_ids", 0),
            value=onnx.numpy_helper.from_array(np.zeros(1, np.int32)),
        )
    return body.function(site.op_type, [normalized, mask_index])


def _embedding_sum(
    body: _Body, site: _Site, rows: Callable[[str, str], str], positions: str | None
) -> str:
    """word[input_ids] + position[positions, or 0..S-1] (+ segment[segment_ids]), in f32, each
    table's rows read by `rows(table, int64 indices)`."""
    ids = body.op("Cast", "input_ids", to=onnx.TensorProto.INT64)
    if positions is None:
        steps = body.op("Range", body.const(0), body.scalar_dim(ids, 1), body.const(1))
        positions = body.op("Unsqueeze", steps, body.const([0]))
    total = body.op("Add", rows("word_embedding", ids), rows("position_embedding", positions))
    if site.has(1) != site.has(4):
        raise ContribFunctionError("needs both segment_ids and segment_embedding, or neither")
    if site.has(1):
        segments = body.op("Cast", "segment_ids", to=onnx.TensorProto.INT64)
        total = body.op("Add", total, rows("segment_embedding", segments))
    return total


def _row_counts(body: _Body, flags: str) -> str:
    """The count of true `flags` [B, S] per row, as int32 [B]."""
    return body.op(
        "ReduceSum",
        body.op("Cast", flags, to=onnx.TensorProto.INT32),
        body.const([1]),
        keepdims=0,
    )


def _masked_attention(
    body: _Body,
    site: _Site,
    q: str,
    k: str,
    v: str,
    head: int,
    past_length: str,
    mask: tuple[int, str],
    bias: str | None,
) -> str:
    """softmax(Q K^T * scale + masks (+ bias)) V for Q [B, N, S, H], K / V [B, N, T, H]: the
    input at `mask` (position, name) masks keys by end positions (1-D) or 0/1 values (2-D
    [B, T], 3-D [B, S, T]) and `unidirectional` masks keys after each query (past included),
    each by adding mask_filter_value, as onnxruntime's CPU kernels do."""
    scale = site.float("scale", 0.0) or 1.0 / float(np.sqrt(head))
    scores = body.op(
        "Mul",
        body.op("MatMul", q, body.op("Transpose", k, perm=[0, 1, 3, 2])),
        body.const(scale, np.float32),
    )
    filter_value = body.const(site.float("mask_filter_value", -10000.0), np.float32)
    zero = body.const(0.0, np.float32)
    keys = body.op("Range", body.const(0), body.scalar_dim(k, 2), body.const(1))  # [T]
    position, what = mask
    if site.has(position):
        mask_shape = site.shape(position, what)
        if len(mask_shape) == 1:
            if mask_shape[0] is not None and site.shape(0, "input #0")[0] not in (
                None,
                mask_shape[0],
            ):
                raise ContribFunctionError("supports a 1-D mask of end positions ([batch]) only")
            ends = body.op(
                "Unsqueeze",
                body.op("Cast", what, to=onnx.TensorProto.INT64),
                body.const([1, 2, 3]),
            )
            masked = body.op("Not", body.op("Less", keys, ends))  # [B, 1, 1, T]
        elif len(mask_shape) in (2, 3):
            raw = body.op("Equal", body.op("Cast", what, to=onnx.TensorProto.INT64), body.const(0))
            masked = body.op("Unsqueeze", raw, body.const([1, 2] if len(mask_shape) == 2 else [1]))
        else:
            raise ContribFunctionError(
                f"supports a 1-D, 2-D or 3-D {what}, got rank {len(mask_shape)}"
            )
        scores = body.op("Add", scores, body.op("Where", masked, filter_value, zero))
    if bias is not None:
        scores = body.op("Add", scores, bias)
    if site.int("unidirectional", 0):
        queries = body.op(
            "Add",
            body.op("Range", body.const(0), body.scalar_dim(q, 2), body.const(1)),
            past_length,
        )
        future = body.op("Greater", keys, body.op("Unsqueeze", queries, body.const([1])))  # [S, T]
        scores = body.op("Add", scores, body.op("Where", future, filter_value, zero))
    return body.op("MatMul", body.op("Softmax", scores, axis=-1), v)


def _attention(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.Attention (BERT / GPT-2 self-attention with the QKV projection inside):
    QKV = input @ weights + bias, split by qkv_hidden_sizes; scores scaled (1/sqrt(head) by
    default), plus mask_filter_value where mask_index masks a key (1-D end positions, or a
    2-D / 3-D 0-1 mask) and, when unidirectional, where a key lies after the query; past
    [2, B, N, P, H] joined in front of K and V, present = the joined K and V."""
    scalar = _float_input(site, 0, "input")
    for position, what in ((5, "attention_bias"), (6, "past_sequence_length")):
        if site.has(position):
            raise ContribFunctionError(f"does not implement {what}")
    body = _Body(
        ["input", "weights", "bias", "mask_index", "past", "attention_bias", "past_sequence_length"]
    )
    x = body.f32("input", scalar)
    projected = body.op("MatMul", x, body.f32("weights", site.type(1, "weights").element_type))
    if site.has(2):
        projected = body.op("Add", projected, body.f32("bias", site.type(2, "bias").element_type))
    return _self_attention(body, site, projected, scalar, past=4, mask=3)


def _quantized_attention(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.QAttention (onnxruntime's quantizer on a fused BERT's Attention): the QKV
    projection of 8-bit input and weights as the CPU kernel computes it, the exact integer
    products (zero points subtracted; the weights' per tensor or per column) times
    input_scale * weight_scale plus the bias, then Attention's scores, masks and past."""
    for position, what in ((0, "input"), (1, "weight")):
        element = site.type(position, what).element_type
        if element not in (ScalarType.U8, ScalarType.I8):
            raise ContribFunctionError(f"needs an 8-bit integer {what}, got {element.spelling}")
    scalar = _float_input(site, 2, "bias")
    body = _Body(
        [
            "input",
            "weight",
            "bias",
            "input_scale",
            "weight_scale",
            "mask_index",
            "input_zero_point",
            "weight_zero_point",
            "past",
        ]
    )
    projected = _integer_product(
        body,
        ("input", "weight"),
        ("input_zero_point" if site.has(6) else "", "weight_zero_point" if site.has(7) else ""),
        body.op("Mul", _f32_input(body, site, 3), _f32_input(body, site, 4)),
        _f32_input(body, site, 2),
    )
    return _self_attention(body, site, projected, scalar, past=8, mask=5)


def _f32_input(body: _Body, site: _Site, position: int) -> str:
    """Body input `position` in f32 (the float inputs of the quantized ops: scales, a bias)."""
    name = body.inputs[position]
    return body.f32(name, _float_input(site, position, name))


def _integer_product(
    body: _Body,
    operands: tuple[str, str],
    zero_points: tuple[str, str],
    scale: str,
    bias: str | None,
) -> str:
    """A @ B of 8-bit operands as onnxruntime's quantized products compute it: the exact
    integer sums (`MatMulInteger`, zero points subtracted, B's per tensor or per column; "" for
    an absent one) times `scale` (a_scale * b_scale), plus `bias`, in f32."""
    given = list(zero_points)
    while given and not given[-1]:
        given.pop()
    products = body.op("MatMulInteger", *operands, *given)
    result = body.op("Mul", body.op("Cast", products, to=onnx.TensorProto.FLOAT), scale)
    return result if bias is None else body.op("Add", result, bias)


def _dynamic_quantize_matmul(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.DynamicQuantizeMatMul (onnxruntime's optimizer fuses DynamicQuantizeLinear
    + MatMulInteger + scaling into it): A quantized to uint8 over its whole range (ONNX's
    DynamicQuantizeLinear), then the integer product with B, scaled, plus the bias."""
    _float_input(site, 0, "A")
    body = _Body(["A", "B", "b_scale", "b_zero_point", "bias"])
    quantized, a_scale, a_zero = body.op_outputs("DynamicQuantizeLinear", "A", outputs=3)
    product = _integer_product(
        body,
        (quantized, "B"),
        (a_zero, "b_zero_point" if site.has(3) else ""),
        body.op("Mul", a_scale, _f32_input(body, site, 2)),
        _f32_input(body, site, 4) if site.has(4) else None,
    )
    return body.function(site.op_type, [product])


def _matmul_integer_to_float(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.MatMulIntegerToFloat (onnxruntime's optimizer fuses MatMulInteger +
    scaling into it): the integer product of 8-bit A and B, times a_scale * b_scale, plus the
    bias."""
    scalar = _float_input(site, 2, "a_scale")
    body = _Body(["A", "B", "a_scale", "b_scale", "a_zero_point", "b_zero_point", "bias"])
    product = _integer_product(
        body,
        ("A", "B"),
        ("a_zero_point" if site.has(4) else "", "b_zero_point" if site.has(5) else ""),
        body.op("Mul", _f32_input(body, site, 2), _f32_input(body, site, 3)),
        _f32_input(body, site, 6) if site.has(6) else None,
    )
    return body.function(site.op_type, [body.back(product, scalar)])


def _self_attention(
    body: _Body, site: _Site, projected: str, scalar: ScalarType, past: int, mask: int
) -> onnx.FunctionProto:
    """Attention and QAttention from the QKV projection on: `projected` [B, S, 3 * hidden] in
    f32, `past` and `mask` the positions of those inputs."""
    heads = site.int("num_heads", 0)
    if heads <= 0:
        raise ContribFunctionError(f"needs a positive num_heads, got {heads}")
    for name in ("do_rotary", "past_present_share_buffer"):
        if site.int(name, 0):
            raise ContribFunctionError(f"supports {name}=0 only")
    width = site.static(1, body.inputs[1], 1)  # Attention's weights, QAttention's weight
    given = cast(Sequence[int], site.attributes.get("qkv_hidden_sizes") or (width // 3,) * 3)
    sizes = tuple(int(size) for size in given)
    if (
        len(sizes) != 3
        or sum(sizes) != width
        or sizes[0] != sizes[1]
        or any(size % heads for size in sizes)
    ):
        raise ContribFunctionError(
            f"qkv_hidden_sizes {list(sizes)} do not split {width} columns over {heads} heads"
        )
    head, value_head = sizes[0] // heads, sizes[2] // heads
    q = _heads(body, body.slice(projected, 0, sizes[0], 2), heads, head)
    k = _heads(body, body.slice(projected, sizes[0], 2 * sizes[0], 2), heads, head)
    v = _heads(body, body.slice(projected, 2 * sizes[0], width, 2), heads, value_head)
    if site.has(past):
        joined = body.f32("past", scalar)
        past_k = body.op("Squeeze", body.slice(joined, 0, 1, 0), body.const([0]))
        past_v = body.op("Squeeze", body.slice(joined, 1, 2, 0), body.const([0]))
        past_length = body.scalar_dim(joined, 3)
        k, v = body.op("Concat", past_k, k, axis=2), body.op("Concat", past_v, v, axis=2)
    else:
        past_length = body.const(0)
    context = _masked_attention(body, site, q, k, v, head, past_length, (mask, "mask_index"), None)
    output = body.op(
        "Reshape", body.op("Transpose", context, perm=[0, 2, 1, 3]), body.const([0, 0, sizes[2]])
    )
    present = None
    if site.has(past) or (len(site.outputs) > 1 and site.outputs[1]):
        if head != value_head:
            raise ContribFunctionError("needs equal Q/K and V hidden sizes for a present output")
        axis = body.const([0])
        present = body.back(
            body.op("Concat", body.op("Unsqueeze", k, axis), body.op("Unsqueeze", v, axis), axis=0),
            scalar,
        )
    return body.function(site.op_type, [body.back(output, scalar), present])


def _multi_head_attention(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.MultiHeadAttention with separate 3-D query [B, S, D], key and value
    [B, L, D] (bias [3D] added to them), key_padding_mask and attention_bias as
    `_masked_attention` reads them, past_key / past_value [B, N, P, H] joined in front;
    present_key / present_value the joined K and V."""
    scalar = _float_input(site, 0, "query")
    heads = site.int("num_heads", 0)
    if heads <= 0:
        raise ContribFunctionError(f"needs a positive num_heads, got {heads}")
    for position, what in ((8, "past_sequence_length"), (9, "cache_indirection")):
        if site.has(position):
            raise ContribFunctionError(f"does not implement {what}")
    if not (site.has(1) and site.has(2)) or len(site.shape(1, "key")) != 3:
        raise ContribFunctionError(
            "supports separate 3-D key and value only (no packed QKV/KV, no BNSH key)"
        )
    if site.has(6) != site.has(7):
        raise ContribFunctionError("needs both past_key and past_value, or neither")
    width, value_width = site.static(0, "query", 2), site.static(2, "value", 2)
    if width % heads or value_width % heads:
        raise ContribFunctionError(
            f"hidden sizes {width}, {value_width} are not multiples of num_heads {heads}"
        )
    head, value_head = width // heads, value_width // heads
    body = _Body(
        [
            "query",
            "key",
            "value",
            "bias",
            "key_padding_mask",
            "attention_bias",
            "past_key",
            "past_value",
            "past_sequence_length",
            "cache_indirection",
        ]
    )
    q, k, v = (body.f32(name, scalar) for name in ("query", "key", "value"))
    if site.has(3):
        bias = body.f32("bias", site.type(3, "bias").element_type)
        q = body.op("Add", q, body.slice(bias, 0, width, 0))
        k = body.op("Add", k, body.slice(bias, width, 2 * width, 0))
        v = body.op("Add", v, body.slice(bias, 2 * width, 2 * width + value_width, 0))
    q, k, v = (
        _heads(body, q, heads, head),
        _heads(body, k, heads, head),
        _heads(body, v, heads, value_head),
    )
    if site.has(6):
        past_length = body.scalar_dim("past_key", 2)
        k = body.op("Concat", body.f32("past_key", scalar), k, axis=2)
        v = body.op("Concat", body.f32("past_value", scalar), v, axis=2)
    else:
        past_length = body.const(0)
    attention_bias = (
        body.f32("attention_bias", site.type(5, "attention_bias").element_type)
        if site.has(5)
        else None
    )
    context = _masked_attention(
        body, site, q, k, v, head, past_length, (4, "key_padding_mask"), attention_bias
    )
    output = body.op(
        "Reshape", body.op("Transpose", context, perm=[0, 2, 1, 3]), body.const([0, 0, value_width])
    )
    return body.function(
        site.op_type, [body.back(output, scalar), body.back(k, scalar), body.back(v, scalar)]
    )


# -- activations ------------------------------------------------------------------------------------


def _gelu_of(body: _Body, x: str, approximate: bool) -> str:
    return body.op("Gelu", x, approximate="tanh" if approximate else "none")


def _unary(
    site: _Site, build: Callable[[_Body, str], str], names: Sequence[str], bias: int | None
) -> onnx.FunctionProto:
    scalar = _float_input(site, 0, names[0])
    body = _Body(list(names))
    x = body.f32(names[0], scalar)
    if bias is not None and site.has(bias):
        x = body.op("Add", x, body.f32(names[bias], site.type(bias, names[bias]).element_type))
    return body.function(site.op_type, [body.back(build(body, x), scalar)])


def _fast_gelu(site: _Site) -> onnx.FunctionProto:
    """X (+ bias) through the tanh approximation of Gelu."""
    return _unary(site, lambda body, x: _gelu_of(body, x, True), ("X", "bias"), 1)


def _bias_gelu(site: _Site) -> onnx.FunctionProto:
    """A + B through the exact (erf) Gelu."""
    return _unary(site, lambda body, x: _gelu_of(body, x, False), ("A", "B"), 1)


def _gelu(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.Gelu: the exact (erf) Gelu."""
    return _unary(site, lambda body, x: _gelu_of(body, x, False), ("X",), None)


def _quick_gelu(site: _Site) -> onnx.FunctionProto:
    """x * sigmoid(alpha * x), alpha 1.702 by default."""
    alpha = site.float("alpha", 1.702)

    def build(body: _Body, x: str) -> str:
        return body.op(
            "Mul", x, body.op("Sigmoid", body.op("Mul", x, body.const(alpha, np.float32)))
        )

    return _unary(site, build, ("X",), None)


def _bias_add(site: _Site) -> onnx.FunctionProto:
    """X + bias + skip."""
    scalar = _float_input(site, 0, "X")
    body = _Body(["X", "bias", "skip"])
    total = body.op(
        "Add",
        body.op("Add", body.f32("X", scalar), body.f32("bias", scalar)),
        body.f32("skip", scalar),
    )
    return body.function(site.op_type, [body.back(total, scalar)])


def _quantization(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.QuantizeLinear / DequantizeLinear: onnxruntime's quantizer writes them for
    the types ONNX's own ops lacked before opset 21 (int16, uint16, int4, uint4), and
    onnxruntime runs them with the kernels of ONNX's ops. So the body is ONNX's op at opset 21
    (which has those types): same inputs, same `axis` (1 when absent, as the kernels default),
    per-tensor or per-axis (the contrib ops have no block_size)."""
    names = ["x", "y_scale" if site.op_type == "QuantizeLinear" else "x_scale"]
    names.append(names[1].replace("scale", "zero_point"))
    body = _Body(names)
    present = names if site.has(2) else names[:2]
    axis = site.int("axis", 1)
    return body.function(site.op_type, [body.op(site.op_type, *present, axis=axis)])


def _fused_matmul(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.FusedMatMul (onnxruntime's graph optimizer folds a Transpose or a scaling
    into a MatMul): alpha * op(A) @ op(B), op transposing the last two dims where transA /
    transB say; transBatchA / transBatchB are refused."""
    for name in ("transBatchA", "transBatchB"):
        if site.int(name, 0):
            raise ContribFunctionError(f"supports {name}=0 only")
    body = _Body(["A", "B"])
    operands = []
    for position, (name, flag) in enumerate((("A", "transA"), ("B", "transB"))):
        if not site.int(flag, 0):
            operands.append(name)
            continue
        rank = len(site.shape(position, name))
        if rank < 2:
            raise ContribFunctionError(f"needs {name} of rank 2 or more to transpose it")
        perm = [*range(rank - 2), rank - 1, rank - 2]
        operands.append(body.op("Transpose", name, perm=perm))
    product = body.op("MatMul", *operands)
    alpha = site.float("alpha", 1.0)
    if alpha != 1.0:
        dtype = _numpy_dtype(_float_input(site, 0, "A"))
        product = body.op("Mul", product, body.const(alpha, dtype))
    return body.function(site.op_type, [product])


_CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _fused_conv(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.FusedConv (onnxruntime's graph optimizer fuses a Conv, an Add of Z and an
    activation): activation(Conv(X, W, B) + Z), the activation and its parameters as the
    attributes `activation` and `activation_params` give them."""
    scalar = _float_input(site, 0, "X")
    body = _Body(["X", "W", "B", "Z"])
    attributes = {
        name: site.attributes[name] for name in _CONV_ATTRIBUTES if name in site.attributes
    }
    result = body.op("Conv", *(["X", "W", "B"] if site.has(2) else ["X", "W"]), **attributes)
    if site.has(3):
        result = body.op("Add", result, "Z")
    params = cast(Sequence[float], site.attributes.get("activation_params") or ())
    return body.function(site.op_type, [_activation(body, site, result, scalar, params)])


def _fused_gemm(site: _Site) -> onnx.FunctionProto:
    """com.microsoft.FusedGemm (onnxruntime's graph optimizer fuses a Gemm and the activation
    after it): activation(Gemm(A, B, C)), LeakyRelu's alpha and HardSigmoid's alpha and beta
    from `activation_alpha` / `activation_beta`."""
    scalar = _float_input(site, 0, "A")
    body = _Body(["A", "B", "C"])
    attributes = {
        name: site.attributes[name]
        for name in ("alpha", "beta", "transA", "transB")
        if name in site.attributes
    }
    result = body.op("Gemm", *(["A", "B", "C"] if site.has(2) else ["A", "B"]), **attributes)
    kind = _activation_kind(site)
    names = {
        "LeakyRelu": ("activation_alpha",),
        "HardSigmoid": ("activation_alpha", "activation_beta"),
    }
    params = [site.float(name, 0.0) for name in names.get(kind, ()) if name in site.attributes]
    return body.function(site.op_type, [_activation(body, site, result, scalar, params)])


def _activation(
    body: _Body, site: _Site, x: str, scalar: ScalarType, params: Sequence[float]
) -> str:
    """The MLAS activation a fused op names in its `activation` attribute, on `x`."""
    kind = _activation_kind(site)
    if kind in ("", "Identity"):
        return x
    if kind in ("Relu", "Tanh", "Sigmoid"):
        return body.op(kind, x)
    if kind == "LeakyRelu":
        return body.op("LeakyRelu", x, alpha=float(params[0]) if params else 0.01)
    if kind == "HardSigmoid":
        alpha, beta = (float(value) for value in params) if len(params) == 2 else (0.2, 0.5)
        return body.op("HardSigmoid", x, alpha=alpha, beta=beta)
    if kind == "Clip" and len(params) == 2:
        dtype = _numpy_dtype(scalar)
        return body.op("Clip", x, body.const(params[0], dtype), body.const(params[1], dtype))
    raise ContribFunctionError(f"does not implement activation {kind!r} with {list(params)}")


def _activation_kind(site: _Site) -> str:
    kind = site.attributes.get("activation", "")
    return kind.decode() if isinstance(kind, bytes) else str(kind)


def _onnx_element(scalar: ScalarType) -> int:
    """ONNX's element type code of a Niro scalar type."""
    return type_proto_from_niro(TensorType(scalar, ())).tensor_type.elem_type


def _numpy_dtype(scalar: ScalarType) -> np.dtype:
    """The numpy dtype (ml_dtypes' for bf16 and FP8) of a constant of that scalar type."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(_onnx_element(scalar)))


_BODIES: dict[tuple[str, str], Callable[[_Site], onnx.FunctionProto]] = {
    ("", "SimplifiedLayerNormalization"): _simplified_layer_normalization,
    (_MS, "SimplifiedLayerNormalization"): _simplified_layer_normalization,
    (_MS, "SkipSimplifiedLayerNormalization"): _skip_simplified_layer_normalization,
    (_MS, "SkipLayerNormalization"): _skip_layer_normalization,
    (_MS, "MatMulNBits"): _matmul_nbits,
    (_MS, "GatherBlockQuantized"): _gather_block_quantized,
    (_MS, "RotaryEmbedding"): _rotary_embedding,
    (_MS, "GroupQueryAttention"): _group_query_attention,
    (_MS, "EmbedLayerNormalization"): _embed_layer_normalization,
    (_MS, "QEmbedLayerNormalization"): _quantized_embed_layer_normalization,
    (_MS, "Attention"): _attention,
    (_MS, "QAttention"): _quantized_attention,
    (_MS, "DynamicQuantizeMatMul"): _dynamic_quantize_matmul,
    (_MS, "MatMulIntegerToFloat"): _matmul_integer_to_float,
    (_MS, "FusedMatMul"): _fused_matmul,
    (_MS, "FusedConv"): _fused_conv,
    (_MS, "FusedGemm"): _fused_gemm,
    (_MS, "MultiHeadAttention"): _multi_head_attention,
    (_MS, "FastGelu"): _fast_gelu,
    (_MS, "BiasGelu"): _bias_gelu,
    (_MS, "Gelu"): _gelu,
    (_MS, "QuickGelu"): _quick_gelu,
    (_MS, "BiasAdd"): _bias_add,
    (_MS, "QuantizeLinear"): _quantization,
    (_MS, "DequantizeLinear"): _quantization,
}


def contrib_function_ops() -> tuple[tuple[str, str], ...]:
    """(domain, op type) of each op defined here, sorted ('' is the default domain)."""
    return tuple(sorted(_BODIES))


def contrib_function(
    domain: str,
    op_type: str,
    input_types: Sequence[TensorType | None],
    attributes: Mapping[str, object],
    outputs: Sequence[bool],
) -> onnx.FunctionProto | None:
    """The body for one call site of `domain`.`op_type` (None: not an op defined here);
    ContribFunctionError when the call site needs what the body does not implement."""
    build = _BODIES.get(("" if domain in ("", "ai.onnx") else domain, op_type))
    if build is None:
        return None
    return build(_Site(op_type, tuple(input_types), attributes, tuple(outputs)))
