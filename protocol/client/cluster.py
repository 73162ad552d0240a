"""A small cluster client: bootstrap, cached metadata, requests routed to leaders, retries.

``KafkaClient`` keeps one ``BrokerConnection`` per broker. Partition-level requests
(ListOffsets, Fetch, Produce, DeleteRecords) are grouped per leader and pipelined: one
request per broker is sent, then all are awaited. Retriable errors (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, REQUEST_TIMED_OUT, a broken connection, ...)
refresh the metadata and retry with backoff until the deadline; other errors surface at
once, naming the topic and partition. The calls a reader makes (``start_fetch``, the
metadata refreshes, ``latest_offsets``, ``connection``) take the caller's own ``deadline``
(a ``time.monotonic()`` moment): no wait of the call, nor a second broker tried, goes past
it. It is passed with each call, never kept: callers sharing a client keep their own.
Group offsets and coordinator lookups (``group_offsets``) and topic administration
(``admin``) are mixed into the client from modules of their own; the metadata it caches is
in ``cluster_metadata``, the requests it scatters to leaders and gathers in
``leader_requests``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from .admin import AdminRequests
from ..authorization import request_error
from ..config import ClientConfig, parse_host_port
from .connection import BrokerConnection, bounded_ms
from .cluster_metadata import (
    ClusterMetadata,
    PartitionInfo,
    TopicInfo,
    TopicPartition,
    metadata_request,
    parsed_topics,
)
from .offset_requests import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    OffsetRequests,
)
from .record_requests import MAX_FETCH_VERSION_BY_NAME, MAX_PRODUCE_VERSION_BY_NAME, RecordRequests
from ..errors import (
    BrokerError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    PyKafkaError,
    error_class,
)
from .. import framing
from .group_offsets import GroupOffsets
from .leader_requests import (
    PendingFetch,
    forget,
    gather,
)
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

#: A broker that failed within this much of the deadline spent the time: the next is not
#: tried. Its timeouts are whole milliseconds of the time left, and a socket's timer may
#: fire a few milliseconds early, so "now >= deadline" alone could let a second broker
#: take a whole timeout more.
_DEADLINE_SLACK_S = 0.05


class KafkaClient(OffsetRequests, RecordRequests, GroupOffsets, AdminRequests):
    """Talks to a Kafka cluster. Not thread-safe; create one per thread or task.

    The routing core lives here; offsets come from ``offset_requests.OffsetRequests``,
    Fetch and Produce from ``record_requests.RecordRequests``, group offsets and
    coordinators from ``group_offsets.GroupOffsets``, topic administration from
    ``admin.AdminRequests``.
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

    def _any_connection(self, deadline: float | None = None) -> BrokerConnection:
        """An open connection, else a new one to a bootstrap server or a known broker; past
        ``deadline`` (after a failure) no further one is tried."""
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
            if errors and deadline is not None and time.monotonic() >= deadline - _DEADLINE_SLACK_S:
                errors.append("no time left to try the other brokers")
                break
            conn = BrokerConnection(host, port, self.config, node_id)
            try:
                conn.connect(deadline)
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

    def connection(self, node_id: int, deadline: float | None = None) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        meta = self.metadata(deadline=deadline)
        if node_id not in meta.brokers:
            meta = self.refresh_in_use(deadline)
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
        conn.connect(deadline)
        self._connections[node_id] = conn
        return conn

    # ---- metadata -------------------------------------------------------------------------

    def refresh_metadata(
        self, topics: Iterable[str] | None = None, deadline: float | None = None
    ) -> ClusterMetadata:
        """Fetch metadata for ``topics`` (None: every topic) and merge it into the cache;
        with ``deadline`` (a ``time.monotonic()``), waiting no longer than until then."""
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
            conn = self._any_connection(deadline)
            version = conn.version_for(METADATA)
            body = metadata_request(topics, version)
            try:
                answer = conn.request(METADATA, body, version, raw_answer=True, deadline=deadline)
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
        response = framing.decode_response_body(METADATA, version, answer)
        old = self._metadata
        merged = dict(old.topics) if old is not None and topics is not None else {}
        for name, info in parsed_topics(response).items():
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

    def refresh_in_use(self, deadline: float | None = None) -> ClusterMetadata:
        """Fresh metadata for the topics this client has asked about (none yet: the
        brokers only). What a retriable error or stale metadata refreshes: a request for
        every topic would grow with the cluster, not with the query."""
        known = [] if self._metadata is None else sorted(self._metadata.topics)
        return self.refresh_metadata(known, deadline)

    def metadata(
        self, topics: Iterable[str] | None = None, deadline: float | None = None
    ) -> ClusterMetadata:
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
            return self.refresh_metadata(topics, deadline)
        return self.refresh_in_use(deadline) if stale or meta is None else meta

    def topic(self, name: str, deadline: float | None = None) -> TopicInfo:
        info = self.metadata([name], deadline).topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist", topic=name)
        if info.error_code:
            raise request_error(info.error_code, "Metadata", topic=name)
        return info

    def partitions_for(self, topic: str) -> list[int]:
        return sorted(self.topic(topic).partitions)

    def leader_for(self, topic: str, partition: int, deadline: float | None = None) -> int:
        info = self.topic(topic, deadline)
        part = info.partitions.get(partition)
        if part is None:
            raise UnknownTopicOrPartition(
                f"topic {topic!r} has no partition {partition}", topic=topic, partition=partition
            )
        if part.leader < 0:
            raise BrokerError.for_code(5, topic=topic, partition=partition)
        return part.leader

    # ---- retries --------------------------------------------------------------------------

    def retrying(
        self,
        what: str,
        attempt: Callable[[], object],
        timeout_ms: int | None = None,
        deadline: float | None = None,
    ):
        """Run ``attempt`` under the client's retry policy (``protocol.retry``): retriable
        errors retried ``retry.backoff.ms`` apart, doubling up to ``retry.backoff.max.ms``
        (with jitter), until it succeeds, a non-retriable error, or ``timeout_ms`` (default
        ``request.timeout.ms``, cut to what is left until ``deadline``); the topics in use
        are looked up afresh (within ``deadline``) before each new attempt. Called again
        inside an attempt (OffsetFetch looking its coordinator up with FindCoordinator), it
        makes one attempt: the outer loop retries, not a second one nested in it; so does it
        inside a driver lookup's loop, which retries the request's errors itself
        (``protocol.retry.one_attempt_each``)."""
        if self._retrying or outer_loop_retries():
            try:
                return attempt()
            except Exception as e:
                if is_retriable(e):
                    self._coordinators.clear()  # the outer loop's next attempt finds them
                    request_failed_for_outer_loop(what)
                raise
        timeout_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        timeout_ms = bounded_ms(timeout_ms, deadline)
        policy = RetryPolicy.for_client(self.config, timeout_ms)

        def retriable(e: BaseException) -> bool:
            # a coordinator that moved answers NOT_COORDINATOR (or its connection
            # breaks): the next attempt looks every coordinator up again
            self._coordinators.clear()
            return is_retriable(e)

        def refresh(_tries, _error) -> None:
            try:
                self.refresh_in_use(deadline)
            except (KafkaConnectionError, KafkaTimeoutError):
                pass

        self._retrying = True
        try:
            return policy.run(
                what, lambda _tries: attempt(), retriable=retriable, between=refresh, logger=log
            )
        finally:
            self._retrying = False

    def _by_leader(
        self, tps: Iterable[TopicPartition], deadline: float | None = None
    ) -> dict[int, list[TopicPartition]]:
        tps = list(tps)
        self.metadata({t for t, _ in tps}, deadline)
        groups: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            groups.setdefault(self.leader_for(*tp, deadline), []).append(tp)
        return groups

    def _scatter(
        self,
        api,
        groups: dict[int, list[TopicPartition]],
        build: Callable[[BrokerConnection, int, list[TopicPartition]], dict],
        version_cap: Callable[[list[TopicPartition]], int | None] | None = None,
        deadline: float | None = None,
    ):
        """Send one request per leader, then gather; returns ``[(node, tps, response,
        version)]``. No wait goes past ``deadline``."""
        return gather(self._send_all(api, groups, build, version_cap, deadline), None, deadline)

    def _send_all(self, api, groups, build, version_cap=None, deadline=None) -> list:
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
                    conn = self.connection(node, deadline)
                    version = conn.version_for(api, version_cap(tps) if version_cap else None)
                    cid = conn.send(api, build(conn, version, tps), version, deadline=deadline)
                except (KafkaConnectionError, KafkaTimeoutError) as e:
                    sent.append((node, tps, None, None, e))
                    continue
                sent.append((node, tps, conn, version, cid))
        except BaseException:
            forget(sent)
            raise
        return sent


__all__ = [
    "PendingFetch",
    "KafkaClient",
    "MAX_FETCH_VERSION_BY_NAME",
    "MAX_PRODUCE_VERSION_BY_NAME",
    "metadata_request",
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
