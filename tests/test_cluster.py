"""The cluster client against real brokers over TCP: Apache Kafka (the session's ``kafka``)
and librdkafka's mock cluster (three brokers: leader moves, injected errors).

confluent-kafka (librdkafka) writes, our client reads; kafka-python's record parser is the
referee for the bytes we fetch.
"""

import time

import confluent_kafka
import pytest
from kafka.record import MemoryRecords

from protocol.client.cluster import KafkaClient
from protocol.errors import (
    BrokerError,
    KafkaConnectionError,
    KafkaTimeoutError,
    TopicAlreadyExists,
    TopicAuthorizationFailed,
)
from protocol.schemas import FETCH, LIST_OFFSETS, METADATA, PRODUCE

from .helpers.broker_setup import create_topic
from .helpers.waiting import wait_until

LIST_OFFSETS_KEY = 2


@pytest.fixture(params=["kafka", "mock_cluster"])
def broker(request):
    return request.getfixturevalue(request.param)


def make_topic(broker, client: KafkaClient, name: str, partitions: int) -> None:
    create_topic(broker, name, partitions, min(3, partitions and 3), client=client)


def produce(bootstrap: str, topic: str, messages) -> None:
    """``(partition, key, value, headers)`` in order, in multi-record batches."""
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": False,
            "max.in.flight": 1,
        }
    )
    for partition, key, value, headers in messages:
        p.produce(topic, key=key, value=value, partition=partition, headers=headers)
    assert p.flush(10) == 0


def test_version_negotiation_picks_versions_both_sides_speak(broker):
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.refresh_metadata()
        conn = next(iter(client._connections.values()), None) or client._bootstrap_conn
        for api in (FETCH, PRODUCE, METADATA, LIST_OFFSETS):
            lo, hi = conn.api_versions[api.key]
            chosen = conn.version_for(api)
            assert lo <= chosen <= hi and chosen in api.request.versions
            assert chosen == min(hi, api.request.versions.hi)


def test_topic_create_describe_delete(kafka, topic_name):
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic_name: 3})
        info = client.topic(topic_name)
        assert sorted(info.partitions) == [0, 1, 2]
        assert all(p.leader >= 0 for p in info.partitions.values())
        assert info.topic_id.int != 0
        with pytest.raises(TopicAlreadyExists, match=topic_name):
            client.create_topics({topic_name: 3})
        client.create_topics({topic_name: 3}, exist_ok=True)
        client.delete_topics([topic_name])
        # Kafka deletes asynchronously: the broker's metadata drops the topic soon after
        wait_until(
            lambda: topic_name not in client.refresh_metadata().topics,
            10,
            "the deleted topic gone from the metadata",
            interval=0.1,
        )


