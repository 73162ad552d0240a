"""Vectorised varint helpers over numpy byte arrays: the building blocks of the hot path.

Kafka record fields are zigzag LEB128 varints. Decoding one field for every record at once
is a gather at the records' current positions: a 65536-entry table indexed by the two bytes
found there gives the decoded value and the byte count of every varint of one or two bytes
(almost all of them), and the rare longer ones are finished on the subset that needs it.
Encoding computes all sizes with comparisons and writes byte ``j`` of every varint with one
scatter.

Buffers handed to the decoders must carry ``PAD`` readable bytes after the data so a
gather a few bytes past a record never leaves the array; positions are int64.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import cache

import numpy as np

#: Readable slack after the data in every array the decoders gather from.
PAD = 64


class VarintError(ValueError):
    """A varint is longer than its type allows or overflows it; ``index`` says which."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


@cache
def _tables():
    """Indexed by the two bytes at a varint's start (little-endian): its value and its size;
    and by one byte: its value. Built at the first decode (tens of milliseconds a process
    that only encodes, a write task, does not pay)."""
    w = np.arange(65536, dtype=np.int64)
    b0 = w & 0xFF
    b1 = w >> 8
    one = b0 < 0x80
    two = ~one & (b1 < 0x80)
    raw = np.where(one, b0, (b0 & 0x7F) | ((b1 & 0x7F) << 7))
    value = (raw >> 1) ^ -(raw & 1)
    # size 0 marks a varint of three bytes or more, finished by _finish_long
    size = np.where(one, 1, np.where(two, 2, 0)).astype(np.uint8)
    small = np.arange(256, dtype=np.int64)
    return value, size, (small >> 1) ^ -(small & 1)


def zigzag_decode(raw: np.ndarray) -> np.ndarray:
    """Zigzag-decode unsigned values (uint64 or non-negative int64) to int64."""
    u = raw.astype(np.uint64, copy=False)
    return ((u >> np.uint64(1)) ^ (np.uint64(0) - (u & np.uint64(1)))).view(np.int64)


def zigzag_encode(values: np.ndarray) -> np.ndarray:
    """Zigzag-encode int64 values to uint64."""
    v = np.asarray(values, dtype=np.int64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


_HIGH_BITS = np.uint64(0x8080808080808080)
_LOW_7_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)
_ONE = np.uint64(1)
# the 7-bit groups packed pairwise in three rounds (bytes -> 14 bits -> 28 -> 56): the
# kept low half of each lane, the high half shifted down onto its end
_PACK = [
    (np.uint64(1), np.uint64(0x007F007F007F007F), np.uint64(0x3F803F803F803F80)),
    (np.uint64(2), np.uint64(0x00003FFF00003FFF), np.uint64(0x0FFFC0000FFFC000)),
    (np.uint64(4), np.uint64(0x000000000FFFFFFF), np.uint64(0x00FFFFFFF0000000)),
]
_bitwise_count = getattr(np, "bitwise_count", None)


def _popcount(x: np.ndarray) -> np.ndarray:
    if _bitwise_count is not None:
        return _bitwise_count(x)
    # numpy < 2: SWAR bit count
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


