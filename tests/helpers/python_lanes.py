"""What ``make test-pythons`` (tests/test_pythons.py) and ``make test-minimums``
(tests/test_minimums.py) run in each env of theirs: a selection of the suite in a child
pytest and a Spark job, each run in a lane of its own, a few lanes at a time.

The job (``JOB``, run as ``python job.py`` so that the connector is found by Spark's own
lookup of ``pyspark_*`` modules) writes a topic of the librdkafka mock cluster and reads it
back, streams it with ``Trigger.AvailableNow`` to a second topic (split by
``maxOffsetsPerTrigger`` where the PySpark has admission control; 4.1 has none), and reads
a third topic of ``WIDE_PARTITIONS`` partitions of one record each with
``includeHeaders=true``: a small read, all in one task, whose ranges the reader joins into
one Arrow batch (the join pyarrow 18 lacked ``concat_batches`` for).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import traceback
from concurrent.futures import Future

from .broker_setup import create_topic
from .own_envs import run_job, write_job
from .envs import clean_env
from .library import ROOT

# The child pytest's tools, pinned: every env gets the same (the newest hypothesis that
# still runs on 3.10).
TEST_REQUIREMENTS = ["pytest==9.2.0", "pytest-timeout==2.4.0", "hypothesis==6.168.5"]
# The selection each env runs (no broker, no Spark: the Spark part is the job below).
SELECTION = [
    "test_primitives.py",
    "test_schema_roundtrip.py",
    "test_records_batch.py",
    "test_records_decode.py",
    "test_records_encode.py",
    "test_records_golden.py",
    "test_records_legacy.py",
    "test_records_varint.py",
    "test_records_compression.py",
    "test_records_accel.py",
]
PARTITIONS = 2
ROWS = 40  # a multiple of PARTITIONS
PER_TRIGGER = 10
WIDE_PARTITIONS = 50  # one record each: a small read, one task


def topics(name: str) -> tuple[str, str, str]:
    """The source, sink and wide topics of the env ``name``."""
    return f"{name}-source", f"{name}-sink", f"{name}-wide"


def create_topics(cluster, name: str) -> None:
    source, sink, wide = topics(name)
    create_topic(cluster, source, PARTITIONS)
    create_topic(cluster, sink, PARTITIONS)
    create_topic(cluster, wide, WIDE_PARTITIONS)


def outcome(lane: str, part, *args) -> Future:
    """``part(*args)``'s value, or the exception it raised, as a resolved Future, so each
    test re-raises only its own part's failure."""
    future: Future = Future()
    try:
        future.set_result(part(*args))
    except BaseException as exc:  # noqa: BLE001 (handed to the test that judges it)
        exc.add_note(f"(in the {lane} lane: {traceback.format_exc()[-3000:]})")
        future.set_exception(exc)
    return future


def selection(python: str, tmp: str) -> subprocess.CompletedProcess:
    """The selection in a child pytest of ``python``, on a copy of tests/ (and of
    pyproject.toml, for pytest's settings) beside nothing else: the connector comes from
    the wheel installed in the env."""
    shutil.copytree(
        os.path.join(ROOT, "tests"),
        os.path.join(tmp, "tests"),
        ignore=shutil.ignore_patterns("__pycache__", "node_modules", "bench", "fuzz", "java"),
    )
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp)
    return subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *[os.path.join("tests", name) for name in SELECTION],
        ],
        cwd=tmp,
        env=clean_env(python),
        capture_output=True,
        text=True,
        timeout=900,
    )


