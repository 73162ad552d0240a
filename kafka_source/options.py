"""The reader's options: parsed, checked and frozen before any job starts.

``parse_reader_options(options, for_streaming=...)`` takes the options exactly as Spark
hands them to a Python data source (a case-insensitive mapping of strings) and returns a
frozen, picklable ``ReaderOptions``, or raises ``ConfigError`` with a message that names the
option, worded like Spark's Kafka source where Spark has a message.

Option names, defaults and precedence follow Spark's Kafka source:

- exactly one of ``subscribe``, ``subscribePattern``, ``assign``;
- the start of a read is the first of ``startingTimestamp``, ``startingOffsetsByTimestamp``,
  ``startingOffsets`` that is set (``earliest`` for batch, ``latest`` for streaming when
  none is), and the end of a batch read likewise from the ``ending*`` options (``latest``);
- a batch may not start at ``latest`` (nor at -1 in JSON) nor end at ``earliest`` (nor -2);
  a stream has no end, so the ``ending*`` options are errors there;
- ``kafka.*`` options configure the client; Kafka options Spark rejects are rejected with
  Spark's message, and any other ``kafka.*`` option we do not use is logged once as a
  warning on the ``pykafka.source`` logger instead of being silently dropped.

``subscribePattern`` is a Python regular expression (``re``), not a Java one: the common
syntax is the same, but Java-only constructs such as ``\\p{Alpha}`` are not accepted. A
topic is selected when the pattern matches anywhere in its name, as with Spark's default
offset reader; write ``^name.*$`` to match whole names.

The SASL password (``kafka.sasl.password``, or the one inside ``kafka.sasl.jaas.config``)
and ``kafka.ssl.key.password`` are kept in ``protocol.config.Secret`` and never appear in a
repr, a str, a log line or an error message.

``READER_OPTIONS`` lists every option with its default, the queries it applies to and its
meaning (``options_table_markdown()`` renders it); ``reader_option_names()`` lists the
names alone.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from protocol.config import SASL_MECHANISMS, SECURITY_PROTOCOLS, ClientConfig, parse_host_port
from protocol.errors import ConfigError
from protocol.sasl import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas_config

from .planning import (EARLIEST, LATEST, EarliestOffsets, GlobalTimestamp, LatestOffsets,
                       OffsetSpec, SpecificOffsets, SpecificTimestamps, Subscription,
                       TopicPartition, format_tp)

__all__ = [
    "ReaderOption", "READER_OPTIONS", "ReaderOptions", "parse_reader_options",
    "reader_option_names", "options_table_markdown", "parse_duration_ms", "parse_bytes",
]

log = logging.getLogger("pykafka.source")


class ReaderOption(NamedTuple):
    """One documented reader option."""

    name: str
    default: str
    queries: str  # "batch and streaming", "batch", "streaming"
    meaning: str


_BOTH, _BATCH, _STREAM = "batch and streaming", "batch", "streaming"

#: The connection security options, the same for the reader and the writer (both parse
#: them with ``security_settings``): (name, default, meaning).
SECURITY_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("kafka.security.protocol", '"PLAINTEXT"',
     "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    ("kafka.sasl.mechanism", '"PLAIN"',
     "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
    ("kafka.sasl.username", "none",
     "SASL user name (or give kafka.sasl.jaas.config)."),
    ("kafka.sasl.password", "none",
     "SASL password; never logged."),
    ("kafka.sasl.jaas.config", "none",
     "JVM-style JAAS line holding the username and password, e.g. "
     'org.apache.kafka.common.security.plain.PlainLoginModule required '
     'username="u" password="p";'),
    ("kafka.ssl.cafile", "system CAs",
     "PEM file of the certificate authorities to trust."),
    ("kafka.ssl.certfile", "none",
     "PEM client certificate for mutual TLS."),
    ("kafka.ssl.keyfile", "none",
     "PEM private key of the client certificate."),
    ("kafka.ssl.key.password", "none",
     "Password of an encrypted kafka.ssl.keyfile; never logged."),
    ("kafka.ssl.endpoint.identification.algorithm", '"https"',
     '"https" checks the broker\'s host name against its certificate; an empty '
     "string skips that check (the chain is still verified)."),
)

#: Every option the reader accepts, in the order the documentation lists them.
READER_OPTIONS: tuple[ReaderOption, ...] = (
    ReaderOption("kafka.bootstrap.servers", "(required)", _BOTH,
                 "Comma-separated host:port list of brokers to bootstrap from."),
    ReaderOption("subscribe", "(one of three)", _BOTH,
                 "Comma-separated list of topics to read."),
    ReaderOption("subscribePattern", "(one of three)", _BOTH,
                 "Python regular expression; every non-internal topic it matches "
                 "(anywhere in the name) is read."),
    ReaderOption("assign", "(one of three)", _BOTH,
                 'JSON of the partitions to read, e.g. {"topicA":[0,1],"topicB":[2,4]}.'),
    ReaderOption("startingTimestamp", "none", _BOTH,
                 "Start every partition at the first offset whose timestamp (ms) is at or "
                 "after this one. Takes precedence over startingOffsetsByTimestamp and "
                 "startingOffsets."),
    ReaderOption("startingOffsetsByTimestamp", "none", _BOTH,
                 'JSON of a start timestamp (ms) per partition, e.g. '
                 '{"topicA":{"0":1700000000000}}. Takes precedence over startingOffsets.'),
    ReaderOption("startingOffsets", '"earliest" (batch), "latest" (streaming)', _BOTH,
                 '"earliest", "latest" (streaming only) or JSON of an offset per partition, '
                 'e.g. {"topicA":{"0":23,"1":-2}}; -2 is earliest, -1 latest (streaming '
                 "only)."),
    ReaderOption("startingOffsetsByTimestampStrategy", '"error"', _BOTH,
                 'What a start timestamp with no offset at or after it does: "error" fails, '
                 '"latest" starts that partition at its latest offset.'),
    ReaderOption("endingTimestamp", "none", _BATCH,
                 "End every partition at the first offset whose timestamp (ms) is at or "
                 "after this one (the latest offset when there is none). Takes precedence "
                 "over endingOffsetsByTimestamp and endingOffsets."),
    ReaderOption("endingOffsetsByTimestamp", "none", _BATCH,
                 "JSON of an end timestamp (ms) per partition. Takes precedence over "
                 "endingOffsets."),
    ReaderOption("endingOffsets", '"latest"', _BATCH,
                 '"latest" or JSON of an (exclusive) end offset per partition; -1 is latest, '
                 "-2 is not allowed."),
    ReaderOption("failOnDataLoss", "true", _BOTH,
                 "Fail when data may have been lost (deleted topics, offsets out of range) "
                 "instead of logging a warning and going on."),
    ReaderOption("minPartitions", "none", _BOTH,
                 "Desired minimum number of Spark partitions; large Kafka partitions are "
                 "split to reach about this many."),
    ReaderOption("maxRecordsPerPartition", "none", _BOTH,
                 "Split any Kafka partition's range so that no Spark partition reads more "
                 "than this many offsets."),
    ReaderOption("includeHeaders", "false", _BOTH,
                 "Add the record headers as a column."),
    ReaderOption("kafkaConsumer.pollTimeoutMs", "120000", _BOTH,
                 "How long (ms) a task waits for records from a broker before failing."),
    ReaderOption("fetchOffset.numRetries", "3", _BOTH,
                 "Attempts at fetching offsets on the driver before giving up."),
    ReaderOption("fetchOffset.retryIntervalMs", "1000", _BOTH,
                 "Milliseconds to wait between two attempts at fetching offsets."),
    ReaderOption("maxOffsetsPerTrigger", "none", _STREAM,
                 "Upper bound on the offsets read per micro-batch, split across partitions "
                 "in proportion to their backlog."),
    ReaderOption("minOffsetsPerTrigger", "none", _STREAM,
                 "Delay a micro-batch until this many offsets are available (or "
                 "maxTriggerDelay has passed)."),
    ReaderOption("maxTriggerDelay", '"15m"', _STREAM,
                 "Longest a micro-batch is delayed by minOffsetsPerTrigger, as a duration "
                 "(e.g. 30s, 15m, 1h)."),
    ReaderOption("maxBytesPerTrigger", "none", _STREAM,
                 "Soft upper bound on the bytes read per micro-batch (e.g. 512m, 2g)."),
    ReaderOption("commitOffsetsToGroup", "none", _STREAM,
                 "A consumer group name: the end offsets of each finished micro-batch are "
                 "committed to it (without joining it), so Kafka's tools show the query's "
                 "lag. They are never read back: the checkpoint stays the source of truth."),
    ReaderOption("kafka.isolation.level", '"read_uncommitted"', _BOTH,
                 '"read_committed" reads only committed transactional records.'),
    ReaderOption("kafka.group.id", "none", _BOTH,
                 "Accepted and ignored (with a warning): reading never joins a group; use "
                 "commitOffsetsToGroup to publish progress."),
    ReaderOption("kafka.client.id", '"pyspark-pykafka"', _BOTH,
                 "Client id sent to the brokers (visible in their logs and quotas)."),
    ReaderOption("kafka.request.timeout.ms", "30000", _BOTH,
                 "Timeout (ms) of one request to a broker."),
    ReaderOption("kafka.fetch.max.bytes", "52428800", _BOTH,
                 "Maximum bytes a broker returns for one fetch request."),
    ReaderOption("kafka.max.partition.fetch.bytes", "1048576", _BOTH,
                 "Maximum bytes a broker returns per partition in one fetch."),
    ReaderOption("kafka.fetch.max.wait.ms", "500", _BOTH,
                 "Longest (ms) a broker waits for kafka.fetch.min.bytes before answering."),
    ReaderOption("kafka.fetch.min.bytes", "1", _BOTH,
                 "Bytes a broker waits to accumulate before answering a fetch."),
    ReaderOption("kafka.check.crcs", "true", _BOTH,
                 "Verify the CRC-32C of every record batch read (Kafka's check.crcs)."),
    *(ReaderOption(name, default, _BOTH, meaning)
      for name, default, meaning in SECURITY_OPTIONS),
)


def reader_option_names() -> tuple[str, ...]:
    """The name of every option the reader accepts, in documentation order."""
    return tuple(option.name for option in READER_OPTIONS)


def options_table_markdown() -> str:
    """``READER_OPTIONS`` as a Markdown table (option, default, queries, meaning)."""
    rows = ["| Option | Default | Queries | Meaning |", "| --- | --- | --- | --- |"]
    for o in READER_OPTIONS:
        rows.append(f"| `{o.name}` | {o.default} | {o.queries} | "
                    f"{o.meaning.replace('|', '&#124;')} |")
    return "\n".join(rows)


_CANONICAL = {name.lower(): name for name in reader_option_names()}
_STRATEGIES = ("subscribe", "subscribePattern", "assign")
_SECRET_OPTIONS = frozenset({"kafka.sasl.password", "kafka.ssl.key.password",
                             "kafka.sasl.jaas.config"})
_STREAMING_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
                   "maxBytesPerTrigger", "commitOffsetsToGroup")
_DEFAULT_MAX_TRIGGER_DELAY = "15m"
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

_AUTO_OFFSET_RESET_MESSAGE = (
    "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
    "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
    "Streaming manages which offsets are consumed internally, rather than relying on the "
    "kafkaConsumer to do it. This will ensure that no data is missed when new "
    "topics/partitions are dynamically subscribed. Note that 'startingOffsets' only applies "
    "when a new Streaming query is started, and that resuming will always pick up from "
    "where the query left off. See the docs for more details.")
_REJECTED_KAFKA_OPTIONS = {
    "kafka.auto.offset.reset": _AUTO_OFFSET_RESET_MESSAGE,
    "kafka.key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
        "deserialize the keys."),
    "kafka.value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as "
        "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
        "deserialize the values."),
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(logger: logging.Logger, key: str, message: str, *args: Any) -> None:
    """Log ``message`` on ``logger`` the first time ``key`` is seen for it in this process
    (the reader and the writer share this; options are parsed again for every query)."""
    with _warned_lock:
        if f"{logger.name}:{key}" in _warned:
            return
        _warned.add(f"{logger.name}:{key}")
    logger.warning(message, *args)


def _warn_once(key: str, message: str, *args: Any) -> None:
    warn_once(log, key, message, *args)


# ---- value parsers ----------------------------------------------------------------------

_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
                  "h": 3_600_000, "d": 86_400_000}
_BYTE_UNITS = {"b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30,
               "gb": 2**30, "t": 2**40, "tb": 2**40, "p": 2**50, "pb": 2**50}


def parse_duration_ms(text: str, option: str = "maxTriggerDelay") -> int:
    """A Spark time string (``50s``, ``100ms``, ``15m``, ``1h``, ``2d``, ``250us``; a bare
    number is milliseconds) in whole milliseconds."""
    match = re.fullmatch(r"([0-9]+)([a-z]+)?", text.strip().lower())
    if not match or (match.group(2) and match.group(2) not in _TIME_UNITS_MS):
        raise ConfigError(
            f"{option}: cannot parse {text!r} as a duration. Time must be specified as "
            f"seconds (s), milliseconds (ms), microseconds (us), minutes (m or min), hour "
            f"(h), or day (d). E.g. 50s, 100ms, or 250us.")
    value = int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"]
    return int(value)


def parse_bytes(text: str, option: str = "maxBytesPerTrigger") -> int:
    """A Spark byte string (``1024``, ``512k``, ``64m``, ``2g``; a bare number is bytes)."""
    match = re.fullmatch(r"([0-9]+)([a-z]+)?", text.strip().lower())
    if not match or (match.group(2) and match.group(2) not in _BYTE_UNITS):
        raise ConfigError(
            f"{option}: cannot parse {text!r} as a size. Size must be specified as bytes "
            f"(b), kibibytes (k), mebibytes (m), gibibytes (g), tebibytes (t), or pebibytes "
            f"(p). E.g. 50b, 100k, or 250m.")
    return int(match.group(1)) * _BYTE_UNITS[match.group(2) or "b"]


def _json_object(option: str, text: str, example: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ConfigError(f"{option}: Expected e.g. {example}, got {text}")
    return value


def _int_value(value: object) -> int | None:
    """A JSON integer (not a bool, not a float), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _partition_number(option: str, topic: str, key: object, text: str, example: str) -> int:
    number = None
    if isinstance(key, str) and re.fullmatch(r"[0-9]+", key.strip()):
        number = int(key)
    elif _int_value(key) is not None:
        number = key
    if number is None or not 0 <= number <= _INT32_MAX:
        raise ConfigError(f"{option}: partition {key!r} of topic {topic!r} is not a "
                          f"partition number. Expected e.g. {example}, got {text}")
    return number


