"""``spark.readStream.format("pykafka")``: micro-batches over offset ranges.

Offsets are JSON-friendly dicts ``{topic: {"partition": offset}}`` (Spark's own Kafka
source writes the same shape into checkpoints). Spark restarts a query from its
checkpoint; ``initialOffset`` is only for a fresh query.

Admission control (``latestOffset(start, limit)``):
- ``maxOffsetsPerTrigger`` splits its budget across partitions in proportion to their
  backlog, as the JVM connector does;
- ``minOffsetsPerTrigger`` holds a micro-batch back until that many offsets are waiting or
  ``maxTriggerDelay`` has passed since the last one;
- ``maxBytesPerTrigger`` (ours) does the same as ``maxOffsetsPerTrigger`` in bytes,
  estimated per partition from the size of its recent record batches;
- ``Trigger.AvailableNow`` reads up to the offsets seen when the query started.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxBytes, ReadMaxRows,
                                              ReadMinRows, SupportsTriggerAvailableNow)

from protocol.cluster import KafkaClient
from protocol.errors import PyKafkaError

from .batch_reader import KafkaInputPartition
from .fetcher import DataLossError, read_range
from .offset_reader import OffsetReader
from .offset_specs import OffsetRange, TopicPartition, format_tp
from .options import ReaderOptions
from .planning import discover_partitions, plan_ranges, resolve_offsets

log = logging.getLogger("pykafka.source")

_BYTES_SAMPLE = 64 * 1024
_DEFAULT_BYTES_PER_OFFSET = 1024


def to_json(offsets: dict[TopicPartition, int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(offsets: dict | None) -> dict[TopicPartition, int]:
    return {(topic, int(p)): int(o) for topic, parts in (offsets or {}).items()
            for p, o in parts.items()}


def rate_limit(begin: dict[TopicPartition, int], end: dict[TopicPartition, int],
               budget: float, weight: dict[TopicPartition, float] | None = None
               ) -> dict[TopicPartition, int]:
    """Cut ``end`` so the total (weighted) backlog read is about ``budget``, each partition
    getting a share proportional to its backlog; a share below one offset rounds up, as
    Spark's KafkaMicroBatchStream.rateLimit does."""
    weight = weight or {}
    sizes = {tp: max(0, e - begin.get(tp, e)) * weight.get(tp, 1.0) for tp, e in end.items()}
    total = sum(sizes.values())
    if total <= budget or total == 0:
        return dict(end)
    out = {}
    for tp, e in end.items():
        b = begin.get(tp, e)
        if sizes[tp] <= 0:
            out[tp] = e
            continue
        share = budget * sizes[tp] / total / weight.get(tp, 1.0)
        allowed = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(e, b + allowed)
    return out


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReaderOptions):
        self.options = options
        self._client: OffsetReader | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        self._last_batch_at = time.monotonic()
        self._latest: dict[TopicPartition, int] | None = None
        self._bytes_per_offset: dict[TopicPartition, tuple[float, int]] = {}
        self._committed: dict | None = None  # last offsets committed to the group
        self._initial: dict | None = None  # a fresh query's start, resolved once

    # The driver keeps this object alive between calls; executors get it pickled.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    @property
    def client(self) -> OffsetReader:
        """The driver's client; offset lookups retried per fetchOffset.* options."""
        if self._client is None:
            o = self.options
            self._client = OffsetReader(KafkaClient(o.client_config),
                                        o.fetch_offset_num_retries,
                                        o.fetch_offset_retry_interval_ms)
        return self._client

    # ---- offsets ----------------------------------------------------------------------

    def _latest_offsets(self) -> dict[TopicPartition, int]:
        partitions = discover_partitions(self.options.subscription, self.client)
        return self.client.latest_offsets(partitions, self.options.isolation_level_code)

    def initialOffset(self) -> dict:
        if self._initial is None:
            partitions = discover_partitions(self.options.subscription, self.client)
            start = resolve_offsets(self.options.starting_offsets, partitions, self.client,
                                    is_starting=True,
                                    isolation_level=self.options.isolation_level_code)
            self._initial = to_json(start)
        return self._initial

    def prepareForTriggerAvailableNow(self) -> None:
        # Spark calls this before initialOffset(). Bind a fresh query's start first, as
        # Spark's Kafka source does: taken the other way round, "latest" resolved after the
        # target lands beyond it while a producer writes, and the batch looks like lost data.
        try:
            self.initialOffset()
        except PyKafkaError:
            pass  # a restarted query never asks for it; a fresh one gets the error there
        self._target = self._latest_offsets()

    def getDefaultReadLimit(self):
        o = self.options
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit=None) -> dict:
        # Spark hands a batch's end to commit() only when it plans the next batch, so the
        # last batch of a run (Trigger.AvailableNow, a stopped query) would never reach the
        # group. ``start`` is the end of the last batch Spark finished: publish it here.
        self.commit(start)
        begin = from_json(start)
        latest = dict(self._target) if self._target is not None else self._latest_offsets()
        self._latest = latest
        new = [tp for tp in latest if tp not in begin]
        if new:  # partitions that appeared since: read them from their earliest offset
            begin.update(self.client.earliest_offsets(new))
        end = dict(latest)
        if limit is not None and not isinstance(limit, ReadAllAvailable):
            end = self._admit(begin, end, limit)
            if end is None:
                return start
        result = to_json(end)
        if result != start:
            self._last_batch_at = time.monotonic()
        return result

    def _admit(self, begin, end, limit):
        o = self.options
        backlog = sum(max(0, e - begin.get(tp, e)) for tp, e in end.items())
        minimum = limit.min_rows if isinstance(limit, ReadMinRows) else o.min_offsets_per_trigger
        if minimum is not None and self._target is None and backlog < minimum:
            waited_ms = (time.monotonic() - self._last_batch_at) * 1000
            if waited_ms < o.max_trigger_delay_ms:
                return None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_offsets_per_trigger
        if max_rows is not None:
            end = rate_limit(begin, end, max_rows)
        max_bytes = (limit.max_bytes if isinstance(limit, ReadMaxBytes)
                     else o.max_bytes_per_trigger)
        if max_bytes is not None:
            weights = {tp: self._estimate_bytes_per_offset(tp, begin.get(tp, e))
                       for tp, e in end.items() if e > begin.get(tp, e)}
            end = rate_limit(begin, end, max_bytes, weights)
        return end

    def _estimate_bytes_per_offset(self, tp: TopicPartition, at: int) -> float:
        """Bytes per offset of the partition's batches at ``at``: a small Fetch sampled once
        every few hundred thousand offsets (the estimate is refreshed as the stream moves)."""
        cached = self._bytes_per_offset.get(tp)
        if cached is not None and abs(at - cached[1]) < 200_000:
            return cached[0]
        from protocol.records.batch import iter_batches
        estimate = float(_DEFAULT_BYTES_PER_OFFSET)
        try:
            # A broker may leave the partition out of its answer (Tansu does when told not
            # to wait at all): then the estimate falls back to the default.
            part = self.client.fetch({tp: at}, max_wait_ms=100,
                                     partition_max_bytes=_BYTES_SAMPLE).get(tp) or {}
            records = part.get("records") or b""
            size, last = 0, None
            for pos, base, length, _ in iter_batches(records):
                size += length
                last = base + int.from_bytes(records[pos + 23:pos + 27], "big", signed=True)
            if last is not None and last >= at:
                estimate = max(1.0, size / (last - max(at, 0) + 1))
        except PyKafkaError as e:
            log.debug("byte estimate for %s failed: %s", format_tp(tp), e)
        self._bytes_per_offset[tp] = (estimate, at)
        return estimate

    def reportLatestOffset(self):
        return to_json(self._latest) if self._latest is not None else None

    # ---- micro-batches ------------------------------------------------------------------

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(message + " If you do not want the query to fail in such "
                                "cases, set the source option \"failOnDataLoss\" to \"false\".")
        log.warning("failOnDataLoss is false, going on: %s", message)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = from_json(start), from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.client.earliest_offsets(new))
        for tp in begin:
            if tp not in until:
                self._data_loss(f"Partition {format_tp(tp)} is gone: its topic was deleted "
                                "or lost partitions, so records may have been missed.")
        ranges = []
        for tp, e in sorted(until.items()):
            b = begin[tp]
            if e < b:
                self._data_loss(f"Partition {format_tp(tp)}'s offsets went back from {b} to "
                                f"{e}: the topic may have been deleted and recreated, so "
                                "records may have been missed.")
                continue
            if e > b:
                ranges.append(OffsetRange(tp[0], tp[1], b, e))
        ranges = plan_ranges(ranges, self.options.min_partitions,
                             self.options.max_records_per_partition)
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: KafkaInputPartition) -> Iterator:
        yield from read_range(self.options, partition.range)

    def commit(self, end: dict) -> None:
        group = self.options.commit_offsets_to_group
        if not group or not end or end == self._committed:
            return
        offsets = from_json(end)
        try:
            self.client.commit_offsets(group, offsets)
            self._committed = end
        except PyKafkaError as e:  # lag reporting must never stop the query
            log.warning("could not commit offsets to consumer group %r: %s", group, e)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
