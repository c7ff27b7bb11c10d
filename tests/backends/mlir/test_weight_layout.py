"""Weights stored transposed or in tiles (backends/mlir/weight_layout.py): those of few-row
products and large ones of any product, convolution filters in the tiles of their rows, which
Globals qualify, what the MLIR holds (the Global as (N, K), read back through a
`linalg.transpose`; the tiles read by the products as they are), and that the compiled products
match onnxruntime."""

from __future__ import annotations

import io
import subprocess
import tempfile

import numpy as np
import onnx
import pytest
from niro.backends.mlir import LoweringError, find_tool, lower_to_mlir, weight_layout
from niro.backends.mlir.weight_layout import (
    FEW_ROWS,
    LARGE_ELEMENTS,
    MIN_ELEMENTS,
    Layout,
    stored_layouts,
)
from niro.frontends.onnx import import_model
from niro.ir import Global, ScalarType, TensorType
from onnx import helper, numpy_helper

from niroc.checking import IREE_COMPILE_FLAGS, load_iree_module
from niroc.cli import main

from .mlir_harness import assert_matches_onnxruntime, compile_onnx
from .onnx_ops.dynamic_models import graph_model, random_weights

K, N = 512, 512  # MIN_ELEMENTS exactly
UNTILED = (K, K + 8)  # columns that are no whole number of tiles
SQUARE_UNTILED = (K + 8, K + 8)


