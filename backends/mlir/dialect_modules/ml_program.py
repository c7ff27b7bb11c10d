"""`ml_program`'s op classes where the bindings have them; an empty module where they do not.

NOTE: the iree-base-compiler wheel (3.13) registers the `ml_program` dialect but ships no
Python module for it. The bindings then look for one each time an `ml_program` op is handed to
Python and remember only a module they found: every `ml_program.global` and
`ml_program.global_load_const` walked cost a failed import of each search prefix (~50 us),
0.65 s of lowering a model with 6,500 weights. Found here, the ops are generic `OpView`s, as
niroc builds them (`Operation.create`, see `bindings.py`).
"""

from ..bindings import BINDING

if BINDING == "mlir":
    from mlir.dialects._ml_program_ops_gen import *  # noqa: F403
