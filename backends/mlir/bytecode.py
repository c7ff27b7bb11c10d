"""`.mlirbc` output whose resource blobs are written from the Niro buffers, never copied.

Why: MLIR's Python bindings hand every chunk of the bytecode writer's output to Python as a new
`bytes` object, so each weight blob costs one full copy (a 1 GB model: 1 GB more peak memory,
and the time to make it). Here MLIR's writer writes everything except the blob bytes: the
module is written once with each blob attribute swapped for a 16-byte placeholder blob (made
once per module, recognisable by its bytes and its key), the attributes are swapped back, and
that small output is re-emitted with the resource section rebuilt around the real bytes, which
are streamed from the Niro buffers by the caller (in 1 MiB pieces, see `output.py`).

The swap is done on the module itself, not on a copy: a clone or a reparse could number the IR
differently (use-list orders, attribute order), and the output must be byte-for-byte what
MLIR's writer makes of the module. The placeholders keep every attribute's place and numbering,
so only three things differ, and they are rebuilt exactly as `BytecodeWriter.cpp` builds them:
the resource section (5) gets the real blobs (each entry: varint alignment, varint size,
0xCB padding to the alignment counted from the section's start, the bytes; the section itself
aligned in the file to its largest blob alignment, flagged with the high bit of its id), the
resource offset section (6) the new entry sizes and key strings, and the string section (0)
the real keys in place of the placeholder keys (which the writer adds last, after every
string of the IR, in entry order). Every other section is kept byte for byte.

Bytecode layout: magic `ML\\xefR`, varint version, NUL-terminated producer, then sections:
an id byte (high bit: an alignment follows), a varint length, [varint alignment, padding],
the content. Varints are MLIR's PrefixVarInt. Anything not laid out as expected (an unknown
version or section, a blob that is not ours, a string-table surprise) raises
`BytecodeLayoutError` before anything is written, and the caller uses MLIR's own writer: a
slower file, never a wrong one.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from .bindings import ir
from .literals import ResourceBlob, ResourceTable

__all__ = ["BytecodeLayoutError", "BlobSplicingWriter", "encode_varint", "splice_blobs"]

_MAGIC = b"ML\xefR"
_KNOWN_VERSIONS = range(1, 7)
"""Bytecode versions whose top-level layout and resource encoding this module was checked on."""
_ALIGNMENT_BYTE = 0xCB
_ALIGNED_FLAG = 0x80
_STRING, _RESOURCE, _RESOURCE_OFFSET, _PROPERTIES = 0, 5, 6, 8
_KNOWN_SECTIONS = range(0, 9)
_BLOB_KIND = 0
_PLACEHOLDER_MAGIC = b"niro\xefPH\x00"
_PLACEHOLDER_SIZE = len(_PLACEHOLDER_MAGIC) + 8

Piece = bytes | memoryview


class BytecodeLayoutError(ValueError):
    """MLIR's output is not laid out as this module expects (see the module docstring)."""


