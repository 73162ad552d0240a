"""The child driver of tests/test_jvm_connector_differential.py: one Spark driver (PySpark
4.2.0, the newest Spark whose JVM Kafka connector Maven serves) that runs each scenario twice,
through Spark's own ``format("kafka")`` (jars in ``spark.jars``) and through ours
(``format("pykafka")``, imported from the checkout on PYTHONPATH), and writes what each
gave as JSON for the test to compare.

Run as ``python jvm_referee_child.py <spec.json> <results.json>``. The spec holds
``bootstrap``, ``jars`` and ``scenarios``, and may hold ``spark_conf`` (settings the
session starts with, e.g. a changed ``spark.network.timeout``) and ``"avro": false`` (no
spark-avro check). A scenario runs through both connectors unless its ``formats`` names
one, and is

- ``{"name", "kind": "read", "options": {...}, "stream": false, "partitions": false}``:
  the bootstrap servers are added unless ``"no_bootstrap"`` (or the options name their
  own); ``<name>`` in an option value is replaced by ``subst[format][name]`` (topics of
  each connector's own); gives the schema, the rows
  (every column; binary as hex, timestamps as epoch microseconds), the number of Spark
  partitions when asked, or the error and where it came (``load`` or ``collect``);
  a stream (``"stream": true``) runs with ``Trigger.AvailableNow`` into a memory table and
  also gives each micro-batch from its progress (``batches_of``: size, start, end and
  latest offsets, metrics, when it began);
- ``{"name", "kind": "write", "sql", "options", "mode", "read_back": [topics]}``: the
  rows of ``sql`` written by each sink, then each topic of ``read_back`` read by Spark's
  connector (the same referee for both sinks). ``<fmt>`` and ``<name>`` for each ``name``
  of the scenario's ``subst[format]`` are replaced in the SQL, the option values and the
  topic names, so the two sinks write to topics of their own. ``"fresh_thread"`` writes
  from a new Python thread; ``"read_back_after_error"`` reads back after a failed write;
- ``{"name", "kind": "steps", "steps": [...], "subst"}``: a list of steps run through
  each connector on topics of its own (``run_steps``): streams run again on one
  checkpoint, with records produced, partitions added, a topic or records deleted between
  (or during) the runs; and a batch DataFrame's actions.

Any scenario may hold ``sql_conf``: session settings (``spark.conf.set``) in force while it
runs, and unset after (such a scenario runs alone, as the streams do).

Each scenario runs first through Spark's connector, then through ours; two scenarios run at
a time (``threads`` in the spec), then the streams and the steps one by one.
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


def session(jars: list[str], conf: dict[str, str] | None = None):
    """local[2], UTC, quiet; both connectors available; ``conf``: Spark settings of the
    spec's own (``spark_conf``), set last."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("jvm-referee")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # a short-lived driver: the quick compiler only, one GC thread (less CPU)
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
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
    the first, the JVM's top exception), or its first line; and ``causes``, the JVM's
    ``Caused by:`` lines (which a long stack trace puts beyond the message kept)."""
    message = str(exc)
    lines = [
        line.strip(" :\t")
        for line in message.splitlines()
        if re.match(r"^[\s:]*[\w.$]*(Error|Exception)(: |$)", line)
    ]
    if lines:
        gist = lines[-1] if "Traceback (most recent call last)" in message else lines[0]
    else:
        gist = message.splitlines()[0] if message else ""
    causes = [
        line.strip()[:1500]
        for line in message.splitlines()
        if line.strip().startswith("Caused by:")
    ][:10]
    return {
        "phase": phase,
        "type": type(exc).__name__,
        "message": message[:6000],
        "gist": gist[:1500],
        "causes": causes,
    }


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
    subst = {"fmt": fmt, **scenario.get("subst", {}).get(fmt, {})}
    options = substitute(dict(scenario.get("options", {})), subst)
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
            if "error" in out:
                return out
        else:
            if scenario.get("partitions"):
                out["partitions"] = df.rdd.getNumPartitions()
            out["rows"] = rows_of(df)
    except Exception as exc:
        out["error"] = error_of(exc, "collect")
    return out


def batches_of(query) -> list[dict]:
    """Each micro-batch of the query's progress, once (an idle trigger repeats a batch id
    with no input): its id, when it began (epoch ms), and its source's ``startOffset``,
    ``endOffset``, ``latestOffset``, ``numInputRows`` and ``metrics``."""
    out: dict[int, dict] = {}
    for progress in query.recentProgress:
        p = json.loads(progress.json)
        source = p["sources"][0]
        batch = {
            "batchId": p["batchId"],
            "numInputRows": source["numInputRows"],
            "began_ms": int(
                calendar.timegm(time.strptime(p["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) * 1000
                + int(p["timestamp"][20:23])
            ),
            **{k: source.get(k) for k in ("startOffset", "endOffset", "latestOffset", "metrics")},
        }
        if p["batchId"] not in out or batch["numInputRows"]:
            out.setdefault(p["batchId"], batch)
    return [out[k] for k in sorted(out)]


def run_stream(
    spark, df, name: str, trigger: str = "availableNow", checkpoint: str | None = None, until=None
) -> dict:
    """The stream into a memory table (with a ``checkpoint``, whose runs the memory sink
    cannot resume, into a list by ``foreachBatch``): its rows and its micro-batches
    (``batches_of``). ``Trigger.AvailableNow`` runs to its end; a processing-time trigger
    (``trigger`` is its interval) runs until ``until(query)`` says it is done."""
    collected: list[dict] = []
    if checkpoint:
        writer = df.writeStream.foreachBatch(
            lambda batch, _: collected.extend(rows_of(batch))
        ).option("checkpointLocation", checkpoint)
    else:
        writer = df.writeStream.format("memory").queryName(name)
    if trigger == "availableNow":
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime=trigger).start()
    try:
        if until is None:
            query.awaitTermination(240)
        else:
            until(query)
    except Exception:  # the query's own failure is kept below, with its batches
        if query.exception() is None:
            raise
    finally:
        query.stop()
    out = {
        "batches": batches_of(query),
        "rows": collected if checkpoint else rows_of(spark.table(name)),
    }
    if query.exception() is not None:
        out["error"] = error_of(RuntimeError(str(query.exception())), "stream")
    return out


def run_write(spark, fmt: str, bootstrap: str, scenario: dict) -> dict:
    subst = {"fmt": fmt, **scenario.get("subst", {}).get(fmt, {})}
    options = {
        "kafka.bootstrap.servers": bootstrap,
        **substitute(scenario.get("options", {}), subst),
    }
    out: dict = {}
    try:
        df = spark.sql(substitute(scenario["sql"], subst))
        write = df.write.format(fmt).options(**options).mode(scenario.get("mode", "append"))
        if scenario.get("fresh_thread"):
            in_a_new_thread(write.save)
        else:
            write.save()
    except Exception as exc:
        out["error"] = error_of(exc, "write")
        if not scenario.get("read_back_after_error"):
            return out
    out["read_back"] = {}
    for topic in substitute(scenario.get("read_back", []), subst):
        df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .load()
        )
        out["read_back"][topic] = rows_of(df)
    return out


# ---- scenarios of steps: streams run again on one checkpoint, with changes between ------


class Admin:
    """Kafka's Java admin client (kafka-clients, in ``spark.jars``) through Py4J: what
    the steps do to topics between (and during) a scenario's runs."""

    def __init__(self, spark, bootstrap: str):
        self.jvm = spark._jvm
        self.bootstrap = bootstrap
        props = self.jvm.java.util.Properties()
        props.put("bootstrap.servers", bootstrap)
        self.admin = self.jvm.org.apache.kafka.clients.admin.Admin.create(props)

    def add_partitions(self, topic: str, total: int) -> None:
        new = self.jvm.org.apache.kafka.clients.admin.NewPartitions.increaseTo(total)
        self.admin.createPartitions({topic: new}).all().get()

    def delete_topic(self, topic: str) -> None:
        self.admin.deleteTopics([topic]).all().get()

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        """Through the project's own client (Py4J finds no RecordsToDelete here)."""
        from protocol.client.cluster import KafkaClient

        with KafkaClient(bootstrap_servers=self.bootstrap) as client:
            assert client.delete_records({(topic, partition): before}) == {
                (topic, partition): before
            }

    def close(self) -> None:
        self.admin.close()


