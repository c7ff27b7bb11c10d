"""The MLIR builders every lowering rule uses: one vocabulary, one argument order.

- `constants`: scalar constants (integers wrap to their width), index and i64 constants,
  small dense tensors, i64 elements attributes, identity values of max/min.
- `shapes`: mixed sizes (an int, or an index value at run time) as index or i64 values or an
  i64 shape tensor, `tensor.empty`, expand, collapse, pad, slice, cast.
- `structured`: linalg `generic` with explicit maps, `fill` (init, then the value), the named
  ops, `transpose`, `pack`/`unpack` into and out of tiles; all by the generic operation
  builder (the generated classes are 2-3x slower).
- `broadcast`: element-wise ops with NumPy broadcasting (`elementwise`), dynamic dims checked
  at run time.
- `arithmetic`: element-wise add and multiply (`binary_arithmetic`), the one lowering of Niro's
  Add/Mul and ONNX's.
- `contraction`: sums of products over index labels (`contract`, einsum's view) and `matmul`,
  the one lowering of Niro's MatMul and ONNX's (named products, or in tiles: `linalg.mmt4d`).
- `checks`: run-time checks (`assert_true`, `assert_all`, `checked_cast`).
- `elements`: element types (accumulators, float conversions) and reading integer scalars.
- `blocks`: loops that stack a row per step (Scan, Loop, a recurrence's Y) walked in blocks of
  `BLOCK_STEPS` steps, and the row reads and writes they use.

Rules import the names from here (`from ..builders import fill, generic`).
"""

from .arithmetic import Arithmetic, binary_arithmetic
from .blocks import (
    BLOCK_STEPS,
    STEPS_PER_ITERATION,
    UNROLLED_BODY_OPS,
    Block,
    Stacking,
    block_loop,
    extract_row,
    first_step_reads,
    insert_row,
    insert_rows,
    run_steps,
    stack_in_blocks,
    steps_per_iteration,
)
from .broadcast import elementwise
from .checks import assert_all, assert_true, checked_cast
from .constants import (
    constant,
    dense_constant,
    i64_constant,
    i64_elements,
    identity_value,
    index_constant,
)
from .contraction import (
    VERSION_ATTRIBUTE,
    Label,
    contract,
    matmul,
    matmul_labels,
    multiply_all,
    named_matmul,
    narrow_to_result,
    rows_by_tiled_columns,
    untiled,
    untiled_filter,
)
from .elements import accumulator_type, convert, is_float, read_int_scalars, small_elements
from .shapes import (
    DYNAMIC,
    as_i64,
    as_index,
    cast_to,
    collapse_dims,
    crop,
    dim_size,
    empty,
    empty_like,
    empty_tensor,
    expand_dim,
    expand_shape,
    extract_slice,
    i64_tensor,
    index_value,
    pad,
    producer,
    ranked_result,
    reassociation,
    tensor_size,
    tensor_sizes,
    tensor_type,
)
from .structured import (
    MapSpec,
    affine_map,
    dim,
    fill,
    filled,
    generic,
    named_op,
    pack,
    transpose,
    unpack,
)

__all__ = [
    "BLOCK_STEPS",
    "STEPS_PER_ITERATION",
    "UNROLLED_BODY_OPS",
    "steps_per_iteration",
    "run_steps",
    "Stacking",
    "stack_in_blocks",
    "Block",
    "block_loop",
    "extract_row",
    "first_step_reads",
    "insert_row",
    "insert_rows",
    "ranked_result",
    "narrow_to_result",
    "rows_by_tiled_columns",
    "multiply_all",
    "named_matmul",
    "matmul_labels",
    "matmul",
    "contract",
    "Label",
    "VERSION_ATTRIBUTE",
    "DYNAMIC",
    "Arithmetic",
    "MapSpec",
    "accumulator_type",
    "affine_map",
    "assert_all",
    "assert_true",
    "checked_cast",
    "binary_arithmetic",
    "cast_to",
    "collapse_dims",
    "constant",
    "convert",
    "crop",
    "producer",
    "dense_constant",
    "dim",
    "dim_size",
    "elementwise",
    "empty",
    "empty_like",
    "empty_tensor",
    "expand_dim",
    "expand_shape",
    "extract_slice",
    "fill",
    "filled",
    "generic",
    "i64_constant",
    "i64_elements",
    "i64_tensor",
    "as_i64",
    "as_index",
    "identity_value",
    "index_constant",
    "index_value",
    "is_float",
    "named_op",
    "pack",
    "transpose",
    "unpack",
    "untiled",
    "untiled_filter",
    "pad",
    "read_int_scalars",
    "small_elements",
    "reassociation",
    "tensor_size",
    "tensor_sizes",
    "tensor_type",
]
