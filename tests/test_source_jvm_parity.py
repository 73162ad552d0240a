"""Edge cases where the reader must do what Spark's JVM Kafka connector does (issue 17),
end to end with Spark against real brokers:

- a query killed (SIGKILL) before its batch 0 commits restarts from the start it first
  resolved, not from a new "latest" (the JVM keeps that start in the checkpoint);
- a batch DataFrame's second action sees the records written since its first (the JVM
  looks its offsets up for every action; Spark caches a Python source's plan);
- a partition added mid-stream whose earliest offset is above 0 is data loss;
- a stale latest offset (below the batch's start) is asked again, up to
  fetchOffset.numRetries attempts, before it counts as data loss. No broker answers with a
  stale offset on demand, so a proxy rewrites ListOffsets answers; the broker reachable
  only through that proxy is Tansu (``tests.helpers.broker_setup.tansu_behind_fault_proxy``).

The other Spark queries run on Apache Kafka (the session's ``kafka``); the added partition
starting above 0 on librdkafka's mock cluster, which deletes records on demand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from protocol.schemas import BY_KEY

from .helpers.broker_setup import create_topic, tansu_behind_fault_proxy
from .helpers.stream_kill_child import stream, write_batch
from .helpers.frames import rewriting
from .helpers.waiting import wait_until
from .helpers.streaming import (
    QUERY_TIMEOUT_S,
    expected_rows,
    produce,
    read_sink,
    run_available_now,
    values_for,
)

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent
LIST_OFFSETS = 2


# ---- item 1: killed before batch 0 commits ----------------------------------------------


def _batches(spark, out: str) -> list[tuple[int, int, str]]:
    rows = (
        spark.read.schema("partition INT, offset BIGINT, value STRING, batch INT")
        .parquet(out)
        .collect()
    )
    return sorted((r.partition, r.offset, r.value) for r in rows)


def test_killed_before_batch_0_commits_restarts_from_the_first_start(
    spark, kafka, topic_name, tmp_path
):
    """A child driver runs a query from "latest"; inside batch 0 it signals and waits; new
    records arrive; the child is SIGKILLed. Restarted on the same checkpoint, the query
    reads every record written after the first start, and none from before it."""
    create_topic(kafka, topic_name, 2)
    produce(kafka.bootstrap, topic_name, values_for("old", 2, 5))
    checkpoint, out = str(tmp_path / "ck"), str(tmp_path / "out")
    marker = tmp_path / "in-batch-0"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
    )
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.stream_kill_child",
            kafka.bootstrap,
            topic_name,
            checkpoint,
            out,
            str(marker),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:

        def in_batch_0() -> bool:  # the child's hook: batch 0 is running
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
            return marker.exists()

        wait_until(in_batch_0, QUERY_TIMEOUT_S, "the child reaching batch 0", interval=0.2)
        mid = values_for("mid", 2, 5, start=5)
        produce(kafka.bootstrap, topic_name, mid)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the driver and its JVM, no goodbye
        child.wait(30)
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    commits = Path(checkpoint, "commits")
    assert not commits.exists() or not any(commits.iterdir())  # batch 0 never committed

    query = (
        stream(spark, kafka.bootstrap, topic_name)
        .writeStream.foreachBatch(write_batch(out))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    assert query.exception() is None
    assert _batches(spark, out) == [
        (p, o, v) for _, p, o, v in expected_rows(topic_name, mid, first_offset=5)
    ]


# ---- item 2: a batch DataFrame's second action ------------------------------------------


def test_second_action_on_a_batch_dataframe_sees_new_records(spark, kafka, topic_name):
    """count() twice on one DataFrame: the second sees what was written in between, also
    in a partition that was empty at the first, with the plan split by minPartitions and
    with the small read's one task; a DataFrame with explicit end offsets does not move."""
    create_topic(kafka, topic_name, 2)
    produce(kafka.bootstrap, topic_name, {0: [f"a{i}" for i in range(30)]})

    def base():  # a new reader each: DataFrameReader.option changes the reader it is on
        return (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", topic_name)
        )

    df = base().option("minPartitions", "3").load()
    one_task = base().load()
    fixed = base().option("endingOffsets", f'{{"{topic_name}":{{"0":30,"1":-1}}}}').load()
    assert df.count() == 30 and fixed.count() == 30 and one_task.count() == 30
    # minPartitions: partition 0 in three, and the empty partition 1's open range
    assert (df.rdd.getNumPartitions(), one_task.rdd.getNumPartitions()) == (4, 1)
    produce(kafka.bootstrap, topic_name, {0: ["b0", "b1", "b2"], 1: ["c0", "c1"]})
    assert df.count() == 35
    for each in (df, one_task):
        rows = sorted((r.partition, r.offset) for r in each.select("partition", "offset").collect())
        assert rows == [(0, o) for o in range(33)] + [(1, 0), (1, 1)]
    assert fixed.count() == 32  # partition 0 ends at 30; partition 1 at "latest" (-1)


