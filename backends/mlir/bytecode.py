"""`.mlirbc` output whose resource blobs are written from the Niro buffers, never copied.

Why: the MLIR Python bindings hand the bytecode writer's output to Python as new `bytes`
objects, so every weight blob costs a full copy (a 1 GB model: 1 GB more memory, and the time).
Here MLIR's writer writes all but the blob bytes: the module is written with each blob attribute
swapped for a 16-byte placeholder (recognised by its bytes and key), then swapped back, and that
small output is re-emitted around the real bytes, which the caller streams from the buffers.

The swap is made on the module itself: a clone or a reparse could number the IR differently
(use-list orders), and the file must be byte for byte what MLIR's writer makes of the module.
The placeholders keep every attribute's place and number, so three sections differ, rebuilt as
`BytecodeWriter.cpp` builds them: resources (5: per entry a varint alignment, a varint size,
0xCB padding to the alignment from the section start, the bytes; the section aligned in the
file to its largest blob alignment), resource offsets (6: entry sizes and keys), and strings
(0: the real keys for the placeholder keys, which the writer adds last). The rest is kept.

Layout: magic `ML\xefR`, varint version, NUL-terminated producer, then sections: an id byte
(high bit: aligned), a varint length, [varint alignment, 0xCB padding], the content; varints
are MLIR's PrefixVarInt. Anything unexpected (an unknown version or section, a blob that is
not ours, a string-table surprise) raises `BytecodeLayoutError` before anything is written,
and the caller uses MLIR's own writer: a slower file, never a wrong one.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import NamedTuple

from .bindings import mlir_ir
from .literals import ResourceBlob, ResourceTable

__all__ = ["BlobSplicingWriter", "BytecodeLayoutError", "SPLICE_MIN_BYTES", "splice_blobs"]

SPLICE_MIN_BYTES = 16 << 20
"""Below this many blob bytes MLIR's writer is used: its copies are small, and it is faster
than swapping many small blobs (100k ops, 6.5k blobs, 1 MiB in all: 0.17 s vs 0.55 s)."""

_MAGIC = b"ML\xefR"
_KNOWN_VERSIONS = range(1, 7)  # same top-level layout and resource encoding
_ALIGNMENT_BYTE = 0xCB
_ALIGNED_FLAG = 0x80
_STRING, _RESOURCE, _RESOURCE_OFFSET, _PROPERTIES = 0, 5, 6, 8
_KNOWN_SECTIONS = range(0, 9)
_BLOB_KIND = 0
_PLACEHOLDER_MAGIC = b"niro\xefPH\x00"
_PLACEHOLDER_KEY = b"niro.bytecode_placeholder."

Piece = bytes | memoryview
Entry = tuple[int, int, int]  # a resource's key (string index), size and kind


class BytecodeLayoutError(ValueError):
    """MLIR's output is not laid out as this module expects: use MLIR's writer instead."""


def encode_varint(value: int) -> bytes:
    """MLIR's PrefixVarInt: n-1 low zero bits then a one, then the value, in n bytes (n <= 8);
    a zero byte and 8 little-endian bytes beyond 56 bits."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{value} does not fit a varint")
    for count in range(1, 9):
        if value < 1 << (7 * count):
            return (((value << 1) | 1) << (count - 1)).to_bytes(count, "little")
    return b"\x00" + value.to_bytes(8, "little")


def placeholder_key(index: int) -> str:
    return f"{_PLACEHOLDER_KEY.decode()}{index}"


def placeholder_bytes(index: int) -> bytes:
    return _PLACEHOLDER_MAGIC + index.to_bytes(8, "little")


class _Reader:
    """Reads MLIR bytecode primitives from `data[position:end]`; overruns raise."""

    def __init__(self, data: memoryview, position: int = 0, end: int | None = None):
        self.data, self.position = data, position
        self.end = len(data) if end is None else end

    @property
    def at_end(self) -> bool:
        return self.position == self.end

    def take(self, count: int) -> memoryview:
        if count < 0 or self.position + count > self.end:
            raise BytecodeLayoutError(f"{count} bytes wanted at {self.position}, past the end")
        start, self.position = self.position, self.position + count
        return self.data[start : self.position]

    def byte(self) -> int:
        return self.take(1)[0]

    def varint(self) -> int:
        first = self.byte()
        if first == 0:
            return int.from_bytes(self.take(8), "little")
        count = (first & -first).bit_length()  # trailing zero bits + 1
        return int.from_bytes(bytes([first]) + bytes(self.take(count - 1)), "little") >> count

    def alignment(self) -> int:
        value = self.varint()
        if value < 1 or value & (value - 1):
            raise BytecodeLayoutError(f"alignment {value} is not a power of two")
        return value

    def padding_to(self, alignment: int, origin: int) -> None:
        """Skips 0xCB bytes up to a multiple of `alignment` counted from `origin`."""
        while (self.position - origin) % alignment:
            if self.byte() != _ALIGNMENT_BYTE:
                raise BytecodeLayoutError(f"expected alignment byte 0xCB at {self.position - 1}")


