"""The offsets of partitions, asked of their leaders: ``OffsetRequests`` is a part of
``KafkaClient`` (a mixin built on its connections, metadata and ``retrying``).
``list_offsets`` asks ListOffsets of each leader at once; ``metadata_and_offsets`` sends a
stream's ListOffsets and its Metadata refresh in one round trip, taking the answers only
when the fresh metadata names the leaders they came from."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .cluster_metadata import ClusterMetadata, TopicPartition
from ..errors import BrokerError, KafkaConnectionError, KafkaTimeoutError, PyKafkaError
from .leader_requests import gather, list_offsets_request, take_list_offsets

__all__ = [
    "OffsetRequests",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
]

log = logging.getLogger("pykafka.protocol.cluster")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class OffsetRequests:
    """ListOffsets routed to leaders; mixed into ``KafkaClient``."""

    if TYPE_CHECKING:  # what KafkaClient (cluster.py) brings
        _metadata: Any
        refresh_metadata: Any
        retrying: Any
        _scatter: Any
        _send_all: Any
        _by_leader: Any

    def list_offsets(
        self,
        timestamps: dict[TopicPartition, int],
        isolation_level: int = READ_UNCOMMITTED,
        timeout_ms: int | None = None,
        deadline: float | None = None,
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Offsets for ``{(topic, partition): timestamp}`` where the timestamp is a time in
        ms, EARLIEST_TIMESTAMP (-2) or LATEST_TIMESTAMP (-1). Returns
        ``{(topic, partition): (offset, timestamp)}``; offset -1 when no record is at or
        after the timestamp. Retried within ``timeout_ms`` (default ``request.timeout.ms``)
        and, with ``deadline`` (a ``time.monotonic()``), not past it."""
        from ..schemas import LIST_OFFSETS

        pending = dict(timestamps)
        done: dict[TopicPartition, tuple[int, int]] = {}
        build = list_offsets_request(pending, isolation_level, self._metadata)

        def attempt():
            if not pending:
                return done
            first_error = None
            groups = self._by_leader(pending, deadline)
            for _, _, response, _ in self._scatter(LIST_OFFSETS, groups, build, None, deadline):
                first_error = take_list_offsets(response, pending, done) or first_error
            if pending:
                raise first_error or BrokerError.for_code(
                    7, "no answer for " + ", ".join(f"{t}-{p}" for t, p in pending)
                )
            return done

        return self.retrying("ListOffsets", attempt, timeout_ms, deadline)

    def metadata_and_offsets(
        self,
        topics: Iterable[str] | None,
        timestamps: dict[TopicPartition, int],
        isolation_level: int = READ_UNCOMMITTED,
    ) -> tuple[ClusterMetadata, dict | None]:
        """``refresh_metadata(topics)`` and ``list_offsets(timestamps, isolation_level)``
        in one round trip instead of two: the ListOffsets requests go to the leaders the
        cached metadata names and the Metadata request follows before any answer is read
        (a broker answers a connection's requests in order).

        Returns ``(metadata, offsets)``. ``offsets`` is None when the answers cannot be
        taken as they are: a partition the cache does not know or knows no leader of, a
        leader that the fresh metadata names differently, an error in any answer, a
        connection that failed on the way. The caller then asks ``list_offsets`` with the
        fresh metadata (which retries and follows leaders as usual). Errors of the Metadata
        request itself are raised as ``refresh_metadata`` raises them."""
        from ..schemas import LIST_OFFSETS

        topics = None if topics is None else list(topics)
        snapshot = self._metadata
        groups = None if snapshot is None else snapshot.leader_groups(timestamps)
        if not groups:
            return self.refresh_metadata(topics), None
        pending = dict(timestamps)
        try:
            sent = self._send_all(
                LIST_OFFSETS, groups, list_offsets_request(pending, isolation_level, snapshot)
            )
        except PyKafkaError as e:  # nothing left in flight (_send_all): the usual path asks
            log.debug("pipelined ListOffsets not sent: %s", e)
            return self.refresh_metadata(topics), None
        responses: list | None
        try:
            metadata = self.refresh_metadata(topics)
        finally:
            try:  # read every answer, so that nothing is left on a connection
                responses = gather(sent)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("pipelined ListOffsets failed: %s", e)
                responses = None
        if responses is None:
            return metadata, None
        done: dict[TopicPartition, tuple[int, int]] = {}
        try:
            for _, _, response, _ in responses:
                if take_list_offsets(response, pending, done) is not None:
                    return metadata, None
        except BrokerError:
            return metadata, None
        if metadata is not snapshot and not metadata.names_leaders(groups):
            return metadata, None
        return metadata, (done if not pending else None)

    def earliest_offsets(
        self, tps: Iterable[TopicPartition], deadline: float | None = None
    ) -> dict[TopicPartition, int]:
        asked = {tp: EARLIEST_TIMESTAMP for tp in tps}
        return {tp: o for tp, (o, _) in self.list_offsets(asked, deadline=deadline).items()}

    def latest_offsets(
        self,
        tps: Iterable[TopicPartition],
        isolation_level: int = READ_UNCOMMITTED,
        deadline: float | None = None,
    ) -> dict[TopicPartition, int]:
        asked = {tp: LATEST_TIMESTAMP for tp in tps}
        answered = self.list_offsets(asked, isolation_level, deadline=deadline)
        return {tp: o for tp, (o, _) in answered.items()}
