"""Executor side: read one offset range of one partition as Arrow record batches.

``read_range`` keeps the next Fetch in flight while it decodes the current response, stops
exactly at the range's end, follows leader moves, and treats records that are gone
(OFFSET_OUT_OF_RANGE, a log truncated below the range) according to ``failOnDataLoss``.
Shared by the batch and the streaming reader.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING
from collections.abc import Iterator

from protocol.client import pool
from protocol.authorization import request_error
from protocol.client.cluster import KafkaClient, READ_COMMITTED
from protocol.client.read_replicas import ReadReplicas
from protocol.errors import (
    BrokerError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    PyKafkaError,
)
from protocol.retry import RetryPolicy, is_retriable, pause

from .joined_batches import joined
from .offset_specs import OffsetRange
from .open_ends import OpenEnd, resolve_open_end
from .shared_fetch import InFlight, SharedFetch, start_fetch

if TYPE_CHECKING:
    import pyarrow as pa


log = logging.getLogger("pykafka.source")

OFFSET_OUT_OF_RANGE = 1


class DataLossError(PyKafkaError):
    """Records the query needs are no longer in Kafka (and failOnDataLoss is true)."""


def data_loss_message(topic: str, partition: int, start: int, end: int, why: str) -> str:
    return (
        f"Offsets [{start}, {end}) of topic {topic!r} partition {partition} are no longer "
        f"available in Kafka ({why}): the data was deleted or aged out, or the topic was "
        "deleted and recreated, before the query read it. Some data may have been lost. "
        "If you do not want the query to fail in such cases, set the source option "
        '"failOnDataLoss" to "false".'
    )


class _RangeReader:
    """Reads one range: ``batches()`` is the fetch loop, one method per kind of answer.

    Its waits follow the library's retry policy (``protocol.retry``): an error is retried
    after ``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms`` (1 s), with jitter,
    within ``kafkaConsumer.pollTimeoutMs``
    of the last progress; an answer with nothing to read yet is asked again after
    ``retry.backoff.ms``. Every call it makes of the client (which other readers may share)
    is given that poll deadline (``tries.deadline``), so that no wait outlasts it.

    ``pending``: the first Fetch, already in flight (a task's ``SharedFetch``)."""

    def __init__(
        self,
        options,
        rng: OffsetRange,
        client: KafkaClient,
        decode_records,
        to_join: bool = False,
        pending: InFlight | None = None,
    ):
        self.o, self.rng, self.client = options, rng, client
        self.base = options.client_config
        self.decode_records = decode_records
        self.formats = getattr(options, "formats", None)
        from .dead_letters import malformed_records  # executor side (numpy)

        self.malformed = malformed_records(options, client, rng)
        # to_join: the batches go to ``joined_batches.joined``, which makes the Arrow arrays
        # of the records left as the decoder's buffers (CompiledRows), once for all of them
        self.deferred = to_join and self.formats is None
        self.tp = (rng.topic, rng.partition)
        self.read_committed = options.isolation_level_code == READ_COMMITTED
        self.lost_records = 0
        self.answered_at = time.monotonic()  # the last answer (or batch Spark took back)
        self.stalled_since: float | None = None  # when the reading stopped moving
        self.offset, self.end = rng.start, rng.end
        self.pending = pending  # the Fetch in flight
        self.last_error: Exception | None = None
        # read_committed: the last stable offset the reading waits behind
        self.stable_end: int | None = None
        # (offset, first batch) of an answer that starts past `end`
        self.past_end: tuple[int, int] | None = None
        self.progressed = False  # the last answer moved `offset`
        self.finished = False  # the range ended before `end` (records gone, compacted away)
        self.poll_s = self.base.retry_backoff_ms / 1000
        self.tries = RetryPolicy.for_client(self.base, options.poll_timeout_ms).start(
            f"reading topic {rng.topic!r} partition {rng.partition}"
        )

    # ---- the loop -------------------------------------------------------------------------

    def batches(self) -> Iterator[pa.RecordBatch]:
        # the poll timeout counts from when this range's reading starts (read_ranges makes
        # a task's readers, and sends their first Fetch, before the first of them runs)
        self.tries.restart_clock()
        try:
            while self.offset < self.end and not self.finished:
                if self.tries.expired():
                    self._no_progress()
                    continue
                response = self._answer()
                if response is None:
                    continue
                batch = self._take(response)
                if batch is not None:
                    yield batch
                if self.progressed:
                    # The time Spark spent on the batch is not the broker's.
                    self.progressed = False
                    self.tries.restart_clock()
                    self.answered_at = time.monotonic()
            if self.lost_records:
                log.warning(
                    "topic %r partition %d: skipped %d offsets that were no longer "
                    "available (failOnDataLoss=false)",
                    self.rng.topic,
                    self.rng.partition,
                    self.lost_records,
                )
            if self.malformed is not None:
                self.malformed.finish(self.tries.deadline)
        finally:
            if self.pending is not None:
                self.pending.cancel()
            if self.malformed is not None:
                self.malformed.abandon()  # after finish(): nothing left to abort

    def left_ms(self) -> int:
        """The ms left of the poll timeout (at least 1): the bound of the next answer's wait.
        The client's calls (request, connect, trying another broker) get the deadline."""
        left_s = self.tries.time_left_s()  # never None: the poll timeout is its deadline
        return max(1, int((self.o.poll_timeout_ms / 1000 if left_s is None else left_s) * 1000))

    def _no_progress(self) -> None:
        """The poll timeout passed without progress: data loss while read_committed waits
        behind a stable offset (as Spark's consumer), else a timeout."""
        if self.stable_end is not None:
            self.lost(
                self.offset,
                self.end,
                f"the last stable offset stayed at {self.stable_end} for "
                f"kafkaConsumer.pollTimeoutMs={self.o.poll_timeout_ms} ms: a "
                "transaction was left open, or the records were aborted or deleted",
            )
            self.finished = True
            return
        raise KafkaTimeoutError(
            f"Reading topic {self.rng.topic!r} partition {self.rng.partition} made no "
            f"progress at offset {self.offset} (range ends at {self.end}) within "
            f"kafkaConsumer.pollTimeoutMs={self.o.poll_timeout_ms} ms; last error: "
            f"{self.last_error}"
        )

    def _answer(self):
        """This partition's part of the next Fetch answer; None after a failure (retried)."""
        left_ms = self.left_ms()
        try:
            if self.pending is None:
                self.pending = self.start(self.offset)
            wait_ms = min(self.base.request_timeout_ms + self.o.fetch_max_wait_ms, left_ms)
            response = self.pending.result(wait_ms, self.tries.deadline).get(self.tp)
        except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as e:
            self.pending = None
            if not is_retriable(e):
                raise
            if not isinstance(e, BrokerError):
                self.stalled(self.offset, e, left_ms)
            self._retry_after(e)
            return None
        self.pending = None
        if response is None:
            # The broker left the partition out (Tansu does when it does not wait), or
            # the answer was garbled into another partition's: ask again.
            self.last_error = ProtocolError(
                f"the Fetch response had no answer for topic {self.rng.topic!r} partition "
                f"{self.rng.partition}"
            )
            pause(self.poll_s)
        return response

    def _back_to_leader(self) -> bool:
        """After OFFSET_OUT_OF_RANGE: whether it came from a replica other than the leader
        (``kafka.client.rack``), one that has not copied the offset yet. Then the partition
        is asked again at its leader, at once: that is no data loss."""
        replicas = self.client.read_replicas
        if replicas is None or not replicas.forget(self.tp):
            return False
        log.debug(
            "topic %r partition %d: offset %d is out of range on the replica read from; "
            "reading from the leader",
            self.rng.topic,
            self.rng.partition,
            self.offset,
        )
        return True

    def _retry_after(self, error: Exception) -> None:
        """Wait as the retry policy says (at most until the deadline), then refresh the
        metadata of the topics in use: the leader may have moved."""
        self.last_error = error
        self.tries.wait()
        try:  # the refresh may wait only for what is left
            self.client.refresh_in_use(self.tries.deadline)
        except (KafkaConnectionError, KafkaTimeoutError):
            pass

    def _take(self, response) -> pa.RecordBatch | None:
        """What an answer means: records (returned), an error, or nothing to read yet."""
        code = response["error_code"]
        if code == OFFSET_OUT_OF_RANGE:
            if not self._back_to_leader():
                self.offset = self.skip_missing(self.offset)
                self.tries.restart_clock()
            return None
        if code:
            err = request_error(code, "Fetch", topic=self.rng.topic, partition=self.rng.partition)
            if not is_retriable(err):
                raise err
            self._retry_after(err)
            return None
        if self.client.read_replicas is not None and ReadReplicas.is_redirect(response):
            self.answered(self.offset)  # the leader named a closer replica: asked next
            return None
        batch, next_offset = self.decode_records(
            response["records"],
            topic=self.rng.topic,
            partition=self.rng.partition,
            start_offset=self.offset,
            end_offset=self.end,
            include_headers=self.o.include_headers or self.formats is not None,
            read_committed=self.read_committed,
            verify_crc=self.o.check_crcs,
            deferred=self.deferred,
            aborted_transactions=[
                (a["producer_id"], a["first_offset"])
                for a in response.get("aborted_transactions") or ()
            ],
        )
        self.answered(self.offset)
        if next_offset > self.offset:
            return self._advance(batch, next_offset)
        first = _first_batch_offset(response["records"])
        if first is not None and first >= self.end:
            self._past_end(first, response["high_watermark"])
        else:
            self._nothing_yet(response)
        return None

    def _advance(self, batch, next_offset: int) -> pa.RecordBatch | None:
        """Records up to ``next_offset``: the next Fetch goes out before Spark takes them."""
        if next_offset < self.end:
            try:  # in flight while Spark consumes this batch
                self.pending = self.start(next_offset)
            except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as e:
                self.last_error = e  # sent again at the top of the loop
        self.offset, self.stable_end, self.progressed = next_offset, None, True
        if not batch.num_rows:
            return None
        if self.malformed is not None:
            batch = self.malformed.decode(batch, self.tries.deadline)
        elif self.formats is not None:
            from kafka_common.value_formats.decoding import decode_formats

            batch = decode_formats(
                batch,
                self.formats,
                topic=self.rng.topic,
                partition=self.rng.partition,
                keep_headers=self.o.include_headers,
            )
        return batch

    def _past_end(self, first: int, high_watermark: int) -> None:
        """Kafka answered with the first batch after ``offset``, past the range: no record
        is left in [offset, end) (compacted away). Not data loss, as in Spark's connector:
        the range is done. The CRC does not cover a batch's base offset, so the range ends
        only on a second answer that agrees and starts below the high watermark: one
        flipped bit must not end it empty."""
        plausible = first < high_watermark
        if plausible and self.past_end == (self.offset, first):
            self.finished = True
            return
        self.past_end = (self.offset, first) if plausible else None
        if not plausible:
            self.last_error = ProtocolError(
                f"the Fetch answer for topic {self.rng.topic!r} partition "
                f"{self.rng.partition} at offset {self.offset} starts with a batch at offset "
                f"{first}, past the high watermark {high_watermark}"
            )
            pause(self.poll_s)

    def _nothing_yet(self, response) -> None:
        """No complete batch at ``offset``: is the rest of the range still to come?"""
        limit = response["high_watermark"]
        if self.read_committed and response.get("last_stable_offset", -1) >= 0:
            limit = min(limit, response["last_stable_offset"])
        if not self.read_committed and limit <= self.offset < self.end:
            self._below_high_watermark(limit)
            return
        self.stable_end = limit if self.read_committed and limit <= self.offset else None
        self.last_error = None
        pause(self.poll_s)

    def _below_high_watermark(self, limit: int) -> None:
        """The leader's high watermark is at or below ``offset``, short of the range. A
        leader elected moments ago answers so until its high watermark catches up with the
        old leader's (it holds the records: ISR); ListOffsets waits for that (it answers
        OFFSET_NOT_AVAILABLE meanwhile, KIP-207), so the log was truncated under us only if
        ListOffsets agrees that it ends at or before ``offset``."""
        try:
            latest = self.latest_offset()
        except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as e:
            if not is_retriable(e):
                raise
            self._retry_after(e)
            return
        if latest <= self.offset:
            self.lost(self.offset, self.end, f"the log now ends at offset {latest}")
            self.finished = True
            return
        log.info(
            "topic %r partition %d: a Fetch at offset %d saw the high watermark at %d, "
            "ListOffsets at %d (a new leader catching up): reading on",
            self.rng.topic,
            self.rng.partition,
            self.offset,
            limit,
            latest,
        )
        self.last_error = None
        pause(self.poll_s)

    # ---- what the loop reports and asks -----------------------------------------------------

    def stalled(self, offset: int, error: Exception, left_ms: int) -> None:
        """A Fetch got no answer (timeout, broken connection): warn once per stall, naming
        the broker and how long it was waited for (both in ``error``), so that a silent
        leader (paused, partitioned away) shows in the executor's log, not only as a
        slow batch."""
        if self.stalled_since is not None:
            return
        self.stalled_since = self.answered_at
        log.warning(
            "topic %r partition %d: no answer to a Fetch at offset %d: %s; "
            "fetching again after a metadata refresh, for up to "
            "kafkaConsumer.pollTimeoutMs (%d ms left)",
            self.rng.topic,
            self.rng.partition,
            offset,
            error,
            left_ms,
        )

    def answered(self, offset: int) -> None:
        """A Fetch was answered: the end of a stall, if there was one, is a warning too
        (with how long the reading stood still)."""
        self.answered_at = time.monotonic()
        if self.stalled_since is None:
            return
        log.warning(
            "topic %r partition %d: reading again at offset %d after %.1f s without an answer",
            self.rng.topic,
            self.rng.partition,
            offset,
            self.answered_at - self.stalled_since,
        )
        self.stalled_since = None

    def start(self, offset: int) -> InFlight:
        return start_fetch(self.client, self.o, {self.tp: offset}, self.tries.deadline)

    def latest_offset(self) -> int:
        return self.client.latest_offsets([self.tp], deadline=self.tries.deadline)[self.tp]

    def lost(self, start: int, end: int, why: str) -> None:
        message = data_loss_message(self.rng.topic, self.rng.partition, start, end, why)
        if self.o.fail_on_data_loss:
            raise DataLossError(message)
        self.lost_records += end - start
        log.warning("failOnDataLoss is false, skipping: %s", message)

    def skip_missing(self, offset: int) -> int:
        """After OFFSET_OUT_OF_RANGE: where to go on from ``offset`` (or raise)."""
        earliest = self.client.earliest_offsets([self.tp], self.tries.deadline)[self.tp]
        if offset < earliest:
            resume = min(earliest, self.rng.end)
            self.lost(offset, resume, f"the log now starts at offset {earliest}")
            return resume
        latest = self.latest_offset()
        self.lost(offset, self.rng.end, f"the log now ends at offset {latest}")
        return self.rng.end


def read_range(
    options, rng: OffsetRange, open_end: OpenEnd | None = None
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets ``[start, end)``) as Spark-schema batches;
    with ``open_end``, the end is looked up first (see ``OpenEnd``)."""
    if rng.end <= rng.start and open_end is None:
        return
    # Imported here, on the executor: the driver's planner processes (Spark starts one per
    # streaming query) import this module but never decode, and the decoders (with the
    # crc32c package) cost them a few hundred milliseconds.
    from protocol.records.decode_arrow import decode_records

    # The client comes warm from this worker's pool (``protocol.client.pool``); the reader
    # gives each call of it what is left of kafkaConsumer.pollTimeoutMs as its deadline.
    lease = pool.checkout(options.client_config)
    try:
        yield from _read(options, rng, open_end, lease.client, decode_records)
    finally:
        lease.give_back()


def read_ranges(options, ranges) -> Iterator[pa.RecordBatch]:
    """Yield the records of several ranges (their ends fixed), one range after the other,
    as ``read_range`` would, with one client and the first Fetch of every range sent at
    once (a request per leader for all of them): a task that reads many small ranges (a
    small read's, a small micro-batch's) waits about one round trip for them, not one per
    range, and sends a Fetch request per broker, not one per partition."""
    ranges = [r for r in ranges if r.end > r.start]
    if len(ranges) <= 1:
        for rng in ranges:
            yield from read_range(options, rng)
        return
    from protocol.records.decode_arrow import decode_records  # executor side, see above

    lease = pool.checkout(options.client_config)
    try:
        first: dict = {}  # a partition read twice shares only its first range
        for i, rng in enumerate(ranges):
            first.setdefault((rng.topic, rng.partition), i)
        shared: SharedFetch | None = None
        try:
            starts = {tp: ranges[i].start for tp, i in first.items()}
            shared = SharedFetch(lease.client, options, starts)
        except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as e:
            log.debug("the shared first Fetch was not sent (each range sends its own): %s", e)
        readers = []
        for i, rng in enumerate(ranges):
            tp = (rng.topic, rng.partition)
            pending = shared.share(tp) if shared is not None and first[tp] == i else None
            readers.append(_RangeReader(options, rng, lease.client, decode_records, True, pending))
        yield from joined(b for reader in readers for b in reader.batches())
    finally:
        lease.give_back()


def _read(
    options, rng: OffsetRange, open_end: OpenEnd | None, client: KafkaClient, decode_records
) -> Iterator[pa.RecordBatch]:
    if open_end is not None:
        rng = rng._replace(end=resolve_open_end(client, options, rng, open_end))
        if rng.end <= rng.start:
            return
    yield from _RangeReader(options, rng, client, decode_records).batches()


def _first_batch_offset(records) -> int | None:
    """The base offset of the first record batch of a Fetch answer's records, complete or
    not; None when there is none or it is a legacy message set (magic 0 or 1, whose
    offset is that of its last inner message)."""
    from protocol.records.batch import MAGIC_OFFSET, MAGIC_V2  # executor side, as decoding

    if records is None or len(records) <= MAGIC_OFFSET:
        return None
    head = bytes(records[: MAGIC_OFFSET + 1])
    if head[MAGIC_OFFSET] != MAGIC_V2:
        return None
    return int.from_bytes(head[:8], "big", signed=True)
