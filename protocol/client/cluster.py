"""A small cluster client: bootstrap, cached metadata, requests routed to leaders, retries.

``KafkaClient`` keeps one ``BrokerConnection`` per broker. Partition-level requests
(ListOffsets, Fetch, Produce, DeleteRecords) are grouped per leader and pipelined: one
request per broker is sent, then all are awaited. Retriable errors (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, REQUEST_TIMED_OUT, a broken connection, ...)
refresh the metadata and retry with backoff until the deadline; other errors surface at
once, naming the topic and partition. Group offsets and coordinator lookups
(``group_offsets``) and topic administration (``admin``) are mixed into the client from
modules of their own; the metadata it caches is in ``cluster_metadata``, the requests it
scatters to leaders and gathers in ``leader_requests``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from .admin import AdminRequests
from ..authorization import request_error
from ..config import ClientConfig, parse_host_port
from .connection import BrokerConnection
from .cluster_metadata import ClusterMetadata, PartitionInfo, TopicInfo, TopicPartition
from ..errors import (
    BrokerError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    PyKafkaError,
    error_class,
)
from ..framing import decode_response_body
from .group_offsets import GroupOffsets
from .leader_requests import (
    PendingFetch,
    forget,
    gather,
    list_offsets_request,
    take_list_offsets,
)
from ..primitives import ZERO_UUID
from .read_replicas import ReadReplicas
from ..retry import (
    RetryPolicy,
    is_retriable,
    outer_loop_retries,
    request_failed_for_outer_loop,
)

log = logging.getLogger("pykafka.protocol.cluster")

#: The class ``protocol.errors`` generates for error code 3.
UnknownTopicOrPartition = error_class("UNKNOWN_TOPIC_OR_PARTITION")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# Fetch and Produce v13+ name topics by id: the last versions that name them by name, for
# when a topic's id is unknown (brokers without ids, or Metadata without them).
MAX_FETCH_VERSION_BY_NAME = 12
MAX_PRODUCE_VERSION_BY_NAME = 12

#: A broker that failed within this much of the deadline spent the time: the next is not
#: tried. Its timeouts are whole milliseconds of the time left, and a socket's timer may
#: fire a few milliseconds early, so "now >= deadline" alone could let a second broker
#: take a whole timeout more.
_DEADLINE_SLACK_S = 0.05


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


class KafkaClient(GroupOffsets, AdminRequests):
    """Talks to a Kafka cluster. Not thread-safe; create one per thread or task.

    The routing core lives here; group offsets and coordinators come from
    ``group_offsets.GroupOffsets``, topic administration from ``admin.AdminRequests``.
    """

    def __init__(self, config: ClientConfig | None = None, **settings):
        self.config = config or ClientConfig(**settings)
        if not self.config.bootstrap_servers:
            raise PyKafkaError("kafka.bootstrap.servers: no bootstrap servers given")
        self._bootstrap = [parse_host_port(s) for s in self.config.bootstrap_servers]
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        # what the cluster said: a snapshot replaced whole by a new answer
        self._metadata: ClusterMetadata | None = None
        # the request, the answer's bytes (past its throttle time) and the snapshot made of
        # them: the same answer to the same request again keeps that snapshot as it is
        self._metadata_answer: tuple[tuple[str, ...] | None, bytes, ClusterMetadata] | None
        self._metadata_answer = None
        self._metadata_at = 0.0  # when the cluster last answered (time.monotonic())
        # (key type, key) -> the node FindCoordinator named; forgotten on any retried error
        self._coordinators: dict[tuple[int, str], int] = {}
        # A time.monotonic() past which no further broker is tried for a connection (the
        # fetcher sets it to its poll deadline); None: try every candidate.
        self.deadline: float | None = None
        self._retrying = False  # inside ``retrying``: a nested call makes one attempt
        # with kafka.client.rack: the replica each partition is read from (KIP-392)
        self.read_replicas: ReadReplicas | None = None
        if self.config.client_rack:
            self.read_replicas = ReadReplicas(
                self.config.client_rack, self.config.metadata_max_age_ms
            )

    def close(self) -> None:
        for conn in list(self._connections.values()):
            conn.close()
        self._connections.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None

    def __enter__(self) -> KafkaClient:
        return self

    # ---- reuse (protocol.client.pool) ------------------------------------------------------------

    def use_config(self, config: ClientConfig) -> None:
        """Go on with ``config``: the same connection identity (``protocol.client.pool.pool_key``)
        with other timeouts, e.g. those of the task that checked this client out. Open
        connections take it too."""
        self.config = config
        self.deadline = None
        for conn in self._open_connections():
            conn.config = config

    def prune_connections(self) -> int:
        """Close and forget the connections that cannot serve another request
        (``BrokerConnection.close_unless_reusable``: closed by the broker or the network, a
        request left unanswered, a SASL session about to end); returns how many. The cached
        metadata stays: new connections are opened when next needed."""
        dropped = 0
        for node_id, conn in list(self._connections.items()):
            was_open = conn.connected
            if not conn.close_unless_reusable():
                del self._connections[node_id]
                dropped += was_open
        boot = self._bootstrap_conn
        if boot is not None:
            was_open = boot.connected
            if not boot.close_unless_reusable():
                self._bootstrap_conn = None
                dropped += was_open
        return dropped

    def _open_connections(self) -> list[BrokerConnection]:
        conns = list(self._connections.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        return conns

    @property
    def open_connections(self) -> int:
        return sum(c.connected for c in self._open_connections())

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- connections ----------------------------------------------------------------------

    def _any_connection(self) -> BrokerConnection:
        for conn in self._connections.values():
            if conn.connected:
                return conn
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            return self._bootstrap_conn
        errors: list[str] = []
        known = list(self._metadata.brokers.items()) if self._metadata else []
        candidates: list[tuple[int | None, tuple[str, int]]] = [
            (None, hp) for hp in self._bootstrap
        ]
        candidates += [(n, hp) for n, hp in known if hp not in self._bootstrap]
        for node_id, (host, port) in candidates:
            if (
                errors
                and self.deadline is not None
                and time.monotonic() >= self.deadline - _DEADLINE_SLACK_S
            ):
                errors.append("no time left to try the other brokers")
                break
            conn = BrokerConnection(host, port, self.config, node_id)
            try:
                conn.connect()
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                errors.append(str(e))
                continue
            if node_id is None:
                self._bootstrap_conn = conn
            else:
                self._connections[node_id] = conn
            return conn
        raise KafkaConnectionError(
            "could not connect to any of the bootstrap servers "
            f"{','.join(self.config.bootstrap_servers)}: {'; '.join(errors)}"
        )

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        meta = self.metadata()
        if node_id not in meta.brokers:
            meta = self.refresh_in_use()
            if node_id not in meta.brokers:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        host, port = meta.brokers[node_id]
        boot = self._bootstrap_conn
        if boot is not None and boot.connected and (boot.host, boot.port) == (host, port):
            # The bootstrap connection went to this broker's own address: it becomes the
            # broker's connection, so a fresh client (a task's first) does not connect,
            # authenticate and ask ApiVersions twice to one broker.
            boot.node_id = node_id
            self._bootstrap_conn = None
            self._connections[node_id] = boot
            return boot
        conn = BrokerConnection(host, port, self.config, node_id)
        conn.connect()
        self._connections[node_id] = conn
        return conn

    # ---- metadata -------------------------------------------------------------------------

    def refresh_metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Fetch metadata for ``topics`` (None: every topic) and merge it into the cache."""
        from ..schemas import METADATA

        topics = None if topics is None else list(topics)
        while True:
            # A connection opened earlier may have been closed by its broker since (a
            # broker going down): that is found out only by using it. Then ask another
            # broker, or a fresh connection, rather than failing the refresh.
            reused = {
                id(c)
                for c in (*self._connections.values(), self._bootstrap_conn)
                if c is not None and c.connected
            }
            conn = self._any_connection()
            version = conn.version_for(METADATA)
            body = metadata_request(topics, version)
            try:
                answer = conn.request(METADATA, body, version, raw_answer=True)
                break
            except KafkaConnectionError:
                conn.close()
                if id(conn) not in reused:
                    raise
            except KafkaTimeoutError:
                conn.close()
                raise
        self._metadata_at = time.monotonic()
        # from v3 an answer starts with its throttle time, which may change alone
        key = (None if topics is None else tuple(topics), answer[4 if version >= 3 else 0 :])
        last = self._metadata_answer
        if last is not None and last[2] is self._metadata and last[:2] == key:
            return last[2]  # the same answer to the same request: the same snapshot
        response = decode_response_body(METADATA, version, answer)
        old = self._metadata
        merged = dict(old.topics) if old is not None and topics is not None else {}
        for name, info in _parsed_topics(response).items():
            if info.error_code == UnknownTopicOrPartition.code:
                merged.pop(name, None)
            else:
                merged[name] = info
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        self._metadata = ClusterMetadata(
            brokers, response.get("controller_id", -1), response.get("cluster_id"), merged
        )
        self._metadata_answer = (*key, self._metadata)
        for node_id in [n for n in self._connections if n not in brokers]:
            self._connections.pop(node_id).close()
        return self._metadata

    def refresh_in_use(self) -> ClusterMetadata:
        """Fresh metadata for the topics this client has asked about (none yet: the
        brokers only). What a retriable error or stale metadata refreshes: a request for
        every topic would grow with the cluster, not with the query."""
        known = [] if self._metadata is None else sorted(self._metadata.topics)
        return self.refresh_metadata(known)

    def metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Cached metadata, refreshed when stale or when a wanted topic is missing
        (``topics`` None: the brokers and the topics in use, ``refresh_in_use``)."""
        meta = self._metadata
        stale = (
            meta is None
            or time.monotonic() - self._metadata_at > self.config.metadata_max_age_ms / 1000
        )
        if topics is not None:
            topics = list(topics)
            if meta is not None and not stale and all(t in meta.topics for t in topics):
                return meta
            return self.refresh_metadata(topics)
        return self.refresh_in_use() if stale or meta is None else meta

    def topic(self, name: str) -> TopicInfo:
        info = self.metadata([name]).topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist", topic=name)
        if info.error_code:
            raise request_error(info.error_code, "Metadata", topic=name)
        return info

    def partitions_for(self, topic: str) -> list[int]:
        return sorted(self.topic(topic).partitions)

    def leader_for(self, topic: str, partition: int) -> int:
        info = self.topic(topic)
        part = info.partitions.get(partition)
        if part is None:
            raise UnknownTopicOrPartition(
                f"topic {topic!r} has no partition {partition}", topic=topic, partition=partition
            )
        if part.leader < 0:
            raise BrokerError.for_code(5, topic=topic, partition=partition)
        return part.leader

    # ---- retries --------------------------------------------------------------------------

    def retrying(self, what: str, attempt: Callable[[], object], timeout_ms: int | None = None):
        """Run ``attempt`` under the client's retry policy (``protocol.retry``): retriable
        errors retried ``retry.backoff.ms`` apart, doubling up to ``retry.backoff.max.ms``
        (with jitter), until it succeeds, a non-retriable error, or ``timeout_ms`` (default
        ``request.timeout.ms``); the topics in use are looked up afresh before each new
        attempt. Called again inside an attempt (OffsetFetch looking its coordinator up
        with FindCoordinator), it makes one attempt: the outer loop retries, not a second
        one nested in it; so does it inside a driver lookup's loop, which retries the
        request's errors itself (``protocol.retry.one_attempt_each``)."""
        if self._retrying or outer_loop_retries():
            try:
                return attempt()
            except Exception as e:
                if is_retriable(e):
                    self._coordinators.clear()  # the outer loop's next attempt finds them
                    request_failed_for_outer_loop()
                raise
        timeout_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        policy = RetryPolicy.for_client(self.config, timeout_ms)

        def retriable(e: BaseException) -> bool:
            # a coordinator that moved answers NOT_COORDINATOR (or its connection
            # breaks): the next attempt looks every coordinator up again
            self._coordinators.clear()
            return is_retriable(e)

        def refresh(_tries, _error) -> None:
            try:
                self.refresh_in_use()
            except (KafkaConnectionError, KafkaTimeoutError):
                pass

        self._retrying = True
        try:
            return policy.run(
                what, lambda _tries: attempt(), retriable=retriable, between=refresh, logger=log
            )
        finally:
            self._retrying = False

    def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        tps = list(tps)
        self.metadata({t for t, _ in tps})
        groups: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            groups.setdefault(self.leader_for(*tp), []).append(tp)
        return groups

    def _scatter(
        self,
        api,
        groups: dict[int, list[TopicPartition]],
        build: Callable[[BrokerConnection, int, list[TopicPartition]], dict],
        version_cap: Callable[[list[TopicPartition]], int | None] | None = None,
    ):
        """Send one request per leader, then gather; returns ``[(node, tps, response,
        version)]``."""
        return gather(self._send_all(api, groups, build, version_cap))

    def _send_all(self, api, groups, build, version_cap=None) -> list:
        """Send one request per leader of ``groups``: ``[(node, tps, conn, version,
        correlation id)]`` for ``gather``. A leader that cannot be reached (connection
        refused, broken or timed out) fails only its own group: its entry holds the error
        in place of the correlation id (``conn`` None) and the other leaders are still
        asked, so that the caller reads their answers. On any other error the requests
        already sent are forgotten (``leader_requests.forget``) before it is raised: no
        answer is left parked on a connection."""
        sent: list = []
        try:
            for node, tps in groups.items():
                try:
                    conn = self.connection(node)
                    version = conn.version_for(api, version_cap(tps) if version_cap else None)
                    cid = conn.send(api, build(conn, version, tps), version)
                except (KafkaConnectionError, KafkaTimeoutError) as e:
                    sent.append((node, tps, None, None, e))
                    continue
                sent.append((node, tps, conn, version, cid))
        except BaseException:
            forget(sent)
            raise
        return sent

    # ---- ListOffsets ----------------------------------------------------------------------

    def list_offsets(
        self,
        timestamps: dict[TopicPartition, int],
        isolation_level: int = READ_UNCOMMITTED,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Offsets for ``{(topic, partition): timestamp}`` where the timestamp is a time in
        ms, EARLIEST_TIMESTAMP (-2) or LATEST_TIMESTAMP (-1). Returns
        ``{(topic, partition): (offset, timestamp)}``; offset -1 when no record is at or
        after the timestamp."""
        from ..schemas import LIST_OFFSETS

        pending = dict(timestamps)
        done: dict[TopicPartition, tuple[int, int]] = {}
        build = list_offsets_request(pending, isolation_level, self._metadata)

        def attempt():
            if not pending:
                return done
            first_error = None
            for _, _, response, _ in self._scatter(LIST_OFFSETS, self._by_leader(pending), build):
                first_error = take_list_offsets(response, pending, done) or first_error
            if pending:
                raise first_error or BrokerError.for_code(
                    7, "no answer for " + ", ".join(f"{t}-{p}" for t, p in pending)
                )
            return done

        return self.retrying("ListOffsets", attempt, timeout_ms)

    def metadata_and_offsets(
        self,
        topics: Iterable[str] | None,
        timestamps: dict[TopicPartition, int],
        isolation_level: int = READ_UNCOMMITTED,
    ) -> tuple[ClusterMetadata, dict | None]:
        """``refresh_metadata(topics)`` and ``list_offsets(timestamps, isolation_level)``
        in one round trip instead of two: the ListOffsets requests go to the leaders the
        cached metadata names and the Metadata request follows before any answer is read
        (a broker answers a connection's requests in order).

        Returns ``(metadata, offsets)``. ``offsets`` is None when the answers cannot be
        taken as they are: a partition the cache does not know or knows no leader of, a
        leader that the fresh metadata names differently, an error in any answer, a
        connection that failed on the way. The caller then asks ``list_offsets`` with the
        fresh metadata (which retries and follows leaders as usual). Errors of the Metadata
        request itself are raised as ``refresh_metadata`` raises them."""
        from ..schemas import LIST_OFFSETS

        topics = None if topics is None else list(topics)
        snapshot = self._metadata
        groups = None if snapshot is None else snapshot.leader_groups(timestamps)
        if not groups:
            return self.refresh_metadata(topics), None
        pending = dict(timestamps)
        try:
            sent = self._send_all(
                LIST_OFFSETS, groups, list_offsets_request(pending, isolation_level, snapshot)
            )
        except PyKafkaError as e:  # nothing left in flight (_send_all): the usual path asks
            log.debug("pipelined ListOffsets not sent: %s", e)
            return self.refresh_metadata(topics), None
        responses: list | None
        try:
            metadata = self.refresh_metadata(topics)
        finally:
            try:  # read every answer, so that nothing is left on a connection
                responses = gather(sent)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("pipelined ListOffsets failed: %s", e)
                responses = None
        if responses is None:
            return metadata, None
        done: dict[TopicPartition, tuple[int, int]] = {}
        try:
            for _, _, response, _ in responses:
                if take_list_offsets(response, pending, done) is not None:
                    return metadata, None
        except BrokerError:
            return metadata, None
        if metadata is not snapshot and not metadata.names_leaders(groups):
            return metadata, None
        return metadata, (done if not pending else None)

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: o
            for tp, (o, _) in self.list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps}).items()
        }

    def latest_offsets(
        self, tps: Iterable[TopicPartition], isolation_level: int = READ_UNCOMMITTED
    ) -> dict[TopicPartition, int]:
        return {
            tp: o
            for tp, (o, _) in self.list_offsets(
                {tp: LATEST_TIMESTAMP for tp in tps}, isolation_level
            ).items()
        }

    # ---- Fetch and Produce (records as bytes; record batches live in protocol.records) ----

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
    ) -> PendingFetch:
        """Send the Fetch requests and return at once; ``.result()`` waits for them. This
        lets a reader keep the next Fetch in flight while it decodes the previous one."""
        from ..schemas import FETCH

        meta = self.metadata({t for t, _ in offsets})
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

        groups = self._by_leader(offsets)
        if self.read_replicas is not None:  # a partition's closer replica, when named
            groups = self.read_replicas.route(groups, meta.brokers)
        sent = self._send_all(FETCH, groups, build, cap)
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
    ) -> dict:
        """Send one record batch to a partition's leader; returns the partition response
        (``base_offset``, ``error_code``, ...). Errors stay in ``error_code``."""
        from ..schemas import PRODUCE

        info = self.topic(topic)
        conn = self.connection(self.leader_for(topic, partition))
        # Produce v13+ names topics by id; stay below it when the id is unknown.
        version = conn.version_for(
            PRODUCE, MAX_PRODUCE_VERSION_BY_NAME if info.topic_id == ZERO_UUID else None
        )
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
            conn.send(PRODUCE, body, version, expect_response=False)
            return {"index": partition, "error_code": 0, "base_offset": -1}
        response = conn.request(PRODUCE, body, version)
        return response["responses"][0]["partition_responses"][0]


__all__ = [
    "PendingFetch",
    "KafkaClient",
    "ClusterMetadata",
    "TopicInfo",
    "PartitionInfo",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "ProtocolError",
]


def _parsed_topics(response: dict) -> dict[str, TopicInfo]:
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
