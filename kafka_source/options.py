"""The reader's options: parsed, checked and frozen before any job starts.

``parse_reader_options(options, for_streaming=...)`` takes the options as Spark hands
them to a Python data source (a case-insensitive mapping of strings) and returns a frozen,
picklable ``ReaderOptions``, or raises ``ConfigError`` naming the option, worded like
Spark's Kafka source where Spark has a message. Names, defaults and precedence follow
Spark's: exactly one of ``subscribe``, ``subscribePattern``, ``assign``; the start (and a
batch's end) is the first of the ``*Timestamp``, ``*OffsetsByTimestamp``, ``*Offsets``
options that is set; a batch may not start at ``latest`` nor end at ``earliest``; a stream
has no end; Kafka options Spark rejects are rejected with Spark's message, and other
``kafka.*`` options we do not use are logged once on ``pykafka.source``.

``subscribePattern`` is a Python regular expression matched anywhere in a topic's name,
as Spark's default offset reader matches its Java one.

``check_reader_options(options)`` runs when Spark loads the source: Spark does not say
there whether the read is a batch or a stream, so it raises only what is wrong for both;
the rest is raised when the query is planned.

The option table is ``kafka_source.option_table``; the connection options are read by
``kafka_common.connection_options``, offsets and subscriptions by ``offset_options`` and
``offset_json``, value formats by ``kafka_common.value_formats``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

from kafka_common.connection_options import client_config
from kafka_common.option_map import INT32_MAX, OptionMap, check_names, check_spelling, warn_once
from kafka_common.value_formats import Formats, parse_reader_formats
from protocol.config import ClientConfig
from protocol.errors import ConfigError

from .offset_options import (
    check_start_before_end,
    check_stream_has_no_end,
    named_topics,
    offset_range,
    read_subscription,
)
from .dead_letter_txn import DeadLetterTxnSpec, parse_exactly_once
from .offset_specs import OffsetSpec, Subscription
from .option_table import reader_option_names

__all__ = [
    "ReaderOptions",
    "parse_reader_options",
    "parse_duration_ms",
    "parse_bytes",
    "check_reader_options",
    "reader_formats",
]

log = logging.getLogger("pykafka.source")


_CANONICAL = {name.lower(): name for name in reader_option_names()}
_STREAMING_ONLY = (
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "maxBytesPerTrigger",
    "commitOffsetsToGroup",
)
_DEFAULT_MAX_TRIGGER_DELAY = "15m"

_AUTO_OFFSET_RESET_MESSAGE = (
    "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
    "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
    "Streaming manages which offsets are consumed internally, rather than relying on the "
    "kafkaConsumer to do it. This will ensure that no data is missed when new "
    "topics/partitions are dynamically subscribed. Note that 'startingOffsets' only applies "
    "when a new Streaming query is started, and that resuming will always pick up from "
    "where the query left off. See the docs for more details."
)
_REJECTED_KAFKA_OPTIONS = {
    "kafka.auto.offset.reset": _AUTO_OFFSET_RESET_MESSAGE,
    "kafka.key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
        "deserialize the keys."
    ),
    "kafka.value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as "
        "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
        "deserialize the values."
    ),
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

#: Where ``check_reader_options`` sends its warnings: nowhere (the query logs them when it
#: parses its options for real, knowing whether it is a batch or a stream).
_quiet = logging.getLogger("pykafka.source.load-check")
_quiet.disabled = True
_quiet.propagate = False


# ---- value parsers ----------------------------------------------------------------------

_TIME_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_BYTE_UNITS = {
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "p": 2**50,
    "pb": 2**50,
}


def parse_duration_ms(text: str, option: str = "maxTriggerDelay") -> int:
    """A Spark time string (``50s``, ``100ms``, ``15m``, ``1h``, ``2d``, ``250us``; a bare
    number is milliseconds) in whole milliseconds."""
    match = re.fullmatch(r"([0-9]+)([a-z]+)?", text.strip().lower())
    if not match or (match.group(2) and match.group(2) not in _TIME_UNITS_MS):
        raise ConfigError(
            f"{option}: cannot parse {text!r} as a duration. Time must be specified as "
            f"seconds (s), milliseconds (ms), microseconds (us), minutes (m or min), hour "
            f"(h), or day (d). E.g. 50s, 100ms, or 250us."
        )
    return int(int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"])


def parse_bytes(text: str, option: str = "maxBytesPerTrigger") -> int:
    """A Spark byte string (``1024``, ``512k``, ``64m``, ``2g``; a bare number is bytes)."""
    match = re.fullmatch(r"([0-9]+)([a-z]+)?", text.strip().lower())
    if not match or (match.group(2) and match.group(2) not in _BYTE_UNITS):
        raise ConfigError(
            f"{option}: cannot parse {text!r} as a size. Size must be specified as bytes "
            f"(b), kibibytes (k), mebibytes (m), gibibytes (g), tebibytes (t), or pebibytes "
            f"(p). E.g. 50b, 100k, or 250m."
        )
    return int(match.group(1)) * _BYTE_UNITS[match.group(2) or "b"]


# ---- the result -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReaderOptions:
    """The reader's options, checked. Picklable: the driver ships it to the executors."""

    subscription: Subscription
    client_config: ClientConfig
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec | None  # None for streaming queries
    for_streaming: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    isolation_level: str = "read_uncommitted"
    group_id: str | None = None
    fetch_max_bytes: int = 52_428_800
    max_partition_fetch_bytes: int = 1_048_576
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    check_crcs: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    max_bytes_per_trigger: int | None = None
    commit_offsets_to_group: str | None = None
    ignored_kafka_options: tuple[str, ...] = field(default=())
    formats: Formats | None = None  # valueFormat/keyFormat (kafka_common.value_formats)
    dead_letter_txn: DeadLetterTxnSpec | None = None  # exactlyOnce dead-letter copies

    @property
    def isolation_level_code(self) -> int:
        """The ListOffsets/Fetch ``isolation_level``: 0 read_uncommitted, 1 read_committed."""
        return 1 if self.isolation_level == "read_committed" else 0

    @property
    def bootstrap_servers(self) -> list[str]:
        return list(self.client_config.bootstrap_servers)


