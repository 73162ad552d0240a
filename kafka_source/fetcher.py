"""Executor side: read one offset range of one partition as Arrow record batches.

``read_range`` keeps the next Fetch in flight while it decodes the current response, stops
exactly at the range's end, follows leader moves, and treats records that are gone
(OFFSET_OUT_OF_RANGE, a log truncated below the range) according to ``failOnDataLoss``.
Shared by the batch and the streaming reader.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Iterator, NamedTuple

from protocol import pool
from protocol.cluster import LATEST_TIMESTAMP, KafkaClient, READ_COMMITTED
from protocol.errors import (BrokerError, KafkaConnectionError, KafkaTimeoutError,
                             ProtocolError, PyKafkaError)

from .offset_specs import OffsetRange

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("pykafka.source")

OFFSET_OUT_OF_RANGE = 1


class OpenEnd(NamedTuple):
    """A range whose end is looked up when the task runs, not when the read was planned:
    the partition's latest offset, or with ``timestamp`` the first offset at or after that
    time (the latest when there is none), never beyond ``cap`` (a pushed-down offset bound)
    and never below the planned end. Spark plans a batch DataFrame's partitions once and
    runs every action on that plan; this is how a second action sees new records."""

    timestamp: int | None = None
    cap: int | None = None


class DataLossError(PyKafkaError):
    """Records the query needs are no longer in Kafka (and failOnDataLoss is true)."""


def data_loss_message(topic: str, partition: int, start: int, end: int, why: str) -> str:
    return (f"Offsets [{start}, {end}) of topic {topic!r} partition {partition} are no longer "
            f"available in Kafka ({why}): the data was deleted or aged out, or the topic was "
            "deleted and recreated, before the query read it. Some data may have been lost. "
            "If you do not want the query to fail in such cases, set the source option "
            "\"failOnDataLoss\" to \"false\".")


class _Fetcher:
    def __init__(self, options, rng: OffsetRange, client: KafkaClient):
        self.o, self.rng, self.client = options, rng, client
        self.tp = (rng.topic, rng.partition)
        self.read_committed = options.isolation_level_code == READ_COMMITTED
        self.lost_records = 0
        self.answered_at = time.monotonic()  # the last answer (or batch Spark took back)
        self.stalled_since: float | None = None  # when the reading stopped moving

    def stalled(self, offset: int, error: Exception, left_ms: int) -> None:
        """A Fetch got no answer (timeout, broken connection): warn once per stall, naming
        the broker and how long it was waited for (both in ``error``), so that a silent
        leader (paused, partitioned away) shows in the executor's log, not only as a
        slow batch."""
        if self.stalled_since is not None:
            return
        self.stalled_since = self.answered_at
        log.warning("topic %r partition %d: no answer to a Fetch at offset %d: %s; "
                    "fetching again after a metadata refresh, for up to "
                    "kafkaConsumer.pollTimeoutMs (%d ms left)", self.rng.topic,
                    self.rng.partition, offset, error, left_ms)

    def answered(self, offset: int) -> None:
        """A Fetch was answered: the end of a stall, if there was one, is a warning too
        (with how long the reading stood still)."""
        self.answered_at = time.monotonic()
        if self.stalled_since is None:
            return
        log.warning("topic %r partition %d: reading again at offset %d after %.1f s "
                    "without an answer", self.rng.topic, self.rng.partition, offset,
                    self.answered_at - self.stalled_since)
        self.stalled_since = None

    def start(self, offset: int):
        o = self.o
        return self.client.start_fetch(
            {self.tp: offset}, max_wait_ms=o.fetch_max_wait_ms, min_bytes=o.fetch_min_bytes,
            max_bytes=o.fetch_max_bytes, partition_max_bytes=o.max_partition_fetch_bytes,
            isolation_level=o.isolation_level_code)

    def lost(self, start: int, end: int, why: str) -> None:
        message = data_loss_message(self.rng.topic, self.rng.partition, start, end, why)
        if self.o.fail_on_data_loss:
            raise DataLossError(message)
        self.lost_records += end - start
        log.warning("failOnDataLoss is false, skipping: %s", message)

    def skip_missing(self, offset: int) -> int:
        """After OFFSET_OUT_OF_RANGE: where to go on from ``offset`` (or raise)."""
        earliest = self.client.earliest_offsets([self.tp])[self.tp]
        if offset < earliest:
            resume = min(earliest, self.rng.end)
            self.lost(offset, resume, f"the log now starts at offset {earliest}")
            return resume
        latest = self.client.latest_offsets([self.tp])[self.tp]
        self.lost(offset, self.rng.end, f"the log now ends at offset {latest}")
        return self.rng.end


def _resolve_open_end(client: KafkaClient, options, rng: OffsetRange,
                      open_end: OpenEnd) -> int:
    tp = (rng.topic, rng.partition)
    level = options.isolation_level_code
    wanted = LATEST_TIMESTAMP if open_end.timestamp is None else open_end.timestamp
    found = client.list_offsets({tp: wanted}, level)[tp][0]
    if found < 0:  # no record at or after the timestamp: the end is the latest offset
        found = client.latest_offsets([tp], level)[tp]
    end = max(rng.end, found)
    return end if open_end.cap is None else min(end, max(rng.end, open_end.cap))


def read_range(options, rng: OffsetRange,
               open_end: OpenEnd | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` (offsets ``[start, end)``) as Spark-schema batches;
    with ``open_end``, the end is looked up first (see ``OpenEnd``)."""
    if rng.end <= rng.start and open_end is None:
        return
    # Imported here, on the executor: the driver's planner processes (Spark starts one per
    # streaming query) import this module but never decode, and the decoders (with the
    # crc32c package) cost them a few hundred milliseconds.
    from protocol.records.decode_arrow import decode_records
    # A private copy of the client settings whose timeouts shrink to what is left of
    # kafkaConsumer.pollTimeoutMs, so that no wait (connect, metadata, Fetch) outlasts it.
    # The client comes warm from this worker's pool (``protocol.pool``) and takes it on.
    base = options.client_config
    config = dataclasses.replace(base)
    lease = pool.checkout(config)
    try:
        yield from _read(options, rng, open_end, lease.client, config, decode_records)
    finally:
        lease.give_back()