def _padding(position: int, alignment: int) -> bytes:
    return b"\xcb" * (-position % alignment if alignment > 1 else 0)


class _Section(NamedTuple):
    id: int
    start: int  # of the header
    content_start: int
    end: int
    flagged: bool  # aligned: the header holds an alignment and padding


def _read_sections(data: memoryview) -> list[_Section]:
    """Every top-level section, after the header (magic, a known version, the producer)."""
    reader = _Reader(data)
    if bytes(reader.take(4)) != _MAGIC:
        raise BytecodeLayoutError("not MLIR bytecode")
    version = reader.varint()
    if version not in _KNOWN_VERSIONS:
        raise BytecodeLayoutError(f"bytecode version {version} is not one this writer knows")
    while reader.byte():  # the producer string
        pass
    sections = []
    while not reader.at_end:
        start, code = reader.position, reader.byte()
        section_id, flagged = code & ~_ALIGNED_FLAG, bool(code & _ALIGNED_FLAG)
        if section_id not in _KNOWN_SECTIONS:
            raise BytecodeLayoutError(f"unknown section id {section_id}")
        length = reader.varint()
        if flagged:
            reader.padding_to(reader.alignment(), 0)
        content_start = reader.position
        reader.take(length)
        sections.append(_Section(section_id, start, content_start, reader.position, flagged))
    return sections


def _read_offsets(content: memoryview) -> list[tuple[int, list[Entry]]]:
    """The resource offset section: groups of (dialect number, [(key index, size, kind)])."""
    reader = _Reader(content)
    if reader.varint() != 0:
        raise BytecodeLayoutError("external resource groups are not ours to rewrite")
    groups = []
    while not reader.at_end:
        group_key, count = reader.varint(), reader.varint()
        groups.append(
            (group_key, [(reader.varint(), reader.varint(), reader.byte()) for _ in range(count)])
        )
    return groups


def _read_entries(
    view: memoryview, resources: _Section, entries: list[Entry], blobs: list[ResourceBlob]
) -> list[int]:
    """The blob index each entry ((key, size, kind) each) stands for, in the writer's order;
    anything but our placeholders, filling the section once each, raises."""
    content = _Reader(view, resources.content_start, resources.end)
    order: list[int] = []
    for _, size, kind in entries:
        entry = _Reader(view, content.position, content.position + size)
        content.take(size)
        alignment, length = entry.alignment(), entry.varint()
        entry.padding_to(alignment, resources.content_start)
        data = bytes(entry.take(length)) if length == len(placeholder_bytes(0)) else b""
        index = int.from_bytes(data[len(_PLACEHOLDER_MAGIC) :], "little")
        if kind != _BLOB_KIND or not entry.at_end or data != placeholder_bytes(index):
            raise BytecodeLayoutError("a resource entry is not one of our placeholders")
        if index >= len(blobs) or blobs[index].alignment != alignment:
            raise BytecodeLayoutError(f"placeholder {index} does not match a blob")
        order.append(index)
    if not content.at_end or len(set(order)) != len(order):
        raise BytecodeLayoutError("resource entries do not cover the section once each")
    return order


def _read_strings(content: memoryview) -> list[memoryview]:
    """The string section: a count, the sizes (NUL included) in reverse, then the strings."""
    reader = _Reader(content)
    sizes = [reader.varint() for _ in range(reader.varint())][::-1]
    strings = [reader.take(size) for size in sizes]
    if not reader.at_end or any(not text or text[-1] != 0 for text in strings):
        raise BytecodeLayoutError("the string section is not NUL-terminated strings")
    return [text[:-1] for text in strings]


