"""The producer's bookkeeping: batches, partitions, sequence numbers, error classes.

``TaskProducer`` (``producer``) drives the sending; this module holds what it keeps track
of and the rules that need no socket:

- ``next_sequence`` numbers batches as Kafka does (wrapping at 2**31) and ``restamp``
  rewrites a batch's producer id, epoch and base sequence (and its CRC) for a new producer
  id;
- ``Batch`` (one encoded record batch and its fate), ``Partition`` (the unacknowledged
  batches of one partition, oldest first, and its sending state) and ``Request`` (one
  Produce request in flight), and ``SendState``, what the producer's parts share;
- the Produce error codes grouped by what they mean for a batch (``REJECTED``, ``REFRESH``,
  ``FENCED``, ``DUPLICATE``, ``GAP``), ``first_uncertain`` and ``describe``.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.errors import PyKafkaError
from protocol.records import batch as _batch
from protocol.records import checksum as _checksum
from protocol.retry import PRODUCE, Attempts

if TYPE_CHECKING:
    from protocol.client.connection import BrokerConnection

__all__ = [
    "SEQUENCE_MODULUS",
    "ProduceError",
    "next_sequence",
    "restamp",
    "Batch",
    "Partition",
    "Request",
    "SendState",
    "REJECTED",
    "REFRESH",
    "FENCED",
    "DUPLICATE",
    "GAP",
    "first_uncertain",
    "describe",
]

SEQUENCE_MODULUS = 2**31
#: Errors after which the broker has certainly not written the batch.
REJECTED = PRODUCE.codes
#: Errors after which the partition's leader may have changed.
REFRESH = frozenset({3, 5, 6, 13, 74, 103})
FENCED = frozenset({47, 90})
DUPLICATE = 46
GAP = frozenset({45, 59})
_HEADER_IDS = struct.Struct(">qhi")  # producer id, epoch, base sequence (at offset 43)
_UINT32 = struct.Struct(">I")


class ProduceError(PyKafkaError):
    """A write task could not deliver its records; names the topic and partition."""


def next_sequence(sequence: int, count: int) -> int:
    """The sequence after a batch of ``count`` records starting at ``sequence``."""
    return (sequence + count) % SEQUENCE_MODULUS


def restamp(data: bytes, producer_id: int, epoch: int, base_sequence: int) -> bytes:
    """The batch with new producer id, epoch and base sequence, and its CRC redone."""
    out = bytearray(data)
    _HEADER_IDS.pack_into(out, _batch.PRODUCER_ID_OFFSET, producer_id, epoch, base_sequence)
    crc = _checksum.crc32c(memoryview(out)[_batch.ATTRIBUTES_OFFSET :])
    _UINT32.pack_into(out, _batch.CRC_OFFSET, crc)
    return bytes(out)


#: Delivered batches' buffers kept for reuse (``SendState.recycle``).
SPARE_BUFFERS = 4


@dataclass(eq=False)
class Batch:
    topic: str
    partition: int
    data: bytes
    count: int
    deadline: float
    sequence: int = -1
    sent: bool = False  # sent at least once under the current producer id
    in_flight: bool = False
    acked: bool = False
    rejected: bool = False  # the last answer says the broker did not write it
    #: renumbered while in flight (``dead_letters``): its next answer is to its old sequence
    stale_send: bool = False
    #: the sends of this batch (``kafka.retries``)
    tries: Attempts = field(kw_only=True)
    last_error: str | None = None


@dataclass(eq=False)
class Partition:
    topic: str
    partition: int
    queue: deque = field(default_factory=deque)  # unacknowledged batches, oldest first
    next_index: int = 0  # the next batch of the queue to send
    in_flight: int = 0
    confirmed: bool = False  # the broker acknowledged a batch of this producer id and epoch
    next_sequence: int = 0
    resend: bool = False  # restart from the oldest once nothing is in flight
    retry_at: float = 0.0
    #: the resends in a row (their backoff), a ``protocol.retry.Attempts``; None once
    #: the broker acknowledged a batch again
    resends: Attempts | None = None
    leader: int | None = None

    @property
    def name(self) -> str:
        return f"topic {self.topic!r} partition {self.partition}"


@dataclass(eq=False)
class Request:
    node: int
    conn: BrokerConnection
    cid: int
    batches: list[Batch]
    deadline: float


@dataclass(eq=False)
class SendState:
    """What the parts of ``TaskProducer`` share: the partitions' queues, the requests in
    flight per broker, what is buffered and what was delivered."""

    partitions: dict[tuple[str, int], Partition] = field(default_factory=dict)
    requests: dict[int, deque[Request]] = field(default_factory=dict)  # node -> oldest first
    topic_ids: dict[str, object] = field(default_factory=dict)
    buffered_bytes: int = 0  # bytes of batches appended and not yet acknowledged
    #: (topic, partition) -> [records, bytes] acknowledged
    stats: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    metadata_stale: bool = False  # the leaders must be looked up before the next send
    #: a gap in a partition's sequence: a new producer id once no batch's fate is unknown
    new_id_pending: bool = False
    #: buffers of delivered batches, for the encoder to write new batches into
    spare: list[bytearray] = field(default_factory=list)

    def recycle(self, b: Batch) -> None:
        """``b`` was delivered and left its queue: keep its buffer (a few at most) for the
        next batch the encoder writes. A fresh buffer of a megabyte costs the process a
        page fault per page it writes; a reused one costs none."""
        if isinstance(b.data, bytearray) and len(self.spare) < SPARE_BUFFERS:
            self.spare.append(b.data)
        b.data = b""  # nothing reads a delivered batch's bytes again

    def spare_buffer(self) -> bytearray | None:
        """A delivered batch's buffer to write a new batch into, or None."""
        return self.spare.pop() if self.spare else None

    @property
    def pending(self) -> bool:
        """Whether a batch is still unacknowledged."""
        return any(p.queue for p in self.partitions.values())


def first_uncertain(p: Partition) -> Batch | None:
    """The oldest unacknowledged batch of ``p`` when its fate is unknown: it was sent and
    no answer said it was not written. Brokers append a producer's batches of a partition
    in sequence order, so when the oldest unacknowledged batch was certainly not written
    (or never sent), no younger one was either."""
    for q in p.queue:
        if q.acked:
            continue
        if q.sent and not q.rejected and not q.in_flight:
            return q
        return None
    return None


def describe(part: dict) -> str | None:
    details = []
    if part.get("error_message"):
        details.append(part["error_message"])
    for e in part.get("record_errors") or ():
        details.append(f"record {e.get('batch_index')}: {e.get('batch_index_error_message')}")
    return "; ".join(details) or None