def _parse_partition_values(option: str, text: str, example: str,
                            what: str) -> tuple[tuple[TopicPartition, int], ...]:
    """``{"topic": {"0": value, ...}, ...}`` into sorted ``((topic, p), value)`` pairs."""
    data = _json_object(option, text, example)
    pairs: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"{option}: Expected e.g. {example}, got {text}")
        for key, value in parts.items():
            partition = _partition_number(option, topic, key, text, example)
            number = _int_value(value)
            if number is None:
                raise ConfigError(f"{option}: the {what} of {topic}-{partition} must be an "
                                  f"integer, got {value!r}. Expected e.g. {example}")
            pairs[(topic, partition)] = number
    return tuple(sorted(pairs.items()))


_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = '{"topicA": {"0": 123456789, "1": 123456789}, ' \
                      '"topicB": {"0": 123456789, "1": 123456789}}'
_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'


def _parse_offsets_json(option: str, text: str) -> SpecificOffsets:
    offsets = _parse_partition_values(option, text, _OFFSETS_EXAMPLE, "offset")
    for tp, offset in offsets:
        if offset < EARLIEST:
            raise ConfigError(f"{option}: offset {offset} for {format_tp(tp)} is not valid; "
                              f"use an offset >= 0, -2 for earliest or -1 for latest")
    return SpecificOffsets(offsets, option)