def _replace_keys(
    strings: list[memoryview], keys: list[int], order: list[int], blobs: list[ResourceBlob]
) -> tuple[bytes, list[int]]:
    """The string section with the real keys for the placeholder keys, and each entry's key.

    The writer adds the resource keys last, in entry order, reusing the index of an equal
    string already in the table (a Global's blob is often named as its symbol). So the
    placeholder keys must be the table's tail, in entry order; each real key is appended, or
    points at its earlier copy.
    """
    kept = len(strings) - len(order)
    if keys != list(range(kept, len(strings))) or any(
        bytes(strings[kept + at]) != placeholder_key(index).encode()
        for at, index in enumerate(order)
    ):
        raise BytecodeLayoutError("placeholder keys are not the string table's tail")
    table: list[Piece] = list(strings[:kept])
    string_index = {bytes(text): at for at, text in enumerate(table)}
    key_indices = []
    for index in order:
        key = blobs[index].name.encode()
        if key not in string_index:
            string_index[key] = len(table)
            table.append(key)
        key_indices.append(string_index[key])
    body = bytearray(encode_varint(len(table)))
    for text in reversed(table):
        body += encode_varint(len(text) + 1)
    for text in table:
        body += bytes(text) + b"\x00"
    return bytes(body), key_indices


def _section_header(section_id: int, length: int, position: int, alignment: int = 1) -> bytes:
    """An id and length at file offset `position`, aligned as MLIR's emitSection aligns."""
    header = bytes([section_id]) + encode_varint(length)
    if alignment > 1 and (position + len(header)) % alignment:
        header = bytes([section_id | _ALIGNED_FLAG]) + header[1:] + encode_varint(alignment)
        header += _padding(position + len(header), alignment)
    return header


def splice_blobs(data: bytes | memoryview, blobs: list[ResourceBlob]) -> list[Piece]:
    """MLIR's output for the placeholder module rebuilt with the real blobs (placeholder i
    stands for `blobs[i]`): the pieces to write in order, each blob as its Niro memoryview.
    Raises BytecodeLayoutError when the layout is not the expected one."""
    view = memoryview(data).cast("B")
    sections = _read_sections(view)
    ids = [section.id for section in sections]
    if any(ids.count(kind) != 1 for kind in (_RESOURCE_OFFSET, _RESOURCE, _STRING)):
        raise BytecodeLayoutError(f"unexpected sections {ids}")
    at = ids.index(_RESOURCE_OFFSET)
    offsets, tail = sections[at], sections[at + 2 :]
    # NOTE: only unaligned sections may follow the blobs: their new offsets change nothing.
    expected = ids[at + 1 : at + 2] == [_RESOURCE] and not offsets.flagged
    if not expected or any(part.id not in (_STRING, _PROPERTIES) or part.flagged for part in tail):
        raise BytecodeLayoutError(f"unexpected section layout {ids}")
    resources = sections[at + 1]
    groups = _read_offsets(view[offsets.content_start : offsets.end])
    entries = [entry for _, group in groups for entry in group]
    order = _read_entries(view, resources, entries, blobs)
    (strings,) = [section for section in tail if section.id == _STRING]
    table = _read_strings(view[strings.content_start : strings.end])
    string_body, key_indices = _replace_keys(table, [key for key, *_ in entries], order, blobs)
    # every placeholder key and blob is replaced (none hides elsewhere, e.g. in text form)
    whole = bytes(view)  # MLIR's output for the IR alone: small
    if any(whole.count(mark) != len(order) for mark in (_PLACEHOLDER_KEY, _PLACEHOLDER_MAGIC)):
        raise BytecodeLayoutError("a placeholder appears outside the resources")

    entry_heads, entry_sizes, size, alignment = [], [], 0, 1
    for index in order:
        blob = blobs[index]
        head = encode_varint(blob.alignment) + encode_varint(blob.data.nbytes)
        head += _padding(size + len(head), blob.alignment)
        entry_heads.append(head)
        entry_sizes.append(len(head) + blob.data.nbytes)
        size += entry_sizes[-1]
        alignment = max(alignment, blob.alignment)
    offset_content = bytearray(encode_varint(0))
    numbered = iter(zip(key_indices, entry_sizes, strict=True))
    for group_key, group in groups:
        offset_content += encode_varint(group_key) + encode_varint(len(group))
        for key_index, entry_size in (next(numbered) for _ in group):
            offset_content += encode_varint(key_index) + encode_varint(entry_size)
            offset_content.append(_BLOB_KIND)

    offset_header = _section_header(_RESOURCE_OFFSET, len(offset_content), offsets.start)
    position = offsets.start + len(offset_header) + len(offset_content)
    pieces: list[Piece] = [view[: offsets.start], offset_header, bytes(offset_content)]
    pieces.append(_section_header(_RESOURCE, size, position, alignment))
    for head, index in zip(entry_heads, order, strict=True):
        pieces += [head, blobs[index].data]
    for section in tail:
        if section.id == _PROPERTIES:
            pieces.append(view[section.start : section.end])
        else:
            pieces += [_section_header(_STRING, len(string_body), 0), string_body]
    return pieces