def encode_varint(value: int) -> bytes:
    """MLIR's PrefixVarInt: n-1 low zero bits then a one, then the value, in n bytes (n <= 8);
    a zero byte and 8 little-endian bytes beyond 56 bits."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{value} does not fit a varint")
    for count in range(1, 9):
        if value < 1 << (7 * count):
            return ((((value << 1) | 1) << (count - 1)).to_bytes(count, "little"))
    return b"\x00" + value.to_bytes(8, "little")


def placeholder_key(index: int) -> str:
    return f"niro.bytecode_placeholder.{index}"


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
        count = (first & -first).bit_length()  # trailing zeros + 1
        rest = self.take(count - 1)
        return int.from_bytes(bytes([first]) + bytes(rest), "little") >> count

    def padding_to(self, alignment: int, origin: int) -> None:
        """Skips 0xCB bytes up to a multiple of `alignment` counted from `origin`."""
        while (self.position - origin) % alignment:
            if self.byte() != _ALIGNMENT_BYTE:
                raise BytecodeLayoutError(f"expected alignment byte 0xCB at {self.position - 1}")


def _padding(position: int, alignment: int) -> bytes:
    return b"\xcb" * (-position % alignment if alignment > 1 else 0)


def _read_sections(data: memoryview) -> dict[str, object]:
    """The header's end and every top-level section as (id, header start, content start, end,
    flagged)."""
    reader = _Reader(data)
    if bytes(reader.take(4)) != _MAGIC:
        raise BytecodeLayoutError("not MLIR bytecode")
    version = reader.varint()
    if version not in _KNOWN_VERSIONS:
        raise BytecodeLayoutError(f"bytecode version {version} is not one this writer knows")
    while reader.byte() != 0:  # the producer string
        pass
    header_end, sections = reader.position, []
    while not reader.at_end:
        start = reader.position
        code = reader.byte()
        section_id, flagged = code & ~_ALIGNED_FLAG, bool(code & _ALIGNED_FLAG)
        if section_id not in _KNOWN_SECTIONS:
            raise BytecodeLayoutError(f"unknown section id {section_id}")
        length = reader.varint()
        if flagged:
            alignment = reader.varint()
            if alignment < 1 or alignment & (alignment - 1):
                raise BytecodeLayoutError(f"section alignment {alignment} is not a power of two")
            reader.padding_to(alignment, 0)
        content_start = reader.position
        reader.take(length)
        sections.append((section_id, start, content_start, reader.position, flagged))
    return {"header_end": header_end, "sections": sections}


def _read_offsets(content: memoryview) -> list[tuple[int, list[tuple[int, int, int]]]]:
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


def _read_placeholder(entry: _Reader, origin: int, blobs: list[ResourceBlob]) -> int:
    """The blob index a placeholder entry stands for (its alignment checked)."""
    alignment, size = entry.varint(), entry.varint()
    if alignment < 1 or alignment & (alignment - 1):
        raise BytecodeLayoutError(f"blob alignment {alignment} is not a power of two")
    entry.padding_to(alignment, origin)
    data = bytes(entry.take(size))
    if not entry.at_end or size != _PLACEHOLDER_SIZE or not data.startswith(_PLACEHOLDER_MAGIC):
        raise BytecodeLayoutError("a resource blob is not one of our placeholders")
    index = int.from_bytes(data[len(_PLACEHOLDER_MAGIC) :], "little")
    if index >= len(blobs) or blobs[index].alignment != alignment:
        raise BytecodeLayoutError(f"placeholder {index} does not match its blob")
    return index


def _read_strings(content: memoryview) -> list[memoryview]:
    """The string section: a count, the sizes (NUL included) in reverse, then the strings."""
    reader = _Reader(content)
    sizes = [reader.varint() for _ in range(reader.varint())][::-1]
    strings = []
    for size in sizes:
        text = reader.take(size)
        if size == 0 or text[-1] != 0:
            raise BytecodeLayoutError("a string is not NUL-terminated")
        strings.append(text[:-1])
    if not reader.at_end:
        raise BytecodeLayoutError("trailing bytes in the string section")
    return strings


def _section_header(section_id: int, length: int, position: int, alignment: int) -> bytes:
    """An id and length at file offset `position`, aligned as MLIR's emitSection aligns."""
    header = bytes([section_id]) + encode_varint(length)
    if alignment > 1 and (position + len(header)) % alignment:
        header = bytes([section_id | _ALIGNED_FLAG]) + header[1:] + encode_varint(alignment)
        header += _padding(position + len(header), alignment)
    return header


