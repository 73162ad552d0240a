"""``spark.readStream.format("pykafka")``: micro-batches over offset ranges.

Offsets are JSON-friendly dicts ``{topic: {"partition": offset}}`` (Spark's own Kafka
source writes the same shape into checkpoints). Spark restarts a query from its
checkpoint; ``initialOffset`` is only for a fresh query.

The start of a fresh query must survive a crash before batch 0 commits. Spark's JVM
source writes it to a file of its own under the checkpoint (``sources/0/0``); a Python
source is not told where the checkpoint is. Spark re-runs an unfinished batch 0 after a
restart with ``initialOffset`` resolved anew as its start and the logged end as its end,
asking for its partitions before any ``latestOffset``. So:

- a start that resolves to the same offsets again (``earliest``, explicit offsets without
  -1, timestamps under the ``error`` strategy: ``start_is_reproducible``) needs nothing
  more: batch 0 reads from it, and its re-run reads the same records;
- any other start (``latest``, the default) is kept where Spark keeps every other offset,
  in the offset log: the first ``latestOffset`` of a fresh query answers with the start
  itself, so batch 0 is empty and its logged end *is* the start. Its re-run (``latest``
  has moved on) is empty by construction, so it plans nothing, and the next batch starts
  at the logged end. (Spark 4.3 tells a Python source with admission control nothing
  else about its checkpoint: ``setLatestSeenOffset`` reaches only sources without it.)

Admission control (the rate options, PySpark 4.1's lack of it) and Trigger.AvailableNow's
checks are in ``kafka_source.admission``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from typing import cast

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from kafka_common.delegation_token_options import DriverTokenConfig, tasks_config
from kafka_common.import_path import CarriesImportPath
from kafka_common.repeated_warnings import RepeatedWarnings
from kafka_common.user_errors import user_errors
from kafka_common.worker_heap import settle_worker_heap
from protocol.authorization import GROUP, RESOURCE_TYPES, refine, request_error
from protocol.client.cluster import KafkaClient
from protocol.config import ClientConfig
from protocol.errors import AuthenticationError, PyKafkaError

from .admission import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
    rate_limit,
    verify_available_now_end,
)
from .batch_reader import KafkaInputPartition, KafkaRangesPartition
from .dead_letter_txn import check_unsplit
from .fetcher import DataLossError, read_ranges
from .offset_reader import OffsetReader
from .checkpoint_offsets import OffsetsJson
from .offset_specs import (
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    OffsetRange,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    TopicPartition,
    format_tp,
)
from .options import ReaderOptions
from .planning import (
    READ_GRANT,
    discover_partitions,
    metadata_topics,
    partitions_from_metadata,
    resolve_offsets,
)
from .task_split import plan_ranges, task_groups

log = logging.getLogger("pykafka.source")

_BYTES_SAMPLE = 64 * 1024
_DEFAULT_BYTES_PER_OFFSET = 1024


def start_is_reproducible(spec: OffsetSpec) -> bool:
    """Whether resolving ``spec`` again later binds the same offsets (records deleted in
    between aside): anything but "latest", an explicit -1, or a timestamp that may fall
    back to the latest offset."""
    if isinstance(spec, EarliestOffsets):
        return True
    if isinstance(spec, SpecificOffsets):
        return all(offset != LATEST for _, offset in spec.offsets)
    if isinstance(spec, (SpecificTimestamps, GlobalTimestamp)):
        return spec.strategy == "error"
    return False


def _signs_in(config: ClientConfig) -> bool:
    """Whether a new delegation token signs in yet: the controller issues it and the
    brokers learn it from the metadata log a moment later."""
    client = KafkaClient(config)
    try:
        client.refresh_metadata([])
    except AuthenticationError as e:
        log.info("the new delegation token does not sign in yet, keeping the last one: %s", e)
        return False
    finally:
        client.close()
    return True


@user_errors
class KafkaStreamReader(CarriesImportPath, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReaderOptions):
        self.options = options
        self._client: OffsetReader | None = None
        self._available_now = False
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        self._last_batch_at: float | None = None  # minOffsetsPerTrigger: none yet
        self._latest: dict[TopicPartition, int] | None = None
        self._bytes_per_offset: dict[TopicPartition, tuple[float, int]] = {}
        self._committed: dict | None = None  # last offsets committed to the group
        self._warnings = RepeatedWarnings(log)  # this query's, said once then counted
        self._initial: dict | None = None  # a fresh query's start, resolved once
        self._after_initial = False  # initialOffset answered, nothing asked since
        self._partitions: Sequence[TopicPartition] = ()  # those of the last discovery
        self._json = OffsetsJson()  # the offsets' JSON, the last few remembered
        self._token_config: ClientConfig | None = None  # delegationToken: the current one

    # The driver keeps this object alive between calls; executors get it pickled.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None
        state["_json"] = OffsetsJson()
        state["_token_config"] = None  # the tasks get theirs with each micro-batch
        return state

    @property
    def client(self) -> OffsetReader:
        """The driver's client; offset lookups retried per fetchOffset.* options."""
        if self._client is None:
            o = self.options
            self._client = OffsetReader(
                KafkaClient(o.client_config),
                o.fetch_offset_num_retries,
                o.fetch_offset_retry_interval_ms,
            )
        return self._client

    def _refresh_token(self) -> ClientConfig | None:
        """With ``delegationToken.enabled``: the sign-in with the current token, renewed
        or replaced as due, for this micro-batch's tasks (Spark pickles this reader to the
        executors once per query, so the token in its options would be the first one for
        ever); None without a token. The driver's own client signs in with the driver's
        credentials. Called by every ``latestOffset`` and ``partitions``, so an idle
        stream's token is renewed too."""
        base = self.options.client_config
        if not isinstance(base, DriverTokenConfig):
            return None
        held = self._token_config
        current = tasks_config(base)
        if held is not None and current.sasl_username != held.sasl_username:
            if not _signs_in(current):
                return held  # the tasks keep the last token, still valid, a while longer
        self._token_config = current
        return current

    # ---- offsets ----------------------------------------------------------------------

    def _latest_offsets(
        self, known: dict[TopicPartition, int] | None = None
    ) -> dict[TopicPartition, int]:
        """The latest offsets of the partitions the subscription has now. Partitions are
        discovered anew every time (as Spark's connector describes its topics for every
        micro-batch); once a first discovery named them, the Metadata request and the
        ListOffsets for the partitions known so far go out together, one round trip
        instead of two, and the ListOffsets is asked again only when that answer cannot
        be used (partitions added or gone, a leader moved, an error)."""
        o = self.options
        level = o.isolation_level_code
        if self._partitions:
            metadata, latest = self.client.metadata_and_latest(
                metadata_topics(o.subscription), self._partitions, level
            )
            partitions: Sequence[TopicPartition] = self._partitions_of(metadata)
            if latest is not None and set(latest) != set(partitions):
                latest = None
        else:
            partitions, latest = discover_partitions(o.subscription, self.client), None
        self._partitions = partitions
        return self.client.latest_offsets(partitions, level, known=known, first=latest)

    def _partitions_of(self, metadata) -> tuple[TopicPartition, ...]:
        """The subscription's partitions in ``metadata``, a view of that snapshot: found
        once per snapshot (a stream's metadata is the same one batch after batch)."""
        subscription = self.options.subscription
        return metadata.derived(
            ("partitions of", subscription),
            lambda: tuple(partitions_from_metadata(subscription, metadata)),
        )

    def initialOffset(self) -> dict:
        if self._initial is None:
            partitions = discover_partitions(self.options.subscription, self.client)
            self._partitions = partitions
            start = resolve_offsets(
                self.options.starting_offsets,
                partitions,
                self.client,
                is_starting=True,
                isolation_level=self.options.isolation_level_code,
            )
            self._initial = self._json.to_json(start)
            log.info("initial offsets: %s", self._initial)
        # only an empty batch 0 keeps a start that cannot be resolved again (see above)
        self._after_initial = not start_is_reproducible(self.options.starting_offsets)
        return self._initial

    def prepareForTriggerAvailableNow(self) -> None:
        # As Spark's source: the offsets to read up to are fetched by the first
        # latestOffset, once the start is bound (Spark calls this before initialOffset).
        self._available_now = True

    def getDefaultReadLimit(self):
        o = self.options
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        self._refresh_token()
        if start is None:  # PySpark 4.1
            return self._latest_offset_without_start()
        # Spark hands a batch's end to commit() only when it plans the next batch, so the
        # last batch of a run (Trigger.AvailableNow, a stopped query) would never reach the
        # group. ``start`` is the end of the last batch Spark finished: publish it here.
        self.commit(start)
        begin = self._json.from_json(start)
        if self._available_now and self._target is None:
            self._target = self._latest_offsets(known=begin)
        latest = (
            dict(self._target) if self._target is not None else self._latest_offsets(known=begin)
        )
        self._latest = latest
        if self._after_initial:
            self._after_initial = False
            if start == self._initial:
                # Batch 0 of a fresh query: end it where it starts, so that the offset log
                # holds the start before anything is read. Its progress still shows the
                # latest offsets (reportLatestOffset), as every other batch's does.
                return start
        end = dict(latest)
        if limit is not None and not isinstance(limit, ReadAllAvailable):
            new = [tp for tp in latest if tp not in begin]
            if new:  # partitions that appeared since: counted from their earliest offset
                begin.update(self.client.earliest_offsets(new))
            end = self._admit(begin, end, limit)
            if end is None:
                return start
        return self._json.to_json(end)

    def _latest_offset_without_start(self) -> dict:
        # PySpark 4.1 asks for the end of the next batch before it asks a fresh query for
        # its start: bind the start first, and end batch 0 there (as above).
        initial = self._initial if self._initial is not None else self.initialOffset()
        if self._after_initial:
            self._after_initial = False
            return initial
        self._latest = self._latest_offsets(known=self._latest)
        return self._json.to_json(self._latest)

    def _admit(self, begin, end, limit):
        o = self.options
        minimum = limit.min_rows if isinstance(limit, ReadMinRows) else o.min_offsets_per_trigger
        if minimum is not None and self._target is None:
            # As Spark: the first batch of a run never waits, and the delay counts from the
            # last batch this check let through.
            now = time.monotonic()
            if (
                self._last_batch_at is not None
                and (now - self._last_batch_at) * 1000 < o.max_trigger_delay_ms
            ):
                backlog = sum(max(0, e - begin.get(tp, e)) for tp, e in end.items())
                if backlog < minimum:
                    return None
            self._last_batch_at = now
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_offsets_per_trigger
        if max_rows is not None:
            end = rate_limit(begin, end, max_rows)
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else o.max_bytes_per_trigger
        if max_bytes is not None:
            weights = {
                tp: self._estimate_bytes_per_offset(tp, begin.get(tp, e))
                for tp, e in end.items()
                if e > begin.get(tp, e)
            }
            end = rate_limit(begin, end, max_bytes, weights)
        return end

    def _estimate_bytes_per_offset(self, tp: TopicPartition, at: int) -> float:
        """Bytes per offset of the partition's batches at ``at``: a small Fetch sampled once
        every few hundred thousand offsets (the estimate is refreshed as the stream moves)."""
        cached = self._bytes_per_offset.get(tp)
        if cached is not None and abs(at - cached[1]) < 200_000:
            return cached[0]
        from protocol.records.batch import iter_batches

        estimate = float(_DEFAULT_BYTES_PER_OFFSET)
        try:
            # A broker may leave the partition out of its answer (Tansu does when told not
            # to wait at all): then the estimate falls back to the default.
            part = (
                self.client.fetch({tp: at}, max_wait_ms=100, partition_max_bytes=_BYTES_SAMPLE).get(
                    tp
                )
                or {}
            )
            records = part.get("records") or b""
            size, last = 0, None
            for pos, base, length, _ in iter_batches(records):
                size += length
                last = base + int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
            if last is not None and last >= at:
                estimate = max(1.0, size / (last - max(at, 0) + 1))
        except PyKafkaError as e:
            log.debug("byte estimate for %s failed: %s", format_tp(tp), e)
        self._bytes_per_offset[tp] = (estimate, at)
        return estimate

    def reportLatestOffset(self):
        """The latest offsets the last ``latestOffset`` saw (the run's target under
        Trigger.AvailableNow, as Spark's source), shown as ``latestOffset`` in the progress
        next to ``endOffset``: ``kafka_source.lag`` computes the offsets behind latest from
        the two."""
        return self._json.to_json(self._latest) if self._latest is not None else None

    # ---- micro-batches ------------------------------------------------------------------

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(
                message + " If you do not want the query to fail in such "
                'cases, set the source option "failOnDataLoss" to "false".'
            )
        log.warning("failOnDataLoss is false, going on: %s", message)

    def _earliest_of_new(self, new: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The earliest offsets of partitions that appeared since the batch's start; those
        gone again already (deleted with their topic) are missing from the answer."""
        metadata = self.client.refresh_metadata(sorted({t for t, _ in new}))
        present = [
            tp
            for tp in new
            if tp[0] in metadata.topics
            and not metadata.topics[tp[0]].error_code
            and tp[1] in metadata.topics[tp[0]].partitions
        ]
        return self.client.earliest_offsets(present) if present else {}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if self._after_initial:
            # Batch 0 (its start from initialOffset, no latestOffset since): empty by
            # construction, whatever "latest" says now (see the module docstring).
            self._after_initial = False
            if start != end:
                log.info(
                    "batch 0 again after a restart: it ends at %s, where the query "
                    "started; nothing to read (startingOffsets now resolves to %s)",
                    end,
                    start,
                )
            return []
        begin, until = self._json.from_json(start), self._json.from_json(end)
        if self._target is not None and start != end:
            verify_available_now_end(self._target, until, lambda: self._latest_offsets(known=until))
        new = sorted(tp for tp in until if tp not in begin)
        if new:
            found = self._earliest_of_new(new)
            gone = [tp for tp in new if tp not in found]
            if gone:
                self._data_loss(
                    f"Cannot find earliest offsets of partition(s) "
                    f"{', '.join(format_tp(tp) for tp in gone)}: they may have "
                    "been deleted, so records may have been missed."
                )
            for tp, offset in sorted(found.items()):
                if offset != 0:
                    self._data_loss(
                        f"Added partition {format_tp(tp)} starts from {offset} "
                        "instead of 0: its first records were deleted before "
                        "the query saw them, so records may have been missed."
                    )
            begin.update(found)
        gone = [tp for tp in begin if tp not in until]
        if gone:
            self._refused_topics(sorted({t for t, _ in gone}))
        for tp in gone:
            self._data_loss(
                f"Partition {format_tp(tp)} is gone: its topic was deleted "
                "or lost partitions, so records may have been missed."
            )
        ranges, went_back = [], []
        for tp, e in until.items():  # thousands of partitions, a few with new records
            b = begin.get(tp)
            if b is None or e == b:
                continue  # None: appeared and went again, reported above
            if e < b:
                went_back.append((tp, b, e))
            else:
                ranges.append(OffsetRange(tp[0], tp[1], b, e))
        for tp, b, e in sorted(went_back):
            self._data_loss(
                f"Partition {format_tp(tp)}'s offsets went back from {b} to "
                f"{e}: the topic may have been deleted and recreated, so "
                "records may have been missed."
            )
        ranges.sort()
        o = self.options
        ranges = check_unsplit(
            o, plan_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        )
        groups = task_groups(
            ranges, [r.size for r in ranges], o.min_partitions, o.max_records_per_partition
        )
        config = self._refresh_token()
        return [
            KafkaInputPartition(group[0], config=config)
            if len(group) == 1
            else KafkaRangesPartition(group, config=config)
            for group in groups
        ]

    def _refused_topics(self, topics: list[str]) -> None:
        """Raise, naming the grant, when a topic whose partitions left the subscription is
        one the principal may no longer describe: Kafka lists a pattern only the topics
        it may describe, so a grant taken away from a ``subscribePattern`` stream's topic
        looks like a deleted topic, which is not data loss to report or skip."""
        metadata = self.client.refresh_metadata(topics)
        for topic in topics:
            info = metadata.topics.get(topic)
            if info is not None and info.error_code in RESOURCE_TYPES:
                raise refine(
                    request_error(info.error_code, "Metadata", topic=topic), grant=READ_GRANT
                )

    def read(self, partition: InputPartition) -> Iterator:
        # Spark hands back the partitions that ``partitions`` planned
        partition = cast("KafkaInputPartition | KafkaRangesPartition", partition)
        settle_worker_heap()
        options = self.options
        if partition.config is not None:  # this micro-batch's token (_refresh_token)
            options = dataclasses.replace(options, client_config=partition.config)
        # a small micro-batch's task: the first Fetch of all its ranges at once
        yield from read_ranges(options, partition.ranges)

    def commit(self, end: dict) -> None:
        group = self.options.commit_offsets_to_group
        if not group or not end or end == self._committed:
            return
        offsets = self._json.from_json(end)
        try:
            self.client.commit_offsets(group, offsets)
            self._committed = end
            self._warnings.forget("commit:")
        except PyKafkaError as e:  # lag reporting must never stop the query
            # the coordinator lookup wants Describe on the group, the commit Read
            refine(e, resource_type=GROUP, grant=("Read",))
            self._warnings.warn(
                f"commit:{type(e).__name__}",
                "could not commit offsets to consumer group %r (commitOffsetsToGroup): %s",
                group,
                e,
            )

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
