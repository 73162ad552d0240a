"""What a Produce answer means for each batch it answers (``TaskProducer`` holds a
``ProduceAnswers``): acknowledged, resent from the partition's
oldest unacknowledged batch after the resend backoff (``protocol.retry``), a new producer
id to take first (a gap in the sequence), or the task's end (fenced, refused, an error
that is not retriable). The rules: "Idempotent, at-least-once by default" in
docs/writing.md."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from protocol.authorization import refine, request_error

from .batch_state import (
    DUPLICATE,
    FENCED,
    GAP,
    REFRESH,
    REJECTED,
    Batch,
    Partition,
    ProduceError,
    Request,
    SendState,
    describe,
)
from protocol.retry import PRODUCE

from .dead_letters import RECORD_REFUSALS, DeadLetters
from .txn_errors import WRITE_GRANT, transaction_hint

if TYPE_CHECKING:
    from protocol.retry import Attempts, RetryPolicy

    from .options import WriterOptions
    from .producer_ids import ProducerIds

__all__ = ["ProduceAnswers"]

log = logging.getLogger("pykafka.sink")

OUT_OF_ORDER = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


def _backoff(resends: Attempts, policy: RetryPolicy) -> float:
    """The wait before the next resend; the longest backoff once ``resends`` has no
    attempts left (a resend's count is bounded by its batch's tries, not here)."""
    delay = resends.failed_once()
    return policy.max_backoff_ms / 1000 if delay is None else delay


def _oldest_unacked(p: Partition) -> Batch:
    """The partition's oldest batch the broker has not acknowledged: the next sequence."""
    return next(q for q in p.queue if not q.acked)


class ProduceAnswers:
    """Applies the answers to a ``TaskProducer``'s Produce requests to its batches."""

    def __init__(
        self,
        state: SendState,
        options: WriterOptions,
        ids: ProducerIds,
        dead_letters: DeadLetters,
        resend_policy: RetryPolicy,
    ):
        self._state = state
        self._options = options
        self._ids = ids
        self._dead_letters = dead_letters
        self._resend_policy = resend_policy

    def handle_response(self, request: Request, response: dict) -> None:
        """The answer ``response`` to ``request``: each batch's fate."""
        by_key = {(b.topic, b.partition): b for b in request.batches}
        names = {v: k for k, v in self._state.topic_ids.items()}
        answered: set[tuple[str, int]] = set()
        for topic in response.get("responses", ()):
            name = topic.get("name") or names.get(topic.get("topic_id"))
            if name is None:
                continue  # a topic this request did not write to
            for part in topic["partition_responses"]:
                key = (name, part["index"])
                b = by_key.get(key)
                if b is None or key in answered:
                    continue
                answered.add(key)
                self._handle_partition(b, part)
        for key, b in by_key.items():
            if key not in answered:
                p = self._state.partitions[key]
                self.landed(p, b)
                self.retry(
                    p,
                    b,
                    f"broker {request.node} did not answer for this partition",
                    rejected=False,
                    refresh=True,
                )

    def landed(self, p: Partition, b: Batch) -> None:
        """``b``'s request was answered (or lost): it is no longer in flight."""
        if b.in_flight:
            b.in_flight = False
            p.in_flight -= 1

    def _handle_partition(self, b: Batch, part: dict) -> None:
        p = self._state.partitions[(b.topic, b.partition)]
        self.landed(p, b)
        code = part["error_code"]
        stale, b.stale_send = b.stale_send, False
        ids = self._ids
        if code == 0 or (code == DUPLICATE and ids.idempotent):
            self.acked(p, b)
            return
        error = request_error(
            code,
            "Produce",
            describe(part),
            topic=b.topic,
            partition=b.partition,
            transactional_id=ids.transactional_id,
        )
        if code in FENCED:
            if ids.transactional_id is not None:
                raise ProduceError(
                    f"Writing to {p.name} failed: " + transaction_hint(error, ids.transactional_id)
                )
            raise ProduceError(
                f"Writing to {p.name} failed: the producer was fenced "
                f"(producer id {ids.producer_id}, epoch {ids.epoch}): {error}"
            )
        if code in GAP and stale:
            # renumbered (a batch before it went to the dead-letter topic) while in flight
            self.retry(p, b, str(error), rejected=True, refresh=False)
            return
        if self._dead_letters.takes_refusal(b, code):
            self._dead_letters.dead_letter(p, b, error, part)
            return
        if code in RECORD_REFUSALS and b.topic == self._options.dead_letter_topic:
            raise self._dead_letters.refused_dead_letters(p, b, error)
        if code in GAP and ids.transactional_id is not None:
            if code == OUT_OF_ORDER and _oldest_unacked(p) is not b:
                # an earlier batch has not landed (it failed with a retriable error such as
                # NOT_LEADER_OR_FOLLOWER on a new topic, or is still on its way): this one
                # was refused, not lost; resend from the oldest, as Kafka's Java producer
                # retries an out-of-order batch that is not the next sequence
                self.retry(p, b, str(error), rejected=True, refresh=False)
                return
            raise ProduceError(
                f"Writing to {p.name} failed: {error}: the broker lost this "
                f"transaction's sequence; the task fails and its transaction "
                f"is aborted"
            )
        if code in GAP and ids.idempotent:
            if _oldest_unacked(p) is b:
                log.warning(
                    "%s: %s on the oldest unacknowledged batch (sequence %d): "
                    "starting over with a new producer id",
                    p.name,
                    error.name,
                    b.sequence,
                )
                self._state.new_id_pending = True
            self.retry(p, b, str(error), rejected=True, refresh=False)
            return
        if PRODUCE(error):
            self.retry(p, b, str(error), rejected=code in REJECTED, refresh=code in REFRESH)
            return
        if error.authorization is not None:
            said = (
                transaction_hint(error, ids.transactional_id, self._options.transactional_id_prefix)
                if ids.transactional_id is not None
                else str(refine(error, grant=WRITE_GRANT))
            )
            raise ProduceError(f"Writing to {p.name} failed: {said}")
        raise ProduceError(f"Writing to {p.name} failed: {error}")

    def acked(self, p: Partition, b: Batch) -> None:
        """The broker has ``b`` (or, with ``acks=0``, it was written to the socket)."""
        if b.acked:
            return
        b.acked = True
        b.rejected = False
        p.confirmed = True
        self._state.buffered_bytes -= len(b.data)
        stat = self._state.stats.setdefault((b.topic, b.partition), [0, 0])
        stat[0] += b.count
        stat[1] += len(b.data)
        while p.queue and p.queue[0].acked:
            self._state.recycle(p.queue.popleft())
            p.next_index = max(0, p.next_index - 1)
        p.resends = None

    def retry(self, p: Partition, b: Batch, message: str, *, rejected: bool, refresh: bool) -> None:
        """Resend ``p`` from its oldest unacknowledged batch after the resend backoff;
        ``refresh``: look the leaders up first."""
        b.last_error = message
        b.rejected = rejected
        if not p.resend:
            p.resend = True
            if p.resends is None:
                p.resends = self._resend_policy.start(f"resending to {p.name}")
            p.retry_at = time.monotonic() + _backoff(p.resends, self._resend_policy)
        if refresh:
            self._state.metadata_stale = True
        log.debug("%s: will resend from the oldest unacknowledged batch: %s", p.name, message)
