"""The child driver of the ``jvm`` section of ``make bench`` (jvm_cases.py): one Spark
driver under PySpark 4.2.0 (the newest Spark whose JVM Kafka connector Maven serves) that
times the same cases through Spark's own ``format("kafka")`` (its jars in ``spark.jars``)
and through ours (``format("pykafka")``, imported from the checkout on PYTHONPATH), in the
same SparkSession, on the same Apache Kafka and the same topics.

Run as ``python jvm_child.py <spec.json> <results.json>`` (``mode`` in the spec:
``bench``, ``first-write`` to time the first ``df.write`` of a fresh session phase by
phase, ``latency`` for the streaming latency of both connectors and of Spark's floor for
a Python streaming source, micro-batch by micro-batch, or ``scale`` for the ``scale``
section's curves: scale_cases.py). Every timed case runs ``warmups`` times per connector
first (the JVM's JIT needs two or three), then ``rounds`` times with the connectors
interleaved; each timed round records the CPU seconds of every process kind (this driver,
Spark's JVM, its Python workers, the broker, whose pid the spec gives). Results are written
as they come, so a killed child keeps some.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _path in (ROOT, HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from streaming_cases import _latency_run  # noqa: E402
from tests.helpers.worker_stats import children, cmdline  # noqa: E402

FORMATS = ("kafka", "pykafka")
CLOCK = "benchclock"  # floor_source.py: a Python streaming source of the clock, no Kafka
LATENCY_SOURCES = ("kafka", "pykafka", CLOCK)
FLOOR = "benchfloor"  # floor_source.py: a Python data source whose write drops the rows


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- the session ---------------------------------------------------------------------------


def session(jars: list[str], cores: int, **conf: str):
    """local[cores] with both connectors, as the main bench's session (4 GB driver);
    ``conf``: more Spark settings."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("pykafka-bench-jvm")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config(map={k.replace("_", "."): v for k, v in conf.items()})
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)
    from floor_source import ClockDataSource, FloorDataSource  # tests/bench is on the path

    spark.dataSource.register(FloorDataSource)
    spark.dataSource.register(ClockDataSource)
    return spark


# ---- CPU by process kind -------------------------------------------------------------------


