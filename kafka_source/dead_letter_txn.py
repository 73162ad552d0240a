"""The reader's dead-letter copies exactly once (``exactlyOnce=true`` with
``deadLetterTopic``).

A range a task reads (topic, partition, offsets ``[start, end)``) that has records to copy
writes them in one Kafka transaction of the transactional id
``{prefix}-dlt-{topic}-{partition}``, and commits in the same transaction a marker: the
range's end as the offset of the group ``{prefix}-dlt`` for that topic-partition
(AddOffsetsToTxn + TxnOffsetCommit), then EndTxn at the end of the range, before the task
ends. At the first record to copy, the task takes the id (InitProducerId: a transaction an
earlier attempt left open is aborted, the attempt fenced) and reads the marker (OffsetFetch
with require_stable): a marker at or past the range's end means these copies are already
committed, and the range writes nothing. So a task attempt that runs again, or a
micro-batch that a restarted query runs again, writes no copy twice, and a killed
attempt's copies are never committed.

``prefix`` is the ``transactionalIdPrefix`` option (a Python source is not told the
stream's checkpoint location); a batch read puts a token of the read after it. The
transaction client is ``protocol.client.transactions``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_common.dead_letter import OPTION, dead_letter_batch, dead_letter_partition
from kafka_common.option_map import INT32_MAX, OptionMap
from protocol.authorization import GROUP, TOPIC, TRANSACTIONAL_ID, refine, request_error
from protocol.client import transactions as txn
from protocol.client.connection import bounded_ms
from protocol.errors import ConfigError, PyKafkaError, error_class

if TYPE_CHECKING:
    from protocol.records.batch import Record

    from .offset_specs import OffsetRange

__all__ = [
    "DeadLetterTxnSpec",
    "RangeTransaction",
    "parse_exactly_once",
    "check_unsplit",
    "marker_group",
]

log = logging.getLogger("pykafka.source")

#: A Produce answer that the broker has the batch already (a resend).
DUPLICATE_SEQUENCE = error_class("DUPLICATE_SEQUENCE_NUMBER").code
TRANSACTION_TIMEOUT_OPTION = "kafka.transaction.timeout.ms"


@dataclass(frozen=True)
class DeadLetterTxnSpec:
    """The resolved prefix (with a batch read's token), the transaction timeout, and the
    ``transactionalIdPrefix`` as given (when a token follows it), which grants name."""

    prefix: str
    transaction_timeout_ms: int = 60_000
    option_prefix: str = ""

    @property
    def granted(self) -> str:
        """The prefix a principal's prefixed ACLs must cover: the option's."""
        return self.option_prefix or self.prefix

    @property
    def shape(self) -> str:
        """``prefix`` as errors show it: a batch read's token as '<token of the read>'."""
        return self.prefix if self.granted == self.prefix else f"{self.granted}-<token of the read>"


def marker_group(prefix: str) -> str:
    return f"{prefix}-dlt"


def transactional_id(prefix: str, topic: str, partition: int) -> str:
    return f"{prefix}-dlt-{topic}-{partition}"


def parse_exactly_once(
    opts: OptionMap, dead_letter_topic: str | None, for_streaming: bool
) -> DeadLetterTxnSpec | None:
    """The reader's ``exactlyOnce`` and its companions; None when it is false."""
    if not opts.boolean("exactlyOnce", False):
        return None
    if not dead_letter_topic:
        raise ConfigError(
            f"exactlyOnce: the reader writes nothing but dead-letter copies, in "
            f"transactions; set {OPTION} (with valueFormat or keyFormat), or drop exactlyOnce"
        )
    prefix = (opts.get("transactionalIdPrefix") or "").strip()
    if not prefix:
        raise ConfigError(
            "transactionalIdPrefix: a reader with exactlyOnce needs a transactionalIdPrefix "
            "(a Python source is not told the stream's checkpoint location); give each "
            'query its own, e.g. .option("transactionalIdPrefix", "orders-dead-letters")'
        )
    timeout = opts.integer(TRANSACTION_TIMEOUT_OPTION, 60_000, minimum=1, maximum=INT32_MAX)
    if for_streaming:
        return DeadLetterTxnSpec(prefix, timeout)
    return DeadLetterTxnSpec(f"{prefix}-{uuid.uuid4().hex[:10]}", timeout, option_prefix=prefix)


def check_unsplit(options, ranges: list[OffsetRange]) -> list[OffsetRange]:
    """``ranges`` (the planned input partitions), when no Kafka partition is split between
    several of them under exactlyOnce: its dead-letter copies are one task's at a time."""
    if getattr(options, "dead_letter_txn", None) is None:
        return ranges
    seen: set[tuple[str, int]] = set()
    for r in ranges:
        if r.topic_partition in seen:
            raise ConfigError(
                f"exactlyOnce: minPartitions or maxRecordsPerPartition split topic "
                f"{r.topic!r} partition {r.partition} between tasks, and a partition's "
                f"dead-letter copies are written by one task at a time: lower "
                f"minPartitions to at most the number of partitions read, or drop "
                f"maxRecordsPerPartition (with maxOffsetsPerTrigger in a stream)"
            )
        seen.add(r.topic_partition)
    return ranges


def _grant(error: BaseException, spec: DeadLetterTxnSpec) -> BaseException:
    """``error`` naming the grant the reader's exactlyOnce needs on the resource refused."""
    details = getattr(error, "authorization", None)
    if details is None:
        return error
    granted, shape = spec.granted, spec.shape
    if details.resource_type == TRANSACTIONAL_ID:
        return refine(
            error,
            grant=("Write", "Describe"),
            on=f"transactional ids starting with {granted!r} (a prefixed ACL: the reader's "
            f"ids are '{shape}-dlt-<topic>-<partition>')",
            advice="or choose a transactionalIdPrefix the principal may use",
        )
    if details.resource_type == GROUP:
        if shape == granted:
            on = f"the group {marker_group(granted)!r} (or a prefixed ACL on {granted!r})"
        else:
            on = (
                f"groups starting with {granted!r} (a prefixed ACL: a batch read's group is "
                f"{marker_group(shape)!r})"
            )
        return refine(
            error,
            grant=("Read",),
            on=f"{on}: the reader records there which ranges' dead-letter copies are committed",
        )
    if details.resource_type == TOPIC and details.request in ("AddPartitionsToTxn", "Produce"):
        return refine(error, grant=("Write", "Describe"))
    return error


class RangeTransaction:
    """One range's dead-letter copies in one transaction (see the module docstring)."""

    def __init__(self, client, spec: DeadLetterTxnSpec, topic: str, partition: int, end: int):
        self.client, self.spec = client, spec
        self.topic, self.partition, self.end = topic, partition, end
        self.tid = transactional_id(spec.prefix, topic, partition)
        self.ids: tuple[int, int] | None = None  # (producer id, epoch) once begun
        self.committed_before = False  # the marker showed the copies committed
        self.enlisted: set[tuple[str, int]] = set()
        self.sequences: dict[tuple[str, int], int] = {}
        self.done = False

    def _timeout_ms(self, deadline: float | None) -> int:
        return bounded_ms(self.client.config.request_timeout_ms, deadline)

    def begin(self, deadline: float | None) -> bool:
        """Take the id and read the marker (once); whether copies are to be written."""
        if self.ids is None and not self.committed_before:
            try:
                self.ids = txn.init_producer_id(
                    self.client,
                    self.tid,
                    self.spec.transaction_timeout_ms,
                    timeout_ms=self._timeout_ms(deadline),
                )
                offsets = txn.fetch_stable_offsets(
                    self.client,
                    marker_group(self.spec.prefix),
                    [(self.topic, self.partition)],
                    timeout_ms=self._timeout_ms(deadline),
                )
            except PyKafkaError as e:
                raise _grant(e, self.spec) from e
            marker = offsets.get((self.topic, self.partition), (-1, None))[0]
            if marker >= self.end:
                self.committed_before = True
                log.info(
                    "topic %r partition %d: the dead-letter copies of offsets up to %d were "
                    "committed by an earlier attempt: not written again",
                    self.topic,
                    self.partition,
                    self.end,
                )
        return not self.committed_before

    def send(self, dlt_topic: str, records: Sequence[Record], deadline: float | None) -> bool:
        """Write ``records`` to ``dlt_topic`` in the transaction; False when they were
        committed before (nothing written)."""
        if not records or not self.begin(deadline):
            return False
        assert self.ids is not None
        producer_id, epoch = self.ids
        count = len(self.client.topic(dlt_topic, deadline).partitions)
        tp = (dlt_topic, dead_letter_partition(self.partition, count))
        try:
            if tp not in self.enlisted:
                txn.add_partitions(
                    self.client,
                    self.tid,
                    producer_id,
                    epoch,
                    [tp],
                    timeout_ms=self._timeout_ms(deadline),
                )
                self.enlisted.add(tp)
        except PyKafkaError as e:
            raise _grant(e, self.spec) from e
        sequence = self.sequences.get(tp, 0)
        batch = dead_letter_batch(
            records,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        )

        def attempt() -> None:
            answer = self.client.produce(
                tp[0],
                tp[1],
                batch,
                acks=-1,
                transactional_id=self.tid,
                deadline=deadline,
                max_version=txn.MAX_TXN_PRODUCE_VERSION,
            )
            code = answer["error_code"]
            if code and code != DUPLICATE_SEQUENCE:
                error = request_error(
                    code,
                    "Produce",
                    answer.get("error_message"),
                    topic=tp[0],
                    partition=tp[1],
                    transactional_id=self.tid,
                )
                raise _grant(error, self.spec)

        what = f"writing {len(records)} records to the dead-letter topic {dlt_topic!r}"
        self.client.retrying(what, attempt, deadline=deadline)
        self.sequences[tp] = sequence + len(records)
        return True

    def commit(self, deadline: float | None) -> None:
        """The marker and EndTxn commit, when copies were written."""
        if self.done or self.ids is None or self.committed_before:
            return
        self.done = True
        if not self.enlisted:  # pragma: no cover - begin() is only called to send
            return
        producer_id, epoch = self.ids
        group = marker_group(self.spec.prefix)
        timeout = self._timeout_ms(deadline)
        try:
            txn.add_offsets(self.client, self.tid, producer_id, epoch, group, timeout_ms=timeout)
            txn.txn_offset_commit(
                self.client,
                self.tid,
                producer_id,
                epoch,
                group,
                {(self.topic, self.partition): self.end},
                "pyspark-pykafka dead-letter copies",
                timeout_ms=timeout,
            )
            txn.end_txn(self.client, self.tid, producer_id, epoch, True, timeout_ms=timeout)
        except PyKafkaError as e:
            raise _grant(e, self.spec) from e

    def abort(self) -> None:
        """Best effort, when the range's reading stops early: abort the open transaction
        (else the next attempt's InitProducerId, or the transaction timeout, does)."""
        if self.done or self.ids is None or self.committed_before or not self.enlisted:
            return
        self.done = True
        producer_id, epoch = self.ids
        try:
            txn.end_txn(self.client, self.tid, producer_id, epoch, False, timeout_ms=5_000)
        except Exception as e:  # noqa: BLE001 - the timeout aborts it anyway
            log.debug("aborting the dead-letter transaction %r failed: %s", self.tid, e)
