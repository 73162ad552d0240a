"""The benchmark cases that run through Spark: batch and streaming reads into the ``noop``
sink, ``df.write.format("pykafka")``, and the Python workers' memory during a read."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
import uuid


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.helpers.worker_stats import (  # noqa: E402
    children as _children,
    cmdline as _cmdline,
    python_workers,
    rss_kb as _rss_kb,
)

SAIL_FORMAT = "sailkafka"

# Appended to sail's module: Spark keeps the name "kafka" for its own (JVM) source, and
# sail's schema() answers a pyarrow schema (which Sail takes), Spark wants a StructType (and
# gives reader() a StructType, which sail would compare with its pyarrow schema).
_SAIL_SHIM = """


class SailKafkaBench(KafkaDataSource):
    @classmethod
    def name(cls):
        return {name!r}

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema
        return from_arrow_schema(super().schema())

    def reader(self, schema):
        return super().reader(None)
"""


def start_spark(cores: int, sail_source: str | None = None):
    """A ``local[cores]`` session with the pykafka source registered (and, given the path
    of lakehq/sail's ``kafka.py``, that source registered as format ``sailkafka``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Spark's streaming planner process gets no addPyFile files (see pyspark_pykafka.datasource):
    # the floor source's stream needs this folder on the path Spark's JVM inherits
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if HERE not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([HERE, *paths])
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("pykafka-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", str(cores))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)
    # Spark's own cost of a Python data source (no Kafka): floor_source.py and the data
    # generator it uses, shipped to the workers
    for module in ("bench_data.py", "floor_source.py"):
        spark.sparkContext.addPyFile(os.path.join(HERE, module))
    from floor_source import ClockDataSource, FloorDataSource

    spark.dataSource.register(FloorDataSource)
    spark.dataSource.register(ClockDataSource)
    if sail_source:
        # a module name that does not shadow kafka-python's ``kafka`` package
        folder = tempfile.mkdtemp(prefix="bench-sail-")
        path = os.path.join(folder, "sail_kafka_source.py")
        with open(sail_source) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text + _SAIL_SHIM.format(name=SAIL_FORMAT))
        spark.sparkContext.addPyFile(path)
        sys.path.insert(0, folder)
        import sail_kafka_source

        spark.dataSource.register(sail_kafka_source.SailKafkaBench)
    return spark


def _reader(spark, fmt: str, bootstrap: str, topic: str, extra: dict | None = None):
    reader = (
        spark.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
    )
    for k, v in (extra or {}).items():
        reader = reader.option(k, v)
    return reader.load()


def count(spark, bootstrap: str, ds, fmt: str = "pykafka") -> int:
    return _reader(spark, fmt, bootstrap, ds.topic).count()


def read_noop(spark, bootstrap: str, ds, fmt: str = "pykafka", extra: dict | None = None) -> float:
    """``spark.read.format(fmt)...load()`` written to the ``noop`` sink."""
    start = time.perf_counter()
    df = _reader(spark, fmt, bootstrap, ds.topic, extra)
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def _available_now_into_noop(make_stream, ds, what: str) -> float:
    """Seconds to run ``make_stream()`` (a streaming DataFrame) with Trigger.AvailableNow into
    ``noop``; checks that it read ``ds.records`` rows."""
    checkpoint = tempfile.mkdtemp(prefix="bench-ckpt-")
    try:
        start = time.perf_counter()
        query = (
            make_stream()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        elapsed = time.perf_counter() - start
        if query.exception() is not None:
            raise RuntimeError(f"{what} failed: {query.exception()}")
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        if rows != ds.records:
            raise RuntimeError(f"{what}: {rows} rows, {ds.records} expected")
        return elapsed
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def stream_noop(spark, bootstrap: str, ds) -> float:
    """``readStream`` with Trigger.AvailableNow over the whole topic into ``noop``."""
    return _available_now_into_noop(
        lambda: (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ds.topic)
            .option("includeHeaders", "true")
            .option("startingOffsets", "earliest")
            .load()
        ),
        ds,
        "streaming query",
    )


def floor_stream(spark, ds) -> float:
    """The floor source's rows (as ``floor_read``) as a stream, AvailableNow into noop."""
    return _available_now_into_noop(
        lambda: (
            spark.readStream.format("benchfloor")
            .option("rows", ds.records)
            .option("partitions", len(ds.ends))
            .option("valueSize", ds.value_size)
            .load()
        ),
        ds,
        "floor stream",
    )


