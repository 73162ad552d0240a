"""Dead-letter records: a record that cannot be read or written, copied unchanged (key,
value, headers, timestamp) with headers that say where it came from and why.

Kafka Connect's dead-letter queue (``errors.deadletterqueue.topic.name``, its context
headers ``__connect.errors.*``) is the model; the headers here are our own names:

- ``pykafka.error.topic``, ``pykafka.error.partition``, ``pykafka.error.offset``: where
  the record was read from (the reader), or where it was to be written (the writer: no
  offset, the record had none);
- ``pykafka.error.stage``: ``KEY_DECODE``, ``VALUE_DECODE`` (the reader) or ``PRODUCE``
  (the writer);
- ``pykafka.error.class``: the error's name (``ValueDecodeError``, ``RECORD_TOO_LARGE``,
  ``INVALID_RECORD``, ...); ``pykafka.error.message``: its message.

Header values are UTF-8 text. The record's own headers come first, unchanged.

On the driver, when the query is planned, both check that the dead-letter topic exists
(``check_dead_letter_topic``): a missing one fails the query at once, naming the option.

Both sides build their dead-letter records here (``dead_letter_record``) and pick the
dead-letter partition the same way (``dead_letter_partition``); the reader sends them with
``send_dead_letters``, the writer through its own producer (in its transaction with
``exactlyOnce``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafka_common.retries import ATTEMPTS, INTERVAL_MS, missing_topics_message, with_retries
from protocol.authorization import RESOURCE_TYPES, refine, request_error
from protocol.errors import BrokerError, ConfigError, PyKafkaError

if TYPE_CHECKING:  # the planner imports this module (the option's name): no codec there
    from protocol.records.batch import Record

__all__ = [
    "HEADER_PREFIX",
    "TOPIC_HEADER",
    "PARTITION_HEADER",
    "OFFSET_HEADER",
    "STAGE_HEADER",
    "CLASS_HEADER",
    "MESSAGE_HEADER",
    "OPTION",
    "WRITE_GRANT",
    "check_dead_letter_topic",
    "context_headers",
    "dead_letter_record",
    "dead_letter_partition",
    "send_dead_letters",
]

HEADER_PREFIX = "pykafka.error."
TOPIC_HEADER = HEADER_PREFIX + "topic"
PARTITION_HEADER = HEADER_PREFIX + "partition"
OFFSET_HEADER = HEADER_PREFIX + "offset"
STAGE_HEADER = HEADER_PREFIX + "stage"
CLASS_HEADER = HEADER_PREFIX + "class"
MESSAGE_HEADER = HEADER_PREFIX + "message"
#: The option naming the dead-letter topic, the reader's and the writer's.
OPTION = "deadLetterTopic"
#: What writing dead letters needs on the dead-letter topic.
WRITE_GRANT = ("Write", "Describe")
#: A message longer than this is cut (a header is no place for a stack of causes).
MAX_MESSAGE_CHARS = 4000


class _NotInMetadata(PyKafkaError):
    """The dead-letter topic is not (yet) in the metadata: asked again like a broken lookup
    (a topic created a moment ago may take one more round to show)."""


def check_dead_letter_topic(
    client,
    topic: str,
    *,
    log: logging.Logger,
    attempts: int = ATTEMPTS,
    interval_ms: int = INTERVAL_MS,
) -> None:
    """On the driver, when the query is planned: the dead-letter ``topic`` exists, looked
    up as the reader looks up its topics (``kafka_common.retries.with_retries``: by
    default 3 attempts 1 s apart). A missing topic is a ``ConfigError`` naming the option
    and the topic (dead-letter topics are not created: create it first); a topic the
    principal may not describe names the grant (Write and Describe on it)."""

    def look() -> None:
        info = client.refresh_metadata([topic]).topics.get(topic)
        if info is not None and info.error_code in RESOURCE_TYPES:
            raise refine(request_error(info.error_code, "Metadata", topic=topic), grant=WRITE_GRANT)
        if info is None or info.error_code in (3, 5) or not info.partitions:
            raise _NotInMetadata(f"topic {topic!r} is not in the metadata")
        if info.error_code:
            raise BrokerError.for_code(info.error_code, topic=topic)

    try:
        with_retries(
            f"checking the dead-letter topic {topic!r}",
            look,
            config=client.config,
            attempts=attempts,
            interval_ms=interval_ms,
            log=log,
        )
    except _NotInMetadata:
        raise ConfigError(
            f"{missing_topics_message(OPTION, [topic])} (dead-letter topics are not "
            f"created by the connector: create it first)"
        ) from None


def context_headers(
    topic: str, partition: int, offset: int | None, stage: str, error_class: str, message: str
) -> list[tuple[str, bytes]]:
    """The context headers of one dead-letter record."""
    out = [
        (TOPIC_HEADER, topic.encode()),
        (PARTITION_HEADER, str(partition).encode()),
    ]
    if offset is not None:
        out.append((OFFSET_HEADER, str(offset).encode()))
    out += [
        (STAGE_HEADER, stage.encode()),
        (CLASS_HEADER, error_class.encode()),
        (MESSAGE_HEADER, message[:MAX_MESSAGE_CHARS].encode()),
    ]
    return out


def dead_letter_record(
    index: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    context: list[tuple[str, bytes]],
) -> Record:
    """The record as it was, its headers followed by ``context``, at offset ``index`` of
    the dead-letter batch being built."""
    from protocol.records.batch import Record

    return Record(index, timestamp_ms, key, value, tuple(headers or ()) + tuple(context))


def dead_letter_partition(source_partition: int, partitions: int) -> int:
    """The dead-letter partition of a record of ``source_partition``: the same number
    modulo the dead-letter topic's partitions, so that records of one partition stay in
    order there."""
    return source_partition % partitions


def dead_letter_batch(records: Sequence[Record], **producer: Any) -> bytes:
    """One record batch of ``records`` (offsets from 0), with the producer fields given
    (producer id, epoch, base sequence, transactional) or none."""
    from protocol.records.batch import build_batch

    renumbered = [r._replace(offset=i) for i, r in enumerate(records)]
    return build_batch(renumbered, base_offset=0, **producer)


def send_dead_letters(
    client,
    topic: str,
    source_partition: int,
    records: Sequence[Record],
    deadline: float | None = None,
) -> None:
    """Write ``records`` to the dead-letter ``topic`` (acks=all, under the client's retry
    policy, no wait past ``deadline``: the reading's, a ``time.monotonic()``) and return
    once Kafka has them. At least once: a retry after an unclear failure, or a task
    attempt that runs again, may write a record twice."""
    if not records:
        return

    def attempt() -> None:
        info = client.topic(topic, deadline)
        partition = dead_letter_partition(source_partition, len(info.partitions))
        batch = dead_letter_batch(records)
        answer = client.produce(topic, partition, batch, acks=-1, deadline=deadline)
        code = answer["error_code"]
        if code:
            raise request_error(
                code,
                "Produce",
                answer.get("error_message"),
                topic=topic,
                partition=partition,
            )

    what = f"writing {len(records)} records to the dead-letter topic {topic!r}"
    client.retrying(what, attempt, deadline=deadline)
