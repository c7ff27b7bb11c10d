"""Which weight matrices the module stores in another layout than the model's, and how: those
read as the right operand of matrix products that run faster reading them so, and in no way
that wants the model's layout.

A Global of shape (K, N) that is the right operand of matrix products of at most FEW_ROWS rows
(a decode step's token, a classifier head's batch), or of a run-time number of rows (which
`builders.contraction` then runs as a static product of FEW_ROWS rows when they are that few),
or an f32/f64 one of at least LARGE_ELEMENTS multiplying any number of static rows, is written
to MLIR as its transpose (N, K) and read back through a `linalg.transpose`, which IREE folds
into the product's operand read: the product then reads each output's K weights
contiguously, as for a Gemm with transB, instead of striding across N. An f32 weight of whole
tiles (`reads_in_tiles`) only ever multiplying one row or a run-time number of rows is
multiplied in tiles (`builders.contraction`) and written in those tiles (N / 16, K, 16, 1).
A convolution filter (M, C, K...) whose convolutions multiply it in tiles (`conv_tiles_pay`)
is written as the tiles of its rows, (M / 16, C * prod K, 16, 1). The Niro module is not
changed: its Global keeps the model's layout, and lowering rules that read the weight's data
(`constant_value`) see that layout.

NOTE: measured with IREE 3.13 (iree-compile for the host CPU, local-task, 2 cores), the product
of M static rows by a (K, N) f32 weight, as read from (K, N) and from (N, K): 1 x 2048 by
2048 x 5632: 2.51 -> 1.45 ms; 4 rows 3.69 -> 1.53 ms; 8 rows 3.89 -> 1.83 ms; 1 x 1024 by
1024 x 1024: 124 -> 74 us; 1 x 256 by 256 x 4096: 124 -> 66 us. From 16 rows on the two layouts
are within 10-30% either way, and for weights below MIN_ELEMENTS (256 x 688: 19 -> 22 us at one
row) the transposed read is slightly slower. A product of run-time rows by such a weight ran
about alike in the two layouts at 128 rows (1024 x 1024: 2.9-3.7 and 3.5 ms; 256 x 4096: 2.8-3.4
against 3.4-4.1 ms; 5632 x 2048: 103 against 33 ms), and is versioned for few rows.
A weight of at least LARGE_ELEMENTS multiplies any number of static rows faster transposed
(iree-benchmark-module medians, MatMul + Add + Relu, the same numbers): 16 x 1024 by 1024 x 1024
0.83-0.93 -> 0.35-0.41 ms; 128 x 768 by 768 x 3072 8.5-11.9 -> 3.5-4.8 ms; 64 x 3072 by 3072 x
768 7.4-8.5 -> 3.1-3.4 ms; 128 x 1024 by 1024 x 4096 16.0 -> 7.7 ms; 2048 x 1024 by 1024 x 1024
63 -> 27 ms; 128 x 512 by 512 x 2048 4.3 -> 2.4 ms. Below it the gain depends on the shape:
128 x 512 by 512 x 1024 1.47 -> 0.84 ms, but 768 x 768 1.43 -> 1.33, 1536 x 384 1.19 -> 1.33
and 256 x 1024 0.66 -> 0.91 ms, so smaller weights keep their layout unless their rows are few.
"""

from __future__ import annotations

import enum
import math
import mmap
import os
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np
from niro.ir import (
    GetGlobal,
    Global,
    MatMul,
    Module,
    Op,
    ScalarType,
    TensorType,
    Type,
    UnknownOp,
    Value,
    ValueId,
    operands_of,
    walk_ops,
)

from .literals import read_only_mappings, release_pages

__all__ = [
    "FEW_ROWS",
    "LARGE_ELEMENTS",
    "MIN_ELEMENTS",
    "TILED_FEATURES",
    "TILE_COLUMNS",
    "Layout",
    "conv_tiles_pay",
    "filter_tiles_type",
    "matrix_dims",
    "reads_in_tiles",
    "stored_global",
    "stored_layouts",
    "tiled_type",
]

FEW_ROWS = 8
"""The most rows (the product of the left operand's dims but its last) a product may have for
its weight to be stored transposed."""