def _model(
    x_shape, nodes, *, weights=("w",), shape=(K, N), dtype=np.float32, outputs=("y",)
) -> onnx.ModelProto:
    """`nodes` over input x of `x_shape` and weights of `shape` (random, fixed seed)."""
    rng = np.random.default_rng(3)
    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    initializers = [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(dtype), name)
        for name in weights
    ]
    graph = helper.make_graph(
        [helper.make_node(*node) for node in nodes],
        "weights",
        [helper.make_tensor_value_info("x", element, x_shape)],
        [helper.make_tensor_value_info(name, element, None) for name in outputs],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _layouts(model: onnx.ModelProto) -> dict[str, Layout]:
    return stored_layouts(import_model(model))


def _transposed(model: onnx.ModelProto) -> frozenset[str]:
    return frozenset(
        name for name, layout in _layouts(model).items() if layout is Layout.TRANSPOSED
    )


@pytest.mark.parametrize("x_shape", [[1, K], [FEW_ROWS, K], [1, 1, K], [2, 4, K], [K]], ids=str)
def test_weights_of_few_row_products_are_stored_transposed(x_shape):
    """Niro's rank-2 MatMul and onnx.MatMul of a stack of rows or a vector alike (a weight
    whose columns are no whole number of tiles: see below for the others)."""
    model = _model(x_shape, [("MatMul", ["x", "w"], ["y"])], shape=UNTILED)
    assert _transposed(model) == {"w"}


@pytest.mark.parametrize("rows", [["rows"], ["batch", "seq"], [1], [1, 1]], ids=str)
@pytest.mark.parametrize(
    "shape, dtype, layout",
    [
        ((K, N), np.float32, Layout.TILES),  # multiplied in tiles
        ((1024, LARGE_ELEMENTS // 1024), np.float32, Layout.TILES),
        (UNTILED, np.float32, Layout.TRANSPOSED),  # versioned: few rows padded to a static product
        ((K, N), np.float64, Layout.TRANSPOSED),
    ],
    ids=["tiles", "large", "untiled", "f64"],
)
def test_weights_of_one_or_run_time_rows_are_stored_in_tiles_or_transposed(
    rows, shape, dtype, layout
):
    """f64 products are not made in tiles (`builders.contraction`)."""
    assert weight_layout.reads_in_tiles(shape[1]) is (shape != UNTILED)
    model = _model([*rows, shape[0]], [("MatMul", ["x", "w"], ["y"])], shape=shape, dtype=dtype)
    assert _layouts(model) == {"w": layout}


def test_a_weight_read_in_tiles_and_by_few_rows_is_stored_transposed():
    """A product in tiles reads a transposed weight too (through its tiles, which iree-compile
    makes at compile time), so the other read decides."""
    model = _model(
        ["rows", K],
        [("MatMul", ["x", "w"], ["y"]), ("MatMul", ["two", "w"], ["z"])],
        outputs=("y", "z"),
    )
    model.graph.initializer.append(numpy_helper.from_array(np.ones((2, K), np.float32), "two"))
    assert _transposed(model) == {"w"}


LARGE = (1024, LARGE_ELEMENTS // 1024)


@pytest.mark.parametrize("x_shape", [[FEW_ROWS + 1, 1024], [128, 1024], [2, 64, 1024]], ids=str)
def test_large_weights_are_stored_transposed_whatever_the_rows(x_shape):
    assert _transposed(_model(x_shape, [("MatMul", ["x", "w"], ["y"])], shape=LARGE)) == {"w"}


def test_a_large_half_weight_of_many_rows_keeps_its_layout():
    """The many-row rule is measured for f32 (and taken for f64) only."""
    model = _model([128, 1024], [("MatMul", ["x", "w"], ["y"])], shape=LARGE, dtype=np.float16)
    assert _transposed(model) == frozenset()


@pytest.mark.parametrize(
    ("x_shape", "nodes", "shape"),
    [
        ([FEW_ROWS + 1, K], [("MatMul", ["x", "w"], ["y"])], (K, N)),
        ([FEW_ROWS + 1, 1023], [("MatMul", ["x", "w"], ["y"])], (1023, 1024)),
        ([2, "rows", "width"], [("MatMul", ["x", "w"], ["y"])], (K, N)),
        ([1, K], [("MatMul", ["x", "w"], ["y"])], (K, N // 2)),
        ([K, K], [("MatMul", ["w", "x"], ["y"])], (K, N)),
        ([1, N], [("MatMul", ["x", "w"], ["p"]), ("Add", ["x", "w"], ["y"])], (N, N)),
    ],
    ids=[
        "too-many-rows",
        "too-many-rows-for-a-weight-just-below-large",
        "run-time-width",
        "too-small",
        "left-operand",
        "also-read-by-Add",
    ],
)
def test_other_weights_keep_their_layout(x_shape, nodes, shape):
    outputs = [node[2][0] for node in nodes]
    assert _transposed(_model(x_shape, nodes, shape=shape, outputs=outputs)) == frozenset()


def test_the_global_holds_the_transpose_read_back_through_a_linalg_transpose():
    text = lower_to_mlir(import_model(_model([2, K], [("MatMul", ["x", "w"], ["y"])]))).to_text()
    assert f"ml_program.global private @w(dense_resource<w> : tensor<{N}x{K}xf32>)" in text
    assert f"linalg.transpose ins(%w : tensor<{N}x{K}xf32>)" in text


@pytest.mark.parametrize(
    "x_shape",
    [[1, K + 8], [3, K + 8], [1, 2, K + 8], [K + 8]],
    ids=["1-row", "3-rows", "1x2-rows", "vector"],
)
def test_products_by_a_transposed_weight_match_onnxruntime(tmp_path, x_shape):
    """Two products share the weight; its data are the model's, transposed in the MLIR."""
    model = _model(
        x_shape,
        [("MatMul", ["x", "w"], ["p"]), ("Relu", ["p"], ["r"]), ("MatMul", ["r", "w"], ["y"])],
        shape=SQUARE_UNTILED,
    )
    assert _transposed(model) == {"w"}
    module = compile_onnx(model, tmp_path, "weights")
    x = np.random.default_rng(5).standard_normal(x_shape).astype(np.float32)
    assert_matches_onnxruntime(module, model, [{"x": x}], function="weights", rtol=1e-5, atol=1e-5)


def test_many_rows_by_a_large_transposed_weight_match_onnxruntime(tmp_path):
    model = _model(
        [2, 24, 1024], [("MatMul", ["x", "w"], ["p"]), ("Relu", ["p"], ["y"])], shape=LARGE
    )
    assert _transposed(model) == {"w"}
    module = compile_onnx(model, tmp_path, "weights")
    x = np.random.default_rng(6).standard_normal((2, 24, 1024)).astype(np.float32)
    assert_matches_onnxruntime(module, model, [{"x": x}], function="weights", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "rows, how",
    [(2, "transposed"), (1, "in tiles"), (None, "in tiles")],
    ids=["transposed", "tiles", "filter_tiles"],
)
def test_a_temporary_directory_that_fails_is_named_in_the_error(
    monkeypatch, tmp_path, capsys, rows, how
):
    """The stored copy (transposed, in tiles, a filter in the tiles of its rows) is made in
    the temporary directory: when that fails, the error names the global, the layout, the
    directory and why, as a LoweringError (one line from the CLI)."""
    missing = tmp_path / "gone"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    if rows is None:
        model = _convs([("y", "x", {})])
    else:
        model = _model([rows, K], [("MatMul", ["x", "w"], ["y"])])
    with pytest.raises(LoweringError) as caught:
        lower_to_mlir(import_model(model))
    message = str(caught.value)
    assert "@w" in message and str(missing) in message and "No such file" in message
    assert f"is stored {how}" in message
    # the CLI: exit 1, one line naming the model and the global, no traceback, no output file
    path, output = tmp_path / "model.onnx", tmp_path / "model.mlir"
    onnx.save(model, path)
    with pytest.raises(SystemExit) as exited:
        main([str(path), "-o", str(output)])
    error = capsys.readouterr().err
    assert exited.value.code == 1, error
    assert error.startswith(f"error: {path}: ") and "@w" in error and str(missing) in error
    assert "Traceback" not in error and len(error.strip().splitlines()) == 1, error
    assert not output.exists()


@pytest.mark.parametrize("chunk", [1, 1000, 4096, 1 << 20], ids=lambda chunk: f"chunk{chunk}")
@pytest.mark.parametrize(
    "scalar, dtype", [(ScalarType.F32, np.float32), (ScalarType.F16, np.float16)]
)
def test_a_transposed_copy_is_the_transpose_whatever_its_bands(monkeypatch, chunk, scalar, dtype):
    """stored_global writes the result a band of rows at a time, gathered a tile of source
    rows at a time: bands and tiles that do not divide the matrix (chunk 1000 bytes: 3 source
    rows and 6 result rows of a 37 x 83 f32 matrix), one row each (chunk 1), or the whole."""
    monkeypatch.setattr(weight_layout, "_TRANSPOSE_CHUNK", chunk)
    source = np.random.default_rng(5).standard_normal((37, 83)).astype(dtype)
    global_ = Global("w", TensorType(scalar, (37, 83)), memoryview(source.tobytes()))
    transposed = weight_layout.stored_global(global_, Layout.TRANSPOSED)
    assert transposed.type == TensorType(scalar, (83, 37))
    result = np.frombuffer(transposed.initializer, dtype=dtype).reshape(83, 37)
    np.testing.assert_array_equal(result, source.T)


@pytest.mark.parametrize("chunk", [1, 1000, 4096, 1 << 20], ids=lambda chunk: f"chunk{chunk}")
def test_a_copy_in_tiles_is_the_tiles_whatever_its_bands(monkeypatch, chunk):
    """In tiles (N / 16, K, 16, 1): each band of 16 columns, row after row; bands of whole
    tiles (chunk 1000 bytes: 3 source rows, one tile of columns at a time; chunk 1: one)."""
    monkeypatch.setattr(weight_layout, "_TRANSPOSE_CHUNK", chunk)
    source = np.random.default_rng(6).standard_normal((37, 80)).astype(np.float32)
    global_ = Global("w", TensorType(ScalarType.F32, (37, 80)), memoryview(source.tobytes()))
    tiled = weight_layout.stored_global(global_, Layout.TILES)
    assert tiled.type == TensorType(ScalarType.F32, (5, 37, 16, 1))
    result = np.frombuffer(tiled.initializer, dtype=np.float32).reshape(5, 37, 16, 1)
    np.testing.assert_array_equal(result, source.reshape(37, 5, 16, 1).transpose(1, 0, 2, 3))


def test_min_elements_is_the_smallest_weight_taken():
    small = _model([1, K], [("MatMul", ["x", "w"], ["y"])], shape=(K, MIN_ELEMENTS // K - 1))
    assert _transposed(small) == frozenset()


def _assert_archive_matches_onnxruntime(tmp_path, model, stored, function, x, tolerance):
    """`niroc --params` writes the model's weight w into the archive as `stored` (its MLIR
    type), and the module iree-compile makes runs `function` on `x` as onnxruntime does."""
    import onnxruntime

    from ...cli.niroc_runner import run_niroc

    onnx.save(model, tmp_path / "model.onnx")
    completed = run_niroc("model.onnx", "--params", "model.irpa", "-o", "model.mlir", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    text = (tmp_path / "model.mlir").read_text()
    assert f'@w(#stream.parameter.named<"model"::"w"> : {stored})' in text
    vmfb = tmp_path / "model.vmfb"
    compiled = subprocess.run(
        [
            find_tool("iree-compile"),
            *IREE_COMPILE_FLAGS,
            str(tmp_path / "model.mlir"),
            "-o",
            str(vmfb),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    got = load_iree_module(vmfb, tmp_path / "model.irpa")[function](x).to_host()
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize(
    "rows, stored",
    [(2, f"tensor<{N}x{K}xf32>"), (1, f"tensor<{N // 16}x{K}x16x1xf32>")],
    ids=["transposed", "tiles"],
)
def test_a_stored_weight_in_a_parameter_archive_matches_onnxruntime(tmp_path, rows, stored):
    """`niroc --params`: the archive holds the data as stored (transposed, or in tiles) under
    the weight's name."""
    model = _model([rows, K], [("MatMul", ["x", "w"], ["y"])])
    x = np.random.default_rng(7).standard_normal((rows, K)).astype(np.float32)
    _assert_archive_matches_onnxruntime(tmp_path, model, stored, "weights", x, 1e-5)


@pytest.fixture(scope="module", params=[(K, N), UNTILED], ids=["tiles", "untiled"])
def versioned(request, tmp_path_factory):
    model = _model(
        ["batch", "seq", K],
        [("MatMul", ["x", "w"], ["p"]), ("Relu", ["p"], ["y"])],
        shape=request.param,
    )
    return model, compile_onnx(model, tmp_path_factory.mktemp("versioned"), "weights")


@pytest.mark.parametrize(
    "x_shape", [(1, 1, K), (1, 3, K), (2, 4, K), (3, 3, K), (2, 16, K)], ids=str
)
def test_a_product_of_run_time_rows_matches_onnxruntime_in_both_versions(versioned, x_shape):
    """One compiled module: in tiles, one row takes the static product of one row, more the
    product in tiles of 8 rows (3, 9 and 32 rows padded); untiled, at most FEW_ROWS rows take
    the padded static product by the transposed weight, more the dynamic one."""
    model, module = versioned
    x = np.random.default_rng(sum(x_shape)).standard_normal(x_shape).astype(np.float32)
    assert_matches_onnxruntime(module, model, [{"x": x}], function="weights", rtol=1e-5, atol=1e-5)


def test_a_product_of_run_time_rows_by_untiled_columns_is_padded_in_the_mlir():
    model = _model(["rows", K], [("MatMul", ["x", "w"], ["y"])], shape=UNTILED)
    text = lower_to_mlir(import_model(model)).to_text()
    assert "scf.if" in text and "tensor.pad" in text
    assert f"tensor<{FEW_ROWS}x{K}xf32>" in text
    assert "mmt4d" not in text


def test_a_product_of_run_time_rows_is_in_tiles_in_the_mlir():
    """The weight is written in tiles of 16 columns ([2N / 16, K, 16, 1]) and the products read
    them as they are (no transpose, no copy left in the MLIR); one row is a tile of one row
    ([1, K, 1, 1]), more rows are packed in tiles of 8 (zero rows padding them) and unpacked
    after."""
    model = _model(["rows", K], [("MatMul", ["x", "w"], ["y"])], shape=(K, 2 * N))
    text = lower_to_mlir(import_model(model)).to_text(elide_weights=True)
    tiles = f"tensor<{2 * N // 16}x{K}x16x1xf32>"
    assert f"ml_program.global private @w(dense_resource<w> : {tiles})" in text
    assert "linalg.transpose" not in text
    one_row = text.index(f"linalg.mmt4d ins(%expanded, %w : tensor<1x{K}x1x1xf32>, {tiles})")
    packed = text.index(
        "linalg.pack %arg0 padding_value(%cst : f32) inner_dims_pos = [0, 1] inner_tiles = [8, 1]"
    )
    rows = text.index(f"linalg.mmt4d ins(%pack, %w : tensor<?x{K}x8x1xf32>, {tiles})")
    unpacked = text.index("linalg.unpack")
    assert one_row < text.index("} else {") < packed < rows < unpacked


@pytest.mark.parametrize("x_shape", [[1, K], [1, 1, K]], ids=str)
def test_one_row_in_tiles_matches_onnxruntime(tmp_path, x_shape):
    """A static row by a weight of whole tiles: one product in tiles of one row, no versions;
    the weight is written in tiles."""
    model = _model(
        x_shape, [("MatMul", ["x", "w"], ["p"]), ("Relu", ["p"], ["y"])], shape=(K, 2 * N)
    )
    text = lower_to_mlir(import_model(model)).to_text(elide_weights=True)
    assert f"linalg.mmt4d ins(%expanded, %w : tensor<1x{K}x1x1xf32>" in text
    assert "scf.if" not in text and _layouts(model) == {"w": Layout.TILES}
    module = compile_onnx(model, tmp_path, "weights")
    x = np.random.default_rng(8).standard_normal(x_shape).astype(np.float32)
    assert_matches_onnxruntime(module, model, [{"x": x}], function="weights", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape", [["rows", "k"], [1, "k"]], ids=str)
def test_rows_of_a_run_time_width_are_not_made_in_tiles(tmp_path, x_shape):
    """Tiles need the reduced dim static: rows whose width is a run-time size multiply the
    weight as it is stored (transposed for one row, the model's layout for run-time rows)."""
    model = _model(x_shape, [("MatMul", ["x", "w"], ["y"])])
    assert Layout.TILES not in _layouts(model).values()
    assert "mmt4d" not in lower_to_mlir(import_model(model)).to_text(elide_weights=True)
    module = compile_onnx(model, tmp_path, "weights")
    x = np.random.default_rng(9).standard_normal((1, K)).astype(np.float32)
    assert_matches_onnxruntime(module, model, [{"x": x}], function="weights", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 9])
def test_a_product_by_a_computed_matrix_is_versioned_too(tmp_path, rows):
    """The static matrix need not be a Global (an int4 MatMulNBits dequantizes its weights at
    run time): a product of run-time rows by W * 2 is versioned by its rows, not made in tiles
    (IREE would make the tiles of a computed matrix at run time too); the weight keeps its
    layout (an element-wise op reads it)."""
    model = _model(
        ["rows", K],
        [("Mul", ["w", "two"], ["doubled"]), ("MatMul", ["x", "doubled"], ["y"])],
        weights=("w",),
    )
    model.graph.initializer.append(numpy_helper.from_array(np.array(2, np.float32), "two"))
    assert _transposed(model) == frozenset()
    text = lower_to_mlir(import_model(model)).to_text()
    assert "scf.if" in text and "tensor.pad" in text and "mmt4d" not in text
    module = compile_onnx(model, tmp_path, "weights")
    x = np.random.default_rng(rows).standard_normal((rows, K)).astype(np.float32)
    assert_matches_onnxruntime(module, model, [{"x": x}], function="weights", rtol=1e-5, atol=1e-5)


def test_a_bf16_weight_keeps_its_stored_form(tmp_path):
    """A BF16 matrix is stored as i16 words and read back by a bitcast (sub_byte.py); a Niro
    MatMul of one row by it (ONNX imports cast BF16 weights first, a Niro module need not)
    lowers, compiles and runs: x @ w with w = 1 everywhere is each row's sum."""
    import ml_dtypes
    from niro.ir import (
        Block,
        Function,
        FunctionType,
        GetGlobal,
        Global,
        MatMul,
        Module,
        Region,
        Return,
        ScalarType,
        TensorType,
        Value,
        ValueId,
        verify,
    )

    from .mlir_harness import call, compile_module, load_vmfb

    weight = TensorType(ScalarType.BF16, (K, N))
    row, out = TensorType(ScalarType.BF16, (1, K)), TensorType(ScalarType.BF16, (1, N))
    x, w, y = Value(ValueId(0), row), Value(ValueId(1), weight), Value(ValueId(2), out)
    body = Block(arguments=(x,), operations=[GetGlobal(w, "w"), MatMul(y, x, w), Return((y,))])
    ones = np.ones((K, N), ml_dtypes.bfloat16).tobytes()
    module = Module(
        globals=[Global("w", weight, ones)],
        functions=[Function("main", FunctionType((row,), (out,)), Region([body]))],
    )
    assert verify(module) == []
    assert stored_layouts(module) == {}
    vm_module = load_vmfb(compile_module(lower_to_mlir(module), tmp_path))
    x_data = np.full((1, K), 0.25, ml_dtypes.bfloat16)
    [got] = call(vm_module, "main", x_data)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), np.full((1, N), K * 0.25))


def _convs(convs, x_shape=(1, 8, 14, 14), filter_shape=(64, 8, 3, 3), before=()) -> onnx.ModelProto:
    """Convolutions `convs` ((output, input, attributes) each, pads 1) reading filter w, after
    the nodes `before`."""
    nodes = list(before) + [
        helper.make_node("Conv", [source, "w"], [name], pads=[1, 1, 1, 1], **attributes)
        for name, source, attributes in convs
    ]
    outputs = {name: onnx.TensorProto.FLOAT for name, _, _ in convs}
    return graph_model(nodes, x_shape, random_weights(7, w=filter_shape), outputs=outputs)


@pytest.mark.parametrize(
    "x_shape, filter_shape, layout",
    [
        ((1, 8, 14, 14), (64, 8, 3, 3), Layout.FILTER_TILES),
        ((1, 8, 14, 14), (128, 8, 1, 1), Layout.FILTER_TILES),
        ((2, 8, 14, 14), (64, 8, 3, 3), None),  # two images: one product, no tiles
        ((1, 8, 14, 14), (48, 8, 3, 3), None),  # fewer than TILED_FEATURES outputs
        ((1, 8, 14, 14), (72, 8, 3, 3), None),  # no whole tiles of rows: packed by IREE
        ((1, 8, 7, 7), (64, 8, 3, 3), None),  # 49 positions, 64 in tiles: no tiles
        (("n", 8, 14, 14), (64, 8, 3, 3), None),
    ],
    ids=["3x3", "1x1", "batch2", "few_outputs", "partial_tile", "few_positions", "dynamic"],
)
def test_filters_of_convolutions_in_tiles_are_stored_in_tiles(x_shape, filter_shape, layout):
    """A filter whose convolutions multiply it in tiles (`conv_tiles_pay`) is written as the
    tiles of its rows; a filter of any other convolution keeps its layout."""
    model = _convs([("y", "x", {})], x_shape, filter_shape)
    assert _layouts(model).get("w") is layout


def test_a_filter_read_by_another_convolution_too_keeps_its_layout():
    """One convolution of two images reads the filter as stored: no tiles for either."""
    twice = helper.make_node("Concat", ["x", "x"], ["x2"], axis=0)
    model = _convs([("y", "x", {}), ("z", "x2", {})], before=[twice])
    assert "w" not in _layouts(model)


def test_a_filter_in_tiles_is_read_by_its_products_as_stored(tmp_path):
    """The Global holds (M / 16, C * K..., 16, 1); the products read it without a pack, the
    unread form of the filter is erased, and the numbers match onnxruntime: a 3x3
    convolution and a strided one sharing the filter."""
    model = _convs([("y", "x", {}), ("s", "x", {"strides": [2, 1]})], (1, 8, 20, 20))
    text = io.BytesIO()
    lower_to_mlir(import_model(model)).write_text(text)
    mlir = text.getvalue().decode()
    assert "ml_program.global private @w(dense_resource<w> : tensor<4x72x16x1xf32>)" in mlir
    assert mlir.count("linalg.mmt4d ins(%w, ") == 2
    assert mlir.count("linalg.pack") == 2  # the windows' rows of each, no filter pack
    assert "linalg.transpose" not in mlir
    module = compile_onnx(model, tmp_path, "convs")
    x = np.random.default_rng(9).standard_normal((1, 8, 20, 20)).astype(np.float32)
    assert_matches_onnxruntime(module, model, [{"x": x}], function="g", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("chunk", [1, 1000, 1 << 20], ids=lambda chunk: f"chunk{chunk}")
def test_a_filter_in_tiles_is_its_row_tiles_whatever_its_bands(monkeypatch, chunk):
    """FILTER_TILES (M / 16, C * K..., 16, 1): the 16 rows of each tile side by side, a band
    of whole tiles at a time (chunk 1000 bytes: one tile; 1 MiB: all three)."""
    monkeypatch.setattr(weight_layout, "_TRANSPOSE_CHUNK", chunk)
    source = np.random.default_rng(8).standard_normal((48, 5, 3, 2)).astype(np.float32)
    global_ = Global("w", TensorType(ScalarType.F32, (48, 5, 3, 2)), memoryview(source.tobytes()))
    tiled = weight_layout.stored_global(global_, Layout.FILTER_TILES)
    assert tiled.type == TensorType(ScalarType.F32, (3, 30, 16, 1))
    result = np.frombuffer(tiled.initializer, dtype=np.float32).reshape(3, 30, 16, 1)
    np.testing.assert_array_equal(result, source.reshape(3, 16, 30, 1).transpose(0, 2, 1, 3))


def test_a_filter_in_tiles_in_a_parameter_archive_matches_onnxruntime(tmp_path):
    """`niroc --params`: the archive holds a filter in the tiles of its rows."""
    model = _convs([("y", "x", {})])
    x = np.random.default_rng(10).standard_normal((1, 8, 14, 14)).astype(np.float32)
    _assert_archive_matches_onnxruntime(tmp_path, model, "tensor<4x72x16x1xf32>", "g", x, 1e-4)
