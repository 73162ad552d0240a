"""The ways of loading the connector into a classic Spark application, as the table of
docs/loading.md ("Ways to load the connector") says, each checked with a real job.

Each job runs in a subprocess from a temporary directory with no ``PYTHONPATH`` (unless the
way under test sets one), on ``local[2]``, with a Python that has pyspark and the runtime
dependencies: ``.venv-pyfiles``, or an env layered on it (``tests/helpers/python_envs.py``). It
tries, in this order: ``format("pykafka")`` before anything is registered (Spark looks
``pyspark_*`` modules up once, at the first Python data source it resolves), then after
loading the connector as the way says, a batch write and read, a streaming read
(``Trigger.AvailableNow`` into a memory sink) and a streaming write (from a JSON file
source, so that it does not depend on the streaming read). Spark Connect, and the wheel
installed on the server, are in ``tests/test_connect.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from protocol.client.cluster import KafkaClient

from .helpers.python_envs import copy_sources, layered_env, pip
from .helpers.envs import clean_env, pyfiles_python

pytestmark = [pytest.mark.spark, pytest.mark.loading]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTITIONS = 2
ROWS = 20  # a multiple of PARTITIONS

JOB = textwrap.dedent('''
    """Run by tests/test_load_paths.py: what works with the connector loaded one way."""
    import json
    import os
    import sys

    from pyspark.sql import SparkSession

    bootstrap, topic, out_topic, rows, partitions, work = sys.argv[1:7]
    rows, partitions = int(rows), int(partitions)
    add_py_file = sys.argv[7] if len(sys.argv) > 7 else None
    spark = (SparkSession.builder.appName("pykafka-load-paths").master("local[2]")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .getOrCreate())
    report = {}

    def first_line(exc):
        return " ".join(str(exc).split())

    try:
        (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).load().schema)
        report["auto_registered"] = True
    except Exception as exc:
        report["auto_registered"] = False
        report["auto_error"] = first_line(exc)[:300]
    if add_py_file:
        spark.sparkContext.addPyFile(add_py_file)
    if not report["auto_registered"]:
        from pyspark_pykafka import KafkaDataSource
        spark.dataSource.register(KafkaDataSource)
    import kafka_source
    report["driver_imports"] = kafka_source.__file__

    def read(name):
        df = (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", name).load())
        return sorted([list(r) for r in df.selectExpr(
            "partition", "offset", "cast(key AS string)", "cast(value AS string)").collect()])

    (spark.range(0, rows, 1, 1)
     .selectExpr("format_string('k%03d', id) AS key", "format_string('v%03d', id) AS value",
                 f"cast(id % {partitions} AS int) AS partition")
     .write.format("pykafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).save())
    report["batch"] = read(topic)

    try:
        query = (spark.readStream.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load()
                 .selectExpr("partition", "offset", "cast(key AS string) AS key",
                             "cast(value AS string) AS value")
                 .writeStream.format("memory").queryName("from_kafka")
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        report["stream_read"] = sorted([list(r) for r in
                                        spark.sql("SELECT * FROM from_kafka").collect()])
    except Exception as exc:
        report["stream_read_error"] = first_line(exc)

    source = os.path.join(work, "json")
    os.makedirs(source)
    with open(os.path.join(source, "part.json"), "w") as f:
        f.writelines(json.dumps({"value": f"s{i:03d}"}) + "\\n" for i in range(rows))
    try:
        query = (spark.readStream.format("json").schema("value STRING").load(source)
                 .coalesce(1).writeStream.format("pykafka")
                 .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
                 .option("checkpointLocation", os.path.join(work, "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        report["stream_write"] = sorted(value for _, _, _, value in read(out_topic))
    except Exception as exc:
        report["stream_write_error"] = first_line(exc)

    print("REPORT " + json.dumps(report), flush=True)
    spark.stop()
''')


def make_topic(cluster, name: str) -> None:
    cluster.create_topic(name, PARTITIONS, 1)
    with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
        client.wait_for_topics([name])


def run_job(
    python: str,
    cluster,
    topic: str,
    tmp_path,
    *,
    submit_py_files: str | None = None,
    add_py_file: str | None = None,
    pythonpath: str | None = None,
) -> dict:
    make_topic(cluster, topic)
    make_topic(cluster, topic + "-out")
    job = tmp_path / "job.py"
    job.write_text(JOB)
    args = [
        str(job),
        cluster.bootstrap,
        topic,
        topic + "-out",
        str(ROWS),
        str(PARTITIONS),
        str(tmp_path / "work"),
    ]
    if add_py_file:
        args.append(add_py_file)
    if submit_py_files:
        command = [
            os.path.join(os.path.dirname(python), "spark-submit"),
            "--py-files",
            submit_py_files,
            *args,
        ]
    else:
        command = [python, *args]
    extra = {"PYTHONPATH": pythonpath} if pythonpath else {}
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env=clean_env(python, **extra),
        capture_output=True,
        text=True,
        timeout=600,
    )
    reports = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and reports, (done.stdout[-3000:], done.stderr[-6000:])
    return json.loads(reports[-1][len("REPORT ") :])


def expected_batch() -> list[list]:
    return sorted([i % PARTITIONS, i // PARTITIONS, f"k{i:03d}", f"v{i:03d}"] for i in range(ROWS))


STREAM_WRITTEN = [f"s{i:03d}" for i in range(ROWS)]


@pytest.mark.timeout(900)
def test_editable_install_registers_itself_and_runs_everything(mock_cluster, topic_name, tmp_path):
    """``pip install -e .`` with no options (setuptools' default editable mode), of a copy
    of the checkout, into an env that has only the dependencies."""
    python = layered_env(str(tmp_path / "env"))
    checkout = copy_sources(str(tmp_path / "checkout"))
    pip(python, "install", "--no-deps", "-e", checkout)
    report = run_job(python, mock_cluster, topic_name, tmp_path)
    assert report["auto_registered"] is True, report.get("auto_error")
    assert report["driver_imports"] == os.path.join(checkout, "kafka_source", "__init__.py")
    assert report["batch"] == expected_batch()
    assert report.get("stream_read") == expected_batch(), report.get("stream_read_error")
    assert report.get("stream_write") == STREAM_WRITTEN, report.get("stream_write_error")


@pytest.mark.timeout(900)
def test_add_py_file_runs_everything_but_registering_itself(
    mock_cluster, topic_name, tmp_path, pyfiles_zip
):
    report = run_job(pyfiles_python(), mock_cluster, topic_name, tmp_path, add_py_file=pyfiles_zip)
    assert report["auto_registered"] is False
    assert "DATA_SOURCE_NOT_FOUND" in report["auto_error"]
    assert os.path.basename(pyfiles_zip) + os.sep in report["driver_imports"]
    assert report["batch"] == expected_batch()
    assert report.get("stream_write") == STREAM_WRITTEN, report.get("stream_write_error")
    # the streaming read's planner gets no --py-files: it imports the connector from the
    # zip the pickled data source carries (kafka_common.import_path)
    assert report.get("stream_read") == expected_batch(), report.get("stream_read_error")


@pytest.mark.timeout(900)
def test_py_files_alone_runs_everything_but_registering_itself(
    mock_cluster, topic_name, tmp_path, pyfiles_zip
):
    report = run_job(
        pyfiles_python(), mock_cluster, topic_name, tmp_path, submit_py_files=pyfiles_zip
    )
    assert report["auto_registered"] is False
    assert "DATA_SOURCE_NOT_FOUND" in report["auto_error"]
    assert report["batch"] == expected_batch()
    assert report.get("stream_write") == STREAM_WRITTEN, report.get("stream_write_error")
    # the streaming read's planner gets no --py-files: it imports the connector from the
    # zip the pickled data source carries (kafka_common.import_path)
    assert report.get("stream_read") == expected_batch(), report.get("stream_read_error")


@pytest.mark.timeout(900)
def test_py_files_and_the_zip_on_pythonpath_run_everything(
    mock_cluster, topic_name, tmp_path, pyfiles_zip
):
    """Client mode: the zip also on the PYTHONPATH spark-submit (and so the driver's JVM)
    starts with, which every Python worker the driver starts inherits."""
    report = run_job(
        pyfiles_python(),
        mock_cluster,
        topic_name,
        tmp_path,
        submit_py_files=pyfiles_zip,
        pythonpath=pyfiles_zip,
    )
    assert report["auto_registered"] is True, report.get("auto_error")
    assert report["batch"] == expected_batch()
    assert report.get("stream_read") == expected_batch(), report.get("stream_read_error")
    assert report.get("stream_write") == STREAM_WRITTEN, report.get("stream_write_error")
