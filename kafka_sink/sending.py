"""The wire side of a write task's producer: Produce requests out, their answers in.

``Sender`` groups the partitions' next batches by leader into Produce requests (at most one
batch per partition, up to ``max.request.size`` bytes, at most
``max.in.flight.requests.per.connection`` requests waiting on a connection), waits on
whichever connections have something to read (``wait_readable``) and hands each answer to
``ProduceAnswers``, which decides what it means. A connection that breaks loses every
request in flight on it: their batches are retried. It shares the producer's
``SendState``; it never decides a batch's fate itself.
"""

from __future__ import annotations

import time
from collections import deque

from protocol.client.cluster import MAX_PRODUCE_VERSION_BY_NAME, KafkaClient
from protocol.client.connection import wait_readable
from protocol.client.transactions import MAX_TXN_PRODUCE_VERSION
from protocol.errors import KafkaConnectionError, KafkaTimeoutError, ProtocolError
from protocol.primitives import ZERO_UUID
from protocol.retry import pause_until

from .batch_state import Batch, Partition, ProduceError, Request, SendState, first_uncertain
from .options import WriterOptions
from .produce_answers import ProduceAnswers
from .producer_ids import ProducerIds

__all__ = ["Sender"]


class Sender:
    """Sends the batches that may go and receives the answers. Not thread-safe."""

    def __init__(
        self,
        state: SendState,
        options: WriterOptions,
        client: KafkaClient,
        ids: ProducerIds,
        answers: ProduceAnswers,
        transactional_id: str | None,
    ):
        self._state = state
        self._partitions = state.partitions
        self._requests = state.requests
        self.options = options
        self.client = client
        self.ids = ids
        self.answers = answers
        self.transactional_id = transactional_id
        self.idempotent = options.enable_idempotence

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

    def send_ready(self) -> None:
        """Send every batch that may go now, as many requests as the limits allow."""
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

    def receive(self, timeout: float) -> None:
        """Handle the answers that arrive within ``timeout`` seconds (at least those
        already there), and the requests past their deadline."""
        waiting = {node: q for node, q in self._requests.items() if q}
        if not waiting:
            if timeout > 0 and self._state.pending:
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
