"""``spark.read.format("pykafka")``: plan on the driver, fetch on the executors.

Spark plans a batch DataFrame's input partitions once and runs every later action on the
same plan, where Spark's own Kafka relation looks its offsets up again for each action. So
that a second ``count()`` sees the records written since the first, the last range of each
partition whose end is "latest" (``endingOffsets`` latest or -1, or an ending timestamp)
looks its end up when its task runs (``open_ends.OpenEnd``), and a partition that had nothing
to read at planning gets an empty range that does the same.

A small read (``task_split.task_groups``: at most ``ONE_TASK_RECORDS`` records at planning, no
``minPartitions`` or ``maxRecordsPerPartition``) is one task that reads every range one
after the other (``task_split.small_read_groups``: a task per ``RANGES_PER_SMALL_TASK``
ranges): Spark takes longer to launch a Python task than a task takes to read that many
records, and a topic with more partitions than cores ran its tasks in waves. A larger
read packs its small ranges the same way (``task_split.task_groups``). Such a task
looks all its open ends up first, in one ListOffsets request per leader
(``open_ends.resolve_open_ends``), and sends the first Fetch of all its ranges at once
(``fetcher.read_ranges``), not one of each per range.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

from pyspark.sql.datasource import DataSourceReader, InputPartition

from kafka_common.user_errors import user_errors
from kafka_common.worker_heap import settle_worker_heap
from protocol.client import pool
from protocol.config import ClientConfig

from .dead_letter_txn import check_unsplit
from .fetcher import read_range, read_ranges
from .open_ends import OpenEnd, resolve_open_ends
from .offset_reader import OffsetReader
from .options import ReaderOptions
from .offset_specs import (
    LATEST,
    GlobalTimestamp,
    LatestOffsets,
    OffsetRange,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    TopicPartition,
)
from .planning import resolve_batch
from .task_split import plan_ranges, task_groups

if TYPE_CHECKING:
    from types import FrameType

    from .pushdown import Narrowing


log = logging.getLogger("pykafka.source")


def check_dead_letter_topic_exists(options: ReaderOptions) -> None:
    """With ``deadLetterTopic``: the topic exists, checked on the driver when the read or
    the stream is planned (looked up as the subscribed topics are: ``fetchOffset.*``), so
    that a missing one fails the query at once, not in the first task that meets a record
    it cannot decode."""
    topic = options.formats.dead_letter_topic if options.formats is not None else None
    if not topic:
        return
    from kafka_common.dead_letter import check_dead_letter_topic

    with pool.borrow(options.client_config) as lease:
        check_dead_letter_topic(
            lease.client,
            topic,
            log=log,
            attempts=max(1, options.fetch_offset_num_retries),
            interval_ms=options.fetch_offset_retry_interval_ms,
        )


class KafkaInputPartition(InputPartition):
    """One offset range (its end looked up at read time with ``open_end``); small and
    picklable. ``config``: a micro-batch's delegation token sign-in (see
    ``KafkaStreamReader.read``), or None: the reader's own."""

    def __init__(
        self,
        rng: OffsetRange,
        open_end: OpenEnd | None = None,
        config: ClientConfig | None = None,
    ):
        super().__init__(tuple(rng))
        self.range = rng
        self.open_end = open_end
        self.config = config

    @property
    def ranges(self) -> tuple[OffsetRange, ...]:
        return (self.range,)

    @property
    def open_ends(self) -> tuple[OpenEnd | None, ...]:
        return (self.open_end,)

    def __repr__(self) -> str:
        r = self.range
        end = f"{r.end}.." if self.open_end is not None else r.end
        return f"KafkaInputPartition({r.topic}-{r.partition} [{r.start}, {end}))"


class KafkaRangesPartition(InputPartition):
    """Several offset ranges read one after the other by one task: a small micro-batch's
    or batch read's (``task_split.task_groups``); a batch read's ranges
    may have open ends (``open_ends``, aligned with ``ranges``). Small and picklable;
    ``config`` as ``KafkaInputPartition``'s."""

    def __init__(self, ranges, open_ends=None, config: ClientConfig | None = None):
        super().__init__(tuple(tuple(r) for r in ranges))
        self.ranges = tuple(ranges)
        self.open_ends = tuple(open_ends) if open_ends is not None else (None,) * len(self.ranges)
        self.config = config

    def __repr__(self) -> str:
        return (
            "KafkaRangesPartition("
            + ", ".join(
                f"{r.topic}-{r.partition} [{r.start}, {r.end}{'..' if e is not None else ''})"
                for r, e in zip(self.ranges, self.open_ends)
            )
            + ")"
        )


