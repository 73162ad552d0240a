"""What one task of the sink tells the driver: ``KafkaCommitMessage`` (the records and
bytes it wrote per partition, its producer ids, its open transaction with exactlyOnce),
made by the task (``kafka_sink.task``) and read by the driver's commit
(``kafka_sink.writer``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Iterable

from pyspark.sql.datasource import WriterCommitMessage

from .transactions import TaskTransaction

__all__ = ["KafkaCommitMessage", "totals"]


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: ``{(topic, partition): (records, bytes)}`` (bytes of record
    batches as sent, after compression) and the producer ids it used."""

    partitions: dict = field(default_factory=dict)
    producer_ids: tuple = ()
    transaction: TaskTransaction | None = None

    @property
    def records(self) -> int:
        return sum(r for r, _ in self.partitions.values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.partitions.values())

    def per_topic(self) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = {}
        for (topic, _), (records, size) in self.partitions.items():
            entry = out.setdefault(topic, [0, 0])
            entry[0] += records
            entry[1] += size
        return {t: (r, b) for t, (r, b) in out.items()}


def totals(messages: Iterable) -> dict[str, tuple[int, int]]:
    """Records and bytes per topic over the commit messages of a job (None skipped)."""
    out: dict[str, list[int]] = {}
    for message in messages:
        if isinstance(message, KafkaCommitMessage):
            for topic, (records, size) in message.per_topic().items():
                entry = out.setdefault(topic, [0, 0])
                entry[0] += records
                entry[1] += size
    return {t: (r, b) for t, (r, b) in sorted(out.items())}
