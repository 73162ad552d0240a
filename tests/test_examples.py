"""The examples in ``examples/`` run and print what they say, each in its own process.

Three run against the session's shared mock cluster through ``--bootstrap-servers`` (the
path a user with a real Kafka takes; the topics are created here since the mock cluster
has no CreateTopics API), ``exactly_once.py`` against the session's Apache Kafka (whose
transactions are enforced, unlike the mock cluster's), and ``batch_write.py`` runs as a
user first runs it, on its own embedded broker. Each starts its own Spark, so each costs
tens of seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_example(name: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-5000:])
    return done.stdout


def test_batch_write_on_its_embedded_broker():
    out = run_example("batch_write.py")
    assert "embedded Kafka broker (librdkafka mock cluster)" in out
    assert "wrote 1000 records to topic 'example-orders'" in out
    per_partition = re.findall(r"^partition (\d): (\d+) records, (\d+) customers$", out, re.M)
    assert [p for p, _, _ in per_partition] == ["0", "1", "2"]
    assert sum(int(n) for _, n, _ in per_partition) == 1000
    assert sum(int(c) for _, _, c in per_partition) == 40  # a customer keeps its partition
    assert "first record: key=customer-" in out and "headers=[('source', 'batch_write.py')]" in out


def test_batch_read(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 3, 1)
    out = run_example(
        "batch_read.py", "--bootstrap-servers", mock_cluster.bootstrap, "--topic", topic_name
    )
    assert "read 600 records from 3 partitions" in out
    assert re.search(r'\|user-00\s*\|\{"user":"user-00","country":"FR","ms":0\}\|0\s*\|0\s*\|', out)
    for country in ("DE", "FR", "NL"):
        assert f"country {country}: 200 views, 49.5 ms on average" in out
    assert "partition 0, offsets 10..19: 10 records, offsets 10..19" in out


def test_stream_to_console(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 2, 1)
    out = run_example(
        "stream_to_console.py", "--bootstrap-servers", mock_cluster.bootstrap, "--topic", topic_name
    )
    # a start from "earliest" can be resolved again after a crash, so batch 0 reads too
    assert re.findall(r"^Batch: (\d+)$", out, re.M) == ["0", "1", "2"]
    assert "|sensor  |celsius|partition|offset|" in out
    assert "3 micro-batches of [200, 200, 100] records, 500 in all" in out


def test_etl_stream(mock_cluster, topic_name):
    source, sink = topic_name + "-in", topic_name + "-out"
    mock_cluster.create_topic(source, 2, 1)
    mock_cluster.create_topic(sink, 2, 1)
    out = run_example(
        "etl_stream.py",
        "--bootstrap-servers",
        mock_cluster.bootstrap,
        "--input-topic",
        source,
        "--output-topic",
        sink,
    )
    assert re.search(r"^\d+ micro-batches read 1201 clicks$", out, re.M)
    for user in range(6):
        assert f"00:00 user-{user}: 50 clicks" in out
    assert f"24 windows written to '{sink}', 1200 clicks in them" in out


def test_exactly_once(kafka, topic_name):
    """On Apache Kafka (the example creates its topics): the read_committed output holds
    every order once, and a second run from the same checkpoint adds nothing. (The happy
    path only: crashes are in tests/test_sink_exactly_once_spark.py.)"""
    source, sink = topic_name + "-in", topic_name + "-out"
    out = run_example(
        "exactly_once.py",
        "--bootstrap-servers",
        kafka.bootstrap,
        "--input-topic",
        source,
        "--output-topic",
        sink,
    )
    assert re.search(
        rf"^first run: \d+ micro-batches, 1000 records in '{sink}', 1000 "
        rf"distinct$",
        out,
        re.M,
    ), out
    assert re.search(
        rf"^second run, same checkpoint: \d+ micro-batches, 1000 records in "
        rf"'{sink}', 1000 distinct$",
        out,
        re.M,
    ), out