def open_end_for(spec: OffsetSpec | None, tp: TopicPartition, cap: int | None) -> OpenEnd | None:
    """Whether ``tp``'s end under the ending spec moves as records arrive."""
    if isinstance(spec, LatestOffsets):
        return OpenEnd(None, cap)
    if isinstance(spec, SpecificOffsets):
        return OpenEnd(None, cap) if spec.as_dict.get(tp) == LATEST else None
    if isinstance(spec, SpecificTimestamps):
        return OpenEnd(spec.as_dict[tp], cap) if tp in spec.as_dict else None
    if isinstance(spec, GlobalTimestamp):
        return OpenEnd(spec.timestamp, cap)
    return None


def plan_partitions(
    options: ReaderOptions, client, narrowing=None
) -> list[KafkaInputPartition | KafkaRangesPartition]:
    """``planning.plan_batch``'s ranges as input partitions, with open ends; for a small
    read, a partition per group of them (see the module docstring)."""
    ranges, ends = resolve_batch(options, client, narrowing)
    split = plan_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    check_unsplit(options, split)  # exactlyOnce dead letters: a partition per task
    cap = narrowing.offset_max if narrowing is not None else None
    floor = narrowing.offset_min if narrowing is not None else None
    last: dict[TopicPartition, int] = {}
    for i, r in enumerate(split):
        j = last.get(r.topic_partition)
        if j is None or r.end > split[j].end:
            last[r.topic_partition] = i
    parts = [
        KafkaInputPartition(
            r,
            open_end_for(options.ending_offsets, r.topic_partition, cap)
            if last[r.topic_partition] == i
            else None,
        )
        for i, r in enumerate(split)
    ]
    for tp, end in sorted(ends.items()):
        if tp in last:
            continue
        open_end = open_end_for(options.ending_offsets, tp, cap)
        start = max(end, floor or 0)
        if open_end is None or (cap is not None and cap <= start):
            continue
        parts.append(KafkaInputPartition(OffsetRange(tp[0], tp[1], start, start), open_end))
    groups = task_groups(
        parts,
        [p.range.size for p in parts],
        options.min_partitions,
        options.max_records_per_partition,
    )
    return [
        group[0]
        if len(group) == 1
        else KafkaRangesPartition([p.range for p in group], [p.open_end for p in group])
        for group in groups
    ]


@user_errors
class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: ReaderOptions):
        self.options = options
        self.pushed: Narrowing | None = None  # set by pushFilters

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        with pool.borrow(o.client_config) as lease:
            offsets = OffsetReader(
                lease.client, o.fetch_offset_num_retries, o.fetch_offset_retry_interval_ms
            )
            return plan_partitions(o, offsets, narrowing=self.pushed)

    def read(self, partition: InputPartition) -> Iterator:
        # Spark hands back the partitions that ``partitions`` planned
        partition = cast("KafkaInputPartition | KafkaRangesPartition", partition)
        settle_worker_heap()
        if len(partition.ranges) == 1:
            yield from read_range(self.options, partition.ranges[0], partition.open_ends[0])
            return
        # A small read's task: every open end looked up in one round, and every range's
        # first Fetch in one, not one per range.
        yield from read_ranges(
            self.options, resolve_open_ends(self.options, partition.ranges, partition.open_ends)
        )


@user_errors
class KafkaPushdownBatchReader(KafkaBatchReader):
    """The batch reader with filter pushdown (``spark.sql.python.filterPushdown.enabled``).

    A separate class because Spark refuses a reader that implements ``pushFilters`` while
    that setting is off."""

    def pushFilters(self, filters):
        from .pushdown import narrowing_from_filters

        filters = list(filters)
        self.pushed = narrowing_from_filters(filters)
        # Every filter is still evaluated by Spark: pushdown only narrows what is read,
        # so the result is exactly the unpushed query's.
        return filters


def pushdown_enabled() -> bool:
    """Whether Spark calls ``DataSource.reader()`` with filter pushdown on. Python data
    sources get no view of ``spark.sql.python.filterPushdown.enabled``, so look at the
    caller: with pushdown on, Spark builds the reader in its pushdown worker
    (``data_source_pushdown_filters``); otherwise its planning worker holds the setting in
    a local ``enable_pushdown``. When neither is found, pushdown is off (always safe)."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(6):
        if frame is None:
            break
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        value = frame.f_locals.get("enable_pushdown")
        if isinstance(value, bool):
            return value
        frame = frame.f_back
    return False
