"""The Arrow arrays the Avro decoder builds from NumPy buffers: fixed-width values,
binary and string columns, decimals (with Spark's precision check), and the parts of rows
decoded apart put back in row order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .kernels import Cursor

__all__ = [
    "from_buffers",
    "nulls_where",
    "assemble",
    "binary_array",
    "decimal_array",
    "width_ordered",
]


def from_buffers(atype, values: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(atype, values.size, [None, pa.py_buffer(values)])


def nulls_where(arr: pa.Array, mask: np.ndarray) -> pa.Array:
    """``arr`` with the rows of ``mask`` null."""
    if not mask.any():
        return arr
    idx = np.arange(len(arr), dtype=np.int64)
    return arr.take(pa.array(idx, mask=mask))


def assemble(n: int, parts, atype) -> pa.Array:
    """One array of ``n`` rows from ``(slots, array)`` parts; rows in no part are null."""
    parts = [(s, a) for s, a in parts if s.size]
    if len(parts) == 1 and parts[0][0].size == n:
        return parts[0][1]
    if not parts:
        return pa.nulls(n, atype)
    combined = pa.concat_arrays([a for _, a in parts])
    inv = np.full(n, -1, dtype=np.int64)
    start = 0
    for s, _ in parts:
        inv[s] = np.arange(start, start + s.size)
        start += s.size
    return combined.take(pa.array(inv, mask=inv < 0))


def binary_array(atype, data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError("more than 2 GiB of bytes in one column of one batch")
    return pa.Array.from_buffers(
        atype, offsets.size - 1, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


# 10**p for p = 0..38 as (high int64, low uint64) words: the decimal precision check
_POW10 = [10**p for p in range(39)]


def decimal_array(cur: Cursor, starts, lengths, row, atype) -> pa.Array:
    """Big-endian two's complement unscaled values (Avro's decimal) as decimal128; rows
    whose value needs more than ``atype.precision`` digits are bad (Spark fails them)."""
    n = starts.size
    words = np.zeros((n, 16), dtype=np.uint8)
    if n:
        long_ = lengths > 16
        if long_.any():  # leading bytes must be the sign's extension
            for i in np.flatnonzero(long_):
                raw = cur.a[starts[i] : starts[i] + lengths[i]].tobytes()
                v = int.from_bytes(raw, "big", signed=True)
                if v.bit_length() > 127:
                    cur.bad[row[i]] = True
                    v = 0
                words[i] = np.frombuffer(v.to_bytes(16, "big", signed=True), dtype=np.uint8)
            short = np.flatnonzero(~long_)
        else:
            short = np.arange(n)
        ls = lengths[short]
        ss = starts[short]
        neg = np.zeros(short.size, dtype=bool)
        has = ls > 0
        neg[has] = cur.a[ss[has]] >= 0x80
        words[short[neg]] = 0xFF
        total = int(ls.sum())
        if total:
            rows = np.repeat(short, ls)
            within = np.arange(total) - np.repeat(np.cumsum(ls) - ls, ls)
            cols = np.repeat(16 - ls, ls) + within
            words[rows, cols] = cur.a[np.repeat(ss, ls) + within]
    le = np.ascontiguousarray(words[:, ::-1])
    lo = le[:, :8].copy().view(np.uint64).ravel()
    hi = le[:, 8:].copy().view(np.int64).ravel()
    limit = _POW10[atype.precision]
    if n and atype.precision < 38:
        lim_hi, lim_lo = limit >> 64, limit & ((1 << 64) - 1)
        neg = hi < 0
        alo = np.where(neg, ~lo + np.uint64(1), lo)
        ahi = np.where(neg, ~hi + (alo == 0).astype(np.int64), hi).astype(np.uint64)
        over = (ahi > np.uint64(lim_hi)) | ((ahi == np.uint64(lim_hi)) & (alo >= np.uint64(lim_lo)))
        if over.any():
            cur.bad[row[over]] = True
            le[over] = 0
    return pa.Array.from_buffers(atype, n, [None, pa.py_buffer(le)])


def width_ordered(group, offsets) -> bool:
    """Whether one group of items found is already in list order (the fixed-width path
    finds them slot by slot, in slot order, when all slots are in one block)."""
    sl, index, _ = group
    return bool(
        sl.size == 0
        or (np.all(sl[1:] >= sl[:-1]) and np.array_equal(offsets[sl] + index, np.arange(sl.size)))
    )
