"""exactlyOnce end to end with Spark, on Apache Kafka: the batch write and a stream
SIGKILLed at each kill point and restarted run on transaction.version 2 (the session's
``kafka``) and 1 (KIP-890; ``eos_kafka``).

Every scenario is judged by Kafka's rule applied to the log (``txn_referee.committed_values``:
COMMIT and ABORT markers), by the read_committed readers (librdkafka's consumer and our
``spark.read`` at ``kafka.isolation.level=read_committed``, which rely on the broker's last
stable offset and AbortedTransactions) once Kafka has written its markers (it does so after
answering EndTxn: a bounded wait, ``stable_offsets_behind``), and by Kafka's own
``TransactionsCommand``: no transaction of the scenario left unfinished (``list``) and none
hanging on the topic (``find-hanging``).
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pyspark.sql import functions as F


from .helpers.eos_retry_child import ROWS
from .helpers.kill_points import ENV, FAIL_ENV, POINTS, child_env
from .helpers.eos_stream_child import pipeline
from .helpers.broker_setup import create_topic
from .helpers.streaming import QUERY_TIMEOUT_S, produce, values_for
from .helpers.txn_referee import (
    aborted_values,
    committed_values,
    kafka_of_transaction_version,
    kafka_transactions_verdict,
    librdkafka_read_committed,
    open_transactions,
    stable_offsets_behind,
)
from .helpers.read_committed import our_read_committed

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(params=[2, 1], ids=["tv2", "tv1"])
def eos_kafka(request):
    """Apache Kafka with transaction.version 2 (the session's) and 1."""
    return kafka_of_transaction_version(request, request.param)


def assert_every_referee_sees(spark, broker, topic, partitions, prefix, expected) -> None:
    """Exactly ``expected`` (sorted values) is visible, to every referee: Kafka's rule on
    the log, librdkafka's and our read_committed readers; nothing is left open by the
    log, and Kafka's tools find no transaction of ``prefix`` unfinished and none hanging
    on ``topic`` (run meanwhile: a JVM each)."""
    assert open_transactions(broker.bootstrap, topic, partitions) == []
    assert stable_offsets_behind(broker.bootstrap, topic, partitions) == []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        verdict = pool.submit(kafka_transactions_verdict, broker, topic, prefix)
        assert sorted(committed_values(broker.bootstrap, topic, partitions)) == expected
        assert sorted(librdkafka_read_committed(broker.bootstrap, topic, partitions)) == expected
        assert sorted(our_read_committed(spark, broker.bootstrap, topic)) == expected
        assert verdict.result() == []


def test_batch_write_is_visible_once_to_every_read_committed_reader(spark, eos_kafka, topic_name):
    broker = eos_kafka
    create_topic(broker, topic_name, 3)
    prefix = f"job-{uuid.uuid4().hex[:8]}"
    df = spark.range(0, 300, numPartitions=2).selectExpr(
        "CAST(id AS STRING) AS key", "CONCAT('v-', id) AS value"
    )
    (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic_name)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", prefix)
        .mode("append")
        .save()
    )
    assert aborted_values(broker.bootstrap, topic_name, 3) == []
    assert_every_referee_sees(
        spark, broker, topic_name, 3, prefix, sorted(f"v-{i}" for i in range(300))
    )


