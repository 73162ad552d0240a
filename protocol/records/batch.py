"""Record batch v2 (magic 2): the header layout (its offsets, masks and checks), control
records, and the reference encoder: the slow, obviously-correct path, per record in pure
Python. The hot paths are ``decode_arrow``/``encode_arrow``; tests check one against the
other (the reference decoder is ``reference_decode``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, cast

from ..errors import CorruptRecordError
from ..primitives import Buffer, write_varint, write_varlong
from . import compression as _compression
from .checksum import crc32c

# ---- header layout -------------------------------------------------------------------------
#
# Wire layout of one batch (all integers big-endian; varints are zigzag LEB128):
#
#   offset size field                    covered by CRC
#   0      8    baseOffset int64          no
#   8      4    batchLength int32         no   (bytes after this field: size = 12 + batchLength)
#   12     4    partitionLeaderEpoch      no
#   16     1    magic int8 (= 2)          no
#   17     4    crc uint32 (CRC-32C)      no   (of bytes 21 .. end of batch)
#   21     2    attributes int16          yes  bits 0-2 codec, 3 timestamp type (1 = LogAppendTime),
#                                              4 transactional, 5 control, 6 delete horizon
#   23     4    lastOffsetDelta int32     yes
#   27     8    baseTimestamp int64       yes  (the delete horizon when bit 6 is set)
#   35     8    maxTimestamp int64        yes
#   43     8    producerId int64          yes
#   51     2    producerEpoch int16       yes
#   53     4    baseSequence int32        yes
#   57     4    recordCount int32         yes
#   61     -    records                   yes  (compressed as one block when codec != 0)
#
#   Record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
#           keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
#           headerCount varint | headers: keyLength varint | key (UTF-8) |
#                                         valueLength varint (-1 = null) | value
#
# A record's offset is baseOffset + offsetDelta and its timestamp baseTimestamp +
# timestampDelta, or maxTimestamp for every record when the batch says LogAppendTime.

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORD_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

#: Size of the batch header; also the smallest possible batch.
BATCH_HEADER_SIZE = RECORDS_OFFSET
#: Bytes before batchLength's count starts (baseOffset + batchLength).
LOG_OVERHEAD = 12
#: The smallest legal batchLength (a batch without records).
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
#: The fewest bytes a record can take: length, attributes, timestamp delta, offset delta,
#: key length, value length and header count, one byte each.
MIN_RECORD_SIZE = 7

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP_TYPE = -1  # magic 0 messages carry no timestamp

MAGIC_V2 = 2

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
assert HEADER_STRUCT.size == BATCH_HEADER_SIZE
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength: the same in every message format
_UINT32 = struct.Struct(">I")

# ---- header --------------------------------------------------------------------------------


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    def corrupt(self, message: str, topic: str | None, partition: int | None) -> CorruptRecordError:
        """The error for this batch's bad data, at its base offset."""
        return CorruptRecordError(
            message, topic=topic, partition=partition, offset=self.base_offset
        )

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Unpack the header at ``pos``; the caller has checked that 61 bytes are there."""
    return BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))


# ---- records -------------------------------------------------------------------------------


class Record(NamedTuple):
    """One record as the reference codec sees it (absolute offset and timestamp)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: int = CREATE_TIME


ABORT = 0
COMMIT = 1