def test_a_metadata_answer_that_did_not_change_is_not_parsed_again(kafka, topic_name):
    """A stream asks Metadata of its topics every micro-batch; over thousands of partitions
    decoding the answer costs more than the rest of the micro-batch's planning. An answer
    the same byte for byte (throttle time aside) is not decoded or parsed again: the client
    hands out the topics it parsed before, the same objects. Partitions added change the
    answer, and are seen."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic_name: 2})
        client.wait_for_topics([topic_name])
        first = client.refresh_metadata([topic_name]).topics[topic_name]
        again = client.refresh_metadata([topic_name]).topics[topic_name]
        assert again is first and sorted(again.partitions) == [0, 1]
        # a snapshot: the same one handed out again, which nobody can change
        snapshot = client.refresh_metadata([topic_name])
        assert client.refresh_metadata([topic_name]) is snapshot
        for change in (
            lambda: snapshot.topics.pop(topic_name),
            lambda: first.partitions.pop(0),
            lambda: setattr(first.partitions[0], "leader", 99),
            lambda: setattr(snapshot, "topics", {}),
        ):
            with pytest.raises((TypeError, AttributeError)):
                change()
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        wait_until(
            lambda: len(client.refresh_metadata([topic_name]).topics[topic_name].partitions) == 3,
            30,
            "the added partition in the metadata",
            interval=0.1,
        )
        grown = client.refresh_metadata([topic_name]).topics[topic_name]
        assert grown is not first and sorted(grown.partitions) == [0, 1, 2]
        assert client.refresh_metadata([topic_name]).topics[topic_name] is grown


def test_list_offsets_asked_again_are_not_encoded_again_and_answer_anew(
    kafka, topic_name, monkeypatch
):
    """A stream asks the latest offsets of all its partitions every micro-batch: the same
    request, which the client builds and encodes once per broker. The answers are new
    every time (records written in between are seen); other times are a new request."""
    from protocol.client.connection import BrokerConnection
    from protocol.schemas import LIST_OFFSETS

    encoded = []
    encode = LIST_OFFSETS.request.encode
    monkeypatch.setattr(
        LIST_OFFSETS.request,
        "encode",
        lambda version, body, out: encoded.append(version) or encode(version, body, out),
    )
    sent = []  # the ListOffsets bodies handed to the connections
    send = BrokerConnection.send

    def sending(self, api, body, *args, **kwargs):
        if api is LIST_OFFSETS:
            sent.append(body)
        return send(self, api, body, *args, **kwargs)

    monkeypatch.setattr(BrokerConnection, "send", sending)
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        make_topic(kafka, client, topic_name, 2)
        tps = [(topic_name, 0), (topic_name, 1)]
        # a topic just made may answer a partition at a time (retried with the rest)
        wait_until(lambda: client.latest_offsets(tps) == {tps[0]: 0, tps[1]: 0}, 30, "offsets")
        client.latest_offsets(tps)  # settled: the last request is the whole one
        encoded.clear()
        sent.clear()
        assert client.latest_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert not encoded  # asked as the last time
        produce(kafka.bootstrap, topic_name, [(1, b"k", b"v%d" % i, None) for i in range(3)])
        assert client.latest_offsets(list(tps)) == {tps[0]: 0, tps[1]: 3}
        assert not encoded  # the same request, its answer new
        # not even built again: the bytes derived from the same snapshot, the same object
        assert len(sent) == 2 and sent[1] is sent[0]
        assert client.earliest_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        # (not the latest of one partition: a topic just made may have asked that already)
        assert client.list_offsets({tps[1]: 0})[tps[1]][0] == 0
        assert len(encoded) == 2  # other times, other partitions: requests of their own


def test_a_stream_s_leaders_are_looked_up_again_only_when_its_metadata_changed(kafka, topic_name):
    """Every micro-batch groups the same partitions by leader: while the metadata is the
    same snapshot, its groups are used again (no lookup per partition); a snapshot naming
    other leaders groups them anew, and the offsets stay right throughout."""
    import dataclasses

    from protocol.client.cluster import LATEST_TIMESTAMP

    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        make_topic(kafka, client, topic_name, 2)
        tps = [(topic_name, 0), (topic_name, 1)]
        latest = dict.fromkeys(tps, LATEST_TIMESTAMP)
        wait_until(
            lambda: client.metadata_and_offsets([topic_name], latest)[1] is not None,
            30,
            "offsets",
        )
        groups = client._metadata.leader_groups(latest)
        produce(kafka.bootstrap, topic_name, [(1, b"k", b"v%d" % i, None) for i in range(3)])
        _, offsets = client.metadata_and_offsets([topic_name], dict(latest))
        assert {tp: o for tp, (o, _) in offsets.items()} == {tps[0]: 0, tps[1]: 3}
        assert client._metadata.leader_groups(latest) is groups
        # metadata naming another leader (broker 99): other groups
        meta = client._metadata
        info = meta.topics[topic_name]
        moved = dataclasses.replace(
            info,
            partitions={
                p: dataclasses.replace(part, leader=99) for p, part in info.partitions.items()
            },
        )
        client._metadata = dataclasses.replace(
            meta,
            brokers={**meta.brokers, 99: ("127.0.0.1", 9)},
            topics={**meta.topics, topic_name: moved},
        )
        assert client._metadata.leader_groups(latest) == {99: tuple(tps)}
        # and a leader the metadata does not know: none
        client._metadata = dataclasses.replace(client._metadata, brokers=meta.brokers)
        assert client._metadata.leader_groups(latest) is None
        # the broker's own metadata again: its leaders, the right offsets
        client.refresh_metadata([topic_name])
        assert client._metadata.leader_groups(latest) == groups
        _, offsets = client.metadata_and_offsets([topic_name], dict(latest))
        assert {tp: o for tp, (o, _) in offsets.items()} == {tps[0]: 0, tps[1]: 3}


def test_list_offsets_earliest_and_latest(broker, topic_name):
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        make_topic(broker, client, topic_name, 2)
        produce(
            broker.bootstrap, topic_name, [(i % 2, b"k%d" % i, b"v%d" % i, None) for i in range(7)]
        )
        tps = [(topic_name, 0), (topic_name, 1)]
        assert client.earliest_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert client.latest_offsets(tps) == {tps[0]: 4, tps[1]: 3}


def test_fetched_batches_are_the_records_librdkafka_wrote(broker, topic_name):
    messages = [
        (
            0,
            b"key-%d" % i if i % 3 else None,
            b"value-%d" % i * (i + 1),
            [("h", b"x%d" % i), ("n", None)] if i % 2 else None,
        )
        for i in range(20)
    ]
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        make_topic(broker, client, topic_name, 1)
        produce(broker.bootstrap, topic_name, messages)
        seen, offset = [], 0
        while offset < 20:  # some brokers answer one batch per Fetch
            part = client.fetch({(topic_name, 0): offset}, max_wait_ms=100)[(topic_name, 0)]
            assert part["error_code"] == 0 and part["high_watermark"] == 20
            records = MemoryRecords(bytes(part["records"]))
            while (batch := records.next_batch()) is not None:
                assert batch.validate_crc()
                for record in batch:
                    seen.append(
                        (record.offset, record.key, record.value, list(record.headers) or None)
                    )
            offset = seen[-1][0] + 1
        assert seen == [
            (i, k, v, [(hk, hv) for hk, hv in h] if h else None)
            for i, (_, k, v, h) in enumerate(messages)
        ]


def test_requests_pipelined_on_one_connection_are_answered_in_order(kafka, topic_name):
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic_name: 1})
        conn = client.connection(client.leader_for(topic_name, 0))
        body = {"topics": [{"name": topic_name}], "allow_auto_topic_creation": False}
        ids = [conn.send(METADATA, body) for _ in range(5)]
        assert len(set(ids)) == 5
        for cid in reversed(ids):  # asking for the last first keeps the earlier ones
            response = conn.receive(cid)
            assert [t["name"] for t in response["topics"]] == [topic_name]


def test_leader_move_in_the_middle_of_a_sequence(mock_cluster, topic_name):
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        make_topic(mock_cluster, client, topic_name, 1)
        produce(mock_cluster.bootstrap, topic_name, [(0, None, b"a", None)] * 3)
        tp = (topic_name, 0)
        assert client.latest_offsets([tp]) == {tp: 3}
        old_leader = client.leader_for(*tp)
        new_leader = 1 + old_leader % 3
        mock_cluster.partition_set_leader(topic_name, 0, new_leader)
        # The cached metadata still names the old leader: the next request meets
        # NOT_LEADER_OR_FOLLOWER, refreshes metadata and follows the leader.
        assert client.latest_offsets([tp]) == {tp: 3}
        assert client.leader_for(*tp) == new_leader
        assert client.earliest_offsets([tp]) == {tp: 0}


def test_metadata_and_offsets_share_one_round_trip(mock_cluster, topic_name, monkeypatch):
    """A stream's latestOffset: the ListOffsets requests (to the cached leaders) and the
    Metadata request are all sent before any answer is read, and the answers are those of
    the two calls made one after the other."""
    from protocol.client.connection import BrokerConnection

    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        make_topic(mock_cluster, client, topic_name, 3)
        produce(
            mock_cluster.bootstrap, topic_name, [(p, None, b"x", None) for p in (0, 0, 1, 2, 2, 2)]
        )
        tps = [(topic_name, p) for p in range(3)]
        with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as fresh:
            # no metadata cached yet: no leaders to send the ListOffsets to
            metadata, offsets = fresh.metadata_and_offsets([topic_name], {tp: -1 for tp in tps})
            assert offsets is None and sorted(metadata.topics[topic_name].partitions) == [0, 1, 2]
        client.latest_offsets(tps)  # connections to the leaders open
        calls = []
        send, receive = BrokerConnection.send, BrokerConnection.receive
        monkeypatch.setattr(
            BrokerConnection,
            "send",
            lambda self, api, *a, **k: (calls.append(("send", api.name)), send(self, api, *a, **k))[
                1
            ],
        )
        monkeypatch.setattr(
            BrokerConnection,
            "receive",
            lambda self, *a, **k: (calls.append(("receive", None)), receive(self, *a, **k))[1],
        )
        metadata, offsets = client.metadata_and_offsets([topic_name], {tp: -1 for tp in tps})
        monkeypatch.undo()
        sends = [name for kind, name in calls if kind == "send"]
        assert sorted(set(sends)) == ["ListOffsets", "Metadata"]
        assert calls[: len(sends)] == [("send", name) for name in sends]  # all sent first
        assert {tp: o for tp, (o, _) in offsets.items()} == dict(zip(tps, (2, 1, 3)))
        assert metadata.topics[topic_name].partitions.keys() == {0, 1, 2}
        assert {tp: o for tp, (o, _) in offsets.items()} == client.latest_offsets(tps)


def test_metadata_and_offsets_after_a_leader_move_gives_no_offsets(mock_cluster, topic_name):
    """Sent to a leader the cache names but which lost the partition, the pipelined
    ListOffsets is not used: the fresh metadata names the new leader, and list_offsets
    (which the caller asks next) gets the right offset from it."""
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        make_topic(mock_cluster, client, topic_name, 1)
        produce(mock_cluster.bootstrap, topic_name, [(0, None, b"a", None)] * 3)
        tp = (topic_name, 0)
        assert client.latest_offsets([tp]) == {tp: 3}
        new_leader = 1 + client.leader_for(*tp) % 3
        mock_cluster.partition_set_leader(topic_name, 0, new_leader)
        metadata, offsets = client.metadata_and_offsets([topic_name], {tp: -1})
        assert offsets is None
        assert metadata.topics[topic_name].partitions[0].leader == new_leader
        assert client.latest_offsets([tp]) == {tp: 3}
        # and with the cache up to date, one round trip again
        assert client.metadata_and_offsets([topic_name], {tp: -1})[1] == {tp: (3, -1)}


def test_injected_retriable_errors_are_survived(mock_cluster, topic_name):
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap, retry_backoff_ms=10) as client:
        make_topic(mock_cluster, client, topic_name, 1)
        produce(mock_cluster.bootstrap, topic_name, [(0, None, b"a", None)] * 2)
        tp = (topic_name, 0)
        # NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT,
        # FENCED_LEADER_EPOCH, then a real answer.
        mock_cluster.push_request_errors(LIST_OFFSETS_KEY, [6, 5, 7, 74])
        assert client.latest_offsets([tp]) == {tp: 2}


def test_non_retriable_error_surfaces_at_once_naming_the_partition(mock_cluster, topic_name):
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap) as client:
        make_topic(mock_cluster, client, topic_name, 1)
        mock_cluster.push_request_errors(LIST_OFFSETS_KEY, [29])  # TOPIC_AUTHORIZATION_FAILED
        started = time.monotonic()
        with pytest.raises(TopicAuthorizationFailed, match=topic_name):
            client.latest_offsets([(topic_name, 0)])
        assert time.monotonic() - started < 10  # not retried until the request timeout


def test_retries_stop_at_the_deadline(mock_cluster, topic_name):
    with KafkaClient(bootstrap_servers=mock_cluster.bootstrap, retry_backoff_ms=20) as client:
        make_topic(mock_cluster, client, topic_name, 1)
        mock_cluster.push_request_errors(LIST_OFFSETS_KEY, [6] * 500)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="NOT_LEADER_OR_FOLLOWER"):
            client.list_offsets({(topic_name, 0): -1}, timeout_ms=700)
        assert time.monotonic() - started < 8  # 500 errors answered: over 10 s of backoff
        mock_cluster.clear_request_errors(LIST_OFFSETS_KEY)


def test_unreachable_bootstrap_fails_fast_naming_the_servers():
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError, match="127.0.0.1:1,127.0.0.1:2"):
        KafkaClient(
            bootstrap_servers="127.0.0.1:1,127.0.0.1:2", connect_timeout_ms=500
        ).refresh_metadata()
    assert time.monotonic() - started < 10  # refused at once: not the request timeout


def test_unknown_topic_is_a_typed_error(kafka):
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        with pytest.raises(BrokerError, match="no-such-topic"):
            client.partitions_for("no-such-topic")


def _parked(client: KafkaClient) -> dict:
    """Answers read from a connection that no one asked for yet, by broker."""
    return {c.node_id: dict(c._ready) for c in client._open_connections() if c._ready}


def test_answers_to_the_leaders_asked_before_one_failed_are_read_not_parked():
    """A leader that cannot be reached fails its own group only: the answers of the
    leaders already asked are read by the call (here a pipelined ListOffsets and a Fetch),
    never left parked on their connections for the rest of the client's life."""
    from kafka_testbed import MockCluster

    with MockCluster(brokers=3) as mock:
        topic = "parked"
        mock.create_topic(topic, partitions=3)
        for partition, leader in enumerate((1, 2, 3)):
            mock.partition_set_leader(topic, partition, leader)
        tps = [(topic, p) for p in range(3)]
        with KafkaClient(bootstrap_servers=mock.bootstrap, request_timeout_ms=5000) as client:
            client.refresh_metadata([topic])
            for node in (1, 2):
                client.connection(node)
            mock.broker_set_down(3)  # never connected: reaching it fails while sending
            meta, offsets = client.metadata_and_offsets([topic], {tp: -1 for tp in tps})
            assert topic in meta.topics and offsets is None  # the usual path asks again
            assert _parked(client) == {}
            pending = client.start_fetch({tp: 0 for tp in tps}, max_wait_ms=10)
            parts, failed = pending.results()
            assert sorted(parts) == tps[:2] and [tps for tps, _ in failed] == [tps[2:]]
            assert isinstance(failed[0][1], (KafkaConnectionError, KafkaTimeoutError))
            client.latest_offsets(tps[:2])  # the connections in use again
            assert _parked(client) == {}