def splice_blobs(data: bytes | memoryview, blobs: list[ResourceBlob]) -> list[Piece]:
    """MLIR's output for the placeholder module, rebuilt with the real blobs of `blobs` (the
    placeholder for index i stands for `blobs[i]`): the pieces to write in order, the blobs'
    bytes as the Niro memoryviews themselves. Raises BytecodeLayoutError, having written
    nothing, when the layout is not the expected one."""
    view = memoryview(data).cast("B")
    sections = _read_sections(view)["sections"]
    ids = [section[0] for section in sections]
    if ids.count(_RESOURCE_OFFSET) != 1 or ids.count(_RESOURCE) != 1 or ids.count(_STRING) != 1:
        raise BytecodeLayoutError(f"unexpected sections {ids}")
    at = ids.index(_RESOURCE_OFFSET)
    tail = sections[at + 2 :]
    if ids[at + 1] != _RESOURCE or any(
        section[0] not in (_STRING, _PROPERTIES) or section[4] for section in tail
    ):
        raise BytecodeLayoutError(f"unexpected sections after the resources {ids}")
    offsets, resources = sections[at], sections[at + 1]

    # the placeholder entries, in the writer's order
    groups = _read_offsets(view[offsets[2] : offsets[3]])
    content = _Reader(view, resources[2], resources[3])
    order: list[int] = []
    for _, entries in groups:
        for _, size, kind in entries:
            if kind != _BLOB_KIND:
                raise BytecodeLayoutError("a resource entry is not a blob")
            entry = _Reader(view, content.position, content.position + size)
            content.take(size)
            order.append(_read_placeholder(entry, resources[2], blobs))
    if not content.at_end or len(set(order)) != len(order):
        raise BytecodeLayoutError("resource entries do not cover the section once each")

    # the placeholder keys are the last strings; the real keys take their place, or an
    # earlier equal string's index, as the writer's deduplicating string table would
    strings_section = tail[[section[0] for section in tail].index(_STRING)]
    strings = _read_strings(view[strings_section[2] : strings_section[3]])
    kept = len(strings) - len(order)
    placeholder_keys = [key for _, entries in groups for key, _, _ in entries]
    if placeholder_keys != list(range(kept, len(strings))) or any(
        bytes(strings[kept + at]) != placeholder_key(index).encode()
        for at, index in enumerate(order)
    ):
        raise BytecodeLayoutError("placeholder keys are not the string table's tail")
    new_strings: list[Piece] = list(strings[:kept])
    string_index = {bytes(text): at for at, text in reversed(list(enumerate(new_strings)))}
    key_indices = []
    for index in order:
        key = blobs[index].name.encode()
        if key not in string_index:
            string_index[key] = len(new_strings)
            new_strings.append(key)
        key_indices.append(string_index[key])

    # the resource section: entries laid out as the writer lays them out
    entry_heads, entry_sizes, position, alignment = [], [], 0, 1
    for index in order:
        blob = blobs[index]
        head = encode_varint(blob.alignment) + encode_varint(blob.data.nbytes)
        head += _padding(position + len(head), blob.alignment)
        entry_heads.append(head)
        entry_sizes.append(len(head) + blob.data.nbytes)
        position += entry_sizes[-1]
        if blob.alignment > 1:
            alignment = max(alignment, blob.alignment)

    offset_content = bytearray(encode_varint(0))
    entry_number = 0
    for group_key, entries in groups:
        offset_content += encode_varint(group_key) + encode_varint(len(entries))
        for _ in entries:
            offset_content += encode_varint(key_indices[entry_number])
            offset_content += encode_varint(entry_sizes[entry_number]) + bytes([_BLOB_KIND])
            entry_number += 1

    pieces: list[Piece] = [view[: offsets[1]]]
    offset_header = _section_header(_RESOURCE_OFFSET, len(offset_content), 0, 1)
    pieces += [offset_header, bytes(offset_content)]
    file_position = offsets[1] + len(offset_header) + len(offset_content)
    pieces.append(_section_header(_RESOURCE, position, file_position, alignment))
    for head, index in zip(entry_heads, order):
        pieces += [head, blobs[index].data]
    for section in tail:
        if section[0] == _PROPERTIES:
            pieces.append(view[section[1] : section[3]])
            continue
        body = bytearray(encode_varint(len(new_strings)))
        for text in reversed(new_strings):
            body += encode_varint(len(text) + 1)
        for text in new_strings:
            body += text
            body.append(0)
        pieces += [_section_header(_STRING, len(body), 0, 1), bytes(body)]
    return pieces