def test_batch_write_whose_last_task_fails_leaves_nothing_visible(spark, kafka, topic_name):
    """The last partition's UDF raises at its last row (Spark hands none of that
    partition's rows to the writer); Spark (local mode: one attempt) aborts the job
    without waiting for the other task, whose Python worker may even start after the
    driver's abort and still get its whole input. That late attempt used to open a
    transaction after the driver had fenced its id and leave it open (this test failed
    now and then); a batch job's ids are its own, so it finds its id used and writes
    nothing. Nothing is visible to any reader and no transaction is left open."""
    create_topic(kafka, topic_name, 2)
    prefix = f"job-{uuid.uuid4().hex[:8]}"

    @F.udf("string")
    def value(i):
        if i == 399:
            raise ValueError("the last task fails")
        return f"v-{i}"

    df = spark.range(0, 400, numPartitions=2).select(
        F.col("id").cast("string").alias("key"), value("id").alias("value")
    )
    with pytest.raises(Exception, match="the last task fails"):
        (
            df.write.format("pykafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("topic", topic_name)
            .option("exactlyOnce", "true")
            .option("kafka.batch.size", "1000")
            .option("transactionalIdPrefix", prefix)
            .mode("append")
            .save()
        )
    assert_every_referee_sees(spark, kafka, topic_name, 2, prefix, [])


def test_retried_task_attempts_leave_no_duplicates(spark, kafka, topic_name):
    """A batch write in a child driver whose Spark retries a failed task once
    (``local[2,2]``): attempt 0 of Spark partition 0 raises after its rows reached the
    broker (the task aborts its own transaction), attempt 0 of partition 1 ends its
    Python worker at once (``os._exit``, nothing cleaned up: the driver fences its
    transaction after committing attempt 1). Attempts 1 succeed. Every row is visible
    exactly once to every reader, each first attempt's copy ended in an ABORT marker,
    and no transaction is left open. Speculative copies cannot be shown: Spark never
    runs a copy on the host that runs the task, and local mode has one host; for the
    sink a retry is the same case (two attempts of a partition wrote, Spark commits one;
    ``test_sink_transactions.test_losing_attempts_are_aborted`` commits a later attempt
    over two others)."""
    create_topic(kafka, topic_name, 2)
    prefix = f"job-{uuid.uuid4().hex[:8]}"
    failures = "before_task_end:0:0,before_task_end:1:0:exit"
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.helpers.eos_retry_child",
            kafka.bootstrap,
            topic_name,
            prefix,
        ],
        cwd=REPO,
        env=child_env(**{FAIL_ENV: failures}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=QUERY_TIMEOUT_S * 2,
    )
    err = child.stderr.decode()
    assert child.returncode == 0, err[-3000:]
    assert "attempt 0 of Spark partition 0 fails at before_task_end" in err
    assert "Python worker exited unexpectedly" in err  # attempt 0 of partition 1
    expected = sorted(f"v-{i}" for i in range(ROWS))
    assert sorted(aborted_values(kafka.bootstrap, topic_name, 2)) == expected
    assert_every_referee_sees(spark, kafka, topic_name, 2, prefix, expected)


def test_exactly_once_needs_a_prefix_for_batch_writes(spark, kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception, match="transactionalIdPrefix: exactlyOnce needs"):
        (
            df.write.format("pykafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("topic", topic_name)
            .option("exactlyOnce", "true")
            .mode("append")
            .save()
        )


def _crash_and_restart(spark, broker, tmp_path, source, target, prefix, point):
    """The stream of ``tests.helpers.eos_stream_child`` SIGKILLed by its own hook at ``point`` of
    micro-batch 0, then restarted here from its checkpoint until it has read everything."""
    checkpoint = str(tmp_path / "ck")
    env = child_env(**{ENV: f"{point}:0"})  # batch 0 reads every row (from "earliest")
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.eos_stream_child",
            broker.bootstrap,
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
        child.wait(QUERY_TIMEOUT_S * 2)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        err = child.stderr.read().decode()[-3000:]
        child.stderr.close()
    assert not timed_out, f"the child never reached {point} in {QUERY_TIMEOUT_S * 2} s:\n{err}"
    assert child.returncode == -signal.SIGKILL, err  # killed by its own hook
    commits = Path(checkpoint, "commits")
    assert not Path(commits, "0").exists()  # batch 0 never reached the commit log

    query = (
        pipeline(spark, broker.bootstrap, source, target, checkpoint, prefix)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    assert query.exception() is None


#: Every kill point on transaction.version 2 (a fresh 4.x cluster's); on 1, the one
#: between two tasks' commits (each kill costs a Spark driver start: make test keeps to
#: these; make test-faults kills drivers on 3 nodes too).
KILLS = [(2, point) for point in POINTS] + [(1, "between_commits")]


@pytest.mark.parametrize("tv, point", KILLS, ids=[f"tv{tv}-{point}" for tv, point in KILLS])
def test_stream_killed_and_restarted_writes_each_row_once(
    spark, request, topic_name, tmp_path, tv, point
):
    """A topic-to-topic stream is SIGKILLed (driver, JVM and workers) at ``point`` of
    micro-batch 0 and restarted from its checkpoint: every source row is in the target
    exactly once for every referee and no transaction is left unfinished or hanging.
    Before the commit the crashed run's transactions stay open until the restart's
    InitProducerIds abort them (their copies end in ABORT markers); after the commit the
    re-run batch finds its marker and writes nothing."""
    broker = kafka_of_transaction_version(request, tv)
    rows = values_for("r", 2, 40)
    source, target = f"{topic_name}-src", f"{topic_name}-dst"
    create_topic(broker, source, 2)
    create_topic(broker, target, 2)
    produce(broker.bootstrap, source, rows)
    prefix = f"q-{uuid.uuid4().hex[:8]}"
    _crash_and_restart(spark, broker, tmp_path, source, target, prefix, point)
    aborted = aborted_values(broker.bootstrap, target, 2)
    if point == "after_commit":
        assert aborted == []
    else:
        assert aborted  # the crashed run's copies
    assert_every_referee_sees(
        spark, broker, target, 2, prefix, sorted(v for vals in rows.values() for v in vals)
    )
