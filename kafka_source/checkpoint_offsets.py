"""A stream's offsets as Spark keeps them, JSON ``{"topic": {"partition": offset}}`` (the
form of Spark's Kafka connector), and back.

Spark hands the end of one micro-batch back as the start of the next, and asks for each
several times (``latestOffset``, ``reportLatestOffset``, ``partitions``, ``commit``), each
time decoded anew from its JSON. Over thousands of partitions each conversion costs
milliseconds, so ``OffsetsJson`` keeps the last few and answers a repeat from them."""

from __future__ import annotations

from collections import deque

from protocol.client.cluster_metadata import TopicPartition

# the conversions a micro-batch repeats: its start, its end, the latest offsets seen
_REMEMBERED = 4


def to_json(offsets: dict[TopicPartition, int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(offsets: dict | None) -> dict[TopicPartition, int]:
    return {
        (topic, int(p)): int(o)
        for topic, parts in (offsets or {}).items()
        for p, o in parts.items()
    }


def _layout(partitions: frozenset[TopicPartition]) -> list[tuple[str, list]]:
    by_topic: dict[str, list[tuple[str, TopicPartition]]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append((str(partition), (topic, partition)))
    return list(by_topic.items())


class OffsetsJson:
    """``to_json`` and ``from_json`` that remember their last few answers. A JSON dict it
    returns is shared (Spark only serialises it); an offsets dict is a copy (the caller
    may change it)."""

    def __init__(self) -> None:
        self._pairs: deque[tuple[dict, dict[TopicPartition, int]]] = deque(maxlen=_REMEMBERED)
        # the partitions of the last offsets turned to JSON, and their order in it:
        # [(topic, [(partition as a JSON key, (topic, partition)), ...]), ...]
        self._partitions: frozenset[TopicPartition] = frozenset()
        self._layout: list[tuple[str, list[tuple[str, TopicPartition]]]] = []

    def to_json(self, offsets: dict[TopicPartition, int]) -> dict:
        for as_json, known in self._pairs:
            if known == offsets:
                return as_json
        if offsets.keys() != self._partitions:
            self._partitions = frozenset(offsets)
            self._layout = _layout(self._partitions)
        # the same partitions as the last time (a stream's usual case): no sort, no str()
        as_json = {
            topic: {key: int(offsets[tp]) for key, tp in entries} for topic, entries in self._layout
        }
        self._pairs.append((as_json, dict(offsets)))
        return as_json

    def from_json(self, as_json: dict | None) -> dict[TopicPartition, int]:
        if as_json is None:
            return {}
        for known_json, offsets in self._pairs:
            if known_json == as_json:
                return dict(offsets)
        offsets = from_json(as_json)
        self._pairs.append((as_json, offsets))
        return dict(offsets)