def _ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def cpu_snapshot(broker_pids: list[int]) -> dict[int, tuple[str, int]]:
    """CPU ticks of this driver, its descendants (Spark's JVM, the Python workers) and the
    broker's JVMs (not our descendants: their pids come from the spec)."""
    tree = children()
    out = {os.getpid(): ("driver", _ticks(os.getpid()))}
    stack = list(tree.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        cmd = cmdline(pid)
        exe = os.path.basename(cmd.split(" ", 1)[0])
        kind = "jvm" if exe == "java" else "python workers" if "pyspark" in cmd else "other"
        out[pid] = (kind, _ticks(pid))
    for pid in broker_pids:
        out[pid] = ("broker", _ticks(pid))
    return out


def cpu_between(before: dict, after: dict) -> dict[str, float]:
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid, (kind, ticks) in after.items():
        out[kind] = out.get(kind, 0.0) + (ticks - before.get(pid, (kind, 0))[1]) / tick
    return {k: round(v, 3) for k, v in out.items()}


class Recorder:
    """Seconds and CPU per (case, connector), one entry per timed round, saved to
    ``path`` after each."""

    def __init__(self, path: str, broker_pids: list[int], out: dict):
        self.path, self.broker_pids, self.out = path, broker_pids, out
        out.setdefault("cases", {})

    def save(self) -> None:
        with open(self.path, "w") as f:
            json.dump(self.out, f)

    def timed(self, case: str, fmt: str, records: int, fn, *, keep: bool = True) -> float:
        before = cpu_snapshot(self.broker_pids)
        seconds = fn()
        cpu = cpu_between(before, cpu_snapshot(self.broker_pids))
        if keep:
            entry = (
                self.out["cases"]
                .setdefault(case, {})
                .setdefault(fmt, {"records": records, "seconds": [], "cpu": []})
            )
            entry["seconds"].append(round(seconds, 4))
            entry["cpu"].append(cpu)
            self.save()
        log(
            f"  {case:<22} {fmt:<8} {'' if keep else '(warm-up) '}{seconds:7.2f} s "
            f"{records / seconds:12,.0f} records/s  load {os.getloadavg()[0]:.1f}"
        )
        return seconds

    def case(self, case: str, records: int, runs: dict, warmups: int, rounds: int) -> None:
        """``runs[fmt]()`` -> seconds: warm-ups for each connector, then interleaved rounds
        (the order flips every round, so neither always goes first)."""
        fmts = list(runs)
        for fmt in fmts:
            for _ in range(warmups):
                self.timed(case, fmt, records, runs[fmt], keep=False)
        for r in range(rounds):
            for fmt in fmts if r % 2 == 0 else fmts[::-1]:
                self.timed(case, fmt, records, runs[fmt])


# ---- the cases -----------------------------------------------------------------------------


def reader(spark, fmt: str, bootstrap: str, topic: str, stream: bool = False, **options):
    read = spark.readStream if stream else spark.read
    r = read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def noop(make_df) -> float:
    """Seconds to define the DataFrame (``load()``) and write it to ``noop``."""
    t = time.perf_counter()
    make_df().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t


def read_noop(spark, fmt, bootstrap, topic) -> float:
    return noop(lambda: reader(spark, fmt, bootstrap, topic).load())


def stream_available_now(spark, fmt, bootstrap, topic, records) -> float:
    """readStream from the earliest offsets with Trigger.AvailableNow into noop."""
    checkpoint = tempfile.mkdtemp(prefix="bench-jvm-ckpt-")
    try:
        t = time.perf_counter()
        query = (
            reader(spark, fmt, bootstrap, topic, stream=True, startingOffsets="earliest")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - t
        if query.exception() is not None:
            raise RuntimeError(f"{fmt} stream failed: {query.exception()}")
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        if rows != records:
            raise RuntimeError(f"{fmt} stream: {rows} rows, {records} expected")
        return seconds
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def new_topic(bootstrap: str, partitions: int, prefix: str = "bench-jvm-out") -> str:
    from protocol.client.cluster import KafkaClient

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({name: partitions})
        client.wait_for_topics([name])
        client.latest_offsets([(name, p) for p in range(partitions)])  # leaders ready
    return name


def generated_rows(spark, records: int, partitions: int):
    """``records`` rows of a 10-byte key and a 100-byte value made by ``spark.range`` and
    cached in memory: neither connector's code made them, and neither is warmed by them."""
    df = (
        spark.range(records, numPartitions=partitions)
        .selectExpr(
            "CAST(lpad(CAST(id AS STRING), 10, '0') AS BINARY) AS key",
            "CAST(rpad(CAST(id AS STRING), 100, 'x') AS BINARY) AS value",
        )
        .cache()
    )
    rows = df.count()
    if rows != records:
        raise RuntimeError(f"cached rows: {rows}, {records} expected")
    return df


def write(df, fmt: str, bootstrap: str, partitions: int, **options) -> float:
    """``df.write`` to a new topic of ``partitions`` (created outside the clock);
    ``options``: more writer options (``kafka.compression.type``...), both connectors'."""
    if fmt == FLOOR:
        t = time.perf_counter()
        df.write.format(FLOOR).mode("append").save()
        return time.perf_counter() - t
    topic = new_topic(bootstrap, partitions)
    t = time.perf_counter()
    w = (
        df.write.format(fmt)
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
    )
    for k, v in options.items():
        w = w.option(k, v)
    w.save()
    return time.perf_counter() - t


def with_header(df):
    """The rows with one header each (a 6-byte key, an 8-byte value), cached: the
    ``headers`` column both connectors write."""
    out = df.selectExpr(
        "key",
        "value",
        "array(named_struct('key', 'source', 'value', "
        "CAST(lpad(CAST(length(value) AS STRING), 8, '0') AS BINARY))) "
        "AS headers",
    ).cache()
    out.count()
    return out


def activate(spark) -> None:
    """Our sink is looked up in the active session (per thread: see jvm_referee_child)."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def registry_read(spark, bootstrap: str, topic: str, url: str, fmt: str):
    """The timed run of ours reading ``topic``'s registry values with ``valueFormat=fmt``
    into the value struct, into noop."""
    return lambda: noop(
        lambda: (
            reader(
                spark, "pykafka", bootstrap, topic, valueFormat=fmt, **{"schema.registry.url": url}
            )
            .load()
            .select("value")
        )
    )


def avro_runs(spark, bootstrap: str, avro: dict) -> dict:
    """Registry Avro into the value struct: ours with valueFormat=avro; Spark's with
    ``from_avro`` over the value minus its 5-byte Confluent header; both raw (binary)."""
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import expr

    topic, url, schema = avro["topic"], avro["registry_url"], avro["schema"]

    ours = registry_read(spark, bootstrap, topic, url, "avro")

    def theirs():
        return noop(
            lambda: (
                reader(spark, "kafka", bootstrap, topic)
                .load()
                .select(
                    from_avro(expr("substring(value, 6, length(value) - 5)"), schema).alias("value")
                )
            )
        )

    def raw(fmt):
        return lambda: noop(lambda: reader(spark, fmt, bootstrap, topic).load().select("value"))

    def floor(**options):
        # Spark's floor: the same number of values as ready Arrow batches, no Kafka, no
        # decoding: typed columns (shape=avro) against one binary column (the raw read's)
        def run():
            r = spark.read.format(FLOOR).option("rows", avro["records"])
            for k, v in options.items():
                r = r.option(k, v)
            return noop(lambda: r.load().select("value"))

        return run

    return {
        "decoded": {"pykafka": ours, "kafka": theirs, FLOOR: floor(shape="avro")},
        "raw": {
            "pykafka": raw("pykafka"),
            "kafka": raw("kafka"),
            FLOOR: floor(valueSize=avro.get("value_size", 40), headers="false"),
        },
    }


def json_runs(spark, bootstrap: str, case: dict) -> dict:
    """Registry JSON Schema into the value struct: ours with valueFormat=json; Spark's with
    ``from_json`` and the schema given (``case["ddl"]``, what ours maps the registry's
    schema to) over the value minus its 5-byte Confluent header, as a string."""
    from pyspark.sql.functions import expr, from_json

    topic, url = case["topic"], case["registry_url"]

    ours = registry_read(spark, bootstrap, topic, url, "json")

    def theirs():
        text = expr("cast(substring(value, 6, length(value) - 5) as string)")
        return noop(
            lambda: (
                reader(spark, "kafka", bootstrap, topic)
                .load()
                .select(from_json(text, case["ddl"]).alias("value"))
            )
        )

    return {"pykafka": ours, "kafka": theirs}


def protobuf_runs(spark, bootstrap: str, case: dict) -> dict:
    """Registry Protobuf into the value struct: ours with valueFormat=protobuf; the JVM
    connector's raw read of the same topic beside it (``from_protobuf`` needs the
    spark-protobuf jar, which Maven does not serve here), which ``from_protobuf`` could only
    be slower than."""
    topic, url = case["topic"], case["registry_url"]

    ours = registry_read(spark, bootstrap, topic, url, "protobuf")

    def raw():
        return noop(lambda: reader(spark, "kafka", bootstrap, topic).load().select("value"))

    return {"pykafka": ours, "kafka": raw}


def formats_mode(spec: dict, results_path: str) -> None:
    """Only the registry value formats' cases (Avro and JSON Schema beside Spark's
    ``from_avro`` and ``from_json``, Protobuf beside the JVM connector's raw read):
    ``make bench``'s jvm section runs them after the others; alone, for a quick look at the
    decoders."""
    out: dict = {}
    rec = Recorder(results_path, spec["broker_pids"], out)
    spark = session(spec["jars"], spec["cores"])
    activate(spark)
    import pyspark

    out["spark"] = pyspark.__version__
    registry_cases(spark, spec, rec)
    out["load_at_end"] = "%.2f %.2f %.2f" % os.getloadavg()
    rec.save()
    spark.stop()


def registry_cases(spark, spec: dict, rec) -> None:
    bootstrap, warmups, rounds = spec["bootstrap"], spec["warmups"], spec["rounds"]
    avro = spec.get("avro")
    if avro:
        runs = avro_runs(spark, bootstrap, avro)
        rec.case("avro decoded", avro["records"], runs["decoded"], warmups, rounds)
        rec.case("avro raw", avro["records"], runs["raw"], warmups, rounds)
    js = spec.get("json")
    if js:
        rec.case("json decoded", js["records"], json_runs(spark, bootstrap, js), warmups, rounds)
    pb = spec.get("protobuf")
    if pb:
        runs = protobuf_runs(spark, bootstrap, pb)
        rec.case("protobuf decoded", pb["records"], runs, warmups, rounds)


# ---- streaming latency ---------------------------------------------------------------------


class SteadyProducer:
    """``rate`` records a second, round robin over the partitions, each alone in its record
    batch, its value the send time (``time.time()`` as text), from a thread: our protocol
    client, acks=1 (PySpark 4.2's env has no other client)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float):
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import pyarrow as pa

        from protocol.client.cluster import KafkaClient
        from protocol.records import encode_batch

        period = 1.0 / self.rate
        try:
            with KafkaClient(bootstrap_servers=self.bootstrap) as client:
                next_at = time.monotonic()
                while not self._stop.is_set():
                    blob = encode_batch(None, pa.array([b"%.6f" % time.time()], pa.binary()))
                    answer = client.produce(self.topic, self.sent % self.partitions, blob, acks=1)
                    if answer["error_code"]:
                        raise RuntimeError(f"produce failed: {answer}")
                    self.sent += 1
                    next_at += period
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise RuntimeError(f"the steady producer failed: {self.error}")


def latency_run(
    spark,
    fmt: str,
    bootstrap: str,
    topic: str,
    warmup: float,
    seconds: float,
    broker_pids: list[int],
    partitions: int = 4,
    rate: float = 400,
) -> dict:
    """readStream (default trigger, latest offsets) into foreachBatch, timed as the streaming
    section times it (``streaming_cases._latency_run``), with the CPU of every process over
    the measured seconds. ``fmt`` CLOCK is Spark's floor: a Python streaming source of the
    same rows with no Kafka (its offsets are the clock)."""

    def cpu_over_the_window():
        before = cpu_snapshot(broker_pids)
        return lambda: cpu_between(before, cpu_snapshot(broker_pids))

    if fmt == CLOCK:
        stream = (
            spark.readStream.format(CLOCK)
            .option("partitions", partitions)
            .option("rate", rate)
            .load()
        )
    else:
        stream = reader(spark, fmt, bootstrap, topic, stream=True).load()
    res = _latency_run(spark, stream, warmup, seconds, measure=cpu_over_the_window)
    res["cpu"] = res.pop("measured")
    return res


def our_micro_batch_parts(bootstrap: str, topic: str, rounds: int = 20) -> dict:
    """Our source's part of one micro-batch, timed in this driver against the running
    producer (medians): the driver's ``latestOffset`` and ``partitions`` (the planning our
    code does), one task's ``read_range`` of its range (fetch + decode, with its own
    connections; one task reads every range of a small micro-batch), a bare Fetch of the
    same offsets by a client already connected (what of it is the broker and the network),
    and the number of tasks of a micro-batch."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kafka_source.fetcher import read_range
    from kafka_source.options import parse_reader_options
    from kafka_source.stream_reader import KafkaStreamReader
    from protocol.client.cluster import KafkaClient

    options = parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, for_streaming=True
    )
    source = KafkaStreamReader(options)
    start = source.latestOffset(source.initialOffset(), ReadAllAvailable())
    latest, plan, read, fetch, tasks = [], [], [], [], []
    try:
        with KafkaClient(bootstrap_servers=bootstrap) as client:
            for _ in range(rounds):
                time.sleep(0.25)
                t0 = time.perf_counter()
                end = source.latestOffset(start, ReadAllAvailable())
                t1 = time.perf_counter()
                ranges = source.partitions(start, end)
                latest.append(t1 - t0)
                plan.append(time.perf_counter() - t1)
                if ranges:
                    tasks.append(len(ranges))
                    t2 = time.perf_counter()
                    for r in ranges[0].ranges:  # what the first task reads
                        for _ in read_range(options, r):
                            pass
                    read.append(time.perf_counter() - t2)
                    t3 = time.perf_counter()
                    for r in ranges[0].ranges:
                        client.fetch({(r.topic, r.partition): r.start}, max_wait_ms=0)
                    fetch.append(time.perf_counter() - t3)
                start = end
    finally:
        source.stop()
    med = statistics.median
    return {
        "latest_ms": med(latest) * 1000,
        "partitions_ms": med(plan) * 1000,
        "read_range_ms": med(read) * 1000 if read else None,
        "fetch_ms": med(fetch) * 1000 if fetch else None,
        "tasks": med(tasks) if tasks else None,
    }


# ---- the first write of a session ----------------------------------------------------------


def first_write_profile(spec: dict) -> dict:
    """A fresh session's first ``df.write.format("pykafka")`` and the ones after, with a
    timestamp per phase: the session, the rows cached, the first Python data source query
    of any kind, the driver's part of a write (the Python planner that builds the writer)
    and the tasks' part (timed inside a task by a marker Spark cannot see: the difference
    between a write and a write of zero rows)."""
    bootstrap, records, partitions = spec["bootstrap"], spec["records"], spec["partitions"]
    out: dict = {"phases": []}

    def mark(what: str, began: float) -> None:
        out["phases"].append((what, round(time.perf_counter() - began, 3)))
        log(f"  first write: {what}: {out['phases'][-1][1]:.2f} s")

    t = time.perf_counter()
    spark = session(spec["jars"], spec["cores"])
    mark("SparkSession", t)
    t = time.perf_counter()
    df = generated_rows(spark, records, partitions)
    mark(f"{records:,} rows cached", t)
    trace = trace_module()
    order = spec.get("order", ["pykafka", "pykafka", "pykafka"])
    for i, fmt in enumerate(order):
        t = time.perf_counter()
        trace.emit(f"driver: write {i + 1} ({fmt}) begin")
        write(df, fmt, bootstrap, partitions)
        trace.emit(f"driver: write {i + 1} ({fmt}) end")
        mark(f"write {i + 1} ({fmt})", t)
    t = time.perf_counter()
    write(df.limit(0), "pykafka", bootstrap, partitions)
    mark("write of zero rows (pykafka)", t)
    spark.stop()
    out["trace"] = read_trace()
    return out


class _NoTrace:
    @staticmethod
    def emit(event: str) -> None:
        pass


def trace_module():
    """first_write_trace/sitecustomize.py when this driver runs with it, else a stand-in."""
    if not os.environ.get("PYKAFKA_WRITE_TRACE"):
        return _NoTrace
    import sitecustomize

    return sitecustomize if hasattr(sitecustomize, "emit") else _NoTrace


def read_trace() -> list:
    path = os.environ.get("PYKAFKA_WRITE_TRACE")
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda e: e[0])


def latency_mode(spec: dict, results_path: str) -> None:
    """The streaming latency of the JVM connector, ours and Spark's floor for a Python
    streaming source (the clock, no Kafka), ``runs`` times each, interleaved (the order
    turns each run), in one session of their own whose Python processes trace themselves
    (stream_trace/sitecustomize.py); each micro-batch's phases are kept, so the slowest can
    be told apart from the median (jvm_cases.slowest_micro_batches)."""
    out: dict = {"latency": {fmt: [] for fmt in LATENCY_SOURCES}}
    rec = Recorder(results_path, spec["broker_pids"], out)
    lat, bootstrap = spec["latency"], spec["bootstrap"]
    spark = session(
        spec["jars"], spec["cores"], spark_sql_streaming_numRecentProgressUpdates="100000"
    )
    activate(spark)
    producer = SteadyProducer(bootstrap, lat["topic"], lat["partitions"], lat["rate"]).start()
    try:
        for r in range(lat["runs"]):
            k = r % len(LATENCY_SOURCES)
            for fmt in LATENCY_SOURCES[k:] + LATENCY_SOURCES[:k]:
                log(
                    f"latency {fmt}: {lat['rate']:.0f} records/s, {lat['warmup']:.0f} s "
                    f"warm-up + {lat['seconds']:.0f} s (run {r + 1} of {lat['runs']})"
                )
                res = latency_run(
                    spark,
                    fmt,
                    bootstrap,
                    lat["topic"],
                    lat["warmup"],
                    lat["seconds"],
                    spec["broker_pids"],
                    lat["partitions"],
                    lat["rate"],
                )
                out["latency"][fmt].append(res)
                log(
                    f"  {fmt}: p50 {res['p50'] * 1000:.0f} ms, p99 {res['p99'] * 1000:.0f}"
                    f" ms, {res['per_second']:.2f} micro-batches/s"
                )
                rec.save()
        out["our_parts"] = our_micro_batch_parts(bootstrap, lat["topic"])
        log(f"  our micro-batch parts: {out['our_parts']}")
    finally:
        producer.stop()
    rec.save()
    spark.stop()


# ---- scale (issue 41, scale_cases.py) -------------------------------------------------------


def read_with(spark, fmt: str, bootstrap: str, options: dict):
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _reset_peaks(pids) -> None:
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")  # the peak RSS (VmHWM) starts again from the RSS now
        except OSError:
            pass


def _peak_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed_read(
    spark, fmt: str, bootstrap: str, options: dict, rows: int | None, peaks: list | None = None
) -> float:
    """``load()`` into noop, timed; the rows checked where ``rows`` is given (a count
    outside the clock); ``peaks`` gets the Python workers' peak RSS of the run (kB, each
    forked worker's), for ours."""
    from tests.helpers.worker_stats import forked_workers

    if peaks is not None:
        _reset_peaks(forked_workers())
    seconds = noop(lambda: read_with(spark, fmt, bootstrap, options))
    if peaks is not None:
        peaks.append(sorted((_peak_kb(pid) for pid in forked_workers()), reverse=True))
    if rows is not None:
        got = read_with(spark, fmt, bootstrap, options).count()
        if got != rows:
            raise RuntimeError(f"{fmt} read {got} rows of {options}, {rows} expected")
    return seconds


def stream_durations(
    spark,
    fmt: str,
    bootstrap: str,
    topic: str,
    warmup: float,
    seconds: float,
    options: dict | None = None,
) -> dict:
    """A readStream (default trigger, from latest) into noop for ``warmup + seconds``: the
    ``triggerExecution`` duration of every micro-batch with rows after the warm-up."""
    checkpoint = tempfile.mkdtemp(prefix="bench-scale-ckpt-")
    r = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in (options or {"subscribe": topic}).items():
        r = r.option(k, v)
    query = r.load().writeStream.format("noop").option("checkpointLocation", checkpoint).start()
    try:
        time.sleep(warmup)
        first = (query.lastProgress or {}).get("batchId", -1)
        time.sleep(seconds)
        if query.exception() is not None:
            raise RuntimeError(f"{fmt} stream failed: {query.exception()}")
        window = [p for p in query.recentProgress if p["batchId"] > first]
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    progress = [p for p in window if p["numInputRows"] > 0]
    durations = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress]
    # the rate the stream took in over the window (the producer's, if it kept up)
    return {
        "durations": durations,
        "rows": [p["numInputRows"] for p in progress],
        "rate": sum(p["numInputRows"] for p in window) / seconds,
    }


