"""The lowering driver: a Niro Module in, a verified MLIR module out.

It walks the module once: globals become `ml_program.global`s, functions `func.func`s, and every
op goes through its rule (`rules.py`, or the UnknownOp registry) with a `LoweringRuleContext`.
Blocks of a region are all created first (so branches can name any of them) and then filled in
reverse post-order, which puts every block after the blocks that dominate it, so every operand
is lowered before its use even when the Niro block order is arbitrary.

Refusals are collected, not raised one at a time, so one run reports every op the model needs
changed: UnknownOps without a registered lowering are counted first (one entry listing each
name, unless the caller allows generic ops), then every op whose rule raises a LoweringError is
recorded and stands in for its results with a placeholder, and lowering goes on. At the end one
LoweringError reports them all (`refused_together`) and the half-built MLIR module is dropped
unprinted and unverified. A module whose values are used before their definition (it was not
verified) still stops at once: that is no refusal of an op but a broken module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from niro.ir import (
    GENERIC_REASON_ATTRIBUTE,
    Block,
    Const,
    Function,
    GetGlobal,
    Location,
    Module,
    Op,
    Region,
    ScalarType,
    TensorType,
    UnknownOp,
    Value,
    ValueId,
    format_type,
    is_terminator,
    op_name,
    operands_of,
    regions_of,
    results_of,
    successors_of,
    walk_ops,
)

from . import rules as _rules  # noqa: F401  (fills KNOWN_LOWERINGS; checks it is complete)
from . import sub_byte
from .bindings import arith, func, make_context, mlir_ir
from .builders.checks import assert_true
from .builders.contraction import erase_unread_untiled
from .builders.shapes import dim_size
from .context import LoweringRuleContext
from .early_checks import hoist_checks
from .errors import LoweringError, refused_together
from .host_arguments import HostArguments, read_on_host
from .literals import ResourceTable, generic_attr, scalar_attr, tensor_data_attr
from .nesting import recursion_headroom
from .output import LoweredModule
from .parameters import ParameterPlan, ParameterTable
from .registry import KNOWN_LOWERINGS, lowering_for
from .row_versions import choose_row_versions_once, inline_versioned_calls
from .types import lower_type, type_key
from .weight_layout import Layout, stored_global, stored_layouts

__all__ = ["lower_to_mlir", "FunctionLowering", "ModuleLowering", "NAME_ATTRIBUTE"]

NAME_ATTRIBUTE = "niro.name"
"""Argument/result attribute carrying a Function's input_names/output_names."""

YieldBuilder = Callable[[LoweringRuleContext], None]


def lower_to_mlir(
    module: Module, *, allow_unknown: bool = False, parameters: ParameterPlan | None = None
) -> LoweredModule:
    """Lowers a verified Niro module to an MLIR module that verifies.

    With `parameters`, the globals the plan takes get IREE parameter references as their
    values (parameters.py) and `LoweredModule.parameters` holds their data for the archive.

    The input should pass `niro.ir.verify` first (the CLI does that): the lowering checks only
    what its rules rely on (ranked tensors, known symbols, literal sizes, defined operands), and
    MLIR's verifier, run on the result, catches the rest with the node named.

    UnknownOps need a registered lowering (`register_lowering`), or `allow_unknown=True` to keep
    them as generic operations (`"onnx.Relu"(%0) {alpha = ...}`) in a context that allows
    unregistered dialects. Raises LoweringError: one for every op refused (see
    `LoweringError.refusals`).
    """
    unknown = _unknown_ops_error(module, allow_unknown)
    context = make_context(allow_unregistered_dialects=allow_unknown)
    diagnostics: list[str] = []

    def collect(diagnostic) -> bool:
        diagnostics.append(_format_diagnostic(diagnostic))
        return True

    handler = context.attach_diagnostic_handler(collect)
    try:
        with recursion_headroom(module), context, mlir_ir.Location.unknown():
            mlir_module = mlir_ir.Module.create()
            state = ModuleLowering(
                module,
                mlir_module,
                ResourceTable(),
                allow_unknown=allow_unknown,
                refusals=[unknown] if unknown is not None else [],
                parameters=ParameterTable(parameters) if parameters is not None else None,
            )
            state.lower()
            if state.refusals:
                raise refused_together(state.refusals)
            _verify(mlir_module, diagnostics)
            # NOTE: IREE 3.13 cuts the device work at every cf.assert left between two tensor
            # ops (one more submission each), and at every versioned product (an scf.if): the
            # checks move up (early_checks.py), and a function with several versioned products
            # chooses their versions once (row_versions.py), those of the calls it inlines too.
            for rewrite in (
                erase_unread_untiled,
                inline_versioned_calls,
                hoist_checks,
                choose_row_versions_once,
            ):
                if rewrite(mlir_module):
                    _verify(mlir_module, diagnostics)
    finally:
        handler.detach()
    return LoweredModule(
        mlir_module,
        context,
        state.resources,
        has_generic_ops=state.has_generic_ops,
        parameters=state.parameters,
    )


