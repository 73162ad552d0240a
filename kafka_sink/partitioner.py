"""Which partition each record goes to, for a whole Arrow column at once.

The rules are those of Kafka's Java producer (``BuiltInPartitioner``), which Spark's Kafka
sink uses:

1. a record with a non-null ``partition`` goes to that partition;
2. a record with a key (an empty key counts as a key) goes to
   ``toPositive(murmur2(key)) % numPartitions``, where ``murmur2`` is Java's
   ``Utils.murmur2`` (32-bit MurmurHash2, seed ``0x9747b28c``) and ``toPositive`` clears the
   sign bit, so the same key lands where a Java, librdkafka (``murmur2_random``) or
   kafka-python producer puts it;
3. a record with neither is "sticky": runs of unkeyed records fill one partition until
   about ``batch.size`` bytes went there, then the next partition takes the next run, and
   so on round the topic. A task starts at a random partition so that tasks spread out.

``kafka.partitioner.class`` may replace steps 2 and 3 by the Java class's name:
``UniformStickyPartitioner`` (sticky runs, keys ignored) or ``RoundRobinPartitioner`` (the
class below: the next partition in turn, keys ignored).

``murmur2`` hashes every value of an Arrow binary (or string) array with numpy, reading the
array's offsets and data buffers directly: rows are sorted by length once, then each round
mixes the next 4-byte word of every row that still has one. The work is one numpy pass per
4 bytes of the longest key, never a Python step per row. With the compiled encoder
(``protocol.records.accel``) a C loop over the same buffers does it instead.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from protocol.records import accel

__all__ = [
    "murmur2",
    "murmur2_bytes",
    "to_positive",
    "key_partitions",
    "StickyPartitioner",
    "RoundRobinPartitioner",
]

SEED = 0x9747B28C
_M = np.uint32(0x5BD1E995)
_R = np.uint32(24)


def murmur2_bytes(data: bytes) -> int:
    """Java's ``Utils.murmur2`` of one byte string, as a signed 32-bit int (like Java)."""
    arr = pa.array([bytes(data)], pa.binary())
    return int(murmur2(arr).view(np.int32)[0])


def to_positive(h) -> np.ndarray:
    """Java's ``Utils.toPositive``: the hash with its sign bit cleared."""
    return np.asarray(h).astype(np.uint32) & np.uint32(0x7FFFFFFF)


