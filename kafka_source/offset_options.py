"""The reader's options of what is read: the subscription (``subscribe``,
``subscribePattern``, ``assign``) and where a read starts and ends (the ``starting*`` and
``ending*`` options), with Spark's precedence and checks. Part of ``options``, which
calls these in Spark's order.
"""

from __future__ import annotations

import logging
import re

from kafka_common.option_map import INT64_MAX, OptionMap, warn_once
from protocol.errors import ConfigError

from .offset_json import parse_assign, parse_offsets_json, parse_timestamps_json
from .offset_specs import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
    format_tp,
    format_tps,
)

__all__ = [
    "read_subscription",
    "named_topics",
    "offset_range",
    "offset_spec",
    "check_stream_has_no_end",
    "check_start_before_end",
]

_STRATEGIES = ("subscribe", "subscribePattern", "assign")


def check_stream_has_no_end(opts: OptionMap, logger: logging.Logger) -> None:
    """Spark's validateStreamOptions: a stream has no end."""
    if opts.has("endingOffsets"):
        raise ConfigError("endingOffsets: ending offset not valid in streaming queries")
    if opts.has("endingOffsetsByTimestamp"):
        raise ConfigError(
            "endingOffsetsByTimestamp: ending timestamp not valid in streaming queries"
        )
    if opts.has("endingTimestamp"):  # Spark does not check this one, so ignores it
        warn_once(
            logger, "stream:endingTimestamp", "endingTimestamp option ignored in streaming queries"
        )


