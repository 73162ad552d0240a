"""Rows of one partition gathered into record batches, encoded straight from Arrow.

``PartitionBatcher`` keeps, per (topic, partition), the rows not yet encoded: for each
input batch that has some, the batch's columns (a ``RowSource``, shared by every
partition) and the indices of its rows that go to this partition. No column is
re-ordered or copied while rows wait. Once a partition holds at least ``batch.size``
bytes (estimated with the encoder's upper bound of each record's size) its rows are cut
into ranges that each fit in one batch of at most ``min(batch.size, max.request.size)``
bytes (``split_for_batch_size``) and every full range is encoded from those indices
(``protocol.records.encode_arrow.encode_rows``, with the producer id, epoch and sequence
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

from protocol.records.encode_arrow import encode_rows, split_for_batch_size
from protocol.records.row_source import RowSource

from .options import WriterOptions

__all__ = ["Slice", "PartitionBatcher"]


@dataclass
class Slice:
    """Rows of one input batch that go to one partition, in order."""

    source: RowSource  # the input batch's columns
    rows: np.ndarray  # int64 indices into ``source``
    timestamp_ms: np.ndarray | None  # int64 per row (None: no timestamp column)
    timestamp_valid: np.ndarray | None  # bool per row; a null timestamp means "now"
    size: int  # the sum of the rows' size bounds
    base_sizes: np.ndarray  # each row's record_base_sizes: batch sizing needs no recount

    def cut(self, lo: int, hi: int | None = None) -> Slice:
        """Rows ``[lo, hi)`` of this slice (size left at 0: the caller estimates it)."""

        def part(a):
            return None if a is None else a[lo:hi]

        return Slice(
            self.source,
            self.rows[lo:hi],
            part(self.timestamp_ms),
            part(self.timestamp_valid),
            0,
            self.base_sizes[lo:hi],
        )


@dataclass
class _Pending:
    slices: list = field(default_factory=list)
    size: int = 0
    since: float = 0.0  # the batcher's idle clock when the first pending row came


def _timestamps(slices: list[Slice], counts: list[int]) -> np.ndarray | None:
    """The rows' timestamps in ms, nulls as now; None when no row has a timestamp column."""
    if all(s.timestamp_ms is None for s in slices):
        return None
    now = int(time.time() * 1000)
    return np.concatenate(
        [
            np.full(c, now, dtype=np.int64)
            if s.timestamp_ms is None or s.timestamp_valid is None
            else np.where(s.timestamp_valid, s.timestamp_ms, now)
            for s, c in zip(slices, counts)
        ]
    )


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
        counts = [len(s.rows) for s in slices]
        bounds = np.zeros(len(slices) + 1, dtype=np.int64)
        np.cumsum(counts, out=bounds[1:])
        total = int(bounds[-1])
        base_sizes = (
            slices[0].base_sizes
            if len(slices) == 1
            else np.concatenate([s.base_sizes for s in slices])
        )
        ts = _timestamps(slices, counts)
        ranges = split_for_batch_size(
            None, None, max_batch_bytes=self.limit, timestamps_ms=ts, base_sizes=base_sizes
        )
        if keep_tail and len(ranges) > 1:
            tail_start = ranges[-1][0]  # the last range is not full: wait for more rows
            ranges = ranges[:-1]
        else:
            tail_start = total
        topic, partition = key
        compression = self.options.compression_type
        transactional = getattr(self.producer, "transactional_id", None) is not None
        spare = getattr(self.producer, "spare_buffer", None)
        for start, stop in ranges:
            parts = _parts(slices, bounds, start, stop)
            t = None if ts is None else ts[start:stop]

            def build(producer_id, epoch, sequence, parts=parts, t=t):
                return encode_rows(
                    parts,
                    timestamps_ms=t,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                    compression=compression,
                    transactional=transactional,
                    topic=topic,
                    partition=partition,
                    out=None if spare is None else spare(),
                )

            self.producer.append(topic, partition, stop - start, build)
        if tail_start < total:
            first = int(np.searchsorted(bounds, tail_start, side="right")) - 1
            tail = [slices[first].cut(tail_start - int(bounds[first]))] + slices[first + 1 :]
            pending.size = int(np.ceil(pending.size * (total - tail_start) / total))
            pending.slices = tail
            pending.since = self.idle  # a new batch starts lingering now
        else:
            pending.slices = []
            pending.size = 0


def _parts(slices: list[Slice], bounds: np.ndarray, start: int, stop: int) -> list:
    """``encode_rows``' parts for rows ``[start, stop)`` of the pending slices."""
    parts = []
    i = int(np.searchsorted(bounds, start, side="right")) - 1
    while start < stop:
        lo = start - int(bounds[i])
        hi = min(stop, int(bounds[i + 1])) - int(bounds[i])
        parts.append((slices[i].source, slices[i].rows[lo:hi]))
        start = int(bounds[i]) + hi
        i += 1
    return parts
