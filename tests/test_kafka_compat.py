"""The compatibility set: the connector's main paths on every pinned Apache Kafka.

Each version of ``kafka_testbed.KAFKA_VERSIONS`` (3.9 to the newest 4.x) runs the same
few tests: spark.read of what librdkafka wrote (headers, a null key, timestamps),
startingTimestamp (ListOffsets by time), df.write read back by librdkafka, an exactlyOnce
batch write, and an exactlyOnce stream of two micro-batches that commits its progress
to a consumer group (commitOffsetsToGroup, read back by librdkafka). On Kafka 4.x the two
transaction tests run twice: on a cluster formatted with its default transaction.version
(2, KIP-890) and on one formatted with 1; the transaction requests this client sends are
those of the first protocol, which a broker of either must take (the other tests do not
depend on it). Kafka 3.9 has no transaction version 2.

``cluster`` is parametrized at module scope by value (``on``), so pytest runs every test
of one cluster before the next is asked for, and ``kafka_clusters`` starts each once (the
newest with version 2 is the session's ``kafka``). Data is tiny: the time goes to
starting clusters and Spark queries. Sign-in on every version is tests/test_kafka_signin.py's.
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest

from kafka_testbed import KAFKA_VERSIONS

from .helpers.broker_setup import create_topic
from .helpers.txn_referee import (
    committed_values,
    librdkafka_read_committed,
    open_transactions,
    stable_offsets_behind,
)

pytestmark = pytest.mark.spark

#: (version, transaction.version): None is the version's default (2 on 4.x, none on 3.9).
DEFAULT_KINDS = [(v, None) for v in KAFKA_VERSIONS]
#: The transaction tests run on 4.x formatted with transaction.version 1 as well.
ALL_KINDS = [
    (v, tv) for v in KAFKA_VERSIONS for tv in ((None,) if v.startswith("3.") else (None, 1))
]
STREAM_TIMEOUT_S = 180


def _kind_id(kind) -> str:
    version, tv = kind
    if version.startswith("3."):
        return version
    return f"{version}-tv{2 if tv is None else tv}"


def on(kinds):
    """Parametrize a test's ``versioned_kafka`` over ``kinds``, at module scope: pytest groups the
    tests by the value of the kind, so each cluster serves all its tests before the next
    one is asked for."""
    return pytest.mark.parametrize(
        "versioned_kafka", kinds, indirect=True, scope="module", ids=[_kind_id(k) for k in kinds]
    )


# ---- helpers ------------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 20000}
    )
    errors: list = []
    for r in records:
        p.produce(topic, **r, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0
    assert errors == []


def _consume(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compat", "enable.auto.commit": False}
    )
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


def _group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The offsets ``group`` has committed, as librdkafka reads them."""
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        tps = c.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)], timeout=30
        )
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def _read(spark, bootstrap: str, topic: str, **options):
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _timestamped_records(n: int = 6) -> tuple[int, list[dict]]:
    """``n`` records on partition 0: key ``k<i>`` (record 1's null), value ``v<i>``, a
    header, timestamp base + 1000 * i (base a minute ago)."""
    base = int(time.time() * 1000) - 60_000
    return base, [
        {
            "partition": 0,
            "key": None if i == 1 else f"k{i}",
            "value": f"v{i}",
            "headers": [("i", str(i).encode())],
            "timestamp": base + 1000 * i,
        }
        for i in range(n)
    ]


# ---- the set ------------------------------------------------------------------------------


@on(DEFAULT_KINDS)
def test_read(spark, versioned_kafka, topic_name):
    """spark.read returns what librdkafka wrote, field for field (a null key, headers,
    CreateTime timestamps)."""
    create_topic(versioned_kafka, topic_name, 1)
    base, records = _timestamped_records()
    _produce(versioned_kafka.bootstrap, topic_name, records)
    rows = (
        _read(spark, versioned_kafka.bootstrap, topic_name, includeHeaders="true")
        .selectExpr(
            "offset",
            "CAST(key AS STRING) AS k",
            "CAST(value AS STRING) AS v",
            "headers",
            "CAST(unix_millis(timestamp) AS BIGINT) AS ts",
        )
        .collect()
    )
    got = [
        (r.offset, r.k, r.v, [(h.key, bytes(h.value)) for h in r.headers], r.ts)
        for r in sorted(rows, key=lambda r: r.offset)
    ]
    assert got == [
        (i, r["key"], r["value"], [("i", str(i).encode())], base + 1000 * i)
        for i, r in enumerate(records)
    ]


