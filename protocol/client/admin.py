"""Cluster administration: create and delete topics, delete records.

``AdminRequests`` is a part of ``KafkaClient`` (a mixin built on its connections, metadata
and ``retrying``): ``create_topics`` (then waits until every partition's leader answers),
``wait_for_topics``, ``delete_topics`` and ``delete_records``. The connector itself never
creates or deletes anything; tests, examples and the benchmark do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..authorization import request_error
from .connection import BrokerConnection
from ..errors import BrokerError
from ..primitives import ZERO_UUID
from ..schema import Api

__all__ = ["AdminRequests"]

TopicPartition = tuple[str, int]


class AdminRequests:
    """Topic and record administration; mixed into ``KafkaClient``."""

    if TYPE_CHECKING:  # what KafkaClient (cluster.py) brings
        _metadata: Any
        metadata: Any
        refresh_metadata: Any
        connection: Any
        _any_connection: Any
        retrying: Any
        list_offsets: Any
        _scatter: Any
        _by_leader: Any

    def _controller(self) -> BrokerConnection:
        meta = self.metadata()
        if meta.controller_id in meta.brokers:
            return self.connection(meta.controller_id)
        return self._any_connection()

    def _on_controller(
        self, api: Api, body: dict, results: str, ignored: int | None, timeout_ms: int
    ) -> None:
        """``api`` sent to the controller, retried; a topic of the answer's ``results`` with
        an error (other than ``ignored``) fails it."""

        def attempt():
            for t in self._controller().request(api, body)[results]:
                if t["error_code"] and t["error_code"] != ignored:
                    raise request_error(
                        t["error_code"], api.name, t.get("error_message"), topic=t["name"]
                    )

        self.retrying(api.name, attempt, timeout_ms)

    def create_topics(
        self,
        topics: dict[str, int],
        replication_factor: int = 1,
        *,
        configs: dict[str, str] | None = None,
        exist_ok: bool = False,
        timeout_ms: int = 30_000,
    ) -> None:
        """Create ``{name: partitions}``; waits until every partition's leader answers."""
        from ..schemas import CREATE_TOPICS

        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": n,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
                for name, n in topics.items()
            ],
            "timeout_ms": timeout_ms,
            "validate_only": False,
        }
        already_exists = 36 if exist_ok else None  # TOPIC_ALREADY_EXISTS
        self._on_controller(CREATE_TOPICS, body, "topics", already_exists, timeout_ms)
        self.wait_for_topics(topics, timeout_ms)

    def wait_for_topics(self, topics: Iterable[str], timeout_ms: int = 30_000) -> None:
        """Until the metadata shows every partition of ``topics`` led, and each leader
        answers."""
        names = list(topics)

        def attempt():
            meta = self.refresh_metadata(names)
            for name in names:
                info = meta.topics.get(name)
                if info is None:
                    raise BrokerError.for_code(3, "not yet in metadata", topic=name)
                for part in info.partitions.values():
                    if part.leader < 0:
                        raise BrokerError.for_code(5, topic=name, partition=part.partition)

        self.retrying("waiting for topics", attempt, timeout_ms)
        # A leader the metadata names may not take requests yet: for a moment Kafka answers
        # NOT_LEADER_OR_FOLLOWER to Produce and ListOffsets alike. A ListOffsets answered
        # by every leader (retried until then) is what "ready" means.
        meta = self.metadata(names)
        self.list_offsets(
            {(name, p): -1 for name in names for p in meta.topics[name].partitions},
            timeout_ms=timeout_ms,
        )

    def delete_topics(
        self, names: Iterable[str], *, missing_ok: bool = False, timeout_ms: int = 30_000
    ) -> None:
        from ..schemas import DELETE_TOPICS

        names = list(names)
        body = {
            "topics": [{"name": n, "topic_id": ZERO_UUID} for n in names],
            "topic_names": names,
            "timeout_ms": timeout_ms,
        }
        unknown = 3 if missing_ok else None  # UNKNOWN_TOPIC_OR_PARTITION
        self._on_controller(DELETE_TOPICS, body, "responses", unknown, timeout_ms)
        if self._metadata is not None:
            self._metadata = self._metadata.without(names)

    def delete_records(
        self, offsets: dict[TopicPartition, int], timeout_ms: int = 30_000
    ) -> dict[TopicPartition, int]:
        """Delete records before ``{(topic, partition): offset}`` (-1: the high watermark).
        Returns the new low watermarks."""
        from ..schemas import DELETE_RECORDS

        pending = dict(offsets)
        done: dict[TopicPartition, int] = {}

        def build(conn, version, tps):
            topics: dict[str, list] = {}
            for t, p in tps:
                topics.setdefault(t, []).append({"partition_index": p, "offset": pending[(t, p)]})
            return {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": timeout_ms,
            }

        def attempt():
            for _, _, response, _ in self._scatter(DELETE_RECORDS, self._by_leader(pending), build):
                for t in response["topics"]:
                    for p in t["partitions"]:
                        tp = (t["name"], p["partition_index"])
                        if p["error_code"]:
                            raise request_error(
                                p["error_code"], "DeleteRecords", topic=tp[0], partition=tp[1]
                            )
                        done[tp] = p["low_watermark"]
                        pending.pop(tp, None)
            return done

        return self.retrying("DeleteRecords", attempt, timeout_ms)