def _binary_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64 of length n+1, data uint8) of a binary/string array, slice-aware."""
    t = arr.type
    if pa.types.is_string(t):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(t):
        arr = arr.view(pa.large_binary())
    elif _is_view(t):
        arr = arr.cast(pa.large_binary())
    elif not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        raise TypeError(f"murmur2 needs a binary or string array, not {t}")
    bufs = arr.buffers()
    off_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    n = len(arr)
    if bufs[1] is None:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)
    offsets = np.frombuffer(bufs[1], dtype=off_type)[arr.offset : arr.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def _is_view(t: pa.DataType) -> bool:
    """A binary or string view (pyarrow 16 and later; pyarrow 15 has none)."""
    is_binary_view = getattr(pa.types, "is_binary_view", None)
    return is_binary_view is not None and (is_binary_view(t) or pa.types.is_string_view(t))


def _fixed_width_words(padded: np.ndarray, offsets: np.ndarray, n: int) -> np.ndarray | None:
    """When every key has the same length and they lie end to end (fixed-width keys, the
    common case), the little-endian 32-bit words of each key as an (n, words) table, read
    with one reshape instead of four byte gathers per word; None otherwise."""
    width = int(offsets[1] - offsets[0])
    if int(offsets[-1] - offsets[0]) != width * n or not (np.diff(offsets) == width).all():
        return None
    first = int(offsets[0])
    rows = padded[first : first + width * n].reshape(n, width)
    return np.ascontiguousarray(rows[:, : width // 4 * 4]).view("<u4")


def murmur2(keys: pa.Array) -> np.ndarray:
    """Java's ``Utils.murmur2`` of every value of ``keys`` (binary or string), as uint32.

    Null values hash as empty keys; callers keep track of nulls themselves.
    """
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    n = len(keys)
    offsets, data = _binary_buffers(keys)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    if keys.null_count:
        valid = np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        lengths = np.where(valid, lengths, 0)
    ext = accel.encoder()
    if ext is not None:  # the compiled loop (protocol/records/_fastencode.c), same hashes
        return np.frombuffer(
            ext.murmur2(
                np.ascontiguousarray(starts), np.ascontiguousarray(lengths, dtype=np.int64), data
            ),
            dtype=np.uint32,
        )
    # 3 bytes of padding so the tail gather below never leaves the buffer
    padded = np.zeros(len(data) + 4, np.uint8)
    padded[: len(data)] = data

    with np.errstate(over="ignore"):
        h = np.uint32(SEED) ^ lengths.astype(np.uint32)
        words = lengths // 4
        # Longest rows first: the rows still mixing a word in round i are a prefix.
        same = n == 0 or words.min() == words.max()
        order = None if same else np.argsort(-words, kind="stable")
        sorted_words = words if same else words[order]
        sorted_starts = starts if same else starts[order]
        hs = h if same else h[order]
        rounds = int(sorted_words[0]) if n else 0
        # active[i] = number of rows with more than i words
        active = n - np.searchsorted(sorted_words[::-1], np.arange(rounds), side="right")
        table = _fixed_width_words(padded, offsets, n) if same and rounds else None
        for i in range(rounds):
            a = int(active[i])
            if table is not None:
                k = table[:, i].copy()
            else:
                pos = sorted_starts[:a] + 4 * i
                k = (
                    padded[pos].astype(np.uint32)
                    | (padded[pos + 1].astype(np.uint32) << np.uint32(8))
                    | (padded[pos + 2].astype(np.uint32) << np.uint32(16))
                    | (padded[pos + 3].astype(np.uint32) << np.uint32(24))
                )
            k *= _M
            k ^= k >> _R
            k *= _M
            hh = hs[:a]
            hh *= _M
            hh ^= k
        if not same:
            h = np.empty(n, np.uint32)
            h[order] = hs

        tail = (lengths % 4).astype(np.int64)
        base = starts + (lengths & ~3)
        for size, shift in ((3, 16), (2, 8)):
            sel = tail >= size
            if sel.any():
                h[sel] ^= padded[base[sel] + size - 1].astype(np.uint32) << np.uint32(shift)
        sel = tail >= 1
        if sel.any():
            h[sel] ^= padded[base[sel]].astype(np.uint32)
            h[sel] *= _M
        h ^= h >> np.uint32(13)
        h *= _M
        h ^= h >> np.uint32(15)
    return h


def key_partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """``toPositive(murmur2(key)) % num_partitions`` for every key, as int32."""
    return (to_positive(murmur2(keys)) % np.uint32(num_partitions)).astype(np.int32)


class StickyPartitioner:
    """Partitions for unkeyed records: a run of about ``batch_size`` bytes per partition,
    then the next partition. One instance per task; it remembers where each topic's run
    stands across the task's Arrow batches."""

    def __init__(self, batch_size: int, rng: random.Random | None = None):
        self.batch_size = max(1, int(batch_size))
        self._rng = rng or random.Random()
        self._state: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes in run)

    def assign(self, topic: str, sizes: np.ndarray, num_partitions: int) -> np.ndarray:
        """Partitions for records of ``topic`` with these encoded ``sizes``, in order."""
        sizes = np.asarray(sizes, dtype=np.int64)
        if topic not in self._state:
            self._state[topic] = (self._rng.randrange(num_partitions), 0)
        start, used = self._state[topic]
        if sizes.size == 0:
            return np.zeros(0, np.int32)
        # The run switches after the record that makes it reach batch_size (as Java's
        # sticky partitioner switches once a batch is full).
        before = used + np.cumsum(sizes) - sizes  # bytes in the run before each record
        run = before // self.batch_size
        parts = ((start + run) % num_partitions).astype(np.int32)
        total = used + int(sizes.sum())
        self._state[topic] = (
            (start + total // self.batch_size) % num_partitions,
            total % self.batch_size,
        )
        return parts


class RoundRobinPartitioner:
    """Kafka's ``RoundRobinPartitioner`` for whole columns: each record goes to the
    partition after the previous record's, keys ignored. Java starts every producer at
    partition 0; a task starts at a random one, so that small tasks spread out."""

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng or random.Random()
        self._next: dict[str, int] = {}

    def assign(self, topic: str, sizes: np.ndarray, num_partitions: int) -> np.ndarray:
        n = len(sizes)
        start = self._next.setdefault(topic, self._rng.randrange(num_partitions))
        self._next[topic] = (start + n) % num_partitions
        return ((start + np.arange(n, dtype=np.int64)) % num_partitions).astype(np.int32)
