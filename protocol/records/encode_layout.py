"""The pure encoder's layout of a records section (``encode_arrow._pure_section``): the
small fields of every record (varints) written with numpy into one buffer of "small
segments", then one ``take`` over those segments and the keys, values and header bytes, with
the indices interleaved in wire order. Arrow's C++ does the copying.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from .row_source import record_body_sizes
from .vectorized import (
    VARINT_HIGH_BYTE,
    VARINT_LOW_BYTE,
    varint_sizes,
    write_varints,
    zigzag_encode,
)


def _gather(pool_parts: list[pa.Array], order: np.ndarray) -> memoryview:
    """The bytes of the pool's elements in ``order``, concatenated (one C++ take)."""
    import pyarrow.compute as pc  # the pure path only: its import costs a worker 0.1-0.3 s

    pool = pa.concat_arrays(pool_parts)
    laid = pc.take(pool, pa.array(order, pa.int64()), boundscheck=False)
    offsets = np.frombuffer(laid.buffers()[1], dtype=np.int32, count=len(laid) + 1)
    data = laid.buffers()[2]
    if data is None:
        return memoryview(b"")
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


def _small_array(buf: np.ndarray, seg_len: np.ndarray) -> pa.Array:
    offsets = np.zeros(seg_len.size + 1, dtype=np.int32)
    np.cumsum(seg_len, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), seg_len.size, [None, pa.py_buffer(offsets), pa.py_buffer(buf)]
    )


def _write_head(small, at, s_len, s_t, s_o, s_k, body, ts_delta, offset_delta, key_len):
    """length | attributes (0, already there) | ts delta | offset delta | key length."""
    write_varints(small, at, zigzag_encode(body), s_len)
    at = at + s_len + 1
    write_varints(small, at, zigzag_encode(ts_delta), s_t)
    at = at + s_t
    write_varints(small, at, zigzag_encode(offset_delta), s_o)
    write_varints(small, at + s_o, zigzag_encode(key_len), s_k)


def layout_plain(n, keys, values, ts_delta, key_len, value_len):
    """Records without headers, the common case, with as few numpy calls as possible (a
    batch of a few thousand records makes call overhead count).

    The small bytes of record i, in wire order, are its length, attributes (0), timestamp
    delta, offset delta, key length, value length and header count (0). Between key and
    value sits the value length; between value and the next key the header count and the
    next record's head: so the small bytes form 2n + 1 segments, interleaved with keys and
    values by one ``take``."""
    fields = np.empty((4, n), dtype=np.int64)  # ts delta, offset delta, key len, value len
    fields[0] = ts_delta
    fields[1] = np.arange(n)
    fields[2] = key_len
    fields[3] = value_len
    u = zigzag_encode(fields)
    u_max = int(u.max())
    if u_max < 1 << 14:
        sizes = 1 + (u >= 0x80)
    elif u_max < 1 << 21:  # batches of more than 8,192 records: 3-byte offset deltas
        sizes = 1 + (u >= 0x80) + (u >= 1 << 14)
    else:
        sizes = varint_sizes(u)
    varint_bytes = sizes.sum(axis=0) + 2  # with the attributes and the header count
    body = varint_bytes + np.maximum(key_len, 0) + np.maximum(value_len, 0)
    if int(body.max()) >= 1 << 31:
        raise ConfigError("a record is larger than 2 GiB")
    u_len = zigzag_encode(body)
    s_len = varint_sizes(u_len)
    per_record = varint_bytes + s_len  # small bytes per record
    start = np.zeros(n, dtype=np.int64)
    np.cumsum(per_record[:-1], out=start[1:])
    total = int(start[-1] + per_record[-1])
    where = np.empty((6, n), dtype=np.int64)  # length, ts, offset, key len, value len, count
    where[0] = start
    where[1] = start + s_len + 1  # after the attributes byte
    np.cumsum(sizes, axis=0, out=where[2:])
    where[2:] += where[1]
    small = np.zeros(total + 2, dtype=np.uint8)  # attributes and header counts stay 0
    _write_small(small, where, u, u_max, sizes, u_len, s_len)
    offsets = np.empty(2 * n + 2, dtype=np.int32)
    offsets[0] = 0
    offsets[1:-1:2] = where[4]  # value length
    offsets[2:-1:2] = where[5]  # header count, then the next record's head
    offsets[-1] = total
    small_arr = pa.Array.from_buffers(
        pa.binary(), 2 * n + 1, [None, pa.py_buffer(offsets), pa.py_buffer(small)]
    )
    m = 2 * n + 1
    order = np.empty((n, 4), dtype=np.int64)
    order[:, 0] = np.arange(0, 2 * n, 2)  # header count of the previous record + head
    order[:, 1] = np.arange(m, m + n)  # key
    order[:, 2] = order[:, 0] + 1  # value length
    order[:, 3] = order[:, 1] + n  # value
    order = np.append(order.reshape(-1), 2 * n)  # the last header count
    key_part = pa.nulls(n, pa.binary()) if keys is None else keys
    return _gather([small_arr, key_part, values], order)


