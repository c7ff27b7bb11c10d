"""Light stand-ins for MLIR dialect packages, searched by the bindings before their own.

When an op of a dialect is first handed to Python, the MLIR bindings import that dialect's
module to find its op classes (`<prefix>.<namespace>` for each search prefix, in order; a
missing module moves on to the next prefix). For `linalg` the bindings' own package also
imports the OpDSL op definitions, ~70 ms of niroc's start-up for classes niroc never uses
(it builds named ops from the generated classes and the C++ region builder; see `bindings.py`).
The module here registers the same generated classes without OpDSL. Every other dialect is
found under the bindings' own prefix.
"""
