"""Fetch and Produce as bytes (record batches live in ``protocol.records``):
``RecordRequests`` is a part of ``KafkaClient`` (a mixin built on its connections,
metadata and leader routing). ``start_fetch`` sends a Fetch to each leader (or to the
closer replica ``kafka.client.rack`` names) and returns at once; ``produce`` sends one
record batch to a partition's leader."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cluster_metadata import TopicPartition
from .leader_requests import PendingFetch
from .offset_requests import READ_UNCOMMITTED
from ..primitives import ZERO_UUID

__all__ = ["RecordRequests", "MAX_FETCH_VERSION_BY_NAME", "MAX_PRODUCE_VERSION_BY_NAME"]

# Fetch and Produce v13+ name topics by id: the last versions that name them by name, for
# when a topic's id is unknown (brokers without ids, or Metadata without them).
MAX_FETCH_VERSION_BY_NAME = 12
MAX_PRODUCE_VERSION_BY_NAME = 12


class RecordRequests:
    """Fetch and Produce routed to leaders; mixed into ``KafkaClient``."""

    if TYPE_CHECKING:  # what KafkaClient (cluster.py) brings
        config: Any
        read_replicas: Any
        metadata: Any
        topic: Any
        connection: Any
        leader_for: Any
        _send_all: Any
        _by_leader: Any

    def fetch(self, offsets: dict[TopicPartition, int], **settings) -> dict[TopicPartition, dict]:
        """One Fetch round to the leaders of ``offsets``. Returns the raw partition
        responses (``error_code``, ``high_watermark``, ``last_stable_offset``,
        ``log_start_offset``, ``aborted_transactions``, ``records`` as bytes). Errors stay in
        ``error_code``: the caller decides (OFFSET_OUT_OF_RANGE is its business)."""
        return self.start_fetch(offsets, **settings).result()

    def start_fetch(
        self,
        offsets: dict[TopicPartition, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        isolation_level: int = READ_UNCOMMITTED,
        deadline: float | None = None,
    ) -> PendingFetch:
        """Send the Fetch requests and return at once; ``.result()`` waits for them. This
        lets a reader keep the next Fetch in flight while it decodes the previous one.
        ``deadline`` (a ``time.monotonic()``) bounds what sending takes: a metadata
        refresh, connecting to a leader."""
        from ..schemas import FETCH

        meta = self.metadata({t for t, _ in offsets}, deadline)
        ids = {t: meta.topics[t].topic_id for t, _ in offsets if t in meta.topics}
        names_by_id = {v: k for k, v in ids.items()}

        def cap(tps):  # Fetch v13+ names topics by id; stay below it when an id is unknown
            if any(ids.get(t, ZERO_UUID) == ZERO_UUID for t, _ in tps):
                return MAX_FETCH_VERSION_BY_NAME
            return None

        def build(conn, version, tps):
            topics: dict[str, list] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": offsets[(t, p)],
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max_bytes,
                    }
                )
            return {
                "replica_id": -1,
                "max_wait_ms": max_wait_ms,
                "min_bytes": min_bytes,
                "max_bytes": max_bytes,
                "isolation_level": isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {"topic": t, "topic_id": ids.get(t, ZERO_UUID), "partitions": ps}
                    for t, ps in topics.items()
                ],
                "forgotten_topics_data": [],
                "rack_id": self.config.client_rack,
            }

        groups = self._by_leader(offsets, deadline)
        if self.read_replicas is not None:  # a partition's closer replica, when named
            groups = self.read_replicas.route(groups, meta.brokers)
        sent = self._send_all(FETCH, groups, build, cap, deadline)
        return PendingFetch(sent, names_by_id, max_wait_ms, self.read_replicas)

    def produce(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
        transactional_id: str | None = None,
        deadline: float | None = None,
        max_version: int | None = None,
    ) -> dict:
        """Send one record batch to a partition's leader; returns the partition response
        (``base_offset``, ``error_code``, ...). Errors stay in ``error_code``. No wait goes
        past ``deadline`` (a ``time.monotonic()``). ``max_version`` caps the Produce
        version (a transactional batch of the classic protocol: v11)."""
        from ..schemas import PRODUCE

        info = self.topic(topic, deadline)
        conn = self.connection(self.leader_for(topic, partition, deadline), deadline)
        # Produce v13+ names topics by id; stay below it when the id is unknown.
        caps = [max_version, MAX_PRODUCE_VERSION_BY_NAME if info.topic_id == ZERO_UUID else None]
        version = conn.version_for(PRODUCE, min((c for c in caps if c is not None), default=None))
        body = {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout_ms": timeout_ms,
            "topic_data": [
                {
                    "name": topic,
                    "topic_id": info.topic_id,
                    "partition_data": [{"index": partition, "records": records}],
                }
            ],
        }
        if acks == 0:
            conn.send(PRODUCE, body, version, expect_response=False, deadline=deadline)
            return {"index": partition, "error_code": 0, "base_offset": -1}
        response = conn.request(PRODUCE, body, version, deadline=deadline)
        return response["responses"][0]["partition_responses"][0]
