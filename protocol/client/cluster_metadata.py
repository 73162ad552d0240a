"""What ``KafkaClient`` knows of a cluster: one immutable snapshot of what the Metadata
requests answered (``KafkaClient.refresh_metadata`` merges each answer into a new one).

A snapshot, its ``TopicInfo``s and their ``PartitionInfo``s are never changed: an answer
the same as the last one keeps the same snapshot, and what is derived from it (the
partitions grouped by leader, the encoded ListOffsets requests) is made once, when first
asked for, and goes with it when a new answer replaces it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from ..primitives import ZERO_UUID

__all__ = [
    "PartitionInfo",
    "TopicInfo",
    "ClusterMetadata",
    "TopicPartition",
    "Groups",
    "metadata_request",
    "parsed_topics",
]

TopicPartition = tuple[str, int]
#: Partitions by the node that leads them.
Groups = Mapping[int, tuple[TopicPartition, ...]]
T = TypeVar("T")
#: At most this many derived views per snapshot (a stream asks the same few each batch).
_MAX_DERIVED = 16


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionInfo]
    error_code: int = 0
    is_internal: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", MappingProxyType(dict(self.partitions)))


@dataclass(frozen=True, eq=False)
class ClusterMetadata:
    """A snapshot: the brokers and topics as the cluster last answered, read-only."""

    brokers: Mapping[int, tuple[str, int]]
    controller_id: int
    cluster_id: str | None
    topics: Mapping[str, TopicInfo]
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "brokers", MappingProxyType(dict(self.brokers)))
        object.__setattr__(self, "topics", MappingProxyType(dict(self.topics)))

    def derived(self, key: Any, make: Callable[[], T]) -> T:
        """``make()``, made once per ``key`` for this snapshot (a view of it: it must not
        be changed by whoever receives it)."""
        try:
            return self._derived[key]
        except KeyError:
            if len(self._derived) >= _MAX_DERIVED:
                self._derived.clear()
            value = self._derived[key] = make()
            return value

    def leader_groups(self, tps: Iterable[TopicPartition]) -> Groups | None:
        """``tps`` by the leader this snapshot names, without a request; None when it lacks
        a partition or its leader."""
        key = tuple(tps)
        return self.derived(("leader groups", key), lambda: self._group(key))

    def _group(self, tps: tuple[TopicPartition, ...]) -> Groups | None:
        groups: dict[int, list[TopicPartition]] = {}
        for topic, partition in tps:
            info = self.topics.get(topic)
            part = info.partitions.get(partition) if info is not None else None
            if part is None or part.leader < 0 or part.leader not in self.brokers:
                return None
            groups.setdefault(part.leader, []).append((topic, partition))
        return MappingProxyType({node: tuple(group) for node, group in groups.items()})

    def names_leaders(self, groups: Groups) -> bool:
        """Whether this snapshot names the leaders ``groups`` were sent to."""
        return all(
            (info := self.topics.get(topic)) is not None
            and (part := info.partitions.get(partition)) is not None
            and part.leader == node
            for node, tps in groups.items()
            for topic, partition in tps
        )

    def without(self, names: Iterable[str]) -> ClusterMetadata:
        """This snapshot without the topics ``names`` (deleted ones)."""
        gone = set(names)
        topics = {n: t for n, t in self.topics.items() if n not in gone}
        return ClusterMetadata(self.brokers, self.controller_id, self.cluster_id, topics)


def metadata_request(topics: list[str] | None, version: int) -> dict:
    """The body of a Metadata request for ``topics`` (None: every topic) at ``version``;
    it never asks the broker to create a topic."""
    wanted = None if topics is None else [{"name": t, "topic_id": ZERO_UUID} for t in topics]
    if wanted is None and version == 0:
        wanted = []  # v0 spells "all topics" as an empty list
    return {
        "topics": wanted,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def parsed_topics(response: dict) -> dict[str, TopicInfo]:
    """The topics of a Metadata answer, by name."""
    parsed: dict[str, TopicInfo] = {}
    for t in response["topics"]:
        name = t["name"]
        if name is None:
            continue
        parts = {
            p["partition_index"]: PartitionInfo(
                name,
                p["partition_index"],
                p["leader_id"],
                p.get("leader_epoch", -1),
                tuple(p.get("replica_nodes") or ()),
                tuple(p.get("isr_nodes") or ()),
                p["error_code"],
            )
            for p in t["partitions"]
        }
        parsed[name] = TopicInfo(
            name,
            t.get("topic_id") or ZERO_UUID,
            parts,
            t["error_code"],
            t.get("is_internal", False),
        )
    return parsed
