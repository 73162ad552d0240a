"""The vectorised pass of the pure decoder: every field of every record of an arena (the
records sections of several batches, concatenated) decoded with numpy, one field at a time
for all records, and checked the same way (steps 2 to 4 of ``decode_arrow``'s outline).

A failed check raises ``Bad`` with the index of the first bad record; ``decode_arrow`` then
lets the reference decoder (batch.py) name the problem in that record's batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .arrow_columns import assemble, headers_column, slices
from .vectorized import PAD, VarintError, decode_varints, find_record_ends, walk_records_general

_PADDING = bytes(PAD)


class Bad(Exception):
    """A vectorised check failed at record ``index`` (of the arena)."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def decode_arena(
    p, counts, batch_of_last, topic, partition, start_offset, end_offset, include_headers, schema
):
    """The batch of the records sections pending in ``p`` (decode_pending.Pending): the
    records with ``start_offset <= offset < end_offset``; ``Bad`` when a check fails."""
    data = b"".join(p.sections + [_PADDING])
    limit = len(data) - PAD
    a = np.frombuffer(data, dtype=np.uint8)
    total = int(counts.sum())
    section_end = np.cumsum(np.array([len(s) for s in p.sections], dtype=np.int64))

    # 1. record boundaries: the one sequential walk
    starts, ends = _record_bounds(data, a, total, limit, batch_of_last, section_end)

    # 2. fields, for all records at once (in slices that keep the temporaries in cache)
    ts_delta, offset_delta, key_start, key_len, value_start, value_len = (
        np.empty(total, dtype=np.int64) for _ in range(6)
    )
    plain = np.empty(total, dtype=bool)
    for i in range(0, total, _CHUNK):
        j = min(i + _CHUNK, total)
        (
            ts_delta[i:j],
            offset_delta[i:j],
            key_start[i:j],
            key_len[i:j],
            value_start[i:j],
            value_len[i:j],
            plain[i:j],
        ) = _fields(a, starts[i:j], ends[i:j], i)
    header_count = None
    header_parts: Any = None  # (count, key starts, key lengths, value starts, value lengths)
    if not plain.all():
        with_headers = np.flatnonzero(~plain)
        header_parts = _decode_headers(
            a,
            (value_start + np.maximum(value_len, 0))[with_headers],
            ends[with_headers],
            with_headers,
        )
        header_count = np.zeros(total, dtype=np.int64)
        header_count[with_headers] = header_parts[0]

    # 3. offsets and timestamps, checked per batch
    offsets, ts, ts_type = _offsets_and_timestamps(
        p, counts, batch_of_last, total, offset_delta, ts_delta
    )

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
    keys, values = slices(
        arena, [key_start, value_start], [key_len, value_len], [pa.binary(), pa.binary()]
    )
    headers = None
    if include_headers:
        headers = headers_column(arena, len(offsets), header_count, header_parts)
    return assemble(keys, values, topic, partition, offsets, ts, ts_type, headers, schema)


def _record_bounds(data, a, total, limit, batch_of_last, section_end):
    """Where each record starts and ends in the arena; ``Bad`` when the records cannot be
    followed or do not fill their batch exactly."""
    ends = find_record_ends(data, a, total, limit, (batch_of_last + 1).tolist())
    if ends is None:
        ends_list, err = walk_records_general(data, total, limit)
        if err is None:  # pragma: no cover - the two walks agree on what they accept
            err = "records cannot be followed"
        raise Bad(len(ends_list), err)
    wrong = ends[batch_of_last] != section_end
    if wrong.any():
        b = int(np.flatnonzero(wrong)[0])
        raise Bad(int(batch_of_last[b]), "records do not fill their batch exactly")
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    return starts, ends


def _offsets_and_timestamps(p, counts, batch_of_last, total, offset_delta, ts_delta):
    """Each record's offset, timestamp (ms) and timestamp type, its offset delta checked
    against its batch's."""

    def check(bad_mask, message):
        if bad_mask.any():
            raise Bad(int(np.flatnonzero(bad_mask)[0]), message)

    rep = np.repeat
    base = rep(np.array(p.base_offset, dtype=np.int64), counts)
    last_delta = rep(np.array(p.last_delta, dtype=np.int64), counts)
    check(
        (offset_delta < 0) | (offset_delta > last_delta),
        "record offset delta beyond the batch's last offset delta",
    )
    if total > 1:
        first = np.zeros(total, dtype=bool)
        first[batch_of_last[:-1] + 1] = True
        check(
            np.concatenate(([False], (offset_delta[1:] <= offset_delta[:-1]) & ~first[1:])),
            "record offset deltas are not increasing",
        )
    offsets = base + offset_delta
    ts = rep(np.array(p.base_timestamp, dtype=np.int64), counts) + ts_delta
    log_append = np.array(p.log_append, dtype=bool)
    if log_append.any():
        lat = rep(log_append, counts)
        ts = np.where(lat, rep(np.array(p.max_timestamp, dtype=np.int64), counts), ts)
        ts_type = lat.astype(np.int32)
    else:
        ts_type = np.zeros(total, dtype=np.int32)
    return offsets, ts, ts_type


_CHUNK = 4096


def _fields(a, starts, ends, first_index):
    """Decode the fixed sequence of fields of the records [starts, ends) of the arena."""

    def check(bad_mask, message):
        if bad_mask.any():
            raise Bad(first_index + int(np.flatnonzero(bad_mask)[0]), message)

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
        raise Bad(first_index + e.index, str(e)) from None
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
        raise Bad(int(rows[err.index]), str(err)) from None
    if (count < 0).any() or (count * 2 > ends - pos).any():
        bad = np.flatnonzero((count < 0) | (count * 2 > ends - pos))[0]
        raise Bad(int(rows[bad]), "record header count does not fit the record")
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
                raise Bad(
                    int(rows[active[np.flatnonzero(bad)[0]]]),
                    "record header key length does not fit the record",
                )
            key_start[flat], key_len[flat] = p, kl
            p = p + kl
            vl, p = decode_varints(a, p, 5)
            p2 = p + np.maximum(vl, 0)
            bad = (vl < -1) | (p2 > e)
            if bad.any():
                raise Bad(
                    int(rows[active[np.flatnonzero(bad)[0]]]),
                    "record header value length does not fit the record",
                )
        except VarintError as err:
            raise Bad(int(rows[active[err.index]]), str(err)) from None
        value_start[flat], value_len[flat] = p, vl
        pos[active] = p2
        j += 1
    done = pos != ends
    if done.any():
        raise Bad(int(rows[np.flatnonzero(done)[0]]), "record fields do not end with the record")
    return count, key_start, key_len, value_start, value_len