def scale_mode(spec: dict, results_path: str) -> None:
    """The ``scale`` section's points (scale_cases.py): each read point through ours and
    through the JVM connector (on a sample of its partitions where the whole would take
    longer than the budget: ``jvm_options``, ``jvm_share``), then each micro-batch point
    under a steady producer (a child of the bench's own Python)."""
    import subprocess

    out: dict = {"reads": {}, "streams": {}, "peaks": {}}
    rec = Recorder(results_path, spec["broker_pids"], out)
    bootstrap = spec["bootstrap"]
    spark = session(
        spec["jars"], spec["cores"], spark_sql_streaming_numRecentProgressUpdates="100000"
    )
    activate(spark)
    import pyspark

    out["spark"] = pyspark.__version__
    for point in spec["reads"]:
        case = point["case"]
        log(f"scale {case}: {point['records']:,} records")
        peaks = out["peaks"].setdefault(case, [])
        runs = {
            "pykafka": (
                lambda p=point: timed_read(spark, "pykafka", bootstrap, p["options"], None, peaks)
            )
        }
        if point.get("jvm", True):
            runs["kafka"] = lambda p=point: timed_read(
                spark, "kafka", bootstrap, p.get("jvm_options") or p["options"], None
            )
        # correctness outside the clock: every record, through each connector
        timed_read(spark, "pykafka", bootstrap, point["options"], point["records"])
        rec.case(case, point["records"], runs, point.get("warmups", 1), point.get("rounds", 1))
        out["reads"][case] = {k: v for k, v in point.items() if k != "options"}
        rec.save()
    for point in spec["streams"]:
        case = point["case"]
        producer = subprocess.Popen(
            [
                spec["producer_python"],
                os.path.join(HERE, "steady_producer.py"),
                bootstrap,
                point["topic"],
                str(point["partitions"]),
                str(point["rate"]),
            ],
            stdin=subprocess.PIPE,
        )
        try:
            results = {}
            # FLOOR: Spark's clock source with offsets shaped as ours over the same
            # partitions and the same rows in one task, beside the same producer's load
            floor = {
                "partitions": str(point["partitions"]),
                "rate": str(point["rate"]),
                "offsets": "kafka",
            }
            for fmt in ["pykafka", FLOOR] + (["kafka"] if point.get("jvm", True) else []):
                options = (
                    point.get("jvm_options") if fmt == "kafka" else floor if fmt == FLOOR else None
                )
                log(
                    f"scale {case} {fmt}: {point['rate']} records/s, {point['warmup']:.0f} s "
                    f"warm-up + {point['seconds']:.0f} s"
                )
                results[fmt] = stream_durations(
                    spark,
                    "benchclock" if fmt == FLOOR else fmt,
                    bootstrap,
                    point["topic"],
                    point["warmup"],
                    point["seconds"],
                    options,
                )
                d = results[fmt]["durations"]
                log(
                    f"  {fmt}: {len(d)} micro-batches with rows, median "
                    f"{statistics.median(d) if d else float('nan'):.2f} s"
                )
            out["streams"][case] = {**point, "results": results}
        finally:
            producer.stdin.close()
            producer.wait(30)
        rec.save()
    out["load_at_end"] = "%.2f %.2f %.2f" % os.getloadavg()
    rec.save()
    spark.stop()


