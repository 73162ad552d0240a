"""Rack-aware fetching (KIP-392): ``kafka.client.rack``.

In ``make test``: librdkafka's mock cluster, whose leaders name a follower to read from on
demand and whose partitions answer an error on demand (a replica that has not copied an
offset yet answers OFFSET_OUT_OF_RANGE, which no Apache Kafka does when asked).

On Apache Kafka, three nodes in three racks with Kafka's ``RackAwareReplicaSelector``
(``make test-security``, marker ``security``). The referee is the brokers' own request
log (``kafka.request.logger`` at DEBUG, ``KafkaCluster(request_log=True)``): which node
answered each Fetch of the reader's client id. With the rack of a node that leads none of
the partitions read, every Fetch after a partition's first goes to that node; without a
rack every Fetch goes to the leaders; and a replica killed mid-read sends the reading back
to the leader, every record read once.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kafka_source.fetcher import read_range, read_ranges
from kafka_source.offset_specs import OffsetRange
from kafka_source.options import parse_reader_options
from protocol.client.cluster import KafkaClient
from protocol.client.read_replicas import ReadReplicas
from protocol.schemas import FETCH
from tests.helpers.waiting import wait_until

RACKS = ["rack-1", "rack-2", "rack-3"]
PARTITIONS = 2
BATCHES = 8  # record batches per partition, each one Fetch at most
BATCH_RECORDS = 50
RECORDS = BATCHES * BATCH_RECORDS  # per partition
VALUE = b"x" * 200


OFFSET_OUT_OF_RANGE = 1


def produce(bootstrap: str, topic: str, n: int, partition: int = 0, batch: int = 20) -> None:
    """``n`` records into ``partition``, in record batches of ``batch``."""
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": batch}
    )
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0


def _mock_read(mock_cluster, topic: str, n: int):
    """``read_range`` of partition 0 with a rack, a record batch a Fetch."""
    options, _ = _options(mock_cluster, topic, "rack-2", poll_timeout_ms=20_000)
    return read_range(options, OffsetRange(topic, 0, 0, n))


def test_the_replica_the_leader_names_serves_the_next_fetches(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 3)
    mock_cluster.partition_set_leader(topic_name, 0, 1)
    mock_cluster.partition_set_follower(topic_name, 0, 2)
    produce(mock_cluster.bootstrap, topic_name, 500, batch=20)
    mock_cluster.start_request_tracking()
    try:
        seen = _offsets(_mock_read(mock_cluster, topic_name, 500))
        fetches = [r.broker_id for r in mock_cluster.get_requests() if r.api_key == FETCH.key]
    finally:
        mock_cluster.stop_request_tracking()
    assert seen == {0: list(range(500))}
    assert fetches[0] == 1 and set(fetches[1:]) == {2}, fetches  # asked once, then redirected


def test_out_of_range_on_the_replica_is_asked_again_at_the_leader(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 3)
    mock_cluster.partition_set_leader(topic_name, 0, 1)
    mock_cluster.partition_set_follower(topic_name, 0, 2)
    produce(mock_cluster.bootstrap, topic_name, 500, batch=20)
    batches = _mock_read(mock_cluster, topic_name, 500)
    seen = _offsets([next(batches), next(batches)])  # reading from the replica by now
    mock_cluster.start_request_tracking()
    mock_cluster.partition_push_request_errors(topic_name, 0, FETCH.key, [OFFSET_OUT_OF_RANGE])
    try:
        for offsets in _offsets(batches).values():  # not taken for data loss
            seen[0].extend(offsets)
        fetches = [r.broker_id for r in mock_cluster.get_requests() if r.api_key == FETCH.key]
    finally:
        mock_cluster.stop_request_tracking()
    assert seen == {0: list(range(500))}
    assert 1 in fetches, fetches  # back to the leader, which named the replica again


def test_a_task_of_small_ranges_asks_the_named_replica_once_for_all(mock_cluster, topic_name):
    """The shared first Fetch of a task (``read_ranges``): the leader names the replica for
    every partition at once, and one Fetch to that replica answers for all of them."""
    mock_cluster.create_topic(topic_name, 4, 3)
    for partition in range(4):
        mock_cluster.partition_set_leader(topic_name, partition, 1)
        mock_cluster.partition_set_follower(topic_name, partition, 2)
        produce(mock_cluster.bootstrap, topic_name, 10, partition=partition)
    options, _ = _options(mock_cluster, topic_name, "rack-2", poll_timeout_ms=20_000)
    mock_cluster.start_request_tracking()
    try:
        seen = _offsets(read_ranges(options, [OffsetRange(topic_name, p, 0, 10) for p in range(4)]))
        fetches = [r.broker_id for r in mock_cluster.get_requests() if r.api_key == FETCH.key]
    finally:
        mock_cluster.stop_request_tracking()
    assert seen == {p: list(range(10)) for p in range(4)}
    assert fetches == [1, 2]  # not a Fetch per partition to the replica


def test_the_reader_takes_kafka_client_rack_the_writer_warns_and_ignores_it():
    from kafka_sink.options import parse_writer_options

    given = {"kafka.bootstrap.servers": "localhost:9", "kafka.client.rack": " eu-west-1a "}
    reader = parse_reader_options({**given, "subscribe": "t"})
    assert reader.client_config.client_rack == "eu-west-1a"
    assert reader.ignored_kafka_options == ()
    assert KafkaClient(reader.client_config).read_replicas is not None
    writer = parse_writer_options(given)  # Kafka's producer has no client.rack either
    assert writer.ignored_kafka_options == ("kafka.client.rack",)
    assert writer.client_config.client_rack == ""
    plain = parse_reader_options({"kafka.bootstrap.servers": "localhost:9", "subscribe": "t"})
    assert KafkaClient(plain.client_config).read_replicas is None  # every Fetch to leaders


def test_a_replica_the_metadata_no_longer_names_is_forgotten():
    replicas = ReadReplicas("rack-2", max_age_ms=300_000)
    replicas.learn(("t", 0), {"error_code": 0, "preferred_read_replica": 2})
    replicas.learn(("t", 1), {"error_code": 0, "preferred_read_replica": 3})
    groups = {1: [("t", 0), ("t", 1)]}
    assert replicas.route(groups, brokers={1, 2}) == {2: [("t", 0)], 1: [("t", 1)]}
    assert replicas.node_of(("t", 1)) is None  # broker 3 left the cluster
    replicas.learn(("t", 0), {"error_code": OFFSET_OUT_OF_RANGE, "preferred_read_replica": -1})
    assert replicas.node_of(("t", 0)) == 2  # the reader decides (forget)
    replicas.learn(("t", 0), {"error_code": 6, "preferred_read_replica": -1})
    assert replicas.node_of(("t", 0)) is None  # NOT_LEADER_OR_FOLLOWER: back to the leader
    expiring = ReadReplicas("rack-2", max_age_ms=0)
    expiring.learn(("t", 0), {"error_code": 0, "preferred_read_replica": 2})
    assert expiring.node_of(("t", 0)) is None  # as old as metadata.max.age.ms


@pytest.fixture(scope="module")
def racked():
    """``(kafka, topic, reader node)``: ``topic`` (replication factor 3, led by two nodes)
    filled, with every follower caught up; ``reader node`` leads none of its partitions."""
    from kafka_testbed import KafkaCluster

    kafka = KafkaCluster(nodes=3, racks=RACKS, request_log=True)
    kafka.start()
    try:
        topic = f"racks-{uuid.uuid4().hex[:8]}"
        with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
            client.create_topics({topic: PARTITIONS}, replication_factor=3)
            client.wait_for_topics([topic])
            leaders = {p: client.leader_for(topic, p) for p in range(PARTITIONS)}
        reader_node = next(n for n in kafka.nodes if n not in leaders.values())
        _fill(kafka, topic)
        _wait_followers_caught_up(kafka, topic)
        yield kafka, topic, reader_node
    finally:
        kafka.stop()


def _fill(kafka, topic: str) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})
    for _ in range(BATCHES):  # a flush a batch: BATCHES record batches per partition
        for partition in range(PARTITIONS):
            for i in range(BATCH_RECORDS):
                producer.produce(topic, value=VALUE, key=b"%d" % i, partition=partition)
        assert producer.flush(30) == 0


def _wait_followers_caught_up(kafka, topic: str, timeout_s: float = 30) -> None:
    """Until each replica's own high watermark (its answer to a Fetch sent to it) has every
    record: a follower learns the leader's a replication round later."""
    with KafkaClient(bootstrap_servers=kafka.bootstrap, client_rack="probe") as client:
        replicas = client.read_replicas
        assert replicas is not None
        deadline, said = time.monotonic() + timeout_s, [""]
        for node in kafka.nodes:
            for partition in range(PARTITIONS):
                tp = (topic, partition)

                def caught_up(tp=tp, node=node) -> bool:
                    replicas.learn(tp, {"preferred_read_replica": node})  # ask that node
                    answer = client.fetch({tp: 0}, max_wait_ms=0)[tp]
                    said[0] = f"node {node}: {answer['error_code']}"
                    return answer["error_code"] == 0 and answer["high_watermark"] == RECORDS

                wait_until(caught_up, max(0.0, deadline - time.monotonic()), lambda: said[0])


