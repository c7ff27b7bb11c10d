"""The lowering-rule context: what every lowering rule receives.

Every rule, built in or registered, receives one `LoweringRuleContext` (as JAX's lowering rules
receive a `LoweringRuleContext`): the Niro op, its MLIR operand values, the MLIR types its
results must have, the location and insertion point to build at, and helpers. A rule builds ops
and returns the MLIR values of the op's results, in order (terminators return nothing). The
rules are found in `registry.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np
from niro.ir import (
    Block,
    Location,
    Op,
    ScalarType,
    TensorType,
    Value,
    format_type,
    op_name,
)

from .bindings import mlir_ir
from .errors import LoweringError
from .host_arguments import on_host
from .types import RankedTensorType
from .weight_layout import Layout

if TYPE_CHECKING:
    from .literals import ResourceTable
    from .lowering import FunctionLowering

T = TypeVar("T")

__all__ = ["LoweringRuleContext"]


@dataclass(frozen=True, slots=True)
class LoweringRuleContext:
    """What a lowering rule gets: one per Niro op lowered.

    `operands` are the MLIR values of `niro_operands` (`operands_of(op)`) in order;
    `result_types` the MLIR types of `niro_results` (`results_of(op)`). The rule runs with
    `location` and `insertion_point` already entered, so builders pick them up implicitly.
    `niro_location` says where the op is in the Niro module (its function and `path`), for error
    messages. What a rule needs from the lowering around it (nested regions, branch targets,
    the module's symbols and blobs, attributes shared between ops) it asks through the methods
    here; `_driver`, the function being lowered, is theirs alone: a rule never reads or writes
    the driver's map of Niro values to MLIR values.
    """

    op: Op
    operands: tuple[mlir_ir.Value, ...]
    result_types: tuple[mlir_ir.Type, ...]
    niro_operands: tuple[Value, ...]
    niro_results: tuple[Value, ...]
    location: mlir_ir.Location
    insertion_point: mlir_ir.InsertionPoint
    path: tuple[str, ...]
    _driver: FunctionLowering

    @property
    def niro_location(self) -> Location:
        """Where the op is in the Niro module, made when asked (an error, a run-time check's
        message): most ops never need it, and a 20,000-op model would make 20,000."""
        op = self.op
        return Location(
            symbol=self._driver.function.name, path=self.path, op_name=op_name(op), source=op.loc
        )

    # -- errors ---------------------------------------------------------------------------------

    def error(self, message: str, *, internal: bool = False) -> LoweringError:
        """A LoweringError in MLIR's form (`'niro.add' op ...`) located at this op (`internal`:
        niroc's lowering went wrong, not the model; see LoweringError)."""
        return LoweringError(
            f"'{op_name(self.op)}' op {message}",
            location=str(self.niro_location),
            internal=internal,
        )

    # -- Niro views of the operands ---------------------------------------------------------------

    def ranked(self, value: Value, what: str) -> RankedTensorType:
        """`value`'s type when it is a ranked tensor, else an error naming the op and operand."""
        type_ = value.type
        if not isinstance(type_, TensorType):
            raise self.error(f"expected a tensor {what}, got {format_type(type_)}")
        if type_.shape is None:
            raise self.error(f"needs a ranked tensor {what}, got {format_type(type_)}")
        return cast(RankedTensorType, type_)

    def constant_operand(self, index: int) -> np.ndarray | None:
        """Operand `index` as a numpy array when it is a compile-time constant (defined by a
        Const or a GetGlobal), else None: for axes, shapes, pads given as ONNX inputs."""
        return self.constant_value(self.niro_operands[index])

    def constant_value(self, value: Value) -> np.ndarray | None:
        """A Niro value's contents as a numpy array when a Const or GetGlobal defines it."""
        return self._driver.constant_value(value)

    # -- what the lowering shares -------------------------------------------------------------

    def mlir_type(self, type_: ScalarType | TensorType) -> mlir_ir.Type:
        """`lower_type(type_)` in this lowering's context, made once per type."""
        return self._driver.module.mlir_type(type_)

    def shared_object(self, key: Hashable, build: Callable[[], T]) -> T:
        """`build()`, made once per lowered module for `key` (attributes many ops repeat:
        indexing maps, permutations, broadcast plans); `key` must say all `build` depends on."""
        return cast(T, self._driver.module.shared_object(key, build))  # `key` says what it holds

    # -- nested regions and branch targets ------------------------------------------------------

    def lower_block(
        self,
        block: Block,
        mlir_block: mlir_ir.Block,
        arguments: Sequence[mlir_ir.Value] = (),
        *,
        region: int = 0,
        yield_builder: Callable[[LoweringRuleContext], None],
    ) -> None:
        """Lowers `block`, the single block of this op's region #`region`, into the existing
        MLIR block `mlir_block` (an scf.if arm, a loop body), its arguments bound to the MLIR
        values `arguments`. Its Yield calls `yield_builder` with the Yield's own context, whose
        `operands` are the yielded values: it builds the terminator the enclosing op needs."""
        path = self.niro_location.path + (f"region#{region}", "^bb0")
        self._driver.lower_block(block, mlir_block, arguments, path, yield_builder=yield_builder)

    def successor(self, block: Block) -> mlir_ir.Block:
        """The MLIR block made for a Niro block of this function (a branch's target)."""
        return self._driver.block_for(block)

    def build_yield(self) -> None:
        """This Yield, built by the enclosing region's yield builder (see `lower_block`)."""
        self._driver.build_yield(self)

    def build_generic(self) -> list[mlir_ir.Value]:
        """This UnknownOp kept as a generic operation (when the context allows unregistered
        dialects), its regions lowered."""
        return self._driver.build_generic(self)

    # -- the module -----------------------------------------------------------------------------

    def next_constant_name(self) -> str:
        """The base blob name of the next tensor constant of this function."""
        return self._driver.next_constant_name()

    @property
    def resources(self) -> ResourceTable:
        """The module's `dense_resource` blobs, where a tensor constant's data goes."""
        return self._driver.module.resources

    def global_type(self, name: str) -> ScalarType | TensorType | None:
        """The type of the module's global @`name`, None when there is no such global."""
        return self._driver.module.global_types.get(name)

    def global_layout(self, name: str) -> Layout | None:
        """How global @`name` (a matrix) is written to MLIR when not as the model stores it
        (`weight_layout.py`)."""
        return self._driver.module.layouts.get(name)

    def has_function(self, name: str) -> bool:
        """Whether the module defines or declares function @`name`."""
        return name in self._driver.module.function_names

    def record_call(self, callee: str) -> None:
        """This op calls @`callee` with `operands`: which of them are on the host decides how
        the callee reads its arguments (`host_arguments.py`)."""
        self._driver.module.host_arguments.record(
            callee, [on_host(value) for value in self.operands]
        )