def main(spec_path: str, results_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    if spec.get("mode") == "scale":
        scale_mode(spec, results_path)
        return
    if spec.get("mode") == "first-write":
        with open(results_path, "w") as f:
            json.dump(first_write_profile(spec), f)
        return
    if spec.get("mode") == "latency":
        latency_mode(spec, results_path)
        return
    if spec.get("mode") == "formats":
        formats_mode(spec, results_path)
        return
    out: dict = {}
    rec = Recorder(results_path, spec["broker_pids"], out)
    bootstrap, warmups, rounds = spec["bootstrap"], spec["warmups"], spec["rounds"]
    t = time.perf_counter()
    spark = session(spec["jars"], spec["cores"])
    activate(spark)
    out["session_s"] = round(time.perf_counter() - t, 2)
    import pyspark

    out["spark"] = pyspark.__version__

    # df.write first: the first write of each connector in this session (the first query
    # of either connector), timed apart
    w = spec["write"]
    df = generated_rows(spark, w["records"], w["partitions"])
    out["first_write"] = {}
    for fmt in ("pykafka", "kafka"):
        out["first_write"][fmt] = round(write(df, fmt, bootstrap, w["partitions"]), 3)
        log(f"  first write of the session, {fmt}: {out['first_write'][fmt]:.2f} s")
    rec.save()
    rec.case(
        "write",
        w["records"],
        {
            fmt: (lambda fmt=fmt: write(df, fmt, bootstrap, w["partitions"]))
            for fmt in (*FORMATS, FLOOR)
        },
        warmups,
        rounds,
    )
    rec.case(
        "write lz4",
        w["records"],
        {
            fmt: (
                lambda fmt=fmt: write(
                    df, fmt, bootstrap, w["partitions"], **{"kafka.compression.type": "lz4"}
                )
            )
            for fmt in FORMATS
        },
        warmups,
        rounds,
    )
    headed = with_header(df)
    rec.case(
        "write headers",
        w["records"],
        {
            fmt: (lambda fmt=fmt: write(headed, fmt, bootstrap, w["partitions"]))
            for fmt in (*FORMATS, FLOOR)
        },
        warmups,
        rounds,
    )
    headed.unpersist()
    df.unpersist()

    for ds in spec["reads"]:
        log(f"read {ds['name']}: {ds['records']:,} records, topic {ds['topic']}")
        runs = {
            fmt: (lambda fmt=fmt: read_noop(spark, fmt, bootstrap, ds["topic"])) for fmt in FORMATS
        }
        if ds.get("floor"):  # Spark's floor for a Python source: the same rows, no Kafka
            runs[FLOOR] = lambda ds=ds: noop(
                lambda: (
                    spark.read.format(FLOOR)
                    .option("rows", ds["records"])
                    .option("partitions", ds["partitions"])
                    .option("valueSize", ds["value_size"])
                    .option("headers", "false")
                    .load()
                )
            )
        rec.case(f"read {ds['name']}", ds["records"], runs, warmups, rounds)
    ds = spec["reads"][0]
    rec.case(
        "stream AvailableNow",
        ds["records"],
        {
            fmt: (
                lambda fmt=fmt: stream_available_now(
                    spark, fmt, bootstrap, ds["topic"], ds["records"]
                )
            )
            for fmt in FORMATS
        },
        max(1, warmups - 1),
        rounds,
    )

    registry_cases(spark, spec, rec)

    out["load_at_end"] = "%.2f %.2f %.2f" % os.getloadavg()
    rec.save()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