def offset_range(
    opts: OptionMap, for_streaming: bool, logger: logging.Logger
) -> tuple[OffsetSpec, OffsetSpec | None]:
    """(start, end) of the read; no end for a stream."""
    strategy = (opts.get("startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(
            f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', "
            f"got {opts.get('startingOffsetsByTimestampStrategy')!r}"
        )
    starting = offset_spec(
        opts, starting=True, for_streaming=for_streaming, strategy=strategy, logger=logger
    )
    ending = None
    if not for_streaming:
        ending = offset_spec(
            opts, starting=False, for_streaming=False, strategy=strategy, logger=logger
        )
    return starting, ending


def offset_spec(
    opts: OptionMap, *, starting: bool, for_streaming: bool, strategy: str, logger: logging.Logger
) -> OffsetSpec:
    """Spark's ``getKafkaOffsetRangeLimit``: the first of the timestamp, timestamp-JSON and
    offsets options that is set, else the default; with the batch-only checks."""
    side = "starting" if starting else "ending"
    ts_option = f"{side}Timestamp"
    by_ts_option = f"{side}OffsetsByTimestamp"
    offsets_option = f"{side}Offsets"
    given = [o for o in (ts_option, by_ts_option, offsets_option) if opts.has(o)]
    chosen = given[0] if given else None
    for other in given[1:]:
        warn_once(
            logger,
            f"precedence:{other}",
            "Option %s is ignored because %s is set (it takes precedence).",
            other,
            chosen,
        )

    if chosen == ts_option:
        stamp = opts.get(ts_option, "")
        if not re.fullmatch(r"[+-]?[0-9]+", stamp) or abs(int(stamp)) > INT64_MAX:
            raise ConfigError(f"{ts_option}: Expected a single long value, got {stamp}")
        timestamp = int(stamp)
        if timestamp < EARLIEST:
            raise ConfigError(
                f"{ts_option}: timestamp {timestamp} is not valid; use "
                f"milliseconds since the epoch (>= 0), -1 for latest or -2 "
                f"for earliest"
            )
        return GlobalTimestamp(timestamp, strategy, ts_option)
    if chosen == by_ts_option:
        return parse_timestamps_json(by_ts_option, opts.get(by_ts_option, ""), strategy)

    text = opts.get(offsets_option)
    if text is None:
        if starting:
            return (
                LatestOffsets(offsets_option) if for_streaming else EarliestOffsets(offsets_option)
            )
        return LatestOffsets(offsets_option)
    if text.lower() == "latest":
        if starting and not for_streaming:
            raise ConfigError(
                "startingOffsets: starting offset can't be latest for batch queries on Kafka"
            )
        return LatestOffsets(offsets_option)
    if text.lower() == "earliest":
        if not starting:
            raise ConfigError(
                "endingOffsets: ending offset can't be earliest for batch queries on Kafka"
            )
        return EarliestOffsets(offsets_option)
    spec = parse_offsets_json(offsets_option, text)
    if not for_streaming:
        for tp, offset in spec.offsets:
            if starting and offset == LATEST:
                raise ConfigError(
                    f"startingOffsets for {format_tp(tp)} can't be latest for "
                    f"batch queries on Kafka"
                )
            if not starting and offset == EARLIEST:
                raise ConfigError(
                    f"endingOffsets: ending offset for {format_tp(tp)} can't "
                    f"be earliest for batch queries on Kafka"
                )
    return spec


def check_start_before_end(start: OffsetSpec, end: OffsetSpec) -> None:
    """Spark's ``checkOffsetLimitValidity`` on the unresolved specs of a batch query."""
    if isinstance(start, SpecificOffsets) and isinstance(end, SpecificOffsets):
        pairs, what = (start.as_dict, end.as_dict), "offset"
    elif isinstance(start, SpecificTimestamps) and isinstance(end, SpecificTimestamps):
        pairs, what = (start.as_dict, end.as_dict), "timestamp"
    elif isinstance(start, GlobalTimestamp) and isinstance(end, GlobalTimestamp):
        if start.timestamp > end.timestamp >= 0:
            raise ConfigError(
                f"startingTimestamp/endingTimestamp: The specified start "
                f"timestamp {start.timestamp} is greater than the end "
                f"timestamp {end.timestamp}."
            )
        return
    else:
        return
    first, last = pairs
    if set(first) != set(last):
        raise ConfigError(
            f"{start.option}/{end.option}: The specified start offset and end offset should "
            f"have the same topic-partitions. Topic-partitions for start offset: "
            f"{format_tps(first)}, topic-partitions for end offset: {format_tps(last)}."
        )
    for tp in sorted(first):
        if first[tp] > last[tp] >= 0:
            raise ConfigError(
                f"{start.option}/{end.option}: The specified start {what} {first[tp]} is "
                f"greater than the end {what} {last[tp]} for topic {tp[0]} partition "
                f"{tp[1]}."
            )


def read_subscription(opts: OptionMap, logger: logging.Logger) -> Subscription:
    given = [name for name in _STRATEGIES if opts.has(name)]
    if not given:
        raise ConfigError(
            "One of the following options must be specified for Kafka source: "
            "subscribe, subscribePattern, assign. See the docs for more details."
        )
    if len(given) > 1:
        raise ConfigError(
            "Only one of the following options can be specified for Kafka "
            "source: subscribe, subscribePattern, assign. See the docs for "
            "more details."
        )
    kind = given[0]
    value = opts.get(kind, "")
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ConfigError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not value:
            raise ConfigError(
                "Pattern to subscribe is empty as specified value for option "
                f"'subscribePattern' is '{value}'"
            )
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(
                f"subscribePattern: {value!r} is not a valid Python regular expression ({exc})"
            ) from None
        return Subscription("subscribePattern", pattern=value)
    partitions = parse_assign(value)
    if not partitions:
        warn_once(
            logger,
            f"assign-empty:{value}",
            "Option 'assign' is %s: it names no partition, so the query reads nothing.",
            value,
        )
    return Subscription("assign", partitions=partitions)


def named_topics(subscription: Subscription) -> tuple[str, ...] | None:
    """The topics a subscription names (subscribe, assign), or None for a pattern: what a
    column's default subject ``<topic>-value`` is made from."""
    if subscription.kind == "subscribe":
        return subscription.topics
    if subscription.kind == "assign":
        return tuple(dict.fromkeys(tp[0] for tp in subscription.partitions))
    return None
