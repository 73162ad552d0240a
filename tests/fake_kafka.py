"""A small scripted Kafka broker for tests that no real broker here can serve.

``FakeKafka`` listens on 127.0.0.1, decodes each request with the project's own schemas
(``protocol.schemas``) and framing, and answers ApiVersions, Metadata and ListOffsets from
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

import socket
import struct
import threading
from dataclasses import dataclass, field

from protocol import primitives as p
from protocol.schemas import API_VERSIONS, BY_KEY, LIST_OFFSETS, METADATA

NODE_ID = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35

Log = list[tuple[int, int]]  # (offset, timestamp) of each record, by offset


@dataclass
class FakeKafka:
    """``topics`` maps a topic to ``{partition: [(offset, timestamp), ...]}``; an empty list
    is an empty partition whose log starts (and ends) at ``empty_at.get((topic, p), 0)``."""

    topics: dict[str, dict[int, Log]]
    empty_at: dict[tuple[str, int], int] = field(default_factory=dict)
    requests: list[tuple[str, int, dict]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._accepter.join(timeout=5)
        self._server.close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> "FakeKafka":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except (socket.timeout, OSError):
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        with conn:
            while not self._stop.is_set():
                frame = _read_frame(conn, self._stop)
                if frame is None:
                    return
                reply = self._answer(frame)
                if reply is None:
                    return
                try:
                    conn.sendall(reply)
                except OSError:
                    return

    def _answer(self, frame: bytes) -> bytes | None:
        api_key, pos = p.read_int16(frame, 0)
        version, pos = p.read_int16(frame, pos)
        correlation_id, pos = p.read_int32(frame, pos)
        _client_id, pos = p.read_string(frame, pos)
        api = BY_KEY.get(api_key)
        if api is None or api not in (API_VERSIONS, METADATA, LIST_OFFSETS):
            return None
        if api is API_VERSIONS and version not in api.request.versions:
            # As Kafka does: answer in v0 with the versions it speaks.
            return _response(API_VERSIONS, 0, correlation_id, self._api_versions(
                UNSUPPORTED_VERSION))
        if api.request_header_version(version) >= 2:
            count, pos = p.read_unsigned_varint(frame, pos)
            for _ in range(count):  # request header tagged fields: skip them
                _, pos = p.read_unsigned_varint(frame, pos)
                size, pos = p.read_unsigned_varint(frame, pos)
                pos += size
        body, _ = api.request.decode(version, frame, pos)
        self.requests.append((api.name, version, body))
        if api is API_VERSIONS:
            answer = self._api_versions(0)
        elif api is METADATA:
            answer = self._metadata(body)
        else:
            answer = self._list_offsets(body)
        return _response(api, version, correlation_id, answer)

    def _api_versions(self, error_code: int) -> dict:
        keys = [{"api_key": api.key, "min_version": api.request.versions.lo,
                 "max_version": api.request.versions.hi}
                for api in (LIST_OFFSETS, METADATA, API_VERSIONS)]
        return {"error_code": error_code, "api_keys": keys, "throttle_time_ms": 0}

    def _metadata(self, body: dict) -> dict:
        wanted = body.get("topics")
        names = (sorted(self.topics) if not wanted  # null (or [] in v0): every topic
                 else [t["name"] for t in wanted])
        topics = []
        for name in names:
            if name not in self.topics:
                topics.append({"error_code": UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                               "partitions": []})
                continue
            topics.append({"error_code": 0, "name": name, "is_internal": False,
                           "partitions": [{"error_code": 0, "partition_index": part,
                                           "leader_id": NODE_ID, "leader_epoch": 0,
                                           "replica_nodes": [NODE_ID],
                                           "isr_nodes": [NODE_ID], "offline_replicas": []}
                                          for part in sorted(self.topics[name])]})
        return {"throttle_time_ms": 0,
                "brokers": [{"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port,
                             "rack": None}],
                "cluster_id": "fake-kafka", "controller_id": NODE_ID, "topics": topics,
                "error_code": 0}

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


def _response(api, version: int, correlation_id: int, body: dict) -> bytes:
    out = bytearray(b"\0\0\0\0")
    p.write_int32(out, correlation_id)
    if api.response_header_version(version) >= 1:
        out.append(0)  # no header tagged fields
    api.response.encode(version, body, out)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def _read_frame(conn: socket.socket, stop: threading.Event) -> bytes | None:
    head = _read_exact(conn, 4, stop)
    if head is None:
        return None
    return _read_exact(conn, struct.unpack(">i", head)[0], stop)


def _read_exact(conn: socket.socket, n: int, stop: threading.Event) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = conn.recv(n - len(buf))
        except socket.timeout:
            if stop.is_set():
                return None
            continue
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf
