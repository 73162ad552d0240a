"""The child driver of tests/test_jvm_connector_differential.py: one Spark driver (PySpark
4.2.0, the newest Spark whose JVM Kafka connector Maven serves) that runs each scenario twice,
through Spark's own ``format("kafka")`` (jars in ``spark.jars``) and through ours
(``format("pykafka")``, imported from the checkout on PYTHONPATH), and writes what each
gave as JSON for the test to compare.

Run as ``python jvm_referee_child.py <spec.json> <results.json>``. The spec holds
``bootstrap``, ``jars`` and ``scenarios``; a scenario is

- ``{"name", "kind": "read", "options": {...}, "stream": false, "partitions": false}``:
  the bootstrap servers are added unless ``"no_bootstrap"``; gives the schema, the rows
  (every column; binary as hex, timestamps as epoch microseconds), the number of Spark
  partitions when asked, or the error and where it came (``load`` or ``collect``);
  a stream (``"stream": true``) runs with ``Trigger.AvailableNow`` into a memory table and
  also gives the input rows of each micro-batch;
- ``{"name", "kind": "write", "sql", "options", "mode", "read_back": [topics]}``: the
  rows of ``sql`` written by each sink, then each topic of ``read_back`` read by Spark's
  connector (the same referee for both sinks). ``<fmt>`` and ``<name>`` for each ``name``
  of the scenario's ``subst[format]`` are replaced in the SQL, the option values and the
  topic names, so the two sinks write to topics of their own.

Each scenario runs first through Spark's connector, then through ours; two scenarios run at
a time (``threads`` in the spec), then the streams one by one.
"""

from __future__ import annotations

import calendar
import datetime
import json
import os
import re
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

FORMATS = ("kafka", "pykafka")


def session(jars: list[str]):
    """local[2], UTC, quiet; both connectors available."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafka_source import KafkaDataSource

    spark = (SparkSession.builder.master("local[2]").appName("jvm-referee")
             .config("spark.jars", ",".join(jars))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             # a short-lived driver: the quick compiler only, one GC thread (less CPU)
             .config("spark.driver.extraJavaOptions",
                     "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)
    return spark


def plain(value):
    """A collected cell as JSON: bytes as hex, timestamps as epoch microseconds (the child
    runs with TZ=UTC, so PySpark's naive datetimes are UTC), rows and lists recursively."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, datetime.datetime):
        return calendar.timegm(value.timetuple()) * 1_000_000 + value.microsecond
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def rows_of(df) -> list[dict]:
    return [plain(r) for r in df.collect()]


def error_of(exc: BaseException, phase: str) -> dict:
    """The error, with its gist: the ``...Error:``/``...Exception:`` line of the message
    (the last after a Python traceback, which ends with the connector's own error; else
    the first, the JVM's top exception), or its first line."""
    message = str(exc)
    lines = [line.strip(" :\t") for line in message.splitlines()
             if re.match(r"^[\s:]*[\w.$]*(Error|Exception)(: |$)", line)]
    if lines:
        gist = lines[-1] if "Traceback (most recent call last)" in message else lines[0]
    else:
        gist = message.splitlines()[0] if message else ""
    return {"phase": phase, "type": type(exc).__name__, "message": message[:6000],
            "gist": gist[:1500]}


def substitute(value, subst: dict[str, str]):
    if isinstance(value, str):
        for name, replacement in subst.items():
            value = value.replace(f"<{name}>", replacement)
        return value
    if isinstance(value, list):
        return [substitute(v, subst) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, subst) for k, v in value.items()}
    return value


def reader(spark, fmt: str, bootstrap: str, scenario: dict, stream: bool):
    options = dict(scenario.get("options", {}))
    if not scenario.get("no_bootstrap"):
        options.setdefault("kafka.bootstrap.servers", bootstrap)
    read = spark.readStream if stream else spark.read
    return read.format(fmt).options(**options)


def run_read(spark, fmt: str, bootstrap: str, scenario: dict) -> dict:
    stream = scenario.get("stream", False)
    out: dict = {}
    try:
        df = reader(spark, fmt, bootstrap, scenario, stream).load()
    except Exception as exc:  # the error is the result
        out["error"] = error_of(exc, "load")
        return out
    out["schema"] = df.schema.jsonValue()
    try:
        if stream:
            out.update(run_stream(spark, df, f"{scenario['name']}_{fmt}".replace("-", "_")))
        else:
            if scenario.get("partitions"):
                out["partitions"] = df.rdd.getNumPartitions()
            out["rows"] = rows_of(df)
    except Exception as exc:
        out["error"] = error_of(exc, "collect")
    return out


