"""Requests sent to partition leaders, one per broker, and their answers gathered: the
ListOffsets request of ``KafkaClient.list_offsets`` and how its answers are taken,
``gather`` (a broken connection fails only its own group, after the others are read) and
``PendingFetch`` (Fetch requests in flight while a reader decodes the last answer)."""

from __future__ import annotations

from typing import cast

from ..authorization import request_error
from .cluster_metadata import ClusterMetadata, TopicPartition
from .read_replicas import ReadReplicas
from ..errors import BrokerError, KafkaConnectionError, KafkaTimeoutError
from ..retry import is_retriable

__all__ = [
    "PendingFetch",
    "forget",
    "gather",
    "list_offsets_request",
    "take_list_offsets",
]


def list_offsets_request(
    timestamps: dict[TopicPartition, int],
    isolation_level: int,
    snapshot: ClusterMetadata | None = None,
):
    """``build(conn, version, tps)`` of a ListOffsets request for ``tps`` (``_send_all``),
    each at its time in ``timestamps``. With ``snapshot`` (the metadata the partitions were
    grouped by), the request's bytes are derived from it: the same request asked again
    while the cluster's answer stays the same (a stream's every micro-batch) is encoded
    once."""
    from ..framing import encode_body
    from ..schemas import LIST_OFFSETS

    def body(version, tps) -> dict:
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
        return {
            "replica_id": -1,
            "isolation_level": isolation_level,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

    def build(conn, version, tps):
        if snapshot is None:
            return body(version, tps)
        tps = tuple(tps)
        times = tuple(map(timestamps.__getitem__, tps))
        key = ("ListOffsets", conn.node_id, version, isolation_level, tps, times)
        return snapshot.derived(key, lambda: encode_body(LIST_OFFSETS, version, body(version, tps)))

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


def gather(sent: list, failed: list | None = None, deadline: float | None = None) -> list:
    """Wait for every request ``_send_all`` sent; a broken connection fails only its own
    group, raised after the others are read so no response is left on a socket. With
    ``failed``, nothing is raised: each failed group is added to it as ``(node, tps,
    error)``, a group ``_send_all`` could not send to as well. No wait goes past
    ``deadline`` (a ``time.monotonic()``; None: each its own timeout)."""
    results, failures = [], []
    for node, tps, conn, version, cid, *timeout in sent:
        if conn is None:  # not sent: ``cid`` is why
            failures.append((node, tps, cid))
            continue
        try:
            wait = timeout[0] if timeout else None
            if deadline is not None:
                wait = conn.wait_ms(wait, deadline)
            results.append((node, tps, conn.receive(cid, wait), version))
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

    def result(
        self, timeout_ms: int | None = None, deadline: float | None = None
    ) -> dict[TopicPartition, dict]:
        """Wait for the answers: at most ``timeout_ms`` (default: the request timeout plus
        the Fetch's max wait) for each, and not past ``deadline`` (a ``time.monotonic()``);
        a broker's failure is raised after every other answer was read."""
        out, failed = self.results(timeout_ms, deadline)
        if failed:
            raise failed[0][1]
        return out

    def results(
        self, timeout_ms: int | None = None, deadline: float | None = None
    ) -> tuple[dict[TopicPartition, dict], list[tuple[list[TopicPartition], Exception]]]:
        """``result()`` that raises nothing: ``(the partition responses of the brokers that
        answered, [(the partitions of a broker that failed, its error)])``."""
        out: dict[TopicPartition, dict] = {}
        sent = [
            (*s, self._timeout_ms(s[2], timeout_ms)) if s[2] is not None else s for s in self._sent
        ]
        failed: list = []
        answers = gather(sent, failed, deadline)
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