def selection_size() -> int:
    """How many tests the selection holds under this Python (both record paths)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            *[os.path.join("tests", n) for n in SELECTION],
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    collected = re.search(r"^(\d+) tests? collected", done.stdout, re.M)
    assert done.returncode == 0 and collected, done.stdout[-3000:] + done.stderr[-3000:]
    return int(collected[1])


def assert_selection_passed(done: subprocess.CompletedProcess, size: int) -> None:
    tail = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, tail
    summary = done.stdout.strip().splitlines()[-1]
    # all of them, on both record paths, and nothing skipped, failed or deselected
    assert re.fullmatch(rf"{size} passed in [\d.]+s(?: \([\d:]+\))?", summary), tail


def spark_job(python: str, bootstrap: str, name: str, tmp: str) -> dict:
    """``JOB`` run by ``python`` on the topics of ``name``: what the job reported."""
    job = write_job(tmp, JOB)
    sizes = [str(ROWS), str(PARTITIONS), str(PER_TRIGGER), str(WIDE_PARTITIONS)]
    return run_job(python, [python, job, bootstrap, *topics(name), *sizes], tmp, 600)


def assert_job_report(report: dict) -> None:
    """The batch, the stream and the wide read of ``JOB`` came back record for record."""
    assert sorted(report["batch"]) == sorted(
        [f"k{i:05d}", f"v{i:05d}", i % PARTITIONS] for i in range(ROWS)
    )
    assert report["stream_error"] is None, report["stream_error"]
    assert sorted(report["streamed"]) == [f"v{i:05d}" for i in range(ROWS)]
    batches = report["batches"]
    assert sum(batches) == ROWS, batches
    if report["admission_control"]:  # PySpark 4.2 and later
        assert len(batches) >= ROWS // PER_TRIGGER and max(batches) <= PER_TRIGGER, batches
    assert report["wide_error"] is None, report["wide_error"]
    assert report["wide_tasks"] == 1
    assert report["wide"] == [
        [f"w{p:02d}", p, [["n", f"h{p:02d}"]]] for p in range(WIDE_PARTITIONS)
    ]


JOB = textwrap.dedent('''
    """Run by tests/helpers/python_lanes.py with a Python whose env has the connector."""
    import json
    import os
    import sys
    from importlib import metadata

    import pyspark
    from pyspark.sql import SparkSession

    bootstrap, source, sink, wide = sys.argv[1:5]
    rows, partitions, per_trigger, wide_partitions = [int(a) for a in sys.argv[5:9]]
    spark = (SparkSession.builder.master("local[2]")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def where():
        import sys
        import kafka_source
        from protocol.records import accel
        return ["%d.%d" % sys.version_info[:2], kafka_source.__file__, accel.origin()]

    report = {"pyspark": pyspark.__version__, "driver": where(),
              "workers": spark.sparkContext.parallelize(range(2), 2)
              .map(lambda _: tuple(where())).distinct().collect(),
              "installed": {d.metadata["Name"].lower(): d.version
                            for d in metadata.distributions()},
              "pyspark_requires": metadata.requires("pyspark") or []}

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

    from kafka_source.admission import ADMISSION_CONTROL  # 4.1 has none
    report["admission_control"] = ADMISSION_CONTROL
    reader = (kafka(spark.readStream).option("subscribe", source)
              .option("startingOffsets", "earliest"))
    if ADMISSION_CONTROL:
        reader = reader.option("maxOffsetsPerTrigger", per_trigger)
    q = (reader.load().selectExpr("key", "value").writeStream.format("pykafka")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
         .option("checkpointLocation", os.path.abspath("checkpoint"))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    report["stream_error"] = q.exception() and str(q.exception())[:4000]
    report["batches"] = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    report["streamed"] = [r[0] for r in kafka(spark.read).option("subscribe", sink).load()
                          .selectExpr("cast(value AS string)").collect()]

    # A record with a header in each of many partitions, read with includeHeaders: one
    # task joins the small ranges into one batch.
    (spark.range(0, wide_partitions, 1, 2).selectExpr(
        "format_string('w%02d', id) AS value", "cast(id AS int) AS partition",
        "array(named_struct('key', 'n', 'value', cast(format_string('h%02d', id) AS binary)))"
        " AS headers")
     .write.format("pykafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", wide).save())
    df = kafka(spark.read).option("subscribe", wide).option("includeHeaders", "true").load()
    report["wide_tasks"] = df.rdd.getNumPartitions()
    try:
        report["wide"] = sorted(
            [r[0], r[1], [[k, v.decode()] for k, v in r[2]]]
            for r in df.selectExpr("cast(value AS string)", "partition", "headers").collect())
        report["wide_error"] = None
    except Exception as exc:
        report["wide_error"] = str(exc)[-4000:]
    print("REPORT " + json.dumps(report), flush=True)
    spark.stop()
''')
