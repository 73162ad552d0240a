"""The reference decoder of record batches v2: per record, pure Python, obviously correct.
The hot path (``decode_arrow``) is checked against it by the tests, and falls back on it for
the rare batch it does not handle; the dead-letter code reads its own batches with it."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CorruptRecordError, ProtocolError
from ..primitives import Buffer, read_varint, read_varlong
from . import compression as _compression
from .batch import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    MIN_RECORD_SIZE,
    BatchHeader,
    Record,
    check_crc,
    check_header,
    parse_header,
    records_section,
)


def parse_records(
    data: Buffer, h: BatchHeader, *, topic: str | None = None, partition: int | None = None
) -> list[Record]:
    """Decode the records of a batch one by one (the reference for the vectorised path)."""
    out = []
    pos = 0
    end = len(data)
    prev_delta = -1
    try:
        for _ in range(h.record_count):
            record, pos = _parse_record(data, pos, h, prev_delta, topic, partition)
            prev_delta = record.offset - h.base_offset
            out.append(record)
    except ProtocolError as e:
        if isinstance(e, CorruptRecordError):
            raise
        raise h.corrupt(f"malformed record: {e}", topic, partition) from None
    if pos != end:
        raise h.corrupt(
            f"record batch has {end - pos} bytes after its {h.record_count} records",
            topic,
            partition,
        )
    return out


def _parse_record(
    data: Buffer,
    pos: int,
    h: BatchHeader,
    prev_delta: int,
    topic: str | None,
    partition: int | None,
) -> tuple[Record, int]:
    """The record at ``pos`` and the position after it."""
    start_pos = pos
    length, pos = read_varint(data, pos)
    if length < MIN_RECORD_SIZE - 1 or pos + length > len(data):
        raise h.corrupt(
            f"record length {length} at byte {start_pos} does not fit the batch", topic, partition
        )
    rec_end = pos + length
    pos += 1  # attributes: unused
    ts_delta, pos = read_varlong(data, pos)
    offset_delta, pos = read_varint(data, pos)
    if not prev_delta < offset_delta <= h.last_offset_delta:
        raise h.corrupt(
            f"record offset delta {offset_delta} out of order or beyond the last "
            f"offset delta {h.last_offset_delta}",
            topic,
            partition,
        )
    offset = h.base_offset + offset_delta

    def bad(message: str) -> CorruptRecordError:
        return CorruptRecordError(message, topic=topic, partition=partition, offset=offset)

    blobs = []
    for what in ("key", "value"):
        size, pos = read_varint(data, pos)
        if size < -1 or pos + max(size, 0) > rec_end:
            raise bad(f"record {what} length {size} does not fit")
        blobs.append(None if size < 0 else bytes(data[pos : pos + size]))
        pos += max(size, 0)
    headers, pos = _parse_headers(data, pos, rec_end, bad)
    if pos != rec_end:
        raise bad(f"record fields end at byte {pos}, its length says {rec_end}")
    ts = h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME else h.base_timestamp + ts_delta
    return Record(offset, ts, blobs[0], blobs[1], headers, h.timestamp_type), pos


def _parse_headers(
    data: Buffer, pos: int, rec_end: int, bad: Callable[[str], CorruptRecordError]
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """A record's headers (key, value or None) and the position after them."""
    count, pos = read_varint(data, pos)
    if count < 0 or count > (rec_end - pos) // 2:
        raise bad(f"record header count {count} does not fit")
    headers = []
    for _h in range(count):
        size, pos = read_varint(data, pos)
        if size < 0 or pos + size > rec_end:
            raise bad(f"record header key length {size} does not fit")
        h_key = bytes(data[pos : pos + size]).decode("utf-8", "replace")
        pos += size
        size, pos = read_varint(data, pos)
        if size < -1 or pos + max(size, 0) > rec_end:
            raise bad(f"record header value length {size} does not fit")
        headers.append((h_key, None if size < 0 else bytes(data[pos : pos + size])))
        pos += max(size, 0)
    return tuple(headers), pos


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    topic: str | None = None,
    partition: int | None = None,
    max_decompressed: int = _compression.DEFAULT_MAX_DECOMPRESSED,
    verify_crc: bool = True,
) -> tuple[BatchHeader, list[Record]]:
    """Reference decoder of the complete v2 batch at ``pos``."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            "record batch shorter than its 61-byte header", topic=topic, partition=partition
        )
    h = parse_header(buf, pos)
    check_header(h, topic=topic, partition=partition)
    if pos + h.size > len(buf):
        raise h.corrupt(f"record batch of {h.size} bytes is truncated", topic, partition)
    view = memoryview(buf)[pos : pos + h.size]
    if verify_crc:
        check_crc(view, h.crc, h.base_offset, topic, partition)
    data = records_section(
        view,
        h.compression,
        h.record_count,
        h.base_offset,
        topic=topic,
        partition=partition,
        max_decompressed=max_decompressed,
    )
    return h, parse_records(data, h, topic=topic, partition=partition)
