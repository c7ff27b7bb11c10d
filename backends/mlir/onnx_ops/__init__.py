"""MLIR lowerings of ONNX operators, one module per op family; importing registers them."""

from . import (  # noqa: F401
    cast,
    col2im,
    common,  # noqa: F401
    contrib_quantized,
    conv,  # noqa: F401
    deform_conv,
    determinant,
    dropout,
    elementwise,
    elementwise_logic,
    elementwise_math,
    gather_scatter,
    grid_sample,
    if_shapes,
    linalg_ops,  # noqa: F401
    loop,
    lrn,
    mel,
    ml_ops,
    nms,
    normalization,  # noqa: F401
    optional,
    pooling,  # noqa: F401
    quantization,  # noqa: F401
    recurrent,
    recurrent_kit,
    reductions,  # noqa: F401
    resize,  # noqa: F401
    roi_align,
    scan,
    selection,  # noqa: F401
    sequence_ops,
    shape_ops,  # noqa: F401
    slice_ops,  # noqa: F401
    spectral,
    text_ops,
    training,
    tree_ensemble,
    unique,
    unpool,
)
