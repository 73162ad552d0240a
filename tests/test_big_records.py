"""Big records (issue 41): values of 1 MiB and 8 MiB written by ``df.write`` through our
sink and read back exactly by ``spark.read`` through our source, with the default fetch
sizes and with fetch sizes smaller than one record (Kafka then answers with the first
record batch whole, KIP-74), and the Python worker that reads them holding about what the
fetch sizes and one Arrow batch hold, not the partition.

The topic raises ``max.message.bytes`` (the broker's ``message.max.bytes`` is 1 MiB and a
node of one needs no replica fetch sizes); the writer raises ``kafka.max.request.size``,
as Spark's connector needs it raised for records over 1 MiB.

The worker's memory is its peak RSS during the read (``VmHWM``, reset through
``/proc/<pid>/clear_refs`` before it) above its RSS before; ``make bench`` reports the
same figure at larger sizes.
"""

from __future__ import annotations

import os
import uuid

import pytest

from protocol.client.cluster import KafkaClient

from .helpers.worker_stats import python_workers, rss_kb

MIB = 1 << 20
#: (value size, records): one partition of 4 + 8 MiB x 6 = 52 MiB.
BIG = ((1 * MIB, 4), (8 * MIB, 6))
TOPIC_MAX_MESSAGE_BYTES = 16 * MIB
#: What one reading worker may grow by. It holds a Fetch answer (one 8 MiB batch, whatever
#: the fetch sizes: the first batch is whole), the decoded Arrow batch and Spark's copy of
#: it on the way to the JVM: about 3 records (24 MiB measured). A reader that held the
#: partition (52 MiB) would pass it.
WORKER_GROWTH_BOUND = 40 * MIB
SMALL_FETCH = 64 * 1024  # smaller than every record


def _rows(spark):
    """key ``k<i>``, value of the given size starting with ``i`` (JVM-made, in write order
    in one Spark partition)."""
    from pyspark.sql import functions as F

    parts, first = [], 0
    for size, count in BIG:
        parts.append(
            spark.range(first, first + count, numPartitions=1).select(
                F.concat(F.lit("k"), F.col("id").cast("string")).cast("binary").alias("key"),
                F.concat(
                    F.lpad(F.col("id").cast("string"), 8, "0"), F.expr(f"repeat('v', {size - 8})")
                )
                .cast("binary")
                .alias("value"),
            )
        )
        first += count
    df = parts[0]
    for more in parts[1:]:
        df = df.unionByName(more)
    return df.coalesce(1)


@pytest.fixture(scope="module")
def big_topic(kafka, spark):
    """``(topic, expected)``: the topic written by our sink, and ``[(key, length, sha-256)]``
    of the rows written, in order."""
    topic = f"big-records-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics(
            {topic: 1}, configs={"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}
        )
        client.wait_for_topics([topic])
    rows = _rows(spark)
    (
        rows.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", topic)
        .option("kafka.max.request.size", str(TOPIC_MAX_MESSAGE_BYTES))
        .save()
    )
    expected = [
        tuple(r)
        for r in rows.selectExpr(
            "CAST(key AS STRING)", "length(value)", "sha2(value, 256)"
        ).collect()
    ]
    assert len(expected) == sum(count for _, count in BIG)
    try:
        yield topic, expected
    finally:
        with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
            client.delete_topics([topic], missing_ok=True)


def _reset_peaks(pids) -> dict[int, int]:
    """Each process's peak RSS reset to its RSS now; returns that RSS (bytes)."""
    now = {}
    for pid in pids:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
        now[pid] = rss_kb(pid) * 1024
    return now


def _peak_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _read_measured(spark, bootstrap: str, topic: str, **options):
    """Read the topic back (``[(key, length, sha-256)]`` by offset) and the most any Python
    worker grew meanwhile above its RSS before (bytes). A worker that Spark forks during a
    read starts by importing pyspark, pyarrow and ours, which is no part of the read: such
    a read is done again (the worker is there for the next)."""
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    for _ in range(3):
        before = _reset_peaks(python_workers())
        got = [
            tuple(r)
            for r in reader.load()
            .selectExpr("CAST(key AS STRING)", "length(value)", "sha2(value, 256)", "offset")
            .orderBy("offset")
            .collect()
        ]
        workers = python_workers()
        if workers and set(workers) <= set(before):
            break
    else:
        raise AssertionError("Spark forked a new Python worker for every read")
    growth = max(_peak_kb(pid) * 1024 - before[pid] for pid in workers)
    assert [r[3] for r in got] == list(range(len(got)))
    return [r[:3] for r in got], growth


@pytest.mark.parametrize("fetch", ["default", "smaller than a record"])
def test_big_values_are_written_and_read_back_exactly(big_topic, kafka, spark, fetch):
    topic, expected = big_topic
    options = (
        {}
        if fetch == "default"
        else {
            "kafka.max.partition.fetch.bytes": str(SMALL_FETCH),
            "kafka.fetch.max.bytes": str(SMALL_FETCH),
        }
    )
    got, growth = _read_measured(spark, kafka.bootstrap, topic, **options)
    assert got == expected
    print(
        f"fetch sizes {fetch}: a Python worker grew by {growth / MIB:.1f} MiB at most "
        f"(pid {os.getpid()}'s workers)"
    )
    assert growth < WORKER_GROWTH_BOUND, (
        f"a Python worker grew by {growth / MIB:.0f} MiB reading "
        f"{sum(s * n for s, n in BIG) / MIB:.0f} MiB of one partition"
    )