def _parse_timestamps_json(option: str, text: str, strategy: str) -> SpecificTimestamps:
    timestamps = _parse_partition_values(option, text, _TIMESTAMPS_EXAMPLE, "timestamp")
    for tp, ts in timestamps:
        if ts < 0:
            raise ConfigError(f"{option}: timestamp {ts} for {format_tp(tp)} is not valid; "
                              f"use milliseconds since the epoch (>= 0)")
    return SpecificTimestamps(timestamps, strategy, option)


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    if not text.strip().startswith("{"):
        raise ConfigError("No topicpartitions to assign as specified value for option "
                          f"'assign' is '{text}'")
    data = _json_object("assign", text, _ASSIGN_EXAMPLE)
    found: dict[TopicPartition, None] = {}
    for topic, parts in data.items():
        if not isinstance(parts, list):
            raise ConfigError(f"assign: Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
        for part in parts:
            found[(topic, _partition_number("assign", topic, part, text,
                                            _ASSIGN_EXAMPLE))] = None
    if not found:
        raise ConfigError("No topicpartitions to assign as specified value for option "
                          f"'assign' is '{text}'")
    return tuple(sorted(found))


# ---- the options, read one at a time ----------------------------------------------------

class OptionMap:
    """The raw options by lower-case name, with typed getters that name the option."""

    def __init__(self, options: Mapping[str, Any]):
        self.raw: dict[str, str] = {}
        spelled: dict[str, str] = {}
        for key, value in dict(options).items():
            if not isinstance(key, str):
                raise ConfigError(f"option names must be strings, not {type(key).__name__}")
            lower = key.lower()
            if lower in spelled:
                raise ConfigError(f"option {_CANONICAL.get(lower, key)!r} is given twice "
                                  f"(as {spelled[lower]!r} and {key!r})")
            spelled[lower] = key
            if value is None:
                continue
            self.raw[lower] = value if isinstance(value, str) else str(value)

    def has(self, name: str) -> bool:
        return name.lower() in self.raw

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self.raw.get(name.lower())
        if value is None:
            return default
        return value if name in _SECRET_OPTIONS else value.strip()

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
        return value.lower() == "true"

    def integer(self, name: str, default: int | None = None, *, minimum: int = 1,
                maximum: int = _INT64_MAX) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        if not re.fullmatch(r"[+-]?[0-9]+", value):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        number = int(value)
        if number < minimum:
            raise ConfigError(f"{name} must be positive" if minimum == 1 else
                              f"{name} must be at least {minimum}, got {number}")
        if number > maximum:
            raise ConfigError(f"{name} must be at most {maximum}, got {number}")
        return number


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

    @property
    def isolation_level_code(self) -> int:
        """The ListOffsets/Fetch ``isolation_level``: 0 read_uncommitted, 1 read_committed."""
        return 1 if self.isolation_level == "read_committed" else 0

    @property
    def bootstrap_servers(self) -> list[str]:
        return list(self.client_config.bootstrap_servers)


# ---- parsing ----------------------------------------------------------------------------

def _offset_spec(opts: OptionMap, *, starting: bool, for_streaming: bool,
                 strategy: str) -> OffsetSpec:
    """Spark's ``getKafkaOffsetRangeLimit``: the first of the timestamp, timestamp-JSON and
    offsets options that is set, else the default; with the batch-only checks."""
    side = "starting" if starting else "ending"
    ts_option = f"{side}Timestamp"
    by_ts_option = f"{side}OffsetsByTimestamp"
    offsets_option = f"{side}Offsets"
    given = [o for o in (ts_option, by_ts_option, offsets_option) if opts.has(o)]
    chosen = given[0] if given else None
    for other in given[1:]:
        _warn_once(f"precedence:{other}", "Option %s is ignored because %s is set (it takes "
                   "precedence).", other, chosen)

    if chosen == ts_option:
        text = opts.get(ts_option)
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ConfigError(f"{ts_option}: Expected a single long value, got {text}")
        timestamp = int(text)
        if timestamp < 0:
            raise ConfigError(f"{ts_option}: timestamp {timestamp} is not valid; use "
                              f"milliseconds since the epoch (>= 0)")
        return GlobalTimestamp(timestamp, strategy, ts_option)
    if chosen == by_ts_option:
        return _parse_timestamps_json(by_ts_option, opts.get(by_ts_option), strategy)

    text = opts.get(offsets_option)
    if text is None:
        if starting:
            return (LatestOffsets(offsets_option) if for_streaming
                    else EarliestOffsets(offsets_option))
        return LatestOffsets(offsets_option)
    if text.lower() == "latest":
        if starting and not for_streaming:
            raise ConfigError("startingOffsets: starting offset can't be latest for batch "
                              "queries on Kafka")
        return LatestOffsets(offsets_option)
    if text.lower() == "earliest":
        if not starting:
            raise ConfigError("endingOffsets: ending offset can't be earliest for batch "
                              "queries on Kafka")
        return EarliestOffsets(offsets_option)
    spec = _parse_offsets_json(offsets_option, text)
    if not for_streaming:
        for tp, offset in spec.offsets:
            if starting and offset == LATEST:
                raise ConfigError(f"startingOffsets for {format_tp(tp)} can't be latest for "
                                  f"batch queries on Kafka")
            if not starting and offset == EARLIEST:
                raise ConfigError(f"endingOffsets: ending offset for {format_tp(tp)} can't "
                                  f"be earliest for batch queries on Kafka")
    return spec


def _check_start_before_end(start: OffsetSpec, end: OffsetSpec) -> None:
    """Spark's ``checkOffsetLimitValidity`` on the unresolved specs of a batch query."""
    if isinstance(start, SpecificOffsets) and isinstance(end, SpecificOffsets):
        pairs, what = (start.as_dict, end.as_dict), "offset"
    elif isinstance(start, SpecificTimestamps) and isinstance(end, SpecificTimestamps):
        pairs, what = (start.as_dict, end.as_dict), "timestamp"
    elif isinstance(start, GlobalTimestamp) and isinstance(end, GlobalTimestamp):
        if start.timestamp > end.timestamp:
            raise ConfigError(f"startingTimestamp/endingTimestamp: The specified start "
                              f"timestamp {start.timestamp} is greater than the end "
                              f"timestamp {end.timestamp}.")
        return
    else:
        return
    first, last = pairs
    if set(first) != set(last):
        raise ConfigError(
            f"{start.option}/{end.option}: The specified start offset and end offset should "
            f"have the same topic-partitions. Topic-partitions for start offset: "
            f"{{{', '.join(format_tp(tp) for tp in sorted(first))}}}, topic-partitions for "
            f"end offset: {{{', '.join(format_tp(tp) for tp in sorted(last))}}}.")
    for tp in sorted(first):
        if first[tp] > last[tp] >= 0:
            raise ConfigError(
                f"{start.option}/{end.option}: The specified start {what} {first[tp]} is "
                f"greater than the end {what} {last[tp]} for topic {tp[0]} partition "
                f"{tp[1]}.")


def _subscription(opts: OptionMap) -> Subscription:
    given = [name for name in _STRATEGIES if opts.has(name)]
    if not given:
        raise ConfigError("One of the following options must be specified for Kafka source: "
                          "subscribe, subscribePattern, assign. See the docs for more details.")
    if len(given) > 1:
        raise ConfigError("Only one of the following options can be specified for Kafka "
                          "source: subscribe, subscribePattern, assign. See the docs for "
                          "more details.")
    kind = given[0]
    value = opts.get(kind)
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ConfigError("No topics to subscribe to as specified value for option "
                              f"'subscribe' is '{value}'")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not value:
            raise ConfigError("Pattern to subscribe is empty as specified value for option "
                              f"'subscribePattern' is '{value}'")
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(f"subscribePattern: {value!r} is not a valid Python regular "
                              f"expression ({exc})") from None
        return Subscription("subscribePattern", pattern=value)
    return Subscription("assign", partitions=_parse_assign(value))


def _check_kafka_options(opts: OptionMap) -> tuple[str, ...]:
    """Reject what Spark rejects; warn (once) about every ``kafka.*`` option we ignore."""
    for lower, message in _REJECTED_KAFKA_OPTIONS.items():
        if opts.has(lower):
            raise ConfigError(message)
    ignored = []
    for lower in sorted(opts.raw):
        if lower.startswith("kafka.") and lower not in _CANONICAL:
            ignored.append(lower)
            _warn_once(f"unknown:{lower}", "Kafka option '%s' is not used by pyspark-pykafka "
                       "and is ignored.", lower)
        elif not lower.startswith("kafka.") and lower not in _CANONICAL:
            close = difflib.get_close_matches(lower, list(_CANONICAL), n=1, cutoff=0.8)
            hint = f" Did you mean '{_CANONICAL[close[0]]}'?" if close else ""
            _warn_once(f"unknown:{lower}", "Option '%s' is not a pykafka source option and is "
                       "ignored.%s", lower, hint)
    return tuple(ignored)


def security_settings(opts: OptionMap) -> dict[str, Any]:
    """The ``ClientConfig`` arguments for TLS and SASL."""
    protocol = (opts.get("kafka.security.protocol") or "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"kafka.security.protocol: unknown value {protocol!r}; use one of "
                          f"{', '.join(SECURITY_PROTOCOLS)}")
    uses_sasl = protocol.startswith("SASL_")
    uses_tls = protocol in ("SSL", "SASL_SSL")
    settings: dict[str, Any] = {"security_protocol": protocol}

    sasl_options = [o for o in ("kafka.sasl.mechanism", "kafka.sasl.username",
                                "kafka.sasl.password", "kafka.sasl.jaas.config") if opts.has(o)]
    ssl_options = [o for o in ("kafka.ssl.cafile", "kafka.ssl.certfile", "kafka.ssl.keyfile",
                               "kafka.ssl.key.password",
                               "kafka.ssl.endpoint.identification.algorithm") if opts.has(o)]
    if sasl_options and not uses_sasl:
        _warn_once(f"sasl-unused:{protocol}", "Options %s are ignored because "
                   "kafka.security.protocol is %s (use SASL_PLAINTEXT or SASL_SSL).",
                   ", ".join(sasl_options), protocol)
    if ssl_options and not uses_tls:
        _warn_once(f"ssl-unused:{protocol}", "Options %s are ignored because "
                   "kafka.security.protocol is %s (use SSL or SASL_SSL).",
                   ", ".join(ssl_options), protocol)

    if uses_tls:
        algorithm = opts.get("kafka.ssl.endpoint.identification.algorithm", "https")
        if algorithm.lower() not in ("https", ""):
            raise ConfigError(f"kafka.ssl.endpoint.identification.algorithm: unsupported "
                              f"value {algorithm!r}; use 'https' or '' (no host name check)")
        settings.update(
            ssl_cafile=opts.get("kafka.ssl.cafile") or None,
            ssl_certfile=opts.get("kafka.ssl.certfile") or None,
            ssl_keyfile=opts.get("kafka.ssl.keyfile") or None,
            ssl_key_password=opts.get("kafka.ssl.key.password"),
            ssl_check_hostname=algorithm.lower() == "https")
        if settings["ssl_certfile"] is None:
            for option in ("kafka.ssl.keyfile", "kafka.ssl.key.password"):
                if opts.has(option):
                    raise ConfigError(f"{option} is set without kafka.ssl.certfile")

    if uses_sasl:
        settings.update(_sasl_credentials(opts, protocol))
    return settings


def _sasl_credentials(opts: OptionMap, protocol: str) -> dict[str, Any]:
    mechanism = opts.get("kafka.sasl.mechanism")
    if mechanism is not None:
        mechanism = mechanism.upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(f"kafka.sasl.mechanism: unsupported {mechanism!r}; use one of "
                              f"{', '.join(SASL_MECHANISMS)}")
    jaas = opts.get("kafka.sasl.jaas.config")
    username = opts.get("kafka.sasl.username")
    password = opts.get("kafka.sasl.password")
    if jaas is not None:
        if username is not None or password is not None:
            raise ConfigError("kafka.sasl.jaas.config: give either kafka.sasl.jaas.config or "
                              "kafka.sasl.username and kafka.sasl.password, not both")
        username, password, module = parse_jaas_config(jaas)
        if mechanism is None:
            if module == SCRAM_LOGIN_MODULE:
                raise ConfigError("kafka.sasl.mechanism must be SCRAM-SHA-256 or "
                                  "SCRAM-SHA-512 with the ScramLoginModule of "
                                  "kafka.sasl.jaas.config")
            mechanism = "PLAIN"
        expected = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        if module != expected:
            raise ConfigError(f"kafka.sasl.jaas.config: the login module {module} does not "
                              f"fit kafka.sasl.mechanism {mechanism}; use {expected}")
    else:
        mechanism = mechanism or "PLAIN"
        if not username or not password:
            raise ConfigError(f"kafka.security.protocol {protocol} needs credentials: set "
                              f"kafka.sasl.jaas.config, or kafka.sasl.username and "
                              f"kafka.sasl.password")
    return {"sasl_mechanism": mechanism, "sasl_username": username, "sasl_password": password}


def _client_config(opts: OptionMap) -> ClientConfig:
    servers_text = opts.get("kafka.bootstrap.servers")
    servers = [s.strip() for s in servers_text.split(",") if s.strip()]
    if not servers:
        raise ConfigError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                          "Kafka consumer")
    for server in servers:
        parse_host_port(server)  # raises a ConfigError naming kafka.bootstrap.servers
    client_id = opts.get("kafka.client.id")
    if client_id is not None and not client_id:
        raise ConfigError("kafka.client.id must not be empty")
    settings = security_settings(opts)
    return ClientConfig(
        bootstrap_servers=servers,
        client_id=client_id or ClientConfig.client_id,
        request_timeout_ms=opts.integer("kafka.request.timeout.ms", 30_000,
                                        maximum=_INT32_MAX),
        **settings)


