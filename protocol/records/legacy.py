"""Message sets of magic 0 and 1: the formats before record batches (Kafka < 0.11).

Topics written long ago (or by old clients through a broker keeping an old
``log.message.format.version``) still hold them, and a broker serves them as they are.
Layout of one entry (big-endian)::

    offset int64 | messageSize int32 | crc uint32 | magic int8 | attributes int8 |
    [timestamp int64, magic 1 only] | keyLength int32 (-1 = null) | key |
    valueLength int32 (-1 = null) | value

The CRC is CRC-32 (zlib) over magic .. end. The attribute bits 0-2 name a codec; when set,
the value is a compressed message set (the "inner" messages) and the entry is only a
wrapper. Inside a magic 1 wrapper the inner offsets are relative (0, 1, 2...) and the
wrapper carries the absolute offset of the last inner message; inside a magic 0 wrapper
they are absolute. Attribute bit 3 of magic 1 is the timestamp type: with LogAppendTime the
wrapper's timestamp applies to every inner message.

Decoding is per message in Python: this is a compatibility path, not the hot one.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from ..errors import CorruptRecordError
from ..primitives import Buffer
from . import compression as _compression
from .batch import CREATE_TIME, LOG_APPEND_TIME, LOG_OVERHEAD, NO_TIMESTAMP_TYPE, Record

_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
#: messageSize of the smallest message: crc, magic, attributes, two null lengths.
MIN_MESSAGE_SIZE = {0: 14, 1: 22}


def _message(
    buf: Buffer, pos: int, *, topic: str | None, partition: int | None, verify_crc: bool
) -> tuple[int, int, int, int, memoryview | None, memoryview | None]:
    """Parse the entry at ``pos`` (complete, bounds checked by the caller).

    Returns (offset, magic, attributes, timestamp, key, value).
    """
    offset, size, crc, magic, attributes = _ENTRY.unpack_from(buf, pos)
    end = pos + LOG_OVERHEAD + size

    def bad(msg: str) -> CorruptRecordError:
        return CorruptRecordError(msg, topic=topic, partition=partition, offset=offset)

    if magic not in MIN_MESSAGE_SIZE:
        raise bad(f"message has magic {magic}, expected 0 or 1")
    if size < MIN_MESSAGE_SIZE[magic]:
        raise bad(f"message size {size} is below the minimum {MIN_MESSAGE_SIZE[magic]}")
    if verify_crc:
        actual = zlib.crc32(memoryview(buf)[pos + 16 : end])
        if actual != crc:
            raise bad(f"message CRC mismatch: stored {crc:#010x}, computed {actual:#010x}")
    p = pos + 18
    timestamp = -1
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(buf, p)
        p += 8
    blobs: list[memoryview | None] = []
    for what in ("key", "value"):
        if p + 4 > end:
            raise bad(f"message {what} length runs past the message")
        (length,) = _INT32.unpack_from(buf, p)
        p += 4
        if length < -1 or p + max(length, 0) > end:
            raise bad(f"message {what} length {length} does not fit the message")
        blobs.append(None if length < 0 else memoryview(buf)[p : p + length])
        p += max(length, 0)
    if p != end:
        raise bad(f"message has {end - p} bytes after its value")
    return offset, magic, attributes, timestamp, blobs[0], blobs[1]


def _timestamp_fields(magic: int, attributes: int, timestamp: int) -> tuple[int, int]:
    if magic == 0:
        return -1, NO_TIMESTAMP_TYPE
    return timestamp, LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME


def _record(offset: int, ts: int, key: Buffer | None, value: Buffer | None, ts_type: int) -> Record:
    """A ``Record`` of a legacy message (which has no headers), its key and value copied."""
    return Record(
        offset,
        ts,
        None if key is None else bytes(key),
        None if value is None else bytes(value),
        (),
        ts_type,
    )


def decode_entry(
    buf: Buffer,
    pos: int,
    *,
    topic: str | None = None,
    partition: int | None = None,
    max_decompressed: int = _compression.DEFAULT_MAX_DECOMPRESSED,
    verify_crc: bool = True,
) -> tuple[list[Record], int]:
    """Decode the complete legacy entry at ``pos``: its records and the entry's offset (the
    last offset it covers, wrapper or not)."""
    offset, magic, attributes, timestamp, key, value = _message(
        buf, pos, topic=topic, partition=partition, verify_crc=verify_crc
    )
    codec = attributes & CODEC_MASK
    if not codec:
        ts, ts_type = _timestamp_fields(magic, attributes, timestamp)
        return [_record(offset, ts, key, value, ts_type)], offset

    def bad(msg: str) -> CorruptRecordError:
        return CorruptRecordError(msg, topic=topic, partition=partition, offset=offset)

    if codec not in (_compression.GZIP, _compression.SNAPPY, _compression.LZ4):
        raise bad(f"message uses unknown compression codec id {codec}")
    if value is None:
        raise bad("compressed message has a null value")
    if codec == _compression.LZ4:
        inner = _compression.CODECS[codec].decompress(
            value,
            max_size=max_decompressed,
            topic=topic,
            partition=partition,
            offset=offset,
            legacy_header=magic == 0,
        )
    else:
        inner = _compression.decompress(
            codec, value, max_size=max_decompressed, topic=topic, partition=partition, offset=offset
        )
    messages = _inner_messages(inner, bad, topic, partition, verify_crc)
    if not messages:
        raise bad("compressed message holds no messages")
    if magic >= 1:
        base = offset - messages[-1][0]  # inner offsets are relative; wrapper has the last
    else:
        base = 0
    out = []
    prev = None
    for i_offset, i_magic, i_attrs, i_ts, i_key, i_value in messages:
        if i_attrs & CODEC_MASK:
            raise bad("compressed message nested inside a compressed message")
        absolute = base + i_offset
        if absolute < 0 or (prev is not None and absolute <= prev):
            raise bad(f"inner message offset {absolute} is negative or out of order")
        prev = absolute
        if magic >= 1 and attributes & TIMESTAMP_TYPE_MASK:
            ts, ts_type = timestamp, LOG_APPEND_TIME
        else:
            ts, ts_type = _timestamp_fields(i_magic, i_attrs, i_ts)
        out.append(_record(absolute, ts, i_key, i_value, ts_type))
    return out, offset


def _inner_messages(
    inner: Buffer,
    bad: Callable[[str], CorruptRecordError],
    topic: str | None,
    partition: int | None,
    verify_crc: bool,
) -> list[tuple[int, int, int, int, memoryview | None, memoryview | None]]:
    """The messages of a decompressed wrapper's message set, each one checked to fit."""
    messages = []
    p = 0
    n = len(inner)
    while p < n:
        if n - p < LOG_OVERHEAD + MIN_MESSAGE_SIZE[0]:
            raise bad("compressed message set ends inside a message")
        (size,) = _INT32.unpack_from(inner, p + 8)
        if size < MIN_MESSAGE_SIZE[0] or p + LOG_OVERHEAD + size > n:
            raise bad(f"inner message size {size} does not fit the compressed message set")
        messages.append(_message(inner, p, topic=topic, partition=partition, verify_crc=verify_crc))
        p += LOG_OVERHEAD + size
    return messages
