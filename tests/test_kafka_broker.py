"""The broker-facing selection: what a real Apache Kafka must be tried on.

``make test-kafka`` runs the tests marked ``kafka`` (this file) against the broker of the
``kafka_broker`` fixture: the Kafka at ``PYKAFKA_TEST_BOOTSTRAP=host:port`` when
it is set (.github/workflows/kafka.yml starts docker-compose.yml's Apache Kafka 4.x and 3.x
for it), else the session's Tansu, so ``make test`` runs the selection here too.

Against either broker: read and write interop with librdkafka (compressed batches, keys,
headers, timestamps), and an exactly-once stream SIGKILLed and restarted. Against a real
Kafka only (marked ``real_kafka``, skipped on Tansu for its documented bugs): read_committed
over aborted transactions (Tansu answers Fetch with no AbortedTransactions), timestamp
lookups (Tansu answers every timestamp with the earliest offset), DeleteRecords and the data
loss it makes (Tansu drops the connection on DeleteRecords).
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest

from protocol.cluster import KafkaClient

from .broker_setup import create_topic
from .txn_referee import (aborted_values, committed_values, librdkafka_read_committed,
                          log_of, open_transactions, stable_offsets_behind)

pytestmark = pytest.mark.kafka

CODECS = ["gzip", "snappy", "lz4", "zstd"]


def _produce(bootstrap: str, topic: str, records: list[dict], **config) -> None:
    """``records`` (dicts of confluent-kafka's ``produce`` arguments) in order, all but the
    last of each partition batched, the last alone (Tansu's ListOffsets latest is the last
    batch's base offset + 1)."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  "message.timeout.ms": 20000, **config})
    errors: list = []
    last = {r["partition"]: i for i, r in enumerate(records)}
    for i, r in enumerate(records):
        if i not in last.values():
            p.produce(topic, **r, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0
    for i in sorted(last.values()):
        p.produce(topic, **records[i], on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0
    assert errors == []


def _librdkafka_read(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    """The first ``count`` messages of the topic, read by confluent-kafka."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "interop",
                                  "enable.auto.commit": False})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        got, deadline = [], time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
        return got
    finally:
        c.close()


def _read(spark, bootstrap: str, topic: str, **options):
    reader = (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_a_produced_record_comes_back_over_fetch(kafka_broker, topic_name):
    """The selection's quick check (no Spark): librdkafka produces, the client's own Fetch
    reads. Prints the broker, which test_the_switch_points_the_selection_at_a_broker reads."""
    broker = kafka_broker
    print(f"selection broker: {broker!r}")
    create_topic(broker, topic_name, 1)
    _produce(broker.bootstrap, topic_name,
             [{"partition": 0, "key": b"k", "value": f"v{i}".encode()} for i in range(3)])
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        assert client.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): 3}
    values = [r.value for _, _, records in log_of(broker.bootstrap, topic_name, 1)
              for r in records]
    assert values == [b"v0", b"v1", b"v2"]


@pytest.mark.spark
def test_we_read_what_librdkafka_wrote_in_every_codec(spark, kafka_broker,
                                                      topic_name):
    """Keys, values, headers and timestamps of compressed batches (one codec per
    partition) written by librdkafka come back through spark.read."""
    broker = kafka_broker
    create_topic(broker, topic_name, len(CODECS))
    base = int(time.time() * 1000) - 60_000
    expected = []
    for p, codec in enumerate(CODECS):
        records = [{"partition": p, "key": f"k{p}-{i}".encode(), "value": f"v{p}-{i}".encode(),
                    "headers": [("codec", codec.encode()), ("i", str(i).encode())],
                    "timestamp": base + i} for i in range(20)]
        _produce(broker.bootstrap, topic_name, records, **{"compression.type": codec})
        expected += [(p, i, f"k{p}-{i}", f"v{p}-{i}", base + i, [("codec", codec), ("i", str(i))])
                     for i in range(20)]
    rows = _read(spark, broker.bootstrap, topic_name, includeHeaders="true").selectExpr(
        "partition", "offset", "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v",
        "CAST(unix_millis(timestamp) AS BIGINT) AS ts", "headers").collect()
    got = sorted((r.partition, r.offset, r.k, r.v, r.ts,
                  [(h.key, bytes(h.value).decode()) for h in r.headers]) for r in rows)
    assert got == sorted(expected)


@pytest.mark.spark
def test_librdkafka_reads_what_we_wrote(spark, kafka_broker, topic_name):
    """Rows written with df.write (keys, headers, a partition column, lz4) are what
    librdkafka's consumer reads back, in their partitions (two Spark tasks write each
    partition, in no set order between them)."""
    broker = kafka_broker
    create_topic(broker, topic_name, 2)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2, [("n", str(i).encode())]) for i in range(40)],
        "key string, value string, partition int, "
        "headers array<struct<key: string, value: binary>>")
    (df.write.format("pykafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic_name).option("kafka.compression.type", "lz4")
     .mode("append").save())
    messages = _librdkafka_read(broker.bootstrap, topic_name, 2, 40)
    got = {}
    for m in messages:
        got.setdefault(m.partition(), []).append(
            (m.key().decode(), m.value().decode(), [(k, v.decode()) for k, v in m.headers()]))
    want = {p: sorted((f"k{i}", f"v{i}", [("n", str(i))]) for i in range(40) if i % 2 == p)
            for p in (0, 1)}
    assert {p: sorted(rows) for p, rows in got.items()} == want


@pytest.mark.spark
@pytest.mark.parametrize("point", ["before_driver_commit", "after_commit"])
def test_exactly_once_stream_killed_and_restarted(spark, kafka_broker, topic_name,
                                                  tmp_path, point):
    """tests/test_sink_exactly_once_spark.py's kill-and-restart, on the selection's broker:
    every source row once in the target by Kafka's rule and no transaction left open. On a
    real Kafka, which sends AbortedTransactions, librdkafka's read_committed consumer and our
    reader show exactly the source rows also where the restart aborted the crashed run's
    transactions; on Tansu only where nothing was aborted (after the commit)."""
    if point == "after_commit" and not kafka_broker.real_kafka:
        pytest.skip("on Tansu tests/test_sink_exactly_once_spark.py runs every kill point; "
                    "here the one that aborts transactions is enough")
    from .test_sink_exactly_once_spark import _crash_and_restart, our_read_committed
    from .test_source_streaming import produce, values_for
    broker = kafka_broker
    source, target = f"{topic_name}-src", f"{topic_name}-dst"
    create_topic(broker, source, 2)
    create_topic(broker, target, 2)
    rows = values_for("r", 2, 30)
    produce(broker.bootstrap, source, rows)
    _crash_and_restart(spark, broker, tmp_path, source, target, f"q-{uuid.uuid4().hex[:8]}",
                       point)
    expected = sorted(v for vals in rows.values() for v in vals)
    assert sorted(committed_values(broker.bootstrap, target, 2)) == expected
    assert open_transactions(broker.bootstrap, target, 2) == []
    if point != "after_commit":
        assert aborted_values(broker.bootstrap, target, 2)  # the crashed run's copies
    if broker.real_kafka or point == "after_commit":
        # Kafka writes the markers after EndTxn is answered: readers wait for them
        assert stable_offsets_behind(broker.bootstrap, target, 2) == []
        assert sorted(librdkafka_read_committed(broker.bootstrap, target, 2)) == expected
        assert sorted(our_read_committed(spark, broker.bootstrap, target)) == expected


@pytest.mark.spark
@pytest.mark.real_kafka("Tansu keeps aborted records and answers Fetch with no "
                        "AbortedTransactions")
def test_read_committed_skips_aborted_transactions(spark, kafka_broker,
                                                   topic_name):
    """librdkafka's transactional producer commits, aborts, commits; the broker's Fetch
    names the aborted transaction and our read_committed reader drops it (and only it)."""
    broker = kafka_broker
    create_topic(broker, topic_name, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                  "transactional.id": f"tx-{topic_name}"})
    p.init_transactions(30)
    for n, outcome in enumerate(["commit", "abort", "commit"]):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic_name, value=f"{outcome}-{n}-{i}".encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
    assert [a["first_offset"] for a in part["aborted_transactions"]] == [6]
    want = [f"commit-{n}-{i}" for n in (0, 2) for i in range(5)]
    got = [r.v for r in _read(spark, broker.bootstrap, topic_name,
                              **{"kafka.isolation.level": "read_committed"})
           .selectExpr("CAST(value AS STRING) AS v").collect()]
    assert got == want
    everything = [r.v for r in _read(spark, broker.bootstrap, topic_name)
                  .selectExpr("CAST(value AS STRING) AS v").collect()]
    assert everything == [f"{o}-{n}-{i}" for n, o in enumerate(["commit", "abort", "commit"])
                          for i in range(5)]  # read_uncommitted: the aborted ones too


@pytest.mark.spark
@pytest.mark.real_kafka("Tansu answers ListOffsets by timestamp with the earliest offset")
def test_timestamp_lookups(spark, kafka_broker, topic_name):
    """ListOffsets by timestamp, by max timestamp, and the reader's timestamp options."""
    broker = kafka_broker
    create_topic(broker, topic_name, 2)
    base = int(time.time() * 1000) - 600_000
    _produce(broker.bootstrap, topic_name,
             [{"partition": p, "value": f"p{p}-{i}".encode(), "timestamp": base + 1000 * i}
              for p in (0, 1) for i in range(10)])
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        found = client.list_offsets({(topic_name, 0): base + 3500, (topic_name, 1): base})
        assert found[(topic_name, 0)][0] == 4 and found[(topic_name, 1)][0] == 0
        assert client.list_offsets({(topic_name, 0): base + 60_000})[(topic_name, 0)][0] == -1
        assert client.list_offsets({(topic_name, 0): -3})[(topic_name, 0)][0] == 9
    rows = _read(spark, broker.bootstrap, topic_name,
                 startingOffsetsByTimestamp=f'{{"{topic_name}":{{"0":{base + 7000},'
                                            f'"1":{base + 8500}}}}}').collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 7), (0, 8), (0, 9), (1, 9)]
    rows = _read(spark, broker.bootstrap, topic_name, startingTimestamp=str(base + 9000),
                 endingTimestamp=str(base + 60_000)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 9), (1, 9)]


@pytest.mark.spark
@pytest.mark.real_kafka("Tansu drops the connection on DeleteRecords")
def test_delete_records_and_data_loss(spark, kafka_broker, topic_name):
    """DeleteRecords moves the log start; a read from below it is data loss: an error
    naming it with failOnDataLoss=true (the default), the records left otherwise."""
    broker = kafka_broker
    create_topic(broker, topic_name, 1)
    _produce(broker.bootstrap, topic_name,
             [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)])
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        assert client.delete_records({(topic_name, 0): 6}) == {(topic_name, 0): 6}
        assert client.earliest_offsets([(topic_name, 0)]) == {(topic_name, 0): 6}
    start = f'{{"{topic_name}":{{"0":2}}}}'
    with pytest.raises(Exception, match="no longer available in Kafka"):
        _read(spark, broker.bootstrap, topic_name, startingOffsets=start).collect()
    rows = _read(spark, broker.bootstrap, topic_name, startingOffsets=start,
                 failOnDataLoss="false").selectExpr("offset").collect()
    assert [r.offset for r in rows] == [6, 7, 8, 9]
    rows = _read(spark, broker.bootstrap, topic_name).selectExpr("offset").collect()
    assert [r.offset for r in rows] == [6, 7, 8, 9]  # earliest is the new log start


def test_every_version_the_client_picks_is_one_the_broker_accepts(kafka_broker):
    """Each request of tests/test_kafka_versions.py's SENDS, at the version the client picks
    against this broker's ApiVersions, is inside the range the broker advertised; against a
    Kafka 4.x broker (Fetch from v4: KIP-896) it is also one Kafka 4.x's message definitions
    accept there (not a removed version, not TxnOffsetCommit v5 in a transaction)."""
    from protocol.schemas import FETCH, PRODUCE

    from .test_kafka_versions import KAFKA4, SENDS, _problems
    with KafkaClient(bootstrap_servers=kafka_broker.bootstrap) as client:
        conn = client.connection(min(client.metadata().brokers))
        kafka4 = conn.api_versions[FETCH.key][0] >= 4
        for api, cap, in_txn, where in SENDS:
            version = conn.version_for(api, cap)
            lo, hi = conn.api_versions[api.key]
            assert lo <= version <= hi, where
            if kafka4:
                assert not _problems(api, range(version, version + 1), in_txn), where
        if kafka4 and kafka_broker.real_kafka:
            assert conn.api_versions[PRODUCE.key][0] == KAFKA4["Produce"]["advertised_min"]
