"""Decode the RECORDS bytes of one partition of a Fetch response straight into Arrow.

``decode_records`` returns the columns of Spark's Kafka source, in its order::

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us], timestampType int32 [, headers list<struct<key string,
    value binary>>]

How it goes:

1. A Python loop over batch headers (61 bytes each): checks, CRC-32C, transaction
   filtering, decompression. Records sections of the batches to decode are gathered.
2. The sections are concatenated into one arena (about 1 MiB at a time, to stay in cache)
   and the record boundaries are found: runs of records of one size are recognised with
   numpy (same length-prefix bytes, same size), the rest is followed by a single list
   comprehension over the length prefixes (the only per-record Python).
3. Every field of every record is then decoded with numpy over the arena, one field at a
   time for all records (``vectorized.decode_varints``), and checked the same way.
4. Keys and values become Arrow arrays through one ``take`` over a binary array whose
   offsets cut the arena at the field boundaries: C++ copies the bytes, no Python object
   per record is ever made.

Magic 0/1 message sets (old topics) go through ``legacy`` per message and are appended in
offset order with the same schema (timestampType -1 and timestamp -1 ms for magic 0, as the
Java consumer reports them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, CorruptRecordError
from . import batch as _batch
from . import legacy as _legacy
from . import accel as _accel
from . import compression as _compression
from .compression import DEFAULT_MAX_DECOMPRESSED
from .vectorized import PAD, VarintError, decode_varints, find_record_ends, walk_records_general

# Spark's Arrow types: timestamps are UTC microseconds, list items are named "element".
HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                       pa.field("value", pa.binary())])))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

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

_PREFIX = struct.Struct(">qi")
_PADDING = bytes(PAD)
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


class _Pending:
    """Batches whose records sections wait for the vectorised pass."""

    __slots__ = ("sections", "size", "base_offset", "base_timestamp", "max_timestamp",
                 "log_append", "count", "last_delta")

    def __init__(self):
        self.sections = []
        self.size = 0
        self.base_offset = []
        self.base_timestamp = []
        self.max_timestamp = []
        self.log_append = []
        self.count = []
        self.last_delta = []


def decode_records(records, *, topic: str, partition: int, start_offset: int,
                   end_offset: int | None = None, include_headers: bool = False,
                   read_committed: bool = False,
                   aborted_transactions: Iterable[tuple[int, int]] | None = None,
                   max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
                   verify_crc: bool = True,
                   ) -> tuple[pa.RecordBatch, int]:
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
    """
    if not isinstance(topic, str):
        raise ConfigError(f"topic must be a str, not {type(topic).__name__}")
    if not 0 < max_decompressed <= _MAX_DECOMPRESSED_LIMIT:
        raise ConfigError(f"max_decompressed must be in 1..{_MAX_DECOMPRESSED_LIMIT}")
    if records is None:
        buf = b""
    elif isinstance(records, (bytes, bytearray)):
        buf = records
    else:
        buf = memoryview(records).cast("B")
    n = len(buf)
    schema = spark_schema(include_headers)
    ctx = (topic, partition)

    aborted = sorted(((first, pid) for pid, first in (aborted_transactions or ())))
    aborted_at = 0
    aborted_pids: set[int] = set()

    chunks: list[pa.RecordBatch] = []
    pending = _Pending()
    next_offset = start_offset
    pos = 0
    view = memoryview(buf)
    unpack_header = _batch.HEADER_STRUCT.unpack_from
    crc32c = _batch.crc32c
    decompress = _compression.decompress
    arena_target = _ARENA_TARGET if _accel.module() is None else _COMPILED_ARENA_TARGET
    while n - pos >= _batch.LOG_OVERHEAD:
        base_offset, length = _PREFIX.unpack_from(buf, pos)
        if length < 5:  # cannot even reach the magic byte
            raise CorruptRecordError(f"record batch length {length} is too small", topic=topic,
                                     partition=partition, offset=base_offset)
        end = pos + _batch.LOG_OVERHEAD + length
        if end > n:
            break  # truncated by the broker: stop quietly
        magic = buf[pos + _batch.MAGIC_OFFSET]
        if magic == _batch.MAGIC_V2:
            if length < _batch.MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"record batch length {length} is smaller than its header", topic=topic,
                    partition=partition, offset=base_offset)
            # the per-batch loop: plain tuples and locals, a BatchHeader only off the fast path
            fields = unpack_header(buf, pos)
            (_, _, _, _, crc, attributes, last_delta, base_ts, max_ts, producer_id, _, _,
             count) = fields
            codec = attributes & _batch.COMPRESSION_MASK
            if codec > 4 or count < 0 or (count > 0 and last_delta < count - 1):
                _batch.check_header(_batch.BatchHeader(*fields), topic=topic,
                                    partition=partition)
            if end_offset is not None and base_offset >= end_offset:
                break
            last_offset = base_offset + last_delta
            control = attributes & _batch.CONTROL_MASK
            skip = False
            if read_committed and producer_id >= 0:
                while aborted_at < len(aborted) and aborted[aborted_at][0] <= last_offset:
                    aborted_pids.add(aborted[aborted_at][1])
                    aborted_at += 1
                if control:
                    if _is_abort_marker(buf, pos, _batch.BatchHeader(*fields), topic,
                                        partition, max_decompressed, verify_crc):
                        aborted_pids.discard(producer_id)
                elif attributes & _batch.TRANSACTIONAL_MASK and producer_id in aborted_pids:
                    skip = True
            batch_view = view[pos:end]
            actual = crc32c(batch_view[_batch.ATTRIBUTES_OFFSET:]) if verify_crc else crc
            if actual != crc:
                raise CorruptRecordError(
                    f"record batch CRC mismatch: stored {crc:#010x}, computed {actual:#010x}",
                    topic=topic, partition=partition, offset=base_offset)
            if not (skip or control or last_offset < start_offset or count == 0):
                section = batch_view[_batch.RECORDS_OFFSET:]
                if codec:
                    section = decompress(codec, section, max_size=max_decompressed,
                                         topic=topic, partition=partition, offset=base_offset)
                elif len(section) > max_decompressed:
                    raise CorruptRecordError(
                        f"record batch of {len(section)} bytes exceeds max_decompressed",
                        topic=topic, partition=partition, offset=base_offset)
                if count > len(section) // _batch.MIN_RECORD_SIZE:
                    raise CorruptRecordError(
                        f"record batch claims {count} records in {len(section)} bytes",
                        topic=topic, partition=partition, offset=base_offset)
                if pending.size + len(section) > arena_target and pending.sections:
                    chunks.append(_decode_pending(pending, ctx, start_offset, end_offset,
                                                  include_headers, schema))
                    pending = _Pending()
                pending.sections.append(section)
                pending.size += len(section)
                pending.base_offset.append(base_offset)
                pending.base_timestamp.append(base_ts)
                pending.max_timestamp.append(max_ts)
                pending.log_append.append(attributes & _batch.TIMESTAMP_TYPE_MASK)
                pending.count.append(count)
                pending.last_delta.append(last_delta)
            if last_offset >= next_offset:
                next_offset = last_offset + 1
        elif magic in (0, 1):
            recs, last = _legacy.decode_entry(buf, pos, topic=topic, partition=partition,
                                              max_decompressed=max_decompressed,
                                              verify_crc=verify_crc)
            if end_offset is not None and recs and recs[0].offset >= end_offset:
                break
            if pending.sections:
                chunks.append(_decode_pending(pending, ctx, start_offset, end_offset,
                                              include_headers, schema))
                pending = _Pending()
            recs = [r for r in recs if r.offset >= start_offset
                    and (end_offset is None or r.offset < end_offset)]
            if recs:
                chunks.append(_from_records(recs, topic, partition, include_headers, schema))
            next_offset = max(next_offset, last + 1)
        else:
            raise CorruptRecordError(f"record batch has unknown magic {magic}", topic=topic,
                                     partition=partition, offset=base_offset)
        pos = end
    if pending.sections:
        chunks.append(_decode_pending(pending, ctx, start_offset, end_offset, include_headers,
                                      schema))
    if end_offset is not None:
        next_offset = min(next_offset, max(end_offset, start_offset))
    if not chunks:
        return _empty(schema), next_offset
    if len(chunks) == 1:
        return chunks[0], next_offset
    table = pa.Table.from_batches(chunks, schema=schema).combine_chunks()
    return table.to_batches()[0] if table.num_rows else _empty(schema), next_offset


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _is_abort_marker(buf, pos, h, topic, partition, max_decompressed,
                     verify_crc: bool = True) -> bool:
    """Whether the control batch at ``pos`` starts with an ABORT marker."""
    if h.record_count == 0:
        return False
    data = _batch.records_section(buf, pos, h, topic=topic, partition=partition,
                                  max_decompressed=max_decompressed, verify_crc=verify_crc)
    records = _batch.parse_records(data, h, topic=topic, partition=partition)
    ctype = _batch.control_type(records[0].key)
    if ctype is None:
        raise CorruptRecordError("control record key is shorter than 4 bytes", topic=topic,
                                 partition=partition, offset=h.base_offset)
    return ctype == _batch.ABORT