class BlobSplicingWriter:
    """Writes one lowered module's bytecode with `splice_blobs`; owns its placeholders.

    The placeholders (one 16-byte `dense_resource` per blob, in the module's context) are made
    once and kept with the context. `write` returns False, having written nothing, when MLIR's
    own writer must be used instead (no blobs in the module, or an unexpected layout).
    """

    def __init__(self, module: ir.Module, resources: ResourceTable, *, nested: bool):
        self.module, self.blobs, self.nested = module, resources.blobs, nested
        self.placeholders: dict[ir.Attribute, ir.Attribute] | None = None

    def _make_placeholders(self) -> dict[ir.Attribute, ir.Attribute]:
        """Real attribute -> its placeholder; empty when a blob's key is not its recorded name
        (MLIR renamed it), since the output would then name the wrong blob."""
        placeholders: dict[ir.Attribute, ir.Attribute] = {}
        for index, blob in enumerate(self.blobs):
            if blob.attribute is None or _resource_key(blob.attribute) != blob.name:
                return {}
            placeholder = ir.DenseResourceElementsAttr.get_from_buffer(
                bytearray(placeholder_bytes(index)),
                placeholder_key(index),
                blob.attribute.type,
                alignment=blob.alignment,
            )
            if _resource_key(placeholder) != placeholder_key(index):
                return {}
            placeholders[blob.attribute] = placeholder
        return placeholders

    def write(self, write: Callable[[Piece], object]) -> bool:
        """Writes the bytecode with `write` (called per piece, blobs as whole memoryviews)."""
        if self.placeholders is None:
            self.placeholders = self._make_placeholders()
        swaps = self._find_swaps() if self.placeholders else []
        if not swaps:
            return False
        output = io.BytesIO()
        try:
            for operation, name, _, placeholder in swaps:
                operation.attributes[name] = placeholder
            self.module.operation.write_bytecode(output)
        finally:
            for operation, name, original, _ in reversed(swaps):
                operation.attributes[name] = original
        try:
            pieces = splice_blobs(output.getbuffer(), self.blobs)
        except BytecodeLayoutError:
            return False
        for piece in pieces:
            write(piece)
        return True

    def _find_swaps(self) -> list[tuple[ir.Operation, str, ir.Attribute, ir.Attribute]]:
        """(op, attribute name, attribute, placeholder form) for every op attribute holding one
        of our blobs; inside arrays and dictionaries too when the module has generic ops."""
        swaps = []

        def visit(operation: ir.Operation) -> ir.WalkResult:
            for name, attribute in operation.attributes.items():
                replaced = self._substitute(attribute)
                if replaced is not None:
                    swaps.append((operation, name, attribute, replaced))
            return ir.WalkResult.ADVANCE

        self.module.operation.walk(visit)
        return swaps

    def _substitute(self, attribute: ir.Attribute) -> ir.Attribute | None:
        """`attribute` with its blobs replaced by placeholders; None when it holds none."""
        assert self.placeholders is not None
        found = self.placeholders.get(attribute)
        if found is not None or not self.nested:
            return found
        if isinstance(attribute, ir.ArrayAttr):
            items = list(attribute)
            replaced = [self._substitute(item) for item in items]
            if any(item is not None for item in replaced):
                return ir.ArrayAttr.get(
                    [new if new is not None else old for new, old in zip(replaced, items)]
                )
        elif isinstance(attribute, ir.DictAttr):
            named = [attribute[at] for at in range(len(attribute))]
            replaced = [self._substitute(item.attr) for item in named]
            if any(item is not None for item in replaced):
                return ir.DictAttr.get(
                    {
                        item.name: new if new is not None else item.attr
                        for new, item in zip(replaced, named)
                    }
                )
        return None


def _resource_key(attribute: ir.Attribute) -> str | None:
    """The blob key a `dense_resource<key> : type` attribute prints (bare keys only)."""
    text = str(attribute)
    prefix = "dense_resource<"
    if not text.startswith(prefix) or ">" not in text:
        return None
    return text[len(prefix) : text.index(">")]
