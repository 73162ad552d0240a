"""Rows of one partition gathered into record batches, encoded straight from Arrow.

``PartitionBatcher`` keeps, per (topic, partition), the Arrow slices of rows not yet
encoded. Once a partition holds at least ``batch.size`` bytes (estimated with the
encoder's upper bound of each record's size) the rows are concatenated, cut into ranges
that each fit in one batch of at most ``min(batch.size, max.request.size)`` bytes
(``split_for_batch_size``) and every full range is encoded
(``protocol.records.encode_arrow.encode_batch``, with the producer id, epoch and sequence
the producer hands out) and appended to the producer. The rest waits for more rows, for
``flush`` at the end of the input, or until it has waited ``linger.ms`` for input: linger
time is counted only while the task waits for its next input batch, never while it works,
so a fast input fills whole batches and a trickling one (a slow upstream stage) sends
what it has. Row order within a partition is kept throughout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from protocol.records.encode_arrow import encode_batch, split_for_batch_size

from .options import WriterOptions

__all__ = ["Slice", "PartitionBatcher"]


@dataclass
class Slice:
    """Rows of one partition, in order."""

    key: pa.Array | None
    value: pa.Array
    headers: pa.Array | None
    timestamp_ms: pa.Array | None  # int64 with nulls ("now")
    size: int  # the sum of the rows' size bounds
    base_sizes: np.ndarray  # each row's record_base_sizes: batch sizing needs no recount


@dataclass
class _Pending:
    slices: list = field(default_factory=list)
    size: int = 0
    since: float = 0.0  # the batcher's idle clock when the first pending row came


def _concat(parts: list, n_rows: list[int], arrow_type) -> pa.Array | None:
    """Concatenate optional columns; a missing part becomes nulls."""
    if all(p is None for p in parts):
        return None
    filled = [pa.nulls(n, arrow_type) if p is None else p for p, n in zip(parts, n_rows)]
    if len(filled) == 1:
        return filled[0]
    if any(p.type != filled[0].type for p in filled):
        filled = [p.cast(arrow_type) for p in filled]
    return pa.concat_arrays(filled)


class PartitionBatcher:
    """Gathers rows per partition and hands encoded batches to a ``TaskProducer``."""

    def __init__(self, options: WriterOptions, producer):
        self.options = options
        self.producer = producer
        self.limit = options.batch_limit
        self._pending: dict[tuple[str, int], _Pending] = {}
        # Seconds spent waiting for the task's input so far: linger.ms is measured on this
        # clock, so rows never wait on a timer while the input keeps coming.
        self.idle = 0.0

    def add(self, topic: str, partition: int, rows: Slice) -> None:
        key = (topic, partition)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending(since=self.idle)
        elif not pending.slices:
            pending.since = self.idle
        pending.slices.append(rows)
        pending.size += rows.size
        if pending.size >= self.limit:
            self._encode(key, pending, keep_tail=True)

    def input_waited(self, seconds: float) -> None:
        """The task waited ``seconds`` for its next input batch: encode the partly filled
        batches that have now waited longer than ``linger.ms`` for input."""
        self.idle += seconds
        limit = self.options.linger_ms / 1000
        for key, pending in self._pending.items():
            if pending.slices and self.idle - pending.since >= limit:
                self._encode(key, pending, keep_tail=False)

    def flush(self) -> None:
        """Encode every pending row."""
        for key, pending in self._pending.items():
            if pending.slices:
                self._encode(key, pending, keep_tail=False)

    def _encode(self, key: tuple[str, int], pending: _Pending, *, keep_tail: bool) -> None:
        slices = pending.slices
        counts = [len(s.value) for s in slices]
        value = _concat([s.value for s in slices], counts, pa.binary())
        keys = _concat([s.key for s in slices], counts, pa.binary())
        headers = _concat([s.headers for s in slices], counts,
                          next(s.headers.type for s in slices if s.headers is not None)
                          if any(s.headers is not None for s in slices) else None)
        ts = _concat([s.timestamp_ms for s in slices], counts, pa.int64())
        if ts is not None and ts.null_count:
            ts = ts.fill_null(int(time.time() * 1000))
        base_sizes = (slices[0].base_sizes if len(slices) == 1 else
                      np.concatenate([s.base_sizes for s in slices]))
        ranges = split_for_batch_size(keys, value, max_batch_bytes=self.limit,
                                      timestamps_ms=ts, base_sizes=base_sizes)
        if keep_tail and len(ranges) > 1:
            tail_start = ranges[-1][0]  # the last range is not full: wait for more rows
            ranges = ranges[:-1]
        else:
            tail_start = len(value)
        topic, partition = key
        compression = self.options.compression_type
        transactional = getattr(self.producer, "transactional_id", None) is not None
        for start, stop in ranges:
            n = stop - start
            k = None if keys is None else keys.slice(start, n)
            v = value.slice(start, n)
            h = None if headers is None else headers.slice(start, n)
            t = None if ts is None else ts.slice(start, n)

            def build(producer_id, epoch, sequence, k=k, v=v, h=h, t=t):
                return encode_batch(k, v, headers=h, timestamps_ms=t,
                                    producer_id=producer_id, producer_epoch=epoch,
                                    base_sequence=sequence, compression=compression,
                                    transactional=transactional, topic=topic,
                                    partition=partition)

            self.producer.append(topic, partition, n, build)
        if tail_start < len(value):
            n = len(value) - tail_start
            tail = Slice(None if keys is None else keys.slice(tail_start),
                         value.slice(tail_start),
                         None if headers is None else headers.slice(tail_start),
                         None if ts is None else ts.slice(tail_start), 0,
                         base_sizes[tail_start:])
            tail.size = int(np.ceil(pending.size * n / max(len(value), 1)))
            pending.slices = [tail]
            pending.size = tail.size
            pending.since = time.monotonic()
        else:
            pending.slices = []
            pending.size = 0
