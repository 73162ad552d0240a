"""Driver-side planning for the reader: which partitions, which offsets, which splits.

Everything here is plain Python over plain data, with no Spark in sight (the value
types it works on, ``Subscription``, the offset specs and ``OffsetRange``, live in
``offset_specs``):

- ``partitions_from_metadata`` / ``discover_partitions``: the topic-partitions a
  subscription names, given cluster metadata;
- ``resolve_offsets``: a spec turned into concrete ``{(topic, partition): offset}`` through
  the client's ``list_offsets`` answers (a pure function of those answers);
- ``build_ranges``: start and end offsets paired into ``OffsetRange``s, checked as Spark
  checks them;
- ``plan_batch``: those steps, then the split into input partitions
  (``task_split.plan_ranges``), for a batch read.

Errors that come from the options not fitting the cluster (a topic that does not exist,
no offset at a timestamp, a start after its end) are ``PlanningError``, a ``ConfigError``:
they name the option involved and are raised on the driver before any task runs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol
from collections.abc import Iterable, Mapping

from kafka_common.option_map import warn_once
from kafka_common.retries import missing_topics_message
from protocol.authorization import refine, request_error
from protocol.errors import ConfigError

from .offset_specs import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetRange,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
    TopicPartition,
    format_tp,
    format_tps,
)
from .pushdown import keeps_partition, narrow_ranges
from .task_split import plan_ranges

if TYPE_CHECKING:  # pragma: no cover - typing only
    from protocol.client.cluster import ClusterMetadata

    from .options import ReaderOptions

__all__ = [
    "PlanningError",
    "partitions_from_metadata",
    "discover_partitions",
    "leader_hosts",
    "resolve_offsets",
    "build_ranges",
    "plan_batch",
    "resolve_batch",
]

#: What a read needs on its topics (Kafka takes Read for Describe; both are named).
READ_GRANT = ("Read", "Describe")


log = logging.getLogger("pykafka.source")


class PlanningError(ConfigError):
    """The options do not fit the cluster: the message names the option and the partition."""


class _ListsOffsets(Protocol):
    def list_offsets(
        self, timestamps: dict[TopicPartition, int], isolation_level: int = 0
    ) -> dict[TopicPartition, tuple[int, int]]: ...


# ---- topic resolution -------------------------------------------------------------------


def partitions_from_metadata(
    subscription: Subscription, metadata: ClusterMetadata
) -> list[TopicPartition]:
    """The topic-partitions ``subscription`` selects in ``metadata``, sorted.

    As Spark's connector, which lists partitions with its admin client:

    - a pattern that matches no topic reads nothing, with a warning once per process
      (under an authorizer, Kafka leaves out the topics the principal may not describe);
    - a subscribed or assigned topic missing from the cluster is a ``PlanningError``
      naming it, and a topic the broker answered with an error raises that
      ``BrokerError`` (an authorization failure names the grant a read needs: Read and
      Describe on the topic);
    - internal topics (``__consumer_offsets``, ...) are never read, by any strategy (a
      warning names one that ``subscribe`` or ``assign`` names);
    - an assigned partition the topic does not have (yet) is left out, with a warning: a
      stream asks again every trigger and reads it once it exists.
    """
    topics = metadata.topics
    if subscription.kind == "subscribePattern":
        regex = subscription.regex
        names = [
            name for name, info in topics.items() if not info.is_internal and regex.search(name)
        ]
        if not names:
            warn_once(
                log,
                f"pattern-none:{regex.pattern}",
                "subscribePattern %r matches no topic the cluster lists: nothing is "
                "read. On a cluster with an authorizer Kafka lists a principal only "
                "the topics it may describe, so a topic without a grant is left out, "
                "not refused: grant the principal Read on the topics to read",
                regex.pattern,
            )
    else:
        wanted = (
            subscription.topics
            if subscription.kind == "subscribe"
            else tuple(dict.fromkeys(t for t, _ in subscription.partitions))
        )
        missing = [t for t in wanted if t not in topics]
        if missing:
            raise PlanningError(missing_topics_message(subscription.kind, missing))
        internal = [t for t in wanted if topics[t].is_internal]
        if internal:
            warn_once(
                log,
                f"internal:{subscription.kind}:{','.join(internal)}",
                "%s: skipping internal topic(s) %s: Kafka's internal topics are not "
                "read (as in Spark's connector).",
                subscription.kind,
                ", ".join(internal),
            )
        names = [t for t in wanted if not topics[t].is_internal]

    found: list[TopicPartition] = []
    for name in names:
        info = topics[name]
        if info.error_code:
            raise refine(request_error(info.error_code, "Metadata", topic=name), grant=READ_GRANT)
        found.extend((name, p) for p in info.partitions)

    if subscription.kind == "assign":
        existing = set(found)
        absent = [
            tp
            for tp in subscription.partitions
            if tp not in existing and not topics[tp[0]].is_internal
        ]
        if absent:
            warn_once(
                log,
                f"assign-absent:{format_tps(absent)}",
                "assign: partition(s) %s do not exist (yet) and are not read; a "
                "stream reads them once they exist. The topics have partitions %s.",
                format_tps(absent),
                format_tps(existing),
            )
        found = [tp for tp in subscription.partitions if tp in existing]
    return sorted(set(found))


def metadata_topics(subscription: Subscription) -> list[str] | None:
    """The topics whose metadata ``subscription`` needs: the named topics for
    subscribe/assign, None (every topic) for a pattern."""
    if subscription.kind == "subscribePattern":
        return None
    return (
        list(subscription.topics)
        if subscription.kind == "subscribe"
        else sorted({t for t, _ in subscription.partitions})
    )


def discover_partitions(subscription: Subscription, client) -> list[TopicPartition]:
    """``partitions_from_metadata`` on fresh metadata from ``client``."""
    metadata = client.refresh_metadata(metadata_topics(subscription))
    return partitions_from_metadata(subscription, metadata)


def leader_hosts(
    metadata: ClusterMetadata, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, str]:
    """The host of each partition's leader, where ``metadata`` knows it."""
    hosts = {}
    for topic, partition in partitions:
        info = metadata.topics.get(topic)
        part = info.partitions.get(partition) if info else None
        broker = metadata.brokers.get(part.leader) if part else None
        if broker:
            hosts[(topic, partition)] = broker[0]
    return hosts


