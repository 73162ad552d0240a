"""The reader's records that cannot be decoded (``valueFormat``/``keyFormat``), under mode
DROPMALFORMED or PERMISSIVE: copied to ``deadLetterTopic`` when it is set
(``kafka_common.dead_letter``: the record unchanged, with headers naming its topic,
partition and offset and the error), left out of the result under DROPMALFORMED, kept with
a null value under PERMISSIVE. A range reader holds one ``MalformedRecords`` and calls
``decode`` on each batch it hands to Spark; ``report`` logs at INFO how many records of
the range went to the dead-letter topic (or were dropped).

A batch's dead-letter records are in Kafka before the batch goes to Spark: a record is in
the result or in the dead-letter topic. Without ``exactlyOnce`` at least once there: a
task attempt that runs again, or a micro-batch run again after a restart, writes them
again. With ``exactlyOnce=true`` exactly once: the range's copies are written in one
Kafka transaction committed when the range ends, and not written again by a later
attempt (``kafka_source.dead_letter_txn``); ``read_committed`` consumers of the
dead-letter topic see each once."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from kafka_common.dead_letter import context_headers, dead_letter_record, send_dead_letters
from kafka_common.value_formats.decoding import Rejects, decode_formats

if TYPE_CHECKING:
    from .dead_letter_txn import RangeTransaction

__all__ = ["MalformedRecords", "malformed_records"]

log = logging.getLogger("pykafka.source")


def malformed_records(options, client, rng) -> MalformedRecords | None:
    """What deals with the records of the range ``rng`` the formats cannot decode, when
    they may be dropped or sent to a dead-letter topic (with ``exactlyOnce`` in a
    transaction of the range: ``dead_letter_txn``); None otherwise."""
    formats = getattr(options, "formats", None)
    if formats is None or not (formats.drop_malformed or formats.dead_letter_topic):
        return None
    spec, transaction = getattr(options, "dead_letter_txn", None), None
    if spec is not None and formats.dead_letter_topic:
        from .dead_letter_txn import RangeTransaction

        transaction = RangeTransaction(client, spec, rng.topic, rng.partition, rng.end)
    keep = options.include_headers
    return MalformedRecords(formats, client, rng.topic, rng.partition, keep, transaction)


class MalformedRecords:
    """Decodes one range's batches and deals with the records that cannot be decoded."""

    def __init__(
        self,
        formats,
        client,
        topic: str,
        partition: int,
        keep_headers: bool,
        transaction: RangeTransaction | None = None,
    ):
        self.formats, self.client = formats, client
        self.transaction = transaction  # exactlyOnce: the range's dead-letter transaction
        self.topic, self.partition = topic, partition
        self.keep_headers = keep_headers
        self.dead_lettered = 0  # records written to the dead-letter topic
        self.dropped = 0  # records left out of the result

    def decode(self, batch: pa.RecordBatch, deadline: float | None = None) -> pa.RecordBatch:
        """``batch`` decoded (``decode_formats``); its records that cannot be decoded sent
        to the dead-letter topic (waiting no longer than until the reading's ``deadline``)
        and, under DROPMALFORMED, left out."""
        rejects: list[Rejects] = []
        out = decode_formats(
            batch,
            self.formats,
            topic=self.topic,
            partition=self.partition,
            keep_headers=self.keep_headers,
            rejects=rejects,
        )
        if not rejects:
            return out
        bad = np.zeros(batch.num_rows, dtype=bool)
        for r in rejects:
            bad |= r.rows
        if self.formats.dead_letter_topic:
            self._send(batch, rejects, np.flatnonzero(bad), deadline)
        if self.formats.drop_malformed:
            self.dropped += int(bad.sum())
            out = out.filter(pa.array(~bad))
        return out

    def _send(
        self,
        batch: pa.RecordBatch,
        rejects: list[Rejects],
        rows: np.ndarray,
        deadline: float | None,
    ) -> None:
        names = batch.schema.names
        taken = batch.take(pa.array(rows))
        offsets = taken.column(names.index("offset")).to_pylist()
        keys = taken.column(names.index("key")).to_pylist()
        values = taken.column(names.index("value")).to_pylist()
        stamps = taken.column(names.index("timestamp")).cast(pa.int64()).to_pylist()
        headers = (
            taken.column(names.index("headers")).to_pylist()
            if "headers" in names
            else [None] * len(rows)
        )
        records = []
        for i, row in enumerate(rows.tolist()):
            column, why = next((r.column, r.reasons.get(row)) for r in rejects if r.rows[row])
            error = "KeyDecodeError" if column == "key" else "ValueDecodeError"
            message = (
                f"Cannot decode the {column} of topic {self.topic!r} partition "
                f"{self.partition} offset {offsets[i]} as {self._format(column)}: "
                f"{why or 'corrupt'}"
            )
            context = context_headers(
                self.topic, self.partition, offsets[i], f"{column.upper()}_DECODE", error, message
            )
            own = [(h["key"], h["value"]) for h in headers[i] or ()]
            micros = stamps[i]
            millis = -1 if micros is None else micros // 1000
            records.append(dead_letter_record(i, millis, keys[i], values[i], own, context))
        topic = self.formats.dead_letter_topic
        if self.transaction is None:
            send_dead_letters(self.client, topic, self.partition, records, deadline)
        elif not self.transaction.send(topic, records, deadline):
            return  # exactlyOnce: an earlier attempt committed these copies
        self.dead_lettered += len(records)

    def _format(self, column: str) -> str:
        col = self.formats.value if column == "value" else self.formats.key
        return col.format if col is not None else column

    def finish(self, deadline: float | None = None) -> None:
        """The range is read: commit its dead-letter transaction (exactlyOnce), then
        ``report``."""
        if self.transaction is not None:
            self.transaction.commit(deadline)
        self.report()

    def abandon(self) -> None:
        """The range's reading stopped before its end: abort its dead-letter transaction."""
        if self.transaction is not None:
            self.transaction.abort()

    def report(self) -> None:
        """Log how many records of the range went to the dead-letter topic, or were left
        out of the result."""
        if self.dead_lettered:
            log.info(
                "topic %r partition %d: %d records could not be decoded and were written to "
                "the dead-letter topic %r%s",
                self.topic,
                self.partition,
                self.dead_lettered,
                self.formats.dead_letter_topic,
                " and left out of the result" if self.formats.drop_malformed else "",
            )
        elif self.dropped:
            log.info(
                "topic %r partition %d: %d records could not be decoded and were left out "
                "of the result (mode DROPMALFORMED)",
                self.topic,
                self.partition,
                self.dropped,
            )