class BlobSplicingWriter:
    """Writes one lowered module's bytecode with `splice_blobs`. Owns its placeholders (a
    16-byte `dense_resource` per blob), made on the first write and kept with the context."""

    def __init__(
        self, module: mlir_ir.Module, resources: ResourceTable, *, min_bytes: int = SPLICE_MIN_BYTES
    ):
        self.module, self.resources, self.min_bytes = module, resources, min_bytes
        self.placeholders: dict[mlir_ir.Attribute, mlir_ir.Attribute] | None = None

    def write(self, write: Callable[[Piece], object], *, nested: bool = False) -> bool:
        """Writes the bytecode with `write` (called per piece, each blob as one memoryview);
        False, having written nothing, when MLIR's own writer should be used: the module holds
        less than `min_bytes` of our blobs, or its bytecode is laid out unexpectedly.
        `nested`: look inside array and dictionary attributes too (generic ops hold blobs)."""
        if self.resources.total_bytes < self.min_bytes:
            return False
        output = self.placeholder_output(nested=nested)
        try:
            pieces = splice_blobs(output, self.resources.blobs) if output else None
        except BytecodeLayoutError:
            pieces = None
        for piece in pieces or ():
            write(piece)
        return pieces is not None

    def placeholder_output(self, *, nested: bool = False) -> bytes | None:
        """MLIR's bytecode of the module with our blobs swapped for placeholders (None when it
        holds none); the module is left as it was."""
        with self.module.context:
            if self.placeholders is None:
                self.placeholders = self._make_placeholders()
            swaps = self._find_swaps(nested) if self.placeholders else []
        if not swaps:
            return None
        output = io.BytesIO()
        try:
            for operation, name, _, placeholder in swaps:
                operation.attributes[name] = placeholder
            self.module.operation.write_bytecode(output)
        finally:
            for operation, name, original, _ in reversed(swaps):
                operation.attributes[name] = original
        return output.getvalue()

    def _make_placeholders(self) -> dict[mlir_ir.Attribute, mlir_ir.Attribute]:
        """Real attribute -> placeholder; empty (so MLIR's writer is used) when a key is not
        the name the table recorded: the output would name the wrong blob."""
        placeholders: dict[mlir_ir.Attribute, mlir_ir.Attribute] = {}
        for index, blob in enumerate(self.resources.blobs):
            if blob.attribute is None or _resource_key(blob.attribute) != blob.name:
                return {}
            # NOTE: MLIR may rename a placeholder (its key taken): splice_blobs then refuses
            placeholders[blob.attribute] = mlir_ir.DenseResourceElementsAttr.get_from_buffer(
                bytearray(placeholder_bytes(index)),
                placeholder_key(index),
                blob.attribute.type,
                alignment=blob.alignment,
            )
        return placeholders

    def _find_swaps(self, nested: bool) -> list[tuple]:
        """(op, name, attribute, its placeholder form) for each op attribute with our blobs."""
        swaps = []

        def visit(operation: mlir_ir.Operation) -> mlir_ir.WalkResult:
            for name, attribute in operation.attributes.items():
                replaced = self._substitute(attribute, nested)
                if replaced is not attribute:
                    swaps.append((operation, name, attribute, replaced))
            return mlir_ir.WalkResult.ADVANCE

        self.module.operation.walk(visit)
        return swaps

    def _substitute(self, attribute: mlir_ir.Attribute, nested: bool) -> mlir_ir.Attribute:
        """`attribute` with our blobs swapped for placeholders; itself when it holds none."""
        assert self.placeholders is not None
        kind = type(attribute)  # NOTE: hashing every attribute of a big graph costs 2x more
        if kind is mlir_ir.Attribute or kind is mlir_ir.DenseResourceElementsAttr:
            return self.placeholders.get(attribute, attribute)
        if nested and isinstance(attribute, mlir_ir.ArrayAttr):
            items = list(attribute)
            replaced = [self._substitute(item, nested) for item in items]
            if any(new is not old for new, old in zip(replaced, items, strict=True)):
                return mlir_ir.ArrayAttr.get(replaced)
        elif nested and isinstance(attribute, mlir_ir.DictAttr):
            named = [attribute[at] for at in range(len(attribute))]
            replaced_by_name = {item.name: self._substitute(item.attr, nested) for item in named}
            if any(replaced_by_name[item.name] is not item.attr for item in named):
                return mlir_ir.DictAttr.get(replaced_by_name)
        return attribute


def _resource_key(attribute: mlir_ir.Attribute) -> str | None:
    """The key of a `dense_resource<key> : type` attribute (bare keys, as ours are)."""
    found = re.match(r"dense_resource<([A-Za-z0-9_.]+)>", str(attribute))
    return found.group(1) if found else None
