"""Exactly-once writes (``exactlyOnce=true``): tasks open Kafka transactions, the driver
ends them.

Spark commits a write in two steps (every task returns a commit message, then the driver's
``commit`` or ``abort`` runs once), and a Kafka transaction is only a transactional id,
the producer id and epoch InitProducerId gave it and requests to its coordinator, so the
driver can end a transaction a task opened (Kafka's Java producer cannot).

A task (``TaskTransaction``) takes the id ``{prefix}-{partitionId}-{attemptNumber}`` (a
batch write's prefix carries a token of the job: ``job_prefix``), refuses an id already
used (``refuse_used_id``: epoch above 0 in a batch write), in a stream skips a
micro-batch its partition's marker shows committed, writes with every partition
enlisted, and returns without ending the transaction (``TaskTransaction``, ``writer``).

The driver (``commit_transactions``), per committed task in partition order: in a stream,
records the micro-batch id as the offset of the group ``{prefix}-{partitionId}`` inside
the transaction (AddOffsetsToTxn + TxnOffsetCommit), or aborts a replayed batch; EndTxn;
fences the attempts that lost (InitProducerId on ``{prefix}-{partition}-{a}`` for every a
below the winner's and the next one); in a stream, then fences every other open
transaction named ``{prefix}-{number}-{number}`` (``fence_leftovers``, ListTransactions),
which is safe because Spark starts no task of the next micro-batch before the commit
returns. ``abort`` aborts the finished tasks' transactions and fences attempts 0..3 of the
others. Which failures this closes and which it cannot: "Exactly-once writes" in
docs/writing.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import uuid
from dataclasses import dataclass

from kafka_common.bounded_cache import BoundedCache
from kafka_common.repeated_warnings import RepeatedWarnings
from protocol.client import transactions as txn
from protocol.errors import BrokerError, ConfigError, PyKafkaError

from .txn_errors import exactly_once_grant, transaction_hint

__all__ = [
    "TaskTransaction",
    "BATCH_ID_PROPERTY",
    "transactional_id",
    "marker_group",
    "marker_partition",
    "job_prefix",
    "refuse_used_id",
    "resolve_prefix",
    "task_identity",
    "committed_batch",
    "commit_transactions",
    "abort_transactions",
    "TransactionCommitError",
    "StaleAttemptError",
]

log = logging.getLogger("pykafka.sink")

#: The local property Spark's MicroBatchExecution sets to the running batch id.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: Attempts fenced for a task that failed in a batch write (spark.task.maxFailures).
FAILED_TASK_ATTEMPTS = 4
#: How long a stream's commit waits for the brokers' lists of open transactions: a hung
#: broker that the metadata still names delays every micro-batch by this much, not by
#: kafka.request.timeout.ms (the listing is a clean-up; the transaction timeout remains).
LIST_TIMEOUT_MS = 5_000
#: The warnings of the fencing, by transactional id prefix (a stream's: one per query; a
#: batch job's carries its token). A stream's commit fences and lists at every micro-batch,
#: and Spark makes the streaming writer again for each commit in a reused Python worker,
#: so the warnings outlive the writer here: said once per query, then counted.
_WARNINGS: BoundedCache[str, RepeatedWarnings] = BoundedCache(256)


def query_warnings(prefix: str) -> RepeatedWarnings:
    """The ``RepeatedWarnings`` of the query (or batch job) whose ids start with
    ``prefix``."""
    return _WARNINGS.get_or_make(prefix, lambda: RepeatedWarnings(log))


class TransactionCommitError(Exception):
    """The driver could not end a task's transaction; names the option to change."""


class StaleAttemptError(Exception):
    """A batch write's task attempt found its transactional id used before it."""


@dataclass(frozen=True)
class TaskTransaction:
    """What a task tells the driver about its transaction."""

    transactional_id: str
    producer_id: int
    epoch: int
    partition_id: int
    attempt: int
    marker: tuple[str, int] | None = None  # where the batch marker goes; None: no records
    skipped: bool = False  # the marker showed the batch committed: nothing was written


def transactional_id(prefix: str, partition_id: int, attempt: int) -> str:
    return f"{prefix}-{partition_id}-{attempt}"


def marker_group(prefix: str, partition_id: int) -> str:
    return f"{prefix}-{partition_id}"


