"""Which small integer arguments of a Function every call passes from the host.

A Function argument that is a small static integer tensor (`builders.elements.small_elements`:
rank <= 1, at most SMALL_VECTOR elements) and that every Call of the function passes as
elements the host already has (a `tensor.from_elements` of shape arithmetic, a constant) is read
at the function's entry as scalars and rebuilt there by `tensor.from_elements`: the shape
arithmetic on it then stays on the host in the function too (`builders.broadcast`), as it does
in the caller. Once IREE inlines the call, each entry read is of the caller's `from_elements`
and folds away.

Why: onnxruntime-genai's Llama passes `total_sequence_length` (Shape of the attention mask, on
the host) to every layer's GroupQueryAttention body, which sizes the present KV cache by
Max(total, past length) and a Range over it. Read in the body as a device tensor, each layer
computed that Max in a dispatch and read it back: a wait for the device in the middle of every
layer.

The decision needs every call site, so it is made as the callers are lowered: a function lowered
before one of its callers (none in the modules the ONNX importer makes, whose callers come
first) reads its arguments as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from niro.ir import Call, Module, walk_ops

from .bindings import mlir_ir, tensor
from .builders.elements import element_scalars, small_element_sources

__all__ = ["HostArguments", "on_host", "read_on_host"]


@dataclass(slots=True)
class HostArguments:
    """The calls seen so far, per callee: how many, and which argument positions every one of
    them passed from the host."""

    calls: Counter[str]
    """How many Calls of each function the module holds."""
    seen: Counter[str] = field(default_factory=Counter)
    from_host: dict[str, list[bool]] = field(default_factory=dict)

    @classmethod
    def of(cls, module: Module) -> HostArguments:
        return cls(Counter(op.callee for op in walk_ops(module) if isinstance(op, Call)))

    def record(self, callee: str, on_host: Sequence[bool]) -> None:
        """A Call of `callee` lowered: `on_host[i]` says whether argument i's elements are on
        the host."""
        self.seen[callee] += 1
        known = self.from_host.get(callee)
        self.from_host[callee] = (
            list(on_host)
            if known is None
            else [before and now for before, now in zip(known, on_host, strict=True)]
        )

    def positions(self, function: str) -> list[int]:
        """The arguments of `function` that every one of its Calls passed from the host; none
        unless all its Calls were lowered already."""
        if self.calls[function] == 0 or self.seen[function] != self.calls[function]:
            return []
        return [position for position, host in enumerate(self.from_host[function]) if host]


def on_host(value: mlir_ir.Value) -> bool:
    """Whether `value` is a small integer tensor whose elements the host has (no op is made)."""
    return small_element_sources(value, on_host=True) is not None


def read_on_host(argument: mlir_ir.Value) -> mlir_ir.Value:
    """`argument` (a small integer tensor) read as scalars and rebuilt by `tensor.from_elements`
    at the insertion point."""
    sources = small_element_sources(argument)
    assert sources is not None, f"not a small integer tensor: {argument.type}"
    return tensor.FromElementsOp(argument.type, element_scalars(argument, sources)).result
