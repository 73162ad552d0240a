"""The producer of one write task: pipelined Produce requests, idempotent by default.

``TaskProducer`` takes encoded record batches per partition (``append``) and delivers each
exactly once and in order per partition, or fails the task with an error naming the topic,
the partition and the last error. It is single-threaded: progress happens in ``poll`` and
``flush``, which the writer calls between its own work.

Sending
-------
Each Produce request goes to one partition leader and carries at most one batch per
partition, up to ``max.request.size`` bytes of batches; at most
``max.in.flight.requests.per.connection`` requests wait for answers on one connection (so
at most that many batches of one partition are in flight: the broker remembers the last
five of an idempotent producer). Answers come back in order on a connection; the producer
waits on whichever connections have something to read
(``protocol.connection.wait_readable``).

Idempotence (the default)
-------------------------
One InitProducerId (``transactional_id`` null) gives a producer id and epoch, at most one
per task and usually none once the worker's pool holds an identity (see "Producer ids that
outlive a task" below).
Every batch of a partition gets the next sequence number when it is appended: the first
is 0 (or where a carried identity left the partition), the next ``base + record count``, wrapping from 2**31 - 1 to 0 as Kafka does. The
bytes of a batch never change while its producer id lives: a resend is the same bytes, so
the broker recognises a batch it already has.

The answer to a batch decides its fate:

- no error, or DUPLICATE_SEQUENCE_NUMBER (46: the broker has it already): delivered.
- a retriable error (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
  NOT_ENOUGH_REPLICAS[_AFTER_APPEND], a broken connection, no answer in
  ``request.timeout.ms``, ...): the partition stops sending, waits until every batch of it
  still in flight is answered, refreshes the metadata when the leader may have moved, backs
  off (``retry.backoff.ms``, doubling up to ``retry.backoff.max.ms``, 1 s, with jitter) and resends every unacknowledged batch
  from the oldest, in order, unchanged.
- OUT_OF_ORDER_SEQUENCE_NUMBER (45) or UNKNOWN_PRODUCER_ID (59): if an older batch of the
  partition is still unacknowledged, this is the echo of that batch's failure and is
  handled as a retriable error. If every older batch is acknowledged, the broker has lost
  this producer's state for the partition (a gap that no resend can fill), so, as Kafka's
  clients do, the producer starts a new epoch: it stops sending new batches, drives every
  batch whose fate is unknown (sent, not answered for sure, on any partition) to an answer
  under the old producer id, then asks for a new producer id (InitProducerId) and
  renumbers every unacknowledged batch from sequence 0 (header fields and CRC rewritten)
  before resending them in order. (Java's client bumps the epoch of the same id; for a
  non-transactional producer a fresh id is equivalent, and every broker grants one.)
- INVALID_PRODUCER_EPOCH (47) or PRODUCER_FENCED (90): the producer is fenced; the task
  fails.

Until the broker has acknowledged a batch of the producer id and epoch on a partition,
only one request is in flight to it: a broker that knows no state of the producer there
accepts any sequence as the first (Kafka's "accept writes with any sequence number"), so a
batch pipelined behind a first one that failed (NOT_LEADER_OR_FOLLOWER while a new topic's
leader starts, found on Apache Kafka) would be written before it, out of order.
- any other error that is not retriable (MESSAGE_TOO_LARGE, INVALID_RECORD, an
  authorization failure, ...): the task fails.

A batch fails the task when it is not acknowledged ``delivery.timeout.ms`` after it was
appended (or after sending started, for a batch held back until then), or after
``retries`` resends.

Producer ids that outlive a task
--------------------------------
A write task checks its client out of the Python worker's pool (``protocol.pool``), and
with it the identity the last task that used that client left: producer id, epoch and the
next sequence number of every partition written (``ProducerIdentity``, in the lease's
``state`` under ``IDENTITY_STATE_KEY``). The task goes on from there: a partition written
before continues at its next sequence, a new one starts at 0. One task at a time holds a
client, so one task at a time holds an identity, and successive tasks of a worker use one
producer id (as Kafka's Java producer does when Spark caches it) instead of one each. The
rules, and why each keeps every record once and in order per partition:

- The identity is taken out of the pool when the task starts and put back only when the
  task ends with every batch it sent acknowledged, nothing queued or in flight and no new
  producer id pending (``identity_to_keep``). Then the broker's last sequence of each
  partition for this id is exactly the one kept, so the next task's first batch is the
  next in line: nothing it sends can be mistaken for a duplicate of an earlier batch, and
  no gap opens. A task that writes nothing hands on what it was given unchanged.
- A task that fails for any reason (an error of its own, a fenced epoch, a delivery
  timeout, a killed worker) hands on nothing: batches of unknown fate may have been
  written or may still land, and the next task would not know which sequences they took.
  The next task asks for a new producer id (InitProducerId): its batches share no sequence
  space with the failed task's, so none of them is taken for a duplicate (and dropped) or
  refused as out of order; the failed task's records are written again by Spark's retry,
  at least once, exactly as without the pool.
- OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID on the oldest unacknowledged batch
  (the broker lost this id's state, e.g. after ``producer.id.expiration.ms`` of an idle
  worker, or a partition's log emptied): as within a task (below), the producer drives
  every batch of unknown fate to an answer under the old id, then takes a new id and
  renumbers what is unacknowledged from 0, and forgets the sequences carried for
  partitions this task has not touched (a new id starts every partition at 0). The new
  identity is the one handed on. The old id writes nothing more, so no batch can appear
  twice under both ids.
- INVALID_PRODUCER_EPOCH or PRODUCER_FENCED: the task fails (below), so the identity is
  dropped, and the next task starts with a new id.
- Transactional producers (``exactlyOnce``) never carry an identity: their transactional
  ids are already stable per stream partition and attempt, and InitProducerId on one is
  what fences the attempts before it.

Transactions (``transactional_id``, for ``exactlyOnce``)
-------------------------------------------------------
InitProducerId goes to the transaction coordinator with the transactional id (which aborts
whatever the id left open and fences its earlier holders), every partition is enlisted
with AddPartitionsToTxn before its first Produce, and batches carry the transactional bit
and the id. The producer never commits the transaction: ``kafka_sink.transactions`` does,
on the driver; ``abort_transaction`` aborts it when the task fails. A gap
(OUT_OF_ORDER_SEQUENCE_NUMBER on the oldest unacknowledged batch, UNKNOWN_PRODUCER_ID)
cannot be repaired with a new producer id inside a transaction, so it fails the task (Spark
re-runs it under a new transactional id; what this attempt wrote is aborted); an
OUT_OF_ORDER_SEQUENCE_NUMBER behind an older unacknowledged batch is its echo and resent,
as above.

Without idempotence (``kafka.enable.idempotence=false``) batches carry no producer id; the
retry rules are the same, so a resend after an unclear failure may duplicate records
(at-least-once, as Java's producer without idempotence). With ``acks=0`` nothing is
answered: a batch counts as delivered once written to the socket.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from kafka_common.retries import ATTEMPTS
from protocol.authorization import CLUSTER, RESOURCE_TYPES, refine, request_error
from protocol.cluster import MAX_PRODUCE_VERSION_BY_NAME, KafkaClient
from protocol.connection import wait_readable
from protocol.errors import (BrokerError, KafkaConnectionError, KafkaTimeoutError,
                             ProtocolError, UnsupportedVersionError)
from protocol.primitives import ZERO_UUID
from protocol.retry import RetryPolicy, pause_until
from protocol.transactions import MAX_INIT_PRODUCER_ID_VERSION, MAX_TXN_PRODUCE_VERSION

from .batch_state import (DUPLICATE, FENCED, GAP, REFRESH, REJECTED, SEQUENCE_MODULUS, Batch,
                          Partition, ProduceError, Request, describe, first_uncertain,
                          next_sequence, restamp)
from .options import WriterOptions
from .txn_errors import WRITE_GRANT, transaction_hint

__all__ = ["TaskProducer", "ProducerIdentity", "ProduceError", "SEQUENCE_MODULUS",
           "next_sequence", "IDENTITY_STATE_KEY"]

log = logging.getLogger("pykafka.sink")

OUT_OF_ORDER = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
#: Where a pooled client (``protocol.pool.Lease.state``) keeps the identity for the next task.
IDENTITY_STATE_KEY = "idempotent-producer"


def _oldest_unacked(p: Partition) -> Batch:
    """The partition's oldest batch the broker has not acknowledged: the next sequence."""
    return next(q for q in p.queue if not q.acked)


