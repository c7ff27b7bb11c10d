"""niro.frontends.onnx: ONNX models (`.onnx`, ONNX text `.onnxtxt`, or a ModelProto) -> Niro IR.

    module = import_model("model.onnx")            # a niro.ir.Module that niro.ir.verify accepts
    info = import_model_with_info("model.onnx")    # + `onnx_names` (symbol -> ONNX name), ...

A model the frontend refuses raises OnnxImportError, one line naming the file and the node,
value or initializer: `model.onnx: node 'conv1' (Conv): ...`.

Mapping (each rule has a golden test in tests/frontends/onnx/test_mapping.py):
- the main graph -> a Function named after the graph (sanitised; `main` if unnamed), with the
  graph's input/output names; graph inputs that are also initializers (old IR) stay inputs,
  their data kept as a Global listed in `ImportedModel.input_defaults`;
- initializers (of any graph) -> Globals with sanitised unique names, read by a GetGlobal in
  the block that first uses them (reused by later uses in that block and the regions below it);
- Constant (value, value_float(s), value_int(s)) -> Const; Add/Mul -> Add/Mul; rank-2 MatMul ->
  MatMul; Transpose -> Transpose; Gemm -> Transpose/MatMul/Mul by a Const/Add; Identity -> the
  value itself; If -> TensorExtract of the condition + If (see converters.py for when an ONNX
  op stays generic instead: batched MatMul, branches yielding different types, ...);
- model-local functions -> one Niro Function per distinct (input types, attribute values),
  called with Call. NOTE: never inlined, even when called once: one rule, and the function
  boundary is kept for diagnostics;
- everything else -> UnknownOp `onnx.<OpType>` (`<domain>.<OpType>`) written from a
  `niro.ir.ImportedOp`: attributes as generic attributes (tensors as {"dtype", "shape",
  "data"}), graph attributes as regions named by attribute (`name#i` for a list of graphs),
  absent optional inputs and outputs by position, and the opset of the node's domain;
- every op's `loc` is its node's name, or `OpType_index` (position in its graph) if unnamed.

Types come from ONNX shape inference on a copy of the model without its weights (inference.py);
weights are never copied: external data is mapped (external_data.py, which also refuses every
location outside the model's folder), inline raw_data of a `.onnx` file is split out before
parsing and viewed in the mapped file (wire.py).
"""

from ._deferred import defer_sympy

defer_sympy()  # NOTE: before anything imports onnx_ir (see _deferred.py)

from . import oplib  # noqa: E402,F401  (registers the ONNX ops' type rules with niro.ir.verify)
from .contrib_types import register_contrib_type_rules  # noqa: E402
from .converters import CONVERTERS  # noqa: E402
from .errors import OnnxImportError  # noqa: E402
from .importer import ImportedModel, import_model, import_model_with_info  # noqa: E402
from .input_shapes import InputShapeError, parse_dim_assignment, parse_input_shape  # noqa: E402
from .loading import load_onnx_text  # noqa: E402

register_contrib_type_rules()  # and those of the com.microsoft ops niroc types (contrib_types.py)

__all__ = [
    "CONVERTERS",
    "ImportedModel",
    "InputShapeError",
    "OnnxImportError",
    "import_model",
    "import_model_with_info",
    "load_onnx_text",
    "parse_dim_assignment",
    "parse_input_shape",
]
