"""The broker-facing selection: what the connector must be tried on against Apache Kafka.

``make test-kafka`` runs the tests marked ``kafka`` (this file) against the broker of the
``kafka_broker`` fixture: the Kafka at ``PYKAFKA_TEST_BOOTSTRAP=host:port`` when it is set
(.github/workflows/kafka.yml starts docker-compose.yml's Apache Kafka for it), else the
session's Apache Kafka (the newest pinned version, ``kafka``), so ``make test`` runs the
selection too. The tests judged by Kafka's own Java tools (ConsoleProducer,
ConsoleConsumer, ConsumerGroupCommand) run on the session's Apache Kafka either way: they
need its jars.

What is tried: read and write interop with librdkafka (every codec, keys, null keys,
headers, timestamps) and with Kafka's Java clients (its console producer and consumer);
read_committed and read_uncommitted over committed, aborted and open transactions;
ListOffsets by timestamp and every timestamp option of the reader; DeleteRecords and the
data loss it makes; a compacted topic's offset gaps (not data loss); an exactly-once
stream that publishes its progress to a consumer group (judged by Kafka's
ConsumerGroupCommand), and one SIGKILLed and restarted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest

from protocol.client.cluster import MAX_TIMESTAMP, KafkaClient

from .helpers.broker_setup import create_topic
from .helpers.eos_stream_child import pipeline
from .helpers.kill_points import ENV as KILL_AT
from .helpers.kill_points import child_env
from .helpers.waiting import wait_until
from .helpers.txn_referee import (
    aborted_values,
    committed_values,
    librdkafka_read_committed,
    log_of,
    open_transactions,
    stable_offsets_behind,
)

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parent.parent
CODECS = ["gzip", "snappy", "lz4", "zstd"]
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
NULL = "<null>"  # the console tools' spelling of a null key, value or header value
STREAM_TIMEOUT_S = 180


# ---- helpers ------------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, records: list[dict], **config) -> None:
    """``records`` (dicts of confluent-kafka's ``produce`` arguments) in order, batched as
    librdkafka batches them."""
    p = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 20000, **config}
    )
    errors: list = []
    for r in records:
        p.produce(topic, **r, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0
    assert errors == []


def _librdkafka_read(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    """The first ``count`` messages of the topic, read by confluent-kafka."""
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "interop", "enable.auto.commit": False}
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


def _read(spark, bootstrap: str, topic: str, **options):
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _offsets(spark, bootstrap: str, topic: str, **options) -> list[tuple[int, int]]:
    """``(partition, offset)`` of every record the reader returns, sorted."""
    return sorted(
        (r.partition, r.offset)
        for r in _read(spark, bootstrap, topic, **options).select("partition", "offset").collect()
    )


def _values(spark, bootstrap: str, topic: str, **options) -> list[str]:
    """The values the reader returns, in (partition, offset) order."""
    rows = (
        _read(spark, bootstrap, topic, **options)
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS v")
        .collect()
    )
    return [r.v for r in sorted(rows, key=lambda r: (r.partition, r.offset))]


def _per_partition(topic: str, offsets: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): o for p, o in offsets.items()}})


def _console_lines(text: str) -> list[list[str]]:
    """The tab-separated fields of each line ConsoleConsumer printed."""
    return [line.split("\t") for line in text.splitlines() if line.strip()]


def _group_description(kafka, group: str) -> dict[tuple[str, int], dict[str, str]]:
    """``ConsumerGroupCommand --describe --group``: each partition's row, by (topic,
    partition), with its CURRENT-OFFSET, LOG-END-OFFSET and LAG."""
    run = kafka.tool(
        GROUP_COMMAND, "--bootstrap-server", kafka.bootstrap, "--describe", "--group", group
    )
    lines = [line.split() for line in run.stdout.splitlines() if line.strip()]
    header = next(i for i, cols in enumerate(lines) if cols[:2] == ["GROUP", "TOPIC"])
    names = lines[header]
    rows = [dict(zip(names, cols)) for cols in lines[header + 1 :] if cols[0] == group]
    return {(r["TOPIC"], int(r["PARTITION"])): r for r in rows}


# ---- the quick check ----------------------------------------------------------------------


def test_a_produced_record_comes_back_over_fetch(kafka_broker, topic_name):
    """The selection's quick check (no Spark): librdkafka produces, the client's own
    ListOffsets and Fetch read. Prints the broker, which
    test_the_switch_points_the_selection_at_a_broker reads."""
    broker = kafka_broker
    print(f"selection broker: {broker!r}")
    create_topic(broker, topic_name, 1)
    _produce(
        broker.bootstrap,
        topic_name,
        [{"partition": 0, "key": b"k", "value": f"v{i}".encode()} for i in range(3)],
    )
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        assert client.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): 3}
    values = [r.value for _, _, records in log_of(broker.bootstrap, topic_name, 1) for r in records]
    assert values == [b"v0", b"v1", b"v2"]


# ---- interop with librdkafka ----------------------------------------------------------------


@pytest.mark.spark
def test_we_read_what_librdkafka_wrote_in_every_codec(spark, kafka_broker, topic_name):
    """Keys (one null), values, headers and timestamps of compressed batches (one codec
    per partition) written by librdkafka come back through spark.read."""
    broker = kafka_broker
    create_topic(broker, topic_name, len(CODECS))
    base = int(time.time() * 1000) - 60_000
    expected = []
    for p, codec in enumerate(CODECS):
        records = [
            {
                "partition": p,
                "key": None if i == 0 else f"k{p}-{i}".encode(),
                "value": f"v{p}-{i}".encode(),
                "headers": [("codec", codec.encode()), ("i", str(i).encode())],
                "timestamp": base + i,
            }
            for i in range(20)
        ]
        _produce(broker.bootstrap, topic_name, records, **{"compression.type": codec})
        expected += [
            (
                p,
                i,
                None if i == 0 else f"k{p}-{i}",
                f"v{p}-{i}",
                base + i,
                [("codec", codec), ("i", str(i))],
            )
            for i in range(20)
        ]
    rows = (
        _read(spark, broker.bootstrap, topic_name, includeHeaders="true")
        .selectExpr(
            "partition",
            "offset",
            "CAST(key AS STRING) AS k",
            "CAST(value AS STRING) AS v",
            "CAST(unix_millis(timestamp) AS BIGINT) AS ts",
            "headers",
        )
        .collect()
    )
    got = [
        (
            r.partition,
            r.offset,
            r.k,
            r.v,
            r.ts,
            [(h.key, bytes(h.value).decode()) for h in r.headers],
        )
        for r in rows
    ]
    assert sorted(got, key=lambda r: r[:2]) == expected


@pytest.mark.spark
def test_librdkafka_reads_what_we_wrote(spark, kafka_broker, topic_name):
    """Rows written with df.write (keys, a null key, headers, timestamps, a partition
    column, lz4) are what librdkafka's consumer reads back, in their partitions (two Spark
    tasks write each partition, in no set order between them)."""
    broker = kafka_broker
    create_topic(broker, topic_name, 2)
    base = int(time.time() * 1000) - 60_000
    df = spark.createDataFrame(
        [
            (None if i == 7 else f"k{i}", f"v{i}", i % 2, [("n", str(i).encode())], base + i)
            for i in range(40)
        ],
        "key string, value string, partition int, "
        "headers array<struct<key: string, value: binary>>, ts long",
    ).selectExpr("key", "value", "partition", "headers", "timestamp_millis(ts) AS timestamp")
    (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic_name)
        .option("kafka.compression.type", "lz4")
        .mode("append")
        .save()
    )
    got: dict[int, list] = {}
    for m in _librdkafka_read(broker.bootstrap, topic_name, 2, 40):
        got.setdefault(m.partition(), []).append(
            (
                m.key() and m.key().decode(),
                m.value().decode(),
                [(k, v.decode()) for k, v in m.headers()],
                m.timestamp(),
            )
        )
    want = {
        p: [
            (
                (None if i == 7 else f"k{i}"),
                f"v{i}",
                [("n", str(i))],
                (confluent_kafka.TIMESTAMP_CREATE_TIME, base + i),
            )
            for i in range(40)
            if i % 2 == p
        ]
        for p in (0, 1)
    }
    assert {p: sorted(rows, key=str) for p, rows in got.items()} == {
        p: sorted(rows, key=str) for p, rows in want.items()
    }


# ---- interop with Kafka's Java clients ------------------------------------------------------


@pytest.mark.spark
def test_we_read_what_kafkas_console_producer_wrote(spark, kafka, topic_name):
    """Kafka's own Java producer (ConsoleProducer, zstd) writes keys, a null key, headers,
    a null header value and a null value; spark.read returns them field for field, with
    CreateTime timestamps taken while it ran."""
    create_topic(kafka, topic_name, 1)
    lines = ["h1:a,h2:b\tk1\tv1", f"h1:c\t{NULL}\tv2", f"h3:{NULL}\tk3\tv3", f"h4:d\tk4\t{NULL}"]
    before = int(time.time() * 1000)
    kafka.tool(
        CONSOLE_PRODUCER,
        "--bootstrap-server",
        kafka.bootstrap,
        "--topic",
        topic_name,
        "--compression-codec",
        "zstd",
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "parse.headers=true",
        "--reader-property",
        f"null.marker={NULL}",
        input="\n".join(lines) + "\n",
    )
    after = int(time.time() * 1000)
    rows = (
        _read(spark, kafka.bootstrap, topic_name, includeHeaders="true")
        .selectExpr(
            "offset",
            "CAST(key AS STRING) AS k",
            "CAST(value AS STRING) AS v",
            "headers",
            "CAST(unix_millis(timestamp) AS BIGINT) AS ts",
            "timestampType",
        )
        .collect()
    )
    got = [
        (
            r.offset,
            r.k,
            r.v,
            [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],
        )
        for r in sorted(rows, key=lambda r: r.offset)
    ]
    assert got == [
        (0, "k1", "v1", [("h1", b"a"), ("h2", b"b")]),
        (1, None, "v2", [("h1", b"c")]),
        (2, "k3", "v3", [("h3", None)]),
        (3, "k4", None, [("h4", b"d")]),
    ]
    assert all(before - 1000 <= r.ts <= after + 1000 and r.timestampType == 0 for r in rows)


@pytest.mark.spark
def test_kafkas_console_consumer_reads_what_we_wrote(spark, kafka, topic_name):
    """Rows written with df.write (gzip, two partitions, keys and a null key, headers with
    a null value, no headers, timestamps) are what Kafka's own Java consumer
    (ConsoleConsumer) prints: partition, offset, CreateTime, headers, key and value."""
    create_topic(kafka, topic_name, 2)
    base = int(time.time() * 1000) - 60_000
    rows = [
        (
            None if i == 3 else f"k{i}",
            f"v{i}",
            i % 2,
            [] if i == 4 else [("n", str(i).encode()), ("z", None)],
            base + i,
        )
        for i in range(10)
    ]
    (
        spark.createDataFrame(
            rows,
            "key string, value string, partition int, "
            "headers array<struct<key: string, value: binary>>, ts long",
        )
        .selectExpr("key", "value", "partition", "headers", "timestamp_millis(ts) AS timestamp")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", topic_name)
        .option("kafka.compression.type", "gzip")
        .mode("append")
        .save()
    )
    run = kafka.tool(
        CONSOLE_CONSUMER,
        "--bootstrap-server",
        kafka.bootstrap,
        "--topic",
        topic_name,
        "--from-beginning",
        "--max-messages",
        str(len(rows)),
        "--timeout-ms",
        "60000",
        *[
            arg
            for prop in (
                "print.key=true",
                "print.headers=true",
                "print.timestamp=true",
                "print.partition=true",
                "print.offset=true",
                f"null.literal={NULL}",
            )
            for arg in ("--formatter-property", prop)
        ],
    )
    printed = _console_lines(run.stdout)
    # two Spark tasks write each partition, in no set order between them: every record
    # once, at offsets 0..n-1 of its partition
    assert sorted((f[1], int(f[2][len("Offset:") :])) for f in printed) == sorted(
        (f"Partition:{p}", o) for p in (0, 1) for o in range(5)
    )
    want = [
        [
            f"CreateTime:{ts}",
            f"Partition:{p}",
            ",".join(f"{k}:{NULL if v is None else v.decode()}" for k, v in headers)
            or "NO_HEADERS",
            key or NULL,
            value,
        ]
        for key, value, p, headers, ts in rows
    ]
    assert sorted(f[:2] + f[3:] for f in printed) == sorted(want)


# ---- transactions ---------------------------------------------------------------------------


@pytest.mark.spark
def test_read_committed_and_uncommitted_over_transactions(spark, kafka_broker, topic_name):
    """librdkafka's transactional producer commits, aborts, commits, then leaves a fourth
    transaction open. read_committed (our reader, librdkafka's, and the broker's Fetch,
    which names the aborted transaction) shows the committed ones only and ends at the
    open one; read_uncommitted shows every record, the open transaction's too."""
    broker = kafka_broker
    create_topic(broker, topic_name, 1)
    p = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic_name}"}
    )
    p.init_transactions(30)
    outcomes = ["commit", "abort", "commit", "open"]
    for n, outcome in enumerate(outcomes):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic_name, value=f"{outcome}-{n}-{i}".encode(), partition=0)
        p.flush(30)
        if outcome != "open":
            (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
    try:
        # offsets: 0-4 committed, 5 marker, 6-10 aborted, 11 marker, 12-16, 17, 18-22 open
        with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
            part = client.fetch({(topic_name, 0): 0}, isolation_level=1)[(topic_name, 0)]
            assert [a["first_offset"] for a in part["aborted_transactions"]] == [6]
            assert (part["last_stable_offset"], part["high_watermark"]) == (18, 23)
        committed = [f"commit-{n}-{i}" for n in (0, 2) for i in range(5)]
        assert (
            _values(
                spark, broker.bootstrap, topic_name, **{"kafka.isolation.level": "read_committed"}
            )
            == committed
        )
        assert librdkafka_read_committed(broker.bootstrap, topic_name, 1, idle_s=1.5) == committed
        assert _values(spark, broker.bootstrap, topic_name) == [
            f"{o}-{n}-{i}" for n, o in enumerate(outcomes) for i in range(5)
        ]
    finally:
        p.abort_transaction(30)
    assert stable_offsets_behind(broker.bootstrap, topic_name, 1) == []  # markers written
    assert aborted_values(broker.bootstrap, topic_name, 1) == [
        f"{o}-{n}-{i}" for n, o in enumerate(outcomes) if o in ("abort", "open") for i in range(5)
    ]


# ---- timestamps -------------------------------------------------------------------------------


def _timestamped_topic(broker, topic: str) -> int:
    """Two partitions of ten records each; record i has timestamp base + 1000 * i on
    partition 0 and base + 1000 * i + 500 on partition 1, base ten minutes ago (records
    of more than 7 days ago would be deleted by retention). Returns base."""
    create_topic(broker, topic, 2)
    base = int(time.time() * 1000) - 600_000
    _produce(
        broker.bootstrap,
        topic,
        [
            {"partition": p, "value": f"p{p}-{i}".encode(), "timestamp": base + 1000 * i + 500 * p}
            for p in (0, 1)
            for i in range(10)
        ],
    )
    return base


def test_list_offsets_by_timestamp(kafka_broker, topic_name):
    """ListOffsets by a time (the first offset at or after it, -1 past the last record),
    and by the max timestamp (KIP-734)."""
    broker = kafka_broker
    base = _timestamped_topic(broker, topic_name)
    t0, t1 = (topic_name, 0), (topic_name, 1)
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        found = client.list_offsets({t0: base + 3500, t1: base})
        assert found == {t0: (4, base + 4000), t1: (0, base + 500)}
        assert client.list_offsets({t0: base + 60_000})[t0][0] == -1
        assert client.list_offsets({t1: MAX_TIMESTAMP})[t1] == (9, base + 9500)


@pytest.mark.spark
def test_the_readers_timestamp_options(spark, kafka_broker, topic_name):
    """startingOffsetsByTimestamp, startingTimestamp with endingTimestamp,
    endingOffsetsByTimestamp, and startingOffsetsByTimestampStrategy: a start time past a
    partition's last record fails under "error" and starts it at its latest offset under
    "latest"."""
    broker = kafka_broker
    base = _timestamped_topic(broker, topic_name)

    def read(**options) -> list[tuple[int, int]]:
        return _offsets(spark, broker.bootstrap, topic_name, **options)

    assert read(
        startingOffsetsByTimestamp=_per_partition(topic_name, {0: base + 7000, 1: base + 8000})
    ) == [(0, 7), (0, 8), (0, 9), (1, 8), (1, 9)]
    assert read(startingTimestamp=str(base + 8000), endingTimestamp=str(base + 9200)) == [
        (0, 8),
        (0, 9),
        (1, 8),
    ]
    assert read(
        startingTimestamp=str(base + 1000),
        endingOffsetsByTimestamp=_per_partition(topic_name, {0: base + 3000, 1: base + 2000}),
    ) == [(0, 1), (0, 2), (1, 1)]
    past_the_end = _per_partition(topic_name, {0: base + 60_000, 1: base + 8000})
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        read(startingOffsetsByTimestamp=past_the_end)
    assert read(
        startingOffsetsByTimestamp=past_the_end, startingOffsetsByTimestampStrategy="latest"
    ) == [(1, 8), (1, 9)]


# ---- records that are gone: deleted, compacted ---------------------------------------------


@pytest.mark.spark
def test_delete_records_and_data_loss(spark, kafka_broker, topic_name):
    """DeleteRecords moves the log start; a read from below it is data loss: an error
    naming it with failOnDataLoss=true (the default), the records left otherwise."""
    broker = kafka_broker
    create_topic(broker, topic_name, 1)
    _produce(
        broker.bootstrap,
        topic_name,
        [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)],
    )
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        assert client.delete_records({(topic_name, 0): 6}) == {(topic_name, 0): 6}
        assert client.earliest_offsets([(topic_name, 0)]) == {(topic_name, 0): 6}
    start = _per_partition(topic_name, {0: 2})
    with pytest.raises(Exception, match="no longer available in Kafka"):
        _read(spark, broker.bootstrap, topic_name, startingOffsets=start).collect()
    assert _offsets(
        spark, broker.bootstrap, topic_name, startingOffsets=start, failOnDataLoss="false"
    ) == [(0, o) for o in range(6, 10)]
    # earliest is the new log start
    assert _offsets(spark, broker.bootstrap, topic_name) == [(0, o) for o in range(6, 10)]


