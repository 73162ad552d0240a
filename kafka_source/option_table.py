"""The reader's option table: every option ``spark.read``/``spark.readStream`` accept,
with its default, the queries it applies to and its meaning, in the order the
documentation lists them (``options_table_markdown()`` renders docs/options.md's table;
``reader_option_names()`` lists the names alone). Data only: the checks are in
``kafka_source.options``.
"""

from __future__ import annotations

from typing import NamedTuple

from kafka_common.connection_options import (
    CONNECTIONS_MAX_IDLE_OPTION,
    RETRY_BACKOFF_OPTIONS,
    SECURITY_OPTIONS,
)
from kafka_common.value_formats import reader_format_options

__all__ = ["ReaderOption", "READER_OPTIONS", "reader_option_names", "options_table_markdown"]


class ReaderOption(NamedTuple):
    """One documented reader option."""

    name: str
    default: str
    queries: str  # "batch and streaming", "batch", "streaming"
    meaning: str


_BOTH, _BATCH, _STREAM = "batch and streaming", "batch", "streaming"

#: Every option the reader accepts, in the order the documentation lists them.
READER_OPTIONS: tuple[ReaderOption, ...] = (
    ReaderOption(
        "kafka.bootstrap.servers",
        "(required)",
        _BOTH,
        "Comma-separated host:port list of brokers to bootstrap from.",
    ),
    ReaderOption(
        "subscribe",
        "(one of three)",
        _BOTH,
        "Comma-separated list of topics to read (internal topics such as "
        "__consumer_offsets are skipped, as in Spark).",
    ),
    ReaderOption(
        "subscribePattern",
        "(one of three)",
        _BOTH,
        "Python regular expression; every non-internal topic it matches "
        "(anywhere in the name) is read.",
    ),
    ReaderOption(
        "assign",
        "(one of three)",
        _BOTH,
        'JSON of the partitions to read, e.g. {"topicA":[0,1],"topicB":[2,4]}. A '
        "partition that does not exist (yet) is skipped; a stream reads it from "
        "its earliest offset once it does.",
    ),
    ReaderOption(
        "startingTimestamp",
        "none",
        _BOTH,
        "Start every partition at the first offset whose timestamp (ms) is at or "
        "after this one (-1: latest, -2: earliest). Takes precedence over "
        "startingOffsetsByTimestamp and startingOffsets.",
    ),
    ReaderOption(
        "startingOffsetsByTimestamp",
        "none",
        _BOTH,
        "JSON of a start timestamp (ms) per partition, e.g. "
        '{"topicA":{"0":1700000000000}}; -1 is latest, -2 earliest. Takes '
        "precedence over startingOffsets.",
    ),
    ReaderOption(
        "startingOffsets",
        '"earliest" (batch), "latest" (streaming)',
        _BOTH,
        '"earliest", "latest" (streaming only) or JSON of an offset per partition, '
        'e.g. {"topicA":{"0":23,"1":-2}}; -2 is earliest, -1 latest (streaming '
        "only).",
    ),
    ReaderOption(
        "startingOffsetsByTimestampStrategy",
        '"error"',
        _BOTH,
        'What a start timestamp with no offset at or after it does: "error" fails, '
        '"latest" starts that partition at its latest offset.',
    ),
    ReaderOption(
        "endingTimestamp",
        "none",
        _BATCH,
        "End every partition at the first offset whose timestamp (ms) is at or "
        "after this one (the latest offset when there is none). Takes precedence "
        "over endingOffsetsByTimestamp and endingOffsets. Ignored by streams, as "
        "in Spark.",
    ),
    ReaderOption(
        "endingOffsetsByTimestamp",
        "none",
        _BATCH,
        "JSON of an end timestamp (ms) per partition. Takes precedence over endingOffsets.",
    ),
    ReaderOption(
        "endingOffsets",
        '"latest"',
        _BATCH,
        '"latest" or JSON of an (exclusive) end offset per partition; -1 is latest, '
        "-2 is not allowed.",
    ),
    ReaderOption(
        "failOnDataLoss",
        "true",
        _BOTH,
        "Fail when data may have been lost (deleted topics, offsets out of range) "
        "instead of logging a warning and going on.",
    ),
    ReaderOption(
        "minPartitions",
        "none",
        _BOTH,
        "Desired minimum number of Spark partitions; large Kafka partitions are "
        "split to reach about this many.",
    ),
    ReaderOption(
        "maxRecordsPerPartition",
        "none",
        _BOTH,
        "Split any Kafka partition's range so that no Spark partition reads more "
        "than this many offsets.",
    ),
    ReaderOption("includeHeaders", "false", _BOTH, "Add the record headers as a column."),
    ReaderOption(
        "kafkaConsumer.pollTimeoutMs",
        "120000",
        _BOTH,
        "How long (ms) a task waits for records from a broker before failing. "
        "Does not follow spark.network.timeout, which a Python source cannot "
        "read: set it here.",
    ),
    ReaderOption(
        "fetchOffset.numRetries",
        "3",
        _BOTH,
        "Attempts at fetching offsets on the driver before giving up.",
    ),
    ReaderOption(
        "fetchOffset.retryIntervalMs",
        "1000",
        _BOTH,
        "Milliseconds to wait between two attempts at fetching offsets.",
    ),
    ReaderOption(
        "maxOffsetsPerTrigger",
        "none",
        _STREAM,
        "Upper bound on the offsets read per micro-batch, split across partitions "
        "in proportion to their backlog. PySpark 4.2 or later (refused on 4.1).",
    ),
    ReaderOption(
        "minOffsetsPerTrigger",
        "none",
        _STREAM,
        "Delay a micro-batch until this many offsets are available (or "
        "maxTriggerDelay has passed). PySpark 4.2 or later (refused on 4.1).",
    ),
    ReaderOption(
        "maxTriggerDelay",
        '"15m"',
        _STREAM,
        "Longest a micro-batch is delayed by minOffsetsPerTrigger, as a duration "
        "(e.g. 30s, 15m, 1h).",
    ),
    ReaderOption(
        "maxBytesPerTrigger",
        "none",
        _STREAM,
        "Soft upper bound on the bytes read per micro-batch (e.g. 512m, 2g). "
        "PySpark 4.2 or later (refused on 4.1).",
    ),
    ReaderOption(
        "commitOffsetsToGroup",
        "none",
        _STREAM,
        "A consumer group name: the end offsets of each finished micro-batch are "
        "committed to it (without joining it), so Kafka's tools show the query's "
        "lag. They are never read back: the checkpoint stays the source of truth.",
    ),
    ReaderOption(
        "exactlyOnce",
        "false",
        _BOTH,
        "With deadLetterTopic: write the dead-letter copies in Kafka transactions, "
        "exactly once (read_committed consumers of the dead-letter topic see each "
        "once, also when a task or a micro-batch runs again). Needs "
        "transactionalIdPrefix; a Kafka partition may not be split between tasks "
        "(minPartitions, maxRecordsPerPartition).",
    ),
    ReaderOption(
        "transactionalIdPrefix",
        "none",
        _BOTH,
        "With exactlyOnce: prefix of the dead-letter transactional ids "
        "(prefix-dlt-topic-partition; a batch read puts a token of the read after the "
        "prefix) and of the group prefix-dlt that records the committed copies. "
        "Unique per query.",
    ),
    ReaderOption(
        "kafka.transaction.timeout.ms",
        "60000",
        _BOTH,
        "With exactlyOnce: how long the broker keeps a dead-letter transaction open "
        "(from a range's first copy to its end) before aborting it.",
    ),
    ReaderOption(
        "kafka.isolation.level",
        '"read_uncommitted"',
        _BOTH,
        '"read_committed" reads only committed transactional records.',
    ),
    ReaderOption(
        "kafka.group.id",
        "none",
        _BOTH,
        "Accepted and ignored (with a warning): reading never joins a group; use "
        "commitOffsetsToGroup to publish progress.",
    ),
    ReaderOption(
        "kafka.client.id",
        '"pyspark-pykafka"',
        _BOTH,
        "Client id sent to the brokers (visible in their logs and quotas).",
    ),
    ReaderOption(
        "kafka.request.timeout.ms", "30000", _BOTH, "Timeout (ms) of one request to a broker."
    ),
    ReaderOption(
        CONNECTIONS_MAX_IDLE_OPTION[0],
        CONNECTIONS_MAX_IDLE_OPTION[1],
        _BOTH,
        CONNECTIONS_MAX_IDLE_OPTION[2],
    ),
    *(
        ReaderOption(name, default, _BOTH, meaning)
        for name, default, meaning in RETRY_BACKOFF_OPTIONS
    ),
    ReaderOption(
        "kafka.fetch.max.bytes",
        "52428800",
        _BOTH,
        "Maximum bytes a broker returns for one fetch request.",
    ),
    ReaderOption(
        "kafka.max.partition.fetch.bytes",
        "1048576",
        _BOTH,
        "Maximum bytes a broker returns per partition in one fetch.",
    ),
    ReaderOption(
        "kafka.fetch.max.wait.ms",
        "500",
        _BOTH,
        "Longest (ms) a broker waits for kafka.fetch.min.bytes before answering.",
    ),
    ReaderOption(
        "kafka.fetch.min.bytes",
        "1",
        _BOTH,
        "Bytes a broker waits to accumulate before answering a fetch.",
    ),
    ReaderOption(
        "kafka.client.rack",
        "none",
        _BOTH,
        "The rack (or availability zone) the Spark executors run in, as the brokers' "
        "broker.rack names it: sent with every fetch, so that a cluster with a rack-aware "
        "replica.selector.class serves each partition from a replica in that rack, not "
        "from its leader (KIP-392); back to the leader when that replica cannot serve.",
    ),
    ReaderOption(
        "kafka.check.crcs",
        "true",
        _BOTH,
        "Verify the CRC-32C of every record batch read (Kafka's check.crcs).",
    ),
    *(ReaderOption(name, default, _BOTH, meaning) for name, default, meaning in SECURITY_OPTIONS),
    *(
        ReaderOption(name, default, _BOTH, meaning)
        for name, default, meaning in reader_format_options()
    ),
)


def reader_option_names() -> tuple[str, ...]:
    """The name of every option the reader accepts, in documentation order."""
    return tuple(option.name for option in READER_OPTIONS)


def options_table_markdown() -> str:
    """``READER_OPTIONS`` as a Markdown table (option, default, queries, meaning)."""
    rows = ["| Option | Default | Queries | Meaning |", "| --- | --- | --- | --- |"]
    for o in READER_OPTIONS:
        rows.append(
            f"| `{o.name}` | {o.default} | {o.queries} | {o.meaning.replace('|', '&#124;')} |"
        )
    return "\n".join(rows)
