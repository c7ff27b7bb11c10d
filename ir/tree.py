"""Pretty trees of IR for people: `format_tree(node)` returns a rich Tree (`niroc dump --pretty`).

In the spirit of TIRx's `format_tree`: one line per node, the node's kind and fields on it, every
value with its type (`%3: tensor<2x2xf32>`), symbols, attributes, `loc` (the ONNX node name),
and nested regions as children. Unlike the text form it is for reading only: tensor data shows
as its byte size by default, and `depth` cuts the tree with a `…` line saying what is hidden.

Built with an explicit stack (no recursion over nesting), and rich renders trees iteratively, so
deep If nests are fine. This module only formats; it checks nothing and never prints the data
of a buffer unless asked (`elide_data=False`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from rich.text import Text
from rich.tree import Tree

from ._never import assert_never
from .attributes import buffer_nbytes, is_buffer
from .errors import NirocError
from .lexer import BARE_IDENTIFIER, quote_string
from .ops import (
    OP_KINDS,
    Add,
    Branch,
    Call,
    CondBranch,
    Const,
    GetGlobal,
    If,
    MatMul,
    Mul,
    Op,
    Return,
    TensorExtract,
    Transpose,
    UnknownOp,
    Yield,
    op_name,
    results_of,
)
from .printer import format_attribute, format_float, format_symbol
from .structure import Block, Function, FunctionType, Global, Module, Region
from .types import ScalarType, TensorType, format_type
from .values import Value
from .walk import walk_ops

__all__ = ["format_tree"]

_STYLE_KIND = "bold"
_STYLE_OP = "bold blue"
_STYLE_TYPE = "cyan"
_STYLE_VALUE = "magenta"
_STYLE_SYMBOL = "green"
_STYLE_BLOCK = "yellow"
_STYLE_LOC = "dim"
_HIDDEN = "…"


@dataclass(frozen=True, slots=True)
class _RegionItem:
    """A region shown under a heading (`then`, `else`, `region #0`)."""

    title: str
    region: Region


@dataclass(frozen=True, slots=True)
class _LeafItem:
    """A line with no children (an attribute, a type's field)."""

    label: Text


def format_tree(
    node: object,
    *,
    depth: int | None = None,
    elide_data: bool = True,
    functions: Collection[str] | None = None,
) -> Tree:
    """A rich Tree of `node`: a Module, Function, Global, Region, Block, Op, Type or Value.

    `depth` limits how many levels below `node` are shown (a `…` line marks hidden children);
    `elide_data` shows buffers as their byte size; `functions` keeps only the named functions
    of a Module (and the globals they read). Raises NirocError for a name the module lacks.
    """
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    formatter = _TreeFormatter(elide_data, functions)
    root = Tree(formatter.label(node, {}))
    stack: list[tuple[object, Tree, int, dict]] = [(node, root, 0, {})]
    while stack:
        item, tree, level, labels = stack.pop()
        children, child_labels = formatter.children(item, labels)
        if not children:
            continue
        if depth is not None and level >= depth:
            tree.add(Text(f"{_HIDDEN} {_describe_hidden(children)}", style=_STYLE_LOC))
            continue
        subtrees = [(child, tree.add(formatter.label(child, child_labels))) for child in children]
        for child, subtree in reversed(subtrees):
            stack.append((child, subtree, level + 1, child_labels))
    return root


def _describe_hidden(children: list) -> str:
    kinds: dict[str, int] = {}
    for child in children:
        kind = _kind_noun(child)
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{count} {noun}{'' if count == 1 else 's'}" for noun, count in kinds.items())


def _kind_noun(child: object) -> str:
    if isinstance(child, Block):
        return "block"
    if isinstance(child, _RegionItem):
        return "region"
    if isinstance(child, Function):
        return "function"
    if isinstance(child, Global):
        return "global"
    if isinstance(child, OP_KINDS):
        return "op"
    return "field"


class _TreeFormatter:
    """Labels and children of each kind of node; `labels` maps id(block) -> ^bbN in its region."""

    def __init__(self, elide_data: bool, functions: Collection[str] | None):
        self.elide_data = elide_data
        self.functions = None if functions is None else list(functions)

    # -- children ---------------------------------------------------------------------------

    def children(self, node: object, labels: dict[int, int]) -> tuple[list, dict[int, int]]:
        if isinstance(node, Module):
            return self._module_children(node), labels
        if isinstance(node, Function):
            return ([] if node.body is None else list(node.body.blocks)), _labels_of(node.body)
        if isinstance(node, Region):
            return list(node.blocks), _labels_of(node)
        if isinstance(node, _RegionItem):
            return list(node.region.blocks), _labels_of(node.region)
        if isinstance(node, Block):
            return list(node.operations), labels or {id(node): 0}
        if isinstance(node, If):
            return [
                _RegionItem("then", node.then_region),
                _RegionItem("else", node.else_region),
            ], labels
        if isinstance(node, UnknownOp):
            children: list = [
                _LeafItem(
                    Text(
                        f"{key} = {format_attribute(node.attributes[key], elide_data=self.elide_data)}"
                    )
                )
                for key in sorted(node.attributes)
            ]
            children.extend(
                _RegionItem(f"region #{index}", region) for index, region in enumerate(node.regions)
            )
            return children, labels
        if isinstance(node, TensorType):
            shape = (
                "unranked"
                if node.shape is None
                else "[" + ", ".join("?" if d is None else str(d) for d in node.shape) + "]"
            )
            return [
                _LeafItem(
                    Text.assemble("element_type: ", (node.element_type.spelling, _STYLE_TYPE))
                ),
                _LeafItem(Text(f"shape: {shape}")),
            ], labels
        if isinstance(node, FunctionType):
            return [
                _LeafItem(Text.assemble(f"inputs[{index}]: ", (format_type(type_), _STYLE_TYPE)))
                for index, type_ in enumerate(node.inputs)
            ] + [
                _LeafItem(Text.assemble(f"outputs[{index}]: ", (format_type(type_), _STYLE_TYPE)))
                for index, type_ in enumerate(node.outputs)
            ], labels
        return [], labels

    def _module_children(self, module: Module) -> list:
        if self.functions is None:
            return [*module.globals, *module.functions]
        by_name = {function.name: function for function in module.functions}
        missing = [name for name in self.functions if name not in by_name]
        if missing:
            known = ", ".join(format_symbol(name) for name in by_name) or "none"
            raise NirocError(
                f"no function {format_symbol(missing[0])} in the module (functions: {known})"
            )
        shown = [function for function in module.functions if function.name in set(self.functions)]
        used = {
            op.name for function in shown for op in walk_ops(function) if isinstance(op, GetGlobal)
        }
        return [*(global_ for global_ in module.globals if global_.name in used), *shown]

    # -- labels -----------------------------------------------------------------------------

    def label(self, node: object, labels: dict[int, int]) -> Text:
        if isinstance(node, Module):
            return Text.assemble(
                ("Module", _STYLE_KIND),
                f" ({_plural(len(node.globals), 'global')}, {_plural(len(node.functions), 'function')})",
            )
        if isinstance(node, Global):
            return Text.assemble(
                ("Global ", _STYLE_KIND),
                (format_symbol(node.name), _STYLE_SYMBOL),
                " : ",
                (format_type(node.type), _STYLE_TYPE),
                " = ",
                self._literal(node.initializer),
            )
        if isinstance(node, Function):
            return self._function_label(node)
        if isinstance(node, Region):
            return Text.assemble(
                ("Region", _STYLE_KIND), f" ({_plural(len(node.blocks), 'block')})"
            )
        if isinstance(node, _RegionItem):
            empty = " (empty)" if not node.region.blocks else ""
            return Text.assemble((node.title, _STYLE_KIND), empty)
        if isinstance(node, _LeafItem):
            return node.label
        if isinstance(node, Block):
            text = Text(f"^bb{labels.get(id(node), 0)}", style=_STYLE_BLOCK)
            if node.arguments:
                text.append("(")
                _append_values(text, node.arguments)
                text.append(")")
            return text
        if isinstance(node, OP_KINDS):
            return self._op_label(node, labels)  # type: ignore[arg-type]  # OP_KINDS is Op
        if isinstance(node, ScalarType):
            return Text.assemble(("ScalarType ", _STYLE_KIND), (node.spelling, _STYLE_TYPE))
        if isinstance(node, TensorType):
            return Text.assemble(("TensorType ", _STYLE_KIND), (format_type(node), _STYLE_TYPE))
        if isinstance(node, FunctionType):
            return Text("FunctionType", style=_STYLE_KIND)
        if isinstance(node, Value):
            text = Text.assemble(("Value ", _STYLE_KIND))
            _append_values(text, (node,))
            return text
        raise TypeError(f"format_tree cannot show a {type(node).__name__}")

    def _function_label(self, function: Function) -> Text:
        text = Text.assemble(
            ("Function ", _STYLE_KIND), (format_symbol(function.name), _STYLE_SYMBOL), "("
        )
        _append_signature(text, function.type.inputs, function.input_names)
        text.append(") -> (")
        _append_signature(text, function.type.outputs, function.output_names)
        text.append(")")
        if function.body is None:
            text.append(" declaration", style=_STYLE_LOC)
        elif not function.body.blocks:
            text.append(" (empty body)", style=_STYLE_LOC)
        return text

    def _literal(self, literal: object) -> Text:
        if is_buffer(literal):
            if self.elide_data:
                return Text(f"<{_plural(buffer_nbytes(literal), 'byte')}>", style=_STYLE_LOC)
            return Text(format_attribute(literal, elide_data=False))
        if isinstance(literal, bool):
            return Text("true" if literal else "false")
        if isinstance(literal, float):
            return Text(format_float(literal))
        return Text(repr(literal))

    def _op_label(self, op: Op, labels: dict[int, int]) -> Text:
        text = Text()
        results = results_of(op)
        if results:
            _append_values(text, results)
            text.append(" = ")
        name = op_name(op)
        text.append(
            name if BARE_IDENTIFIER.fullmatch(name) else quote_string(name), style=_STYLE_OP
        )
        match op:
            case Const():
                text.append(" ")
                text.append_text(self._literal(op.literal))
            case GetGlobal():
                text.append(" ")
                text.append(format_symbol(op.name), style=_STYLE_SYMBOL)
            case Transpose():
                _append_operands(text, (op.operand,))
                text.append(f" permutation={format_attribute(tuple(op.permutation))}")
            case TensorExtract():
                _append_operands(text, (op.operand,))
                text.append("[")
                _append_values(text, op.indices)
                text.append("]")
            case Add() | Mul() | MatMul():
                _append_operands(text, (op.lhs, op.rhs))
            case Call():
                text.append(" ")
                text.append(format_symbol(op.callee), style=_STYLE_SYMBOL)
                _append_operands(text, op.arguments, space=False)
            case Branch():
                text.append(" → ")
                _append_successor(text, op.target, op.arguments, labels)
            case CondBranch():
                _append_operands(text, (op.condition,))
                text.append(" → ")
                _append_successor(text, op.true_target, op.true_arguments, labels)
                text.append(", ")
                _append_successor(text, op.false_target, op.false_arguments, labels)
            case Return() | Yield():
                if op.operands:
                    _append_operands(text, op.operands)
            case If():
                _append_operands(text, (op.condition,))
            case UnknownOp():
                _append_operands(text, op.operands)
                if op.successors:
                    text.append(" → ")
                    for index, block in enumerate(op.successors):
                        if index:
                            text.append(", ")
                        _append_successor(text, block, (), labels)
            case _:
                assert_never(op)
        if op.loc is not None:
            text.append(f"  loc({quote_string(op.loc)})", style=_STYLE_LOC)
        return text


def _labels_of(region: Region | None) -> dict[int, int]:
    if region is None:
        return {}
    return {id(block): index for index, block in enumerate(region.blocks)}


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _append_values(text: Text, values: Iterable[Value]) -> None:
    for index, value in enumerate(values):
        if index:
            text.append(", ")
        text.append(f"%{value.id.index}", style=_STYLE_VALUE)
        text.append(": ")
        text.append(format_type(value.type), style=_STYLE_TYPE)


def _append_operands(text: Text, values: tuple[Value, ...], *, space: bool = True) -> None:
    text.append(" (" if space else "(")
    _append_values(text, values)
    text.append(")")


def _append_successor(
    text: Text, block: Block, arguments: tuple[Value, ...], labels: dict[int, int]
) -> None:
    index = labels.get(id(block))
    text.append("^bb?" if index is None else f"^bb{index}", style=_STYLE_BLOCK)
    if arguments:
        text.append("(")
        _append_values(text, arguments)
        text.append(")")


def _signature_names(names: tuple | None, count: int) -> list:
    if names is None or len(names) != count:
        return [None] * count
    return list(names)


def _append_signature(text: Text, types: tuple, names: tuple | None) -> None:
    for index, (type_, name) in enumerate(
        zip(types, _signature_names(names, len(types)), strict=True)
    ):
        if index:
            text.append(", ")
        if name is not None:
            text.append(f"{name}: ")
        text.append(format_type(type_), style=_STYLE_TYPE)