def parse_reader_options(options: Mapping[str, Any], *,
                         for_streaming: bool = False) -> ReaderOptions:
    """Check and parse the reader's options (see the module docstring and
    ``READER_OPTIONS``). ``for_streaming`` selects the streaming defaults and rules.

    Raises ``ConfigError`` naming the option at the first problem; never quotes a password.
    """
    opts = OptionMap(options)

    # Mode-specific rules first, as Spark's validateStreamOptions/validateBatchOptions.
    if for_streaming:
        if opts.has("endingOffsets"):
            raise ConfigError("endingOffsets: ending offset not valid in streaming queries")
        for name in ("endingOffsetsByTimestamp", "endingTimestamp"):
            if opts.has(name):
                raise ConfigError(f"{name}: ending timestamp not valid in streaming queries")

    strategy = (opts.get("startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', "
                          f"got {opts.get('startingOffsetsByTimestampStrategy')!r}")
    starting = _offset_spec(opts, starting=True, for_streaming=for_streaming,
                            strategy=strategy)
    ending = None
    if not for_streaming:
        ending = _offset_spec(opts, starting=False, for_streaming=False, strategy=strategy)

    # General rules, in Spark's order (validateGeneralOptions).
    subscription = _subscription(opts)
    min_partitions = opts.integer("minPartitions", maximum=_INT32_MAX)
    max_records = opts.integer("maxRecordsPerPartition")
    group_id = opts.get("kafka.group.id")
    ignored = _check_kafka_options(opts)
    if opts.get("kafka.bootstrap.servers") is None:
        raise ConfigError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                          "Kafka consumer")
    max_offsets = opts.integer("maxOffsetsPerTrigger")
    min_offsets = opts.integer("minOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise ConfigError(f"The value of minOffsetPerTrigger({min_offsets}) is higher than "
                          f"the maxOffsetsPerTrigger({max_offsets}).")

    if ending is not None:
        _check_start_before_end(starting, ending)

    max_trigger_delay_ms = parse_duration_ms(
        opts.get("maxTriggerDelay", _DEFAULT_MAX_TRIGGER_DELAY), "maxTriggerDelay")
    max_bytes = opts.get("maxBytesPerTrigger")
    max_bytes_per_trigger = parse_bytes(max_bytes, "maxBytesPerTrigger") \
        if max_bytes is not None else None
    if max_bytes_per_trigger == 0:
        raise ConfigError("maxBytesPerTrigger must be positive")
    commit = opts.get("commitOffsetsToGroup")
    if commit is not None and not commit.strip():
        raise ConfigError("commitOffsetsToGroup: give the consumer group to commit the "
                          "query's offsets to (an empty name is not a group)")
    if group_id is not None:
        _warn_once("group.id", "Kafka option 'kafka.group.id' is ignored: this connector "
                   "reads partitions directly and never joins a consumer group (use "
                   "commitOffsetsToGroup to publish the query's progress to a group).")
    if not for_streaming:
        for name in _STREAMING_ONLY:
            if opts.has(name):
                _warn_once(f"batch:{name}", "%s option ignored in batch queries", name)

    isolation = (opts.get("kafka.isolation.level") or "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigError(f"kafka.isolation.level: Invalid value "
                          f"{opts.get('kafka.isolation.level')!r}; String must be one of: "
                          f"read_committed, read_uncommitted")

    return ReaderOptions(
        subscription=subscription,
        client_config=_client_config(opts),
        starting_offsets=starting,
        ending_offsets=ending,
        for_streaming=for_streaming,
        fail_on_data_loss=opts.boolean("failOnDataLoss", True),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        include_headers=opts.boolean("includeHeaders", False),
        poll_timeout_ms=opts.integer("kafkaConsumer.pollTimeoutMs", 120_000),
        fetch_offset_num_retries=opts.integer("fetchOffset.numRetries", 3,
                                              maximum=_INT32_MAX),
        fetch_offset_retry_interval_ms=opts.integer("fetchOffset.retryIntervalMs", 1000,
                                                    minimum=0),
        isolation_level=isolation,
        group_id=group_id,
        fetch_max_bytes=opts.integer("kafka.fetch.max.bytes", 52_428_800,
                                     maximum=_INT32_MAX),
        max_partition_fetch_bytes=opts.integer("kafka.max.partition.fetch.bytes", 1_048_576,
                                               maximum=_INT32_MAX),
        fetch_max_wait_ms=opts.integer("kafka.fetch.max.wait.ms", 500, minimum=0,
                                       maximum=_INT32_MAX),
        check_crcs=opts.boolean("kafka.check.crcs", True),
        fetch_min_bytes=opts.integer("kafka.fetch.min.bytes", 1, minimum=0,
                                     maximum=_INT32_MAX),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=max_trigger_delay_ms,
        max_bytes_per_trigger=max_bytes_per_trigger,
        commit_offsets_to_group=commit.strip() if commit and for_streaming else None,
        ignored_kafka_options=ignored,
    )
