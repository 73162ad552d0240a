"""The writer's option table: every option ``df.write``/``df.writeStream`` accept, with
its default and meaning, in the order the documentation lists them
(``options_table_markdown()`` renders docs/options.md's table; ``writer_option_names()``
lists the names alone). Data only: the checks are in ``kafka_sink.options``.
"""

from __future__ import annotations

from typing import NamedTuple

from kafka_common.connection_options import (
    CONNECTIONS_MAX_IDLE_OPTION,
    RETRY_BACKOFF_OPTIONS,
    SECURITY_OPTIONS,
)
from kafka_common.value_formats import writer_format_options

__all__ = ["WriterOption", "WRITER_OPTIONS", "writer_option_names", "options_table_markdown"]


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