def _format_diagnostic(diagnostic) -> str:
    text = f"{diagnostic.location}: {diagnostic.message}"
    for note in diagnostic.notes:
        text += f"\n  note: {note.location}: {note.message}"
    return text


def _verify(mlir_module: mlir_ir.Module, collected: list[str]) -> None:
    """Runs MLIR's verifier; a failure names the MLIR diagnostics and the Niro node."""
    try:
        mlir_module.operation.verify()
        return
    except mlir_ir.MLIRError as error:
        messages = [_format_diagnostic(diagnostic) for diagnostic in error.error_diagnostics]
        locations = [str(diagnostic.location) for diagnostic in error.error_diagnostics]
    messages = messages or collected or ["verification failed without a diagnostic"]
    node = None
    for location in locations:
        if location.startswith('loc("') and location.endswith('")'):
            node = location[5:-2]
            break
    raise LoweringError(
        f"the lowered module fails MLIR verification: {messages[0].splitlines()[0]}",
        location=f"node {node!r}" if node else None,
        notes=messages,
        internal=True,
    )


def _ops_with_paths(region: Region, prefix: tuple[str, ...]) -> Iterator:
    for block_index, block in enumerate(region.blocks):
        for op_index, op in enumerate(block.operations):
            yield prefix + (f"^bb{block_index}", f"op#{op_index}"), op


def _walk_with_paths(module: Module) -> Iterator[tuple[str, tuple[str, ...], Op]]:
    """(function name, path, op) for every op in textual pre-order (an op, then the ops of its
    regions, then the next op); paths as in Niro diagnostics. Iterative: deep nesting is fine."""
    for function in module.functions:
        if function.body is None:
            continue
        stack = [_ops_with_paths(function.body, ())]
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                continue
            path, op = item
            yield function.name, path, op
            for region_index, nested in reversed(list(enumerate(regions_of(op)))):
                stack.append(_ops_with_paths(nested, path + (f"region#{region_index}",)))


def _unknown_ops_error(module: Module, allow_unknown: bool) -> LoweringError | None:
    """One LoweringError listing every UnknownOp name that has no lowering (unless allowed)."""
    if allow_unknown:
        return None
    if not any(
        isinstance(op, UnknownOp) and lowering_for(op.name) is None for op in walk_ops(module)
    ):
        return None  # NOTE: the common case, checked without building every op's path (2x faster)
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for symbol, path, op in _walk_with_paths(module):
        if isinstance(op, UnknownOp) and lowering_for(op.name) is None:
            counts[op.name] += 1
            if op.name not in first:
                where = f"node {op.loc!r}" if op.loc else f"@{symbol} {' '.join(path)}"
                reason = op.attributes.get(GENERIC_REASON_ATTRIBUTE)
                if isinstance(reason, str):
                    where += f", kept generic because {reason}"
                first[op.name] = where
    if not counts:
        return None
    total = sum(counts.values())
    listing = ", ".join(
        f"{name} (x{count}, first at {first[name]})" for name, count in counts.items()
    )
    noun = "operation has" if total == 1 else "operations have"
    return LoweringError(
        f"{total} {noun} no MLIR lowering: {listing}",
        notes=[
            "register a lowering with niro.backends.mlir.register_lowering, or keep them as "
            "generic operations (allow_unknown=True)"
        ],
    )


