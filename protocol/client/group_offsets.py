"""Consumer-group offsets without group membership, and finding coordinators.

``GroupOffsets`` is a part of ``KafkaClient`` (a mixin built on its connections and
``retrying``): ``coordinator`` finds the coordinator of a group or of a transactional id
(FindCoordinator), ``commit_offsets`` commits offsets to a group as admin tools do
(generation -1, no member id) and ``committed_offsets`` reads them back (OffsetFetch).
``commit_request_topics`` and ``raise_commit_errors`` are the parts of OffsetCommit that
``protocol.client.transactions`` shares (TxnOffsetCommit); ``fetch_offsets`` is the one OffsetFetch
of both (``committed_offsets`` here, ``fetch_stable_offsets`` there with require_stable).
Errors are raised through ``protocol.authorization.request_error``: an authorization
failure names the group or topic and the operation Kafka wants.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..authorization import request_error
from ..config import ClientConfig
from .connection import BrokerConnection

__all__ = [
    "GroupOffsets",
    "GROUP_KEY",
    "TRANSACTION_KEY",
    "MAX_OFFSET_COMMIT_VERSION",
    "MAX_OFFSET_FETCH_VERSION",
    "commit_request_topics",
    "raise_commit_errors",
    "fetch_offsets",
]

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


def commit_request_topics(offsets: dict[TopicPartition, int], metadata: str | None) -> list[dict]:
    """The ``topics`` of an OffsetCommit or TxnOffsetCommit request: ``offsets`` by topic,
    sorted, each with ``metadata`` and no leader epoch."""
    topics: dict[str, list] = {}
    for (t, p), offset in sorted(offsets.items()):
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": metadata,
            }
        )
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


def raise_commit_errors(
    response: dict, request: str, what: str, group: str, transactional_id: str | None = None
) -> None:
    """Raise the ``BrokerError`` of the first partition an OffsetCommit or TxnOffsetCommit
    (``request``) ``response`` refused (``what`` says which request, for whom; Kafka
    answers a refused group, too, in every partition)."""
    for t in response["topics"]:
        for p in t["partitions"]:
            if p["error_code"]:
                raise request_error(
                    p["error_code"],
                    request,
                    what,
                    topic=t["name"],
                    partition=p["partition_index"],
                    group=group,
                    transactional_id=transactional_id,
                )


def fetch_offsets(
    client,
    group: str,
    tps: Iterable[TopicPartition] | None,
    *,
    require_stable: bool,
    timeout_ms: int | None = None,
) -> dict[TopicPartition, tuple[int, str | None]]:
    """OffsetFetch: the offsets and metadata ``group`` has committed for ``tps`` (``(-1,
    None)`` or ``(-1, "")`` where none; every partition the group has when ``tps`` is
    None), ``require_stable`` asking the coordinator to wait for the transactions that
    write to them (UNSTABLE_OFFSET_COMMIT, retried, while one is open). An error of the
    group or of any partition raises its typed ``BrokerError`` (retried within
    ``timeout_ms`` when Kafka calls it retriable): a partition the principal may not
    describe is TOPIC_AUTHORIZATION_FAILED, not an offset of -1."""
    from ..schemas import OFFSET_FETCH

    wanted = None
    if tps is not None:
        topics: dict[str, list] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        wanted = [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    body = {
        "group_id": group,
        "topics": wanted,
        "require_stable": require_stable,
        "groups": [{"group_id": group, "topics": wanted}],
    }
    what = f"OffsetFetch for group {group!r}"

    def attempt():
        conn = client.coordinator(group)
        # null topics (every partition) needs v2+; require_stable v7+ (older: ignored)
        response = conn.request(
            OFFSET_FETCH, body, conn.version_for(OFFSET_FETCH, MAX_OFFSET_FETCH_VERSION)
        )
        out = {}
        for g in response.get("groups") or [response]:
            if g.get("error_code"):
                raise request_error(g["error_code"], "OffsetFetch", what, group=group)
            for t in g["topics"]:
                for p in t["partitions"]:
                    if p.get("error_code"):
                        raise request_error(
                            p["error_code"],
                            "OffsetFetch",
                            what,
                            topic=t["name"],
                            partition=p["partition_index"],
                            group=group,
                        )
                    out[(t["name"], p["partition_index"])] = (
                        p["committed_offset"],
                        p.get("metadata"),
                    )
        return out

    return client.retrying(what, attempt, timeout_ms)


class GroupOffsets:
    """Coordinator lookups and group offsets; mixed into ``KafkaClient``."""

    if TYPE_CHECKING:  # what KafkaClient (cluster.py) brings
        config: ClientConfig
        _connections: dict[int, BrokerConnection]
        _coordinators: dict[tuple[int, str], int]
        _any_connection: Any
        retrying: Any

    def coordinator(self, key: str, key_type: int = GROUP_KEY) -> BrokerConnection:
        """The connection to the coordinator of ``key``: a consumer group's (``GROUP_KEY``)
        or a transactional id's (``TRANSACTION_KEY``), found with FindCoordinator once and
        remembered until a request fails (``KafkaClient.retrying`` forgets them): an
        exactlyOnce commit sends several requests to each coordinator."""
        from ..schemas import FIND_COORDINATOR

        what = "group" if key_type == GROUP_KEY else "transactional id"
        known = self._connections.get(self._coordinators.get((key_type, key), -1))
        if known is not None and known.connected:
            return known

        def attempt():
            conn = self._any_connection()
            version = conn.version_for(FIND_COORDINATOR)
            response = conn.request(
                FIND_COORDINATOR,
                {"key": key, "key_type": key_type, "coordinator_keys": [key]},
                version,
            )
            found = response["coordinators"][0] if response.get("coordinators") else response
            if found["error_code"]:
                raise request_error(
                    found["error_code"],
                    "FindCoordinator",
                    found.get("error_message") or f"no coordinator for {what} {key!r}",
                    group=key if key_type == GROUP_KEY else None,
                    transactional_id=None if key_type == GROUP_KEY else key,
                )
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

    def commit_offsets(
        self, group: str, offsets: dict[TopicPartition, int], metadata: str | None = None
    ) -> None:
        """Commit ``offsets`` to ``group`` without joining it (generation -1, no member id),
        as admin tools do; Kafka accepts this for groups with no active members."""
        from ..schemas import OFFSET_COMMIT

        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": commit_request_topics(offsets, metadata),
        }

        def attempt():
            conn = self.coordinator(group)
            response = conn.request(
                OFFSET_COMMIT, body, conn.version_for(OFFSET_COMMIT, MAX_OFFSET_COMMIT_VERSION)
            )
            raise_commit_errors(
                response, "OffsetCommit", f"committing offsets for group {group!r}", group
            )

        self.retrying(f"OffsetCommit for group {group!r}", attempt)

    def committed_offsets(
        self, group: str, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The offsets ``group`` has committed for ``tps`` (-1 where none); an error of the
        group or of a partition raises (``fetch_offsets``)."""
        return {
            tp: offset
            for tp, (offset, _) in fetch_offsets(self, group, tps, require_stable=False).items()
        }
