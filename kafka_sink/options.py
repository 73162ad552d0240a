"""The writer's options: parsed, checked and frozen on the driver, before any task starts.

``parse_writer_options(options)`` takes the options as Spark hands them to a Python data
source (a case-insensitive mapping of strings) and returns a frozen, picklable
``WriterOptions``, or raises ``ConfigError`` naming the option. Names and defaults are
those of Spark's Kafka sink and of Kafka's Java producer (without the ``kafka.`` prefix
there); where Spark or Kafka has an error message for a misuse, ours says the same thing.

The connection options (``kafka.bootstrap.servers``, ``kafka.client.id``,
``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``) are parsed by
``kafka_common.connection_options``, as the reader's are, so a reader and a writer given the
same options connect the same way.

Choices that differ from the Java producer, and why:

- ``kafka.batch.size`` defaults to 1048576 (1 MiB), not 16384. A bulk writer holds all of
  its task's rows at once, so batches fill immediately and waiting never trades latency
  for size; and in Python every batch and every request costs a fixed few tens of
  microseconds, so fewer, larger batches go much faster. 1 MiB also stays below the
  brokers' default ``message.max.bytes`` (1048588) whatever the codec, since the size
  counts uncompressed record bytes. A batch never exceeds ``kafka.max.request.size``.
- ``kafka.linger.ms`` (default 5, as Kafka 4) is accepted; it never delays rows at hand.
  It bounds how long a partly filled batch may wait for more of the task's input: the
  time is counted only while the task waits for its next Arrow batch (a slow upstream
  stage), and once a partition's pending rows have waited ``linger.ms`` that way they are
  encoded as they are. At the end of the input every pending batch goes at once.
- ``kafka.acks`` ``0`` or ``1`` needs ``kafka.enable.idempotence=false`` explicitly
  (Java would silently turn idempotence off when it was not set).
- Topics are never created. The driver checks that the brokers answer and the topic
  exists as the reader looks its topics up (3 attempts 1 s apart,
  ``kafka_common.retries``), so a wrong address or a missing topic fails in seconds where
  Java's producer waits ``kafka.max.block.ms`` (60 s); that stays the upper bound.
- Nothing is sent before ``checkBeforeSendBytes`` (ours, default 4 MiB) of the task's rows
  are encoded, every row checked, or its input ends: a task that small fails on a bad row
  with nothing written, where Java sends as it goes. ``kafka.buffer.memory`` keeps only
  its Java meaning, the most bytes held while waiting for acknowledgements. (Holding back
  the whole 32 MiB made a bulk write 20-25% slower: the broker sat idle meanwhile.)

``WRITER_OPTIONS`` lists every option with its default and meaning;
``writer_option_names()`` the names alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple
from collections.abc import Mapping

from kafka_common.connection_options import (
    CONNECTIONS_MAX_IDLE_OPTION,
    RETRY_BACKOFF_OPTIONS,
    SECURITY_OPTIONS,
    client_config,
)
from kafka_common.option_map import INT32_MAX, OptionMap, check_names, check_spelling, warn_once
from kafka_common.value_formats import (
    parse_writer_formats,
    writer_format_options,
    writer_refuses,
)
from protocol.config import ClientConfig
from protocol.errors import ConfigError

__all__ = [
    "WriterOption",
    "WRITER_OPTIONS",
    "WriterOptions",
    "parse_writer_options",
    "writer_option_names",
    "options_table_markdown",
    "ACKS_ALL",
    "COMPRESSION_TYPES",
    "MAX_IN_FLIGHT_IDEMPOTENT",
    "PARTITIONERS",
]

log = logging.getLogger("pykafka.sink")

ACKS_ALL = -1
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
#: The most batches a broker remembers per idempotent producer and partition.
MAX_IN_FLIGHT_IDEMPOTENT = 5


class WriterOption(NamedTuple):
    """One documented writer option."""

    name: str
    default: str
    meaning: str


#: Every option the writer accepts, in the order the documentation lists them.
WRITER_OPTIONS: tuple[WriterOption, ...] = (
    WriterOption(
        "kafka.bootstrap.servers",
        "(required)",
        "Comma-separated host:port list of brokers to bootstrap from.",
    ),
    WriterOption(
        "topic",
        "none",
        "Topic every row is written to; overrides the topic column when both are "
        "given. Without it the DataFrame needs a string column 'topic'.",
    ),
    WriterOption(
        "includeHeaders",
        "false",
        "Accepted for symmetry with the reader; the headers column is written "
        "whenever the DataFrame has one.",
    ),
    WriterOption(
        "kafka.acks",
        '"all"',
        '"all" (= -1): every in-sync replica has the records; "1": the leader has '
        'them; "0": no answer is awaited. 0 and 1 need '
        "kafka.enable.idempotence=false.",
    ),
    WriterOption(
        "kafka.enable.idempotence",
        "true",
        "Write through an idempotent producer: a producer id (kept by the Python "
        "worker from task to task) and a "
        "sequence number per batch, so retries never duplicate or reorder records.",
    ),
    WriterOption("kafka.compression.type", '"none"', "none, gzip, snappy, lz4 or zstd."),
    WriterOption(
        "kafka.batch.size",
        "1048576",
        "Most uncompressed record bytes in one batch (one batch per partition per "
        "request). Larger than Java's 16384: a bulk writer has its rows at hand.",
    ),
    WriterOption(
        "kafka.linger.ms",
        "5",
        "How long a partly filled batch may wait for more of the task's input "
        "(counted only while the task waits for input) before it is sent; never "
        "delays rows already at hand.",
    ),
    WriterOption(
        "kafka.max.request.size",
        "1048576",
        "Most bytes of batches in one Produce request; a larger record is an error.",
    ),
    WriterOption(
        "kafka.max.in.flight.requests.per.connection",
        "5",
        "Requests sent to one broker before waiting for an answer; at most 5 with idempotence.",
    ),
    WriterOption(
        "kafka.delivery.timeout.ms",
        "120000",
        "Longest time from a batch's creation to its acknowledgement, retries "
        "included; the task fails after it. At least linger.ms + "
        "request.timeout.ms.",
    ),
    WriterOption(
        "kafka.request.timeout.ms", "30000", "Longest wait for the answer to one request."
    ),
    WriterOption(
        "kafka.retries",
        "2147483647",
        "Resends of one batch before the task fails (delivery.timeout.ms bounds "
        "them in any case); must not be 0 with idempotence.",
    ),
    WriterOption(
        "kafka.max.block.ms",
        "60000",
        "Upper bound of the driver's check that the brokers answer and the topic "
        "exists (3 lookups 1 s apart, as the reader's: a wrong address or a missing "
        "topic fails in seconds) and of a task's wait for a topic of the topic "
        "column to appear in the metadata.",
    ),
    WriterOption(
        "kafka.buffer.memory",
        "33554432",
        "Most encoded bytes a task holds while waiting for acknowledgements.",
    ),
    WriterOption(
        "checkBeforeSendBytes",
        "4194304",
        "Encoded bytes a task holds, every row checked, before its first send "
        "(at most kafka.buffer.memory): a task whose input fits fails on a bad "
        "row with nothing written. Larger keeps that for larger tasks and starts "
        "sending later, which is slower; 0 sends as soon as a batch is full.",
    ),
    WriterOption(
        "kafka.partitioner.class",
        "none",
        "Where rows without a partition value go: unset, DefaultPartitioner or "
        "BuiltInPartitioner: murmur2 of the key, sticky runs for null keys; "
        "UniformStickyPartitioner: sticky runs, keys ignored; RoundRobinPartitioner:"
        " one partition after the other, keys ignored. Other classes are refused: "
        "compute the partition and write it in the partition column.",
    ),
    WriterOption(
        "exactlyOnce",
        "false",
        "Write in Kafka transactions that the driver commits once Spark commits the "
        "job or micro-batch: a batch write becomes visible to read_committed "
        "readers all at once or not at all, each micro-batch exactly once, also "
        "across restarts from the checkpoint (see docs/writing.md).",
    ),
    WriterOption(
        "transactionalIdPrefix",
        "from the checkpoint (streaming)",
        "Prefix of the transactional ids (prefix-partition-attempt; batch writes "
        "put a token of the job after the prefix) and of the consumer groups that "
        "record committed micro-batches (prefix-partition). "
        "Required for batch writes with exactlyOnce; streams derive it from the "
        "checkpoint location. Unique per query: two writers must not share it.",
    ),
    WriterOption(
        "kafka.transaction.timeout.ms",
        "60000",
        "How long the broker keeps a transaction open before aborting it; must "
        "cover a task's write plus the time until the driver commits. At most the "
        "broker's transaction.max.timeout.ms (15 minutes by default).",
    ),
    WriterOption(
        "kafka.client.id",
        '"pyspark-pykafka"',
        "Client id sent to the brokers (visible in their logs and quotas).",
    ),
    WriterOption(*CONNECTIONS_MAX_IDLE_OPTION),
    *(WriterOption(*option) for option in RETRY_BACKOFF_OPTIONS),
    *(WriterOption(*option) for option in SECURITY_OPTIONS),
    *(WriterOption(*option) for option in writer_format_options()),
)


def writer_option_names() -> tuple[str, ...]:
    """The name of every option the writer accepts, in documentation order."""
    return tuple(o.name for o in WRITER_OPTIONS)


def options_table_markdown() -> str:
    """``WRITER_OPTIONS`` as a Markdown table (option, default, meaning)."""
    rows = ["| Option | Default | Meaning |", "| --- | --- | --- |"]
    for o in WRITER_OPTIONS:
        rows.append(f"| `{o.name}` | {o.default} | {o.meaning.replace('|', '&#124;')} |")
    return "\n".join(rows)


_CANONICAL = {name.lower(): name for name in writer_option_names()}

_REJECTED = {
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported as keys are "
    "serialized with ByteArraySerializer.",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported as value are "
    "serialized with ByteArraySerializer.",
    "kafka.transactional.id": "Kafka option 'transactional.id' is not supported: set "
    "exactlyOnce=true (and transactionalIdPrefix) to write in "
    "transactions; each task gets its own transactional id.",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
# Options that only matter to a reader: passing the same options to both sides is common.
_READER_ONLY = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "maxBytesPerTrigger",
    "kafka.group.id",
    "kafka.isolation.level",
    "kafka.fetch.max.bytes",
    "kafka.max.partition.fetch.bytes",
    "kafka.fetch.max.wait.ms",
    "kafka.fetch.min.bytes",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "commitOffsetsToGroup",
    "checkpointLocation",
    "path",
    *writer_refuses(),
)
#: The reader's own options among them, which the writer refuses by name rather than pass
#: over in silence (an option that does nothing to a write is a mistake worth saying); the
#: consumer's kafka.* settings and Spark's checkpointLocation and path pass.
_REFUSED_READER_OPTIONS = tuple(
    name
    for name in _READER_ONLY
    if not name.startswith("kafka.") and name not in ("checkpointLocation", "path")
)


def _refuse_reader_options(opts: OptionMap) -> None:
    """Raise ``ConfigError`` naming every reader option given to the writer."""
    given = [opts.spelled.get(n.lower(), n) for n in _REFUSED_READER_OPTIONS if opts.has(n)]
    if len(given) == 1:
        raise ConfigError(f"option '{given[0]}' is a reader option; the writer does not use it")
    if given:
        names = ", ".join(f"'{name}'" for name in given)
        raise ConfigError(f"options {names} are reader options; the writer does not use them")


def _warn_once(key: str, message: str, *args: Any) -> None:
    warn_once(log, key, message, *args)


@dataclass(frozen=True, slots=True)
class WriterOptions:
    """The writer's options, checked. Picklable: the driver ships it to the executors."""

    client_config: ClientConfig
    topic: str | None = None
    include_headers: bool = False
    acks: int = ACKS_ALL
    enable_idempotence: bool = True
    compression_type: str = "none"
    batch_size: int = 1_048_576
    linger_ms: int = 5
    max_request_size: int = 1_048_576
    max_in_flight: int = 5
    delivery_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000
    retries: int = INT32_MAX
    retry_backoff_ms: int = 100
    max_block_ms: int = 60_000
    buffer_memory: int = 33_554_432
    check_before_send_bytes: int = 4_194_304
    partitioner: str = "default"
    exactly_once: bool = False
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = 60_000
    ignored_kafka_options: tuple[str, ...] = ()
    formats: tuple = ()  # valueFormat/keyFormat (kafka_common.value_formats.SinkFormat)
    dead_letter_topic: str | None = None  # deadLetterTopic (kafka_sink.dead_letters)

    @property
    def bootstrap_servers(self) -> list[str]:
        return list(self.client_config.bootstrap_servers)

    @property
    def batch_limit(self) -> int:
        """The most record bytes (with the 61-byte header) in one batch."""
        return max(1, min(self.batch_size, self.max_request_size))