# ---- building columns ----------------------------------------------------------------------

def _topic_column(topic: str, n: int) -> pa.Array:
    raw = topic.encode("utf-8")
    if n * len(raw) >= 1 << 31:
        return pa.array([topic] * n, pa.string())
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(raw * n)])


def _validity(valid: np.ndarray):
    if valid.all():
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int(valid.size - valid.sum())


def _slices(arena: pa.Buffer, starts: list, lengths: list, types: list) -> list[pa.Array]:
    """Binary arrays of the arena slices [start, start + max(length, 0)), null where length
    is -1: one offsets array cuts the arena at every boundary, ``take`` gathers."""
    k = len(starts)
    n = starts[0].size
    if n == 0:
        return [pa.array([], t) for t in types]
    cuts = np.empty((n, 2 * k), dtype=np.int32)
    for i in range(k):
        cuts[:, 2 * i] = starts[i]
        cuts[:, 2 * i + 1] = starts[i] + np.maximum(lengths[i], 0)
    cuts = cuts.reshape(-1)
    pieces = pa.Array.from_buffers(pa.binary(), cuts.size - 1, [None, pa.py_buffer(cuts), arena])
    out = []
    for i in range(k):
        idx = pa.array(np.arange(2 * i, cuts.size - 1, 2 * k, dtype=np.int32), pa.int32())
        taken = pc.take(pieces, idx, boundscheck=False)
        validity, nulls = _validity(lengths[i] >= 0)
        bufs = taken.buffers()
        out.append(pa.Array.from_buffers(types[i], n, [validity, bufs[1], bufs[2]],
                                         null_count=nulls))
    return out


