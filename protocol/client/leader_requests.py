"""Requests sent to partition leaders, one per broker, and their answers gathered:
partitions grouped by the leader cached metadata names (``LeaderGroups``, ``same_leaders``),
the ListOffsets request of ``KafkaClient.list_offsets`` and how its answers are taken,
``gather`` (a broken connection fails only its own group, after the others are read) and
``PendingFetch`` (Fetch requests in flight while a reader decodes the last answer)."""

from __future__ import annotations

from typing import cast

from ..authorization import request_error
from .cluster_metadata import ClusterMetadata, TopicInfo, TopicPartition
from .read_replicas import ReadReplicas
from ..errors import BrokerError, KafkaConnectionError, KafkaTimeoutError
from ..retry import is_retriable

__all__ = [
    "LeaderGroups",
    "PendingFetch",
    "forget",
    "gather",
    "list_offsets_request",
    "same_leaders",
    "take_list_offsets",
]

Groups = dict[int, list[TopicPartition]]


class LeaderGroups:
    """Partitions by the leader cached metadata names, without a request. The same
    partitions asked again while their topics' metadata is the same parsed answer (a
    stream's every micro-batch) are the last answer again, the same objects, instead of a
    lookup per partition."""

    def __init__(self) -> None:
        # the last answer: its partitions, the topics' metadata it read, the groups
        self._last: tuple[tuple, dict[str, TopicInfo], Groups] | None = None

    def clear(self) -> None:
        self._last = None

    def of(self, meta: ClusterMetadata | None, tps) -> tuple[Groups, dict[str, TopicInfo]] | None:
        """``(groups, the topics' metadata read)``; None when ``meta`` lacks a partition
        or its leader."""
        if meta is None:
            return None
        key = tuple(tps)
        last = self._last
        if (
            last is not None
            and last[0] == key
            and all(meta.topics.get(t) is info for t, info in last[1].items())
            and all(node in meta.brokers for node in last[2])
        ):
            return last[2], last[1]
        groups: Groups = {}
        read: dict[str, TopicInfo] = {}
        for topic, partition in key:
            info = meta.topics.get(topic)
            if info is None:
                return None
            part = info.partitions.get(partition)
            if part is None or part.leader < 0 or part.leader not in meta.brokers:
                return None
            read[topic] = info
            groups.setdefault(part.leader, []).append((topic, partition))
        self._last = (key, read, groups)
        return groups, read


def same_leaders(read: dict[str, TopicInfo], fresh: ClusterMetadata, groups: Groups) -> bool:
    """Whether ``fresh`` names the leaders ``groups`` were sent to (by the topics'
    metadata ``read``). Topics parsed from the same answer are the same objects: then there
    is nothing to compare."""
    if all(fresh.topics.get(t) is info for t, info in read.items()):
        return True
    for node, tps in groups.items():
        for topic, partition in tps:
            info = fresh.topics.get(topic)
            part = info.partitions.get(partition) if info is not None else None
            if part is None or part.leader != node:
                return False
    return True


