"""The writer's options: parsed, checked and frozen on the driver, before any task starts.

``parse_writer_options(options)`` takes the options as Spark hands them to a Python data
source (a case-insensitive mapping of strings) and returns a frozen, picklable
``WriterOptions``, or raises ``ConfigError`` naming the option. Names and defaults are
those of Spark's Kafka sink and of Kafka's Java producer (without the ``kafka.`` prefix
there); where Spark or Kafka has an error message for a misuse, ours says the same thing.
The connection options are parsed by ``kafka_common.connection_options``, as the
reader's are, so a reader and a writer given the same options connect the same way.

Where we differ from the Java producer (docs/differences.md says why):
``kafka.batch.size`` defaults to 1 MiB; ``kafka.linger.ms`` never delays rows at hand, it
bounds only how long a partly filled batch waits for the task's next input; ``kafka.acks``
0 or 1 needs ``kafka.enable.idempotence=false`` said explicitly; topics are never created;
nothing is sent before ``checkBeforeSendBytes`` of the task's rows are encoded and checked.

The option table is ``kafka_sink.option_table``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

from kafka_common.connection_options import client_config
from kafka_common.option_map import INT32_MAX, OptionMap, check_names, check_spelling
from kafka_common.value_formats import parse_writer_formats, writer_refuses
from protocol.config import ClientConfig
from protocol.errors import ConfigError

from .option_table import writer_option_names

__all__ = [
    "WriterOptions",
    "parse_writer_options",
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

    idempotence, acks, max_in_flight, retries = _idempotence(opts)
    request_timeout = connection.request_timeout_ms
    linger, delivery_timeout = _delivery(opts, request_timeout)
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


def _idempotence(opts: OptionMap) -> tuple[bool, int, int, int]:
    """``(enable.idempotence, acks, max.in.flight.requests.per.connection, retries)``,
    checked together as Kafka's producer checks them."""
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
    return idempotence, acks, max_in_flight, retries


def _delivery(opts: OptionMap, request_timeout: int) -> tuple[int, int]:
    """``(linger.ms, delivery.timeout.ms)``, the second at least the first plus
    ``request.timeout.ms`` as Kafka's producer requires."""
    linger = opts.integer("kafka.linger.ms", 5, minimum=0, maximum=INT32_MAX)
    delivery_timeout = opts.integer("kafka.delivery.timeout.ms", 120_000, maximum=INT32_MAX)
    if delivery_timeout < linger + request_timeout:
        raise ConfigError(
            f"kafka.delivery.timeout.ms: delivery.timeout.ms should be equal to or larger "
            f"than linger.ms + request.timeout.ms ({delivery_timeout} < {linger} + "
            f"{request_timeout})"
        )
    return linger, delivery_timeout


def _dead_letter_topic(opts: OptionMap, topic: str | None) -> str | None:
    name = opts.get("deadLetterTopic")
    if name is not None and (not name.strip() or name == topic):
        raise ConfigError(
            f"deadLetterTopic must name a topic other than the one written to, got {name!r}"
        )
    return name