@dataclass
class ModuleLowering:
    """Module-wide state: the MLIR module being built, its blobs, the symbol tables, and the
    refusals so far (when there is one, `mlir` is incomplete and must not be used)."""

    niro: Module
    mlir: mlir_ir.Module
    resources: ResourceTable
    allow_unknown: bool = False
    refusals: list[LoweringError] = field(default_factory=list)
    global_types: dict[str, ScalarType | TensorType] = field(default_factory=dict)
    function_names: set[str] = field(default_factory=set)
    has_generic_ops: bool = False
    mlir_types: dict[Hashable, mlir_ir.Type] = field(default_factory=dict)
    shared: dict[Hashable, object] = field(default_factory=dict)
    parameters: ParameterTable | None = None
    layouts: dict[str, Layout] = field(default_factory=dict)
    """The Globals not written as the model stores them (`weight_layout.stored_layouts`)."""
    host_arguments: HostArguments = field(default_factory=lambda: HostArguments(Counter()))
    """Which Function arguments every Call passes from the host (`host_arguments.py`)."""
    helpers: frozenset[str] = frozenset()
    """The defined functions written `private` (`is_private`)."""

    def mlir_type(self, type_: ScalarType | TensorType) -> mlir_ir.Type:
        """`lower_type(type_)`, memoised: a model has few distinct types and many ops (each
        `lower_type` makes several binding calls)."""
        key = type_key(type_)
        found = self.mlir_types.get(key)
        if found is None:
            found = self.mlir_types[key] = lower_type(type_)
        return found

    def shared_object(self, key: Hashable, build: Callable[[], object]) -> object:
        """`build()`, made once per lowering for `key`: the attributes many ops repeat (indexing
        maps, iterator types...). They belong to this lowering's MLIR context, so the cache
        lives and dies with it; `key` must say everything `build` depends on."""
        found = self.shared.get(key)
        if found is None:
            found = self.shared[key] = build()
        return found

    def is_private(self, function: Function) -> bool:
        """Whether `function` is written `private`: a declaration, or a helper, a definition
        that other functions of the module call (the bodies the ONNX importer makes for
        contrib ops, ONNX functions and model-local functions, one per call site) while some
        function is called by none (the module's entry points stay public).

        Why: iree-compile exports every public function and compiles it as an entry point of
        its own besides the copies inlined where it is called: onnxruntime-genai's 4-layer
        Llama (GroupQueryAttention and the layer norms as helpers) took 16.6 s of
        iree-compile CPU with its helpers public and 13.9 s private."""
        return function.is_declaration or function.name in self.helpers

    def refuse(self, op: Op, error: LoweringError) -> None:
        """Records that `op`'s rule refused it (the caller goes on with the next op)."""
        if not self.allow_unknown and isinstance(op, UnknownOp) and lowering_for(op.name) is None:
            return  # NOTE: counted in the unknown-ops entry already (`_unknown_ops_error`)
        if error.op_kind is None:
            error.op_kind = op_name(op)
        self.refusals.append(error)

    def lower(self) -> None:
        self.function_names = {function.name for function in self.niro.functions}
        self.layouts = stored_layouts(self.niro)
        self.host_arguments = HostArguments.of(self.niro)
        calls = self.host_arguments.calls
        defined = [function.name for function in self.niro.functions if not function.is_declaration]
        if any(calls[name] == 0 for name in defined):
            self.helpers = frozenset(name for name in defined if calls[name] > 0)
        with mlir_ir.InsertionPoint(self.mlir.body):
            for global_ in self.niro.globals:
                self._lower_global(global_)
            for function in self.niro.functions:
                FunctionLowering(self, function).lower()

    def _lower_global(self, global_) -> None:
        where = f"@{global_.name}"
        type_ = global_.type
        try:
            if isinstance(type_, ScalarType):
                if not isinstance(global_.initializer, (bool, int, float)):
                    raise ValueError(
                        f"expected a bool, int or float initializer for {type_.spelling}"
                    )
                stored = TensorType(type_, ())
                value = mlir_ir.DenseElementsAttr.get_splat(
                    self.mlir_type(stored), scalar_attr(type_, global_.initializer)
                )
            else:
                if not type_.is_static:
                    raise ValueError(f"needs a static tensor type, got {format_type(type_)}")
                stored = sub_byte.packed_type(type_) if sub_byte.is_packed(type_) else type_
                layout = self.layouts.get(global_.name)
                if layout is not None:
                    global_ = stored_global(global_, layout)
                    stored = global_.type
                if self.parameters is not None and self.parameters.plan.takes(global_):
                    value = self.parameters.add(global_, stored)
                else:
                    value = tensor_data_attr(
                        stored, global_.initializer, resources=self.resources, name=global_.name
                    )
        except ValueError as error:
            raise LoweringError(f"global {error}", location=where) from error
        self.global_types[global_.name] = type_
        private = self.shared_object("private", lambda: mlir_ir.StringAttr.get("private"))
        mlir_ir.Operation.create(
            "ml_program.global",
            attributes={
                "sym_name": mlir_ir.StringAttr.get(global_.name),
                "sym_visibility": private,
                "type": mlir_ir.TypeAttr.get(self.mlir_type(stored)),
                "value": value,
            },
        )