def _acks(opts: OptionMap) -> int:
    text = opts.get("kafka.acks")
    if text is None:
        return ACKS_ALL
    value = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(text.lower())
    if value is None:
        raise ConfigError(
            f"kafka.acks: Invalid value {text} for configuration acks: String "
            f"must be one of: all, -1, 0, 1"
        )
    return value


def _compression(opts: OptionMap) -> str:
    text = opts.get("kafka.compression.type")
    if text is None:
        return "none"
    if text.lower() not in COMPRESSION_TYPES:
        raise ConfigError(
            f"kafka.compression.type: Invalid value {text} for configuration "
            f"compression.type: String must be one of: "
            f"{', '.join(COMPRESSION_TYPES)}"
        )
    return text.lower()


#: Java partitioner class names (with or without their package) -> our rule.
PARTITIONERS = {
    "org.apache.kafka.clients.producer.internals.defaultpartitioner": "default",
    "org.apache.kafka.clients.producer.internals.builtinpartitioner": "default",
    "org.apache.kafka.clients.producer.uniformstickypartitioner": "uniform_sticky",
    "org.apache.kafka.clients.producer.roundrobinpartitioner": "round_robin",
}


def _partitioner(opts: OptionMap) -> str:
    text = opts.get("kafka.partitioner.class")
    if text is None or not text.strip():
        return "default"
    name = text.strip().lower()
    for full, rule in PARTITIONERS.items():
        if name == full or name == full.rsplit(".", 1)[1]:
            return rule
    raise ConfigError(
        f"kafka.partitioner.class: {text} is not supported: pyspark-pykafka runs no Java "
        f"classes. It understands DefaultPartitioner, BuiltInPartitioner, "
        f"UniformStickyPartitioner and RoundRobinPartitioner; for any other rule compute "
        f"the partition in Spark and write it in the 'partition' column (an int column; "
        f"rows where it is null follow the default rule)."
    )