# ---- parsing ----------------------------------------------------------------------------


def parse_reader_options(
    options: Mapping[str, Any], *, for_streaming: bool = False
) -> ReaderOptions:
    """Check and parse the reader's options (see the module docstring and
    ``READER_OPTIONS``). ``for_streaming`` selects the streaming defaults and rules.

    Raises ``ConfigError`` naming the option at the first problem; never quotes a password.
    """
    return _parse(options, for_streaming, log)


def check_reader_options(options: Mapping[str, Any]) -> None:
    """Raise the ``ConfigError`` that the options would raise in a batch query and in a
    streaming query alike; log nothing. For ``load()``, where Spark does not say which of
    the two the read is: an error of one kind only waits for the query to be planned."""
    errors = []
    for for_streaming in (False, True):
        try:
            _parse(options, for_streaming, _quiet)
            return
        except ConfigError as exc:
            errors.append(exc)
    batch, stream = (str(e) for e in errors)
    if batch == stream:
        raise errors[0]
    raise ConfigError(f"{batch} (in a batch query); {stream} (in a streaming query)")


def reader_formats(options: Mapping[str, Any]) -> Formats | None:
    """Just the ``valueFormat``/``keyFormat`` options (for the DataFrame's schema)."""
    opts = OptionMap(options, _CANONICAL)
    return parse_reader_formats(opts, named_topics(read_subscription(opts, _quiet)))


def _trigger_offsets(opts: OptionMap) -> tuple[int | None, int | None]:
    """(maxOffsetsPerTrigger, minOffsetsPerTrigger), the minimum not above the maximum."""
    max_offsets = opts.integer("maxOffsetsPerTrigger")
    min_offsets = opts.integer("minOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise ConfigError(
            f"The value of minOffsetPerTrigger({min_offsets}) is higher than "
            f"the maxOffsetsPerTrigger({max_offsets})."
        )
    return max_offsets, min_offsets


def _max_bytes_per_trigger(opts: OptionMap) -> int | None:
    max_bytes = opts.get("maxBytesPerTrigger")
    max_bytes_per_trigger = (
        parse_bytes(max_bytes, "maxBytesPerTrigger") if max_bytes is not None else None
    )
    if max_bytes_per_trigger == 0:
        raise ConfigError("maxBytesPerTrigger must be positive")
    return max_bytes_per_trigger


def _commit_group(opts: OptionMap) -> str | None:
    commit = opts.get("commitOffsetsToGroup")
    if commit is not None and not commit.strip():
        raise ConfigError(
            "commitOffsetsToGroup: give the consumer group to commit the "
            "query's offsets to (an empty name is not a group)"
        )
    return commit