def control_type(key: bytes | None) -> int | None:
    """The type of a control record from its key; None when the key is not one."""
    if key is None or len(key) < 4:
        return None
    return cast(int, struct.unpack_from(">hh", key)[1])


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes | None]] = (),
    attributes: int = 0,
) -> None:
    """Append one record, length prefix included, to ``out``."""
    body = bytearray()
    body.append(attributes & 0xFF)
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(blob))
            body += blob
    headers = list(headers)
    write_varint(body, len(headers))
    for h_key, h_value in headers:
        raw = h_key.encode("utf-8") if isinstance(h_key, str) else bytes(h_key)
        write_varint(body, len(raw))
        body += raw
        if h_value is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(h_value))
            body += h_value
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[Any],
    *,
    base_offset: int | None = None,
    compression: str | int = 0,
    compression_level: int | None = None,
    timestamp_type: int = CREATE_TIME,
    transactional: bool = False,
    control: bool = False,
    delete_horizon: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    magic: int = MAGIC_V2,
    crc: int | None = None,
    record_count: int | None = None,
) -> bytes:
    """Reference encoder: one v2 batch from ``Record``s (or (offset, timestamp, key, value[,
    headers]) tuples) with absolute offsets and timestamps.

    Every header field can be forced (``crc``, ``record_count``, ``magic``...) so tests can
    build exactly the malformed batch they need.
    """
    recs = [r if isinstance(r, Record) else Record(*r) for r in records]
    if base_offset is None:
        base_offset = recs[0].offset if recs else 0
    if base_timestamp is None:
        base_timestamp = recs[0].timestamp if recs else -1
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in recs), default=-1)
    if last_offset_delta is None:
        last_offset_delta = (recs[-1].offset - base_offset) if recs else 0
    encoded = bytearray()
    for r in recs:
        encode_record(
            encoded, r.offset - base_offset, r.timestamp - base_timestamp, r.key, r.value, r.headers
        )
    body: bytes | bytearray = encoded
    codec = _compression.codec_id(compression)
    if codec:
        body = _compression.compress(codec, bytes(encoded), level=compression_level)
    attributes = (
        codec
        | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_MASK if transactional else 0)
        | (CONTROL_MASK if control else 0)
        | (DELETE_HORIZON_MASK if delete_horizon else 0)
    )
    out = bytearray(BATCH_HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        MIN_BATCH_LENGTH + len(body),
        partition_leader_epoch,
        magic,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs) if record_count is None else record_count,
    )
    out += body
    if crc is None:
        crc = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:])
    _UINT32.pack_into(out, CRC_OFFSET, crc)
    return bytes(out)


def check_header(h: BatchHeader, *, topic: str | None = None, partition: int | None = None) -> None:
    """The header checks every decoder applies before touching the records."""

    def bad(msg: str) -> CorruptRecordError:
        return h.corrupt(msg, topic, partition)

    if h.magic != MAGIC_V2:
        raise bad(f"record batch has magic {h.magic}, expected {MAGIC_V2}")
    if h.batch_length < MIN_BATCH_LENGTH:
        raise bad(f"record batch length {h.batch_length} is smaller than its header")
    if h.compression not in _compression.CODECS:
        raise bad(f"record batch uses unknown compression codec id {h.compression}")
    if h.record_count < 0:
        raise bad(f"record batch has a negative record count {h.record_count}")
    if h.record_count > 0 and h.last_offset_delta < h.record_count - 1:
        raise bad(
            f"record batch holds {h.record_count} records but its last offset delta is "
            f"{h.last_offset_delta}"
        )


def check_crc(
    view: memoryview, crc: int, base_offset: int, topic: str | None, partition: int | None
) -> None:
    """Check the CRC-32C of the complete batch in ``view`` against its stored ``crc``."""
    actual = crc32c(view[ATTRIBUTES_OFFSET:])
    if actual != crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch: stored {crc:#010x}, computed {actual:#010x}",
            topic=topic,
            partition=partition,
            offset=base_offset,
        )


def records_section(
    view: memoryview,
    codec: int,
    count: int,
    base_offset: int,
    *,
    topic: str | None,
    partition: int | None,
    max_decompressed: int,
) -> Buffer:
    """The records section of the complete batch in ``view``, decompressed, checked against
    the size limits."""
    data: Buffer = view[RECORDS_OFFSET:]
    if codec:
        data = _compression.decompress(
            codec,
            data,
            max_size=max_decompressed,
            topic=topic,
            partition=partition,
            offset=base_offset,
        )
    elif len(data) > max_decompressed:
        raise CorruptRecordError(
            f"record batch of {len(data)} bytes exceeds max_decompressed",
            topic=topic,
            partition=partition,
            offset=base_offset,
        )
    if count > len(data) // MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record batch claims {count} records in {len(data)} bytes",
            topic=topic,
            partition=partition,
            offset=base_offset,
        )
    return data


def iter_batches(
    buf: Buffer, topic: str | None = None, partition: int | None = None
) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(position, base_offset, size, magic)`` of each complete entry (v0, v1 or v2)
    in a RECORDS blob; stops quietly at a truncated trailing entry, raises
    ``CorruptRecordError`` at a length too small to reach the magic byte."""
    n = len(buf)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        base_offset, length = _PREFIX.unpack_from(buf, pos)
        if length < 5:  # cannot even reach the magic byte
            raise CorruptRecordError(
                f"record batch length {length} is too small",
                topic=topic,
                partition=partition,
                offset=base_offset,
            )
        end = pos + LOG_OVERHEAD + length
        if end > n:
            return  # truncated by the broker: stop quietly
        yield pos, base_offset, LOG_OVERHEAD + length, buf[pos + MAGIC_OFFSET]
        pos = end