# ---- item 3: an added partition that does not start at 0 ---------------------------------


def test_added_partition_starting_above_zero_is_data_loss(
    spark, mock_cluster, topic_name, tmp_path
):
    first, later = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(mock_cluster, first, 1)
    produce(mock_cluster.bootstrap, first, values_for("a", 1, 4))
    options = {
        "kafka.bootstrap.servers": mock_cluster.bootstrap,
        "subscribePattern": f"^{topic_name}-",
        "startingOffsets": "earliest",
    }
    sink, ck = str(tmp_path / "sink"), str(tmp_path / "ck")
    run_available_now(spark, options, sink, ck)

    create_topic(mock_cluster, later, 1)
    b = values_for("b", 1, 20)
    produce(mock_cluster.bootstrap, later, b)
    mock_cluster.partition_delete_records(later, 0, 10)
    with pytest.raises(Exception) as failure:
        run_available_now(spark, options, sink, ck)
    message = str(failure.value)
    assert f"Added partition {later}-0 starts from 10 instead of 0" in message, message
    assert "failOnDataLoss" in message

    run_available_now(spark, {**options, "failOnDataLoss": "false"}, sink, ck)
    assert read_sink(spark, sink) == sorted(
        expected_rows(first, values_for("a", 1, 4))
        + [r for r in expected_rows(later, b) if r[2] >= 10]
    )


# ---- item 4: a stale latest offset --------------------------------------------------------


@pytest.fixture
def proxied_tansu():
    with tansu_behind_fault_proxy() as pair:
        yield pair


def produce_record_by_record(bootstrap: str, topic: str, values: dict[int, list[str]]) -> None:
    """Every record in a batch of its own: Tansu answers ListOffsets "latest" with the last
    batch's base offset + 1 (kafka_testbed.tansu), the end of the log only when that batch
    holds one record."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, vals in values.items():
        for v in vals:
            p.produce(topic, value=v.encode(), partition=partition)
            assert p.flush(10) == 0


def stale_latest(topic: str, partition: int, real: int, stale: int):
    """A ListOffsets rewrite: an answer of ``real`` for the partition becomes ``stale``."""
    api = BY_KEY[LIST_OFFSETS]

    def change(body):
        hit = False
        for t in body["topics"]:
            for p in t["partitions"]:
                if (
                    t["name"] == topic
                    and p["partition_index"] == partition
                    and p.get("offset") == real
                ):
                    p["offset"], hit = stale, True
        return hit

    return rewriting(api, change)


def test_stale_latest_offset_is_asked_again_before_data_loss(
    spark, proxied_tansu, topic_name, tmp_path
):
    """Two stale answers in a row are absorbed by the default three attempts (the batch
    reads exactly the new records); three are reported as data loss, naming the offsets.
    On Tansu behind a fault proxy: no broker answers with a stale offset on demand, and
    Apache Kafka is not set up to be reached only through the proxy."""
    proxy, broker = proxied_tansu
    bootstrap = f"127.0.0.1:{proxy.port}"
    create_topic(broker, topic_name, 1)
    produce_record_by_record(bootstrap, topic_name, values_for("a", 1, 20))
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic_name,
        "startingOffsets": "earliest",
        "fetchOffset.retryIntervalMs": "10",
    }
    sink, ck = str(tmp_path / "sink"), str(tmp_path / "ck")
    run_available_now(spark, options, sink, ck)

    produce_record_by_record(bootstrap, topic_name, values_for("b", 1, 5, start=20))
    proxy.rewrite_response(LIST_OFFSETS, stale_latest(topic_name, 0, 25, 3), count=2)
    progress = run_available_now(spark, options, sink, ck)
    assert proxy.pending_rewrites(LIST_OFFSETS) == 0  # both stale answers were given
    assert [p.numInputRows for p in progress] == [5]
    assert read_sink(spark, sink) == sorted(
        expected_rows(topic_name, values_for("a", 1, 20))
        + expected_rows(topic_name, values_for("b", 1, 5, start=20), first_offset=20)
    )

    produce_record_by_record(bootstrap, topic_name, values_for("c", 1, 5, start=25))
    proxy.rewrite_response(LIST_OFFSETS, stale_latest(topic_name, 0, 30, 3), count=3)
    with pytest.raises(Exception) as failure:
        run_available_now(spark, options, sink, ck)
    assert f"{topic_name}-0's offsets went back from 25 to 3" in str(failure.value)