def job_prefix(prefix: str) -> str:
    """The prefix of one batch write's transactional ids: ``prefix`` and a token drawn
    once per job, so that no other job, and no task before this one, holds them."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def refuse_used_id(tid: str, epoch: int) -> None:
    """A batch write's ids are the job's own (``job_prefix``): InitProducerId gives a
    fresh one epoch 0, so a higher epoch means someone used the id first."""
    if epoch > 0:
        raise StaleAttemptError(
            f"transactional id {tid!r} was used before this task attempt (epoch {epoch}): "
            f"the driver already ended this write (the job failed, or committed another "
            f"attempt of this partition) or an earlier attempt of the stage ran it; this "
            f"attempt writes nothing (exactlyOnce)"
        )


def resolve_prefix(options, raw_options, streaming: bool) -> str:
    """The transactional id prefix: the option, or for a stream one derived from the
    checkpoint location in the writer's options."""
    if options.transactional_id_prefix:
        return options.transactional_id_prefix
    checkpoint = None
    if streaming:
        for key in raw_options:
            if str(key).lower() == "checkpointlocation":
                checkpoint = raw_options[key]
    if checkpoint:
        digest = hashlib.sha256(os.path.abspath(str(checkpoint)).encode()).hexdigest()[:20]
        return f"pykafka-{digest}"
    what = (
        "the stream has no checkpointLocation option to derive it from"
        if streaming
        else "a batch write has nothing stable to derive it from"
    )
    raise ConfigError(
        f"transactionalIdPrefix: exactlyOnce needs a transactionalIdPrefix "
        f"({what}); give each query or job its own, e.g. "
        f'.option("transactionalIdPrefix", "orders-to-lake")'
    )


def task_identity() -> tuple[int, int, int | None]:
    """(partition id, attempt number, micro-batch id or None) of the running Spark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("exactlyOnce writes run inside Spark tasks (no TaskContext)")
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    return ctx.partitionId(), ctx.attemptNumber(), (int(batch) if batch else None)


def marker_partition(options, written) -> tuple[str, int] | None:
    """Where a task's batch marker is committed: partition 0 of the ``topic`` option, else
    the first topic-partition the task wrote to (None when it wrote nothing)."""
    if options.topic is not None:
        return (options.topic, 0) if written else None
    return written[0] if written else None


def committed_batch(
    client, prefix: str, partition_id: int, timeout_ms=None, topic: str | None = None
) -> int:
    """The last micro-batch id committed by partition ``partition_id``, -1 if none: the
    highest offset of its marker group, on partition 0 of ``topic`` or on any."""
    try:
        offsets = txn.fetch_stable_offsets(
            client,
            marker_group(prefix, partition_id),
            None if topic is None else [(topic, 0)],
            timeout_ms=timeout_ms,
        )
    except BrokerError as e:
        raise exactly_once_grant(e, prefix) from e
    return max((o for o, _ in offsets.values()), default=-1)


def _end(client, t: TaskTransaction, commit: bool, timeout_ms, prefix: str | None = None) -> None:
    try:
        txn.end_txn(
            client, t.transactional_id, t.producer_id, t.epoch, commit, timeout_ms=timeout_ms
        )
    except BrokerError as e:
        raise TransactionCommitError(
            f"{'committing' if commit else 'aborting'} the transaction of Spark partition "
            f"{t.partition_id} failed: {transaction_hint(e, t.transactional_id, prefix)}"
        ) from e


def fence(
    client, prefix: str, ids: list[tuple[int, int]], timeout_ms: int, transaction_timeout_ms: int
) -> None:
    """InitProducerId on ``prefix-partition-attempt`` for each pair: aborts what it left
    open. Failures are logged: the broker's transaction timeout remains the backstop."""
    fence_ids(
        client,
        prefix,
        [transactional_id(prefix, p, a) for p, a in ids],
        timeout_ms,
        transaction_timeout_ms,
    )


def fence_ids(
    client, prefix: str, tids: list[str], timeout_ms: int, transaction_timeout_ms: int
) -> None:
    """``fence`` by transactional id (all under ``prefix``). The ids that could not be
    fenced are one warning per kind of error, once per query (``query_warnings``): a
    stream fences the same ids at every micro-batch, and a grant narrower than the prefix
    would otherwise warn at each."""
    failed: dict[str, tuple[list[str], BaseException]] = {}
    for tid in tids:
        try:
            txn.init_producer_id(client, tid, transaction_timeout_ms, timeout_ms=timeout_ms)
        except Exception as e:  # noqa: BLE001 - the timeout aborts it anyway
            kind = f"{type(e).__name__}:{getattr(e, 'code', '')}"
            failed.setdefault(kind, ([], exactly_once_grant(e, prefix)))[0].append(tid)
    for kind, (ids, error) in failed.items():
        query_warnings(prefix).warn(
            f"fence:{kind}",
            "could not fence transactional id(s) %s (the broker aborts "
            "their open transactions after kafka.transaction.timeout.ms): %s",
            ", ".join(ids),
            error,
        )


