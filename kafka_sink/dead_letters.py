"""The writer's dead-letter topic (``deadLetterTopic``): records the broker refuses for
themselves go there instead of failing the task (``TaskProducer`` holds a
``DeadLetters``).

Refusals of records, not of the connection, the cluster or a grant (``RECORD_REFUSALS``):
MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_TIMESTAMP and INVALID_RECORD. A refused
batch is taken apart: INVALID_RECORD names the refused records (``record_errors``, Produce
v8+), which go to the dead-letter topic while the others are sent again as one batch;
otherwise a batch of one record goes to the dead-letter topic and a batch of several is
sent again one batch per record, so that each record's own answer decides.

The broker appends nothing of a refused batch, so the batches taking its place and every
younger unacknowledged batch of the partition are renumbered from the refused batch's
sequence (``batch_state.restamp``) and resent from the oldest; a younger batch already in
flight gets OUT_OF_ORDER_SEQUENCE_NUMBER, the echo of that, and is retried. Dead-letter
records are appended to this producer like any others (in its transaction with
``exactlyOnce``): each record ends in its topic or in the dead-letter topic, and a failed
task leaves neither. A refusal by the dead-letter topic itself fails the task, naming both
topics. A record larger than ``kafka.max.request.size`` is handed here by the task
(``to_dead_letter_topic``, RECORD_TOO_LARGE) and its copy goes in a request of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kafka_common.dead_letter import (
    OPTION,
    TOPIC_HEADER,
    context_headers,
    dead_letter_batch,
    dead_letter_partition,
    dead_letter_record,
)
from protocol.records.batch import Record, build_batch
from protocol.records.reference_decode import decode_batch

from .batch_state import Batch, Partition, ProduceError, SendState, next_sequence, restamp

if TYPE_CHECKING:
    from protocol.retry import RetryPolicy
    from protocol.errors import BrokerError

    from .options import WriterOptions
    from .producer_ids import ProducerIds

__all__ = ["DeadLetters", "RECORD_REFUSALS"]

log = logging.getLogger("pykafka.sink")

#: Produce errors about the records of a batch: MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
#: INVALID_TIMESTAMP, INVALID_RECORD.
RECORD_REFUSALS = frozenset({10, 18, 32, 87})


#: ``TaskProducer.append``: queue a batch of ``count`` records built by ``build(producer_id,
#: epoch, base_sequence)`` for a partition
Append = Callable[[str, int, int, Callable[[int, int, int], bytes]], None]


class DeadLetters:
    """The dead-letter topic of a ``TaskProducer``: takes refused batches apart and
    queues their refused records for the dead-letter topic with ``append``."""

    def __init__(
        self,
        state: SendState,
        options: WriterOptions,
        ids: ProducerIds,
        append: Append,
        partition_counts: Callable[[list[str]], dict[str, int]],
        send_policy: RetryPolicy,
    ):
        self._state = state
        self._options = options
        self._ids = ids
        self._append = append
        self._partition_counts = partition_counts
        self._send_policy = send_policy
        self.dead_lettered = 0  # records this task wrote to the dead-letter topic
        self._counts: dict[str, int] | None = None  # the topic's partitions, looked up once

    def takes_refusal(self, b: Batch, code: int) -> bool:
        """Whether a refusal ``code`` of ``b`` sends records to the dead-letter topic."""
        topic = self._options.dead_letter_topic
        return bool(topic) and code in RECORD_REFUSALS and b.topic != topic

    def dead_letter(self, p: Partition, b: Batch, error: BrokerError, part: dict) -> None:
        """``b`` was refused for its records: the refused ones to the dead-letter topic,
        the rest sent again in its place."""
        _, records = decode_batch(b.data, topic=b.topic, partition=b.partition)
        named = {int(e["batch_index"]) for e in part.get("record_errors") or ()}
        named &= set(range(len(records)))
        if named:
            refused = sorted(named)
            groups = [[r for i, r in enumerate(records) if i not in named]]
        elif len(records) == 1:
            refused, groups = [0], []
        else:
            refused, groups = [], [[r] for r in records]
        self._replace(p, b, [g for g in groups if g])
        if refused:
            self.to_dead_letter_topic(
                b.topic, b.partition, error.name, str(error), [records[i] for i in refused]
            )
        log.info(
            "%s: a batch of %d records was refused (%s): %d to the dead-letter topic %r, "
            "%d sent again",
            p.name,
            len(records),
            error.name,
            len(refused),
            self._options.dead_letter_topic,
            len(records) - len(refused),
        )

    def _replace(self, p: Partition, b: Batch, groups: list[list[Record]]) -> None:
        """``b`` replaced in its partition's queue by a batch per group, and the batches
        from there on renumbered from ``b``'s sequence."""
        at = p.queue.index(b)
        transactional = self._ids.transactional_id is not None
        fresh = [
            Batch(
                b.topic,
                b.partition,
                build_batch(
                    [r._replace(offset=i) for i, r in enumerate(g)],
                    base_offset=0,
                    compression=self._options.compression_type,
                    transactional=transactional,
                ),
                len(g),
                b.deadline,
                tries=self._send_policy.start(f"sending to {p.name}"),
            )
            for g in groups
        ]
        del p.queue[at]
        for i, nb in enumerate(fresh):
            p.queue.insert(at + i, nb)
        self._state.buffered_bytes += sum(len(nb.data) for nb in fresh) - len(b.data)
        if self._ids.idempotent or transactional:
            ids = self._ids
            sequence = b.sequence
            for q in list(p.queue)[at:]:
                q.data = restamp(q.data, ids.producer_id, ids.epoch, sequence)
                q.stale_send = q.in_flight  # its answer is to its old sequence
                q.sequence = sequence
                sequence = next_sequence(sequence, q.count)
            p.next_sequence = sequence
        p.resend = True
        p.retry_at = time.monotonic()

    def to_dead_letter_topic(
        self,
        source: str,
        source_partition: int,
        error_class: str,
        message: str,
        records: Sequence[Record],
    ) -> None:
        """``records`` (of topic ``source``, for its partition ``source_partition``) queued
        for the dead-letter topic with the context headers of ``error_class``/``message``."""
        topic = self._options.dead_letter_topic
        if not topic:  # pragma: no cover - callers check takes_refusal / the option first
            raise ProduceError(f"{OPTION} is not set: records of topic {source!r} cannot go there")
        counts = self._counts or self._partition_counts([topic])
        self._counts = counts
        if topic not in counts:
            raise ProduceError(
                f"{OPTION}={topic!r}: the dead-letter topic does not exist (records refused "
                f"by topic {source!r} partition {source_partition} were to go there): create it"
            )
        context = context_headers(source, source_partition, None, "PRODUCE", error_class, message)
        letters = [
            dead_letter_record(i, r.timestamp, r.key, r.value, r.headers, context)
            for i, r in enumerate(records)
        ]
        partition = dead_letter_partition(source_partition, counts[topic])
        transactional = self._ids.transactional_id is not None

        def build(producer_id: int, epoch: int, sequence: int) -> bytes:
            return dead_letter_batch(
                letters,
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=sequence,
                transactional=transactional,
            )

        self._append(topic, partition, len(letters), build)
        self.dead_lettered += len(letters)

    def refused_dead_letters(self, p: Partition, b: Batch, error: BrokerError) -> ProduceError:
        """The error of a dead-letter batch ``b`` that the dead-letter topic refused too:
        it names both topics."""
        _, records = decode_batch(b.data, topic=b.topic, partition=b.partition)
        sources = sorted(
            {(dict(r.headers).get(TOPIC_HEADER) or b"?").decode(errors="replace") for r in records}
        )
        return ProduceError(
            f"Writing to {p.name} failed: {error}. The dead-letter topic ({OPTION}="
            f"{b.topic!r}) refused records that topic(s) {', '.join(map(repr, sources))} "
            f"refused or that exceeded kafka.max.request.size: they are in neither. Give the "
            f"dead-letter topic a max.message.bytes larger than the largest record written"
        )
