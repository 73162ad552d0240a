"""Decode the RECORDS bytes of one partition of a Fetch response straight into Arrow.

``decode_records`` returns the columns of Spark's Kafka source, in its order::

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us], timestampType int32 [, headers list<struct<key string,
    value binary>>]

How it goes:

1. A Python loop over batch headers (61 bytes each): checks, CRC-32C, transaction
   filtering, decompression. The records sections to decode wait in ``decode_pending``.
2. The sections are concatenated into one arena (about 1 MiB at a time, to stay in cache)
   and the record boundaries are found: runs of records of one size are recognised with
   numpy (same length-prefix bytes, same size), the rest is followed by a single list
   comprehension over the length prefixes (the only per-record Python).
3. Every field of every record is then decoded with numpy over the arena, one field at a
   time for all records (``vectorized.decode_varints``), and checked the same way.
4. Keys and values become Arrow arrays through one ``take`` over a binary array whose
   offsets cut the arena at the field boundaries: C++ copies the bytes, no Python object
   per record is ever made.

Magic 0/1 message sets (old topics) are decoded per message by ``legacy``, in offset order,
same schema (timestampType -1, timestamp -1 ms for magic 0, as the Java consumer has them).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from ..errors import ConfigError, CorruptRecordError
from . import batch as _batch
from . import reference_decode as _reference
from . import legacy as _legacy
from . import accel as _accel
from .arrow_columns import HEADERS_TYPE, TIMESTAMP_TYPE, from_records
from .compiled_rows import CompiledRows, built
from .compression import DEFAULT_MAX_DECOMPRESSED
from .decode_pending import Pending, decode_pending

__all__ = [
    "HEADERS_TYPE",
    "SCHEMA",
    "SCHEMA_WITH_HEADERS",
    "TIMESTAMP_TYPE",
    "decode_records",
    "spark_schema",
]

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
SCHEMA = pa.schema(_BASE_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema(_BASE_FIELDS + [pa.field("headers", HEADERS_TYPE)])

# Decode the pending batches once their records sections pass this many bytes: a smaller
# arena keeps the vectorised pass in cache (measurably faster than one big pass, even with
# the final concatenation), and int32 offsets are then never at risk.
_ARENA_TARGET = 1 << 20
# The compiled decoder (accel.py) works batch by batch, so it needs no cache-sized arena:
# one pass per call spares the final concatenation of the chunks.
_COMPILED_ARENA_TARGET = 1 << 28
_MAX_DECOMPRESSED_LIMIT = 1 << 30


def spark_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema ``decode_records`` produces."""
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


def decode_records(
    records,
    *,
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int | None = None,
    include_headers: bool = False,
    read_committed: bool = False,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    verify_crc: bool = True,
    deferred: bool = False,
) -> tuple[pa.RecordBatch | CompiledRows, int]:
    """Decode the RECORDS bytes of one partition of a Fetch response.

    Returns ``(batch, next_offset)``: the records with ``start_offset <= offset <
    end_offset`` (``end_offset`` None: no upper bound) and the offset to fetch next, which
    moves past every complete batch consumed, including control batches, aborted batches,
    empty batches and batches whose records were all cut off (``base_offset +
    last_offset_delta + 1``), and is ``start_offset`` when no complete batch arrived.
    Batches starting at or after ``end_offset`` are not consumed, and ``next_offset`` never
    passes ``end_offset``.

    ``verify_crc`` False skips the CRC checks (Kafka's ``check.crcs``; CRC-32C of batches,
    CRC-32 of legacy messages), only for brokers that write batches without one, such as
    librdkafka's mock cluster's transaction markers. Every other check stays.

    ``aborted_transactions`` is the AbortedTransactions list of the response, as
    ``(producer_id, first_offset)`` pairs; with ``read_committed`` the records of aborted
    transactions are dropped. A truncated last batch (the broker cuts responses at the
    size limit) is ignored; anything malformed raises ``CorruptRecordError``.

    ``deferred`` (without headers): records the compiled decoder decoded in one pass may
    come back as its buffers, a ``CompiledRows`` (``num_rows``; ``batch()``), for a caller
    that joins several partitions' records before making Arrow arrays of them.
    """
    if not isinstance(topic, str):
        raise ConfigError(f"topic must be a str, not {type(topic).__name__}")
    if not 0 < max_decompressed <= _MAX_DECOMPRESSED_LIMIT:
        raise ConfigError(f"max_decompressed must be in 1..{_MAX_DECOMPRESSED_LIMIT}")
    buf: bytes | bytearray | memoryview
    if records is None:
        buf = b""
    elif isinstance(records, (bytes, bytearray)):
        buf = records
    else:
        buf = memoryview(records).cast("B")
    walk = _Walk(
        buf,
        topic,
        partition,
        start_offset,
        end_offset,
        include_headers,
        read_committed,
        aborted_transactions,
        max_decompressed,
        verify_crc,
        deferred and not include_headers,
    )
    _walk_batches(buf, walk, topic, partition)
    return walk.result()