def produce(spark, bootstrap: str, topic: str, partition: int, count: int, tag: str) -> None:
    """``count`` records ``<tag>-<i>`` (keys alike) into one partition, through Spark's
    sink in one task that sends them together (a long linger, then the task's flush): a
    stream polling meanwhile sees all of them or none."""
    (
        spark.sql(
            f"SELECT concat('{tag}-', id) AS key, concat('{tag}-', id) AS value, "
            f"{int(partition)} AS partition FROM range(0, {int(count)}, 1, 1)"
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.linger.ms", "60000")
        .option("topic", topic)
        .mode("append")
        .save()
    )


def do_change(spark, admin: Admin, bootstrap: str, step: dict) -> None:
    """One step that changes the topics: ``produce``, ``add_partitions``,
    ``delete_topic`` or ``delete_records``."""
    if step["do"] == "produce":
        produce(
            spark, bootstrap, step["topic"], step.get("partition", 0), step["count"], step["tag"]
        )
    elif step["do"] == "add_partitions":
        admin.add_partitions(step["topic"], step["total"])
    elif step["do"] == "delete_topic":
        admin.delete_topic(step["topic"])
    elif step["do"] == "delete_records":
        admin.delete_records(step["topic"], step.get("partition", 0), step["before"])
    else:
        raise ValueError(f"unknown step {step['do']!r}")


def input_rows(query) -> int:
    return sum(b["numInputRows"] for b in batches_of(query))


def run_until(spark, admin: Admin, bootstrap: str, step: dict):
    """For a processing-time run: ``during`` changes, each once the stream has read
    ``after_rows`` rows, then wait until it has read ``until_rows`` and ``settle_s`` more
    seconds passed (so that a batch that should not come would)."""

    def until(query) -> None:
        pending = list(step.get("during", []))
        deadline = time.monotonic() + step.get("timeout_s", 120)
        while time.monotonic() < deadline and query.isActive:
            rows = input_rows(query)
            if pending and rows >= pending[0]["after_rows"]:
                for change in pending.pop(0)["steps"]:
                    do_change(spark, admin, bootstrap, change)
                continue
            if not pending and rows >= step["until_rows"]:
                # a negative: time for a batch that should not come to come (no event)
                time.sleep(step.get("settle_s", 0))
                return
            time.sleep(0.1)  # the driving loop: it makes the step's changes on the way
        raise TimeoutError(
            f"the stream read {input_rows(query)} rows, not "
            f"{step['until_rows']}, within {step.get('timeout_s', 120)} s"
        )

    return until


def stream_write(spark, fmt: str, bootstrap: str, step: dict, checkpoint: str) -> dict:
    """``step["from"]`` read by Spark's connector from earliest, written to ``step["to"]``
    by the sink ``fmt`` in ``output_mode``, with Trigger.AvailableNow or (``trigger``
    "continuous") a continuous trigger stopped once ``until_rows`` rows landed or after
    ``timeout_s``; then ``to`` read back by Spark's connector."""
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", step["from"])
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
    )
    writer = (
        source.writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", step["to"])
        .option("checkpointLocation", checkpoint)
        .outputMode(step.get("output_mode", "append"))
    )

    def landed() -> list[dict]:
        return rows_of(
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", step["to"])
            .load()
        )

    try:
        if step.get("trigger") == "continuous":
            query = writer.trigger(continuous="1 second").start()
            deadline = time.monotonic() + step.get("timeout_s", 60)
            while (
                query.isActive
                and len(landed()) < step["until_rows"]
                and time.monotonic() < deadline
            ):
                time.sleep(0.5)  # a child under PySpark 4.2.0: its own poll, no helpers
            query.stop()
        else:
            query = writer.trigger(availableNow=True).start()
            query.awaitTermination(240)
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
    except Exception as exc:
        return {"error": error_of(exc, "stream_write"), "rows": landed()}
    return {"rows": landed()}


