"""Sail: the connector on a second engine (``make test-sail``, not part of ``make test``).

Sail (``pysail``) is a Spark Connect server written in Rust that runs Python data sources
in-process, in the server's own Python. The fixture builds ``.venv-sail`` (pysail, the
PySpark Connect client Sail accepts, the connector's runtime dependencies and the
connector's wheel), starts ``sail spark server`` from it on a free port in a temporary
directory, and a client job run with the same Python (PySpark 4.1's Connect client; Sail
refuses 4.3's) registers ``KafkaDataSource`` and talks to Apache Kafka (the session's
``kafka``, started by this pytest in the main venv).

What Sail 0.7.2 does with the connector, as the job checks:
- batch writes (every column: key, value, partition, headers, timestamp) and batch reads
  (with ``includeHeaders``, exact ``endingOffsets``) work, record for record;
- ``format("pykafka")`` is not registered by itself (Sail does not look ``pyspark_*``
  modules up): the client registers the class;
- streaming does not: Sail makes no stream of a Python source's ``readStream`` (a
  streaming sink refuses the result) and has no streaming write to a Python sink.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import textwrap

import pytest

from protocol.client.cluster import KafkaClient

from .helpers.own_envs import install_connector, own_env, run_job, write_job
from .helpers.envs import clean_env
from .helpers.waiting import wait_until

pytestmark = pytest.mark.sail

SAIL_REQUIREMENTS = ["pysail==0.7.2", "pyspark[connect]==4.1.1"]
PARTITIONS = 2
ROWS = 40  # a multiple of PARTITIONS
START_TIMEOUT_S = 60

JOB = textwrap.dedent('''
    """Run by tests/test_sail.py with .venv-sail's Python: a Connect client of Sail."""
    import json
    import sys

    from pyspark.sql import SparkSession

    url, bootstrap, topic, rows, partitions = sys.argv[1:4] + [int(a) for a in sys.argv[4:6]]
    spark = SparkSession.builder.remote(url).getOrCreate()
    report = {"pyspark": spark.version}

    def first_line(exc):
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"

    try:
        spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap) \\
            .option("subscribe", topic).load().schema
        report["auto_registered"] = True
    except Exception as exc:
        report["auto_registered"] = first_line(exc)

    from pyspark_pykafka import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)

    df = spark.range(0, rows, 1, 2).selectExpr(
        "format_string('k%05d', id) AS key",
        "format_string('v%05d', id) AS value",
        f"cast(id % {partitions} AS int) AS partition",
        "array(named_struct('key', 'h', 'value', cast(format_string('%d', id) AS binary)))"
        " AS headers",
        "timestamp_millis(1700000000000 + id) AS timestamp")
    (df.write.format("pykafka").mode("append")
       .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())

    ends = json.dumps({topic: {str(p): rows // partitions for p in range(partitions)}})
    back = (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("endingOffsets", ends)
            .option("includeHeaders", "true").load())
    report["schema"] = back.schema.simpleString()
    report["rows"] = [list(r) for r in back.selectExpr(
        "cast(key AS string)", "cast(value AS string)", "topic", "partition", "offset",
        "unix_millis(timestamp)", "timestampType", "headers[0].key",
        "cast(headers[0].value AS string)").collect()]

    # Streaming: what Sail does with it (docs/loading.md says the same).
    try:
        q = (spark.readStream.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("console").start())
        q.stop()
        report["read_stream"] = "started"
    except Exception as exc:
        report["read_stream"] = first_line(exc)
    try:
        q = (spark.readStream.format("rate").load().selectExpr("cast(value AS string) value")
             .writeStream.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("checkpointLocation", "checkpoint").start())
        q.stop()
        report["write_stream"] = "started"
    except Exception as exc:
        report["write_stream"] = first_line(exc)[:200]
    print("REPORT " + json.dumps(report), flush=True)
    spark.stop()
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sail_python(tmp_path_factory) -> str:
    python = own_env("sail", SAIL_REQUIREMENTS)
    install_connector(python, str(tmp_path_factory.mktemp("sail-wheel")))
    return python


@pytest.fixture(scope="module")
def sail_server(sail_python, tmp_path_factory):
    """``sc://127.0.0.1:PORT`` of a Sail server whose Python is ``.venv-sail``'s, started in
    an empty directory (so nothing of the checkout is on its path)."""
    tmp = tmp_path_factory.mktemp("sail-server")
    port = _free_port()
    sail = os.path.join(os.path.dirname(sail_python), "sail")
    log_path = tmp / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sail, "spark", "server", "--ip", "127.0.0.1", "--port", str(port)],
            cwd=tmp,
            env=clean_env(sail_python),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:

        def listening() -> bool:
            assert proc.poll() is None, f"sail exited {proc.returncode}: {log_path.read_text()}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_until(
            listening, START_TIMEOUT_S, lambda: f"sail starting: {log_path.read_text()}", 0.2
        )
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def test_batch_write_and_read_on_sail(sail_python, sail_server, kafka, topic_name, tmp_path):
    # The job stamps its records in November 2023, past Kafka's default retention (7 days):
    # without retention.ms=-1 the next retention check deletes them.
    with KafkaClient(bootstrap_servers=kafka.bootstrap) as client:
        client.create_topics({topic_name: PARTITIONS}, configs={"retention.ms": "-1"})
    job = write_job(str(tmp_path), JOB)
    report = run_job(
        sail_python,
        [sail_python, job, sail_server, kafka.bootstrap, topic_name, str(ROWS), str(PARTITIONS)],
        str(tmp_path),
        timeout=300,
    )
    assert report["pyspark"].startswith("4.1"), report["pyspark"]
    # Sail does not look pyspark_* modules up: the session registers the class.
    assert report["auto_registered"] is not True
    assert report["schema"] == (
        "struct<key:binary,value:binary,topic:string,partition:int,"
        "offset:bigint,timestamp:timestamp,timestampType:int,"
        "headers:array<struct<key:string,value:binary>>>"
    )
    expected = sorted(
        [f"k{i:05d}", f"v{i:05d}", topic_name, i % PARTITIONS, 1700000000000 + i, 0, "h", str(i)]
        for i in range(ROWS)
    )
    assert sorted(r[:4] + r[5:] for r in report["rows"]) == expected
    for p in range(PARTITIONS):  # every record of a partition once, at offsets 0..n-1
        assert sorted(r[4] for r in report["rows"] if r[3] == p) == list(range(ROWS // PARTITIONS))
    # Streaming on Sail 0.7.2: a readStream of a Python source is no stream, and a Python
    # data source is no streaming sink. docs/loading.md's table says so.
    assert "only supports streaming data" in report["read_stream"], report["read_stream"]
    assert "PythonWriteNode" in report["write_stream"], report["write_stream"]