def list_offsets_request(
    timestamps: dict[TopicPartition, int],
    isolation_level: int,
    last_bodies: dict[int | None, tuple[tuple, dict]] | None = None,
):
    """``build(conn, version, tps)`` of a ListOffsets request for ``tps`` (``_send_all``),
    each at its time in ``timestamps``. With ``last_bodies`` (the last body built for each
    broker, kept by the caller), a request the same as the last one to its broker is that
    body again, the same object: its encoding is then reused too (``REPEATING_REQUESTS``)."""

    def build(conn, version, tps):
        key = None
        if last_bodies is not None:
            key = (version, isolation_level, tuple(tps), tuple(map(timestamps.__getitem__, tps)))
            last = last_bodies.get(conn.node_id)
            if last is not None and last[0] == key:
                return last[1]
        topics: dict[str, list] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(
                {
                    "partition_index": p,
                    "current_leader_epoch": -1,
                    "timestamp": timestamps[(t, p)],
                    "max_num_offsets": 1,
                }
            )
        body = {
            "replica_id": -1,
            "isolation_level": isolation_level,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        if last_bodies is not None and key is not None:
            last_bodies[conn.node_id] = (key, body)
        return body

    return build


def take_list_offsets(response: dict, pending: dict, done: dict) -> BrokerError | None:
    """Move the partitions ``response`` answers from ``pending`` into ``done`` as
    ``(offset, timestamp)``. Raises a non-retriable partition error; returns the first
    retriable one (its partition stays pending)."""
    first_error = None
    for t in response["topics"]:
        name = t["name"]
        for p in t["partitions"]:
            tp = (name, p["partition_index"])
            if tp not in pending:
                continue
            if p["error_code"]:
                err = request_error(p["error_code"], "ListOffsets", topic=tp[0], partition=tp[1])
                if not is_retriable(err):
                    raise err
                first_error = first_error or err
                continue
            offset = p.get("offset", -1)
            if offset == -1 and p.get("old_style_offsets"):
                offset = p["old_style_offsets"][0]
            done[tp] = (offset, p.get("timestamp", -1))
            del pending[tp]
    return first_error


def gather(sent: list, failed: list | None = None) -> list:
    """Wait for every request ``_send_all`` sent; a broken connection fails only its own
    group, raised after the others are read so no response is left on a socket. With
    ``failed``, nothing is raised: each failed group is added to it as ``(node, tps,
    error)``, a group ``_send_all`` could not send to as well."""
    results, failures = [], []
    for node, tps, conn, version, cid, *timeout in sent:
        if conn is None:  # not sent: ``cid`` is why
            failures.append((node, tps, cid))
            continue
        try:
            results.append((node, tps, conn.receive(cid, *timeout), version))
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            failures.append((node, tps, e))
    if failed is not None:
        failed.extend(failures)
    elif failures:
        raise failures[0][2]
    return results


def forget(sent: list) -> None:
    """The answers to the requests ``_send_all`` sent are not wanted: each is dropped as it
    arrives (``BrokerConnection.forget``), never held by its connection."""
    for _, _, conn, _, cid, *_ in sent:
        if conn is not None:
            conn.forget(cid)


class PendingFetch:
    """Fetch requests in flight; ``result()`` gathers them into partition responses. With
    ``replicas`` (``kafka.client.rack``), the answers and failures say which replica each
    partition is read from next (``ReadReplicas``)."""

    def __init__(
        self,
        sent: list,
        names_by_id: dict,
        max_wait_ms: int,
        replicas: ReadReplicas | None = None,
    ):
        self._sent, self._names_by_id = sent, names_by_id
        self._max_wait_ms = max_wait_ms
        self._replicas = replicas

    def result(self, timeout_ms: int | None = None) -> dict[TopicPartition, dict]:
        """Wait for the answers: at most ``timeout_ms`` (default: the request timeout plus
        the Fetch's max wait) for each; a broker's failure is raised after every other
        answer was read."""
        out, failed = self.results(timeout_ms)
        if failed:
            raise failed[0][1]
        return out

    def results(
        self, timeout_ms: int | None = None
    ) -> tuple[dict[TopicPartition, dict], list[tuple[list[TopicPartition], Exception]]]:
        """``result()`` that raises nothing: ``(the partition responses of the brokers that
        answered, [(the partitions of a broker that failed, its error)])``."""
        out: dict[TopicPartition, dict] = {}
        sent = [
            (*s, self._timeout_ms(s[2], timeout_ms)) if s[2] is not None else s for s in self._sent
        ]
        failed: list = []
        answers = gather(sent, failed)
        failures = [(tps, error) for _, tps, error in failed]
        for _, tps, response, _ in answers:
            if response.get("error_code"):
                failures.append(
                    (tps, request_error(response["error_code"], "Fetch", "Fetch failed"))
                )
                continue
            for t in response["responses"]:
                # Ids answered are ones the request named, so a name is always found.
                name = cast(str, t.get("topic") or self._names_by_id.get(t.get("topic_id")))
                for p in t["partitions"]:
                    out[(name, p["partition_index"])] = p
        if self._replicas is not None:
            for tps, _ in failures:  # a replica that fails is not asked again
                self._replicas.forget_all(tps)
            for tp, p in out.items():
                self._replicas.learn(tp, p)
        return out, failures

    def _timeout_ms(self, conn, timeout_ms: int | None) -> int:
        if timeout_ms is None:
            return conn.config.request_timeout_ms + self._max_wait_ms
        return timeout_ms

    def cancel(self) -> None:
        """Abandon the requests: close their connections (the responses would desync)."""
        for _, _, conn, *_ in self._sent:
            if conn is not None:
                conn.close()