def run_steps(spark, fmt: str, bootstrap: str, scenario: dict) -> dict:
    """A scenario of ``steps`` (topic names per format in ``subst``, as for writes):
    ``stream`` steps run a stream (``options``; ``trigger`` "availableNow" or an interval;
    ``checkpoint``, a name: the same name is the same checkpoint; ``format`` "other" runs
    it through the other connector) and give its rows and batches; the other steps change
    the topics (``do_change``). An error ends the scenario."""
    subst = {"fmt": fmt, **scenario.get("subst", {}).get(fmt, {})}
    steps = substitute(scenario["steps"], subst)
    admin = Admin(spark, bootstrap)
    out: dict = {"runs": []}
    try:
        batch_dfs = {}
        for i, step in enumerate(steps):
            run_fmt = fmt if step.get("format") != "other" else next(f for f in FORMATS if f != fmt)
            if step["do"] == "batch":  # a batch DataFrame, kept for "collect" steps
                batch_dfs[step["df"]] = reader(spark, run_fmt, bootstrap, step, False).load()
                continue
            if step["do"] == "collect":
                out["runs"].append({"format": run_fmt, "rows": rows_of(batch_dfs[step["df"]])})
                continue
            if step["do"] not in ("stream", "stream_write"):
                do_change(spark, admin, bootstrap, step)
                continue
            checkpoint = os.path.join(
                os.getcwd(), "checkpoints", scenario["name"], fmt, step.get("checkpoint", f"run{i}")
            )
            if step["do"] == "stream_write":
                out["runs"].append(
                    {"format": run_fmt, **stream_write(spark, run_fmt, bootstrap, step, checkpoint)}
                )
                continue
            df = reader(spark, run_fmt, bootstrap, step, stream=True).load()
            until = (
                None
                if step.get("trigger", "availableNow") == "availableNow"
                else run_until(spark, admin, bootstrap, step)
            )
            run = run_stream(
                spark,
                df,
                f"{scenario['name']}_{fmt}_{i}".replace("-", "_"),
                step.get("trigger", "availableNow"),
                checkpoint,
                until,
            )
            out["runs"].append({"format": run_fmt, **run})
    except Exception as exc:
        out["error"] = error_of(exc, "steps")
    finally:
        admin.close()
    return out