def _write_small(small, where, u, u_max, sizes, u_len, s_len):
    """Write the varints of ``layout_plain`` into ``small`` at ``where``: the record
    lengths ``u_len`` (``s_len`` bytes) and the four fields ``u`` (``sizes`` bytes; largest
    ``u_max``), with the fewest numpy calls their sizes allow."""
    n = u_len.size
    len_max = int(u_len.max())
    if u_max < 1 << 14 and len_max < 1 << 14:
        # every varint has one or two bytes: write all second bytes (0 for one-byte ones, the
        # next field's first byte then overwrites it), then all first bytes
        idx = np.empty((5, n), dtype=np.intp)
        idx[0] = u_len
        idx[1:] = u
        small[where[:5] + 1] = VARINT_HIGH_BYTE[idx]
        small[where[:5]] = VARINT_LOW_BYTE[idx]
        small[where[5]] = 0
    elif u_max < 1 << 21 and len_max < 1 << 21:
        # at most three bytes: the same, from the last byte to the first (a byte a varint
        # does not have is 0, and whatever it lands on is written again later or is 0)
        v = np.empty((5, n), dtype=np.uint64)
        v[0] = u_len
        v[1:] = u
        two, three = v >= 0x80, v >= 1 << 14
        small[where[:5] + 2] = (v >> np.uint64(14)).astype(np.uint8)
        small[where[:5] + 1] = np.where(
            two,
            ((v >> np.uint64(7)) & np.uint64(0x7F)) | (three.astype(np.uint64) << np.uint64(7)),
            0,
        )
        small[where[:5]] = (v & np.uint64(0x7F)) | (two.astype(np.uint64) << np.uint64(7))
        small[where[5]] = 0
    else:
        write_varints(small, where[0], u_len, s_len)
        for j in range(4):
            write_varints(small, where[j + 1], u[j], sizes[j])


def layout_with_headers(n, keys, values, hdr, ts_delta, key_len, value_len):
    """Records with headers. Small segments per record: head | vlen | hcount, then per
    header: hkey length | hvalue length. Wire order per record: head key vlen value hcount
    (hklen hkey hvlen hvalue)*."""
    offset_delta = np.arange(n, dtype=np.int64)
    body, s_t, s_o, s_k, s_v, s_h = record_body_sizes(
        key_len, value_len, ts_delta, offset_delta, hdr
    )
    if int(body.max()) >= 1 << 31:
        raise ConfigError("a record is larger than 2 GiB")
    s_len = varint_sizes(zigzag_encode(body))
    head = s_len + 1 + s_t + s_o + s_k  # length, attributes, ts delta, offset delta, key len
    count = hdr.count
    total = hdr.total
    segs = 3 + 2 * count
    seg_base = np.zeros(n, dtype=np.int64)
    np.cumsum(segs[:-1], out=seg_base[1:])
    owner = np.repeat(np.arange(n), count)
    flat_base = np.zeros(n, dtype=np.int64)
    np.cumsum(count[:-1], out=flat_base[1:])
    within = np.arange(total) - flat_base[owner]  # header index inside its record
    s_hk = varint_sizes(zigzag_encode(hdr.key_len))
    s_hv = varint_sizes(zigzag_encode(hdr.value_len))
    nseg = int(segs.sum())
    seg_len = np.empty(nseg, dtype=np.int64)
    seg_len[seg_base] = head
    seg_len[seg_base + 1] = s_v
    seg_len[seg_base + 2] = s_h
    hk_seg = seg_base[owner] + 3 + 2 * within
    seg_len[hk_seg] = s_hk
    seg_len[hk_seg + 1] = s_hv
    seg_start = np.zeros(nseg + 1, dtype=np.int64)
    np.cumsum(seg_len, out=seg_start[1:])
    small = np.zeros(int(seg_start[-1]), dtype=np.uint8)
    _write_head(
        small, seg_start[seg_base], s_len, s_t, s_o, s_k, body, ts_delta, offset_delta, key_len
    )
    write_varints(small, seg_start[seg_base + 1], zigzag_encode(value_len), s_v)
    write_varints(small, seg_start[seg_base + 2], zigzag_encode(count), s_h)
    write_varints(small, seg_start[hk_seg], zigzag_encode(hdr.key_len), s_hk)
    write_varints(small, seg_start[hk_seg + 1], zigzag_encode(hdr.value_len), s_hv)
    small_arr = _small_array(small, seg_len)

    pieces = 5 + 4 * count
    out_base = np.zeros(n, dtype=np.int64)
    np.cumsum(pieces[:-1], out=out_base[1:])
    order = np.empty(int(pieces.sum()), dtype=np.int64)
    rows = np.arange(n)
    order[out_base] = seg_base
    order[out_base + 1] = nseg + rows
    order[out_base + 2] = seg_base + 1
    order[out_base + 3] = nseg + n + rows
    order[out_base + 4] = seg_base + 2
    h_out = out_base[owner] + 5 + 4 * within
    flat = np.arange(total)
    order[h_out] = hk_seg
    order[h_out + 1] = nseg + 2 * n + flat
    order[h_out + 2] = hk_seg + 1
    order[h_out + 3] = nseg + 2 * n + total + flat
    key_part = pa.nulls(n, pa.binary()) if keys is None else keys
    return _gather([small_arr, key_part, values, hdr.keys, hdr.values], order)