# ---- offset resolution ------------------------------------------------------------------


def _check_same_partitions(
    option: str, what: str, specified: set[TopicPartition], assigned: set[TopicPartition]
) -> None:
    """Spark's KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED and
    KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED, naming the option and the difference."""
    if specified == assigned:
        return
    extra, missing = specified - assigned, assigned - specified
    details = []
    if extra:
        details.append(f"not assigned: {format_tps(extra)}")
    if missing:
        details.append(f"not specified: {format_tps(missing)}")
    if "timestamp" in what:
        hint = (
            "Maybe topic partitions are created or deleted while the query is running, "
            "or you didn't specify all the partitions."
        )
    else:
        hint = (
            "Maybe topic partitions are created or deleted while the query is running. "
            "Use -1 for latest, -2 for earliest."
        )
    raise PlanningError(
        f"{option}: Partitions specified for Kafka {what} don't match what are assigned. "
        f"{hint} Specified: {format_tps(specified)} Assigned: {format_tps(assigned)} "
        f"({'; '.join(details)})"
    )


def _list(
    client: _ListsOffsets, request: dict[TopicPartition, int], isolation_level: int, option: str
) -> dict[TopicPartition, int]:
    if not request:
        return {}
    answers = client.list_offsets(request, isolation_level)
    missing = [tp for tp in request if tp not in answers]
    if missing:
        raise PlanningError(f"{option}: the cluster returned no offset for {format_tps(missing)}")
    return {tp: answers[tp][0] for tp in request}


def _bind_sentinels(
    client: _ListsOffsets, offsets: Mapping[TopicPartition, int], isolation_level: int, option: str
) -> dict[TopicPartition, int]:
    """Replace -2/-1 with the earliest/latest offsets, in one ListOffsets round."""
    sentinels = {tp: o for tp, o in offsets.items() if o in (EARLIEST, LATEST)}
    bound = _list(client, sentinels, isolation_level, option)
    return {tp: bound.get(tp, o) for tp, o in offsets.items()}


