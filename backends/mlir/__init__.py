"""niro.backends.mlir: Niro IR lowered to upstream MLIR dialects through the MLIR Python bindings.

    lowered = lower_to_mlir(module)              # verified in-process; raises LoweringError
    lowered.write_text(stream)                   # .mlir, blobs in {-# dialect_resources #-}
    lowered.write_bytecode(stream)               # .mlirbc
    lower_to_mlir(module, parameters=ParameterPlan())   # weights as IREE parameters:
    lowered.write_parameters(stream)             #   the .irpa archive they name
    run_opt_tool(lowered, pass_pipeline="...")   # iree-opt / mlir-opt-NN, errors as ours

Decisions a user can see in the output:
- U8..U64 lower to signless i8..i64 like I8..I64 (arith/linalg want signless integers); every op
  lowered so far is sign-agnostic, so unsignedness only lives on in the Niro types. At the IREE
  ABI an unsigned tensor is passed as the signed type of the same width.
- A Function's input_names/output_names become `{niro.name = "..."}` argument/result attributes
  (`NAME_ATTRIBUTE`). Defined functions are public; declarations are private bodiless func.func.
- Add/Mul broadcast as NumPy does; a static size-1 dim is broadcast by the indexing map, a
  dynamic dim that is 1 at run time by a clamped read (each dynamic dim is checked at run time
  to be 1 or the result dim).
- Tensor data: `dense_resource` blobs named after their Global (or `<function>.const<N>`), made
  from the Niro buffers without a copy; splats, one-element and BOOL tensors as `dense<...>`.
  Scalar Globals are 0-d tensor globals read with `tensor.extract`.
- Ops carry `loc("<ONNX node name>")`; text output keeps debug locations.

Ops that ONNX defines by a function body and that no lowering implements (Attention, the
losses...) are best imported as calls of that body: `import_model(m, expand_functions=cannot_lower)`.

UnknownOps need a lowering registered with `@register_lowering("onnx.Relu")`, or
`allow_unknown=True` to keep them as generic operations.

A lowering that refuses ops (no lowering, an attribute value or a dynamic shape a rule does not
support) raises one LoweringError for all of them: the first as its message, each in its
`refusals`, the others listed in its notes.
"""

from . import onnx_ops  # noqa: E402,F401  (registers the ONNX operator lowerings)
from .bindings import BINDING, make_context
from .context import LoweringRuleContext
from .errors import MAX_LISTED_REFUSALS, LoweringError
from .lowering import NAME_ATTRIBUTE, lower_to_mlir
from .opt_tool import find_tool, run_opt_tool
from .output import LoweredModule
from .parameters import DEFAULT_PARAMETER_THRESHOLD, ParameterPlan
from .registry import (
    LoweringRule,
    cannot_lower,
    lowers,
    register_lowering,
    registered_lowering,
    registered_lowerings,
    unregister_lowering,
)

__all__ = [
    "BINDING",
    "DEFAULT_PARAMETER_THRESHOLD",
    "ParameterPlan",
    "NAME_ATTRIBUTE",
    "LoweredModule",
    "cannot_lower",
    "lowers",
    "LoweringError",
    "MAX_LISTED_REFUSALS",
    "LoweringRule",
    "LoweringRuleContext",
    "find_tool",
    "lower_to_mlir",
    "make_context",
    "register_lowering",
    "registered_lowering",
    "registered_lowerings",
    "run_opt_tool",
    "unregister_lowering",
]