def _options(
    kafka, topic: str, rack: str | None, poll_timeout_ms: int = 120_000
) -> tuple[object, str]:
    client_id = f"rack-reader-{uuid.uuid4().hex[:8]}"  # a client (and a pool entry) of its own
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": topic,
        "kafka.client.id": client_id,
        # a record batch a Fetch: the reading takes several Fetches per partition
        "kafka.max.partition.fetch.bytes": "1024",
        "kafkaConsumer.pollTimeoutMs": str(poll_timeout_ms),
    }
    if rack is not None:
        options["kafka.client.rack"] = rack
    return parse_reader_options(options), client_id


def _fetches_by_node(kafka, client_id: str) -> dict[int, int]:
    return {
        node: sum(1 for key, who in kafka.requests(node) if key == FETCH.key and who == client_id)
        for node in kafka.nodes
    }


def _offsets(batches) -> dict[int, list[int]]:
    seen: dict[int, list[int]] = {}
    for batch in batches:
        columns = batch.to_pydict()
        for partition, offset in zip(columns["partition"], columns["offset"]):
            seen.setdefault(partition, []).append(offset)
    return seen


def _wait_logged(kafka, client_id: str, least: int, node: int | None = None) -> dict[int, int]:
    """The Fetch counts, once the log holds at least ``least`` of them (of ``node``'s, if
    given): a broker writes a request's line after its answer is sent."""

    deadline = time.monotonic() + 10
    while True:
        counts = _fetches_by_node(kafka, client_id)
        logged = sum(counts.values()) if node is None else counts[node]
        if logged >= least or time.monotonic() > deadline:
            return counts
        time.sleep(0.1)  # a wait helper's poll; what is left is its answer


