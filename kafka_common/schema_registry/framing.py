"""Confluent's wire framing, read column-wise and written row-wise.

A framed value is ``0x00`` + the schema id (4 bytes, big-endian) + the payload, or ``0x01``
+ a 16-byte schema GUID + the payload; Protobuf puts the message indexes (zigzag varints: a
count, then that many indexes; a lone ``0x00`` means the first message) before its
payload. Confluent's newer serializers may instead put the id (``0x00`` + id or ``0x01`` +
GUID, with the message indexes) in a ``__value_schema_id`` / ``__key_schema_id`` header and
leave the value unframed; a header, when present, wins, as in Confluent's
``dual_schema_id_deserializer``.

``read_frames`` works on an Arrow binary column (the reader's ``value`` or ``key``) with
NumPy over its buffers: no Python loop per row except for the rare rows with a GUID or with
message indexes other than the first message.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

__all__ = [
    "Frames",
    "read_frames",
    "frame",
    "message_index_bytes",
    "OK",
    "NULL",
    "BAD",
    "VALUE_HEADER",
    "KEY_HEADER",
]

VALUE_HEADER, KEY_HEADER = "__value_schema_id", "__key_schema_id"
OK, NULL, BAD = 0, 1, 2


@dataclass
class Frames:
    """What the framing says of each row: ``status`` (OK, NULL for a null value, BAD with a
    reason in ``reasons``), the schema ``ids`` (-1 when unknown or given by a GUID: see
    ``guids``), the row-relative ``starts`` of the payloads, and for Protobuf the message
    ``indexes`` of rows that do not use the first message (row -> index path)."""

    status: np.ndarray  # int8
    ids: np.ndarray  # int64
    starts: np.ndarray  # int32, bytes to skip in each value
    guids: dict[int, str]  # row -> GUID text, for rows framed with one
    indexes: dict[int, tuple[int, ...]]
    reasons: dict[int, str]


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated message index")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _read_indexes(buf: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    count, pos = _varint(buf, pos)
    count = _zigzag(count)
    if count == 0:
        return (0,), pos
    if count < 0 or count > 1000:
        raise ValueError(f"bad message index count {count}")
    out = []
    for _ in range(count):
        v, pos = _varint(buf, pos)
        out.append(_zigzag(v))
    return tuple(out), pos


def _header_values(headers: pa.Array | None, name: str, n: int) -> dict[int, bytes | None]:
    """Row -> the value of the last header called ``name`` (rows that have one; None for a
    header whose value is null, which the caller reports as a bad frame)."""
    if headers is None or headers.null_count == len(headers) or len(headers) == 0:
        return {}
    import pyarrow.compute as pc  # at first use: its import costs a fresh worker 0.1-0.3 s

    flat = headers.flatten()
    keys = flat.field("key")
    hits = np.flatnonzero(np.asarray(pc.equal(keys, name).fill_null(False)))
    if not len(hits):
        return {}
    offsets = np.asarray(headers.offsets)
    rows = np.searchsorted(offsets, hits + offsets[0], side="right") - 1
    values = flat.field("value")
    return {int(r): values[int(h)].as_py() for r, h in zip(rows, hits)}


def _column_bytes(values: pa.Array, n: int):
    """The binary column's value bytes and each row's begin and end in them."""
    bufs = values.buffers()
    offsets = (
        np.frombuffer(bufs[1], dtype=np.int32)[values.offset : values.offset + n + 1]
        if n
        else np.zeros(1, np.int32)
    )
    # The value buffer, as bytes (an empty column has no data buffer)
    data_buf = bufs[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    return data, offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)


def _read_ids(data, begin, v0, ids, starts) -> None:
    """The 4-byte schema id of the ``v0`` rows (magic byte 0), all at once."""
    if v0.all():
        b = begin
    elif v0.any():
        b = begin[v0]
    if v0.any():  # the 4 id bytes are inside each of these values (length >= 5)
        ids[v0] = (
            (data[b + 1].astype(np.int64) << 24)
            | (data[b + 2].astype(np.int64) << 16)
            | (data[b + 3].astype(np.int64) << 8)
            | data[b + 4].astype(np.int64)
        )
        starts[v0] = 5


def _apply_header_ids(frames: Frames, in_header: dict, header_name: str, protobuf: bool):
    """Rows whose schema id travels in header ``header_name``: the value is all payload."""
    status, ids, starts = frames.status, frames.ids, frames.starts
    guids, indexes, reasons = frames.guids, frames.indexes, frames.reasons
    for row, header in in_header.items():
        if status[row] == NULL:
            continue
        status[row] = OK
        starts[row] = 0
        guids.pop(row, None)
        try:
            if header is None:
                raise ValueError(f"header {header_name} has a null value, not a schema id")
            if len(header) >= 5 and header[0] == 0:
                ids[row] = struct.unpack(">I", header[1:5])[0]
                pos = 5
            elif len(header) >= 17 and header[0] == 1:
                ids[row] = -1
                guids[row] = str(uuid.UUID(bytes=header[1:17]))
                pos = 17
            else:
                raise ValueError(f"header {header_name} is not a schema id")
            if protobuf:
                path, _ = _read_indexes(header, pos)
                if path != (0,):
                    indexes[row] = path
        except ValueError as exc:
            status[row] = BAD
            reasons[row] = str(exc)


def _read_value_indexes(frames: Frames, data, begin, end) -> None:
    """Protobuf's message indexes after the id in the value: a lone 0 byte (the first
    message) at once for all rows, the others row by row."""
    status, starts, indexes, reasons = frames.status, frames.starts, frames.indexes, frames.reasons
    n = status.size
    framed = (status == OK) & (starts > 0) & (begin + starts < end)
    first = np.zeros(n, bool)
    first[framed] = data[(begin + starts)[framed]] == 0
    framed = (status == OK) & (starts > 0)
    starts[first] += 1
    for row in np.flatnonzero(framed & ~first):
        raw = data[begin[row] : end[row]].tobytes()
        try:
            path, pos = _read_indexes(raw, int(starts[row]))
        except ValueError as exc:
            status[row] = BAD
            reasons[int(row)] = str(exc)
            continue
        starts[row] = pos
        if path != (0,):
            indexes[int(row)] = path


def read_frames(
    values: pa.Array,
    *,
    protobuf: bool = False,
    headers: pa.Array | None = None,
    header_name: str = VALUE_HEADER,
    plain: bool = False,
) -> Frames:
    """Parse the framing of every row of the binary column ``values`` (see the module
    docstring); ``headers`` is the Kafka headers column, when the records have any.

    ``plain``: a non-empty value that starts with neither magic byte is an unframed payload
    (id -1, read from its first byte) rather than a corrupt one. Unambiguous for JSON text,
    which never starts with byte 0 or 1."""
    values = values.cast(pa.binary()) if values.type != pa.binary() else values
    n = len(values)
    data, begin, end = _column_bytes(values, n)
    length = end - begin
    valid = np.asarray(values.is_valid()) if values.null_count else np.ones(n, bool)
    status = np.where(valid, OK, NULL).astype(np.int8)
    ids = np.full(n, -1, np.int64)
    starts = np.zeros(n, np.int32)
    guids: dict[int, str] = {}
    indexes: dict[int, tuple[int, ...]] = {}
    reasons: dict[int, str] = {}

    in_header = _header_values(headers, header_name, n)
    magic = np.full(n, 255, np.int16)
    nonempty = valid & (length > 0)
    magic[nonempty] = data[begin[nonempty]]
    v0 = valid & (magic == 0) & (length >= 5)
    _read_ids(data, begin, v0, ids, starts)
    v1 = valid & (magic == 1) & (length >= 17)
    for row in np.flatnonzero(v1).tolist():
        at = int(begin[row])
        guids[int(row)] = str(uuid.UUID(bytes=data[at + 1 : at + 17].tobytes()))
        starts[row] = 17
    bad = valid & ~v0 & ~v1
    if plain:
        bad &= (magic == 0) | (magic == 1) | (length == 0)
    for row in np.flatnonzero(bad).tolist():
        if int(row) in in_header:
            continue
        status[row] = BAD
        reasons[int(row)] = "value is not in Confluent's wire format: " + (
            "it is empty"
            if length[row] == 0
            else f"magic byte {int(magic[row])}, {int(length[row])} bytes"
            if magic[row] in (0, 1)
            else f"unknown magic byte {int(magic[row])}"
        )
    frames = Frames(status, ids, starts, guids, indexes, reasons)
    _apply_header_ids(frames, in_header, header_name, protobuf)
    if protobuf:
        _read_value_indexes(frames, data, begin, end)
    return frames


def message_index_bytes(path: tuple[int, ...]) -> bytes:
    """The message-index varints Confluent's Protobuf serializer writes for ``path``."""
    if tuple(path) == (0,):
        return b"\x00"
    out = bytearray()
    for n in (len(path), *path):
        z = (n << 1) ^ (n >> 63)
        while True:
            byte = z & 0x7F
            z >>= 7
            out.append(byte | (0x80 if z else 0))
            if not z:
                break
    return bytes(out)


def frame(schema_id: int, message_path: tuple[int, ...] | None = None) -> bytes:
    """The prefix of a value framed with ``schema_id`` (magic 0), as Confluent's
    serializers write it (with Protobuf's message indexes when ``message_path``)."""
    prefix = struct.pack(">bI", 0, schema_id)
    return prefix + message_index_bytes(message_path) if message_path is not None else prefix