def commit_transactions(
    client, options, prefix: str, messages, batch_id: int | None
) -> dict[str, int]:
    """End every committed task's transaction (see the module docstring); returns counts
    of ``committed``, ``replayed`` (aborted: the batch was committed before) and
    ``skipped`` (tasks that wrote nothing for that reason)."""
    timeout = options.request_timeout_ms
    tasks = [
        m.transaction
        for m in messages
        if m is not None and getattr(m, "transaction", None) is not None
    ]
    counts = {"committed": 0, "replayed": 0, "skipped": 0}
    for t in sorted(tasks, key=lambda t: t.partition_id):
        if t.skipped:
            counts["skipped"] += 1
            continue
        if t.marker is None:
            continue  # the task wrote nothing: no partition joined its transaction
        if batch_id is not None:
            group = marker_group(prefix, t.partition_id)
            if committed_batch(client, prefix, t.partition_id, timeout, options.topic) >= batch_id:
                _end(client, t, False, timeout)
                counts["replayed"] += 1
                log.warning(
                    "micro-batch %d of Spark partition %d was committed before a "
                    "restart: its re-run transaction is aborted",
                    batch_id,
                    t.partition_id,
                )
                continue
            try:
                txn.add_offsets(
                    client, t.transactional_id, t.producer_id, t.epoch, group, timeout_ms=timeout
                )
                txn.txn_offset_commit(
                    client,
                    t.transactional_id,
                    t.producer_id,
                    t.epoch,
                    group,
                    {t.marker: batch_id},
                    f"pyspark-pykafka exactlyOnce batch {batch_id}",
                    timeout_ms=timeout,
                )
            except BrokerError as e:
                raise TransactionCommitError(
                    f"recording micro-batch {batch_id} for Spark partition "
                    f"{t.partition_id} failed: "
                    f"{transaction_hint(e, t.transactional_id, options.transactional_id_prefix)}"
                ) from e
        _end(client, t, True, timeout, options.transactional_id_prefix)
        counts["committed"] += 1
    losers = sorted(
        {(t.partition_id, a) for t in tasks for a in [*range(t.attempt), t.attempt + 1]}
    )
    fence(client, prefix, losers, timeout, options.transaction_timeout_ms)
    if batch_id is not None:
        ended = {t.transactional_id for t in tasks}
        ended.update(transactional_id(prefix, p, a) for p, a in losers)
        fence_leftovers(client, prefix, ended, timeout, options.transaction_timeout_ms)
    return counts


def task_id_pattern(prefix: str) -> str:
    """A regular expression for the whole of a stream's task ids under ``prefix``: the
    prefix, then a partition and an attempt number (not a batch job's ids under the same
    option, which carry a token, nor another prefix that merely starts with this one)."""
    return f"{re.escape(prefix)}-[0-9]+-[0-9]+"


def fence_leftovers(
    client, prefix: str, ended: set[str], timeout_ms: int, transaction_timeout_ms: int
) -> list[str]:
    """After a stream's micro-batch commit: fence every Ongoing transaction of a task id
    under ``prefix`` other than ``ended`` (the ones this commit just ended or fenced);
    returns their ids.

    Spark calls the streaming commit only after every task of the batch ended and starts
    no task of the next batch before it returns, so such a transaction is a leftover: a
    crashed run's task whose partition the re-run batch does not have (it planned fewer
    tasks), an attempt more than one above a winner's, a zombie. InitProducerId aborts it
    now instead of after ``kafka.transaction.timeout.ms``. One ListTransactions per
    broker; a broker that cannot answer it is skipped (``open_transactional_ids``)."""
    pattern = task_id_pattern(prefix)
    repeated = query_warnings(prefix)
    skipped: dict[int, BaseException] = {}
    try:
        open_ids = txn.open_transactional_ids(
            client, f"^{pattern}$", timeout_ms=min(timeout_ms, LIST_TIMEOUT_MS), skipped=skipped
        )
    except PyKafkaError as e:
        repeated.warn(
            f"list:{type(e).__name__}",
            "could not list open transactions to "
            "fence those an earlier run of prefix %s left (the broker aborts "
            "them after kafka.transaction.timeout.ms): %s",
            prefix,
            e,
        )
        return []
    for node, error in sorted(skipped.items()):
        repeated.warn(
            f"list:{node}:{type(error).__name__}",
            "open transactions: broker %s "
            "skipped (the open transactions it coordinates end by "
            "kafka.transaction.timeout.ms): %s",
            node,
            error,
        )
    leftovers = sorted(t for t in open_ids if re.fullmatch(pattern, t) and t not in ended)
    if leftovers:
        fence_ids(client, prefix, leftovers, timeout_ms, transaction_timeout_ms)
        log.info(
            "fenced %d open transaction(s) left under prefix %s by an earlier run or attempt: %s",
            len(leftovers),
            prefix,
            ", ".join(leftovers),
        )
    return leftovers


def abort_transactions(client, options, prefix: str, messages) -> int:
    """Abort the finished tasks' transactions and fence the attempts of the others."""
    timeout = options.request_timeout_ms
    aborted = 0
    failed: list[tuple[int, int]] = []
    for index, m in enumerate(messages):
        t = getattr(m, "transaction", None) if m is not None else None
        if t is None:
            if m is None:
                failed.extend((index, a) for a in range(FAILED_TASK_ATTEMPTS))
            continue
        if not t.skipped and t.marker is not None:
            try:
                _end(client, t, False, timeout)
                aborted += 1
            except TransactionCommitError as e:
                log.warning("%s", e)
        failed.append((t.partition_id, t.attempt + 1))
        failed.extend((t.partition_id, a) for a in range(t.attempt))
    fence(client, prefix, sorted(set(failed)), timeout, options.transaction_timeout_ms)
    return aborted