@pytest.mark.security
def test_a_client_rack_reads_from_the_replica_in_that_rack(racked):
    kafka, topic, reader_node = racked
    options, client_id = _options(kafka, topic, RACKS[reader_node - 1])
    ranges = [OffsetRange(topic, p, 0, RECORDS) for p in range(PARTITIONS)]
    seen = _offsets(read_ranges(options, ranges))  # one task's shared first Fetch
    assert seen == {p: list(range(RECORDS)) for p in range(PARTITIONS)}
    counts = _wait_logged(kafka, client_id, PARTITIONS * BATCHES)
    leaders = [n for n in kafka.nodes if n != reader_node]
    # each leader: the shared first Fetch, answered with the replica in the reader's rack
    assert all(counts[n] == 1 for n in leaders), counts
    assert counts[reader_node] >= PARTITIONS * BATCHES, counts


@pytest.mark.security
def test_without_a_client_rack_every_fetch_goes_to_the_leaders(racked):
    kafka, topic, reader_node = racked
    options, client_id = _options(kafka, topic, None)
    ranges = [OffsetRange(topic, p, 0, RECORDS) for p in range(PARTITIONS)]
    seen = _offsets(read_ranges(options, ranges))
    assert seen == {p: list(range(RECORDS)) for p in range(PARTITIONS)}
    counts = _wait_logged(kafka, client_id, PARTITIONS * BATCHES)
    leaders = [n for n in kafka.nodes if n != reader_node]
    assert counts[reader_node] == 0, counts
    assert all(counts[n] >= BATCHES for n in leaders), counts


@pytest.mark.security
def test_a_replica_killed_mid_read_sends_the_reading_back_to_the_leader(racked):
    kafka, topic, reader_node = racked
    options, client_id = _options(kafka, topic, RACKS[reader_node - 1])
    batches = read_range(options, OffsetRange(topic, 0, 0, RECORDS))
    seen = _offsets([next(batches)])
    # read from the replica (its log line follows its answer)
    assert _wait_logged(kafka, client_id, 1, node=reader_node)[reader_node] >= 1
    kafka.kill(reader_node)
    try:
        for partition, offsets in _offsets(batches).items():
            seen.setdefault(partition, []).extend(offsets)
        assert seen == {0: list(range(RECORDS))}  # nothing lost, nothing twice
        with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
            leader = client.leader_for(topic, 0)
        assert _wait_logged(kafka, client_id, 2, node=leader)[leader] >= 2  # the leader took over
    finally:
        kafka.restart(reader_node)