def _check_named_dims(function: Function, entry: mlir_ir.Block) -> None:
    """At the top of `entry`, a run-time check per function argument dim that has the name of
    an earlier argument's dim (`TensorType.dim_names`) that the two sizes agree: the model
    declares them equal (one ONNX dim_param), and the lowerings rely on it to check nothing
    where such dims meet, so a call that breaks the declaration stops here, with a message.
    """
    first: dict[str, tuple[int, int]] = {}
    checks = []
    assert function.body is not None, f"@{function.name} is a declaration: nothing to check"
    for position, argument in enumerate(function.body.blocks[0].arguments):
        if not isinstance(argument.type, TensorType) or argument.type.rank is None:
            continue
        for axis in range(argument.type.rank):
            name = argument.type.dim_name(axis)
            if name is None:
                continue
            if name in first:
                checks.append((first[name], (position, axis), name))
            else:
                first[name] = (position, axis)
    if not checks:
        return
    names = function.input_names or ()

    def label(position: int) -> str:
        given = names[position] if position < len(names) else None
        return f"input '{given}'" if given else f"input #{position}"

    with mlir_ir.InsertionPoint.at_block_begin(entry), mlir_ir.Location.unknown():
        for (earlier, earlier_axis), (position, axis), name in checks:
            equal = arith.CmpIOp(
                arith.CmpIPredicate.eq,
                dim_size(entry.arguments[earlier], earlier_axis),
                dim_size(entry.arguments[position], axis),
            ).result
            assert_true(
                equal,
                f"@{function.name}: {label(earlier)} dim {earlier_axis} and {label(position)} "
                f"dim {axis} are both '{name}' in the model, but their sizes differ",
            )


