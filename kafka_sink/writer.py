"""Spark's side of the sink: ``df.write`` and ``writeStream`` through Arrow writers.

``create_writer`` / ``create_stream_writer`` (called by ``KafkaDataSource.writer`` and
``streamWriter`` on the driver) check the save mode, the options and the DataFrame's
schema before any task starts, and the topic of the ``topic`` option exists. Each task
then runs ``write_task`` over its Arrow batches:

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
import sys
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)

from kafka_common.bounded_cache import BoundedCache
from kafka_common.import_path import CarriesImportPath
from kafka_common.retries import ATTEMPTS, missing_topics_message, with_retries
from kafka_common.worker_heap import settle_worker_heap
from protocol import pool
from protocol.authorization import RESOURCE_TYPES, refine, request_error
from protocol.errors import BrokerError, ConfigError, PyKafkaError
from protocol.records import accel

from .batching import PartitionBatcher, Slice
from .columns import Rows, prepare
from .options import WriterOptions, parse_writer_options
from .partitioner import RoundRobinPartitioner, StickyPartitioner, murmur2, to_positive
from .kill_points import maybe_fail, maybe_kill
from .producer import IDENTITY_STATE_KEY, TaskProducer
from .txn_errors import WRITE_GRANT
from .transactions import (TaskTransaction, abort_transactions, commit_transactions,
                           committed_batch, job_prefix, marker_partition, refuse_used_id,
                           resolve_prefix, task_identity, transactional_id)
from .validation import WritePlan, check_rows, check_save_mode, check_schema
from .value_encoding import encode_formats

__all__ = ["KafkaArrowWriter", "KafkaStreamArrowWriter", "KafkaCommitMessage",
           "create_writer", "create_stream_writer", "write_task", "route_rows"]

log = logging.getLogger("pykafka.sink")


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: ``{(topic, partition): (records, bytes)}`` (bytes of record
    batches as sent, after compression) and the producer ids it used."""

    partitions: dict = field(default_factory=dict)
    producer_ids: tuple = ()
    transaction: TaskTransaction | None = None

    @property
    def records(self) -> int:
        return sum(r for r, _ in self.partitions.values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.partitions.values())

    def per_topic(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for (topic, _), (records, size) in self.partitions.items():
            entry = out.setdefault(topic, [0, 0])
            entry[0] += records
            entry[1] += size
        return {t: (r, b) for t, (r, b) in out.items()}


def totals(messages: Iterable) -> dict[str, tuple[int, int]]:
    """Records and bytes per topic over the commit messages of a job (None skipped)."""
    out: dict[str, list[int]] = {}
    for message in messages:
        if isinstance(message, KafkaCommitMessage):
            for topic, (records, size) in message.per_topic().items():
                entry = out.setdefault(topic, [0, 0])
                entry[0] += records
                entry[1] += size
    return {t: (r, b) for t, (r, b) in sorted(out.items())}


# ---- one task -------------------------------------------------------------------------------

def route_rows(rows: Rows, counts: dict[str, int], sticky, *,
               use_keys: bool = True) -> np.ndarray:
    """The partition of every row (the rows passed ``check_rows``): the partition column,
    else (``use_keys``) murmur2 of the key, else ``sticky.assign`` (a
    ``StickyPartitioner`` or a ``RoundRobinPartitioner``)."""
    n = rows.n
    partition = np.zeros(n, dtype=np.int32)
    decided = np.zeros(n, dtype=bool)
    if rows.partition is not None:
        decided = rows.partition_valid.copy()
        partition[decided] = rows.partition[decided]
    hashes = key_valid = None
    if use_keys and rows.key is not None and not decided.all():
        hashes = to_positive(murmur2(rows.key))
        key_valid = (np.ones(n, dtype=bool) if rows.key.null_count == 0 else
                     np.asarray(rows.key.is_valid().to_numpy(zero_copy_only=False), bool))
    single = len(rows.topics) == 1
    for code, topic in enumerate(rows.topics):
        count = counts[topic]
        need = ~decided if single else (~decided & (rows.topic_codes == code))
        if hashes is not None:
            keyed = need & key_valid
            partition[keyed] = (hashes[keyed] % np.uint32(count)).astype(np.int32)
            need &= ~key_valid
        index = np.flatnonzero(need)
        if index.size:
            partition[index] = sticky.assign(topic, rows.sizes[index], count)
    return partition


def _hand_over(rows: Rows, partition: np.ndarray, batcher: PartitionBatcher) -> None:
    """Group the rows by (topic, partition), keeping their order, and add each group as
    the indices of its rows. With the compiled encoder the columns stay as they are (it
    reads each group's rows from them by index); the pure encoder gets them copied once in
    group order, each group a run of rows."""
    n = rows.n
    group = (rows.topic_codes.astype(np.int64) << 32) | partition.astype(np.int64)
    if not n:
        return
    source, ts, valid = rows.source, rows.timestamp_ms, rows.timestamp_valid
    sizes, base_sizes = rows.sizes, rows.base_sizes
    order = np.arange(n, dtype=np.int64)
    if n > 1 and (group[1:] < group[:-1]).any():
        key = group
        if len(rows.topics) == 1 and int(partition.max()) < 1 << 15:
            key = partition.astype(np.int16)  # one topic: numpy's radix sort of small ints
        by_group = np.argsort(key, kind="stable")
        group = group[by_group]
        if accel.encoder() is not None:
            order = by_group
        else:
            # the pure encoder copies rows it takes by index: one copy of each column in
            # group order now, then every group is a run of it (sliced, not copied)
            source = source.take(by_group)
            ts = None if ts is None else ts[by_group]
            valid = None if valid is None else valid[by_group]
            sizes, base_sizes = rows.sizes[by_group], rows.base_sizes[by_group]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    stops = np.r_[starts[1:], n]
    for start, stop in zip(starts.tolist(), stops.tolist()):
        topic = rows.topics[int(group[start] >> 32)]
        part = int(group[start] & 0xFFFFFFFF)
        index = order[start:stop]
        batcher.add(topic, part, Slice(
            source, index, None if ts is None else ts[index],
            None if ts is None else valid[index], int(sizes[index].sum()), base_sizes[index]))


def write_task(batches: Iterator[pa.RecordBatch], options: WriterOptions, plan: WritePlan,
               *, client=None, producer: TaskProducer | None = None,
               prefix: str | None = None, task: tuple | None = None,
               fresh_ids: bool = False) -> KafkaCommitMessage:
    """Write one task's Arrow batches; returns what was written once all is acknowledged.
    With ``prefix`` (exactlyOnce) the task writes in a transaction it leaves open, and
    aborts it if the write raises; ``task`` is its (partition id, attempt, batch id or
    None), from Spark's TaskContext when not given. ``fresh_ids``: the prefix is one batch
    job's own (``transactions.job_prefix``), so an id used before this attempt is refused
    (``StaleAttemptError``) before anything is written.

    Without ``client`` or ``producer`` the task checks a client out of this worker's pool
    (``protocol.pool``) and, idempotent and not transactional, goes on with the producer
    identity the last task that used it left there; it leaves its own identity there only
    when every batch it sent was acknowledged (``TaskProducer.identity_to_keep``)."""
    lease = None
    if client is None and producer is None:
        lease = pool.checkout(options.client_config)
        client = lease.client
    try:
        identity = None
        if lease is not None and prefix is None and options.enable_idempotence:
            # Taken out now: after a failure nothing is put back (a fresh id next time).
            identity = lease.state.pop(IDENTITY_STATE_KEY, None)
        message, producer = _write_task(batches, options, plan, client, producer, prefix,
                                        task, fresh_ids, identity)
        if lease is not None and prefix is None and options.enable_idempotence:
            kept = producer.identity_to_keep()
            if kept is not None:
                lease.state[IDENTITY_STATE_KEY] = kept
        return message
    finally:
        if lease is not None:
            lease.give_back()


def _write_task(batches, options: WriterOptions, plan: WritePlan, client, producer,
                prefix, task, fresh_ids, identity) -> tuple[KafkaCommitMessage, TaskProducer]:
    """One task's write: its transaction opened (exactlyOnce), its rows sent, its commit
    message for the driver."""
    iterator = iter(batches)
    txn_info = None
    if prefix is not None:
        producer, txn_info, skipped = _open_transaction(options, client, producer, prefix,
                                                        task, fresh_ids)
        if skipped is not None:
            try:
                for _ in iterator:  # the micro-batch was committed before a restart
                    pass
            except BaseException:
                producer.close()
                raise
            return skipped, producer
    producer = producer or TaskProducer(options, client, identity=identity)
    try:
        _send_rows(iterator, options, plan, producer)
        return _commit_message(options, producer, txn_info), producer
    except BaseException:
        if txn_info is not None and producer.abort_transaction():
            log.warning("the task's write failed: its transaction %s was aborted",
                        txn_info[0])
        raise
    finally:
        producer.close()


def _open_transaction(options: WriterOptions, client, producer, prefix: str, task,
                      fresh_ids: bool):
    """(producer, (transactional id, partition, attempt, batch id), the commit message of
    a task that writes nothing because its micro-batch was committed before, or None)."""
    partition_id, attempt, batch_id = task if task is not None else task_identity()
    tid = transactional_id(prefix, partition_id, attempt)
    producer = producer or TaskProducer(options, client, transactional_id=tid)
    try:
        producer.producer_identity()  # aborts what this id left open, fences zombies
        if fresh_ids:
            refuse_used_id(tid, producer.epoch)
        skipped = None
        if (batch_id is not None and committed_batch(
                producer.client, prefix, partition_id, options.request_timeout_ms,
                options.topic) >= batch_id):
            skipped = KafkaCommitMessage(transaction=TaskTransaction(
                tid, producer.producer_id, producer.epoch, partition_id, attempt,
                skipped=True))
    except BaseException:
        producer.close()
        raise
    return producer, (tid, partition_id, attempt, batch_id), skipped


def _send_rows(iterator, options: WriterOptions, plan: WritePlan,
               producer: TaskProducer) -> None:
    """Every row of Spark's batches routed to its partition, batched and sent; returns once
    the broker acknowledged them all."""
    batcher = PartitionBatcher(options, producer)
    if options.partitioner == "round_robin":
        sticky = RoundRobinPartitioner()
    else:
        sticky = StickyPartitioner(options.batch_size)
    use_keys = options.partitioner == "default"
    counts: dict[str, int] = {}
    while True:
        waited = time.monotonic()
        batch = next(iterator, None)
        if batch is None:
            break
        batcher.input_waited(time.monotonic() - waited)
        parts = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for rb in parts:
            if rb.num_rows == 0:
                continue
            if options.formats:
                rb = encode_formats(rb, options.formats)
            rows = prepare(rb, plan)
            missing = [t for t in rows.topics if t not in counts]
            if missing:
                counts.update(producer.partition_counts(missing))
            check_rows(rows, counts, options.max_request_size, producer.missing_lookup_ms)
            _hand_over(rows, route_rows(rows, counts, sticky, use_keys=use_keys), batcher)
            if producer.buffered_bytes >= options.buffer_memory:
                producer.wait_for_room(options.buffer_memory // 2)
            elif (producer.started
                  or producer.buffered_bytes >= options.check_before_send_bytes):
                producer.start()
                producer.poll(0)
    batcher.flush()
    producer.flush()


def _commit_message(options: WriterOptions, producer: TaskProducer,
                    txn_info) -> KafkaCommitMessage:
    """What the task wrote, per partition, and its open transaction for the driver."""
    transaction = None
    if txn_info is not None:
        tid, partition_id, attempt, batch_id = txn_info
        maybe_kill("before_task_end", batch_id)
        maybe_fail("before_task_end", partition_id, attempt)
        written = sorted(tp for tp, (r, _) in producer.stats.items() if r)
        transaction = TaskTransaction(tid, producer.producer_id, producer.epoch,
                                      partition_id, attempt,
                                      marker_partition(options, written))
    return KafkaCommitMessage(
        partitions={tp: (r, b) for tp, (r, b) in sorted(producer.stats.items())},
        producer_ids=tuple(producer.producer_ids), transaction=transaction)


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
        return write_task(iterator, self.options, self.plan, prefix=self.prefix,
                          fresh_ids=self.FRESH_IDS and self.prefix is not None)


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
            log.warning("Kafka write aborted: %d of %d tasks had finished; their %d "
                        "transactions were aborted, nothing is visible to read_committed "
                        "readers", len(done), len(messages), aborted)
            return
        log.warning("Kafka write aborted: %d of %d tasks had finished; records they "
                    "wrote stay in Kafka", len(done), len(messages))
        _log_totals("Kafka write aborted", done)


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
                f"processing-time or availableNow trigger.")
        if self.prefix is not None:
            counts = _end_transactions(self.options, self.prefix, messages, batchId, True)
            log.info("Kafka micro-batch %d: %s", batchId, counts)
        _log_totals(f"Kafka micro-batch {batchId} committed", messages)

    def abort(self, messages, batchId: int) -> None:
        done = [m for m in messages if m is not None]
        if self.prefix is not None:
            _end_transactions(self.options, self.prefix, messages, batchId, False)
            log.warning("Kafka micro-batch %d aborted: %d of %d tasks had finished; their "
                        "transactions were aborted", batchId, len(done), len(messages))
            return
        log.warning("Kafka micro-batch %d aborted: %d of %d tasks had finished; records "
                    "they wrote stay in Kafka", batchId, len(done), len(messages))


#: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
_TRANSACTION_APIS = (24, 25, 26, 28)


def _check_transactions(producer: TaskProducer) -> None:
    meta = producer.client.metadata()
    for node in sorted(meta.brokers)[:1]:
        versions = producer.client.connection(node).api_versions
        missing = [k for k in _TRANSACTION_APIS if k not in versions]
        if missing:
            raise ConfigError(f"exactlyOnce: broker {node} does not support transactions "
                              f"(no API keys {missing}); set exactlyOnce=false")


#: Checks that passed in this process: key -> monotonic time. Spark's Python runner makes
#: the streaming writer again at every micro-batch's commit (in a reused worker): without
#: this, every micro-batch opened a connection and asked for metadata just to check again.
_CHECKED: BoundedCache[tuple, float] = BoundedCache(256)


def _check_key(options: WriterOptions) -> tuple:
    # the pool's identity of the connection settings: a repr would show every secret as
    # '******', so two passwords would share one passed check
    return pool.pool_key(options.client_config), options.topic, options.exactly_once


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
    running stream."""
    key = _check_key(options)
    checked = _CHECKED.get(key)
    max_age = options.client_config.metadata_max_age_ms / 1000
    if checked is not None and time.monotonic() - checked < max_age:
        return
    started = time.monotonic()
    what = (f"checking topic {options.topic!r}" if options.topic is not None
            else "reaching the brokers")
    try:
        with_retries(what, lambda: _check_once(options), log=log,
                     attempts=ATTEMPTS if checked is None else sys.maxsize,
                     deadline=started + options.max_block_ms / 1000)
    except _TopicNotInMetadata:
        waited_ms = round((time.monotonic() - started) * 1000)
        raise ConfigError(
            f"{missing_topics_message('topic', [options.topic])} (Topic {options.topic} not "
            f"present in metadata after {waited_ms} ms; topics are not created by the "
            f"writer: create it first)") from None
    _CHECKED.put(key, time.monotonic())


def _check_once(options: WriterOptions) -> None:
    lease = pool.checkout(options.client_config)
    producer = TaskProducer(options, lease.client)
    try:
        if options.exactly_once:
            _check_transactions(producer)
        topics = [] if options.topic is None else [options.topic]
        meta = lease.client.refresh_metadata(topics)
        if options.topic is None:
            return
        info = meta.topics.get(options.topic)
        if info is not None and info.error_code in RESOURCE_TYPES:
            # Kafka answers a topic the principal may not describe (existing or not) so,
            # with no partitions: not a missing topic to wait for
            raise refine(request_error(info.error_code, "Metadata", topic=options.topic),
                         grant=WRITE_GRANT)
        if info is None or info.error_code in _TOPIC_NOT_THERE or not info.partitions:
            raise _TopicNotInMetadata(f"topic {options.topic!r} is not in the metadata")
        if info.error_code:
            raise BrokerError.for_code(info.error_code, topic=options.topic)
    finally:
        producer.close()
        lease.give_back()


def _prepare(options, schema, streaming: bool) -> tuple[WriterOptions, WritePlan, str | None]:
    parsed = parse_writer_options(options)
    plan = check_schema(schema, parsed.topic, {f.column for f in parsed.formats})
    if parsed.formats:
        from .value_formats import resolve_sink_formats
        parsed = dataclasses.replace(parsed, formats=resolve_sink_formats(parsed.formats,
                                                                          schema))
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
