"""Metadata for the topics in use, not for the cluster (issue 33): a retriable error, or
metadata gone stale, refreshes the topics the client has asked about, so the request and
the cache a pooled client keeps grow with the query, not with the cluster.

On Apache Kafka behind fault proxies, with 200 other topics: the session's 1-node Kafka
(``proxied_kafka``, in ``make test``) and a 3-node Kafka with a proxy per node (``make
test-faults``, marker ``broker_faults``). A proxy answers one Fetch or ListOffsets with
NOT_LEADER_OR_FOLLOWER (what a broker says after a leader moved, which no broker does on
demand) and keeps every
Metadata request the client sends, which the test decodes: each one names the query's
topic, or no topic (the brokers only), never every topic.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from kafka_source.options import parse_reader_options
from protocol import primitives as p
from protocol.client.cluster import LATEST_TIMESTAMP, KafkaClient
from protocol.schemas import FETCH, LIST_OFFSETS, METADATA

from .helpers.frames import rewriting

OTHER_TOPICS = 200
NOT_LEADER_OR_FOLLOWER = 6


class _Proxies:
    """The fault proxies of every node of a cluster, used as one: a rule set on each, the
    requests each kept and the rewrites each made added up."""

    def __init__(self, proxies):
        self.proxies = list(proxies)
        self.address = ",".join(each.address for each in self.proxies)

    def reset(self) -> None:
        for each in self.proxies:
            each.reset()

    def keep_requests(self, api_key: int) -> None:
        for each in self.proxies:
            each.keep_requests(api_key)

    def rewrite_response(self, api_key: int, rewrite, count: int = 1) -> None:
        for each in self.proxies:
            each.rewrite_response(api_key, rewrite, count)

    @property
    def kept(self) -> list:
        return [frame for each in self.proxies for frame in each.kept]

    @property
    def stats(self) -> dict:
        return {"rewrites": sum(each.stats["rewrites"] for each in self.proxies)}


def _three_brokers_behind_proxies():
    """A 3-node Apache Kafka whose every node clients reach through a fault proxy of its
    own (the metadata names the proxies)."""
    from kafka_testbed import KafkaCluster

    from .helpers.fault_proxy import FaultProxy

    proxies = [FaultProxy() for _ in range(3)]
    cluster = KafkaCluster(nodes=3, proxied={i + 1: each.port for i, each in enumerate(proxies)})
    cluster.start()
    for node, each in enumerate(proxies, start=1):
        host, port = cluster.listener("PROXIED", node_ids=[node]).split(":")
        each.set_target(host, int(port))
    return _Proxies(proxies), cluster


@pytest.fixture(
    scope="module", params=["1 broker", pytest.param("3 brokers", marks=pytest.mark.broker_faults)]
)
def crowded(request):
    """``(proxies, kafka, topic)``: ``topic`` (3 partitions, 50 records in partition 0)
    beside 200 others, on the session's 1-node Kafka behind its proxy, or on a 3-node
    Kafka whose nodes each have a proxy (``make test-faults``: three more JVMs)."""
    if request.param == "1 broker":
        proxy, kafka = request.getfixturevalue("proxied_kafka")
        proxies, own = _Proxies([proxy]), None
    else:
        proxies, kafka = own = _three_brokers_behind_proxies()
    try:
        run = uuid.uuid4().hex[:8]
        topic = f"scope-{run}"
        with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
            client.create_topics({f"scope-other-{run}-{i}": 1 for i in range(OTHER_TOPICS)})
            client.create_topics({topic: 3})
            client.wait_for_topics([topic])
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})
        for i in range(50):
            producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(10) == 0
        yield proxies, kafka, topic
    finally:
        if own is not None:
            own[1].stop()
            for each in own[0].proxies:
                each.close()


@pytest.fixture
def crowded_proxy(crowded):
    """``crowded``'s proxies (one a node) as one, keeping the Metadata requests they pass."""
    proxy, _, _ = crowded
    proxy.reset()
    proxy.keep_requests(METADATA.key)
    yield proxy
    proxy.reset()


def _asked_topics(frames) -> list[list[str] | None]:
    """The topics each kept Metadata request names (None: every topic)."""
    asked = []
    for _, version, frame in frames:
        view = memoryview(frame)
        # api key, version, correlation id (8 bytes), then the client id (int16 length)
        pos = 10 + max(0, int.from_bytes(frame[8:10], "big", signed=True))
        if METADATA.request_header_version(version) >= 2:
            _, pos = p.read_unsigned_varint(view, pos)  # no tagged fields
        body, _ = METADATA.request.decode(version, view[pos:])
        topics = body["topics"]
        asked.append(None if topics is None else [t["name"] for t in topics])
    return asked


def _not_leader(api):
    """A rewrite of ``api``'s answer: every partition NOT_LEADER_OR_FOLLOWER."""

    def change(body):
        for topic in body.get("responses") or body.get("topics") or ():
            for part in topic["partitions"]:
                part["error_code"] = NOT_LEADER_OR_FOLLOWER
                if "records" in part:
                    part["records"] = None
        return True

    return rewriting(api, change)


def _assert_only(asked, topic) -> None:
    assert asked, "the client sent no Metadata request through the proxy"
    assert all(names is not None and set(names) <= {topic} for names in asked), (
        f"Metadata requests beyond the query's topic {topic!r}: "
        f"{[n if n is None or len(n) < 5 else f'{len(n)} topics' for n in asked]}"
    )
    assert [topic] in asked  # the refresh after the error asked for it


def test_a_fetch_answered_not_leader_refreshes_the_query_topic_only(crowded, crowded_proxy):
    _, _, topic = crowded
    crowded_proxy.rewrite_response(FETCH.key, _not_leader(FETCH), count=1)
    options = parse_reader_options(
        {
            "kafka.bootstrap.servers": crowded_proxy.address,
            "subscribe": topic,
            "kafka.client.id": f"scope-{uuid.uuid4().hex[:8]}",
        }
    )  # a client of its own
    rows = pa.Table.from_batches(list(read_range(options, OffsetRange(topic, 0, 0, 50))))
    assert rows.num_rows == 50 and crowded_proxy.stats["rewrites"] == 1
    _assert_only(_asked_topics(crowded_proxy.kept), topic)


def test_list_offsets_answered_not_leader_refreshes_the_query_topic_only(crowded, crowded_proxy):
    _, _, topic = crowded
    crowded_proxy.rewrite_response(LIST_OFFSETS.key, _not_leader(LIST_OFFSETS), count=1)
    with KafkaClient(bootstrap_servers=crowded_proxy.address) as client:
        latest = client.list_offsets({(topic, 0): LATEST_TIMESTAMP})
        assert latest[(topic, 0)][0] == 50 and crowded_proxy.stats["rewrites"] == 1
        assert set(client.metadata().topics) == {topic}  # the cache holds what was asked
    _assert_only(_asked_topics(crowded_proxy.kept), topic)
