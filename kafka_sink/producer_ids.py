"""The producer ids of a write task's producer (``TaskProducer`` holds a ``ProducerIds``):
fetched, carried over between tasks, renewed after a gap, and the transactional id's.

Producer ids that outlive a task
--------------------------------
A write task checks its client out of the Python worker's pool (``protocol.client.pool``), and
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
as ``kafka_sink.producer`` says.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.authorization import CLUSTER, refine, request_error
from protocol.errors import BrokerError, KafkaConnectionError, UnsupportedVersionError
from protocol.client.transactions import MAX_INIT_PRODUCER_ID_VERSION

from .batch_state import ProduceError, SendState, first_uncertain, next_sequence, restamp
from .txn_errors import transaction_hint

if TYPE_CHECKING:
    from protocol.client.cluster import KafkaClient

    from .options import WriterOptions

__all__ = ["ProducerIdentity", "ProducerIds", "IDENTITY_STATE_KEY"]

log = logging.getLogger("pykafka.sink")

#: Where a pooled client (``protocol.client.pool.Lease.state``) keeps the identity for the
#: next task.
IDENTITY_STATE_KEY = "idempotent-producer"


@dataclass(frozen=True)
class ProducerIdentity:
    """An idempotent producer's identity between tasks: producer id, epoch and the next
    sequence number of every partition it wrote to."""

    producer_id: int
    epoch: int
    #: (topic, partition) -> next sequence
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"ProducerIdentity(producer_id={self.producer_id}, epoch={self.epoch}, "
            f"partitions={len(self.sequences)})"
        )


class ProducerIds:
    """The producer id and epoch of a ``TaskProducer``: fetched on first use or carried
    over from an earlier task, renewed after a gap, and the transaction's (partitions
    enlisted, aborted when the task fails)."""

    def __init__(
        self,
        state: SendState,
        options: WriterOptions,
        client: KafkaClient,
        transactional_id: str | None,
        carried: ProducerIdentity | None,
    ):
        self._state = state
        self._options = options
        self._client = client
        self.transactional_id = transactional_id
        self.idempotent = options.enable_idempotence
        self.producer_id = -1
        self.epoch = -1
        self.producer_ids: list[int] = []  # every producer id this task used, in order
        self._enlisted: set[tuple[str, int]] = set()
        # An identity an earlier task of this worker left (see "Producer ids that outlive
        # a task"); taken on at the first append, so a task that writes nothing keeps it.
        self._carried = (
            carried
            if carried is not None and self.idempotent and transactional_id is None
            else None
        )
        self._carried_sequences: dict[tuple[str, int], int] = {}

    def first_sequence(self, key: tuple[str, int]) -> int:
        """The sequence of the first batch of partition ``key`` in this task: where a
        carried identity left it, else 0."""
        return self._carried_sequences.pop(key, 0)

    # ---- producer id ----------------------------------------------------------------------

    def _transactional_id(self) -> str:
        if self.transactional_id is None:  # pragma: no cover - callers check first
            raise ValueError("not a transactional producer")
        return self.transactional_id

    def _init_transactional_id(self) -> None:
        from protocol.client import transactions

        tid = self._transactional_id()
        try:
            self.producer_id, self.epoch = transactions.init_producer_id(
                self._client,
                tid,
                self._options.transaction_timeout_ms,
                timeout_ms=self._options.delivery_timeout_ms,
            )
        except UnsupportedVersionError as e:
            raise ProduceError(
                f"the broker does not support transactions ({e}); exactlyOnce needs Kafka "
                f"0.11 or later with transactions enabled: set exactlyOnce=false"
            ) from e
        except BrokerError as e:
            raise ProduceError(
                transaction_hint(e, tid, self._options.transactional_id_prefix)
            ) from e
        self.producer_ids.append(self.producer_id)
        log.debug("transactional id %s: producer id %d epoch %d", tid, self.producer_id, self.epoch)

    def enlist(self) -> None:
        """AddPartitionsToTxn for the partitions about to get their first batch."""
        from protocol.client import transactions

        new = [
            key
            for key, p in self._state.partitions.items()
            if p.queue and key not in self._enlisted
        ]
        if not new:
            return
        tid = self._transactional_id()
        try:
            transactions.add_partitions(
                self._client,
                tid,
                self.producer_id,
                self.epoch,
                new,
                timeout_ms=self._options.delivery_timeout_ms,
            )
        except BrokerError as e:
            raise ProduceError(
                transaction_hint(e, tid, self._options.transactional_id_prefix)
            ) from e
        self._enlisted.update(new)

    def abort_transaction(self) -> bool:
        """EndTxn(abort) for a transaction this producer enlisted partitions in, within
        ``request.timeout.ms``; for a task that fails. Best effort: an error is logged,
        never raised (the driver's fencing and the broker's transaction timeout remain).
        True when the abort was acknowledged."""
        from protocol.client import transactions

        if self.transactional_id is None or not self._enlisted:
            return False
        try:
            transactions.end_txn(
                self._client,
                self.transactional_id,
                self.producer_id,
                self.epoch,
                False,
                timeout_ms=self._options.request_timeout_ms,
            )
        except Exception as e:  # noqa: BLE001 - the task's own error is the one to raise
            log.warning(
                "could not abort the transaction of %s after the task failed (the "
                "driver fences it, or the broker aborts it after "
                "kafka.transaction.timeout.ms): %s",
                self.transactional_id,
                e,
            )
            return False
        self._enlisted.clear()
        return True

    def init_producer_id(self) -> None:
        """InitProducerId: a new producer id and epoch (the transactional id's, which
        fences its earlier holders)."""
        from protocol.schemas import INIT_PRODUCER_ID

        if self.transactional_id is not None:
            self._init_transactional_id()
            return

        def attempt() -> tuple[int, int]:
            meta = self._client.metadata()
            nodes = sorted(meta.brokers)
            if not nodes:
                raise KafkaConnectionError("no broker in the cluster metadata")
            conn = self._client.connection(nodes[len(self.producer_ids) % len(nodes)])
            try:
                version = conn.version_for(INIT_PRODUCER_ID, MAX_INIT_PRODUCER_ID_VERSION)
            except UnsupportedVersionError as e:
                raise ProduceError(
                    f"the broker does not support idempotent producers (InitProducerId): "
                    f"{e}; set kafka.enable.idempotence=false to write without"
                ) from e
            response = conn.request(
                INIT_PRODUCER_ID,
                {
                    "transactional_id": None,
                    "transaction_timeout_ms": 60_000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
                version,
            )
            if response["error_code"]:
                raise request_error(
                    response["error_code"], "InitProducerId", "InitProducerId failed"
                )
            return response["producer_id"], response["producer_epoch"]

        try:
            self.producer_id, self.epoch = self._client.retrying(
                "InitProducerId", attempt, self._options.delivery_timeout_ms
            )
        except BrokerError as e:
            refine(
                e,
                resource_type=CLUSTER,
                grant=("Write",),
                on="the topics written (Kafka 2.8+ takes it for IdempotentWrite on the cluster)",
                advice="or grant IdempotentWrite on "
                "the cluster, or set kafka.enable.idempotence=false",
            )
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
                log.debug(
                    "producer id %d epoch %d carried over from an earlier task",
                    self.producer_id,
                    self.epoch,
                )
            else:
                self.init_producer_id()
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
        if (
            self._state.new_id_pending
            or self._state.pending
            or any(self._state.requests.values())
            or any(p.in_flight for p in self._state.partitions.values())
        ):
            return None
        sequences = dict(self._carried_sequences)
        sequences.update({key: p.next_sequence for key, p in self._state.partitions.items()})
        return ProducerIdentity(self.producer_id, self.epoch, sequences)

    # ---- a new producer id ----------------------------------------------------------------

    def maybe_new_producer_id(self) -> None:
        """Once no batch of unknown fate is left, take a new producer id and renumber."""
        for p in self._state.partitions.values():
            if p.in_flight or first_uncertain(p) is not None:
                return  # _sendable resends the batch of unknown fate first
        old = self.producer_id
        self.init_producer_id()
        self._carried_sequences.clear()  # a new id starts every partition at 0
        log.warning(
            "new producer id %d (was %d): renumbering the unacknowledged batches",
            self.producer_id,
            old,
        )
        for p in self._state.partitions.values():
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
        self._state.new_id_pending = False