def word_varints(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varints of up to 8 bytes, each given as the 8 bytes at its position read as one
    little-endian uint64 (``x``, overwritten): the first byte without its high bit ends the
    varint (the lowest set bit of ``~x & 0x80..``), and the 7-bit groups are packed in three
    rounds of shifts whatever the length. Returns (raw unsigned values, sizes, mask of
    varints longer than 8 bytes, whose values hold their first 8 bytes' groups and sizes 8,
    for the caller to finish)."""
    t = ~x
    t &= _HIGH_BITS
    longer = t == 0
    below = np.negative(t)  # t & -t: the lowest set bit
    below &= t
    below[longer] = np.uint64(1 << 63)
    below -= _ONE  # every bit below it: bit 8k+7 ends a varint of k+1 bytes
    size = _popcount(below).astype(np.int64)
    size >>= 3
    size += 1
    x &= below
    x &= _LOW_7_BITS
    for shift, keep, high in _PACK:
        hi = x >> shift
        hi &= high
        x &= keep
        x |= hi
    return x, size, longer


def _finish_long(a: np.ndarray, pos: np.ndarray, max_bytes: int):
    """Decode varints of any length (up to ``max_bytes``) at ``pos``, one byte per round."""
    n = pos.size
    raw = np.zeros(n, dtype=np.uint64)
    size = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    shift = 0
    limit_bits = 32 if max_bytes <= 5 else 64
    while active.size:
        if shift >= 7 * max_bytes:
            raise VarintError(f"varint longer than {max_bytes} bytes", int(active[0]))
        b = a[pos[active] + size[active]]
        part = (b & 0x7F).astype(np.uint64)
        if shift + 7 > limit_bits:  # the last byte may only fill the remaining bits
            spare = limit_bits - shift
            over = (part >> np.uint64(spare)) != 0
            if over.any():
                raise VarintError(
                    f"varint overflows {limit_bits} bits", int(active[np.flatnonzero(over)[0]])
                )
        raw[active] |= part << np.uint64(shift)
        size[active] += 1
        active = active[b >= 0x80]
        shift += 7
    return zigzag_decode(raw), size


def decode_varints(a: np.ndarray, pos: np.ndarray, max_bytes: int = 5):
    """Decode the zigzag varint starting at each position of ``pos`` in the uint8 array ``a``.

    ``max_bytes`` is 5 for varint (int32) fields and 10 for varlong (int64) fields.
    Returns ``(values int64, positions after each varint)``. Raises ``VarintError``.
    """
    pair_value, pair_size, byte_value = _tables()
    b0 = a[pos]
    if pos.size == 0 or b0.max() < 0x80:  # every varint is a single byte
        return byte_value[b0], pos + 1
    idx = b0.astype(np.intp)
    idx |= a[pos + 1].astype(np.intp) << 8
    values = pair_value[idx]
    size = pair_size[idx]
    if size.min() == 0:  # some have three bytes or more
        longer = np.flatnonzero(size == 0)
        try:
            v, s = _finish_long(a, pos[longer], max_bytes)
        except VarintError as e:
            raise VarintError(str(e), int(longer[e.index])) from None
        values[longer] = v
        size = size.astype(np.int64)
        size[longer] = s
    return values, pos + size


# for every value below 2**14 (a varint of one or two bytes): its first and second byte
VARINT_LOW_BYTE = (
    (np.arange(1 << 14) & 0x7F) | np.where(np.arange(1 << 14) >= 0x80, 0x80, 0)
).astype(np.uint8)
VARINT_HIGH_BYTE = (np.arange(1 << 14) >> 7).astype(np.uint8)


def varint_sizes(u: np.ndarray) -> np.ndarray:
    """Bytes taken by each unsigned (already zigzagged) value, 1 to 10, as int64."""
    u = u.astype(np.uint64, copy=False)
    size = np.ones(u.shape, dtype=np.int64)
    if u.size == 0:
        return size
    top = int(u.max())
    bound = 1 << 7
    while top >= bound and bound < (1 << 64):
        size += u >= np.uint64(bound)
        bound <<= 7
    return size


def write_varints(out: np.ndarray, pos: np.ndarray, u: np.ndarray, size: np.ndarray) -> None:
    """Write the unsigned values ``u`` as LEB128 at ``pos`` of the uint8 array ``out``."""
    u = u.astype(np.uint64, copy=False)
    if u.size == 0:
        return
    low = (u & np.uint64(0x7F)).astype(np.uint8)
    out[pos] = low | ((size > 1).astype(np.uint8) << 7)
    longest = int(size.max())
    if longest == 1:
        return
    sel = np.flatnonzero(size > 1)
    for j in range(1, longest):
        us = u[sel] >> np.uint64(7 * j)
        more = size[sel] > j + 1
        out[pos[sel] + j] = (us & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
        sel = sel[more]
        if not sel.size:
            break


# ---- record boundaries ---------------------------------------------------------------------

_HUGE = 1 << 62  # an advance that throws the walk off the buffer: "cannot take this path"
_WALK_TABLE: tuple | None = None


def _walk_table(min_length: int = 6) -> tuple:
    """For the two bytes at a record start, how far the record reaches (length prefix
    included), when the prefix is a one- or two-byte varint of a plausible length."""
    global _WALK_TABLE
    if _WALK_TABLE is None:
        b0 = np.arange(256, dtype=np.int64)[:, None]
        b1 = np.arange(256, dtype=np.int64)[None, :]
        one = np.broadcast_to(b0 < 0x80, (256, 256))
        raw = np.where(one, b0, (b0 & 0x7F) | (b1 << 7))
        length = raw >> 1
        ok = ((raw & 1) == 0) & (length >= min_length) & (one | (b1 < 0x80))
        advance = np.where(ok, np.where(one, 1, 2) + length, _HUGE)
        _WALK_TABLE = tuple(tuple(row) for row in advance.tolist())
    return _WALK_TABLE


def walk_records(data: bytes, count: int, start: int = 0) -> list[int] | None:
    """End position of each of ``count`` consecutive records starting at byte ``start`` of
    ``data``, following the length prefixes: the one sequential step of decoding.

    Returns None when a record has a length prefix of three bytes or more, or an implausible
    one (the caller then walks with ``walk_records_general``). ``data`` must be ``bytes``
    with at least 2 readable bytes past the last record.
    """
    table = _walk_table(6)
    p = start
    try:
        ends = [p := p + table[data[p]][data[p + 1]] for _ in range(count)]
    except IndexError:
        return None
    if ends and ends[-1] >= _HUGE:
        return None
    return ends


def _record_advance(data, p: int, limit: int) -> int | None:
    """Bytes taken by the record at ``p`` (length prefix included), None if malformed."""
    raw = shift = 0
    q = p
    while q < limit and shift <= 28:
        b = data[q]
        q += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            length = (raw >> 1) ^ -(raw & 1)
            if length < 6 or q + length > limit:
                return None
            return q - p + length
    return None


def find_record_ends(
    data: bytes, a: np.ndarray, count: int, limit: int, batch_ends: list[int] | None = None
) -> np.ndarray | None:
    """End positions of ``count`` records laid end to end from byte 0 of ``data`` (``a`` is
    the same bytes as a uint8 array with ``PAD`` bytes of slack), ending at ``limit``.
    ``batch_ends`` (optional): the number of records up to the end of each batch, rising.

    Runs of records of one size (fixed-width keys and values are common) are found with
    numpy: guess that the next records have the size of the current one and check every
    guess at once (a record whose length prefix has the same bytes has the same size).
    Sizes change where a varint grows (the offset delta at record 64 of every batch) and
    back at the start of the next batch, so a guess reaches to the end of a batch: to the
    end of the one holding the record ``run`` records ahead, ``run`` growing fourfold after
    each guess that held and back to 64 after one that did not. When the runs turn out
    short, a list comprehension follows the length prefixes from there (``walk_records``).
    (Finding record starts from the zero byte that closes records without headers was
    tried too: slower than the walk here.)

    Returns None when the records cannot be followed (the caller then reports the error
    through ``walk_records_general``).
    """
    ends = np.empty(count, dtype=np.int64)
    if batch_ends is None or not batch_ends or batch_ends[-1] != count:
        batch_ends = [count]
    nb = len(batch_ends)
    k = p = misses = 0
    run = 64
    steps = None
    while k < count:
        size = _record_advance(data, p, limit)
        if size is None:
            return None
        b = bisect_left(batch_ends, k + run)
        m = min((batch_ends[b] if b < nb else count) - k, (limit - p) // size)
        if m < 2:
            ends[k] = p + size
            k += 1
            p += size
        else:
            if steps is None or steps.size < m:
                steps = np.arange(max(m, min(count, 1024)), dtype=np.int64)
            guess = steps[:m] * size
            guess += p
            # a record whose length prefix has the same bytes has the same size
            same = a[guess] == data[p]
            i = p
            while data[i] >= 0x80:
                i += 1
                same &= a[guess + (i - p)] == data[i]
            j = int(same.argmin()) if not same.all() else m
            ends[k : k + j] = guess[:j]
            ends[k : k + j] += size
            k += j
            p += j * size
            if j == m:
                run = min(run * 4, 1 << 16)
            else:
                run = 64
                misses += 1
        if k < count and (k < 16 or (misses >= 2 and k < misses * 64)):
            break  # the sizes vary
    if k == count:
        return ends
    rest = walk_records(data, count - k, p)
    if rest is None:  # a length prefix of 3+ bytes, or a malformed record
        rest, err = walk_records_general(data, count - k, limit, p)
        if err is not None:
            return None
    ends[k:] = np.fromiter(rest, dtype=np.int64, count=count - k)
    return ends


def walk_records_general(data, count: int, limit: int, start: int = 0):
    """Like ``walk_records`` but for any varint length; stops at the first record whose
    prefix is malformed or runs past ``limit``. Returns (ends, error message or None)."""
    ends: list[int] = []
    p = start
    for _ in range(count):
        raw = shift = 0
        q = p
        while True:
            if q >= limit or shift > 28:
                return ends, f"malformed record length prefix at byte {p}"
            b = data[q]
            q += 1
            raw |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        length = (raw >> 1) ^ -(raw & 1)
        if length < 6 or q + length > limit:
            return ends, f"record length {length} at byte {p} does not fit"
        p = q + length
        ends.append(p)
    return ends, None
