"""The producer of one write task: pipelined Produce requests, idempotent by default.

``TaskProducer`` takes encoded record batches per partition (``append``) and delivers each
exactly once and in order per partition, or fails the task with an error naming the topic,
the partition and the last error (what each broker answer leads to: "Idempotent,
at-least-once by default" in docs/writing.md). It is single-threaded: progress happens in
``poll`` and ``flush``, which the writer calls between its own work.

It is the façade over parts that share one ``SendState`` (``batch_state``): ``Leaders``
(``leaders``) the metadata, ``Sender`` (``sending``) the requests and answers on the wire,
``ProduceAnswers`` (``produce_answers``) what each answer means for a batch, ``ProducerIds``
(``producer_ids``) the producer id and epoch, ``DeadLetters`` (``dead_letters``) the
dead-letter topic. This module numbers batches as they are appended and enforces
``delivery.timeout.ms``.

A batch's bytes never change while its producer id lives: a resend is the same bytes, so
the broker recognises a batch it already has (DUPLICATE_SEQUENCE_NUMBER counts as
delivered). Only a new producer id renumbers the unacknowledged batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from protocol.client.cluster import KafkaClient
from protocol.retry import RetryPolicy

from .batch_state import (
    SEQUENCE_MODULUS,
    Batch,
    Partition,
    ProduceError,
    SendState,
    next_sequence,
)
from .dead_letters import DeadLetters
from .leaders import Leaders
from .options import WriterOptions
from .produce_answers import ProduceAnswers
from .producer_ids import IDENTITY_STATE_KEY, ProducerIdentity, ProducerIds
from .sending import Sender

__all__ = [
    "TaskProducer",
    "ProducerIdentity",
    "ProduceError",
    "SEQUENCE_MODULUS",
    "next_sequence",
    "IDENTITY_STATE_KEY",
]


class TaskProducer:
    """Delivers the record batches of one write task. Not thread-safe.

    Its parts share a ``SendState`` (the partitions' queues, the requests in flight):
    ``leaders`` (``Leaders``) the metadata, ``sender`` (``Sender``) the wire, ``ids``
    (``ProducerIds``) the producer id and epoch, ``dead_letters`` (``DeadLetters``) the
    dead-letter topic, ``answers`` (``ProduceAnswers``) what each Produce answer means;
    this class appends batches and drives the loop."""

    def __init__(
        self,
        options: WriterOptions,
        client: KafkaClient | None = None,
        *,
        transactional_id: str | None = None,
        identity: ProducerIdentity | None = None,
    ):
        self.options = options
        self.transactional_id = transactional_id
        self.client = client or KafkaClient(options.client_config)
        self._own_client = client is None
        self.idempotent = options.enable_idempotence
        self._state = SendState()
        self._partitions = self._state.partitions
        self._started = False
        # the waits before a partition's resends (retry.backoff.ms / .max.ms); how many
        # sends a batch gets: kafka.retries + 1 (delivery.timeout.ms bounds them too)
        self._resend_policy = RetryPolicy.for_client(options.client_config)
        self._send_policy = RetryPolicy(attempts=options.retries + 1)
        self.leaders = Leaders(self._state, options, self.client, self._resend_policy)
        self.ids = ProducerIds(self._state, options, self.client, transactional_id, identity)
        self.dead_letters = DeadLetters(
            self._state,
            options,
            self.ids,
            self.append,
            self.partition_counts,
            self._send_policy,
        )
        self.answers = ProduceAnswers(
            self._state, options, self.ids, self.dead_letters, self._resend_policy
        )
        self.sender = Sender(
            self._state, options, self.client, self.ids, self.answers, transactional_id
        )

    # ---- what the task reads --------------------------------------------------------------

    @property
    def producer_id(self) -> int:
        return self.ids.producer_id

    @property
    def epoch(self) -> int:
        return self.ids.epoch

    @property
    def producer_ids(self) -> list[int]:
        """Every producer id this task used, in order."""
        return self.ids.producer_ids

    @property
    def buffered_bytes(self) -> int:
        """Bytes of batches appended and not yet acknowledged."""
        return self._state.buffered_bytes

    @property
    def stats(self) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> [records, bytes] acknowledged."""
        return self._state.stats

    def producer_identity(self) -> tuple[int, int]:
        """``(producer_id, epoch)`` for new batches (``ProducerIds.producer_identity``)."""
        return self.ids.producer_identity()

    # ---- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    def __enter__(self) -> TaskProducer:
        return self

    def __exit__(self, *exc: object) -> None:
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

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """The number of partitions of each topic that exists (``Leaders.partition_counts``)."""
        return self.leaders.partition_counts(topics)

    # ---- appending ------------------------------------------------------------------------

    def append(
        self, topic: str, partition: int, count: int, build: Callable[[int, int, int], bytes]
    ) -> None:
        """Queue one batch of ``count`` records. ``build(producer_id, epoch,
        base_sequence)`` returns its bytes (-1s without idempotence)."""
        key = (topic, partition)
        p = self._partitions.get(key)
        if self.idempotent:
            producer_id, epoch = self.producer_identity()
        if p is None:
            p = self._partitions[key] = Partition(topic, partition)
            p.next_sequence = self.ids.first_sequence(key)
            self._state.metadata_stale = True
        if self.idempotent:
            sequence = p.next_sequence
            p.next_sequence = next_sequence(sequence, count)
        else:
            producer_id, epoch, sequence = -1, -1, -1
        data = build(producer_id, epoch, sequence)
        b = Batch(
            topic,
            partition,
            data,
            count,
            time.monotonic() + self.options.delivery_timeout_ms / 1000,
            sequence,
            tries=self._send_policy.start(f"sending to {key}"),
        )
        p.queue.append(b)
        self._state.buffered_bytes += len(data)

    def spare_buffer(self) -> bytearray | None:
        """A delivered batch's buffer for the encoder to write the next batch into
        (``SendState.spare_buffer``), or None."""
        return self._state.spare_buffer()

    # ---- the loop -------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return self._state.pending

    def poll(self, timeout: float = 0.0) -> None:
        """Send what may be sent, then handle the answers that arrive within ``timeout``
        seconds (at least those already there)."""
        if not self._started:
            return
        self._check_deadlines()
        if self._state.metadata_stale:
            self.leaders.refresh()
        if self._state.new_id_pending:
            self.ids.maybe_new_producer_id()
        self.sender.send_ready()
        self.sender.receive(timeout)

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
                    f" after {b.tries.made} attempts; last error: {b.last_error or 'none'}"
                )