def run_stream(spark, df, name: str) -> dict:
    """``Trigger.AvailableNow`` into a memory table: its rows and each batch's input rows."""
    query = (df.writeStream.format("memory").queryName(name)
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(240)
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return {"rows": rows_of(spark.table(name)),
            "batches": [p["numInputRows"] for p in query.recentProgress]}


def run_write(spark, fmt: str, bootstrap: str, scenario: dict) -> dict:
    subst = {"fmt": fmt, **scenario.get("subst", {}).get(fmt, {})}
    options = {"kafka.bootstrap.servers": bootstrap,
               **substitute(scenario.get("options", {}), subst)}
    out: dict = {}
    try:
        df = spark.sql(substitute(scenario["sql"], subst))
        df.write.format(fmt).options(**options).mode(scenario.get("mode", "append")).save()
    except Exception as exc:
        out["error"] = error_of(exc, "write")
        return out
    out["read_back"] = {}
    for topic in substitute(scenario.get("read_back", []), subst):
        df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("includeHeaders", "true").load())
        out["read_back"][topic] = rows_of(df)
    return out


def avro_round_trip(spark) -> dict:
    """spark-avro's jar loads: a struct through to_avro and from_avro."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]})
    try:
        row = (spark.range(1, 2).select(to_avro(F.struct(F.col("id").alias("n"),
                                                         F.lit("a").alias("s"))).alias("v"))
               .select(from_avro("v", schema).alias("r")).select("r.n", "r.s").first())
        return {"ok": [row[0], row[1]]}
    except Exception as exc:
        return {"error": error_of(exc, "avro")}


def run_scenario(spark, bootstrap: str, scenario: dict) -> dict:
    run = run_write if scenario["kind"] == "write" else run_read
    result = {}
    for fmt in FORMATS:
        began = time.monotonic()
        try:
            result[fmt] = run(spark, fmt, bootstrap, scenario)
        except Exception as exc:  # a bug of this child: keep it visible in the result
            result[fmt] = {"error": error_of(exc, "child"), "trace": traceback.format_exc()}
        result[fmt]["seconds"] = round(time.monotonic() - began, 2)
    return result


def activate(spark) -> None:
    """The session active in this thread's JVM thread: Spark looks a Python data source up
    for a write (``DataSource.lookupDataSource``) in ``SparkSession.getActiveSession``, which
    is per thread, so without this ``df.write.format("pykafka")`` from a thread other than
    the session's fails with DATA_SOURCE_NOT_FOUND (reads look it up in the session)."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def cpu_seconds(jvm_pid: int | None) -> float | None:
    """CPU seconds (user + system) of this driver, its JVM and the JVM's ended children
    (the Python workers): the suite's cost, which does not grow with the machine's load
    as its wall time does."""
    import resource
    own = resource.getrusage(resource.RUSAGE_SELF)
    total = own.ru_utime + own.ru_stime
    if jvm_pid is None:
        return None
    try:
        with open(f"/proc/{jvm_pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return round(total + sum(int(v) for v in fields[11:15]) / ticks, 1)  # u, s, cu, cs


def main(spec_path: str, results_path: str) -> None:
    """Scenarios run ``threads`` at a time (Spark takes jobs from several threads): most
    of a query's time is waiting (a Python worker starting, a client connecting), which
    another query's work can fill. Streams run last, one at a time: a Python stream's
    source runs in a Python worker of its own that must connect back to Spark within 10 s
    (hard-coded in PySpark 4.2's PythonWorkerFactory), which a loaded machine can miss."""
    with open(spec_path) as f:
        spec = json.load(f)
    began = time.monotonic()
    spark = session(spec["jars"])
    results = {"_session_seconds": round(time.monotonic() - began, 2),
               "_avro": avro_round_trip(spark)}
    lock = threading.Lock()

    def run(scenario: dict) -> None:
        activate(spark)
        result = run_scenario(spark, spec["bootstrap"], scenario)
        with lock, open(results_path, "w") as f:  # as it goes: a killed child keeps some
            results[scenario["name"]] = result
            json.dump(results, f)

    together = [s for s in spec["scenarios"] if not s.get("stream")]
    with ThreadPoolExecutor(spec.get("threads", 1)) as pool:
        list(pool.map(run, together))
    for scenario in spec["scenarios"]:  # streams one at a time, alone (see above)
        if scenario.get("stream"):
            run(scenario)
    results["_scenarios_seconds"] = round(time.monotonic() - began, 2)
    gateway = spark.sparkContext._gateway
    spark.stop()  # the Python workers end: their CPU time is the JVM's children's now
    results["_cpu_seconds"] = cpu_seconds(getattr(getattr(gateway, "proc", None), "pid", None))
    with open(results_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
