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
(``protocol.client.connection.wait_readable``).

Idempotence (the default)
-------------------------
One InitProducerId (``transactional_id`` null) gives a producer id and epoch, at most one
per task and usually none once the worker's pool holds an identity (see "Producer ids that
outlive a task" in ``kafka_sink.producer_ids``, which also says how transactions use them).
Every batch of a partition gets the next sequence number when it is appended: the first
is 0 (or where a carried identity left the partition), the next ``base + record count``,
wrapping from 2**31 - 1 to 0 as Kafka does. The
bytes of a batch never change while its producer id lives: a resend is the same bytes, so
the broker recognises a batch it already has.

The answer to a batch decides its fate:

- no error, or DUPLICATE_SEQUENCE_NUMBER (46: the broker has it already): delivered.
- a retriable error (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
  NOT_ENOUGH_REPLICAS[_AFTER_APPEND], a broken connection, no answer in
  ``request.timeout.ms``, ...): the partition stops sending, waits until every batch of it
  still in flight is answered, refreshes the metadata when the leader may have moved, backs
  off (``retry.backoff.ms``, doubling up to ``retry.backoff.max.ms``, 1 s, with jitter:
  ``protocol.retry``) and resends every unacknowledged batch from the oldest, in order,
  unchanged.
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
  authorization failure, ...): the task fails; with ``deadLetterTopic``, the refusals of
  records (``dead_letters.RECORD_REFUSALS``) send them there instead (``dead_letters``).

A batch fails the task when it is not acknowledged ``delivery.timeout.ms`` after it was
appended (or after sending started, for a batch held back until then), or after
``retries`` resends.

