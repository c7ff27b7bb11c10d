"""Inline weights without copies: split main-graph initializers' `raw_data` out of a serialized
ModelProto before protobuf parses it.

Parsing copies every byte into the message, and reading a bytes field copies it again, so an
inline weight would be held two or three times. Instead the importer maps the model file, and
`split_raw_data` walks the protobuf wire format to find each main-graph initializer's
`raw_data` (ModelProto.graph = field 7 -> GraphProto.initializer = 5 -> TensorProto.name = 8,
raw_data = 9) and re-encodes the message without those fields. Protobuf parses the small
remainder; the Globals get memoryviews into the mapped file at the recorded spans.

Anything unexpected (malformed bytes, a merged graph field, duplicate initializer names) makes
`split_raw_data` return None, and the importer parses the file as it is (and copies): this is an
optimisation, never a source of truth.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["split_raw_data"]

_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_NAME = 8
_TENSOR_RAW_DATA = 9
_LENGTH_DELIMITED = 2


class _WireError(ValueError):
    pass


def _varint(data, position: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise _WireError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _fields(data, start: int, end: int) -> Iterator[tuple[int, int, int, int, int, int]]:
    """(field number, wire type, field start, key end, value start, value end) of each field;
    for a length-delimited field the length prefix lies between key end and value start."""
    size = len(data)
    position = start
    while position < end:
        field_start = position
        key = data[position]
        if key < 0x80:  # NOTE: one-byte keys and lengths (nearly all) skip _varint's loop
            position += 1
        else:
            key, position = _varint(data, position)
        field, wire_type = key >> 3, key & 7
        key_end = value_start = position
        if wire_type == 0:
            _, position = _varint(data, position)
        elif wire_type == 1:
            position += 8
        elif wire_type == 5:
            position += 4
        elif wire_type == _LENGTH_DELIMITED:
            if position < size and data[position] < 0x80:
                length, value_start = data[position], position + 1
            else:
                length, value_start = _varint(data, position)
            position = value_start + length
        else:
            raise _WireError(f"unsupported wire type {wire_type}")
        if position > end:
            raise _WireError("field runs past its message")
        yield field, wire_type, field_start, key_end, value_start, position


def _submessage(out: bytearray, key_bytes, body: bytes) -> None:
    out += key_bytes
    out += _encode_varint(len(body))
    out += body


def _split_tensor(data, start: int, end: int, spans: dict[str, tuple[int, int]]) -> bytes:
    out = bytearray()
    name: str | None = None
    raw: tuple[int, int] | None = None
    for field, wire_type, field_start, _, value_start, value_end in _fields(data, start, end):
        if field == _TENSOR_RAW_DATA and wire_type == _LENGTH_DELIMITED:
            if raw is not None:
                raise _WireError("raw_data given twice")
            raw = (value_start, value_end)
            continue
        if field == _TENSOR_NAME and wire_type == _LENGTH_DELIMITED:
            name = bytes(data[value_start:value_end]).decode("utf-8")
        out += data[field_start:value_end]
    if raw is not None:
        if name is None or name in spans:
            raise _WireError("unnamed or duplicate initializer")
        spans[name] = raw
    return bytes(out)


def _split_graph(data, start: int, end: int, spans: dict[str, tuple[int, int]]) -> bytes:
    """The graph's bytes without its initializers' raw_data; the other fields are copied a run
    at a time (a node is one field: copying each on its own cost a slice per node)."""
    out = bytearray()
    run_start = start
    for field, wire_type, field_start, key_end, value_start, value_end in _fields(data, start, end):
        if field == _GRAPH_INITIALIZER and wire_type == _LENGTH_DELIMITED:
            out += data[run_start:field_start]
            _submessage(out, data[field_start:key_end], _split_tensor(data, value_start, value_end, spans))
            run_start = value_end
    out += data[run_start:end]
    return bytes(out)


def split_raw_data(data) -> tuple[bytes, dict[str, tuple[int, int]]] | None:
    """(the model's bytes without main-graph initializers' raw_data, {initializer name: (start,
    end) of its raw_data in `data`}), or None when the bytes are not what this walker expects."""
    try:
        out = bytearray()
        spans: dict[str, tuple[int, int]] = {}
        graphs = 0
        for field, wire_type, field_start, key_end, value_start, value_end in _fields(data, 0, len(data)):
            if field == _MODEL_GRAPH and wire_type == _LENGTH_DELIMITED:
                graphs += 1
                _submessage(out, data[field_start:key_end], _split_graph(data, value_start, value_end, spans))
            else:
                out += data[field_start:value_end]
        if graphs != 1:
            return None
        return bytes(out), spans
    except (_WireError, UnicodeDecodeError):
        return None
