"""Consumer-group offsets without group membership, and finding coordinators.

``GroupOffsets`` is a part of ``KafkaClient`` (a mixin built on its connections and
``retrying``): ``coordinator`` finds the coordinator of a group or of a transactional id
(FindCoordinator), ``commit_offsets`` commits offsets to a group as admin tools do
(generation -1, no member id) and ``committed_offsets`` reads them back (OffsetFetch).
``commit_request_topics``, ``raise_commit_errors`` and ``fetch_request_topics`` are the
parts of those requests that ``protocol.transactions`` shares (TxnOffsetCommit, OffsetFetch
with require_stable).
"""

from __future__ import annotations

from typing import Iterable

from .connection import BrokerConnection
from .errors import BrokerError

__all__ = ["GroupOffsets", "GROUP_KEY", "TRANSACTION_KEY", "MAX_OFFSET_COMMIT_VERSION",
           "MAX_OFFSET_FETCH_VERSION", "commit_request_topics", "raise_commit_errors",
           "fetch_request_topics"]

TopicPartition = tuple[str, int]

#: FindCoordinator key types.
GROUP_KEY = 0
TRANSACTION_KEY = 1

#: OffsetCommit and OffsetFetch v10 name topics by id only (KIP-848's topic ids; Kafka 4.4
#: offers v10, 4.1 keeps it unstable). The requests here are built from topic names, so they
#: stop at v9, which every broker from 2.4 on speaks; a v10 request with the zero id is
#: refused with UNKNOWN_TOPIC_ID.
MAX_OFFSET_COMMIT_VERSION = 9
MAX_OFFSET_FETCH_VERSION = 9


def commit_request_topics(offsets: dict[TopicPartition, int],
                          metadata: str | None) -> list[dict]:
    """The ``topics`` of an OffsetCommit or TxnOffsetCommit request: ``offsets`` by topic,
    sorted, each with ``metadata`` and no leader epoch."""
    topics: dict[str, list] = {}
    for (t, p), offset in sorted(offsets.items()):
        topics.setdefault(t, []).append({
            "partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
            "committed_metadata": metadata})
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


def raise_commit_errors(response: dict, what: str) -> None:
    """Raise the ``BrokerError`` of the first partition an OffsetCommit or TxnOffsetCommit
    ``response`` refused (``what`` says which request, for whom)."""
    for t in response["topics"]:
        for p in t["partitions"]:
            if p["error_code"]:
                raise BrokerError.for_code(p["error_code"], what, topic=t["name"],
                                           partition=p["partition_index"])


def fetch_request_topics(tps: Iterable[TopicPartition]) -> list[dict]:
    """The ``topics`` of an OffsetFetch request: the partitions of ``tps`` by topic."""
    topics: dict[str, list] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    return [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]


class GroupOffsets:
    """Coordinator lookups and group offsets; mixed into ``KafkaClient``."""

    def coordinator(self, key: str, key_type: int = GROUP_KEY) -> BrokerConnection:
        """The connection to the coordinator of ``key``: a consumer group's (``GROUP_KEY``)
        or a transactional id's (``TRANSACTION_KEY``), found with FindCoordinator once and
        remembered until a request fails (``KafkaClient.retrying`` forgets them): an
        exactlyOnce commit sends several requests to each coordinator."""
        from .schemas import FIND_COORDINATOR
        what = "group" if key_type == GROUP_KEY else "transactional id"
        known = self._connections.get(self._coordinators.get((key_type, key), -1))
        if known is not None and known.connected:
            return known

        def attempt():
            conn = self._any_connection()
            version = conn.version_for(FIND_COORDINATOR)
            response = conn.request(FIND_COORDINATOR, {"key": key, "key_type": key_type,
                                                       "coordinator_keys": [key]}, version)
            found = response["coordinators"][0] if response.get("coordinators") else response
            if found["error_code"]:
                raise BrokerError.for_code(found["error_code"], found.get("error_message")
                                           or f"no coordinator for {what} {key!r}")
            node_id, host, port = found["node_id"], found["host"], found["port"]
            conn = self._connections.get(node_id)
            if conn is None or not conn.connected:
                conn = BrokerConnection(host, port, self.config, node_id).connect()
                self._connections[node_id] = conn
            if len(self._coordinators) >= 1024:  # a pooled client serves many jobs
                self._coordinators.clear()
            self._coordinators[(key_type, key)] = node_id
            return conn

        return self.retrying(f"FindCoordinator for {what} {key!r}", attempt)

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, int],
                       metadata: str | None = None) -> None:
        """Commit ``offsets`` to ``group`` without joining it (generation -1, no member id),
        as admin tools do; Kafka accepts this for groups with no active members."""
        from .schemas import OFFSET_COMMIT
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": commit_request_topics(offsets, metadata)}

        def attempt():
            conn = self.coordinator(group)
            response = conn.request(OFFSET_COMMIT, body,
                                    conn.version_for(OFFSET_COMMIT, MAX_OFFSET_COMMIT_VERSION))
            raise_commit_errors(response, f"committing offsets for group {group!r}")

        self.retrying(f"OffsetCommit for group {group!r}", attempt)

    def committed_offsets(self, group: str,
                          tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offsets ``group`` has committed for ``tps`` (-1 where none)."""
        from .schemas import OFFSET_FETCH
        wanted = fetch_request_topics(tps)
        body = {"group_id": group, "topics": wanted, "require_stable": False,
                "groups": [{"group_id": group, "topics": wanted}]}

        def attempt():
            conn = self.coordinator(group)
            response = conn.request(OFFSET_FETCH, body,
                                    conn.version_for(OFFSET_FETCH, MAX_OFFSET_FETCH_VERSION))
            groups = response.get("groups") or [response]
            out = {}
            for g in groups:
                if g.get("error_code"):
                    raise BrokerError.for_code(g["error_code"], f"group {group!r}")
                for t in g["topics"]:
                    for p in t["partitions"]:
                        out[(t["name"], p["partition_index"])] = p["committed_offset"]
            return out

        return self.retrying(f"OffsetFetch for group {group!r}", attempt)