Without idempotence (``kafka.enable.idempotence=false``) batches carry no producer id; the
retry rules are the same, so a resend after an unclear failure may duplicate records
(at-least-once, as Java's producer without idempotence). With ``acks=0`` nothing is
answered: a batch counts as delivered once written to the socket.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from kafka_common.retries import ATTEMPTS
from protocol.authorization import RESOURCE_TYPES, refine, request_error
from protocol.client.cluster import MAX_PRODUCE_VERSION_BY_NAME, KafkaClient
from protocol.client.connection import wait_readable
from protocol.errors import KafkaConnectionError, KafkaTimeoutError, ProtocolError
from protocol.primitives import ZERO_UUID
from protocol.records.batch import Record
from protocol.retry import Attempts, RetryPolicy, RetryRule, pause_until
from protocol.client.transactions import MAX_TXN_PRODUCE_VERSION

from .batch_state import (
    SEQUENCE_MODULUS,
    Batch,
    Partition,
    ProduceError,
    Request,
    SendState,
    first_uncertain,
    next_sequence,
)
from .options import WriterOptions
from .dead_letters import DeadLetters
from .produce_answers import ProduceAnswers
from .producer_ids import IDENTITY_STATE_KEY, ProducerIdentity, ProducerIds
from .txn_errors import WRITE_GRANT

__all__ = [
    "TaskProducer",
    "ProducerIdentity",
    "ProduceError",
    "SEQUENCE_MODULUS",
    "next_sequence",
    "IDENTITY_STATE_KEY",
]

log = logging.getLogger("pykafka.sink")


class TaskProducer:
    """Delivers the record batches of one write task. Not thread-safe.

    Its parts share a ``SendState`` (the partitions' queues, the requests in flight):
    ``ids`` (``ProducerIds``) the producer id and epoch, ``dead_letters`` (``DeadLetters``)
    the dead-letter topic, ``answers`` (``ProduceAnswers``) what each Produce answer
    means; this class sends, receives and keeps the leaders known."""

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
        self._requests = self._state.requests
        self._metadata_retry_at = 0.0
        self._metadata_tries: Attempts | None = None  # refreshes in a row without leaders
        self.missing_lookup_ms = 0  # how long the last partition_counts took
        self._started = False
        # the waits before a partition's resends (retry.backoff.ms / .max.ms); how many
        # sends a batch gets: kafka.retries + 1 (delivery.timeout.ms bounds them too)
        self._resend_policy = RetryPolicy.for_client(options.client_config)
        self._send_policy = RetryPolicy(attempts=options.retries + 1)
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

    @property
    def dead_lettered(self) -> int:
        """Records this task wrote to the dead-letter topic."""
        return self.dead_letters.dead_lettered

    def producer_identity(self) -> tuple[int, int]:
        """``(producer_id, epoch)`` for new batches (``ProducerIds.producer_identity``)."""
        return self.ids.producer_identity()

    def to_dead_letter_topic(
        self,
        source: str,
        source_partition: int,
        error_class: str,
        message: str,
        records: Sequence[Record],
    ) -> None:
        """Queue ``records`` for the dead-letter topic (``DeadLetters.to_dead_letter_topic``)."""
        self.dead_letters.to_dead_letter_topic(
            source, source_partition, error_class, message, records
        )

    def identity_to_keep(self) -> ProducerIdentity | None:
        """The identity the next task may go on with (``ProducerIds.identity_to_keep``)."""
        return self.ids.identity_to_keep()

    def abort_transaction(self) -> bool:
        """Abort this task's transaction (``ProducerIds.abort_transaction``)."""
        return self.ids.abort_transaction()

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
                    raise refine(
                        request_error(info.error_code, "Metadata", topic=name), grant=WRITE_GRANT
                    )
                if info is not None and not info.error_code and info.partitions:
                    self._state.topic_ids[name] = info.topic_id
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
                f"{error}"
            )

        policy = RetryPolicy(
            backoff_ms=self.options.retry_backoff_ms or 50,
            max_backoff_ms=self.options.client_config.retry_backoff_max_ms,
            timeout_ms=self.options.max_block_ms,
        )
        try:
            return policy.run(
                f"metadata of topics {topics}",
                attempt,
                give_up=gave_up,
                retriable=RetryRule(
                    types=(_TopicsMissing, KafkaConnectionError, KafkaTimeoutError)
                ),
            )
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
            self._metadata_retry_at = now + self._metadata_backoff_s()
            log.debug("metadata refresh failed: %s", e)
            for p in self._partitions.values():  # what a batch that never left waits for
                if p.leader is None and p.queue and p.queue[0].last_error is None:
                    p.queue[0].last_error = f"no leader known: metadata refresh failed: {e}"
            return
        self._state.metadata_stale = False
        for p in self._partitions.values():
            info = meta.topics.get(p.topic)
            part = info.partitions.get(p.partition) if info is not None else None
            p.leader = part.leader if part is not None and part.leader >= 0 else None
            if info is not None:
                self._state.topic_ids[p.topic] = info.topic_id
        if any(p.leader is None for p in self._partitions.values() if p.queue):
            self._state.metadata_stale = True
            self._metadata_retry_at = now + self._metadata_backoff_s()
        else:
            self._metadata_tries = None

    def _metadata_backoff_s(self) -> float:
        """The wait before the next refresh after one that failed or left a partition
        without a leader: the resend policy's backoff, growing while refreshes keep
        failing (``kafka.retry.backoff.ms`` up to ``.max.ms``, with jitter)."""
        if self._metadata_tries is None:
            self._metadata_tries = self._resend_policy.start("metadata refresh")
        delay = self._metadata_tries.failed_once()
        return self._resend_policy.max_backoff_ms / 1000 if delay is None else delay

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
            self._refresh_leaders()
        if self._state.new_id_pending:
            self.ids.maybe_new_producer_id()
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
                    f" after {b.tries.made} attempts; last error: {b.last_error or 'none'}"
                )

    # ---- sending --------------------------------------------------------------------------

    def _sendable(self, p: Partition, now: float) -> Batch | None:
        if p.resend:
            if p.in_flight:
                return None
            p.resend = False
            p.next_index = 0
        while p.next_index < len(p.queue) and p.queue[p.next_index].acked:
            p.next_index += 1
        if (
            p.next_index >= len(p.queue)
            or p.in_flight >= self._in_flight_limit(p)
            or now < p.retry_at
            or p.leader is None
        ):
            return None
        b = p.queue[p.next_index]
        if self._state.new_id_pending and b is not first_uncertain(p):
            return None  # only batches of unknown fate may go before the new id
        if b.tries.exhausted():
            raise ProduceError(
                f"Writing to {p.name} failed after {b.tries.made - 1} retries "
                f"(kafka.retries); last error: {b.last_error}"
            )
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
            self.ids.enlist()
        while True:
            now = time.monotonic()
            by_node: dict[int, list[tuple[Partition, Batch]]] = {}
            for p in self._partitions.values():
                if not p.queue:
                    continue
                b = self._sendable(p, now)
                if b is not None and p.leader is not None:  # _sendable waits for a leader
                    by_node.setdefault(p.leader, []).append((p, b))
            sent_any = False
            for node, items in by_node.items():
                if len(self._requests.get(node, ())) >= self.options.max_in_flight:
                    continue
                request: list[tuple[Partition, Batch]] = []
                size = 0
                for p, b in items:
                    if request and size + len(b.data) > self.options.max_request_size:
                        break
                    request.append((p, b))
                    size += len(b.data)
                if self._send_request(node, request):
                    sent_any = True
            if not sent_any:
                return

    def _send_request(self, node: int, items: list[tuple[Partition, Batch]]) -> bool:
        from protocol.schemas import PRODUCE

        topics: dict[str, list] = {}
        for p, b in items:
            topics.setdefault(p.topic, []).append({"index": p.partition, "records": b.data})
        ids = {t: self._state.topic_ids.get(t, ZERO_UUID) for t in topics}
        body = {
            "transactional_id": self.transactional_id,
            "acks": self.options.acks,
            "timeout_ms": self.options.request_timeout_ms,
            "topic_data": [
                {"name": t, "topic_id": ids[t], "partition_data": parts}
                for t, parts in topics.items()
            ],
        }
        acks0 = self.options.acks == 0
        try:
            conn = self.client.connection(node)
            cap = MAX_PRODUCE_VERSION_BY_NAME if any(i == ZERO_UUID for i in ids.values()) else None
            if self.transactional_id is not None:
                cap = MAX_TXN_PRODUCE_VERSION
            version = conn.version_for(PRODUCE, cap)
            cid = conn.send(PRODUCE, body, version, expect_response=not acks0)
        except (KafkaConnectionError, KafkaTimeoutError, ProtocolError) as e:
            self._connection_failed(node, e)
            for p, b in items:
                self.answers.retry(
                    p, b, f"sending to broker {node} failed: {e}", rejected=False, refresh=True
                )
            return False
        for p, b in items:
            b.sent = True
            b.tries.begin()
            p.next_index += 1
        if acks0:
            for p, b in items:
                self.answers.acked(p, b)
            return True
        for p, b in items:
            b.in_flight = True
            p.in_flight += 1
        deadline = time.monotonic() + self.options.request_timeout_ms / 1000
        self._requests.setdefault(node, deque()).append(
            Request(node, conn, cid, [b for _, b in items], deadline)
        )
        return True

    # ---- receiving ------------------------------------------------------------------------

    def _receive(self, timeout: float) -> None:
        waiting = {node: q for node, q in self._requests.items() if q}
        if not waiting:
            if timeout > 0 and self.pending:
                # nothing in flight: wait for the first partition's backoff to end
                now = time.monotonic()
                retry = min((p.retry_at for p in self._partitions.values() if p.queue), default=now)
                pause_until(retry, at_most=min(timeout, 0.05))
            return
        ready = [node for node, q in waiting.items() if q[0].conn.has_response(q[0].cid)]
        if not ready:
            first_deadline = min(q[0].deadline for q in waiting.values())
            node_of = {id(q[0].conn): node for node, q in waiting.items()}
            wait = min(timeout, first_deadline - time.monotonic())
            ready = [
                node_of[id(c)] for c in wait_readable([q[0].conn for q in waiting.values()], wait)
            ]
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
            self.answers.handle_response(request, response)

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
                self.answers.landed(p, b)
                self.answers.retry(
                    p, b, f"no answer from broker {node}: {error}", rejected=False, refresh=True
                )
        self._state.metadata_stale = True


class _TopicsMissing(Exception):
    """Topics the metadata does not have (yet): asked again, ``ATTEMPTS`` answers in all."""