def _compacted_topic(broker, topic: str) -> None:
    """A compacted topic whose cleaner has removed offsets 0 and 1: k0 and k1 written
    twice, k2 once, one record per batch, then a record that rolls the segment (segment.ms
    100) so that the cleaner may clean the first one. Waits for the cleaner."""
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.create_topics(
            {topic: 1},
            configs={
                "cleanup.policy": "compact",
                "segment.ms": "100",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
    for key, value in [("k0", "a0"), ("k1", "a1"), ("k2", "a2"), ("k0", "b0"), ("k1", "b1")]:
        _produce(broker.bootstrap, topic, [{"partition": 0, "key": key, "value": value}])
    # segment.ms is measured on the broker's clock against the records' timestamps: only
    # time passing makes the next record start a new segment (no state to wait on)
    time.sleep(0.3)
    _produce(broker.bootstrap, topic, [{"partition": 0, "key": "k9", "value": "roll"}])
    offsets: list[int] = []

    def cleaned() -> bool:
        offsets[:] = [
            r.offset for _, _, records in log_of(broker.bootstrap, topic, 1) for r in records
        ]
        return offsets == [2, 3, 4, 5]

    wait_until(cleaned, 60, lambda: f"the cleaner left offsets {offsets}", interval=0.5)


@pytest.mark.spark
@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_compacted_offsets_are_not_data_loss(spark, kafka_broker, topic_name, fail_on_data_loss):
    """Offsets the log cleaner removed from a compacted topic are gaps, not lost data
    (as in Spark's connector), with failOnDataLoss true or false: a read starting in a
    gap returns the records after it, and a range lying wholly in a gap (the broker
    answers with the first batch after it) returns nothing at once."""
    broker = kafka_broker
    _compacted_topic(broker, topic_name)
    options = {"failOnDataLoss": fail_on_data_loss, "kafkaConsumer.pollTimeoutMs": "15000"}
    assert _values(spark, broker.bootstrap, topic_name, **options) == ["a2", "b0", "b1", "roll"]
    assert _offsets(
        spark,
        broker.bootstrap,
        topic_name,
        startingOffsets=_per_partition(topic_name, {0: 1}),
        **options,
    ) == [(0, 2), (0, 3), (0, 4), (0, 5)]
    started = time.monotonic()
    assert (
        _offsets(
            spark,
            broker.bootstrap,
            topic_name,
            endingOffsets=_per_partition(topic_name, {0: 2}),
            **options,
        )
        == []
    )
    assert time.monotonic() - started < 15  # not after the poll timeout


# ---- exactly-once streams ---------------------------------------------------------------------


def _stream(
    spark, bootstrap: str, source: str, target: str, checkpoint: str, prefix: str, **source_options
):
    """Topic to topic with exactlyOnce (not started)."""
    reader = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    for k, v in source_options.items():
        reader = reader.option(k, v)
    return (
        reader.load()
        .selectExpr("key", "value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", prefix)
        .option("checkpointLocation", checkpoint)
    )


def _run_available_now(query_builder) -> None:
    query = query_builder.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(STREAM_TIMEOUT_S), "the stream did not finish"
    finally:
        query.stop()
    assert query.exception() is None


def _our_read_committed(spark, bootstrap: str, topic: str) -> list[str]:
    return _values(spark, bootstrap, topic, **{"kafka.isolation.level": "read_committed"})


@pytest.mark.spark
def test_exactly_once_stream_publishes_its_progress_to_a_group(spark, kafka, topic_name, tmp_path):
    """An exactlyOnce stream (maxOffsetsPerTrigger: several micro-batches) writes every
    source row once, visible to read_committed readers, and commitOffsetsToGroup leaves
    the group where Kafka's ConsumerGroupCommand shows it at the end of every partition
    (lag 0). Both failed on Kafka 4.4 while OffsetCommit and OffsetFetch went out at v10,
    which names topics by id only."""
    source, target, group = f"{topic_name}-src", f"{topic_name}-dst", f"g-{topic_name}"
    create_topic(kafka, source, 2)
    create_topic(kafka, target, 2)
    _produce(
        kafka.bootstrap,
        source,
        [
            {"partition": p, "key": f"k{p}-{i}", "value": f"r-{p}-{i}"}
            for p in (0, 1)
            for i in range(15)
        ],
    )
    _run_available_now(
        _stream(
            spark,
            kafka.bootstrap,
            source,
            target,
            str(tmp_path / "ck"),
            f"q-{uuid.uuid4().hex[:8]}",
            maxOffsetsPerTrigger="12",
            commitOffsetsToGroup=group,
        )
    )
    expected = sorted(f"r-{p}-{i}" for p in (0, 1) for i in range(15))
    assert sorted(committed_values(kafka.bootstrap, target, 2)) == expected
    assert aborted_values(kafka.bootstrap, target, 2) == []
    assert stable_offsets_behind(kafka.bootstrap, target, 2) == []
    assert open_transactions(kafka.bootstrap, target, 2) == []
    assert sorted(_our_read_committed(spark, kafka.bootstrap, target)) == expected
    described = _group_description(kafka, group)
    assert {
        tp: (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for tp, r in described.items()
    } == {(source, p): ("15", "15", "0") for p in (0, 1)}


def _crash_and_restart(
    spark,
    bootstrap: str,
    tmp_path,
    source: str,
    target: str,
    prefix: str,
    point: str,
    restart_min_partitions: str | None,
) -> None:
    """tests/helpers/eos_stream_child.py runs the stream in a child driver that kills itself
    (driver, JVM, workers) at ``point`` of micro-batch 0 (a task per source partition);
    the query then runs to the end here on the same checkpoint, with
    ``restart_min_partitions`` (None: the option left out)."""
    checkpoint = str(tmp_path / "ck")
    env = child_env(**{KILL_AT: f"{point}:0"})
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.eos_stream_child",
            bootstrap,
            source,
            target,
            checkpoint,
            prefix,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        child.wait(2 * STREAM_TIMEOUT_S)  # a driver of its own starts slowly on a busy machine
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        err = child.stderr.read().decode()[-3000:]
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL, err  # killed by its own hook
    assert not Path(checkpoint, "commits", "0").exists()
    _run_available_now(
        pipeline(spark, bootstrap, source, target, checkpoint, prefix, restart_min_partitions)
    )


@pytest.mark.spark
def test_exactly_once_stream_killed_and_restarted(spark, kafka_broker, topic_name, tmp_path):
    """The stream SIGKILLed before the driver commits micro-batch 0 (two tasks, both
    transactions open) and restarted from its checkpoint without minPartitions, so that
    the re-run batch is one task: the restart writes every source row once and ends both
    crashed transactions, the one its task's id takes again and the one no task takes
    (fenced by the commit, not left to the 60 s transaction timeout); librdkafka's
    read_committed consumer and our reader show exactly the source rows at once, and no
    transaction is left open (every kill point, each restarting the same query, runs in
    tests/test_sink_exactly_once_spark.py)."""
    broker = kafka_broker
    source, target = f"{topic_name}-src", f"{topic_name}-dst"
    create_topic(broker, source, 2)
    create_topic(broker, target, 2)
    _produce(
        broker.bootstrap,
        source,
        [{"partition": p, "value": f"r-{p}-{i}"} for p in (0, 1) for i in range(30)],
    )
    _crash_and_restart(
        spark,
        broker.bootstrap,
        tmp_path,
        source,
        target,
        f"q-{uuid.uuid4().hex[:8]}",
        "before_driver_commit",
        restart_min_partitions=None,
    )
    expected = sorted(f"r-{p}-{i}" for p in (0, 1) for i in range(30))
    assert sorted(committed_values(broker.bootstrap, target, 2)) == expected
    assert aborted_values(broker.bootstrap, target, 2)  # the crashed run's copies
    assert stable_offsets_behind(broker.bootstrap, target, 2) == []
    assert open_transactions(broker.bootstrap, target, 2) == []
    assert sorted(librdkafka_read_committed(broker.bootstrap, target, 2)) == expected
    assert sorted(_our_read_committed(spark, broker.bootstrap, target)) == expected
