"""Encode Arrow columns into one record batch v2, vectorised.

Every record is ``length | attributes | timestampDelta | offsetDelta | keyLength | key |
valueLength | value | headerCount | headers``. The small fields (all varints) are computed
for all records at once with numpy and written into one buffer of "small segments"; keys,
values and header bytes stay in their Arrow buffers. A single ``take`` over the
concatenation of those arrays, with the indices interleaved in wire order, then lays out
the records section: Arrow's C++ does the copying, no Python object per record is made.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from . import accel
from . import batch as _batch
from . import checksum as _checksum
from . import compression as _compression
from .encode_layout import layout_plain as _layout_plain
from .encode_layout import layout_with_headers as _layout_with_headers
from .row_source import (
    FlatHeaders,
    RowSource,
    byte_lengths,
    timestamps_array,
)

_UINT32 = struct.Struct(">I")


# ---- encode --------------------------------------------------------------------------------


def encode_batch(keys, values, *, headers=None, **settings) -> bytes:
    """Encode the rows of ``values`` (with ``keys``, ``headers``) as the bytes of one v2
    record batch, offsets ``base_offset``.. in row order; ``settings`` are ``encode_rows``'s
    keywords (``timestamps_ms``, ``base_offset``, the producer fields, ``compression``...).

    ``keys``/``values``: binary or string arrays (nulls allowed; ``keys`` None means all
    null). ``headers``: a ``list<struct<key: string, value: binary>>`` array (Spark's
    ``headers`` column), null or empty lists for none. ``timestamps_ms``: milliseconds, as
    a numpy array, a pyarrow integer or timestamp array, one int for all rows, or None for
    now. With ``compression_fallback`` a batch that compresses to more bytes than it had is
    written uncompressed (the codec is per batch, consumers read both).
    """
    return bytes(encode_rows([(RowSource(keys, values, headers), None)], **settings))


def encode_rows(
    parts,
    *,
    timestamps_ms=None,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression="none",
    compression_level: int | None = None,
    compression_fallback: bool = True,
    topic: str | None = None,
    partition: int | None = None,
    out: bytearray | None = None,
) -> bytearray:
    """One v2 record batch of the rows ``parts`` names, in order: ``[(RowSource, rows)]``,
    ``rows`` an int64 array of row indices into that source (None: all its rows).
    ``timestamps_ms`` covers every encoded row (or is one int, or None for now); the rest
    as ``encode_batch``.

    With the compiled encoder (``accel.encoder()``) each part is written straight from its
    source's buffers into the batch's own buffer, behind the room left for its header,
    which is then written in front and its CRC in place: the records are written once, never
    copied; the pure path gathers the rows' columns and lays them out with numpy and Arrow.
    Both write the same bytes (a bytearray: the batch is the producer's to send as is).
    ``out``: a bytearray no one else uses any more (a delivered batch's) for the compiled
    encoder to write the batch into, resized, instead of a new one."""
    counts = [src.n if rows is None else len(rows) for src, rows in parts]
    n = sum(counts)
    if n == 0:
        raise ConfigError("cannot encode an empty record batch")
    codec = _compression.codec_id(compression)
    ts = timestamps_array(timestamps_ms, n)
    ts_delta = ts - ts[0]
    # the header's fields in HEADER_STRUCT's order; the batch length (1) comes last
    fields = [
        base_offset,
        0,
        partition_leader_epoch,
        _batch.MAGIC_V2,
        0,  # the CRC, written in place at the end
        _batch.TRANSACTIONAL_MASK if transactional else 0,
        n - 1,
        int(ts[0]),
        int(ts.max()),
        producer_id,
        producer_epoch,
        base_sequence,
        n,
    ]
    compiled = None
    ext = accel.encoder()
    if ext is not None:
        compiled = _compiled_batch(ext, parts, counts, ts_delta, None if codec else fields, out)
    if compiled is None:  # the header's room, then the records section
        batch = bytearray(_batch.BATCH_HEADER_SIZE)
        batch += _pure_section(parts, ts_delta)
        crc = None
    else:
        batch, crc = compiled

    if codec:
        section = memoryview(batch)[_batch.BATCH_HEADER_SIZE :]
        compressed = _compression.compress(
            codec, section, level=compression_level, topic=topic, partition=partition
        )
        smaller = len(compressed) < len(section)
        section.release()
        if smaller or not compression_fallback:
            batch = bytearray(_batch.BATCH_HEADER_SIZE) + compressed
            fields[5] |= codec
    fields[1] = len(batch) - _batch.LOG_OVERHEAD
    _batch.HEADER_STRUCT.pack_into(batch, 0, *fields)
    if crc is None:
        with memoryview(batch) as view:
            crc = _checksum.crc32c(view[_batch.ATTRIBUTES_OFFSET :])
    _UINT32.pack_into(batch, _batch.CRC_OFFSET, crc)
    return batch


def _compiled_batch(
    ext, parts, counts, ts_delta, fields, out=None
) -> tuple[bytearray, int | None] | None:
    """The header's room, then the records section, written by the compiled encoder into
    one buffer allocated once at its final size, and None; None: the pure path decides.
    With the header's ``fields`` (an uncompressed batch: the CRC covers the records as
    written) the encoder also computes the batch's CRC while it writes the records (no
    second pass over the batch): then the CRC instead of None. Only where the CPU has a
    CRC-32C instruction (x86-64's SSE4.2): elsewhere the crc32c package's own pass is
    faster than the encoder's table code. ``out``: the bytearray to write into (resized)."""
    crc = None
    if fields is not None and ext.CRC32C_HARDWARE:
        head = bytearray(_batch.BATCH_HEADER_SIZE)
        _batch.HEADER_STRUCT.pack_into(head, 0, *fields)
        crc = ext.crc32c(head[_batch.ATTRIBUTES_OFFSET :])
    picked = [
        (None if rows is None else np.ascontiguousarray(rows, dtype=np.int64), *src.buffers())
        for (src, rows), count in zip(parts, counts)
        if count
    ]
    return ext.encode_records(picked, ts_delta, _batch.BATCH_HEADER_SIZE, crc, out)


def _pure_section(parts, ts_delta):
    """The records section of ``parts`` with numpy and Arrow."""
    if len(parts) == 1 and parts[0][1] is None:
        src = parts[0][0]
        keys, values, hdr = src.keys, src.values, src.hdr
    else:
        picked = [src.columns(rows) for src, rows in parts]
        counts = [len(v) for _, v, _ in picked]
        values = pa.concat_arrays([v for _, v, _ in picked])
        keys = _concat_optional([k for k, _, _ in picked], counts)
        headers = _concat_optional([h for _, _, h in picked], counts)
        hdr = None if headers is None else FlatHeaders(headers, len(values))
        if hdr is not None and hdr.total == 0:
            hdr = None
    n = len(values)
    key_len = np.full(n, -1, dtype=np.int64) if keys is None else byte_lengths(keys)
    value_len = byte_lengths(values)
    if hdr is None:
        return _layout_plain(n, keys, values, ts_delta, key_len, value_len)
    return _layout_with_headers(n, keys, values, hdr, ts_delta, key_len, value_len)


def _concat_optional(arrays: list, counts: list[int]) -> pa.Array | None:
    """Concatenate optional columns of several sources; a missing one becomes nulls."""
    if all(a is None for a in arrays):
        return None
    present = next(a for a in arrays if a is not None)
    filled = [pa.nulls(c, present.type) if a is None else a for a, c in zip(arrays, counts)]
    if any(a.type != present.type for a in filled):
        filled = [a.cast(present.type) for a in filled]
    return filled[0] if len(filled) == 1 else pa.concat_arrays(filled)


# ---- batch sizing --------------------------------------------------------------------------


def record_base_sizes(keys, values, *, headers=None) -> np.ndarray:
    """Each row's encoded size without its timestamp and offset deltas and its length
    prefix: what does not depend on the batch the row ends up in (``sizes_in_batch`` adds
    the rest). Computed once per row, kept while rows wait to be batched."""
    return RowSource(keys, values, headers).base_sizes()


def sizes_in_batch(base_sizes: np.ndarray, ts_span: int, n: int) -> np.ndarray:
    """An upper bound of each record's encoded size (length prefix included) in a batch of
    ``n`` records whose timestamps span ``ts_span`` ms, from ``record_base_sizes``."""
    body = base_sizes + (_varint_size(ts_span) + _varint_size(max(n - 1, 0)))
    sizes = body + 1  # with the length prefix: 1 byte, one more per bound reached
    top = int(body.max()) if body.size else 0
    bound = 64  # a body (never negative) zigzags to 2 * body: 7 more bits a byte
    while top >= bound:
        sizes += body >= bound
        bound <<= 7
    return sizes


def _varint_size(value: int) -> int:
    """Bytes of ``value`` (a Python int) as a zigzag varint."""
    u = value << 1 if value >= 0 else ~(value << 1)
    return max(1, (u.bit_length() + 6) // 7)


def _span(timestamps_ms, n: int) -> int:
    """How many ms the ``n`` rows' timestamps span (0 for one time for all: None is now)."""
    one = isinstance(timestamps_ms, (int, np.integer)) and not isinstance(timestamps_ms, bool)
    if timestamps_ms is None or one or not n:
        return 0
    ts = timestamps_array(timestamps_ms, n)
    return int(ts.max() - ts.min())


def record_sizes(keys, values, *, headers=None, timestamps_ms=None) -> np.ndarray:
    """An upper bound of the encoded size of each row inside a batch of these rows (offset
    and timestamp deltas are taken at their largest)."""
    base = record_base_sizes(keys, values, headers=headers)
    return sizes_in_batch(base, _span(timestamps_ms, base.size), base.size)


def split_for_batch_size(
    keys,
    values,
    *,
    max_batch_bytes: int,
    headers=None,
    timestamps_ms=None,
    max_records: int | None = None,
    base_sizes: np.ndarray | None = None,
) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)`` so that each range, encoded as one batch (uncompressed,
    or compressed with ``compression_fallback``), takes at most ``max_batch_bytes``.
    ``base_sizes``: the rows' ``record_base_sizes`` when already known (then keys, values
    and headers are not looked at again).

    A row too large to fit alone gets a range of its own (the broker will reject it with
    MESSAGE_TOO_LARGE: that is its decision to make, not a silent drop).
    """
    budget = max_batch_bytes - _batch.BATCH_HEADER_SIZE
    if budget <= 0:
        raise ConfigError(f"max_batch_bytes must exceed {_batch.BATCH_HEADER_SIZE}")
    if max_records is not None and max_records <= 0:
        raise ConfigError("max_records must be positive")
    ext = accel.encoder()
    if base_sizes is not None and max_records is None and ext is not None:
        # the compiled loop: the same sizes and cuts, in one pass without arrays
        n = base_sizes.size
        extra = _varint_size(_span(timestamps_ms, n)) + _varint_size(max(n - 1, 0))
        base = np.ascontiguousarray(base_sizes, dtype=np.int64)
        stops = ext.batch_stops(base, extra, budget)
        return list(zip([0, *stops[:-1]], stops))
    if base_sizes is None:
        sizes = record_sizes(keys, values, headers=headers, timestamps_ms=timestamps_ms)
    else:
        n = base_sizes.size
        sizes = sizes_in_batch(base_sizes, _span(timestamps_ms, n), n)
    n = sizes.size
    cum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=cum[1:])
    ranges = []
    start = 0
    while start < n:
        stop = int(np.searchsorted(cum, cum[start] + budget, side="right")) - 1
        stop = max(stop, start + 1)
        if max_records is not None:
            stop = min(stop, start + max_records)
        ranges.append((start, stop))
        start = stop
    return ranges
