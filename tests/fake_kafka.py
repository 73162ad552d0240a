"""A small scripted Kafka broker for tests that no real broker here can serve.

``FakeKafka`` (a ``tests.scripted_broker.ScriptedBroker``) listens on 127.0.0.1, decodes
each request with the project's own schemas (``protocol.schemas``), and answers ApiVersions, Metadata and ListOffsets from
a table it holds: for every partition, the (offset, timestamp) of each record. ListOffsets
follows the protocol guide's rules:

- timestamp -2 (earliest): the log start offset (the first record's offset);
- timestamp -1 (latest): the high watermark (one past the last record), or under
  read_committed the last stable offset (the same here: the fake has no transactions);
- timestamp -3 (max timestamp, v7+): the record with the largest timestamp;
- any other timestamp T: the first record whose timestamp is >= T, answered with that
  record's offset and timestamp, or offset -1 and timestamp -1 when there is none.

It is one broker (node 1) leading every partition. Any other request closes the
connection. Every decoded request is kept in ``requests`` as ``(api name, version, body)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.schemas import API_VERSIONS, LIST_OFFSETS, METADATA

from .scripted_broker import (UNKNOWN_TOPIC_OR_PARTITION, Request, ScriptedBroker,
                              metadata_answer, response_frame)

UNSUPPORTED_VERSION = 35

Log = list[tuple[int, int]]  # (offset, timestamp) of each record, by offset


@dataclass
class FakeKafka(ScriptedBroker):
    """``topics`` maps a topic to ``{partition: [(offset, timestamp), ...]}``; an empty list
    is an empty partition whose log starts (and ends) at ``empty_at.get((topic, p), 0)``."""

    topics: dict[str, dict[int, Log]]
    empty_at: dict[tuple[str, int], int] = field(default_factory=dict)
    requests: list[tuple[str, int, dict]] = field(default_factory=list)

    def __post_init__(self) -> None:
        ScriptedBroker.__init__(self, name="fake-kafka")

    # ---- the log ------------------------------------------------------------------------

    def log_bounds(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        log = self.topics[topic][partition]
        if not log:
            at = self.empty_at.get((topic, partition), 0)
            return at, at
        return log[0][0], log[-1][0] + 1

    def offset_for(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """The ListOffsets answer (offset, timestamp) for one partition."""
        start, end = self.log_bounds(topic, partition)
        log = self.topics[topic][partition]
        if timestamp == -2:
            return start, -1
        if timestamp == -1:
            return end, -1
        if timestamp == -3:
            if not log:
                return -1, -1
            offset, ts = max(log, key=lambda r: (r[1], -r[0]))
            return offset, ts
        for offset, ts in log:
            if ts >= timestamp:
                return offset, ts
        return -1, -1

    # ---- serving ------------------------------------------------------------------------

    def answer(self, request_frame: bytes, session) -> bytes | None:
        req = Request.read(request_frame)
        api = req.api
        if api is None or api not in (API_VERSIONS, METADATA, LIST_OFFSETS):
            return None
        if api is API_VERSIONS and req.version not in api.request.versions:
            # As Kafka does: answer in v0 with the versions it speaks.
            return response_frame(API_VERSIONS, 0, req.correlation_id, self._api_versions(
                UNSUPPORTED_VERSION))
        body = req.body()
        self.requests.append((api.name, req.version, body))
        if api is API_VERSIONS:
            answer = self._api_versions(0)
        elif api is METADATA:
            answer = self._metadata(body)
        else:
            answer = self._list_offsets(body)
        return response_frame(api, req.version, req.correlation_id, answer)

    def _api_versions(self, error_code: int) -> dict:
        keys = [{"api_key": api.key, "min_version": api.request.versions.lo,
                 "max_version": api.request.versions.hi}
                for api in (LIST_OFFSETS, METADATA, API_VERSIONS)]
        return {"error_code": error_code, "api_keys": keys, "throttle_time_ms": 0}

    def _metadata(self, body: dict) -> dict:
        wanted = body.get("topics")
        names = (sorted(self.topics) if not wanted  # null (or [] in v0): every topic
                 else [t["name"] for t in wanted])
        return metadata_answer(self.port, "fake-kafka", [
            (name, sorted(self.topics[name]) if name in self.topics else None)
            for name in names])

    def _list_offsets(self, body: dict) -> dict:
        topics = []
        for t in body["topics"]:
            parts = []
            for req in t["partitions"]:
                part = req["partition_index"]
                if t["name"] not in self.topics or part not in self.topics[t["name"]]:
                    parts.append({"partition_index": part,
                                  "error_code": UNKNOWN_TOPIC_OR_PARTITION})
                    continue
                offset, ts = self.offset_for(t["name"], part, req["timestamp"])
                parts.append({"partition_index": part, "error_code": 0, "timestamp": ts,
                              "offset": offset, "leader_epoch": 0 if offset >= 0 else -1})
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}