def _walk_batches(buf, walk: _Walk, topic: str, partition: int) -> None:
    """Hand each complete batch (v2) or message set (v0/v1) of ``buf`` to ``walk``, in order,
    up to a truncated trailing one or the batch ``walk`` stops at."""
    for pos, base_offset, size, magic in _batch.iter_batches(buf, topic, partition):
        if magic == _batch.MAGIC_V2:
            going = walk.batch_v2(pos, pos + size, base_offset, size - _batch.LOG_OVERHEAD)
        elif magic in (0, 1):
            going = walk.legacy_entry(pos)
        else:
            raise CorruptRecordError(
                f"record batch has unknown magic {magic}",
                topic=topic,
                partition=partition,
                offset=base_offset,
            )
        if not going:
            break


class _Walk:
    """The state of one ``decode_records`` call as it walks the batches: the aborted
    transactions met so far, the batches pending the vectorised pass, the decoded chunks."""

    def __init__(
        self,
        buf,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None,
        include_headers: bool,
        read_committed: bool,
        aborted_transactions: Iterable[tuple[int, int]] | None,
        max_decompressed: int,
        verify_crc: bool,
        deferred: bool = False,
    ):
        self.buf = buf
        self.deferred = deferred
        self.view = memoryview(buf)
        self.topic, self.partition = topic, partition
        self.start_offset, self.end_offset = start_offset, end_offset
        self.include_headers, self.read_committed = include_headers, read_committed
        self.max_decompressed, self.verify_crc = max_decompressed, verify_crc
        self.schema = spark_schema(include_headers)
        self.aborted = sorted(((first, pid) for pid, first in (aborted_transactions or ())))
        self.aborted_at = 0
        self.aborted_pids: set[int] = set()
        self.chunks: list[pa.RecordBatch | CompiledRows] = []
        self.pending = Pending()
        self.next_offset = start_offset
        self.arena_target = _ARENA_TARGET if _accel.module() is None else _COMPILED_ARENA_TARGET

    def batch_v2(self, pos: int, end: int, base_offset: int, length: int) -> bool:
        """Check the batch at ``pos`` and queue its records section unless it is skipped;
        False when it starts at or after ``end_offset`` (the walk stops there)."""
        buf, topic, partition = self.buf, self.topic, self.partition
        if length < _batch.MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch length {length} is smaller than its header",
                topic=topic,
                partition=partition,
                offset=base_offset,
            )
        # the per-batch step: plain tuples and locals, a BatchHeader only off the fast path
        fields = _batch.HEADER_STRUCT.unpack_from(buf, pos)
        (_, _, _, _, crc, attributes, last_delta, base_ts, max_ts, producer_id, _, _, count) = (
            fields
        )
        codec = attributes & _batch.COMPRESSION_MASK
        if codec > 4 or count < 0 or (count > 0 and last_delta < count - 1):
            _batch.check_header(_batch.BatchHeader(*fields), topic=topic, partition=partition)
        if self.end_offset is not None and base_offset >= self.end_offset:
            return False
        last_offset = base_offset + last_delta
        control = attributes & _batch.CONTROL_MASK
        skip = (
            self.read_committed
            and producer_id >= 0
            and self._aborted(pos, fields, last_offset, control, attributes, producer_id)
        )
        batch_view = self.view[pos:end]
        if self.verify_crc:
            _batch.check_crc(batch_view, crc, base_offset, topic, partition)
        if not (skip or control or last_offset < self.start_offset or count == 0):
            section = _batch.records_section(
                batch_view,
                codec,
                count,
                base_offset,
                topic=topic,
                partition=partition,
                max_decompressed=self.max_decompressed,
            )
            if self.pending.size + len(section) > self.arena_target and self.pending.sections:
                self._flush()
            self.pending.add(
                section,
                base_offset,
                base_ts,
                max_ts,
                attributes & _batch.TIMESTAMP_TYPE_MASK,
                count,
                last_delta,
            )
        if last_offset >= self.next_offset:
            self.next_offset = last_offset + 1
        return True

    def _aborted(self, pos, fields, last_offset, control, attributes, producer_id) -> bool:
        """read_committed: whether the transactional batch at ``pos`` belongs to an aborted
        transaction (the abort markers met close their producer's transaction)."""
        aborted, pids = self.aborted, self.aborted_pids
        while self.aborted_at < len(aborted) and aborted[self.aborted_at][0] <= last_offset:
            pids.add(aborted[self.aborted_at][1])
            self.aborted_at += 1
        if control:
            if _is_abort_marker(
                self.buf,
                pos,
                _batch.BatchHeader(*fields),
                self.topic,
                self.partition,
                self.max_decompressed,
                self.verify_crc,
            ):
                pids.discard(producer_id)
            return False
        return bool(attributes & _batch.TRANSACTIONAL_MASK) and producer_id in pids

    def legacy_entry(self, pos: int) -> bool:
        """The magic 0/1 message set at ``pos``, decoded per message; False when it starts
        at or after ``end_offset``."""
        start_offset, end_offset = self.start_offset, self.end_offset
        recs, last = _legacy.decode_entry(
            self.buf,
            pos,
            topic=self.topic,
            partition=self.partition,
            max_decompressed=self.max_decompressed,
            verify_crc=self.verify_crc,
        )
        if end_offset is not None and recs and recs[0].offset >= end_offset:
            return False
        if self.pending.sections:
            self._flush()
        recs = [
            r
            for r in recs
            if r.offset >= start_offset and (end_offset is None or r.offset < end_offset)
        ]
        if recs:
            self.chunks.append(
                from_records(recs, self.topic, self.partition, self.include_headers, self.schema)
            )
        self.next_offset = max(self.next_offset, last + 1)
        return True

    def _flush(self) -> None:
        self.chunks.append(
            decode_pending(
                self.pending,
                (self.topic, self.partition),
                self.start_offset,
                self.end_offset,
                self.include_headers,
                self.schema,
                self.deferred,
            )
        )
        self.pending = Pending()

    def result(self) -> tuple[pa.RecordBatch | CompiledRows, int]:
        """``decode_records``' answer: the chunks as one batch, and the next offset."""
        if self.pending.sections:
            self._flush()
        next_offset, schema, chunks = self.next_offset, self.schema, self.chunks
        if self.end_offset is not None:
            next_offset = min(next_offset, max(self.end_offset, self.start_offset))
        if not chunks:
            return _empty(schema), next_offset
        if len(chunks) == 1:
            return chunks[0], next_offset
        table = pa.Table.from_batches(map(built, chunks), schema=schema).combine_chunks()
        return table.to_batches()[0] if table.num_rows else _empty(schema), next_offset


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _is_abort_marker(
    buf, pos, h, topic, partition, max_decompressed, verify_crc: bool = True
) -> bool:
    """Whether the control batch at ``pos`` starts with an ABORT marker."""
    if h.record_count == 0:
        return False
    _, records = _reference.decode_batch(
        buf,
        pos,
        topic=topic,
        partition=partition,
        max_decompressed=max_decompressed,
        verify_crc=verify_crc,
    )
    ctype = _batch.control_type(records[0].key)
    if ctype is None:
        raise h.corrupt("control record key is shorter than 4 bytes", topic, partition)
    return ctype == _batch.ABORT
