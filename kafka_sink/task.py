"""One task of the sink: its Arrow batches routed, batched, encoded and sent (see
``kafka_sink.writer`` for the steps; imported by the task alone, so the driver's processes
that only plan or commit a write never load the encoder, the producer or numpy).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from kafka_common.value_formats.encoding import encode_formats
from protocol.client import pool
from protocol.records import accel
from protocol.records.batch import Record
from protocol.records.row_source import RowSource

from .batching import PartitionBatcher, Slice
from .columns import Rows, prepare
from .options import WriterOptions
from .partitioner import RoundRobinPartitioner, StickyPartitioner, murmur2, to_positive
from .producer import IDENTITY_STATE_KEY, TaskProducer
from .transactions import (
    TaskTransaction,
    committed_batch,
    marker_partition,
    refuse_used_id,
    task_identity,
    transactional_id,
)
from .validation import WritePlan, check_rows, too_large_message
from .commit_message import KafkaCommitMessage

__all__ = ["write_task", "route_rows"]

log = logging.getLogger("pykafka.sink")


def route_rows(rows: Rows, counts: dict[str, int], sticky, *, use_keys: bool = True) -> np.ndarray:
    """The partition of every row (the rows passed ``check_rows``): the partition column,
    else (``use_keys``) murmur2 of the key, else ``sticky.assign`` (a
    ``StickyPartitioner`` or a ``RoundRobinPartitioner``). With the compiled encoder, keyed
    rows are routed by one call (``_route_compiled``), with the same answer."""
    ext = accel.encoder()
    if ext is not None and use_keys and rows.key is not None and rows.source is not None:
        return _route_compiled(ext, rows, rows.source, counts, sticky)
    n = rows.n
    partition = np.zeros(n, dtype=np.int32)
    decided = np.zeros(n, dtype=bool)
    if rows.partition is not None and rows.partition_valid is not None:
        decided = rows.partition_valid.copy()
        partition[decided] = rows.partition[decided]
    hashes: np.ndarray | None = None
    key_valid: np.ndarray | None = None
    if use_keys and rows.key is not None and not decided.all():
        hashes = to_positive(murmur2(rows.key))
        key_valid = (
            np.ones(n, dtype=bool)
            if rows.key.null_count == 0
            else np.asarray(rows.key.is_valid().to_numpy(zero_copy_only=False), bool)
        )
    single = len(rows.topics) == 1
    for code, topic in enumerate(rows.topics):
        count = counts[topic]
        need = ~decided if single else (~decided & (rows.topic_codes == code))
        if hashes is not None and key_valid is not None:
            keyed = need & key_valid
            partition[keyed] = (hashes[keyed] % np.uint32(count)).astype(np.int32)
            need &= ~key_valid
        index = np.flatnonzero(need)
        if index.size:
            partition[index] = sticky.assign(topic, rows.sizes[index], count)
    return partition


def _route_compiled(
    ext, rows: Rows, source: RowSource, counts: dict[str, int], sticky
) -> np.ndarray:
    """``route_rows`` for keyed rows in one compiled pass: the partition column, else
    murmur2 of the key (``key_partitions``), and ``sticky`` for the rows with a null key."""
    keys = source.buffers()
    single = len(rows.topics) == 1
    codes = None if single else np.ascontiguousarray(rows.topic_codes, dtype=np.int32)
    table = np.array([counts[t] for t in rows.topics], dtype=np.int64)
    partition = np.frombuffer(ext.key_partitions(keys[0], keys[1], keys[2], codes, table), np.int32)
    if rows.partition is not None and rows.partition_valid is not None:
        decided = rows.partition_valid
        partition[decided] = rows.partition[decided]
    need = partition < 0
    if need.any():
        for code, topic in enumerate(rows.topics):
            index = np.flatnonzero(need if single else need & (rows.topic_codes == code))
            if index.size:
                partition[index] = sticky.assign(topic, rows.sizes[index], counts[topic])
    return partition


def _hand_over_compiled(
    ext, rows: Rows, source: RowSource, partition: np.ndarray, batcher: PartitionBatcher
) -> bool:
    """``_hand_over`` with the rows grouped in one compiled pass (``group_rows``, a stable
    counting sort, the same groups in the same order); False when it declines (far more
    partitions than rows)."""
    codes = None if len(rows.topics) == 1 else rows.topic_codes
    grouped = ext.group_rows(
        np.ascontiguousarray(partition, dtype=np.int32),
        None if codes is None else np.ascontiguousarray(codes, dtype=np.int32),
        np.ascontiguousarray(rows.sizes, dtype=np.int64),
        np.ascontiguousarray(rows.base_sizes, dtype=np.int64),
    )
    if grouped is None:
        return False
    order = np.frombuffer(grouped[0], dtype=np.int64)
    base_sizes = np.frombuffer(grouped[1], dtype=np.int64)
    ts, valid = rows.timestamp_ms, rows.timestamp_valid
    for code, part, start, stop, size in grouped[2]:
        index = order[start:stop]
        batcher.add(
            rows.topics[code],
            part,
            Slice(
                source,
                index,
                None if ts is None else ts[index],
                None if valid is None else valid[index],
                size,
                base_sizes[start:stop],
            ),
        )
    return True


def _hand_over(rows: Rows, partition: np.ndarray, batcher: PartitionBatcher) -> None:
    """Group the rows by (topic, partition), keeping their order, and add each group as
    the indices of its rows. With the compiled encoder the columns stay as they are (it
    reads each group's rows from them by index); the pure encoder gets them copied once in
    group order, each group a run of rows."""
    n = rows.n
    if not n:
        return
    source, ts, valid = rows.source, rows.timestamp_ms, rows.timestamp_valid
    if source is None:  # pragma: no cover - check_rows refuses such rows (bad headers)
        raise ValueError("rows without an encoder view cannot be batched")
    ext = accel.encoder()
    if ext is not None and _hand_over_compiled(ext, rows, source, partition, batcher):
        return
    group = (rows.topic_codes.astype(np.int64) << 32) | partition.astype(np.int64)
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
        batcher.add(
            topic,
            part,
            Slice(
                source,
                index,
                None if ts is None else ts[index],
                None if valid is None else valid[index],
                int(sizes[index].sum()),
                base_sizes[index],
            ),
        )


def _too_large_to_dead_letters(
    rb: pa.RecordBatch, too_large: np.ndarray, plan: WritePlan, counts, options, producer
) -> Rows:
    """The rows of ``rb`` larger than ``kafka.max.request.size`` queued for the
    dead-letter topic (each with the partition it was to go to), the others returned."""
    big = prepare(rb.filter(pa.array(too_large)), plan)
    use_keys = options.partitioner == "default"
    partitions = route_rows(big, counts, StickyPartitioner(options.batch_size), use_keys=use_keys)
    keys = big.key.to_pylist() if big.key is not None else [None] * big.n
    values = big.value.to_pylist()
    headers = big.headers.to_pylist() if big.headers is not None else [None] * big.n
    now = int(time.time() * 1000)
    for i in range(big.n):
        stamp = now
        valid = big.timestamp_valid
        if big.timestamp_ms is not None and valid is not None and valid[i]:
            stamp = int(big.timestamp_ms[i])
        own = tuple((h["key"], h["value"]) for h in headers[i] or ())
        producer.dead_letters.to_dead_letter_topic(
            big.topic_of(i),
            int(partitions[i]),
            "RECORD_TOO_LARGE",
            too_large_message(big, i, options.max_request_size),
            [Record(0, stamp, keys[i], values[i], own)],
        )
    return prepare(rb.filter(pa.array(~too_large)), plan)


def write_task(
    batches: Iterator[pa.RecordBatch],
    options: WriterOptions,
    plan: WritePlan,
    *,
    client=None,
    producer: TaskProducer | None = None,
    prefix: str | None = None,
    task: tuple | None = None,
    fresh_ids: bool = False,
) -> KafkaCommitMessage:
    """Write one task's Arrow batches; returns what was written once all is acknowledged.
    With ``prefix`` (exactlyOnce) the task writes in a transaction it leaves open, and
    aborts it if the write raises; ``task`` is its (partition id, attempt, batch id or
    None), from Spark's TaskContext when not given. ``fresh_ids``: the prefix is one batch
    job's own (``transactions.job_prefix``), so an id used before this attempt is refused
    (``StaleAttemptError``) before anything is written.

    Without ``client`` or ``producer`` the task checks a client out of this worker's pool
    (``protocol.client.pool``) and, idempotent and not transactional, goes on with the producer
    identity the last task that used it left there; it leaves its own identity there only
    when every batch it sent was acknowledged (``ProducerIds.identity_to_keep``)."""
    lease = None
    if client is None and producer is None:
        lease = pool.checkout(options.client_config)
        client = lease.client
    try:
        identity = None
        if lease is not None and prefix is None and options.enable_idempotence:
            # Taken out now: after a failure nothing is put back (a fresh id next time).
            identity = lease.state.pop(IDENTITY_STATE_KEY, None)
        message, producer = _write_task(
            batches, options, plan, client, producer, prefix, task, fresh_ids, identity
        )
        if lease is not None and prefix is None and options.enable_idempotence:
            kept = producer.ids.identity_to_keep()
            if kept is not None:
                lease.state[IDENTITY_STATE_KEY] = kept
        return message
    finally:
        if lease is not None:
            lease.give_back()


def _write_task(
    batches,
    options: WriterOptions,
    plan: WritePlan,
    client,
    producer,
    prefix,
    task,
    fresh_ids,
    identity,
) -> tuple[KafkaCommitMessage, TaskProducer]:
    """One task's write: its transaction opened (exactlyOnce), its rows sent, its commit
    message for the driver."""
    iterator = iter(batches)
    txn_info = None
    if prefix is not None:
        producer, txn_info, skipped = _open_transaction(
            options, client, producer, prefix, task, fresh_ids
        )
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
        if txn_info is not None and producer.ids.abort_transaction():
            log.warning("the task's write failed: its transaction %s was aborted", txn_info[0])
        raise
    finally:
        producer.close()


def _open_transaction(options: WriterOptions, client, producer, prefix: str, task, fresh_ids: bool):
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
        if (
            batch_id is not None
            and committed_batch(
                producer.client, prefix, partition_id, options.request_timeout_ms, options.topic
            )
            >= batch_id
        ):
            skipped = KafkaCommitMessage(
                transaction=TaskTransaction(
                    tid, producer.producer_id, producer.epoch, partition_id, attempt, skipped=True
                )
            )
    except BaseException:
        producer.close()
        raise
    return producer, (tid, partition_id, attempt, batch_id), skipped


def _send_rows(iterator, options: WriterOptions, plan: WritePlan, producer: TaskProducer) -> None:
    """Every row of Spark's batches routed to its partition, batched and sent; returns once
    the broker acknowledged them all."""
    batcher = PartitionBatcher(options, producer)
    sticky: RoundRobinPartitioner | StickyPartitioner
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
            too_large = check_rows(
                rows,
                counts,
                options.max_request_size,
                producer.leaders.missing_lookup_ms,
                dead_letters=bool(options.dead_letter_topic),
            )
            if too_large is not None:
                rows = _too_large_to_dead_letters(rb, too_large, plan, counts, options, producer)
            _hand_over(rows, route_rows(rows, counts, sticky, use_keys=use_keys), batcher)
            if producer.buffered_bytes >= options.buffer_memory:
                producer.wait_for_room(options.buffer_memory // 2)
            elif producer.started or producer.buffered_bytes >= options.check_before_send_bytes:
                producer.start()
                producer.poll(0)
    batcher.flush()
    producer.flush()
    if producer.dead_letters.dead_lettered:
        log.info(
            "%d records the broker refused were written to the dead-letter topic %r",
            producer.dead_letters.dead_lettered,
            options.dead_letter_topic,
        )


def _commit_message(options: WriterOptions, producer: TaskProducer, txn_info) -> KafkaCommitMessage:
    """What the task wrote, per partition, and its open transaction for the driver."""
    transaction = None
    if txn_info is not None:
        tid, partition_id, attempt, _ = txn_info
        written = sorted(tp for tp, (r, _) in producer.stats.items() if r)
        transaction = TaskTransaction(
            tid,
            producer.producer_id,
            producer.epoch,
            partition_id,
            attempt,
            marker_partition(options, written),
        )
    return KafkaCommitMessage(
        partitions={tp: (r, b) for tp, (r, b) in sorted(producer.stats.items())},
        producer_ids=tuple(producer.producer_ids),
        transaction=transaction,
    )
