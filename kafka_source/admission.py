"""What a micro-batch may read: Spark's admission control and Trigger.AvailableNow's checks.

PySpark 4.1 has no admission control for Python sources: Spark calls ``latestOffset()``
with no start, and for a fresh query before ``initialOffset``. There the first
``latestOffset()`` binds the start itself and answers with it (the same empty batch 0), and
the rate options, which 4.1 cannot honour, are refused when the query starts
(``check_pyspark_supports``). ``Trigger.AvailableNow`` works there as Spark runs it for
any source without support for it: one batch up to the offsets seen at the start.

Admission control (``latestOffset(start, limit)``, PySpark 4.2 and later):
- ``maxOffsetsPerTrigger`` splits its budget across partitions in proportion to their
  backlog, as the JVM connector does;
- ``minOffsetsPerTrigger`` holds a micro-batch back until that many offsets are waiting or
  ``maxTriggerDelay`` has passed since the last one;
- ``maxBytesPerTrigger`` (ours) does the same as ``maxOffsetsPerTrigger`` in bytes,
  estimated per partition from the size of its recent record batches;
- ``Trigger.AvailableNow`` reads up to the offsets seen when the query started, and checks
  every batch's end against them and against the partitions' latest offsets, as Spark's
  ``verifyEndOffsetForTriggerAvailableNow`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from protocol.errors import ConfigError, PyKafkaError

from .offset_specs import TopicPartition, format_tp, format_tps
from .options import ReaderOptions

try:  # PySpark 4.2 and later: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxBytes,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # PySpark 4.1: latestOffset() alone (see stream_reader)
    ADMISSION_CONTROL = False
    if not TYPE_CHECKING:  # type-checked against PySpark 4.2's API

        class _Absent:  # stands in for a class of 4.2's API: nothing is ever an instance
            pass

        ReadAllAvailable = ReadMaxBytes = ReadMaxRows = ReadMinRows = _Absent
        SupportsTriggerAvailableNow = object


def rate_limit(
    begin: dict[TopicPartition, int],
    end: dict[TopicPartition, int],
    budget: float,
    weight: dict[TopicPartition, float] | None = None,
) -> dict[TopicPartition, int]:
    """Cut ``end`` so the total backlog read is about ``budget``, each partition getting a
    share proportional to its backlog.

    Without ``weight`` this is Spark's ``KafkaMicroBatchStream.rateLimit`` to the offset:
    each share is ``budget * (backlog / total)`` in floating point, floored (or rounded up
    when below one offset, so no partition starves), even when the whole backlog fits (the
    rounding can then leave one record for the next batch, as in Spark). With ``weight``
    (bytes per offset, for ``maxBytesPerTrigger``) the backlogs are weighted and the whole
    backlog is taken when it fits."""
    if weight is None:
        sizes = {tp: e - begin[tp] for tp, e in end.items() if tp in begin and e - begin[tp] > 0}
        total = float(sum(sizes.values()))
        if total < 1:
            return dict(end)
        out = {}
        for tp, e in end.items():
            size = sizes.get(tp)
            if size is None:
                out[tp] = e
                continue
            prorate = budget * (size / total)
            allowed = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
            out[tp] = min(e, begin[tp] + allowed)
        return out
    weighted = {tp: max(0, e - begin.get(tp, e)) * weight.get(tp, 1.0) for tp, e in end.items()}
    weighted_total = sum(weighted.values())
    if weighted_total <= budget or weighted_total == 0:
        return dict(end)
    out = {}
    for tp, e in end.items():
        b = begin.get(tp, e)
        if weighted[tp] <= 0:
            out[tp] = e
            continue
        share = budget * weighted[tp] / weighted_total / weight.get(tp, 1.0)
        allowed = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(e, b + allowed)
    return out


_RATE_OPTIONS = (
    ("maxOffsetsPerTrigger", "max_offsets_per_trigger"),
    ("minOffsetsPerTrigger", "min_offsets_per_trigger"),
    ("maxBytesPerTrigger", "max_bytes_per_trigger"),
)


def check_pyspark_supports(options: ReaderOptions) -> None:
    """Refuse, when the query starts, the options this PySpark cannot honour."""
    if ADMISSION_CONTROL:
        return
    import pyspark

    for name, attr in _RATE_OPTIONS:
        if getattr(options, attr) is not None:
            raise ConfigError(
                f"{name} needs PySpark 4.2 or later: PySpark {pyspark.__version__} gives "
                "Python streaming sources no admission control (no latestOffset(start, "
                f"limit)), so every micro-batch would read all that is available. Remove "
                f"{name} or upgrade PySpark."
            )


class AvailableNowEndError(PyKafkaError):
    """A Trigger.AvailableNow batch would end beyond what the run set out to read (Spark's
    ``verifyEndOffsetForTriggerAvailableNow``)."""


def verify_available_now_end(
    target: dict[TopicPartition, int],
    until: dict[TopicPartition, int],
    latest_offsets: Callable[[], dict[TopicPartition, int]],
) -> None:
    """Spark's ``verifyEndOffsetForTriggerAvailableNow``: a batch of a
    Trigger.AvailableNow run ends within the offsets fetched when the run started, and
    within the partitions' latest offsets now (``target``: the offsets fetched when
    the run started; ``latest_offsets``: the partitions' latest offsets now, asked
    only when the first two checks pass)."""
    hint = "The error could be transient: restart the query, and report it if it stays."

    def fmt(offsets) -> str:
        return "{" + ", ".join(f"{format_tp(tp)}: {o}" for tp, o in sorted(offsets.items())) + "}"

    if set(target) != set(until):
        raise AvailableNowEndError(
            "Kafka data source in Trigger.AvailableNow should provide the same topic "
            f"partitions in pre-fetched offset to end offset for each microbatch. {hint} "
            f"topic-partitions for pre-fetched offset: {format_tps(target)}, topic-partitions "
            f"for end offset: {format_tps(until)}."
        )
    if any(until[tp] > target[tp] for tp in until):
        raise AvailableNowEndError(
            "For Kafka data source with Trigger.AvailableNow, end offset should have lower "
            "or equal offset per each topic partition than pre-fetched offset. "
            f"{hint} pre-fetched offset: {fmt(target)}, end offset: {fmt(until)}."
        )
    latest = latest_offsets()
    if not set(until) <= set(latest):
        raise AvailableNowEndError(
            "Some of partitions in Kafka topic(s) have been lost during running query "
            f"with Trigger.AvailableNow. {hint} topic-partitions for latest offset: "
            f"{format_tps(latest)}, topic-partitions for end offset: {format_tps(until)}"
        )
    if any(until[tp] > latest[tp] for tp in until):
        raise AvailableNowEndError(
            "Some of partitions in Kafka topic(s) report available offset which is less "
            f"than end offset during running query with Trigger.AvailableNow. {hint} "
            f"latest offset: {fmt(latest)}, end offset: {fmt(until)}"
        )
