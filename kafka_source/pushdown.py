"""Filter pushdown: comparisons on ``topic``, ``partition``, ``offset`` and ``timestamp``
narrow what the batch reader plans.

Spark still evaluates every filter (the reader hands them all back), so pushdown only
decides what is *read*; the rows returned are exactly those of the unpushed query. The
narrowing must therefore never drop a row a filter would keep:

- ``topic`` / ``partition``: ``=`` and ``IN`` keep only the named topic-partitions;
- ``offset``: ``=``, ``IN``, ``<``, ``<=``, ``>``, ``>=`` cut each range exactly;
- ``timestamp >= t`` / ``> t``: a ListOffsets by timestamp gives, per partition, the first
  offset whose timestamp is at or after ``t`` (Kafka's time index guarantees every earlier
  record is older), which becomes the range start. Upper bounds on timestamps are not
  pushed: producers may write timestamps out of order, so no offset bounds them.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from typing import Any

from .offset_specs import OffsetRange


@dataclass
class Narrowing:
    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    offset_min: int | None = None  # inclusive
    offset_max: int | None = None  # exclusive
    timestamp_min_ms: int | None = None  # records at or after this time
    offsets_in: frozenset[int] | None = None

    @property
    def empty(self) -> bool:
        return (
            self.topics is None
            and self.partitions is None
            and self.offset_min is None
            and self.offset_max is None
            and self.timestamp_min_ms is None
            and self.offsets_in is None
        )


def _column(f) -> str | None:
    attr = getattr(f, "attribute", None)
    return attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None


def _to_ms_floor(value) -> int | None:
    if isinstance(value, _dt.datetime):
        return math.floor(value.timestamp() * 1000)
    if isinstance(value, _dt.date):
        return math.floor(_dt.datetime(value.year, value.month, value.day).timestamp() * 1000)
    return None


def _intersect(current, new):
    return new if current is None else current & new


def narrowing_from_filters(filters) -> Narrowing:
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )

    n = Narrowing()
    for f in filters:
        col = _column(f)
        value: Any = getattr(f, "value", None)
        if col == "topic" and isinstance(f, (EqualTo, In)):
            values = value if isinstance(f, In) else (value,)
            n.topics = _intersect(n.topics, frozenset(v for v in values if isinstance(v, str)))
        elif col == "partition" and isinstance(f, (EqualTo, In)):
            values = value if isinstance(f, In) else (value,)
            n.partitions = _intersect(
                n.partitions, frozenset(v for v in values if isinstance(v, int))
            )
        elif col == "offset" and (isinstance(f, In) or isinstance(value, int)):
            if isinstance(f, EqualTo):
                n.offsets_in = _intersect(n.offsets_in, frozenset([value]))
            elif isinstance(f, In):
                n.offsets_in = _intersect(
                    n.offsets_in, frozenset(v for v in value if isinstance(v, int))
                )
            elif isinstance(f, GreaterThan):
                n.offset_min = max(n.offset_min or 0, value + 1)
            elif isinstance(f, GreaterThanOrEqual):
                n.offset_min = max(n.offset_min or 0, value)
            elif isinstance(f, LessThan):
                n.offset_max = value if n.offset_max is None else min(n.offset_max, value)
            elif isinstance(f, LessThanOrEqual):
                n.offset_max = value + 1 if n.offset_max is None else min(n.offset_max, value + 1)
        elif col == "timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual)):
            ms = _to_ms_floor(value)
            if ms is not None:
                n.timestamp_min_ms = max(n.timestamp_min_ms or ms, ms)
    if n.offsets_in is not None:
        if n.offsets_in:
            n.offset_min = max(n.offset_min or 0, min(n.offsets_in))
            top = max(n.offsets_in) + 1
            n.offset_max = top if n.offset_max is None else min(n.offset_max, top)
        else:
            n.offset_max = 0
    return n


def keeps_partition(n: Narrowing | None, topic: str, partition: int) -> bool:
    if n is None:
        return True
    return (n.topics is None or topic in n.topics) and (
        n.partitions is None or partition in n.partitions
    )


def narrow_ranges(
    n: Narrowing | None, ranges: list[OffsetRange], timestamp_starts: dict | None = None
) -> list[OffsetRange]:
    """Cut ``[start, end)`` ranges by the offset bounds and the per-partition offsets that
    a timestamp lower bound resolved to; drop the ranges that become empty."""
    if n is None or n.empty:
        return ranges
    out = []
    for r in ranges:
        if not keeps_partition(n, r.topic, r.partition):
            continue
        start, end = r.start, r.end
        if n.offset_min is not None:
            start = max(start, n.offset_min)
        if n.offset_max is not None:
            end = min(end, n.offset_max)
        if timestamp_starts is not None:
            ts_start = timestamp_starts.get((r.topic, r.partition))
            if ts_start is not None:
                start = max(start, end if ts_start < 0 else ts_start)
        if start < end:
            out.append(r._replace(start=start, end=end))
    return out