def resolve_offsets(
    spec: OffsetSpec,
    partitions: Iterable[TopicPartition],
    client: _ListsOffsets,
    *,
    is_starting: bool = True,
    isolation_level: int = 0,
) -> dict[TopicPartition, int]:
    """Concrete offsets ``{(topic, partition): offset}`` for ``spec`` over ``partitions``.

    ``client`` needs only ``list_offsets({tp: timestamp_or_-2_-1}, isolation_level)``
    answering ``{tp: (offset, timestamp)}`` with offset -1 when no record is at or after a
    timestamp. ``isolation_level`` (0 read_uncommitted, 1 read_committed) decides what
    "latest" means. Explicit offsets are taken as given: whether they still exist is the
    reader's business (``failOnDataLoss``).

    Errors (``PlanningError``, naming ``spec.option``):
    - explicit offsets or per-partition timestamps that do not name exactly ``partitions``;
    - a starting timestamp with no offset at or after it, under the ``error`` strategy.
    """
    assigned = set(partitions)
    tps = sorted(assigned)
    if isinstance(spec, EarliestOffsets):
        return _list(client, {tp: EARLIEST for tp in tps}, isolation_level, spec.option)
    if isinstance(spec, LatestOffsets):
        return _list(client, {tp: LATEST for tp in tps}, isolation_level, spec.option)
    if isinstance(spec, SpecificOffsets):
        offsets = spec.as_dict
        _check_same_partitions(
            spec.option, "start offsets" if is_starting else "end offsets", set(offsets), assigned
        )
        return _bind_sentinels(client, offsets, isolation_level, spec.option)
    if isinstance(spec, SpecificTimestamps):
        timestamps = spec.as_dict
        _check_same_partitions(
            spec.option,
            "timestamp based " + ("start" if is_starting else "end") + " offsets",
            set(timestamps),
            assigned,
        )
    elif isinstance(spec, GlobalTimestamp):
        timestamps = {tp: spec.timestamp for tp in tps}
    else:
        raise TypeError(f"not an offset spec: {spec!r}")

    found = _list(client, timestamps, isolation_level, spec.option)
    offsets = {}
    for tp in sorted(found):
        offset = found[tp]
        if offset < 0:  # no record at or after the timestamp
            if is_starting and spec.strategy == "error":
                raise PlanningError(
                    f"{spec.option}: No offset matched from request of topic-partition "
                    f"{format_tp(tp)} and timestamp {timestamps[tp]}. Set "
                    f"startingOffsetsByTimestampStrategy to 'latest' to start such "
                    f"partitions at their latest offset instead."
                )
            offset = LATEST
        offsets[tp] = offset
    return _bind_sentinels(client, offsets, isolation_level, spec.option)


# ---- ranges -----------------------------------------------------------------------------


def build_ranges(
    starting: Mapping[TopicPartition, int],
    ending: Mapping[TopicPartition, int],
    hosts: Mapping[TopicPartition, str] | None = None,
) -> list[OffsetRange]:
    """Pair resolved start and end offsets into ranges sorted by topic and partition.

    Both sides must cover the same partitions, and no start may be after its end (Spark's
    ``RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET``); either is a ``PlanningError``.
    """
    if set(starting) != set(ending):
        raise PlanningError(
            f"different topic partitions for starting offsets topics"
            f"[{','.join(format_tp(tp) for tp in sorted(starting))}] and ending offsets "
            f"topics[{','.join(format_tp(tp) for tp in sorted(ending))}]"
        )
    ranges = []
    for tp in sorted(starting):
        start, end = starting[tp], ending[tp]
        if start > end:
            raise PlanningError(
                f"startingOffsets/endingOffsets: The resolved start offset {start} is "
                f"greater than the resolved end offset {end} for topic {tp[0]} partition "
                f"{tp[1]}. There may be multiple reasons: 1. Start offset is set to too big "
                f"a value that after resolution, end offset is smaller than it (a start "
                f"timestamp with an end offset, a start offset with an end timestamp, or a "
                f"start offset with the end at latest). 2. The Kafka topic partition is "
                f"broken."
            )
        ranges.append(OffsetRange(tp[0], tp[1], start, end, hosts.get(tp) if hosts else None))
    return ranges


# ---- all together -----------------------------------------------------------------------


def plan_batch(options: ReaderOptions, client, narrowing=None) -> list[OffsetRange]:
    """The input partitions of a batch read: discover the partitions, resolve both ends,
    pair them, narrow them by pushed filters (``pushdown.Narrowing``), split them.
    ``client`` is a ``protocol.client.cluster.KafkaClient`` (or anything with
    ``refresh_metadata`` and ``list_offsets``)."""
    ranges, _ = resolve_batch(options, client, narrowing)
    return plan_ranges(ranges, options.min_partitions, options.max_records_per_partition)


def resolve_batch(
    options: ReaderOptions, client, narrowing=None
) -> tuple[list[OffsetRange], dict[TopicPartition, int]]:
    """``plan_batch`` before the split: the narrowed ranges, and the resolved end offset
    of every partition read (also of those whose range came out empty)."""
    if options.for_streaming or options.ending_offsets is None:
        raise ConfigError("plan_batch needs options parsed for a batch query")
    metadata = client.refresh_metadata(metadata_topics(options.subscription))
    partitions = partitions_from_metadata(options.subscription, metadata)
    partitions = [tp for tp in partitions if keeps_partition(narrowing, *tp)]
    if not partitions:
        return [], {}
    level = options.isolation_level_code
    starting = resolve_offsets(
        options.starting_offsets, partitions, client, is_starting=True, isolation_level=level
    )
    ending = resolve_offsets(
        options.ending_offsets, partitions, client, is_starting=False, isolation_level=level
    )
    ranges = build_ranges(starting, ending, leader_hosts(metadata, partitions))
    if narrowing is not None and not narrowing.empty:
        by_time = None
        if narrowing.timestamp_min_ms is not None:
            by_time = _list(
                client,
                {tp: narrowing.timestamp_min_ms for tp in partitions},
                level,
                "timestamp filter",
            )
        ranges = narrow_ranges(narrowing, ranges, by_time)
    return ranges, ending