def floor_read(spark, ds) -> float:
    """The floor source's rows (same schema, sizes, partitions as ``ds``) into noop."""
    start = time.perf_counter()
    (
        spark.read.format("benchfloor")
        .option("rows", ds.records)
        .option("partitions", len(ds.ends))
        .option("valueSize", ds.value_size)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.perf_counter() - start


def floor_write(df) -> float:
    """``df`` handed to Python tasks that drop the batches."""
    start = time.perf_counter()
    df.write.format("benchfloor").mode("append").save()
    return time.perf_counter() - start


def cached_rows(spark, bootstrap: str, ds):
    """The data set's key/value/headers (offsets below ``ds.ends``) as a DataFrame cached
    in memory."""
    import json

    ending = json.dumps({ds.topic: {str(p): end for p, end in ds.ends.items()}})
    df = _reader(spark, "pykafka", bootstrap, ds.topic, {"endingOffsets": ending})
    df = df.select("key", "value", "headers")
    df = df.cache()
    rows = df.count()
    if rows != ds.records:
        raise RuntimeError(f"cached rows: {rows}, {ds.records} expected")
    return df


def write_pykafka(df, bootstrap: str, topic: str, codec: str) -> float:
    start = time.perf_counter()
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.compression.type", codec)
        .save()
    )
    return time.perf_counter() - start


def tiny_topic(bootstrap: str, partitions: int) -> str:
    """A new topic holding one record (10-byte key, 100-byte value, one header) per
    partition: a stream over it costs what any streaming query costs before its rows."""
    import confluent_kafka

    topic = new_topic(bootstrap, partitions)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        producer.produce(topic, b"v" * 100, b"k" * 10, partition=p, headers=[("h", b"x" * 16)])
    if producer.flush(30):
        raise RuntimeError(f"tiny topic {topic}: records left undelivered")
    return topic


def new_topic(bootstrap: str, partitions: int) -> str:
    from protocol.client.cluster import KafkaClient

    name = f"bench-out-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({name: partitions})
        client.wait_for_topics([name])
    return name


# ---- memory of the Python workers -------------------------------------------------------
# (the /proc helpers are shared with the soak tests: tests/helpers/worker_stats.py)


def _cpu_ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def cpu_snapshot() -> dict[int, tuple[str, int]]:
    """CPU ticks of this process and every descendant, by kind (Spark JVM, Python workers,
    broker, other)."""
    tree = _children()
    out = {os.getpid(): ("driver", _cpu_ticks(os.getpid()))}
    stack = list(tree.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        cmd = _cmdline(pid)
        exe = os.path.basename(cmd.split(" ", 1)[0])
        kind = (
            "jvm"
            if exe == "java"
            else "python workers"
            if "pyspark" in cmd
            else "broker"
            if "tansu" in exe
            else "other"
        )
        out[pid] = (kind, _cpu_ticks(pid))
    return out


def cpu_seconds(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds per kind between two snapshots (processes that ended in between are
    missed; Spark reuses its Python workers, so few do)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid, (kind, ticks) in after.items():
        start = before.get(pid, (kind, 0))[1]
        out[kind] = out.get(kind, 0.0) + (ticks - start) / tick
    return out


class RssSampler:
    """Samples the Python workers' RSS every ``interval`` seconds in a thread; ``peak`` is
    the largest single worker seen, ``peak_total`` the largest sum (MB)."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak = 0.0
        self.peak_total = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sizes = [_rss_kb(pid) / 1024 for pid in python_workers()]
            if sizes:
                self.peak = max(self.peak, max(sizes))
                self.peak_total = max(self.peak_total, sum(sizes))
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def read_memory(spark, bootstrap: str, ds, records: int) -> tuple[float, float, float]:
    """Read the first ``records`` of ``ds`` (spread evenly over its partitions) into noop
    while sampling the workers. Returns (seconds, peak worker MB, peak total MB)."""
    import json

    per = records // len(ds.ends)
    ending = json.dumps({ds.topic: {str(p): min(end, per) for p, end in ds.ends.items()}})
    with RssSampler() as sampler:
        seconds = read_noop(spark, bootstrap, ds, extra={"endingOffsets": ending})
    return seconds, sampler.peak, sampler.peak_total
