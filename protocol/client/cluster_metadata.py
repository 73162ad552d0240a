"""What ``KafkaClient`` knows of a cluster: its brokers, topics and partition leaders, as
the Metadata request answered them (``KafkaClient.refresh_metadata`` merges the answers).

A ``TopicInfo`` and its ``PartitionInfo``s are shared, never changed: an answer the same as
the last one hands out the same objects again, and a caller may compare them by identity."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

__all__ = ["PartitionInfo", "TopicInfo", "ClusterMetadata", "TopicPartition"]

TopicPartition = tuple[str, int]


@dataclass
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo]
    error_code: int = 0
    is_internal: bool = False


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]]
    controller_id: int
    cluster_id: str | None
    topics: dict[str, TopicInfo]
    fetched_at: float = field(default_factory=time.monotonic)