def _warn_ignored(
    opts: OptionMap, group_id: str | None, for_streaming: bool, logger: logging.Logger
) -> None:
    """The options that do nothing here, each warned about once."""
    if group_id is not None:
        warn_once(
            logger,
            "group.id",
            "Kafka option 'kafka.group.id' is ignored: this connector "
            "reads partitions directly and never joins a consumer group (use "
            "commitOffsetsToGroup to publish the query's progress to a group).",
        )
    if not for_streaming:
        for name in _STREAMING_ONLY:
            if opts.has(name):
                warn_once(logger, f"batch:{name}", "%s option ignored in batch queries", name)


def _isolation_level(opts: OptionMap) -> str:
    isolation = (opts.get("kafka.isolation.level") or "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigError(
            f"kafka.isolation.level: Invalid value "
            f"{opts.get('kafka.isolation.level')!r}; String must be one of: "
            f"read_committed, read_uncommitted"
        )
    return isolation


def _parse(
    options: Mapping[str, Any], for_streaming: bool, logger: logging.Logger
) -> ReaderOptions:
    opts = OptionMap(options, _CANONICAL)
    # A misspelt name first: a mistyped `subscribe` is named as typed, not reported missing.
    check_spelling(opts, _CANONICAL, _REJECTED_KAFKA_OPTIONS, side="source")

    # Mode-specific rules next, as Spark's validateStreamOptions/validateBatchOptions.
    if for_streaming:
        check_stream_has_no_end(opts, logger)
    starting, ending = offset_range(opts, for_streaming, logger)

    # General rules, in Spark's order (validateGeneralOptions).
    subscription = read_subscription(opts, logger)
    min_partitions = opts.integer("minPartitions", maximum=INT32_MAX)
    max_records = opts.integer("maxRecordsPerPartition")
    group_id = opts.get("kafka.group.id")
    ignored = check_names(opts, _CANONICAL, _REJECTED_KAFKA_OPTIONS, log=logger, side="source")
    if opts.get("kafka.bootstrap.servers") is None:
        raise ConfigError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    max_offsets, min_offsets = _trigger_offsets(opts)
    if ending is not None:
        check_start_before_end(starting, ending)
    max_trigger_delay_ms = parse_duration_ms(
        opts.get("maxTriggerDelay", _DEFAULT_MAX_TRIGGER_DELAY), "maxTriggerDelay"
    )
    max_bytes_per_trigger = _max_bytes_per_trigger(opts)
    commit = _commit_group(opts)
    _warn_ignored(opts, group_id, for_streaming, logger)
    isolation = _isolation_level(opts)
    formats = parse_reader_formats(opts, named_topics(subscription))
    dead_letters = formats.dead_letter_topic if formats is not None else None

    return ReaderOptions(
        subscription=subscription,
        client_config=client_config(
            opts, role="consumer", log=logger, client_rack=opts.get("kafka.client.rack", "")
        ),
        starting_offsets=starting,
        ending_offsets=ending,
        for_streaming=for_streaming,
        fail_on_data_loss=opts.boolean("failOnDataLoss", True),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        include_headers=opts.boolean("includeHeaders", False),
        poll_timeout_ms=opts.integer("kafkaConsumer.pollTimeoutMs", 120_000),
        fetch_offset_num_retries=opts.integer("fetchOffset.numRetries", 3, maximum=INT32_MAX),
        fetch_offset_retry_interval_ms=opts.integer("fetchOffset.retryIntervalMs", 1000, minimum=0),
        isolation_level=isolation,
        group_id=group_id,
        fetch_max_bytes=opts.integer("kafka.fetch.max.bytes", 52_428_800, maximum=INT32_MAX),
        max_partition_fetch_bytes=opts.integer(
            "kafka.max.partition.fetch.bytes", 1_048_576, maximum=INT32_MAX
        ),
        fetch_max_wait_ms=opts.integer(
            "kafka.fetch.max.wait.ms", 500, minimum=0, maximum=INT32_MAX
        ),
        check_crcs=opts.boolean("kafka.check.crcs", True),
        fetch_min_bytes=opts.integer("kafka.fetch.min.bytes", 1, minimum=0, maximum=INT32_MAX),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=max_trigger_delay_ms,
        max_bytes_per_trigger=max_bytes_per_trigger,
        commit_offsets_to_group=commit.strip() if commit and for_streaming else None,
        ignored_kafka_options=ignored,
        formats=formats,
        dead_letter_txn=parse_exactly_once(opts, dead_letters, for_streaming),
    )