class FunctionLowering:
    """Lowers one Function: owns its ValueId -> MLIR value map and Niro -> MLIR block map."""

    def __init__(self, module: ModuleLowering, function: Function):
        self.module = module
        self.function = function
        self.values: dict[ValueId, mlir_ir.Value] = {}
        self._blocks: dict[int, mlir_ir.Block] = {}
        self._yield_builders: list[YieldBuilder | None] = []
        self._constants = 0
        self._definitions: dict[ValueId, Op] | None = None

    # -- entry points -------------------------------------------------------------------------

    def lower(self) -> None:
        function = self.function
        signature = mlir_ir.FunctionType.get(
            [lower_type(type_) for type_ in function.type.inputs],
            [lower_type(type_) for type_ in function.type.outputs],
        )
        func_op = func.FuncOp(
            function.name,
            signature,
            visibility="private" if self.module.is_private(function) else None,
        )
        if function.input_names is not None and any(function.input_names):
            func_op.arg_attrs = _name_attrs(function.input_names)
        if function.output_names is not None and any(function.output_names):
            func_op.res_attrs = _name_attrs(function.output_names)
        if function.body is not None:
            self.lower_region(
                function.body,
                func_op.body,
                (),
                yield_builder=None,
                on_host=self.module.host_arguments.positions(function.name),
            )
            _check_named_dims(function, func_op.body.blocks[0])

    # -- services for rules ---------------------------------------------------------------------

    def definition(self, value: Value) -> Op | None:
        """The op of this function whose result `value` is (None for a block argument)."""
        if self._definitions is None:
            self._definitions = {
                result.id: op for op in walk_ops(self.function) for result in results_of(op)
            }
        return self._definitions.get(value.id)

    def constant_value(self, value: Value) -> np.ndarray | None:
        """`value`'s contents as a numpy array when a Const or GetGlobal defines it, else None.

        Lowerings of ops whose axes, shapes or pads arrive as operands need them at compile time.
        The array is a read-only view of the literal's buffer (no copy); BF16 data is not
        decoded (None), nor are the FP8/FP4 and sub-byte types."""
        op = self.definition(value)
        if isinstance(op, Const):
            literal = op.literal
        elif isinstance(op, GetGlobal):
            global_ = self.module.niro.get_global(op.name)
            if global_ is None:
                return None
            literal = global_.initializer
        else:
            return None
        type_ = value.type
        element = type_ if isinstance(type_, ScalarType) else type_.element_type
        if element is ScalarType.BF16 or element.is_narrow_float or element.is_sub_byte:
            return None
        dtype = np.dtype(element.numpy_name).newbyteorder("<")
        if isinstance(literal, (bool, int, float)):
            return np.asarray(literal, dtype=dtype)
        if not isinstance(type_, TensorType) or not type_.is_static:
            return None
        array = np.frombuffer(literal, dtype=dtype)
        return array.reshape(type_.shape)

    def next_constant_name(self) -> str:
        """The base blob name of the next tensor Const in this function (`main.const0`...)."""
        name = f"{self.function.name}.const{self._constants}"
        self._constants += 1
        return name

    def block_for(self, block: Block) -> mlir_ir.Block:
        """The MLIR block made for a Niro block of this function (a ValueError when there is
        none, e.g. a branch out of its region in an unverified module)."""
        try:
            return self._blocks[id(block)]
        except KeyError:
            raise ValueError(
                "targets a block that is not in this function (is the module verified?)"
            ) from None

    def build_yield(self, ctx: LoweringRuleContext) -> None:
        if not self._yield_builders or self._yield_builders[-1] is None:
            raise ctx.error("is not inside a region that a Yield may end")
        self._yield_builders[-1](ctx)

    def lower_region(
        self,
        region: Region,
        mlir_region: mlir_ir.Region,
        path: tuple[str, ...],
        *,
        yield_builder: YieldBuilder | None,
        on_host: Sequence[int] = (),
    ) -> None:
        """Fills an empty MLIR region with `region`'s blocks; Yields use `yield_builder`. The
        entry block's arguments at positions `on_host` are read as scalars first
        (`host_arguments.read_on_host`)."""
        mlir_blocks = []
        for block in region.blocks:
            mlir_block = mlir_region.blocks.append(
                *[lower_type(arg.type) for arg in block.arguments]
            )
            self._blocks[id(block)] = mlir_block
            for argument, mlir_argument in zip(block.arguments, mlir_block.arguments, strict=True):
                self.values[argument.id] = mlir_argument
            mlir_blocks.append(mlir_block)
        if on_host:
            entry = region.blocks[0]
            with mlir_ir.InsertionPoint(mlir_blocks[0]), mlir_ir.Location.unknown():
                for position in on_host:
                    argument = entry.arguments[position]
                    self.values[argument.id] = read_on_host(self.values[argument.id])
        index_of = {id(block): index for index, block in enumerate(region.blocks)}
        self._yield_builders.append(yield_builder)
        try:
            for block in _reverse_post_order(region):
                index = index_of[id(block)]
                self._lower_ops(block, mlir_blocks[index], path + (f"^bb{index}",))
        finally:
            self._yield_builders.pop()

    def lower_block(
        self,
        block: Block,
        mlir_block: mlir_ir.Block,
        arguments: Sequence[mlir_ir.Value],
        path: tuple[str, ...],
        *,
        yield_builder: YieldBuilder,
    ) -> None:
        """Fills an existing MLIR block (an scf.if arm, a loop body) with `block`'s ops, its
        arguments bound to `arguments`; its Yield is built by `yield_builder`."""
        if len(arguments) != len(block.arguments):
            raise ValueError(
                f"a block of {len(block.arguments)} arguments bound to {len(arguments)} values"
            )
        for argument, value in zip(block.arguments, arguments, strict=True):
            self.values[argument.id] = value
        self._blocks[id(block)] = mlir_block
        self._yield_builders.append(yield_builder)
        try:
            self._lower_ops(block, mlir_block, path)
        finally:
            self._yield_builders.pop()

    def build_generic(self, ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
        """An UnknownOp kept as a generic operation, its attributes, regions and successors kept."""
        op = ctx.op
        assert isinstance(op, UnknownOp), op
        if not ctx.location.context.allow_unregistered_dialects:
            raise ctx.error("has no MLIR lowering")
        self.module.has_generic_ops = True
        base = f"{self.function.name}.{op.name}"
        try:
            attributes = {
                key: generic_attr(value, resources=self.module.resources, name=f"{base}.{key}")
                for key, value in op.attributes.items()
            }
        except ValueError as error:
            raise ctx.error(f"has an attribute MLIR cannot hold: {error}") from error
        generic = mlir_ir.Operation.create(
            op.name,
            results=list(ctx.result_types),
            operands=list(ctx.operands),
            attributes=attributes,
            successors=[self.block_for(target) for target in op.successors],
            regions=len(op.regions),
        )
        for index, region in enumerate(op.regions):
            if region.blocks:
                self.lower_region(
                    region,
                    generic.regions[index],
                    ctx.niro_location.path + (f"region#{index}",),
                    yield_builder=_build_generic_yield,
                )
        return list(generic.results)

    # -- ops --------------------------------------------------------------------------------------

    def _lower_ops(self, block: Block, mlir_block: mlir_ir.Block, path: tuple[str, ...]) -> None:
        insertion_point = mlir_ir.InsertionPoint(mlir_block)
        for index, op in enumerate(block.operations):
            self._lower_op(op, insertion_point, path + (f"op#{index}",))

    def _lower_op(
        self, op: Op, insertion_point: mlir_ir.InsertionPoint, path: tuple[str, ...]
    ) -> None:
        location = mlir_ir.Location.name(op.loc) if op.loc else mlir_ir.Location.unknown()
        niro_operands = operands_of(op)
        results = results_of(op)
        mlir_type = self.module.mlir_type
        ctx = LoweringRuleContext(
            op=op,
            operands=self._operands(op, niro_operands, path),
            result_types=tuple([mlir_type(value.type) for value in results]),
            niro_operands=niro_operands,
            niro_results=results,
            location=location,
            insertion_point=insertion_point,
            path=path,
            _driver=self,
        )
        with location, insertion_point:
            try:
                self._bind_results(ctx, results, _apply_rule(ctx))
            except LoweringError as error:
                self.module.refuse(op, error)
                self._bind_placeholders(ctx, results)

    def _bind_placeholders(self, ctx: LoweringRuleContext, results: tuple[Value, ...]) -> None:
        """Values of the right types for a refused op's results, so the ops that use them lower
        as if it had been: each refusal reported is an op's own, none a consequence of another.

        NOTE: `builtin.unrealized_conversion_cast` with no operand is MLIR's own stand-in for a
        value not materialized yet; registered, so the context need not allow unregistered
        dialects. Whatever the refused rule built before it gave up stays in the block: once
        an op is refused the module is dropped, never printed nor verified.
        """
        if not results:
            return
        placeholder = mlir_ir.Operation.create(
            "builtin.unrealized_conversion_cast", results=list(ctx.result_types)
        )
        for value, mlir_value in zip(results, placeholder.results, strict=True):
            self.values[value.id] = mlir_value

    def _bind_results(self, ctx: LoweringRuleContext, results: tuple[Value, ...], built) -> None:
        if len(built) != len(results):
            raise ctx.error(
                f"lowering returned {len(built)} values for {len(results)} results", internal=True
            )
        for index, (value, mlir_value, expected) in enumerate(
            zip(results, built, ctx.result_types, strict=True)
        ):
            if not isinstance(mlir_value, mlir_ir.Value):
                raise ctx.error(
                    f"lowering returned {type(mlir_value).__name__} for result #{index}",
                    internal=True,
                )
            if mlir_value.type != expected:
                raise ctx.error(
                    f"lowering returned {mlir_value.type} for result #{index}, expected {expected}",
                    internal=True,
                )
            self.values[value.id] = mlir_value

    def _operands(
        self, op: Op, niro_operands: tuple[Value, ...], path: tuple[str, ...]
    ) -> tuple[mlir_ir.Value, ...]:
        """The MLIR values of `op`'s operands; a LoweringError when one is not defined yet."""
        values = self.values
        try:
            return tuple([values[value.id] for value in niro_operands])
        except KeyError:
            pass
        missing = next(value for value in niro_operands if value.id not in values)
        name = op_name(op)
        where = Location(symbol=self.function.name, path=path, op_name=name, source=op.loc)
        raise LoweringError(
            f"'{name}' op uses {missing.id}, which is not defined before it (is the module verified?)",
            location=str(where),
        )


def _apply_rule(ctx: LoweringRuleContext) -> list[mlir_ir.Value]:
    """The op's rule applied; a binding's ValueError, TypeError or MLIRError becomes a
    LoweringError located at the op."""
    try:
        return list(KNOWN_LOWERINGS[type(ctx.op)](ctx))
    except (ValueError, TypeError, mlir_ir.MLIRError) as error:
        raise LoweringError(
            f"'{op_name(ctx.op)}' op could not be lowered: {error}",
            location=str(ctx.niro_location),
        ) from error


def _build_generic_yield(ctx: LoweringRuleContext) -> None:
    """Yield inside an UnknownOp region: its convention is opaque, so it stays generic too."""
    mlir_ir.Operation.create("niro.yield", operands=list(ctx.operands))


def _name_attrs(names: tuple[str | None, ...]) -> mlir_ir.ArrayAttr:
    return mlir_ir.ArrayAttr.get(
        [
            mlir_ir.DictAttr.get({NAME_ATTRIBUTE: mlir_ir.StringAttr.get(name)} if name else {})
            for name in names
        ]
    )


def _successor_blocks(block: Block) -> list[Block]:
    if not block.operations or not is_terminator(block.operations[-1]):
        return []
    return [target for target, _ in successors_of(block.operations[-1])]


def _reverse_post_order(region: Region) -> list[Block]:
    """Blocks reachable from the entry in reverse post-order (dominators first), then the rest."""
    if not region.blocks:
        return []
    entry = region.blocks[0]
    visited = {id(entry)}
    post_order: list[Block] = []
    stack = [(entry, iter(_successor_blocks(entry)))]
    while stack:
        block, successors = stack[-1]
        for successor in successors:
            if id(successor) not in visited:
                visited.add(id(successor))
                stack.append((successor, iter(_successor_blocks(successor))))
                break
        else:
            stack.pop()
            post_order.append(block)
    order = post_order[::-1]
    order.extend(block for block in region.blocks if id(block) not in visited)
    return order
