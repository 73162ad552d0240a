"""The producer ids of a write task's producer (``TaskProducer`` holds a ``ProducerIds``):
fetched, carried over between tasks, renewed after a gap, and the transactional id's.

Carried over: a task's pooled client (``protocol.client.pool``) brings the identity the
last task on it left (``ProducerIdentity``: producer id, epoch, next sequence of every
partition written; in the lease's ``state`` under ``IDENTITY_STATE_KEY``), so a worker's
tasks share one producer id. Why that keeps every record once and in order:

- it is handed on only when every batch the task sent is acknowledged and nothing is
  queued, in flight or waiting for a new id (``identity_to_keep``): the broker's last
  sequence of each partition is then exactly the one kept, so the next batch is next in
  line, neither a "duplicate" nor a gap;
- a task that fails hands on nothing (batches of unknown fate may still land): the next
  task takes a new id, whose sequences share nothing with the failed task's;
- a gap (OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID on the oldest unacknowledged
  batch: the broker lost the id's state) drives every batch of unknown fate to an answer
  under the old id, then takes a new id, renumbers the unacknowledged batches from 0 and
  forgets the carried sequences; the old id writes nothing more.

Transactional (``exactlyOnce``): InitProducerId with the transactional id (it aborts what
the id left open and fences earlier holders), AddPartitionsToTxn before a partition's first
Produce; never carried over, never committed here (``kafka_sink.transactions`` does, on the
driver; ``abort_transaction`` when the task fails). A gap cannot be repaired inside a
transaction, so it fails the task and Spark re-runs it under a new transactional id.
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
