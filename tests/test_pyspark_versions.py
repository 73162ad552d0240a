"""Every PySpark the README names (``make test-versions``, not part of ``make test``).

For each supported minor version, a virtualenv of its own (``.venv-pyspark-4.1`` ...,
:mod:`tests.helpers.own_envs`; for the PySpark of ``.venv``, ``make test``'s ``.venv-pyfiles``)
holds that PySpark and the runtime dependencies, not the connector.
One ``spark-submit --py-files dist/pyspark_pykafka-<version>.zip`` job (``local[2]``, the zip
on ``PYTHONPATH`` too, as docs/loading.md's client-mode row says, so a streaming read finds it)
runs from a temporary directory against the librdkafka mock cluster:

- a batch write and a batch read back, record for record;
- a stream: ``readStream`` of that topic with ``Trigger.AvailableNow`` into a
  ``writeStream`` to a second topic, read back; on PySpark 4.2 and later with
  ``maxOffsetsPerTrigger``, which splits the backlog into several micro-batches; on 4.1,
  whose Python sources have no admission control, without it, and a second query with it
  is refused when it starts, with an error naming the option.
"""

from __future__ import annotations

import os
import textwrap

import pytest

from .helpers.broker_setup import create_topic
from .helpers.own_envs import own_env, run_job, write_job
from .helpers.envs import pyfiles_python

pytestmark = pytest.mark.pyspark_versions


# The oldest release of each minor version the README supports that pip installs here
# (4.1.1 is also the client Sail takes, so pip's cache builds its wheel once).
VERSIONS = {"4.1": "4.1.1", "4.2": "4.2.1", "4.3": "4.3.0"}
PARTITIONS = 2
ROWS = 40  # a multiple of PARTITIONS
PER_TRIGGER = 10

JOB = textwrap.dedent('''
    """Run by tests/test_pyspark_versions.py through spark-submit --py-files."""
    import json
    import os
    import subprocess
    import sys

    import pyspark
    from pyspark.sql import SparkSession

    bootstrap, source, sink, rows, partitions, per_trigger = (
        sys.argv[1:4] + [int(a) for a in sys.argv[4:7]])
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from pyspark_pykafka import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)
    report = {"pyspark": pyspark.__version__, "imported_from": sys.modules["kafka_source"].__file__}

    def kafka(reader):
        return reader.format("pykafka").option("kafka.bootstrap.servers", bootstrap)

    (spark.range(0, rows, 1, 2).selectExpr(
        "format_string('k%05d', id) AS key", "format_string('v%05d', id) AS value",
        f"cast(id % {partitions} AS int) AS partition")
     .write.format("pykafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", source).save())
    report["batch"] = [list(r) for r in kafka(spark.read).option("subscribe", source).load()
                       .selectExpr("cast(key AS string)", "cast(value AS string)",
                                   "partition").collect()]

    # One stream: Trigger.AvailableNow from the source topic to the sink topic, split into
    # micro-batches by maxOffsetsPerTrigger where this PySpark has admission control.
    from kafka_source.admission import ADMISSION_CONTROL
    report["admission_control"] = ADMISSION_CONTROL

    def stream(limited, name):
        reader = kafka(spark.readStream).option("subscribe", source) \
            .option("startingOffsets", "earliest")
        if limited:
            reader = reader.option("maxOffsetsPerTrigger", per_trigger)
        return (reader.load().selectExpr("key", "value").writeStream.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
                .option("checkpointLocation", os.path.abspath(name))
                .trigger(availableNow=True).start())

    q = stream(ADMISSION_CONTROL, "ck-stream")
    q.awaitTermination(300)
    report["stream_error"] = q.exception() and str(q.exception())[:4000]
    report["batches"] = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    report["streamed"] = [r[0] for r in kafka(spark.read).option("subscribe", sink).load()
                          .selectExpr("cast(value AS string)").collect()]
    if not ADMISSION_CONTROL:  # refused when the query starts, naming the option
        q = stream(True, "ck-limited")
        try:
            q.awaitTermination(300)  # raises the query's error
            report["limited_error"] = q.exception() and str(q.exception())[:4000]
        except Exception as exc:
            report["limited_error"] = str(exc)[:4000]
    print("REPORT " + json.dumps(report), flush=True)
    spark.stop()
''')


def env_of(version: str) -> str:
    """A Python with PySpark ``version`` and the runtime dependencies, not the connector:
    ``.venv-pyfiles`` (which ``make test`` builds) for the PySpark of this venv, else
    ``.venv-pyspark-<minor>``."""
    import pyspark

    if version == pyspark.__version__:
        return pyfiles_python()
    return own_env("pyspark-" + version.rsplit(".", 1)[0], [f"pyspark=={version}"])


@pytest.mark.timeout(1200)  # a first run builds the version's env: pip builds PySpark's sdist
@pytest.mark.parametrize("minor", sorted(VERSIONS))
def test_batch_stream_and_py_files_under_each_pyspark(minor, mock_cluster, pyfiles_zip, tmp_path):
    python = env_of(VERSIONS[minor])
    source, sink = f"versions-{minor}-source", f"versions-{minor}-sink"
    create_topic(mock_cluster, source, PARTITIONS)
    create_topic(mock_cluster, sink, PARTITIONS)
    job = write_job(str(tmp_path), JOB)
    spark_submit = os.path.join(os.path.dirname(python), "spark-submit")
    args = [
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        "spark.python.authenticate.socketTimeout=120s",
        "--py-files",
        pyfiles_zip,
        job,
        mock_cluster.bootstrap,
        source,
        sink,
        str(ROWS),
        str(PARTITIONS),
        str(PER_TRIGGER),
    ]
    # PYTHONPATH: the zip, for Spark's registration lookup and the streaming read's planner.
    report = run_job(python, [spark_submit, *args], str(tmp_path), 900, PYTHONPATH=pyfiles_zip)

    assert report["pyspark"] == VERSIONS[minor]
    assert f"{os.path.basename(pyfiles_zip)}{os.sep}" in report["imported_from"]
    assert sorted(report["batch"]) == sorted(
        [f"k{i:05d}", f"v{i:05d}", i % PARTITIONS] for i in range(ROWS)
    )
    assert report["stream_error"] is None, report["stream_error"]
    assert sorted(report["streamed"]) == [f"v{i:05d}" for i in range(ROWS)]
    batches = report["batches"]
    assert sum(batches) == ROWS, batches
    if minor == "4.1":
        assert report["admission_control"] is False
        assert (
            "maxOffsetsPerTrigger needs PySpark 4.2 or later: PySpark 4.1.1 gives Python "
            "streaming sources no admission control (no latestOffset(start, limit)), so every "
            "micro-batch would read all that is available. Remove maxOffsetsPerTrigger or "
            "upgrade PySpark."
        ) in (report["limited_error"] or ""), report["limited_error"]
    else:
        assert report["admission_control"] is True
        assert len(batches) >= ROWS // PER_TRIGGER and max(batches) <= PER_TRIGGER, batches