def _read(options, rng: OffsetRange, open_end: OpenEnd | None, client: KafkaClient,
          config, decode_records) -> Iterator[pa.RecordBatch]:
    base = options.client_config
    formats = getattr(options, "formats", None)
    if formats is not None:
        from .value_decoding import decode_formats
    if open_end is not None:
        rng = rng._replace(end=_resolve_open_end(client, options, rng, open_end))
        if rng.end <= rng.start:
            return
    f = _Fetcher(options, rng, client)
    offset, end = rng.start, rng.end
    timeout_s = options.poll_timeout_ms / 1000
    deadline = time.monotonic() + timeout_s
    backoff = base.retry_backoff_ms / 1000
    pending = None
    last_error: Exception | None = None
    stable_end: int | None = None  # read_committed: the last stable offset we wait behind
    past_end: tuple[int, int] | None = None  # (offset, first batch) of an answer past `end`

    def bound_waits_to_deadline() -> int:
        """The ms left of the poll timeout, which becomes the bound of every wait of the
        client (request, connect, trying another broker) from here on."""
        left = max(1, int((deadline - time.monotonic()) * 1000))
        config.request_timeout_ms = min(base.request_timeout_ms, left)
        config.connect_timeout_ms = min(base.connect_timeout_ms, left)
        client.deadline = deadline  # no second broker tried for a connection past it
        return left

    try:
        while offset < end:
            if time.monotonic() > deadline and stable_end is not None:
                # As Spark's consumer: still nothing to read at or past the last stable
                # offset after the poll timeout is data loss, not a timeout.
                f.lost(offset, end, f"the last stable offset stayed at {stable_end} for "
                                    f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms} "
                                    "ms: a transaction was left open, or the records "
                                    "were aborted or deleted")
                break
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(
                    f"Reading topic {rng.topic!r} partition {rng.partition} made no progress at "
                    f"offset {offset} (range ends at {end}) within kafkaConsumer.pollTimeoutMs="
                    f"{options.poll_timeout_ms} ms; last error: {last_error}")
            left_ms = bound_waits_to_deadline()
            try:
                if pending is None:
                    pending = f.start(offset)
                wait_ms = min(base.request_timeout_ms + options.fetch_max_wait_ms, left_ms)
                response = pending.result(wait_ms).get(f.tp)
            except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as e:
                pending = None
                if isinstance(e, BrokerError) and not e.retriable:
                    raise
                last_error = e
                if not isinstance(e, BrokerError):
                    f.stalled(offset, e, left_ms)
                _pause_and_refresh(client, min(backoff, left_ms / 1000),
                                   bound_waits_to_deadline)
                continue
            pending = None
            if response is None:
                # The broker left the partition out (Tansu does when it does not wait), or
                # the answer was garbled into another partition's: ask again.
                last_error = ProtocolError(f"the Fetch response had no answer for topic "
                                           f"{rng.topic!r} partition {rng.partition}")
                time.sleep(backoff)
                continue
            code = response["error_code"]
            if code == OFFSET_OUT_OF_RANGE:
                offset = f.skip_missing(offset)
                deadline = time.monotonic() + timeout_s
                continue
            if code:
                err = BrokerError.for_code(code, topic=rng.topic, partition=rng.partition)
                if not (err.retriable or err.name in ("FENCED_LEADER_EPOCH",
                                                       "UNKNOWN_LEADER_EPOCH")):
                    raise err
                last_error = err
                _pause_and_refresh(client, min(backoff, left_ms / 1000),
                                   bound_waits_to_deadline)
                continue
            batch, next_offset = decode_records(
                response["records"], topic=rng.topic, partition=rng.partition,
                start_offset=offset, end_offset=end,
                include_headers=options.include_headers or formats is not None,
                read_committed=f.read_committed, verify_crc=options.check_crcs,
                aborted_transactions=[(a["producer_id"], a["first_offset"])
                                      for a in response.get("aborted_transactions") or ()])
            f.answered(offset)
            if next_offset > offset:
                if next_offset < end:
                    try:  # in flight while Spark consumes this batch
                        pending = f.start(next_offset)
                    except (KafkaConnectionError, KafkaTimeoutError, BrokerError) as e:
                        last_error = e  # sent again at the top of the loop
                offset, stable_end = next_offset, None
                if batch.num_rows:
                    if formats is not None:
                        batch = decode_formats(batch, formats, topic=rng.topic,
                                               partition=rng.partition,
                                               keep_headers=options.include_headers)
                    yield batch
                # The time Spark spent on the batch is not the broker's.
                deadline = time.monotonic() + timeout_s
                f.answered_at = time.monotonic()
                continue
            first = _first_batch_offset(response["records"])
            if first is not None and first >= end:
                # Kafka answered with the first batch after `offset`, past the range: no
                # record is left in [offset, end) (compacted away). Not data loss, as in
                # Spark's connector: the range is done. The CRC does not cover a batch's
                # base offset, so the range ends only on a second answer that agrees and
                # starts below the high watermark: one flipped bit must not end it empty.
                plausible = first < response["high_watermark"]
                if plausible and past_end == (offset, first):
                    break
                past_end = (offset, first) if plausible else None
                if not plausible:
                    last_error = ProtocolError(
                        f"the Fetch answer for topic {rng.topic!r} partition {rng.partition} "
                        f"at offset {offset} starts with a batch at offset {first}, past the "
                        f"high watermark {response['high_watermark']}")
                    time.sleep(backoff)
                continue
            # No complete batch at `offset`: is the rest of the range still to come?
            limit = response["high_watermark"]
            if f.read_committed and response.get("last_stable_offset", -1) >= 0:
                limit = min(limit, response["last_stable_offset"])
            if not f.read_committed and limit <= offset < end:
                # The log ends before the range does: it was truncated under us.
                f.lost(offset, end, f"the log now ends at offset {limit}")
                break
            stable_end = limit if f.read_committed and limit <= offset else None
            last_error = None
            time.sleep(backoff)
        if f.lost_records:
            log.warning("topic %r partition %d: skipped %d offsets that were no longer "
                        "available (failOnDataLoss=false)", rng.topic, rng.partition,
                        f.lost_records)
    finally:
        if pending is not None:
            pending.cancel()


def _first_batch_offset(records) -> int | None:
    """The base offset of the first record batch of a Fetch answer's records, complete or
    not; None when there is none or it is a legacy message set (magic 0 or 1, whose
    offset is that of its last inner message)."""
    from protocol.records.batch import MAGIC_OFFSET, MAGIC_V2  # executor side, as decoding
    if records is None or len(records) <= MAGIC_OFFSET:
        return None
    head = bytes(records[:MAGIC_OFFSET + 1])
    if head[MAGIC_OFFSET] != MAGIC_V2:
        return None
    return int.from_bytes(head[:8], "big", signed=True)


def _pause_and_refresh(client: KafkaClient, backoff: float,
                       bound_waits_to_deadline) -> None:
    time.sleep(backoff)
    bound_waits_to_deadline()  # the refresh may wait only for what is left of the poll timeout
    try:
        client.refresh_in_use()
    except (KafkaConnectionError, KafkaTimeoutError):
        pass
