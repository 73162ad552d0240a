"""Spark's side of the sink: ``df.write`` and ``writeStream`` through Arrow writers.

``create_writer`` / ``create_stream_writer`` (called by ``KafkaDataSource.writer`` and
``streamWriter`` on the driver) check the save mode, the options and the DataFrame's
schema before any task starts, and that the ``topic`` option's topic and the
``deadLetterTopic`` exist. Each task then runs ``write_task`` (``kafka_sink.task``):

1. ``columns.prepare`` reads the batch; ``validation.check_rows`` checks it (null topics,
   unknown topics, partitions out of range, records too large...). Nothing of a batch is
   handed to the producer before its check passed, and nothing is sent before
   ``checkBeforeSendBytes`` bytes are encoded or the input ends: a task whose input fits
   is checked in full before its first record leaves.
2. Every row gets its partition (``partitioner``: the partition column, else the murmur2
   hash of the key, else sticky runs), rows are grouped by (topic, partition) with a
   stable sort of their indices (so each partition keeps the rows in their input order),
   and the groups go to the ``PartitionBatcher`` as row indices, from which it encodes
   full batches for the ``TaskProducer``.
3. At the end the batcher and the producer are flushed; the task succeeds only when every
   record is acknowledged, and returns a ``KafkaCommitMessage`` with the records and
   bytes written per topic and partition, which the driver logs in ``commit``.

With ``exactlyOnce`` the task writes inside a Kafka transaction that it leaves open, and
the driver's ``commit`` ends it (``kafka_sink.transactions`` has the design); a task that
fails aborts its own transaction, best effort.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING
from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

from kafka_common.bounded_cache import BoundedCache
from kafka_common.dead_letter import check_dead_letter_topic
from kafka_common.import_path import CarriesImportPath
from kafka_common.retries import ATTEMPTS, missing_topics_message, with_retries
from kafka_common.user_errors import user_errors
from kafka_common.worker_heap import settle_worker_heap
from protocol.client import pool
from protocol.authorization import RESOURCE_TYPES, refine, request_error
from protocol.errors import BrokerError, ConfigError, PyKafkaError

from .commit_message import KafkaCommitMessage, totals
from .options import WriterOptions, parse_writer_options
from .txn_errors import WRITE_GRANT
from .transactions import abort_transactions, commit_transactions, job_prefix, resolve_prefix
from .validation import WritePlan, check_save_mode, check_schema

if TYPE_CHECKING:
    import pyarrow as pa

    from protocol.client.cluster import KafkaClient

__all__ = [
    "KafkaArrowWriter",
    "KafkaStreamArrowWriter",
    "KafkaCommitMessage",
    "create_writer",
    "create_stream_writer",
]

log = logging.getLogger("pykafka.sink")

#: What a task runs lives in ``kafka_sink.task``, imported by the task alone: the driver's
#: planner and commit processes, which unpickle the writer, never load the encoder, the
#: producer or numpy (tens of milliseconds each on a session's first write).
_TASK_NAMES = ("write_task", "route_rows", "_hand_over", "_send_rows", "_write_task")


def __getattr__(name: str):
    if name in _TASK_NAMES:
        from . import task

        return getattr(task, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- Spark's writers ------------------------------------------------------------------------


def _log_totals(what: str, messages) -> None:
    per_topic = totals(messages)
    if not per_topic:
        log.info("%s: no records written", what)
    for topic, (records, size) in per_topic.items():
        log.info("%s: %d records (%d bytes) written to topic %s", what, records, size, topic)


def _end_transactions(options: WriterOptions, prefix: str, messages, batch_id, commit: bool):
    with pool.borrow(options.client_config) as lease:
        client = lease.client
        if commit:
            return commit_transactions(client, options, prefix, messages, batch_id)
        return abort_transactions(client, options, prefix, messages)


class _TaskWriting:
    """What the batch and the streaming writer share: their state and the task's write.
    ``FRESH_IDS``: exactlyOnce ids of a batch job carry a token of the job (see
    ``transactions``); a stream's stay the same across restarts."""

    FRESH_IDS = False

    def __init__(self, options: WriterOptions, plan: WritePlan, prefix: str | None = None):
        self.options = options
        self.plan = plan
        self.prefix = prefix

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        settle_worker_heap()
        from .task import write_task

        return write_task(
            iterator,
            self.options,
            self.plan,
            prefix=self.prefix,
            fresh_ids=self.FRESH_IDS and self.prefix is not None,
        )