def in_a_new_thread(action) -> None:
    """``action()`` in a Python thread of its own, never made to know the session (see
    ``activate``); its exception raised here."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def avro_round_trip(spark) -> dict:
    """spark-avro's jar loads: a struct through to_avro and from_avro."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro, to_avro

    schema = json.dumps(
        {
            "type": "record",
            "name": "r",
            "fields": [{"name": "n", "type": "long"}, {"name": "s", "type": "string"}],
        }
    )
    try:
        row = (
            spark.range(1, 2)
            .select(to_avro(F.struct(F.col("id").alias("n"), F.lit("a").alias("s"))).alias("v"))
            .select(from_avro("v", schema).alias("r"))
            .select("r.n", "r.s")
            .first()
        )
        return {"ok": [row[0], row[1]]}
    except Exception as exc:
        return {"error": error_of(exc, "avro")}


def run_scenario(spark, bootstrap: str, scenario: dict) -> dict:
    run = {"write": run_write, "steps": run_steps}.get(scenario["kind"], run_read)
    result = {}
    conf = scenario.get("sql_conf", {})
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        for fmt in scenario.get("formats", FORMATS):
            began = time.monotonic()
            try:
                result[fmt] = run(spark, fmt, bootstrap, scenario)
            except Exception as exc:  # a bug of this child: keep it visible in the result
                result[fmt] = {"error": error_of(exc, "child"), "trace": traceback.format_exc()}
            result[fmt]["seconds"] = round(time.monotonic() - began, 2)
    finally:
        for key in conf:
            spark.conf.unset(key)
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
    spark = session(spec["jars"], spec.get("spark_conf"))
    results = {"_session_seconds": round(time.monotonic() - began, 2)}
    if spec.get("avro", True):
        results["_avro"] = avro_round_trip(spark)
    lock = threading.Lock()

    def run(scenario: dict) -> None:
        activate(spark)
        result = run_scenario(spark, spec["bootstrap"], scenario)
        with lock, open(results_path, "w") as f:  # as it goes: a killed child keeps some
            results[scenario["name"]] = result
            json.dump(results, f)

    alone = [
        s for s in spec["scenarios"] if s.get("stream") or s["kind"] == "steps" or s.get("sql_conf")
    ]
    together = [s for s in spec["scenarios"] if s not in alone]
    with ThreadPoolExecutor(spec.get("threads", 1)) as pool:
        list(pool.map(run, together))
    for scenario in alone:  # streams one at a time, alone (see above)
        run(scenario)
    results["_scenarios_seconds"] = round(time.monotonic() - began, 2)
    gateway = spark.sparkContext._gateway
    spark.stop()  # the Python workers end: their CPU time is the JVM's children's now
    results["_cpu_seconds"] = cpu_seconds(getattr(getattr(gateway, "proc", None), "pid", None))
    with open(results_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
