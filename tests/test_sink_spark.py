"""``df.write`` and ``writeStream`` with ``format("pykafka")`` through a real SparkSession.

Few tests, since Spark is slow to start: one shared session (``spark`` in conftest), Apache
Kafka (the session's ``kafka``) as the broker, confluent-kafka as the reader.

Spark runs Python data sources in "Append" or "Overwrite" mode only: the default save mode
(ErrorIfExists) and Ignore are refused by Spark itself before the source is asked, so a
write needs ``.mode("append")`` (Spark's Kafka sink takes the default as append).
"""

from __future__ import annotations

import json
import os

import confluent_kafka
import pytest

from kafka.partitioner.default import murmur2 as referee_murmur2

from protocol.client.cluster import KafkaClient

from .helpers.sink import consume, make_topic
from .helpers.waiting import wait_until

pytestmark = pytest.mark.spark


def write_available_now(stream, bootstrap: str, topic: str, checkpoint: str):
    """``stream.writeStream.format("pykafka")`` to ``topic``, ``Trigger.AvailableNow``,
    run until it ends without an error; returns the stopped query."""
    query = (
        stream.writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180)
        assert query.exception() is None
    finally:
        query.stop()
    return query


def test_df_write_keys_headers_timestamps_partitions(spark, kafka, topic_name):
    make_topic(kafka, topic_name, 3)
    total = 4000
    df = spark.range(0, total, 1, 2).selectExpr(
        "format_string('k%08d', id) AS key",
        "cast(format_string('v%08d', id) AS binary) AS value",
        "array(named_struct('key', 'id', 'value', cast(cast(id AS string) AS binary)),"
        "      named_struct('key', 'none', 'value', cast(NULL AS binary))) AS headers",
        "timestamp_millis(1700000000000 + id) AS timestamp",
        "CASE WHEN id % 10 = 0 THEN 1 END AS partition",
    )
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", topic_name)
        .option("kafka.compression.type", "lz4")
        .save()
    )

    got = consume(kafka.bootstrap, topic_name, 3, total)
    seen = 0
    for partition, records in got.items():
        ids = []
        for key, value, headers, ts in records:
            i = int(value[1:])
            ids.append(i)
            assert key == b"k%08d" % i
            assert headers == [("id", str(i).encode()), ("none", None)]
            assert ts == 1_700_000_000_000 + i
            expected = 1 if i % 10 == 0 else (referee_murmur2(key) & 0x7FFFFFFF) % 3
            assert partition == expected
        # each Spark task keeps its rows in order inside every Kafka partition
        first = [i for i in ids if i < total // 2]
        second = [i for i in ids if i >= total // 2]
        assert first == sorted(first) and second == sorted(second)
        seen += len(ids)
    assert seen == total


def test_save_modes_and_errors_reach_the_user(spark, kafka, topic_name):
    make_topic(kafka, topic_name, 1)
    df = spark.range(10).selectExpr("cast(id AS string) AS value")
    writer = (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", topic_name)
    )
    with pytest.raises(Exception) as info:
        writer.mode("overwrite").save()
    assert 'Save mode Overwrite not allowed for Kafka. Write with .mode("append")' in str(
        info.value
    )
    with pytest.raises(Exception) as info:
        writer.mode("errorifexists").save()
    assert "Append" in str(info.value)  # Spark's own refusal of the mode
    with pytest.raises(Exception) as info:
        (
            spark.range(3)
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("topic", topic_name)
            .save()
        )
    assert "Required attribute 'value' not found" in str(info.value)
    # a data error raised in a task names the column and the partition count
    bad = spark.range(5).selectExpr("cast(id AS string) AS value", "7 AS partition")
    with pytest.raises(Exception) as info:
        (
            bad.write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("topic", topic_name)
            .save()
        )
    assert "Invalid partition given with record: 7 is not in the range [0...1)" in str(info.value)
    assert consume(kafka.bootstrap, topic_name, 1, 0, timeout=2)[0] == []


def test_write_stream_available_now_from_json_files(spark, kafka, topic_name, tmp_path):
    make_topic(kafka, topic_name, 2)
    source = tmp_path / "in"
    source.mkdir()
    total = 0
    for f in range(3):
        with open(source / f"part-{f}.json", "w") as out:
            for i in range(f * 100, f * 100 + 100):
                out.write(json.dumps({"k": f"key-{i % 7}", "v": f"v{i:08d}"}) + "\n")
                total += 1
    stream = (
        spark.readStream.schema("k string, v string")
        .json(str(source))
        .selectExpr("k AS key", "v AS value")
    )
    query = write_available_now(stream, kafka.bootstrap, topic_name, str(tmp_path / "checkpoint"))
    got = consume(kafka.bootstrap, topic_name, 2, total)
    values = sorted(int(v[1:]) for records in got.values() for _, v, _, _ in records)
    assert values == list(range(total))
    for partition, records in got.items():
        for key, _, _, _ in records:
            assert (referee_murmur2(key) & 0x7FFFFFFF) % 2 == partition
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    assert sum(p["numInputRows"] for p in progress) == total


def test_write_stream_from_one_topic_to_another(spark, kafka, topic_name, tmp_path):
    """readStream.format("pykafka") -> writeStream.format("pykafka"), availableNow: every
    record once, keyed records in their murmur2 partition, headers carried over."""
    source, sink = topic_name + "-in", topic_name + "-out"
    make_topic(kafka, source, 2)
    make_topic(kafka, sink, 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})
    total = 1000
    for i in range(total):
        producer.produce(
            source,
            key=b"k%d" % (i % 13),
            value=b"v%08d" % i,
            partition=i % 2,
            headers=[("n", b"%d" % i)],
        )
    assert producer.flush(30) == 0
    stream = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("key", "value", "headers")
    )
    write_available_now(stream, kafka.bootstrap, sink, str(tmp_path / "checkpoint"))
    got = consume(kafka.bootstrap, sink, 3, total)
    records = [r for rs in got.values() for r in rs]
    assert sorted(int(v[1:]) for _, v, _, _ in records) == list(range(total))
    for partition, rs in got.items():
        for key, value, headers, _ in rs:
            assert (referee_murmur2(key) & 0x7FFFFFFF) % 3 == partition
            assert headers == [("n", str(int(value[1:])).encode())]


def test_a_continuous_trigger_commits_no_epoch(spark, kafka, topic_name, tmp_path):
    """Spark starts a continuous query into format("pykafka") but runs none of the sink's
    tasks: each epoch reached the sink's commit with a None message per partition, and
    was committed with nothing written (its source's offsets moving on). The commit now
    refuses such an epoch, so none is committed: nothing is skipped. (Spark logs the
    refusal and keeps the query running; nothing fails the query from a continuous
    sink's commit.)"""
    make_topic(kafka, topic_name, 1)
    checkpoint = tmp_path / "checkpoint"
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 20)
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", topic_name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(continuous="1 second")
        .start()
    )
    try:

        def epochs_ended() -> bool:
            # Spark writes an epoch's offsets just before it calls the sink's commit of
            # that epoch: offsets/4 written, the commits of epochs 0-3 had their turn
            assert query.isActive, query.exception()
            return (checkpoint / "offsets" / "4").exists()

        wait_until(epochs_ended, 120, "epochs 0-4 ended", interval=0.5)
        assert query.isActive
        commits = checkpoint / "commits"
        assert not commits.exists() or not os.listdir(commits)
    finally:
        query.stop()
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        assert client.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): 0}
