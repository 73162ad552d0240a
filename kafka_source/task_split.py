"""Ranges split into Spark input partitions and grouped into tasks.

- ``plan_ranges``: ranges split for ``maxRecordsPerPartition`` and ``minPartitions``
  exactly as Spark's ``KafkaOffsetRangeCalculator`` splits them;
- ``task_groups``: the ranges of a read grouped into tasks: a small read's all in one task
  (``small_read_groups``: one task per 1,000 of them), a larger read's small ranges packed
  together and the others a task each. Spark's connector gives every range a task; a
  Python task costs Spark tens of milliseconds to launch, more than reading a small range.

Plain Python over ``OffsetRange``s; the batch and the streaming readers both use it.
"""

from __future__ import annotations

import math
from typing import TypeVar
from collections.abc import Sequence

from protocol.errors import ConfigError

from .offset_specs import OffsetRange

__all__ = [
    "plan_ranges",
    "task_groups",
    "small_read_groups",
    "ONE_TASK_RECORDS",
    "RANGES_PER_SMALL_TASK",
    "SMALL_RANGE_RECORDS",
]

T = TypeVar("T")


def _divide(parts: int, rng: OffsetRange) -> list[OffsetRange]:
    """``rng`` cut into ``parts`` contiguous pieces; the last absorbs the rounding."""
    pieces, remaining, start = [], rng.size, rng.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, rng.end)
        pieces.append(OffsetRange(rng.topic, rng.partition, start, end, None))
        start = end
    return pieces


def _part_count(size: int, total: int, min_parts: int) -> int:
    """The share of ``min_parts`` a range of ``size`` gets, rounded as the JVM's
    ``Math.round`` rounds (halves go up; Python's ``round`` goes to even); at least 1."""
    return max(math.floor(size / total * min_parts + 0.5), 1)


def plan_ranges(
    ranges: Sequence[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split ranges into Spark input partitions as Spark's ``KafkaOffsetRangeCalculator``.

    Empty (and inverted) ranges are dropped. With neither option, or when there are already
    at least ``min_partitions`` ranges and no ``max_records_per_partition``, the ranges are
    returned as they are (``preferred_host`` kept). Otherwise:

    1. ``max_records_per_partition`` cuts each range into ``ceil(size / max)`` parts;
    2. if ``min_partitions`` still exceeds the number of ranges, ranges are cut in
       proportion to their share of all offsets: a range whose share rounds to at most one
       part stays whole, and the rest share ``min_partitions`` minus the whole ranges.

    Parts of a range are contiguous and cover it exactly; split parts carry no
    ``preferred_host``. The order of the input is kept.
    """
    for name, value in (
        ("minPartitions", min_partitions),
        ("maxRecordsPerPartition", max_records_per_partition),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value <= 0
        ):
            raise ConfigError(f"{name} must be positive")
    offset_ranges = [r for r in ranges if r.size > 0]

    if max_records_per_partition is None and (
        min_partitions is None or len(offset_ranges) >= min_partitions
    ):
        return offset_ranges

    if max_records_per_partition is not None:
        offset_ranges = [
            piece
            for r in offset_ranges
            for piece in _divide(-(-r.size // max_records_per_partition), r)
            if piece.size > 0
        ]

    if min_partitions is None or min_partitions <= len(offset_ranges):
        return offset_ranges

    total = sum(r.size for r in offset_ranges)
    # Spark decides "stays whole" per range but remembers it per topic-partition; after a
    # maxRecordsPerPartition cut, every piece of such a partition then stays whole.
    unsplit = [r for r in offset_ranges if _part_count(r.size, total, min_partitions) == 1]
    unsplit_tps = {r.topic_partition for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min_parts = max(min_partitions - len(unsplit), 1)

    result: list[OffsetRange] = []
    for r in offset_ranges:
        parts = (
            1
            if r.topic_partition in unsplit_tps
            else _part_count(r.size, split_total, split_min_parts)
        )
        result.extend(piece for piece in _divide(parts, r) if piece.size > 0)
    return result


#: A micro-batch or batch read of at most this many records is read by one task. Spark
#: takes tens of milliseconds to hand a task to a Python worker, more than one task takes
#: to fetch and decode this many records; with one task per Kafka partition, a low-rate
#: stream or a small topic over more partitions than cores ran its tasks in waves, each
#: wave adding that cost to the read's latency.
ONE_TASK_RECORDS = 20_000
#: A small read's task reads at most this many ranges. It looks their open ends up and
#: sends their first Fetch in one request per broker each (``open_ends.resolve_open_ends``,
#: ``fetcher.read_ranges``), so a range costs it little more than its decoding, while each
#: task costs Spark tens of milliseconds to launch: with 32 ranges a task (one round trip
#: each, before), a micro-batch of 7,700 records over 10,000 partitions ran 242 tasks and
#: took 12 s on 2 cores. A Kafka consumer fetches this many partitions in one request too.
RANGES_PER_SMALL_TASK = 1_000


#: In a read of more than ``ONE_TASK_RECORDS`` records, a range of at most this many records
#: is packed with other such ranges into one task (up to ``RANGES_PER_SMALL_TASK`` ranges
#: and ``ONE_TASK_RECORDS`` records a task), where Spark's connector gives it a task of its
#: own: a topic of 10,000 partitions of 20 records each was 10,000 tasks of about 50 ms
#: each on 2 cores, minutes; packed, it is 10 tasks. Larger ranges keep a task each.
SMALL_RANGE_RECORDS = 1_000


def task_groups(
    items: Sequence[T],
    sizes: Sequence[int],
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[Sequence[T]]:
    """The tasks of a read: ``items`` (ranges or input partitions, ``sizes`` their records
    at planning), in order, grouped: a small read's (several ranges, ``ONE_TASK_RECORDS``
    records or fewer in all) all together (``small_read_groups``); else each range of more
    than ``SMALL_RANGE_RECORDS`` alone and the smaller ones packed, in order, into groups of
    at most ``RANGES_PER_SMALL_TASK`` ranges and ``ONE_TASK_RECORDS`` records.
    ``minPartitions`` or ``maxRecordsPerPartition`` set: a task per range, as asked."""
    if min_partitions is not None or max_records_per_partition is not None:
        return [[item] for item in items]
    if len(items) > 1 and sum(sizes) <= ONE_TASK_RECORDS:
        return small_read_groups(items)
    groups: list[Sequence[T]] = []  # each packed group stands where its first range does
    packed: list[T] = []
    packed_records = 0
    for item, size in zip(items, sizes):
        if size > SMALL_RANGE_RECORDS:
            groups.append([item])
            continue
        full = len(packed) == RANGES_PER_SMALL_TASK or packed_records + size > ONE_TASK_RECORDS
        if not packed or full:
            packed, packed_records = [], 0
            groups.append(packed)
        packed.append(item)
        packed_records += size
    return groups


def small_read_groups(items: Sequence[T]) -> list[Sequence[T]]:
    """A small read's ranges (or input partitions), in order, cut into the fewest
    consecutive groups of at most ``RANGES_PER_SMALL_TASK``, as even as can be: a task
    each (one task up to that many)."""
    if not items:
        return []
    tasks = -(-len(items) // RANGES_PER_SMALL_TASK)
    size = -(-len(items) // tasks)
    return [items[i : i + size] for i in range(0, len(items), size)]