@user_errors
class KafkaArrowWriter(_TaskWriting, DataSourceArrowWriter):
    """``df.write.format("pykafka")``: one ``write_task`` per Spark partition."""

    FRESH_IDS = True

    def commit(self, messages) -> None:
        if self.prefix is not None:
            _end_transactions(self.options, self.prefix, messages, None, True)
        _log_totals("Kafka write committed", messages)

    def abort(self, messages) -> None:
        done = [m for m in messages if m is not None]
        if self.prefix is not None:
            aborted = _end_transactions(self.options, self.prefix, messages, None, False)
            log.warning(
                "Kafka write aborted: %d of %d tasks had finished; their %d "
                "transactions were aborted, nothing is visible to read_committed "
                "readers",
                len(done),
                len(messages),
                aborted,
            )
            return
        log.warning(
            "Kafka write aborted: %d of %d tasks had finished; records they wrote stay in Kafka",
            len(done),
            len(messages),
        )
        _log_totals("Kafka write aborted", done)


@user_errors
class KafkaStreamArrowWriter(CarriesImportPath, _TaskWriting, DataSourceStreamArrowWriter):
    """``writeStream.format("pykafka")``: the same task per partition of each micro-batch."""

    def commit(self, messages, batchId: int) -> None:
        if messages and all(m is None for m in messages):
            # Every task of ours answers with a message; Spark's continuous execution
            # runs none of them and commits each epoch with a None per partition.
            raise ConfigError(
                f"Data source pykafka does not support continuous processing: under "
                f"trigger(continuous=...) Spark runs none of the sink's tasks, so epoch "
                f"{batchId} wrote nothing to Kafka and is not committed. Use a "
                f"processing-time or availableNow trigger."
            )
        if self.prefix is not None:
            counts = _end_transactions(self.options, self.prefix, messages, batchId, True)
            log.info("Kafka micro-batch %d: %s", batchId, counts)
        _log_totals(f"Kafka micro-batch {batchId} committed", messages)

    def abort(self, messages, batchId: int) -> None:
        done = [m for m in messages if m is not None]
        if self.prefix is not None:
            _end_transactions(self.options, self.prefix, messages, batchId, False)
            log.warning(
                "Kafka micro-batch %d aborted: %d of %d tasks had finished; their "
                "transactions were aborted",
                batchId,
                len(done),
                len(messages),
            )
            return
        log.warning(
            "Kafka micro-batch %d aborted: %d of %d tasks had finished; records "
            "they wrote stay in Kafka",
            batchId,
            len(done),
            len(messages),
        )


#: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
_TRANSACTION_APIS = (24, 25, 26, 28)


def _check_transactions(client: KafkaClient) -> None:
    meta = client.metadata()
    for node in sorted(meta.brokers)[:1]:
        versions = client.connection(node).api_versions
        missing = [k for k in _TRANSACTION_APIS if k not in versions]
        if missing:
            raise ConfigError(
                f"exactlyOnce: broker {node} does not support transactions "
                f"(no API keys {missing}); set exactlyOnce=false"
            )


#: Checks that passed in this process: key -> monotonic time. Spark's Python runner makes
#: the streaming writer again at every micro-batch's commit (in a reused worker): without
#: this, every micro-batch opened a connection and asked for metadata just to check again.
_CHECKED: BoundedCache[tuple, float] = BoundedCache(256)


def _check_key(options: WriterOptions) -> tuple:
    # the pool's identity of the connection settings: a repr would show every secret as
    # '******', so two passwords would share one passed check
    return (
        pool.pool_key(options.client_config),
        options.topic,
        options.exactly_once,
        options.dead_letter_topic,
    )


class _TopicNotInMetadata(PyKafkaError):
    """The topic is not (yet) in the cluster's metadata: asked again like a broken lookup
    (a topic created a moment ago may take one more round to show)."""


#: Metadata error codes of a topic that does not exist, or not yet everywhere.
_TOPIC_NOT_THERE = (3, 5)  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE


def _check_topic_exists(options: WriterOptions) -> None:
    """The brokers answer, the topic exists, and with exactlyOnce the brokers have
    transactions: once per ``kafka.metadata.max.age.ms`` per process and configuration.

    Looked up as the reader looks up its topics (``kafka_common.retries.with_retries``:
    3 attempts 1 s apart, as Spark's ``fetchOffset.*`` defaults), so a wrong bootstrap
    address or a missing topic fails a write in seconds with the reader's words, where
    Java's producer waits ``max.block.ms`` (60 s) for the topic to appear;
    ``kafka.max.block.ms`` stays the upper bound. A connection broken during the check is
    retried with a fresh one within the same attempts. A check that passed before in this
    process (a stream's writer, made again at every micro-batch, once the last check is
    older than ``kafka.metadata.max.age.ms``) met no mistake but maybe an outage: it is
    retried up to ``kafka.max.block.ms``, as before, so a broker restart does not fail a
    running stream. An authorization failure is never retried (a grant does not come
    back by waiting): it names the grant at once."""
    key = _check_key(options)
    checked = _CHECKED.get(key)
    max_age = options.client_config.metadata_max_age_ms / 1000
    if checked is not None and time.monotonic() - checked < max_age:
        return
    started = time.monotonic()
    what = (
        f"checking topic {options.topic!r}" if options.topic is not None else "reaching the brokers"
    )
    try:
        with_retries(
            what,
            lambda: _check_topic(options),
            log=log,
            attempts=ATTEMPTS if checked is None else None,  # then until kafka.max.block.ms
            deadline=started + options.max_block_ms / 1000,
            config=options.client_config,
        )
    except _TopicNotInMetadata:  # raised only when the topic option is set
        waited_ms = round((time.monotonic() - started) * 1000)
        named = [options.topic] if options.topic is not None else []
        raise ConfigError(
            f"{missing_topics_message('topic', named)} (Topic {options.topic} not "
            f"present in metadata after {waited_ms} ms; topics are not created by the "
            f"writer: create it first)"
        ) from None
    _CHECKED.put(key, time.monotonic())


def _check_topic(options: WriterOptions) -> None:
    # the pool's client alone: the producer (and the record batches it imports) is the task's
    lease = pool.checkout(options.client_config)
    try:
        if options.exactly_once:
            _check_transactions(lease.client)
        topics = [] if options.topic is None else [options.topic]
        meta = lease.client.refresh_metadata(topics)
        if options.topic is not None:
            _check_target(meta, options.topic)
        if options.dead_letter_topic:
            check_dead_letter_topic(lease.client, options.dead_letter_topic, log=log)
    finally:
        lease.give_back()


def _check_target(meta, topic: str) -> None:
    info = meta.topics.get(topic)
    if info is not None and info.error_code in RESOURCE_TYPES:
        # Kafka answers a topic the principal may not describe (existing or not) so,
        # with no partitions: not a missing topic to wait for
        raise refine(request_error(info.error_code, "Metadata", topic=topic), grant=WRITE_GRANT)
    if info is None or info.error_code in _TOPIC_NOT_THERE or not info.partitions:
        raise _TopicNotInMetadata(f"topic {topic!r} is not in the metadata")
    if info.error_code:
        raise BrokerError.for_code(info.error_code, topic=topic)


def _prepare(options, schema, streaming: bool) -> tuple[WriterOptions, WritePlan, str | None]:
    parsed = parse_writer_options(options)
    plan = check_schema(schema, parsed.topic, {f.column for f in parsed.formats})
    if parsed.formats:
        from kafka_common.value_formats import resolve_sink_formats

        parsed = dataclasses.replace(parsed, formats=resolve_sink_formats(parsed.formats, schema))
    prefix = resolve_prefix(parsed, options, streaming) if parsed.exactly_once else None
    _check_topic_exists(parsed)
    return parsed, plan, prefix


def create_writer(options, schema, overwrite: bool) -> KafkaArrowWriter:
    """The batch writer, after every check that needs no data. With exactlyOnce its
    transactional ids carry a token of this job (``transactions.job_prefix``)."""
    check_save_mode(overwrite)
    parsed, plan, prefix = _prepare(options, schema, False)
    return KafkaArrowWriter(parsed, plan, None if prefix is None else job_prefix(prefix))


def create_stream_writer(options, schema, overwrite: bool) -> KafkaStreamArrowWriter:
    """The streaming writer; ``overwrite`` (complete output mode) appends as Spark does."""
    return KafkaStreamArrowWriter(*_prepare(options, schema, True))
