"""Record-parallel reads of Avro's primitive encodings from one byte buffer.

Every function reads one value at each of many positions at once (one per row, or per
array item) and never trusts the bytes: ``Cursor`` holds the buffer (with ``PAD`` spare
zero bytes after the data, so a read a little past a row's end stays inside it), each
slot's position, its end and the row it belongs to; a value that runs past its row's end,
a varint too long for its type, a length or count larger than the bytes left marks the
row bad (``Cursor.bad``) and parks that slot at its end, so it reads nothing more and no
read ever leaves the buffer or allocates more than the bytes at hand.

Varints use the project's vectorised decoder (``protocol.records.vectorized``).
"""

from __future__ import annotations

import numpy as np

from protocol.records.vectorized import PAD, decode_varints, word_varints, zigzag_decode


class Cursor:
    """The buffer and the per-row error flags shared by every read of one decode call."""

    def __init__(self, a: np.ndarray, nrows: int):
        self.a = a  # uint8, PAD readable bytes after the data
        self.bad = np.zeros(nrows, dtype=bool)
        self.depth = 0  # records being read, one inside the other
        # the 8 bytes starting at every byte as one little-endian uint64 (an unaligned
        # view, no copy): a gather of fixed-width values is one 8-byte load per slot
        self.word = np.ndarray(shape=(max(a.size - 8, 0),), dtype="<u8", buffer=a, strides=(1,))

    def fail(self, row: np.ndarray, pos: np.ndarray, end: np.ndarray, which: np.ndarray):
        """Mark the rows of the slots selected by the bool mask ``which`` bad and park
        those slots at their ends."""
        if which.any():
            self.bad[row[which]] = True
            pos[which] = end[which]

    def check_end(self, pos, end, row):
        self.fail(row, pos, end, pos > end)


def read_varint(cur: Cursor, pos, end, row, max_bytes: int = 10):
    """The zigzag varint (Avro int: ``max_bytes`` 5, long: 10) at every position; returns
    (values int64, positions after them). Varints of one or two bytes go through the
    project's table-driven decoder, longer ones through ``word_varints``."""
    if pos.size == 0:
        return np.zeros(0, dtype=np.int64), pos
    a = cur.a
    b0 = a[pos]
    if b0.max() < 0x80:  # one byte each
        new = pos + 1
        cur.check_end(new, end, row)
        return _ONE_BYTE[b0], new
    if ((b0 < 0x80) | (a[pos + 1] < 0x80)).all():  # two bytes at most
        values, new = decode_varints(a, pos, max_bytes)
        cur.check_end(new, end, row)
        return values, new
    raw, size, longer = word_varints(cur.word[pos])
    bad = np.zeros(pos.size, dtype=bool)
    if longer.any():  # 9 or 10 bytes: the last one or two
        sub = np.flatnonzero(longer)
        b8 = a[pos[sub] + 8]
        b9 = a[pos[sub] + 9]
        raw[sub] |= (b8 & 0x7F).astype(np.uint64) << np.uint64(56)
        ten = b8 >= 0x80
        raw[sub[ten]] |= (b9[ten] & 1).astype(np.uint64) << np.uint64(63)
        size[sub] = np.where(ten, 10, 9)
        bad[sub[ten & (b9 > 1)]] = True  # longer than 10 bytes, or beyond 64 bits
    if max_bytes <= 5:
        bad |= (size > 5) | (raw >> np.uint64(32) != 0)
    values = zigzag_decode(raw)
    new = pos + size
    if bad.any():
        values[bad] = 0
        cur.fail(row, new, end, bad)
    cur.check_end(new, end, row)
    return values, new


_ONE_BYTE = zigzag_decode(np.arange(256, dtype=np.uint64))


def read_fixed_width(cur: Cursor, pos, end, row, width: int):
    """``width`` (1 to 8) bytes at every position, as the low bytes of a little-endian
    uint64 each (the bytes past ``width`` are whatever follows), or for one byte as uint8
    (a byte gather costs a fraction of an unaligned 8-byte one); returns (words, new
    positions)."""
    new = pos + width
    over = new > end
    if over.any():
        cur.fail(row, new, end, over)
        pos = np.where(over, end - width, pos).clip(0)
    return (cur.a[pos] if width == 1 else cur.word[pos]), new


def read_lengths(cur: Cursor, pos, end, row):
    """An Avro length (a long) at every position, checked to fit in the bytes left;
    returns (lengths, positions of the data)."""
    length, pos = read_varint(cur, pos, end, row)
    wrong = (length < 0) | (length > end - pos)
    if wrong.any():
        cur.fail(row, pos, end, wrong)
        length = np.where(wrong, 0, length)
    return length, pos


def gather_slices(a: np.ndarray, starts: np.ndarray, lengths: np.ndarray):
    """The bytes ``a[starts[i]:starts[i]+lengths[i]]`` laid end to end, and the int32 or
    int64 offsets of each slice in them (Arrow's layout)."""
    n = starts.size
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.zeros(0, dtype=np.uint8), offsets
    if n and (lengths == lengths[0]).all():  # one width: a 2-D gather
        w = int(lengths[0])
        idx = starts[:, None] + np.arange(w)
        return a[idx].reshape(-1), offsets
    widest = int(lengths.max())
    if widest <= _WINDOW_MAX and total >= 8 * n and n * widest <= 2 * total:
        # slices of 8 to 32 bytes and similar lengths: gather a window of the longest
        # length at each start (one row copy per slice, reading at most ``widest`` bytes
        # past it, inside the buffer's PAD), keep each row's first ``length`` bytes; for
        # shorter slices the per-byte positions below cost less
        win = np.lib.stride_tricks.as_strided(
            a, shape=(a.size - widest + 1, widest), strides=(1, 1)
        )
        return win[starts][_KEEP[widest][lengths]], offsets
    shift = np.repeat(starts - offsets[:-1], lengths)
    shift += np.arange(total, dtype=np.int64)
    return a[shift], offsets


#: ``gather_slices`` gathers slices up to this long through fixed windows
_WINDOW_MAX = 32
#: ``_KEEP[w][k]``: the first ``k`` of ``w`` window bytes
_KEEP = [np.arange(w)[None, :] < np.arange(w + 1)[:, None] for w in range(_WINDOW_MAX + 1)]


def read_blobs(cur: Cursor, pos, end, row):
    """Avro bytes/string at every position: (data bytes, offsets int64, new positions)."""
    length, pos = read_lengths(cur, pos, end, row)
    data, offsets = gather_slices(cur.a, pos, length)
    return data, offsets, pos + length


def padded(data, extra: int = PAD) -> np.ndarray:
    """A uint8 copy of ``data`` with ``extra`` zero bytes after it."""
    src = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    out = np.zeros(src.size + extra, dtype=np.uint8)
    out[: src.size] = src
    return out