MIN_ELEMENTS = 1 << 18
"""The fewest elements a weight needs to be stored transposed (512 x 512)."""

TILE_COLUMNS = 16
"""The columns of a tile in which `builders.contraction` multiplies a run-time number of rows
by a static f32 matrix (`reads_in_tiles`)."""

LARGE_ELEMENTS = 1 << 20
"""The fewest elements an f32/f64 weight needs to be stored transposed whatever the rows of its
products (1024 x 1024)."""


TILED_FEATURES = 64
"""The fewest output channels for which a convolution's product is computed in tiles
(`conv_tiles_pay`)."""


def conv_tiles_pay(
    batch: int | None, group: int, features: int, positions: Sequence[int | None]
) -> bool:
    """Whether an f32 convolution's im2col product is computed in tiles (`conv`, which says
    why): one image and one group, static output `positions`, at least `TILED_FEATURES`
    outputs, the positions padded to whole tiles of TILE_COLUMNS by at most a tenth. Decided
    here, where the filters' layouts are, since a filter so read is written in tiles."""
    if batch != 1 or group != 1 or features < TILED_FEATURES or None in positions:
        return False
    count = math.prod(size or 0 for size in positions)
    return -(-count // TILE_COLUMNS) * TILE_COLUMNS * 10 <= count * 11


class Layout(enum.Enum):
    """How a weight matrix (K, N) is written to MLIR when not as the model stores it."""

    TRANSPOSED = enum.auto()
    """(N, K), read back through a `linalg.transpose`."""
    TILES = enum.auto()
    """(N / TILE_COLUMNS, K, TILE_COLUMNS, 1): the tiles its products in tiles read
    (`builders.contraction`), read back to (K, N) through a transpose and a reshape that
    only the products' tiles undo (they read the tiles)."""
    FILTER_TILES = enum.auto()
    """A convolution filter (M, C, K...) as the tiles of its rows, (M / TILE_COLUMNS,
    C * prod K, TILE_COLUMNS, 1), read back to (M, C, K...) through a transpose and reshapes
    that only its products in tiles undo."""


def stored_layouts(module: Module) -> dict[str, Layout]:
    """The Globals not written as the model stores them, and how. 2-D float weights of at least
    MIN_ELEMENTS with a read that is faster transposed (`_read`) and no read that wants the
    model's layout (an element-wise op, a Call, a Return, a product of more rows by a smaller
    weight) are transposed; those only ever read by products in tiles are written in tiles,
    which their products then read without a copy (or a compile-time one IREE would make:
    iree-compile's const-eval of the tiles of llama_step's weights took 1.3 s of its 3.4)."""
    reads: dict[str, set[_Read]] = {}
    for function in module.functions:  # value ids are a function's own
        read_as: dict[ValueId, str] = {}  # a GetGlobal's result -> the Global's name
        for op in walk_ops(function):
            if isinstance(op, GetGlobal) and (_is_weight(op.result) or _is_filter(op.result)):
                read_as[op.result.id] = op.name
        if not read_as:
            continue  # NOTE: most functions read no large weight; the walk is ~0.1 s per 25,000 ops
        for op in walk_ops(function):
            for position, operand in enumerate(operands_of(op)):
                name = read_as.get(operand.id)
                if name is not None:
                    read = _read(op, operand) if position == 1 else _Read.AS_STORED
                    reads.setdefault(name, set()).add(read)
    layouts = {}
    for name, kinds in reads.items():
        if kinds == {_Read.IN_TILES}:
            layouts[name] = Layout.TILES
        elif kinds == {_Read.IN_FILTER_TILES}:
            layouts[name] = Layout.FILTER_TILES
        elif _Read.TRANSPOSED in kinds and _Read.AS_STORED not in kinds:
            layouts[name] = Layout.TRANSPOSED
    return layouts


def _is_weight(value: Value) -> bool:
    """A static float matrix of at least MIN_ELEMENTS that the module stores as it is: not a
    BF16 one (`sub_byte` stores those as i16 words, read back by a bitcast), nor FP8/FP4."""
    type_ = value.type
    return (
        isinstance(type_, TensorType)
        and type_.rank == 2
        and type_.is_static
        and type_.element_type.is_float
        and type_.element_type is not ScalarType.BF16
        and not (type_.element_type.is_narrow_float or type_.element_type.is_sub_byte)
        and math.prod(dim or 0 for dim in type_.shape or ()) >= MIN_ELEMENTS
    )


def _is_filter(value: Value) -> bool:
    """A static f32 convolution filter (M, C, K...) of whole tiles of rows, M at least
    TILED_FEATURES."""
    type_ = value.type
    if not (isinstance(type_, TensorType) and type_.shape is not None and len(type_.shape) >= 3):
        return False
    features = type_.shape[0] or 0
    return (
        type_.is_static
        and type_.element_type is ScalarType.F32
        and features >= TILED_FEATURES
        and features % TILE_COLUMNS == 0
    )


class _Read(enum.Enum):
    """How a read of a weight wants it stored."""

    TRANSPOSED = enum.auto()
    AS_STORED = enum.auto()
    IN_TILES = enum.auto()
    """By a product in tiles, which takes the transposed layout too."""
    IN_FILTER_TILES = enum.auto()
    """As the filter of a convolution whose product is in tiles (`conv_tiles_pay`)."""


def _read(op: Op, weight: Value) -> _Read:
    """How product `op` reads its right operand `weight`: transposed when its rows (the left
    operand's dims but its last) are at most FEW_ROWS, or a run-time number that
    `builders.contraction` versions (in the result's element type, f32 or f64, only), or any
    number of them when `weight` is an f32/f64 matrix of at least LARGE_ELEMENTS; in tiles
    (`builders.contraction`) when the rows are one (a stack of rows, not a vector) or a
    run-time number and `weight` is an f32 matrix of whole tiles (`reads_in_tiles`); as stored
    otherwise (and when `op` is no product). A filter (rank 3 or more) is read in tiles by
    an f32 `onnx.Conv` whose product is in tiles, as stored by anything else."""
    if _is_filter(weight):
        return _Read.IN_FILTER_TILES if _conv_in_tiles(op) else _Read.AS_STORED
    if isinstance(op, MatMul):
        lhs = op.lhs
    elif isinstance(op, UnknownOp) and op.name == "onnx.MatMul" and len(op.operands) == 2:
        lhs = op.operands[0]
    else:
        return _Read.AS_STORED
    type_ = lhs.type
    if not isinstance(type_, TensorType) or type_.shape is None or type_.rank == 0:
        return _Read.AS_STORED
    wide = type_.element_type in (ScalarType.F32, ScalarType.F64)
    rows = type_.shape[:-1]
    count = None if None in rows else math.prod(dim or 0 for dim in rows)
    tiled = type_.element_type is ScalarType.F32 and reads_in_tiles(matrix_dims(weight.type)[1])
    if tiled and rows and count in (None, 1) and type_.shape[-1] is not None:
        return _Read.IN_TILES
    if count is not None:
        few = count <= FEW_ROWS or (wide and _large(weight))
        return _Read.TRANSPOSED if few else _Read.AS_STORED
    return _Read.TRANSPOSED if type_.shape[-1] is not None and wide else _Read.AS_STORED


def _conv_in_tiles(op: Op) -> bool:
    """`op` is an `onnx.Conv` of f32 input and output whose filter (operand 1) its lowering
    multiplies in tiles (`conv_tiles_pay`; a filter of one input channel per group is a
    depthwise convolution's, never a product). A convolution whose gathered windows would
    pass `conv.IM2COL_LIMIT` is computed in place from the filter read back from its tiles
    (`untiled_filter`): the same numbers, the tiles undone by iree-compile."""
    if not (isinstance(op, UnknownOp) and op.name == "onnx.Conv" and len(op.operands) >= 2):
        return False
    x, w, y = op.operands[0].type, op.operands[1].type, op.results[0].type
    if not all(isinstance(type_, TensorType) and type_.shape is not None for type_ in (x, w, y)):
        return False
    assert isinstance(x, TensorType) and isinstance(w, TensorType) and isinstance(y, TensorType)
    assert x.shape is not None and w.shape is not None and y.shape is not None
    group = op.attributes.get("group", 1)
    return (
        x.element_type is ScalarType.F32
        and y.element_type is ScalarType.F32
        and (w.shape[1] or 0) > 1
        and isinstance(group, int)
        and conv_tiles_pay(x.shape[0], group, w.shape[0] or 0, y.shape[2:])
    )


def filter_tiles_type(type_: Type) -> TensorType:
    """The type of filter `type_` (M, C, K...) written in tiles (`Layout.FILTER_TILES`)."""
    assert isinstance(type_, TensorType) and type_.shape is not None
    features, *rest = type_.shape
    assert features is not None and None not in rest
    depth = math.prod(size or 0 for size in rest)
    return TensorType(type_.element_type, (features // TILE_COLUMNS, depth, TILE_COLUMNS, 1))


def tiled_type(type_: Type) -> TensorType:
    """The type of matrix `type_` (K, N) written in tiles (`Layout.TILES`)."""
    rows, columns = matrix_dims(type_)
    assert isinstance(type_, TensorType)
    return TensorType(type_.element_type, (columns // TILE_COLUMNS, rows, TILE_COLUMNS, 1))


def reads_in_tiles(columns: int) -> bool:
    """A product of one row or of a run-time number of rows by a static f32 matrix of at
    least MIN_ELEMENTS with `columns` columns is computed in tiles of TILE_COLUMNS columns
    (`builders.contraction`)."""
    return columns % TILE_COLUMNS == 0


def _large(weight: Value) -> bool:
    """`weight` is a static f32/f64 matrix of at least LARGE_ELEMENTS."""
    type_ = weight.type
    return (
        isinstance(type_, TensorType)
        and type_.shape is not None
        and type_.element_type in (ScalarType.F32, ScalarType.F64)
        and math.prod(dim or 0 for dim in type_.shape) >= LARGE_ELEMENTS
    )


def matrix_dims(type_: Type) -> tuple[int, int]:
    """The (K, N) of a weight `stored_layouts` names (a static matrix)."""
    assert isinstance(type_, TensorType) and type_.shape is not None, type_
    rows, columns = type_.shape
    assert rows is not None and columns is not None, type_
    return rows, columns


_TRANSPOSE_CHUNK = 16 << 20
"""Bytes of a transposed weight made at a time."""


def stored_global(global_: Global, layout: Layout) -> Global:
    """Matrix `global_` (one `stored_layouts` names) with its data in `layout`, (K, N) ->
    (N / T, K, T) with T columns a tile: (N, K) transposed (T = 1), or the tiles
    (N / TILE_COLUMNS, K, TILE_COLUMNS, 1), the same bytes per element, in a temporary file
    mapped read-only. A ValueError says why the temporary file failed (its directory missing or
    full).

    Why a file: the lowered module keeps every blob's buffer until it is written, and the
    writers drop the pages of read-only file mappings as they go (`literals.release_pages`),
    which they cannot do for ordinary memory. Held in memory, the transposed weights of
    `make bench`'s mlp_external (16 x 4096x4096 f32, 1 GiB, its MatMuls of one row) took
    niroc's peak resident memory from 216 MiB to 1.2 GiB. The file is made unnamed
    (`tempfile.TemporaryFile`, in the temporary directory) and lasts as long as its mapping.

    It is written a band of result rows (source columns, about _TRANSPOSE_CHUNK bytes, whole
    tiles of them) at a time, each band with one `os.pwrite`, and the band is gathered from the
    source a tile of rows (as many bytes) at a time, the source pages dropped after each
    tile. So memory stays bounded by the band and the tile. Not through a writable mapping of
    the file, nor with a write per column of a source band: a kernel that caches files in
    large folios (Linux 6.18 here) maps a whole folio on each write fault, so writing a few
    bytes into every row of the result held the whole result (mlp_huge's 8192x8192 f32
    weights: 350 MiB resident), and 2 KiB writes cost 17 s of the 27 s niroc took for
    mlp_huge's 17 such weights.

    A filter (`Layout.FILTER_TILES`) is written a band of whole tiles of its rows at a time."""
    if layout is Layout.FILTER_TILES:
        return _stored_filter(global_)
    rows, columns = matrix_dims(global_.type)
    assert isinstance(global_.type, TensorType) and not isinstance(
        global_.initializer, (bool, int, float)
    )
    element = global_.type.element_type
    width = element.buffer_size(1)
    dtype = np.dtype(f"V{width}")
    source = memoryview(global_.initializer)
    data = np.frombuffer(source, dtype=dtype).reshape(rows, columns)
    model_pages = read_only_mappings([source])
    per_tile = TILE_COLUMNS if layout is Layout.TILES else 1
    band = per_tile * max(1, _TRANSPOSE_CHUNK // (rows * width * per_tile))  # source columns
    tile = max(1, _TRANSPOSE_CHUNK // (columns * width))  # source rows read at a time

    def bands() -> Iterator[tuple[np.ndarray, int]]:
        for left in range(0, columns, band):
            wide = min(band, columns - left)
            block = np.empty((wide // per_tile, rows, per_tile), dtype)
            for top in range(0, rows, tile):
                part = data[top : top + tile, left : left + wide]
                block[:, top : top + tile] = part.reshape(
                    part.shape[0], wide // per_tile, per_tile
                ).transpose(1, 0, 2)
                release_pages(model_pages)
            yield block, left * rows * width

    how = "in tiles" if layout is Layout.TILES else "transposed"
    stored = tiled_type(global_.type) if per_tile > 1 else TensorType(element, (columns, rows))
    return Global(global_.name, stored, _written(source.nbytes, bands(), how))


def _stored_filter(global_: Global) -> Global:
    """Filter `global_` (M, C, K...) in `Layout.FILTER_TILES`: each tile of TILE_COLUMNS rows
    transposed, (M / T, C * prod K, T, 1), a band of tiles (about _TRANSPOSE_CHUNK bytes) at a
    time (see `stored_global`)."""
    stored = filter_tiles_type(global_.type)
    assert stored.shape is not None
    tiles, depth = stored.shape[0], stored.shape[1]
    assert tiles is not None and depth is not None
    width = stored.element_type.buffer_size(1)
    dtype = np.dtype(f"V{width}")
    assert not isinstance(global_.initializer, (bool, int, float))
    source = memoryview(global_.initializer)
    data = np.frombuffer(source, dtype=dtype).reshape(tiles, TILE_COLUMNS, depth)
    model_pages = read_only_mappings([source])
    band = max(1, _TRANSPOSE_CHUNK // (TILE_COLUMNS * depth * width))  # tiles at a time

    def bands() -> Iterator[tuple[np.ndarray, int]]:
        for first in range(0, tiles, band):
            block = np.ascontiguousarray(data[first : first + band].transpose(0, 2, 1))
            release_pages(model_pages)
            yield block, first * TILE_COLUMNS * depth * width

    return Global(global_.name, stored, _written(source.nbytes, bands(), "in tiles"))


def _written(size: int, blocks: Iterator[tuple[np.ndarray, int]], how: str) -> memoryview:
    """`blocks` (each an array and its byte offset) written into an unnamed temporary file of
    `size` bytes, mapped read-only (see `stored_global`); a ValueError when the file fails."""
    try:
        with tempfile.TemporaryFile() as file:
            file.truncate(size)
            for block, offset in blocks:
                _write_at(file.fileno(), block.reshape(-1).view(np.uint8).data, offset)
            mapping = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)
    except OSError as error:  # the temporary directory: missing, full...
        raise ValueError(
            f"is stored {how} (its products read it so) through a temporary file in "
            f"{tempfile.gettempdir()}, which failed: {error}"
        ) from error
    return memoryview(mapping)


def _write_at(descriptor: int, data: memoryview, offset: int) -> None:
    """All of `data` written at `offset` (`os.pwrite` may write less than it is given)."""
    while data.nbytes:
        written = os.pwrite(descriptor, data, offset)
        data, offset = data[written:], offset + written
