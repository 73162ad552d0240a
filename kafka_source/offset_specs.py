"""The reader's plain value types: what its options parse into and what planning produces.

- ``TopicPartition`` (a ``(topic, partition)`` tuple), ``format_tp``, and the offset JSON
  sentinels ``EARLIEST`` (-2) and ``LATEST`` (-1);
- ``OffsetRange``: offsets ``[start, end)`` of one topic-partition, one Spark input partition;
- ``Subscription``: subscribe, subscribePattern or assign;
- the offset specs ``EarliestOffsets``, ``LatestOffsets``, ``SpecificOffsets``,
  ``SpecificTimestamps`` and ``GlobalTimestamp`` (Spark's ``KafkaOffsetRangeLimit`` family),
  together ``OffsetSpec``.

Nothing here talks to a broker or imports another module of the reader: the options,
planning and pushdown modules all build on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Iterable
from typing import NamedTuple

from protocol.errors import ConfigError

__all__ = [
    "EARLIEST",
    "LATEST",
    "TopicPartition",
    "format_tp",
    "format_tps",
    "OffsetRange",
    "Subscription",
    "EarliestOffsets",
    "LatestOffsets",
    "SpecificOffsets",
    "SpecificTimestamps",
    "GlobalTimestamp",
    "OffsetSpec",
]

#: In offset JSON, -2 stands for the earliest offset and -1 for the latest (as in Spark).
EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]


def format_tp(tp: TopicPartition) -> str:
    """``topic-partition``, the way Kafka's ``TopicPartition.toString`` writes it."""
    return f"{tp[0]}-{tp[1]}"


def format_tps(tps: Iterable[TopicPartition]) -> str:
    """``{a-0, a-1, b-0}``: the partitions sorted, each as ``format_tp`` writes it."""
    return "{" + ", ".join(format_tp(tp) for tp in sorted(tps)) + "}"


# ---- ranges -----------------------------------------------------------------------------


class OffsetRange(NamedTuple):
    """Offsets ``[start, end)`` of one topic-partition: one Spark input partition.

    ``preferred_host`` is a locality hint (the partition leader's host), or ``None``.
    """

    topic: str
    partition: int
    start: int
    end: int
    preferred_host: str | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        """The number of offsets in the range (an estimate of records: compaction and
        transaction markers make the real count smaller)."""
        return self.end - self.start


# ---- subscription -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which topics to read: exactly one of the three Spark strategies.

    - ``kind == "subscribe"``: ``topics``, a fixed list;
    - ``kind == "subscribePattern"``: ``pattern``, a Python regular expression selecting
      every non-internal topic in which it finds a match (``re.search``, as Spark's default
      offset reader uses ``findFirstIn``; anchor it with ``^...$`` for whole names);
    - ``kind == "assign"``: ``partitions``, fixed topic-partitions.
    """

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("subscribe", "subscribePattern", "assign"):
            raise ConfigError(f"unknown subscription kind {self.kind!r}")

    @property
    def regex(self) -> re.Pattern[str]:
        """The compiled ``pattern`` (``re`` keeps its own cache of compiled patterns)."""
        if self.pattern is None:
            raise ConfigError(f"a {self.kind!r} subscription has no pattern")
        return re.compile(self.pattern)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"Subscribe[{', '.join(self.topics)}]"
        if self.kind == "subscribePattern":
            return f"SubscribePattern[{self.pattern}]"
        return f"Assign[{', '.join(format_tp(tp) for tp in self.partitions)}]"


# ---- offset specs -----------------------------------------------------------------------
# Each spec remembers the option it came from, so that errors found while resolving it can
# name that option.


@dataclass(frozen=True, slots=True)
class EarliestOffsets:
    """Bind to the earliest offset of every partition."""

    option: str = "startingOffsets"


@dataclass(frozen=True, slots=True)
class LatestOffsets:
    """Bind to the latest offset (the high watermark, or the last stable offset under
    read_committed) of every partition."""

    option: str = "endingOffsets"


@dataclass(frozen=True, slots=True)
class SpecificOffsets:
    """Explicit offsets per partition; -2 means earliest and -1 latest."""

    offsets: tuple[tuple[TopicPartition, int], ...]
    option: str = "startingOffsets"

    @property
    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True, slots=True)
class SpecificTimestamps:
    """A timestamp (ms) per partition: bind to the earliest offset whose timestamp is at or
    after it. ``strategy`` says what a starting spec does when no such offset exists:
    ``"error"`` fails, ``"latest"`` binds to the latest offset. An ending spec always
    binds to the latest offset then, as Spark does."""

    timestamps: tuple[tuple[TopicPartition, int], ...]
    strategy: str = "error"
    option: str = "startingOffsetsByTimestamp"

    @property
    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.timestamps)


@dataclass(frozen=True, slots=True)
class GlobalTimestamp:
    """One timestamp (ms) for every partition; otherwise as ``SpecificTimestamps``."""

    timestamp: int
    strategy: str = "error"
    option: str = "startingTimestamp"


OffsetSpec = (
    EarliestOffsets | LatestOffsets | SpecificOffsets | SpecificTimestamps | GlobalTimestamp
)