def _prefix_ok(prefix: str) -> str:
    if not prefix or len(prefix) > 200:
        raise ConfigError(
            f"transactionalIdPrefix: {prefix!r} must be 1 to 200 characters "
            f"(the transactional ids append -partition-attempt to it, after "
            f"a job token in batch writes)"
        )
    return prefix


def parse_writer_options(options: Mapping[str, Any]) -> WriterOptions:
    """Check and parse the writer's options (see the module docstring and
    ``WRITER_OPTIONS``). Raises ``ConfigError`` naming the option at the first problem;
    never quotes a password."""
    opts = OptionMap(options, _CANONICAL)
    check_spelling(opts, _CANONICAL, _REJECTED, side="writer", quiet=_READER_ONLY)
    ignored = check_names(
        opts, _CANONICAL, _REJECTED, log=log, side="writer", quiet=_READER_ONLY, warn_unknown=False
    )
    _refuse_reader_options(opts)
    connection = client_config(opts, role="producer", log=log)
    backoff = connection.retry_backoff_ms

    topic = opts.get("topic")
    if topic is not None and not topic:
        raise ConfigError(
            "topic: the topic option is empty; give a topic name or leave the "
            "option out and use a 'topic' column"
        )

    idempotence = opts.boolean("kafka.enable.idempotence", True)
    acks = _acks(opts)
    if idempotence and acks != ACKS_ALL:
        raise ConfigError(
            f"kafka.acks: Must set acks to all in order to use the idempotent producer. "
            f"Otherwise we cannot guarantee idempotence. (kafka.acks={opts.get('kafka.acks')}"
            f" needs kafka.enable.idempotence=false.)"
        )
    max_in_flight = opts.integer(
        "kafka.max.in.flight.requests.per.connection", 5, maximum=INT32_MAX
    )
    if idempotence and max_in_flight > MAX_IN_FLIGHT_IDEMPOTENT:
        raise ConfigError(
            "kafka.max.in.flight.requests.per.connection: Must set "
            "max.in.flight.requests.per.connection to at most 5 to use the idempotent "
            f"producer (got {max_in_flight})."
        )
    retries = opts.integer("kafka.retries", INT32_MAX, minimum=0, maximum=INT32_MAX)
    if idempotence and retries == 0:
        raise ConfigError(
            "kafka.retries: Must set retries to non-zero when using the idempotent producer."
        )

    request_timeout = connection.request_timeout_ms
    linger = opts.integer("kafka.linger.ms", 5, minimum=0, maximum=INT32_MAX)
    delivery_timeout = opts.integer("kafka.delivery.timeout.ms", 120_000, maximum=INT32_MAX)
    if delivery_timeout < linger + request_timeout:
        raise ConfigError(
            f"kafka.delivery.timeout.ms: delivery.timeout.ms should be equal to or larger "
            f"than linger.ms + request.timeout.ms ({delivery_timeout} < {linger} + "
            f"{request_timeout})"
        )
    batch_size = opts.integer("kafka.batch.size", 1_048_576, minimum=0, maximum=INT32_MAX)
    max_request_size = opts.integer("kafka.max.request.size", 1_048_576, maximum=INT32_MAX)
    buffer_memory = opts.integer("kafka.buffer.memory", 33_554_432, maximum=2**62)
    check_before_send = opts.integer("checkBeforeSendBytes", 4_194_304, minimum=0, maximum=2**62)
    exactly_once = opts.boolean("exactlyOnce", False)
    prefix = opts.get("transactionalIdPrefix")
    if prefix is not None:
        prefix = _prefix_ok(prefix)
    txn_timeout = opts.integer("kafka.transaction.timeout.ms", 60_000, minimum=1, maximum=INT32_MAX)
    if exactly_once and not idempotence:
        raise ConfigError(
            "exactlyOnce: transactions need the idempotent producer; remove "
            "kafka.enable.idempotence=false (and kafka.acks, which must be "
            "all)."
        )

    return WriterOptions(
        client_config=connection,
        topic=topic,
        include_headers=opts.boolean("includeHeaders", False),
        acks=acks,
        enable_idempotence=idempotence,
        compression_type=_compression(opts),
        batch_size=batch_size,
        linger_ms=linger,
        max_request_size=max_request_size,
        max_in_flight=max_in_flight,
        delivery_timeout_ms=delivery_timeout,
        request_timeout_ms=request_timeout,
        retries=retries,
        retry_backoff_ms=backoff,
        max_block_ms=opts.integer("kafka.max.block.ms", 60_000, minimum=0, maximum=INT32_MAX),
        buffer_memory=buffer_memory,
        check_before_send_bytes=min(check_before_send, buffer_memory),
        partitioner=_partitioner(opts),
        exactly_once=exactly_once,
        transactional_id_prefix=prefix,
        transaction_timeout_ms=txn_timeout,
        ignored_kafka_options=ignored,
        formats=parse_writer_formats(opts, topic),
        dead_letter_topic=_dead_letter_topic(opts, topic),
    )


def _dead_letter_topic(opts: OptionMap, topic: str | None) -> str | None:
    name = opts.get("deadLetterTopic")
    if name is not None and (not name.strip() or name == topic):
        raise ConfigError(
            f"deadLetterTopic must name a topic other than the one written to, got {name!r}"
        )
    return name