@on(DEFAULT_KINDS)
def test_starting_timestamp(spark, versioned_kafka, topic_name):
    """startingTimestamp starts at the first record at or after that time (ListOffsets
    by timestamp); endingTimestamp ends before the first one at or after its time."""
    create_topic(versioned_kafka, topic_name, 1)
    base, records = _timestamped_records()
    _produce(versioned_kafka.bootstrap, topic_name, records)
    rows = (
        _read(
            spark,
            versioned_kafka.bootstrap,
            topic_name,
            startingTimestamp=str(base + 2500),
            endingTimestamp=str(base + 5000),
        )
        .select("offset")
        .collect()
    )
    assert sorted(r.offset for r in rows) == [3, 4]


@on(DEFAULT_KINDS)
def test_write(spark, versioned_kafka, topic_name):
    """df.write (a partition column, a null key, headers) is what librdkafka reads."""
    create_topic(versioned_kafka, topic_name, 2)
    rows = [
        (None if i == 2 else f"k{i}", f"v{i}", i % 2, [("i", str(i).encode())]) for i in range(6)
    ]
    (
        spark.createDataFrame(
            rows,
            "key string, value string, partition int, "
            "headers array<struct<key: string, value: binary>>",
        )
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", versioned_kafka.bootstrap)
        .option("topic", topic_name)
        .mode("append")
        .save()
    )
    got = [
        (
            (m.key() and m.key().decode()),
            m.value().decode(),
            m.partition(),
            [(k, v) for k, v in m.headers()],
        )
        for m in _consume(versioned_kafka.bootstrap, topic_name, 2, len(rows))
    ]
    assert sorted(got, key=lambda r: r[1]) == rows


@on(ALL_KINDS)
def test_exactly_once_batch_write(spark, versioned_kafka, topic_name):
    """An exactlyOnce batch write: every row once for librdkafka's read_committed
    consumer and by Kafka's rule on the log, no transaction left open."""
    create_topic(versioned_kafka, topic_name, 2)
    values = [f"v{i}" for i in range(8)]
    (
        spark.createDataFrame([(v,) for v in values], "value string")
        .repartition(2)
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", versioned_kafka.bootstrap)
        .option("topic", topic_name)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", f"compat-{uuid.uuid4().hex[:8]}")
        .mode("append")
        .save()
    )
    assert stable_offsets_behind(versioned_kafka.bootstrap, topic_name, 2) == []
    assert sorted(committed_values(versioned_kafka.bootstrap, topic_name, 2)) == values
    assert open_transactions(versioned_kafka.bootstrap, topic_name, 2) == []
    assert (
        sorted(librdkafka_read_committed(versioned_kafka.bootstrap, topic_name, 2, idle_s=1.0))
        == values
    )


@on(ALL_KINDS)
def test_exactly_once_stream_and_its_group_offsets(spark, versioned_kafka, topic_name, tmp_path):
    """An exactlyOnce stream, topic to topic, in two micro-batches (maxOffsetsPerTrigger)
    with commitOffsetsToGroup: every source row once in the target for read_committed
    readers, and the group's committed offsets (read by librdkafka) at the end of the
    source."""
    source, target, group = f"{topic_name}-src", f"{topic_name}-dst", f"g-{topic_name}"
    create_topic(versioned_kafka, source, 2)
    create_topic(versioned_kafka, target, 2)
    _produce(
        versioned_kafka.bootstrap,
        source,
        [{"partition": p, "value": f"r-{p}-{i}"} for p in (0, 1) for i in range(5)],
    )
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", versioned_kafka.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "6")
        .option("commitOffsetsToGroup", group)
        .load()
        .selectExpr("key", "value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", versioned_kafka.bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(STREAM_TIMEOUT_S), "the stream did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p.numInputRows]) == 2
    expected = sorted(f"r-{p}-{i}" for p in (0, 1) for i in range(5))
    assert stable_offsets_behind(versioned_kafka.bootstrap, target, 2) == []
    assert sorted(committed_values(versioned_kafka.bootstrap, target, 2)) == expected
    assert open_transactions(versioned_kafka.bootstrap, target, 2) == []
    assert (
        sorted(librdkafka_read_committed(versioned_kafka.bootstrap, target, 2, idle_s=1.0))
        == expected
    )
    assert _group_offsets(versioned_kafka.bootstrap, group, source, 2) == {0: 5, 1: 5}