@dataclass(frozen=True)
class ProducerIdentity:
    """An idempotent producer's identity between tasks: producer id, epoch and the next
    sequence number of every partition it wrote to."""

    producer_id: int
    epoch: int
    sequences: dict = field(default_factory=dict)  # (topic, partition) -> next sequence

    def __repr__(self) -> str:
        return (f"ProducerIdentity(producer_id={self.producer_id}, epoch={self.epoch}, "
                f"partitions={len(self.sequences)})")


class TaskProducer:
    """Delivers the record batches of one write task. Not thread-safe."""

    def __init__(self, options: WriterOptions, client: KafkaClient | None = None, *,
                 transactional_id: str | None = None,
                 identity: ProducerIdentity | None = None):
        self.options = options
        self.transactional_id = transactional_id
        self._enlisted: set[tuple[str, int]] = set()
        self.client = client or KafkaClient(options.client_config)
        self._own_client = client is None
        self.idempotent = options.enable_idempotence
        self.producer_id = -1
        self.epoch = -1
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._requests: dict[int, deque] = {}
        self._topic_ids: dict[str, object] = {}
        self._metadata_stale = False
        self._metadata_retry_at = 0.0
        self.missing_lookup_ms = 0  # how long the last partition_counts took
        self._new_id_pending = False
        self._started = False
        self.buffered_bytes = 0
        self.stats: dict[tuple[str, int], list[int]] = {}  # (topic, partition) -> [records, bytes]
        self.producer_ids: list[int] = []
        self._backoff0 = options.retry_backoff_ms / 1000
        # the waits before a partition's resends (retry.backoff.ms / .max.ms); how many
        # sends a batch gets: kafka.retries + 1 (delivery.timeout.ms bounds them too)
        self._resend_policy = RetryPolicy.for_client(options.client_config)
        self._send_policy = RetryPolicy(attempts=options.retries + 1)
        # An identity an earlier task of this worker left (see "Producer ids that outlive
        # a task"); taken on at the first append, so a task that writes nothing keeps it.
        self._carried = (identity if identity is not None and self.idempotent
                         and transactional_id is None else None)
        self._carried_sequences: dict[tuple[str, int], int] = {}

    # ---- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    def __enter__(self) -> "TaskProducer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Allow sending (until then batches are only buffered). The delivery timeout of a
        batch buffered before this starts now: holding it back was our choice."""
        if self._started:
            return
        self._started = True
        deadline = time.monotonic() + self.options.delivery_timeout_ms / 1000
        for p in self._partitions.values():
            for b in p.queue:
                b.deadline = deadline

    @property
    def started(self) -> bool:
        return self._started

    # ---- metadata -------------------------------------------------------------------------

    def partition_counts(self, topics) -> dict[str, int]:
        """The number of partitions of each topic that exists; missing ones are left out.
        A topic not in the metadata is asked for ``ATTEMPTS`` times (Spark's
        ``fetchOffset.numRetries``, as the driver's check of the ``topic`` option and the
        reader do), so a topic column naming a topic that does not exist fails a write in
        a second, not after ``max.block.ms``; a broker that cannot be reached is retried
        up to ``max.block.ms``. ``missing_lookup_ms``: how long the last lookup took."""
        topics = sorted(set(topics))
        found: dict[str, int] = {}
        # the answers a missing topic is asked for: ATTEMPTS in all
        answers = RetryPolicy(attempts=ATTEMPTS).start(f"topics {topics}")
        started = time.monotonic()

        def attempt(_tries) -> dict[str, int]:
            meta = self.client.refresh_metadata(topics)
            answers.begin()
            for name in topics:
                info = meta.topics.get(name)
                if info is not None and info.error_code in RESOURCE_TYPES:
                    raise refine(request_error(info.error_code, "Metadata", topic=name),
                                 grant=WRITE_GRANT)
                if info is not None and not info.error_code and info.partitions:
                    self._topic_ids[name] = info.topic_id
                    found[name] = len(info.partitions)
            if len(found) < len(topics) and not answers.exhausted():
                raise _TopicsMissing()
            return found

        def gave_up(tries, error: BaseException) -> BaseException:
            if isinstance(error, _TopicsMissing):
                return error
            return KafkaTimeoutError(
                f"could not fetch the metadata of topics {topics} within "
                f"{self.options.max_block_ms} ms (kafka.max.block.ms; {tries.summary()}): "
                f"{error}")

        policy = RetryPolicy(backoff_ms=self.options.retry_backoff_ms or 50,
                             max_backoff_ms=self.options.client_config.retry_backoff_max_ms,
                             timeout_ms=self.options.max_block_ms)
        try:
            return policy.run(f"metadata of topics {topics}", attempt, give_up=gave_up,
                              retriable=lambda e: isinstance(
                                  e, (_TopicsMissing, KafkaConnectionError,
                                      KafkaTimeoutError)))
        except _TopicsMissing:
            return dict(found)
        finally:
            self.missing_lookup_ms = round((time.monotonic() - started) * 1000)

    def _refresh_leaders(self) -> None:
        now = time.monotonic()
        if now < self._metadata_retry_at:
            return
        topics = sorted({p.topic for p in self._partitions.values()})
        try:
            meta = self.client.refresh_metadata(topics)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            self._metadata_retry_at = now + self._backoff0
            log.debug("metadata refresh failed: %s", e)
            for p in self._partitions.values():  # what a batch that never left waits for
                if p.leader is None and p.queue and p.queue[0].last_error is None:
                    p.queue[0].last_error = f"no leader known: metadata refresh failed: {e}"
            return
        self._metadata_stale = False
        for p in self._partitions.values():
            info = meta.topics.get(p.topic)
            part = info.partitions.get(p.partition) if info is not None else None
            p.leader = part.leader if part is not None and part.leader >= 0 else None
            if info is not None:
                self._topic_ids[p.topic] = info.topic_id
        if any(p.leader is None for p in self._partitions.values() if p.queue):
            self._metadata_stale = True
            self._metadata_retry_at = now + self._backoff0

    # ---- producer id ----------------------------------------------------------------------

    def _init_transactional_id(self) -> None:
        from protocol import transactions
        try:
            self.producer_id, self.epoch = transactions.init_producer_id(
                self.client, self.transactional_id, self.options.transaction_timeout_ms,
                timeout_ms=self.options.delivery_timeout_ms)
        except UnsupportedVersionError as e:
            raise ProduceError(
                f"the broker does not support transactions ({e}); exactlyOnce needs Kafka "
                f"0.11 or later with transactions enabled: set exactlyOnce=false") from e
        except BrokerError as e:
            raise ProduceError(transaction_hint(e, self.transactional_id,
                                                self.options.transactional_id_prefix)) from e
        self.producer_ids.append(self.producer_id)
        log.debug("transactional id %s: producer id %d epoch %d", self.transactional_id,
                  self.producer_id, self.epoch)

    def _enlist(self) -> None:
        """AddPartitionsToTxn for the partitions about to get their first batch."""
        from protocol import transactions
        new = [key for key, p in self._partitions.items()
               if p.queue and key not in self._enlisted]
        if not new:
            return
        try:
            transactions.add_partitions(self.client, self.transactional_id, self.producer_id,
                                        self.epoch, new,
                                        timeout_ms=self.options.delivery_timeout_ms)
        except BrokerError as e:
            raise ProduceError(transaction_hint(e, self.transactional_id,
                                                self.options.transactional_id_prefix)) from e
        self._enlisted.update(new)

    def abort_transaction(self) -> bool:
        """EndTxn(abort) for a transaction this producer enlisted partitions in, within
        ``request.timeout.ms``; for a task that fails. Best effort: an error is logged,
        never raised (the driver's fencing and the broker's transaction timeout remain).
        True when the abort was acknowledged."""
        from protocol import transactions
        if self.transactional_id is None or not self._enlisted:
            return False
        try:
            transactions.end_txn(self.client, self.transactional_id, self.producer_id,
                                 self.epoch, False,
                                 timeout_ms=self.options.request_timeout_ms)
        except Exception as e:  # noqa: BLE001 - the task's own error is the one to raise
            log.warning("could not abort the transaction of %s after the task failed (the "
                        "driver fences it, or the broker aborts it after "
                        "kafka.transaction.timeout.ms): %s", self.transactional_id, e)
            return False
        self._enlisted.clear()
        return True

    def _init_producer_id(self) -> None:
        from protocol.schemas import INIT_PRODUCER_ID
        if self.transactional_id is not None:
            self._init_transactional_id()
            return

        def attempt():
            meta = self.client.metadata()
            nodes = sorted(meta.brokers)
            if not nodes:
                raise KafkaConnectionError("no broker in the cluster metadata")
            conn = self.client.connection(nodes[len(self.producer_ids) % len(nodes)])
            try:
                version = conn.version_for(INIT_PRODUCER_ID, MAX_INIT_PRODUCER_ID_VERSION)
            except UnsupportedVersionError as e:
                raise ProduceError(
                    f"the broker does not support idempotent producers (InitProducerId): "
                    f"{e}; set kafka.enable.idempotence=false to write without") from e
            response = conn.request(INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout_ms": 60_000,
                "producer_id": -1, "producer_epoch": -1}, version)
            if response["error_code"]:
                raise request_error(response["error_code"], "InitProducerId",
                                    "InitProducerId failed")
            return response["producer_id"], response["producer_epoch"]

        try:
            self.producer_id, self.epoch = self.client.retrying(
                "InitProducerId", attempt, self.options.delivery_timeout_ms)
        except BrokerError as e:
            refine(e, resource_type=CLUSTER, grant=("Write",), on="the topics written (Kafka 2.8+ takes it for "
                   "IdempotentWrite on the cluster)", advice="or grant IdempotentWrite on "
                   "the cluster, or set kafka.enable.idempotence=false")
            raise ProduceError(f"could not get a producer id: {e}") from e
        self.producer_ids.append(self.producer_id)
        log.debug("producer id %d epoch %d", self.producer_id, self.epoch)

    def producer_identity(self) -> tuple[int, int]:
        """``(producer_id, epoch)`` for new batches: the carried identity, else fetched on
        first use."""
        if self.idempotent and self.producer_id < 0:
            carried, self._carried = self._carried, None
            if carried is not None:
                self.producer_id, self.epoch = carried.producer_id, carried.epoch
                self._carried_sequences = dict(carried.sequences)
                self.producer_ids.append(self.producer_id)
                log.debug("producer id %d epoch %d carried over from an earlier task",
                          self.producer_id, self.epoch)
            else:
                self._init_producer_id()
        return self.producer_id, self.epoch

    def identity_to_keep(self) -> ProducerIdentity | None:
        """The identity the next task of this worker may go on with, or None. Only an
        idempotent, non-transactional producer's, and only when every batch it sent is
        acknowledged: nothing in flight, nothing queued, no new producer id pending (see
        the module doc: a batch of unknown fate makes the sequence numbers unsafe)."""
        if not self.idempotent or self.transactional_id is not None:
            return None
        if self.producer_id < 0:
            return self._carried  # wrote nothing: what it was given is still good
        if (self._new_id_pending or self.pending or any(self._requests.values())
                or any(p.in_flight for p in self._partitions.values())):
            return None
        sequences = dict(self._carried_sequences)
        sequences.update({key: p.next_sequence for key, p in self._partitions.items()})
        return ProducerIdentity(self.producer_id, self.epoch, sequences)

    # ---- appending ------------------------------------------------------------------------

    def append(self, topic: str, partition: int, count: int,
               build: Callable[[int, int, int], bytes]) -> None:
        """Queue one batch of ``count`` records. ``build(producer_id, epoch,
        base_sequence)`` returns its bytes (-1s without idempotence)."""
        key = (topic, partition)
        p = self._partitions.get(key)
        if self.idempotent:
            producer_id, epoch = self.producer_identity()
        if p is None:
            p = self._partitions[key] = Partition(topic, partition)
            p.next_sequence = self._carried_sequences.pop(key, 0)
            self._metadata_stale = True
        if self.idempotent:
            sequence = p.next_sequence
            p.next_sequence = next_sequence(sequence, count)
        else:
            producer_id, epoch, sequence = -1, -1, -1
        data = build(producer_id, epoch, sequence)
        b = Batch(topic, partition, data, count,
                  time.monotonic() + self.options.delivery_timeout_ms / 1000, sequence,
                  tries=self._send_policy.start(f"sending to {key}"))
        p.queue.append(b)
        self.buffered_bytes += len(data)

    # ---- the loop -------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return any(p.queue for p in self._partitions.values())

    def poll(self, timeout: float = 0.0) -> None:
        """Send what may be sent, then handle the answers that arrive within ``timeout``
        seconds (at least those already there)."""
        if not self._started:
            return
        self._check_deadlines()
        if self._metadata_stale:
            self._refresh_leaders()
        if self._new_id_pending:
            self._maybe_new_producer_id()
        self._send_ready()
        self._receive(timeout)

    def flush(self) -> None:
        """Start sending if not yet started and return once every batch is delivered."""
        self.start()
        while self.pending:
            self.poll(0.05)

    def wait_for_room(self, limit: int) -> None:
        """Make progress until at most ``limit`` bytes are waiting for delivery."""
        self.start()
        while self.buffered_bytes > limit and self.pending:
            self.poll(0.05)

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for p in self._partitions.values():
            if p.queue and p.queue[0].deadline < now:
                b = p.queue[0]
                raise ProduceError(
                    f"Delivery to {p.name} timed out: {b.count} records not acknowledged "
                    f"within {self.options.delivery_timeout_ms} ms (kafka.delivery.timeout.ms)"
                    f" after {b.tries.made} attempts; last error: {b.last_error or 'none'}")

    # ---- sending --------------------------------------------------------------------------

    def _sendable(self, p: Partition, now: float) -> Batch | None:
        if p.resend:
            if p.in_flight:
                return None
            p.resend = False
            p.next_index = 0
        while p.next_index < len(p.queue) and p.queue[p.next_index].acked:
            p.next_index += 1
        if (p.next_index >= len(p.queue) or p.in_flight >= self._in_flight_limit(p)
                or now < p.retry_at or p.leader is None):
            return None
        b = p.queue[p.next_index]
        if self._new_id_pending and b is not first_uncertain(p):
            return None  # only batches of unknown fate may go before the new id
        if b.tries.exhausted():
            raise ProduceError(f"Writing to {p.name} failed after {b.tries.made - 1} retries "
                               f"(kafka.retries); last error: {b.last_error}")
        return b

    def _in_flight_limit(self, p: Partition) -> int:
        """Requests a partition may have in flight: one until the broker acknowledged a
        batch of this producer id and epoch there. A broker that knows no state of the
        producer on a partition takes any sequence as its first (Kafka "accepts writes with
        any sequence number" then), so a batch pipelined behind a first one that failed
        (NOT_LEADER_OR_FOLLOWER while a new topic's leader starts) would be written
        before it."""
        if self.idempotent and not p.confirmed:
            return 1
        return self.options.max_in_flight

    def _send_ready(self) -> None:
        if self.transactional_id is not None:
            self._enlist()
        while True:
            now = time.monotonic()
            by_node: dict[int, list] = {}
            for p in self._partitions.values():
                if not p.queue:
                    continue
                b = self._sendable(p, now)
                if b is not None:
                    by_node.setdefault(p.leader, []).append((p, b))
            sent_any = False
            for node, items in by_node.items():
                if len(self._requests.get(node, ())) >= self.options.max_in_flight:
                    continue
                request, size = [], 0
                for p, b in items:
                    if request and size + len(b.data) > self.options.max_request_size:
                        break
                    request.append((p, b))
                    size += len(b.data)
                if self._send_request(node, request):
                    sent_any = True
            if not sent_any:
                return

    def _send_request(self, node: int, items: list) -> bool:
        from protocol.schemas import PRODUCE
        topics: dict[str, list] = {}
        for p, b in items:
            topics.setdefault(p.topic, []).append({"index": p.partition, "records": b.data})
        ids = {t: self._topic_ids.get(t, ZERO_UUID) for t in topics}
        body = {"transactional_id": self.transactional_id, "acks": self.options.acks,
                "timeout_ms": self.options.request_timeout_ms,
                "topic_data": [{"name": t, "topic_id": ids[t], "partition_data": parts}
                               for t, parts in topics.items()]}
        acks0 = self.options.acks == 0
        try:
            conn = self.client.connection(node)
            cap = (MAX_PRODUCE_VERSION_BY_NAME if any(i == ZERO_UUID for i in ids.values())
                   else None)
            if self.transactional_id is not None:
                cap = MAX_TXN_PRODUCE_VERSION
            version = conn.version_for(PRODUCE, cap)
            cid = conn.send(PRODUCE, body, version, expect_response=not acks0)
        except (KafkaConnectionError, KafkaTimeoutError, ProtocolError) as e:
            self._connection_failed(node, e)
            for p, b in items:
                self._retry(p, b, f"sending to broker {node} failed: {e}", rejected=False,
                            refresh=True)
            return False
        for p, b in items:
            b.sent = True
            b.tries.begin()
            p.next_index += 1
        if acks0:
            for p, b in items:
                self._acked(p, b)
            return True
        for p, b in items:
            b.in_flight = True
            p.in_flight += 1
        deadline = time.monotonic() + self.options.request_timeout_ms / 1000
        self._requests.setdefault(node, deque()).append(
            Request(node, conn, cid, [b for _, b in items], deadline))
        return True

    # ---- receiving ------------------------------------------------------------------------

    def _receive(self, timeout: float) -> None:
        waiting = {node: q for node, q in self._requests.items() if q}
        if not waiting:
            if timeout > 0 and self.pending:
                # nothing in flight: wait for the first partition's backoff to end
                now = time.monotonic()
                retry = min((p.retry_at for p in self._partitions.values() if p.queue),
                            default=now)
                pause_until(retry, at_most=min(timeout, 0.05))
            return
        ready = [node for node, q in waiting.items() if q[0].conn.has_response(q[0].cid)]
        if not ready:
            first_deadline = min(q[0].deadline for q in waiting.values())
            node_of = {id(q[0].conn): node for node, q in waiting.items()}
            wait = min(timeout, first_deadline - time.monotonic())
            ready = [node_of[id(c)] for c in wait_readable(
                [q[0].conn for q in waiting.values()], wait)]
            for node, q in waiting.items():  # requests past their deadline
                if node not in ready and q[0].deadline <= time.monotonic():
                    ready.append(node)
        for node in ready:
            queue = self._requests.get(node)
            if not queue:
                continue
            request = queue[0]
            remaining_ms = max(1, int((request.deadline - time.monotonic()) * 1000))
            try:
                response = request.conn.receive(request.cid, remaining_ms)
            except (KafkaConnectionError, KafkaTimeoutError, ProtocolError) as e:
                self._connection_failed(node, e)
                continue
            queue.popleft()
            self._handle_response(request, response)

    def _connection_failed(self, node: int, error: Exception) -> None:
        """Every request in flight on ``node``'s connection is lost: retry its batches."""
        queue = self._requests.pop(node, deque())
        for request in queue:
            try:
                request.conn.close()
            except Exception:  # pragma: no cover - closing never matters here
                pass
            for b in request.batches:
                p = self._partitions[(b.topic, b.partition)]
                self._landed(p, b)
                self._retry(p, b, f"no answer from broker {node}: {error}", rejected=False,
                            refresh=True)
        self._metadata_stale = True

    def _handle_response(self, request: Request, response: dict) -> None:
        by_key = {(b.topic, b.partition): b for b in request.batches}
        names = {v: k for k, v in self._topic_ids.items()}
        answered = set()
        for topic in response.get("responses", ()):
            name = topic.get("name") or names.get(topic.get("topic_id"))
            for part in topic["partition_responses"]:
                key = (name, part["index"])
                b = by_key.get(key)
                if b is None or key in answered:
                    continue
                answered.add(key)
                self._handle_partition(b, part)
        for key, b in by_key.items():
            if key not in answered:
                p = self._partitions[key]
                self._landed(p, b)
                self._retry(p, b, f"broker {request.node} did not answer for this partition",
                            rejected=False, refresh=True)

    def _landed(self, p: Partition, b: Batch) -> None:
        if b.in_flight:
            b.in_flight = False
            p.in_flight -= 1

    def _handle_partition(self, b: Batch, part: dict) -> None:
        p = self._partitions[(b.topic, b.partition)]
        self._landed(p, b)
        code = part["error_code"]
        if code == 0 or (code == DUPLICATE and self.idempotent):
            self._acked(p, b)
            return
        error = request_error(code, "Produce", describe(part), topic=b.topic,
                              partition=b.partition, transactional_id=self.transactional_id)
        if code in FENCED:
            if self.transactional_id is not None:
                raise ProduceError(f"Writing to {p.name} failed: "
                                   + transaction_hint(error, self.transactional_id))
            raise ProduceError(f"Writing to {p.name} failed: the producer was fenced "
                               f"(producer id {self.producer_id}, epoch {self.epoch}): {error}")
        if code in GAP and self.transactional_id is not None:
            if code == OUT_OF_ORDER and _oldest_unacked(p) is not b:
                # an earlier batch has not landed (it failed with a retriable error such as
                # NOT_LEADER_OR_FOLLOWER on a new topic, or is still on its way): this one
                # was refused, not lost; resend from the oldest, as Kafka's Java producer
                # retries an out-of-order batch that is not the next sequence
                self._retry(p, b, str(error), rejected=True, refresh=False)
                return
            raise ProduceError(f"Writing to {p.name} failed: {error}: the broker lost this "
                               f"transaction's sequence; the task fails and its transaction "
                               f"is aborted")
        if code in GAP and self.idempotent:
            if _oldest_unacked(p) is b:
                log.warning("%s: %s on the oldest unacknowledged batch (sequence %d): "
                            "starting over with a new producer id", p.name, error.name,
                            b.sequence)
                self._new_id_pending = True
            self._retry(p, b, str(error), rejected=True, refresh=False)
            return
        if error.retriable or code in REJECTED:
            self._retry(p, b, str(error), rejected=code in REJECTED,
                        refresh=code in REFRESH)
            return
        if error.authorization is not None:
            said = (transaction_hint(error, self.transactional_id,
                                     self.options.transactional_id_prefix)
                    if self.transactional_id is not None
                    else str(refine(error, grant=WRITE_GRANT)))
            raise ProduceError(f"Writing to {p.name} failed: {said}")
        raise ProduceError(f"Writing to {p.name} failed: {error}")

    def _acked(self, p: Partition, b: Batch) -> None:
        if b.acked:
            return
        b.acked = True
        b.rejected = False
        p.confirmed = True
        self.buffered_bytes -= len(b.data)
        stat = self.stats.setdefault((b.topic, b.partition), [0, 0])
        stat[0] += b.count
        stat[1] += len(b.data)
        while p.queue and p.queue[0].acked:
            p.queue.popleft()
            p.next_index = max(0, p.next_index - 1)
        p.resends = None

    def _retry(self, p: Partition, b: Batch, message: str, *, rejected: bool,
               refresh: bool) -> None:
        b.last_error = message
        b.rejected = rejected
        if not p.resend:
            p.resend = True
            if p.resends is None:
                p.resends = self._resend_policy.start(f"resending to {p.name}")
            p.retry_at = time.monotonic() + p.resends.failed_once()
        if refresh:
            self._metadata_stale = True
        log.debug("%s: will resend from the oldest unacknowledged batch: %s", p.name, message)

    # ---- a new producer id ----------------------------------------------------------------

    def _maybe_new_producer_id(self) -> None:
        """Once no batch of unknown fate is left, take a new producer id and renumber."""
        for p in self._partitions.values():
            if p.in_flight or first_uncertain(p) is not None:
                return  # _sendable resends the batch of unknown fate first
        old = self.producer_id
        self._init_producer_id()
        self._carried_sequences.clear()  # a new id starts every partition at 0
        log.warning("new producer id %d (was %d): renumbering the unacknowledged batches",
                    self.producer_id, old)
        for p in self._partitions.values():
            kept = deque(q for q in p.queue if not q.acked)
            sequence = 0
            for q in kept:
                q.data = restamp(q.data, self.producer_id, self.epoch, sequence)
                q.sequence = sequence
                q.sent = q.rejected = False
                sequence = next_sequence(sequence, q.count)
            p.queue = kept
            p.next_sequence = sequence
            p.next_index = 0
            p.resend = False
            p.confirmed = False  # the broker knows nothing of the new id
        self._new_id_pending = False


class _TopicsMissing(Exception):
    """Topics the metadata does not have (yet): asked again, ``ATTEMPTS`` answers in all."""
