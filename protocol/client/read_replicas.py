"""Fetching from the closest replica (KIP-392), as Kafka's consumer does with ``client.rack``.

A Fetch carries the client's rack (``rack_id``, Fetch v11+). A leader whose cluster runs a
rack-aware ``replica.selector.class`` may answer a partition with a ``preferred_read_replica``
(and no records): the broker in the client's rack that holds the offset asked for.
``ReadReplicas`` remembers that choice per partition and sends the partition's next Fetch
there, until one of these sends it back to its leader:

- the replica answers the partition with an error (NOT_LEADER_OR_FOLLOWER,
  REPLICA_NOT_AVAILABLE, OFFSET_NOT_AVAILABLE, ...), or with OFFSET_OUT_OF_RANGE, which a
  replica that is behind answers for offsets it has not copied yet (the reader asks
  ``forget`` and retries at the leader, instead of taking the records for lost);
- its request fails (connection refused or cut, no answer in time);
- the metadata no longer names the replica's broker;
- the choice is older than ``metadata.max.age.ms`` (Kafka's consumer lets it expire so).

The offset a reader asks for is its own, whichever broker answers: switching brokers never
skips a record or reads one twice. Without a rack there is no ``ReadReplicas`` at all and
every Fetch goes to the leader, as before.
"""

from __future__ import annotations

import time
from collections.abc import Container, Iterable

from .cluster_metadata import TopicPartition

__all__ = ["ReadReplicas", "OFFSET_OUT_OF_RANGE"]

OFFSET_OUT_OF_RANGE = 1


class ReadReplicas:
    """The preferred read replica of each partition, as the leaders named them."""

    def __init__(self, rack: str, max_age_ms: int):
        self.rack = rack
        self._max_age_s = max_age_ms / 1000
        self._chosen: dict[TopicPartition, tuple[int, float]] = {}  # tp -> (node, chosen at)

    def __len__(self) -> int:
        return len(self._chosen)

    def node_of(self, tp: TopicPartition) -> int | None:
        """The broker ``tp``'s next Fetch goes to instead of its leader; None: the leader."""
        chosen = self._chosen.get(tp)
        if chosen is None:
            return None
        if time.monotonic() - chosen[1] >= self._max_age_s:
            del self._chosen[tp]
            return None
        return chosen[0]

    def route(
        self, groups: dict[int, list[TopicPartition]], brokers: Container[int]
    ) -> dict[int, list[TopicPartition]]:
        """``groups`` (partitions by leader) with each partition that has a preferred read
        replica among ``brokers`` moved to that replica's group; a replica the metadata no
        longer names is forgotten (the partition stays with its leader)."""
        if not self._chosen:
            return groups
        routed: dict[int, list[TopicPartition]] = {}
        for leader, tps in groups.items():
            for tp in tps:
                node = self.node_of(tp)
                if node is not None and node not in brokers:
                    del self._chosen[tp]
                    node = None
                routed.setdefault(leader if node is None else node, []).append(tp)
        return routed

    def learn(self, tp: TopicPartition, part: dict) -> None:
        """What one partition's Fetch answer says: a replica to read from next, or an
        error (not OFFSET_OUT_OF_RANGE, see ``forget``) that sends it back to its leader."""
        replica = part.get("preferred_read_replica", -1)
        if replica is not None and replica >= 0:
            self._chosen[tp] = (replica, time.monotonic())
        elif part.get("error_code") and part["error_code"] != OFFSET_OUT_OF_RANGE:
            self._chosen.pop(tp, None)

    def forget(self, tp: TopicPartition) -> bool:
        """Send ``tp`` back to its leader; whether it was read from another replica."""
        return self._chosen.pop(tp, None) is not None

    def forget_all(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._chosen.pop(tp, None)

    def clear(self) -> None:
        self._chosen.clear()

    @staticmethod
    def is_redirect(part: dict) -> bool:
        """Whether a partition's answer only names another replica to read from."""
        replica = part.get("preferred_read_replica", -1)
        return (
            replica is not None
            and replica >= 0
            and not part.get("error_code")
            and not part.get("records")
        )