def _utf8_or_replace(arr: pa.Array) -> pa.Array:
    try:
        arr.validate(full=True)
        return arr
    except pa.ArrowInvalid:
        raw = arr.cast(pa.binary()).to_pylist()
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in raw],
                        pa.string())


# Kafka timestamps are milliseconds; Spark's are microseconds in an int64.
_MAX_MS = ((1 << 63) - 1) // 1000
_MIN_MS = -(1 << 63) // 1000 + 1


def _assemble(keys, values, topic, partition, offsets, ts_ms, ts_type, headers, schema):
    n = len(offsets)
    if n and (ts_ms.max() > _MAX_MS or ts_ms.min() < _MIN_MS):
        bad = int(np.flatnonzero((ts_ms > _MAX_MS) | (ts_ms < _MIN_MS))[0])
        raise CorruptRecordError(
            f"record timestamp {int(ts_ms[bad])} ms is out of the range of a timestamp in "
            f"microseconds", topic=topic, partition=partition, offset=int(offsets[bad]))
    cols = [keys, values, _topic_column(topic, n),
            pa.array(np.full(n, partition, dtype=np.int32), pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.Array.from_buffers(TIMESTAMP_TYPE, n,
                                  [None, pa.py_buffer(ts_ms.astype(np.int64) * 1000)]),
            pa.array(ts_type.astype(np.int32, copy=False), pa.int32())]
    if headers is not None:
        cols.append(headers)
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _from_records(recs, topic, partition, include_headers, schema) -> pa.RecordBatch:
    """Columns from reference ``Record``s (legacy message sets: not the hot path)."""
    headers = None
    if include_headers:
        headers = pa.array([[{"key": k, "value": v} for k, v in r.headers] or None
                            for r in recs], HEADERS_TYPE)
    return _assemble(pa.array([r.key for r in recs], pa.binary()),
                     pa.array([r.value for r in recs], pa.binary()), topic, partition,
                     np.array([r.offset for r in recs], dtype=np.int64),
                     np.array([r.timestamp for r in recs], dtype=np.int64),
                     np.array([r.timestamp_type for r in recs], dtype=np.int32), headers,
                     schema)


# ---- the vectorised pass -------------------------------------------------------------------

class _Bad(Exception):
    """A vectorised check failed at record ``index`` (of the arena)."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def _decode_pending(p: _Pending, ctx, start_offset, end_offset, include_headers, schema):
    topic, partition = ctx
    ext = _accel.module()
    if ext is not None:
        out = ext.decode_sections(p.sections, p.base_offset, p.last_delta, p.base_timestamp,
                                  p.max_timestamp, p.log_append, p.count, start_offset,
                                  end_offset, include_headers)
        if out is not None:
            return _from_compiled(out, topic, partition, include_headers, schema)
        # refused: the pure path decodes the same bytes and names the problem
    counts = np.array(p.count, dtype=np.int64)
    batch_of_last = np.cumsum(counts) - 1
    try:
        return _decode_arena(p, counts, batch_of_last, topic, partition, start_offset,
                             end_offset, include_headers, schema)
    except _Bad as bad:
        # find the batch and let the reference decoder name the exact problem
        b = int(np.searchsorted(batch_of_last, bad.index))
        b = min(b, len(p.count) - 1)
        h = _batch.BatchHeader(p.base_offset[b], 0, -1, 2, 0, 8 if p.log_append[b] else 0,
                               p.last_delta[b], p.base_timestamp[b], p.max_timestamp[b],
                               -1, -1, -1, p.count[b])
        _batch.parse_records(p.sections[b], h, topic=topic, partition=partition)
        raise CorruptRecordError(f"malformed record batch: {bad}", topic=topic,
                                 partition=partition, offset=p.base_offset[b]) from None


def _decode_arena(p: _Pending, counts, batch_of_last, topic, partition, start_offset,
                  end_offset, include_headers, schema):
    data = b"".join(p.sections + [_PADDING])
    limit = len(data) - PAD
    a = np.frombuffer(data, dtype=np.uint8)
    total = int(counts.sum())
    section_end = np.cumsum(np.array([len(s) for s in p.sections], dtype=np.int64))

    # 1. record boundaries: the one sequential walk
    ends = find_record_ends(data, a, total, limit, (batch_of_last + 1).tolist())
    if ends is None:
        ends_list, err = walk_records_general(data, total, limit)
        if err is None:  # pragma: no cover - the two walks agree on what they accept
            err = "records cannot be followed"
        raise _Bad(len(ends_list), err)
    wrong = ends[batch_of_last] != section_end
    if wrong.any():
        b = int(np.flatnonzero(wrong)[0])
        raise _Bad(int(batch_of_last[b]), "records do not fill their batch exactly")
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]

    # 2. fields, for all records at once (in slices that keep the temporaries in cache)
    ts_delta, offset_delta, key_start, key_len, value_start, value_len = (
        np.empty(total, dtype=np.int64) for _ in range(6))
    plain = np.empty(total, dtype=bool)
    for i in range(0, total, _CHUNK):
        j = min(i + _CHUNK, total)
        (ts_delta[i:j], offset_delta[i:j], key_start[i:j], key_len[i:j], value_start[i:j],
         value_len[i:j], plain[i:j]) = _fields(a, starts[i:j], ends[i:j], i)
    header_count = None
    header_parts = None
    if not plain.all():
        with_headers = np.flatnonzero(~plain)
        header_parts = _decode_headers(a, (value_start + np.maximum(value_len, 0))[with_headers],
                                       ends[with_headers], with_headers)
        header_count = np.zeros(total, dtype=np.int64)
        header_count[with_headers] = header_parts[0]

    def check(bad_mask, message):
        if bad_mask.any():
            raise _Bad(int(np.flatnonzero(bad_mask)[0]), message)

    # 3. offsets and timestamps, checked per batch
    rep = np.repeat
    base = rep(np.array(p.base_offset, dtype=np.int64), counts)
    last_delta = rep(np.array(p.last_delta, dtype=np.int64), counts)
    check((offset_delta < 0) | (offset_delta > last_delta),
          "record offset delta beyond the batch's last offset delta")
    if total > 1:
        first = np.zeros(total, dtype=bool)
        first[batch_of_last[:-1] + 1] = True
        check(np.concatenate(([False], (offset_delta[1:] <= offset_delta[:-1]) & ~first[1:])),
              "record offset deltas are not increasing")
    offsets = base + offset_delta
    ts = rep(np.array(p.base_timestamp, dtype=np.int64), counts) + ts_delta
    log_append = np.array(p.log_append, dtype=bool)
    if log_append.any():
        lat = rep(log_append, counts)
        ts = np.where(lat, rep(np.array(p.max_timestamp, dtype=np.int64), counts), ts)
        ts_type = lat.astype(np.int32)
    else:
        ts_type = np.zeros(total, dtype=np.int32)

    # 4. cut to [start_offset, end_offset)
    keep = offsets >= start_offset
    if end_offset is not None:
        keep &= offsets < end_offset
    if not keep.all():
        key_start, key_len = key_start[keep], key_len[keep]
        value_start, value_len = value_start[keep], value_len[keep]
        offsets, ts, ts_type = offsets[keep], ts[keep], ts_type[keep]
        if header_count is not None:
            flat_keep = np.repeat(keep, header_count)
            header_count = header_count[keep]
            header_parts = (None,) + tuple(x[flat_keep] for x in header_parts[1:])

    # 5. Arrow
    arena = pa.py_buffer(data)
    keys, values = _slices(arena, [key_start, value_start], [key_len, value_len],
                           [pa.binary(), pa.binary()])
    headers = None
    if include_headers:
        headers = _headers_column(arena, len(offsets), header_count, header_parts)
    return _assemble(keys, values, topic, partition, offsets, ts, ts_type, headers, schema)


_CHUNK = 4096


def _binary_from(arrow_type, n, offsets, validity, data) -> pa.Array:
    nulls = 0 if validity is None else n - int(np.unpackbits(
        np.frombuffer(validity, dtype=np.uint8), count=n, bitorder="little").sum())
    return pa.Array.from_buffers(arrow_type, n, [None if validity is None else
                                                 pa.py_buffer(validity),
                                                 pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _from_compiled(out, topic, partition, include_headers, schema) -> pa.RecordBatch:
    """The batch from the buffers of the compiled decoder (accel.py)."""
    n, ko, kv, kd, vo, vv, vd, offsets, stamps, types, headers = out
    cols = [_binary_from(pa.binary(), n, ko, kv, kd), _binary_from(pa.binary(), n, vo, vv, vd),
            _topic_column(topic, n),
            pa.array(np.full(n, partition, dtype=np.int32), pa.int32()),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
            pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(stamps)]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(types)])]
    if include_headers:
        if headers is None:
            cols.append(pa.nulls(n, HEADERS_TYPE))
        else:
            lo, lv, hko, hkd, hvo, hvv, hvd = headers
            entries_n = len(hko) // 4 - 1
            keys = _utf8_or_replace(_binary_from(pa.string(), entries_n, hko, None, hkd))
            entries = pa.StructArray.from_arrays(
                [keys, _binary_from(pa.binary(), entries_n, hvo, hvv, hvd)],
                fields=list(HEADERS_TYPE.value_type))
            cols.append(pa.Array.from_buffers(
                HEADERS_TYPE, n, [None if lv is None else pa.py_buffer(lv), pa.py_buffer(lo)],
                null_count=-1 if lv is not None else 0, children=[entries]))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _fields(a, starts, ends, first_index):
    """Decode the fixed sequence of fields of the records [starts, ends) of the arena."""
    def check(bad_mask, message):
        if bad_mask.any():
            raise _Bad(first_index + int(np.flatnonzero(bad_mask)[0]), message)

    try:
        # the length prefix (its value is known from the walk): one or two bytes almost always
        b0 = a[starts]
        if (b0 >= 0x80).any() and (a[starts[b0 >= 0x80] + 1] >= 0x80).any():
            _, q = decode_varints(a, starts, 5)
        else:
            q = starts + 1 + (b0 >> 7)
        ts_delta, pos = decode_varints(a, q + 1, 10)  # q: the attributes byte (unused)
        offset_delta, pos = decode_varints(a, pos, 5)
        key_len, key_start = decode_varints(a, pos, 5)
        pos = key_start + np.maximum(key_len, 0)
        check((key_len < -1) | (pos > ends), "record key length does not fit the record")
        value_len, value_start = decode_varints(a, pos, 5)
        pos = value_start + np.maximum(value_len, 0)
        check((value_len < -1) | (pos > ends), "record value length does not fit the record")
    except VarintError as e:
        raise _Bad(first_index + e.index, str(e)) from None
    # the header count is almost always a single 0 byte closing the record
    plain = (pos == ends - 1) & (a[pos] == 0)
    return ts_delta, offset_delta, key_start, key_len, value_start, value_len, plain


def _decode_headers(a, pos, ends, rows):
    """Headers of the records at ``rows`` (their header count varint at ``pos``).

    Returns (count per row, then flat arrays in record order: key start, key length,
    value start, value length)."""
    try:
        count, pos = decode_varints(a, pos, 5)
    except VarintError as err:
        raise _Bad(int(rows[err.index]), str(err)) from None
    if (count < 0).any() or (count * 2 > ends - pos).any():
        bad = np.flatnonzero((count < 0) | (count * 2 > ends - pos))[0]
        raise _Bad(int(rows[bad]), "record header count does not fit the record")
    total = int(count.sum())
    flat_base = np.zeros(count.size, dtype=np.int64)
    np.cumsum(count[:-1], out=flat_base[1:])
    key_start = np.zeros(total, dtype=np.int64)
    key_len = np.zeros(total, dtype=np.int64)
    value_start = np.zeros(total, dtype=np.int64)
    value_len = np.zeros(total, dtype=np.int64)
    active = np.arange(count.size)
    j = 0
    while True:
        active = active[count[active] > j]
        if not active.size:
            break
        p = pos[active]
        e = ends[active]
        flat = flat_base[active] + j
        try:
            kl, p = decode_varints(a, p, 5)
            bad = (kl < 0) | (p + kl > e)
            if bad.any():
                raise _Bad(int(rows[active[np.flatnonzero(bad)[0]]]),
                           "record header key length does not fit the record")
            key_start[flat], key_len[flat] = p, kl
            p = p + kl
            vl, p = decode_varints(a, p, 5)
            p2 = p + np.maximum(vl, 0)
            bad = (vl < -1) | (p2 > e)
            if bad.any():
                raise _Bad(int(rows[active[np.flatnonzero(bad)[0]]]),
                           "record header value length does not fit the record")
        except VarintError as err:
            raise _Bad(int(rows[active[err.index]]), str(err)) from None
        value_start[flat], value_len[flat] = p, vl
        pos[active] = p2
        j += 1
    done = pos != ends
    if done.any():
        raise _Bad(int(rows[np.flatnonzero(done)[0]]), "record fields do not end with the record")
    return count, key_start, key_len, value_start, value_len


def _headers_column(arena, n, header_count, parts):
    if header_count is None or not header_count.any():
        return pa.nulls(n, HEADERS_TYPE)
    _, key_start, key_len, value_start, value_len = parts
    keys, values = _slices(arena, [key_start, value_start], [key_len, value_len],
                           [pa.string(), pa.binary()])
    keys = _utf8_or_replace(keys)
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(header_count, out=list_offsets[1:])
    validity, nulls = _validity(header_count > 0)
    return pa.Array.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(list_offsets)],
                                 null_count=nulls, children=[entries])