def test_an_answer_forgotten_is_dropped_when_it_arrives(mock_cluster, topic_name):
    from protocol.client.connection import BrokerConnection
    from protocol.config import ClientConfig

    mock_cluster.create_topic(topic_name, partitions=1)
    host, port = mock_cluster.bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port), ClientConfig(bootstrap_servers=[f"{host}:{port}"]))
    try:
        conn.connect()
        unwanted = conn.send(METADATA, {"topics": None, "allow_auto_topic_creation": False})
        conn.forget(unwanted)
        wanted = conn.send(METADATA, {"topics": None, "allow_auto_topic_creation": False})
        assert conn.receive(wanted)["brokers"]
        assert conn._ready == {} and conn.idle
    finally:
        conn.close()


def test_a_fresh_client_opens_one_connection_to_its_bootstrap_broker(kafka, topic_name):
    """The bootstrap connection reached a broker's advertised address: asking for that
    broker's connection hands it over instead of connecting (and asking ApiVersions) again."""
    create_topic(kafka, topic_name, 1)
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        meta = client.refresh_metadata([topic_name])
        boot = client._bootstrap_conn
        assert boot is not None and boot.connected
        node = next(n for n, hp in meta.brokers.items() if hp == (boot.host, boot.port))
        assert client.connection(node) is boot
        assert boot.node_id == node and client.open_connections == 1
        leader = client.leader_for(topic_name, 0)
        assert client.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): 0}
        assert client.open_connections == 1 + (leader != node)
