"""``make bench``: pyspark-pykafka side by side with the Python clients users would pick
instead (confluent-kafka, aiokafka, kafka-python: peers.py, each configured for throughput
as its documentation says, every setting with its reason), on data sets produced once to a
Tansu broker.

    .venv/bin/python tests/bench/run.py [--scale 1.0] [--rounds 3] [--cores 2]
        [--only wire,decode,read,stream,write,memory,scale,streaming,avro,jvm,pyfiles,racks,
                formats]
        [--sail-source PATH/kafka.py]
        [--output tests/bench/results.md | --no-output]

Cases (every case runs once per round; rounds interleave the contenders so a busy machine
slows them alike; the table shows medians, the spread (max - min) / median and ratios
taken within each round). Every read and decode is measured twice: without the headers
column (Spark's default, ``includeHeaders=false``) and with it; every contender builds the
same Arrow columns (the pykafka reader's schema), each its fastest way.

1. wire limit: the topic's record bytes fetched with no decoding, pipelined, with the
   reader's fetch sizes, over ``--cores`` processes (one task per partition, as Spark
   runs them) -- the ceiling for the read figures;
2. decode, one core, the same Fetch bytes in memory: pykafka's Fetch-bytes -> Arrow decoder;
   kafka-python's ``MemoryRecords`` -> Python values -> Arrow (on a sample, it is slow).
   The clients cannot be handed bytes otherwise: their read rows below (fetching included,
   by their own threads where they have them) are the decoder's peers;
3. read end to end: ``spark.read.format("pykafka")`` into the ``noop`` sink on
   ``local[cores]``; pykafka's task code alone in one process; each peer's consumer ->
   Arrow in one process (kafka-python on the first ``--kafka-python-records`` records);
   lakehq/sail's confluent-kafka based Python data source when its file is given (it is
   not in a pysail release yet);
4. streaming: ``readStream`` with Trigger.AvailableNow into ``noop``, next to the same
   rows from a Python streaming source of ready Arrow batches (Spark's own streaming
   floor: its per-query and per-micro-batch cost with nothing to look up or decode);
5. write: ``df.write.format("pykafka")`` of a cached DataFrame and each peer's producer
   loop over the same rows (idempotent where the peer can be, acks=all), without and with
   a header per row; aiokafka and kafka-python on the first ``--slow-write-records`` rows
   and uncompressed only (they are 4-10x slower);
6. memory: peak RSS of Spark's Python workers during reads of two sizes;
7. scale: how a read's cost grows with the work: ``spark.read`` into ``noop`` of 1, 4 and 16
   partitions (``--scale-records`` records, 2 M by default) and of a quarter and four
   times that many records (0.5 M and 8 M, from 4 partitions), with the workers' peak RSS
   and the driver's planning time of each, and the planning of a topic of
   ``--wide-partitions`` partitions (batch read and one micro-batch), timed in this
   process (``--only scale`` runs this section alone); and beside Spark's JVM connector in
   one run (issue 41, scale_cases.py, the jvm section's child driver on Apache Kafka): a
   read of one topic of 4 -> 10,000 partitions, of 1 -> 1,000 topics under a pattern, of
   100 B -> 8 MB values (bytes/s, with our workers' peak RSS), and a micro-batch's duration
   at 1,000 records/s over 4 -> 10,000 partitions, drawn as curves into docs/images/
   (``--scale-points quick`` for reduced points, ``--scale-parts jvm`` for this part
   alone; its table is results.md's ``scale`` block);
8. streaming (issue 22, streaming_cases.py): a readStream with the default trigger into
   foreachBatch under a steady produce rate, latency p50/p99 and micro-batches per second
   against a Python streaming source that reads no Kafka (the readStream once on Tansu and
   once on librdkafka's mock cluster, with the brokers' own time for the requests a
   micro-batch makes), and the new broker connections (counted by a TCP proxy) and
   producer ids per micro-batch of a readStream and a writeStream. ``--only streaming``
   runs this section alone (about 4 min) and rewrites only its block of results.md.
9. avro: Schema Registry Avro values decoded by ``spark.read`` with ``valueFormat=avro``,
   by confluent-kafka's consumer with its ``AvroDeserializer`` into the same Arrow
   column, and by fastavro in a Python UDF (``udf`` and ``arrow_udf``), next to the same
   read with ``valueFormat=binary`` and Spark's floor for a Python source of these
   columns; wall and CPU seconds, and the fixed cost of a query (``avro_cases.py``;
   ``--avro-records``).
10. jvm (issue 30, jvm_cases.py): Spark's own JVM connector (``format("kafka")``) beside
   ours in one SparkSession under PySpark 4.2.0 (a child in its own venv, the connector's
   jars from Maven) on Apache Kafka: batch reads (100 B, 1 KB, lz4, zstd), df.write (the
   first write of the session apart), readStream AvailableNow, streaming latency, registry
   Avro against ``from_avro``; CPU per process kind; the issue's goals. ``--only jvm
   --scale 0.25`` runs this section alone and rewrites only its block of results.md.
11. pyfiles (issue 38, pyfiles_cases.py): the connector shipped with ``spark-submit
   --py-files`` (the zip, with its compiled record decoder and encoder) against the same
   connector installed, same Python, ``local[cores]``: a ``spark.read`` into ``noop`` and a
   ``df.write`` of ``--pyfiles-records`` records, the two alternated twice
   (``--pyfiles-rounds`` rounds each time); ratios zip / installed, the Python workers' CPU,
   and the goal (>= 0.9x). ``--only pyfiles`` runs this section alone (about
   3 min) and rewrites only its block of results.md.
12. racks (rack_cases.py): reading from the nearest replica (``kafka.client.rack``) on
   Apache Kafka, 3 nodes in 3 racks, a topic of 6 partitions x 3 replicas of
   ``--racks-records`` 1 KB records: the reader's task code reads it without and with the
   rack of one node, each run's bytes from each broker (the brokers' request logs) and
   records/s. ``--only racks`` runs this section alone and rewrites only its block.
13. formats (bench_proto_json.py): the JSON Schema value decoder on one core in this
   process, its pure path (what runs without Arrow's JSON reader) beside its default path,
   within one run. ``--only formats`` runs this section alone and rewrites only its block.

The peers' settings and the reason for each are printed in results.md ("Peer settings");
``tune_peers.py`` measures the candidates tried (``peer_tuning.md``). Nothing here is a
test: no figure is asserted. pytest does not collect these files (no ``test_*.py`` names).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import multiprocessing
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

import pyarrow as pa  # noqa: E402

import cases  # noqa: E402
import peers  # noqa: E402
import result_blocks  # noqa: E402
from bench_data import DataSet, produce  # noqa: E402

SECTIONS = (
    "wire",
    "decode",
    "read",
    "stream",
    "write",
    "memory",
    "scale",
    "streaming",
    "avro",
    "jvm",
    "pyfiles",
    "racks",
    "formats",
)
# sections that make their own topics (the data sets are not produced for them alone)
OWN_TOPICS = {"scale", "streaming", "avro", "jvm", "pyfiles", "racks", "formats"}

# Goals the issue set (reported, never asserted).
GOAL_READ_WORKER_CPU = 0.5  # Python worker CPU s per M records of a Spark read (100B)
GOAL_WRITE_WORKER_CPU = 0.8  # the same for df.write
GOAL_DECODE_HEADERS = 2.5e6  # records/s on one core, 100-byte records with one header
GOAL_DECODE_PLAIN = 4e6  # the same without headers
GOAL_READ_VS_FLOOR = 0.85  # spark.read with headers / Spark's read floor, every data set
GOAL_WRITE_VS_FLOOR = 0.7  # df.write with a header / Spark's write floor
GOAL_STREAM_VS_BATCH = 0.75  # "close most of" the 0.5x gap between streaming and batch
GOAL_WIDE_PLANNING = 1.0  # seconds to plan a read of 1,000 partitions ("well under")
GOAL_MEMORY_GROWTH = 1.25  # peak worker RSS at the larger read / at the smaller one


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Results:
    """Seconds per (case, data set), one entry per round."""

    def __init__(self):
        self.seconds: dict[tuple[str, str], list[float]] = {}
        self.records: dict[tuple[str, str], int] = {}
        self.cpu: dict[tuple[str, str], list[dict]] = {}

    def add(self, case: str, ds: DataSet, seconds: float, records: int | None = None) -> None:
        self.seconds.setdefault((case, ds.name), []).append(seconds)
        self.records[(case, ds.name)] = ds.records if records is None else records

    def has(self, case: str, ds: DataSet) -> bool:
        return (case, ds.name) in self.seconds

    def rates(self, case: str, ds: DataSet) -> list[float]:
        n = self.records[(case, ds.name)]
        return [n / s for s in self.seconds[(case, ds.name)]]

    def median(self, case: str, ds: DataSet) -> float:
        return statistics.median(self.rates(case, ds))

    def spread(self, case: str, ds: DataSet) -> float:
        r = self.rates(case, ds)
        return (max(r) - min(r)) / statistics.median(r)

    def ratio(self, case: str, other: str, ds: DataSet) -> float | None:
        """Median over rounds of case's rate / other's rate in the same round."""
        if not (self.has(case, ds) and self.has(other, ds)):
            return None
        a, b = self.rates(case, ds), self.rates(other, ds)
        return statistics.median(x / y for x, y in zip(a, b))


def timed_round(
    results: Results, case: str, ds: DataSet, fn, records: int | None = None, cpu: bool = False
):
    if cpu:
        from spark_cases import cpu_seconds, cpu_snapshot

        before = cpu_snapshot()
    seconds = fn()
    if cpu:
        results.cpu.setdefault((case, ds.name), []).append(cpu_seconds(before, cpu_snapshot()))
    results.add(case, ds, seconds, records)
    n = ds.records if records is None else records
    log(f"  {case:<38} {ds.name:<10} {seconds:7.2f} s  {n / seconds:12,.0f} records/s")


# ---- the run ------------------------------------------------------------------------------


def data_sets(scale: float, partitions: int) -> list[DataSet]:
    def n(records: int) -> int:
        return max(partitions * 2, int(records * scale))

    return [
        DataSet("100B", n(2_000_000), 100, "none", partitions),
        DataSet("100B-lz4", n(500_000), 100, "lz4", partitions),
        DataSet("100B-zstd", n(500_000), 100, "zstd", partitions),
        DataSet("1KB", n(125_000), 1000, "none", partitions),
    ]


def machine() -> dict:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import aiokafka
    import confluent_kafka
    import kafka
    import pyspark

    info = {
        "cores": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "spark": pyspark.__version__,
        "pyarrow": pa.__version__,
        "confluent-kafka": f"{confluent_kafka.version()[0]} (librdkafka "
        f"{confluent_kafka.libversion()[0]})",
        "kafka-python": kafka.__version__,
        "aiokafka": aiokafka.__version__,
    }
    from protocol.records import accel

    info["pykafka decoder"] = (
        "compiled (_fastdecode)" if accel.module() is not None else "pure Python"
    )
    info["load at start"] = "%.2f %.2f %.2f" % os.getloadavg()
    return info


def compile_checkout() -> None:
    """Byte-code for the checkout's modules, as pip writes it when it installs a wheel, so
    that every Python process Spark starts loads ours as it would from an installed
    connector. Without it, under PYTHONDONTWRITEBYTECODE (set on some machines, CI's
    among them) each cold process compiled every module it imported from source: about
    0.3 s a process, three processes on a write's path."""
    import compileall

    for name in ("protocol", "kafka_common", "kafka_source", "kafka_sink"):
        compileall.compile_dir(os.path.join(ROOT, name), quiet=1)
    compileall.compile_file(os.path.join(ROOT, "pyspark_pykafka.py"), quiet=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply every data set's record count"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N], wire processes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help="comma-separated sections: " + ",".join(SECTIONS)
    )
    parser.add_argument(
        "--sail-source",
        default=os.environ.get("SAIL_KAFKA_SOURCE"),
        help="lakehq/sail's python/pysail/spark/datasource/kafka.py, to add "
        "its Spark data source as a read peer",
    )
    parser.add_argument(
        "--kafka-python-records",
        type=int,
        default=200_000,
        help="records in kafka-python's decode sample and read (per data set; it is slow)",
    )
    parser.add_argument(
        "--slow-write-records",
        type=int,
        default=200_000,
        help="rows written by the aiokafka and kafka-python producers",
    )
    parser.add_argument(
        "--write-records",
        type=int,
        default=1_000_000,
        help="rows written by the write cases (the first ones of 100B)",
    )
    parser.add_argument(
        "--scale-records",
        type=int,
        default=2_000_000,
        help="records of the scale section's partition reads (times --scale)",
    )
    parser.add_argument(
        "--wide-partitions",
        type=int,
        default=1000,
        help="partitions of the topic whose planning the scale section times",
    )
    parser.add_argument(
        "--scale-parts",
        default="tansu,jvm",
        help="the scale section's parts: tansu (ours alone on the bench's "
        "Tansu) and jvm (the curves beside the JVM connector on Apache "
        "Kafka: scale_cases.py)",
    )
    parser.add_argument(
        "--scale-points",
        choices=sorted(("quick", "full")),
        default="full",
        help="the scale curves' points: full (the issue's: up to 10,000 "
        "partitions, 1,000 topics, 8 MB values) or quick (reduced, a "
        "few minutes, to check the section)",
    )
    parser.add_argument(
        "--scale-jvm-tasks",
        type=int,
        default=200,
        help="beyond this many partitions a point's JVM connector reads a "
        "sample of this many (its whole read would take minutes)",
    )
    parser.add_argument(
        "--scale-rounds",
        type=int,
        default=1,
        help="timed rounds per connector of each scale curve point",
    )
    parser.add_argument(
        "--stream-seconds",
        type=float,
        default=40,
        help="seconds measured per streaming case, after the warm-up",
    )
    parser.add_argument(
        "--stream-warmup",
        type=float,
        default=10,
        help="seconds each streaming case runs before it is measured",
    )
    parser.add_argument(
        "--stream-rate",
        type=float,
        default=400,
        help="records per second produced in the streaming section",
    )
    parser.add_argument("--stream-partitions", type=int, default=4)
    parser.add_argument(
        "--avro-records",
        type=int,
        default=1_000_000,
        help="records of the avro section's topic (times --scale)",
    )
    parser.add_argument(
        "--jvm-read-records",
        type=int,
        default=1_000_000,
        help="records of the jvm section's 100 B read (times --scale; 1 KB "
        "a quarter, lz4 and zstd half)",
    )
    parser.add_argument(
        "--jvm-write-records",
        type=int,
        default=500_000,
        help="rows of the jvm section's df.write (times --scale)",
    )
    parser.add_argument(
        "--jvm-warmups",
        type=int,
        default=2,
        help="warm-up rounds per connector of each jvm case (the JIT)",
    )
    parser.add_argument(
        "--jvm-latency-runs",
        type=int,
        default=3,
        help="latency runs per source in the jvm section (the JVM connector, "
        "ours, Spark's floor for a Python streaming source; 0: none)",
    )
    parser.add_argument(
        "--jvm-latency-seconds",
        type=float,
        default=120,
        help="seconds measured per latency run of the jvm section",
    )
    parser.add_argument(
        "--pyfiles-records",
        type=int,
        default=300_000,
        help="records of the pyfiles section's read and write (times --scale)",
    )
    parser.add_argument(
        "--pyfiles-rounds",
        type=int,
        default=5,
        help="timed reads and writes in each of the pyfiles section's children",
    )
    parser.add_argument(
        "--racks-records",
        type=int,
        default=50_000,
        help="1 KB records of the racks section's topic (times --scale; 50 MB)",
    )
    parser.add_argument(
        "--racks-rounds",
        type=int,
        default=7,
        help="reads without and with kafka.client.rack in the racks section (each well "
        "under a second)",
    )
    parser.add_argument(
        "--note", default="", help="a sentence for results.md about the run (e.g. a busy machine)"
    )
    parser.add_argument("--output", default=os.path.join(HERE, "results.md"))
    parser.add_argument("--no-output", action="store_true")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    scale_parts = set(args.scale_parts.split(","))
    unknown = only - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if args.sail_source is None:
        try:
            import pysail.spark.datasource.kafka as sail_kafka  # noqa: F401

            args.sail_source = sail_kafka.__file__
        except ImportError:
            pass

    pa.set_cpu_count(1)  # "one core" for the decoders in this process
    pa.set_io_thread_count(1)
    started = time.monotonic()
    compile_checkout()
    info = machine()
    log("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))

    from kafka_testbed import TansuBroker

    broker = TansuBroker()
    broker.start()
    bootstrap = broker.bootstrap
    results = Results()
    memory: list[tuple[str, int, float, float, float]] = []
    scale: dict = {}
    streaming: dict = {}
    avro_lines: list[str] = []
    pyfiles_lines: list[str] = []
    sets = data_sets(args.scale, args.partitions)
    notes: list[str] = []
    spark = None
    pool = concurrent.futures.ProcessPoolExecutor(
        args.cores, mp_context=multiprocessing.get_context("spawn")
    )
    try:
        for ds in sets:
            if only <= OWN_TOPICS:
                break  # the scale, streaming and avro sections make their own topics
            ds.topic = f"bench-{ds.name.lower()}"
            t = time.perf_counter()
            produce(bootstrap, ds)
            log(f"produced {ds.describe()} in {time.perf_counter() - t:.1f} s")
        list(pool.map(cases.warm_task, range(args.cores * 2)))

        need_spark = only & {"read", "stream", "write", "memory", "streaming", "avro"}
        need_spark = need_spark or ("scale" in only and "tansu" in scale_parts)
        if need_spark:
            from spark_cases import start_spark

            spark = start_spark(args.cores, args.sail_source)
            log(f"Spark {spark.version} local[{args.cores}] started")

        if "memory" in only:
            # first, so no earlier read has grown the reused workers
            memory = run_memory(spark, bootstrap, sets)

        for ds in sets:
            if only <= OWN_TOPICS:
                break
            run_reads(results, spark, pool, bootstrap, ds, only, args, sets[0])

        if "stream" in only:
            run_stream(results, spark, bootstrap, sets[0], args.rounds)
        if "write" in only:
            run_write(
                results,
                spark,
                bootstrap,
                sets[0].head(int(args.write_records * args.scale)),
                args.rounds,
                int(args.slow_write_records * args.scale),
            )
        if "scale" in only and "tansu" in scale_parts:
            scale = run_scale(spark, bootstrap, args)
        if "streaming" in only:
            from streaming_cases import run_streaming

            streaming = run_streaming(spark, args)
        if "avro" in only:
            from avro_cases import run_avro

            avro_lines = run_avro(
                spark,
                bootstrap,
                max(1000, int(args.avro_records * args.scale)),
                args.rounds,
                args.partitions,
                log,
            )
        if "pyfiles" in only:
            # spark-submit children of their own (--py-files against installed) on this
            # run's broker; this process's Spark is done by then
            if spark is not None:
                spark.stop()
                spark = None
            from pyfiles_cases import run_pyfiles

            pyfiles_lines = run_pyfiles(bootstrap, args, log)
    finally:
        pool.shutdown()
        if spark is not None:
            spark.stop()
        broker.stop()
    jvm_lines: list[str] = []
    if "jvm" in only:
        # Spark's JVM connector (issue 30): a child under PySpark 4.2.0 on Apache Kafka of
        # its own, once this run's Spark and Tansu are gone
        from jvm_cases import run_jvm

        jvm_lines = run_jvm(args, log)
    racks_lines: list[str] = []
    if "racks" in only:
        # Apache Kafka of its own, 3 nodes in 3 racks, once this run's Spark and Tansu are gone
        from rack_cases import run_racks

        racks_lines = run_racks(args, log)
    formats_lines: list[str] = []
    if "formats" in only:
        from bench_proto_json import run_formats

        formats_lines = run_formats(max(10_000, int(100_000 * args.scale)), 5, log)
    scale_lines: list[str] = []
    if "scale" in only and "jvm" in scale_parts:
        # the curves beside the JVM connector (issue 41): the jvm section's child driver,
        # on an Apache Kafka of their own
        from scale_cases import run_scale_jvm

        scale_lines = run_scale_jvm(args, log)

    elapsed = time.monotonic() - started
    info["load at end"] = "%.2f %.2f %.2f" % os.getloadavg()
    blocks: dict[str, list[str]] = {}
    if streaming:
        import streaming_cases

        blocks["streaming"] = streaming_cases.render(streaming)
    if avro_lines:
        blocks["avro"] = avro_lines
    if jvm_lines:
        blocks["jvm"] = jvm_lines
    if scale_lines:
        blocks["scale"] = scale_lines
    if pyfiles_lines:
        blocks["pyfiles"] = pyfiles_lines
    if racks_lines:
        blocks["racks"] = racks_lines
    if formats_lines:
        blocks["formats"] = formats_lines
    when = (
        f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} (`tests/bench/run.py "
        f"--only {args.only}`, {elapsed / 60:.1f} min; load at start "
        f"{info['load at start']}, at end {info['load at end']})"
    )
    if only <= set(result_blocks.SECTIONS):
        # these sections alone: only their blocks of the last full run's results change
        for block in blocks.values():
            print("\n".join(block))
        if not args.no_output:
            with open(args.output) as f:
                text = f.read()
            for name, block in blocks.items():
                text = result_blocks.splice(text, name, block, when)
            with open(args.output, "w") as f:
                f.write(text)
            log(f"{', '.join(blocks)} written to {os.path.relpath(args.output)}")
        return 0
    report = render(results, memory, sets, info, args, elapsed, notes, scale)
    for name, block in blocks.items():
        report = result_blocks.splice(report, name, block, when)
    if not args.no_output and os.path.exists(args.output):
        with open(args.output) as f:  # the blocks of sections this run did not run
            report = result_blocks.carry_over(f.read(), report)
    print()
    print(report)
    if not args.no_output:
        with open(args.output, "w") as f:
            f.write(report)
        log(f"written to {os.path.relpath(args.output)}")
    return 0


HEADER_VARIANTS = (("", False), (":headers", True))  # case suffix, headers column


def run_reads(
    results: Results, spark, pool, bootstrap: str, ds: DataSet, only: set, args, first: DataSet
):
    responses = sample = None
    if "decode" in only:
        responses = cases.fetch_responses(bootstrap, ds)
        sample, sample_rows = cases.kafka_python_sample(responses, ds, args.kafka_python_records)
    kafka_python_ds = ds.head(min(ds.records, int(args.kafka_python_records * args.scale)))
    if spark is not None and "read" in only:
        # warm the workers on this topic (and check the count once)
        rows = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ds.topic)
            .load()
            .count()
        )
        if rows != ds.records:
            raise RuntimeError(f"spark count {rows}, {ds.records} expected")
        if ds is first:  # the JIT: a full read of each Spark path before the clock runs
            spark_read(spark, bootstrap, ds)
            spark_floor_read(spark, ds)
        # the peers' imports and first connections, outside the clock
        for read in peers.READERS.values():
            read(bootstrap, ds.head(len(ds.ends) * 2), False)
    log(f"{ds.name}: {args.rounds} rounds")
    for _ in range(args.rounds):
        if "wire" in only:
            timed_round(results, "wire", ds, lambda: cases.wire(pool, bootstrap, ds))
        for sfx, headers in HEADER_VARIANTS:
            if "decode" in only:
                timed_round(
                    results,
                    "decode:pykafka" + sfx,
                    ds,
                    lambda: cases.decode_ours(ds, responses, headers),
                )
                timed_round(
                    results,
                    "decode:kafka-python" + sfx,
                    ds,
                    lambda: cases.decode_kafka_python(ds, sample, sample_rows, headers),
                    sample_rows,
                )
            if "read" not in only:
                continue
            timed_round(
                results,
                "read:pykafka-task" + sfx,
                ds,
                lambda: cases.read_one_process(bootstrap, ds, headers),
            )
            for name, read in peers.READERS.items():
                part = kafka_python_ds if name == "kafka-python" else ds
                timed_round(
                    results,
                    f"read:{name}{sfx}",
                    ds,
                    lambda: read(bootstrap, part, headers),
                    part.records,
                    cpu=True,
                )
            extra = {"includeHeaders": str(headers).lower()}
            timed_round(
                results,
                "read:spark-pykafka" + sfx,
                ds,
                lambda: spark_read(spark, bootstrap, ds, extra=extra),
                cpu=True,
            )
            if args.sail_source and headers:
                timed_round(
                    results,
                    "read:spark-sail" + sfx,
                    ds,
                    lambda: spark_read(spark, bootstrap, ds, "sailkafka"),
                    cpu=True,
                )
        if "read" in only:
            timed_round(
                results,
                "read:spark-floor:headers",
                ds,
                lambda: spark_floor_read(spark, ds),
                cpu=True,
            )
            if ds is first:
                timed_round(
                    results,
                    "read:spark-pykafka-tiny",
                    ds,
                    lambda: spark_read_tiny(spark, bootstrap, ds),
                    len(ds.ends),
                )
    responses = sample = None  # free the fetched batches (the lambdas above read these names)


def spark_read_tiny(spark, bootstrap, ds):
    """One record per partition: the fixed cost of a query."""
    import json

    from spark_cases import read_noop

    ending = json.dumps({ds.topic: {str(p): 1 for p in ds.ends}})
    return read_noop(spark, bootstrap, ds, extra={"endingOffsets": ending})


def spark_read(spark, bootstrap, ds, fmt="pykafka", extra=None):
    from spark_cases import read_noop

    return read_noop(spark, bootstrap, ds, fmt, extra)


def spark_floor_read(spark, ds):
    from spark_cases import floor_read

    return floor_read(spark, ds)


def run_stream(results: Results, spark, bootstrap: str, ds: DataSet, rounds: int):
    from types import SimpleNamespace

    from spark_cases import floor_stream, stream_noop, tiny_topic

    n = len(ds.ends)
    tiny = SimpleNamespace(topic=tiny_topic(bootstrap, n), records=n)
    floor_stream(spark, ds.head(n))  # the floor stream's first start
    stream_noop(spark, bootstrap, tiny)  # and ours
    log(f"streaming {ds.name}: {rounds} rounds")
    for _ in range(rounds):
        timed_round(
            results,
            "stream:spark-pykafka:headers",
            ds,
            lambda: stream_noop(spark, bootstrap, ds),
            cpu=True,
        )
        timed_round(
            results, "stream:spark-floor:headers", ds, lambda: floor_stream(spark, ds), cpu=True
        )
        # the fixed cost of a streaming query: one record per partition
        timed_round(
            results, "stream:spark-pykafka-tiny", ds, lambda: stream_noop(spark, bootstrap, tiny), n
        )
        timed_round(
            results, "stream:spark-floor-tiny", ds, lambda: floor_stream(spark, ds.head(n)), n
        )


def run_write(results: Results, spark, bootstrap: str, ds: DataSet, rounds: int, slow_records: int):
    from bench_exactly_once import exactly_once_write
    from spark_cases import cached_rows, floor_write, new_topic, write_pykafka

    df = cached_rows(spark, bootstrap, ds)
    rows = peers.write_rows(cases_read_table(bootstrap, ds))
    slow = ds.head(min(ds.records, slow_records))
    slow_rows = tuple(column[: slow.records] for column in rows)
    # warm the writers (workers, imports, first connections) with a small write
    write_pykafka(df.limit(1000), bootstrap, new_topic(bootstrap, ds.partitions), "none")
    floor_write(df.limit(1000))
    for write in peers.WRITERS.values():
        write(
            bootstrap,
            new_topic(bootstrap, ds.partitions),
            tuple(column[:1000] for column in rows),
            "none",
            True,
        )
    log(f"write floor {ds.name}: {rounds} rounds")
    for _ in range(rounds):
        timed_round(results, "write:spark-floor:headers", ds, lambda: floor_write(df), cpu=True)
    for codec in ("none", "lz4"):
        log(f"write {ds.name} rows, {codec}: {rounds} rounds")
        checked = set()
        for _ in range(rounds):
            for sfx, headers in HEADER_VARIANTS:
                frame = df if headers else df.select("key", "value")
                contenders = [
                    (
                        "spark-pykafka",
                        ds,
                        lambda topic: write_pykafka(frame, bootstrap, topic, codec),
                    )
                ]
                if codec == "none" and not headers:  # issue 15: the cost of transactions
                    contenders.append(
                        (
                            "spark-pykafka-eos",
                            ds,
                            lambda topic: exactly_once_write(frame, bootstrap, topic, codec),
                        )
                    )
                for name, write in peers.WRITERS.items():
                    part, part_rows = (ds, rows) if name == "confluent-kafka" else (slow, slow_rows)
                    if part is slow and codec != "none":
                        continue
                    contenders.append(
                        (
                            name,
                            part,
                            lambda topic, write=write, part_rows=part_rows: write(
                                bootstrap, topic, part_rows, codec, headers
                            ),
                        )
                    )
                for name, part, fn in contenders:
                    case = f"write:{name}:{codec}{sfx}"
                    topic = new_topic(bootstrap, ds.partitions)
                    timed_round(results, case, ds, lambda: fn(topic), part.records, cpu=True)
                    if case not in checked:
                        n = cases.count_records(bootstrap, topic)
                        if n != part.records:
                            raise RuntimeError(f"{case}: {n} records written, {part.records} sent")
                        checked.add(case)
    df.unpersist()


def cases_read_table(bootstrap: str, ds: DataSet) -> pa.Table:
    """The data set as one Arrow table, read with pykafka's task code."""
    from kafka_source.fetcher import read_range
    from kafka_source.options import parse_reader_options
    from kafka_source.planning import OffsetRange

    options = parse_reader_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": ds.topic, "includeHeaders": "true"}
    )
    batches = [
        b
        for p, end in ds.ends.items()
        for b in read_range(options, OffsetRange(ds.topic, p, 0, end))
    ]
    return pa.Table.from_batches(batches)


def run_memory(spark, bootstrap: str, sets: list[DataSet]):
    from spark_cases import read_memory

    out = []
    small = sets[0]
    read_memory(spark, bootstrap, small, 4 * len(small.ends))  # start the workers
    for ds, records in (
        (small, small.records // 4),
        (small, small.records),
        (sets[-1], sets[-1].records),
    ):
        seconds, peak, total = read_memory(spark, bootstrap, ds, records)
        log(
            f"  memory: {ds.name} {records:,} records in {seconds:.1f} s: peak worker "
            f"{peak:.0f} MB, all workers {total:.0f} MB"
        )
        out.append((ds.name, records, seconds, peak, total))
    return out


def run_scale(spark, bootstrap: str, args) -> dict:
    """How a read's cost grows: reads of 1, 4 and 16 partitions of ``--scale-records``
    records, and of a quarter and four times that many from 4 partitions, each into noop
    with the workers' RSS sampled and the driver's planning timed; then the planning of a
    topic of ``--wide-partitions`` partitions."""
    from spark_cases import read_memory

    per = max(16, int(args.scale_records * args.scale))
    sets = {
        1: DataSet("scale-1p", per, 100, "none", 1),
        16: DataSet("scale-16p", per, 100, "none", 16),
        4: DataSet("scale-4p", 4 * per, 100, "none", 4),
    }
    for ds in sets.values():
        ds.topic = f"bench-{ds.name}"
        t = time.perf_counter()
        produce(bootstrap, ds)
        log(f"produced {ds.describe()} in {time.perf_counter() - t:.1f} s")
    cases_ = [
        (sets[1], per),
        (sets[4], per),
        (sets[16], per),
        (sets[4], per // 4),
        (sets[4], 4 * per),
    ]
    for ds, _ in cases_[:3]:  # each topic's first read (connections, JIT) off the clock
        read_memory(spark, bootstrap, ds, len(ds.ends))
    samples: dict = {}
    log(f"scale: {args.rounds} rounds")
    for _ in range(args.rounds):
        for ds, records in cases_:
            seconds, peak, total = read_memory(spark, bootstrap, ds, records)
            planning = statistics.median(
                cases.plan_batch(bootstrap, ds.topic, ds.partitions) for _ in range(3)
            )
            samples.setdefault((ds.partitions, records), []).append(
                (seconds, peak, total, planning)
            )
            log(
                f"  scale: {ds.partitions} partitions, {records:,} records: {seconds:.2f} s, "
                f"peak worker {peak:.0f} MB, planning {planning * 1000:.0f} ms"
            )
    wide = args.wide_partitions
    topic = f"bench-wide-{wide}"
    t = time.perf_counter()
    cases.wide_topic(bootstrap, topic, wide)
    log(f"created {topic} ({wide} partitions, one record each) in {time.perf_counter() - t:.1f} s")
    cases.plan_batch(bootstrap, topic, wide)  # first lookup off the clock
    batch_plan = [cases.plan_batch(bootstrap, topic, wide) for _ in range(5)]
    stream_plan = [cases.plan_micro_batch(bootstrap, topic, wide) for _ in range(5)]
    log(
        f"  planning {wide} partitions: batch {statistics.median(batch_plan) * 1000:.0f} ms, "
        f"micro-batch {statistics.median(stream_plan) * 1000:.0f} ms"
    )
    return {"reads": samples, "wide": wide, "batch_plan": batch_plan, "stream_plan": stream_plan}


# ---- the report ---------------------------------------------------------------------------

PEER_READ = {
    "confluent-kafka": "confluent-kafka Consumer",
    "aiokafka": "aiokafka AIOKafkaConsumer",
    "kafka-python": "kafka-python KafkaConsumer",
}
PEER_WRITE = {
    "confluent-kafka": "confluent-kafka Producer loop",
    "aiokafka": "aiokafka AIOKafkaProducer loop",
    "kafka-python": "kafka-python KafkaProducer loop",
}


def label(case: str, cores: int, args=None) -> str:
    """The table's words for a case name (``kind:who[:codec][:headers]``)."""
    headers = case.endswith(":headers")
    parts = case.removesuffix(":headers").split(":")
    kind, who = parts[0], parts[1] if len(parts) > 1 else ""
    if kind == "wire":
        return f"wire limit: Fetch, no decoding ({cores} processes)"
    cols = " + headers" if headers else ", no headers"
    if kind == "decode":
        if who == "pykafka":
            return f"decode: pykafka Fetch bytes -> Arrow{cols}"
        return f"decode: kafka-python MemoryRecords -> Arrow (sample){cols}"
    if kind == "read":
        if who == "spark-floor":
            return "read floor: Spark + Python source of ready Arrow batches + headers, no Kafka"
        text = {
            "spark-pykafka": f"spark.read pykafka -> noop, local[{cores}]",
            "pykafka-task": "pykafka task code, one process",
            "spark-sail": "spark.read sail kafka source -> noop",
        }.get(who)
        if text is None:
            text = f"{PEER_READ[who]} -> Arrow, one process"
            if who == "kafka-python" and args is not None:
                text += f" (first {args.kafka_python_records * args.scale / 1e3:,.0f} k)"
        return f"read: {text}{cols}"
    if kind == "stream":
        if who == "spark-floor":
            return (
                "stream floor: Spark + Python streaming source of ready Arrow batches "
                "+ headers, AvailableNow, no Kafka"
            )
        return f"stream: readStream pykafka AvailableNow -> noop{cols}"
    if kind == "write":
        if who == "spark-floor":
            return "write floor: Spark -> Python tasks that drop the batches (+ headers)"
        codec = parts[2]
        rows = " + header" if headers else ", no headers"
        if who == "spark-pykafka":
            return f"write: df.write pykafka, {codec}, local[{cores}]{rows}"
        if who == "spark-pykafka-eos":
            return f"write: df.write pykafka exactlyOnce, {codec}, local[{cores}]{rows}"
        text = f"write: {PEER_WRITE[who]}, {codec}{rows}"
        if who != "confluent-kafka" and args is not None:
            text += f" (first {args.slow_write_records * args.scale / 1e3:,.0f} k)"
        return text
    return case


def peers_of(case: str) -> list[str]:
    """The peer cases an own case is compared with (same columns / same rows)."""
    sfx = ":headers" if case.endswith(":headers") else ""
    parts = case.removesuffix(":headers").split(":")
    kind, who = parts[0], parts[1] if len(parts) > 1 else ""
    if kind == "write" and who == "spark-pykafka":
        return [f"write:{name}:{parts[2]}{sfx}" for name in peers.WRITERS]
    if kind == "write" and who == "spark-pykafka-eos":  # compared with the idempotent write
        return [f"write:spark-pykafka:{parts[2]}{sfx}"]
    if (kind, who) in (
        ("decode", "pykafka"),
        ("read", "spark-pykafka"),
        ("read", "pykafka-task"),
        ("stream", "spark-pykafka"),
    ):
        out = [f"read:{name}{sfx}" for name in peers.READERS]
        if kind == "decode":
            out.append(f"decode:kafka-python{sfx}")
        if kind != "decode":
            out.append(f"read:spark-sail{sfx}")
        return out
    return []


def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def _fmt_ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}x"


def _short(case: str) -> str:
    who = case.split(":")[1]
    return {
        "kafka-python": "kafka-python",
        "confluent-kafka": "confluent",
        "aiokafka": "aiokafka",
        "spark-sail": "sail",
    }.get(who, who)


def render(results: Results, memory, sets, info, args, elapsed, notes, scale=None) -> str:
    cores = args.cores
    lines = [
        "# pyspark-pykafka benchmark",
        "",
        f"Run {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} with `make bench` "
        f"(`tests/bench/run.py --scale {args.scale} --rounds {args.rounds}`), "
        f"{elapsed / 60:.1f} min.",
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in info.items()) + ".",
        "Broker: Tansu (in-memory storage) on the same machine, plaintext loopback.",
    ]
    if args.note:
        lines += ["", args.note]
    lines += [
        "",
        "Data sets (one topic each, produced once, every record with a 10-byte key and one "
        "16-byte header):",
        "",
    ]
    lines += [f"- {ds.describe()}" for ds in sets if ds.wire_bytes]  # produced in this run
    lines += [
        "",
        "Records/s and MB/s are medians over the rounds; spread is (max - min) / median; "
        "MB/s counts payload bytes (key + value + header), whatever the compression. "
        '"x best peer" (the fastest peer\'s name in brackets) and "of wire" are medians '
        "of ratios taken within each round (both contenders under the same load). Every "
        'read is measured without the headers column ("no headers": Spark\'s default, '
        '`includeHeaders=false`) and with it ("+ headers"), and compared with peers that '
        "build the same Arrow columns; every write without and with a header per row. The "
        "peers (Python clients in one process) are configured for throughput, each setting "
        'with its reason under "Peer settings" below.',
        "",
        "| Case | Data | Records/s | Spread | MB/s | x best peer | of wire |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]

    def row(case: str, ds: DataSet):
        if not results.has(case, ds):
            return
        rate = results.median(case, ds)
        best = ""
        candidates = [p for p in peers_of(case) if results.has(p, ds)]
        if candidates:
            top = max(candidates, key=lambda p: results.median(p, ds))
            best = f"{results.ratio(case, top, ds):.2f}x ({_short(top)})"
        wire = results.ratio(case, "wire", ds) if case != "wire" else None
        lines.append(
            f"| {label(case, cores, args)} | {ds.name} | {_fmt_rate(rate)} | "
            f"{results.spread(case, ds) * 100:.0f}% | "
            f"{rate * ds.record_bytes / 1e6:,.0f} | {best} | "
            f"{'' if wire is None else f'{wire * 100:.0f}%'} |"
        )

    read_peers = [f"read:{name}" for name in peers.READERS]
    for ds in sets:
        row("wire", ds)
        for sfx, _ in HEADER_VARIANTS:
            for case in [
                "decode:pykafka",
                "decode:kafka-python",
                "read:spark-pykafka",
                "read:pykafka-task",
                *read_peers,
                "read:spark-sail",
            ]:
                row(case + sfx, ds)
        row("read:spark-floor:headers", ds)
    ds0 = sets[0]
    row("stream:spark-pykafka:headers", ds0)
    row("stream:spark-floor:headers", ds0)
    row("write:spark-floor:headers", ds0)
    for codec in ("none", "lz4"):
        for sfx, _ in HEADER_VARIANTS:
            row(f"write:spark-pykafka:{codec}{sfx}", ds0)
            row(f"write:spark-pykafka-eos:{codec}{sfx}", ds0)
            for name in peers.WRITERS:
                row(f"write:{name}:{codec}{sfx}", ds0)
    if results.has("write:spark-floor:headers", ds0):
        lines.append("")
        lines.append(
            f"Writes send the first "
            f"{results.records[('write:spark-floor:headers', ds0.name)]:,} rows of "
            f'{ds0.name} (key, value, and with "+ header" its header) to a new '
            f"topic of {ds0.partitions} partitions, acks=all, from a DataFrame cached "
            "beforehand (Spark) or Python lists built beforehand (the peers); "
            "aiokafka and kafka-python write fewer rows (they are slow) and only "
            "uncompressed."
        )
    lines.append("")
    lines.append(
        "The peers' read rows are also the decoder's peers: the clients cannot be "
        "handed Fetch bytes, so their figure includes fetching (done by librdkafka's "
        "own threads for confluent-kafka). kafka-python decodes a sample of about "
        f"{args.kafka_python_records:,} records per data set."
    )
    tiny = ("read:spark-pykafka-tiny", sets[0].name)
    if tiny in results.seconds:
        lines.append(
            f"A spark.read of {len(sets[0].ends)} records (one per partition) into "
            f"noop takes {statistics.median(results.seconds[tiny]):.2f} s (median): "
            "the fixed cost of a query (Python planning workers, offsets, task "
            "launch), included in every Spark figure above."
        )
    stream_tiny = [
        results.seconds.get((c, sets[0].name))
        for c in ("stream:spark-pykafka-tiny", "stream:spark-floor-tiny")
    ]
    if all(stream_tiny):
        ours, floor = (statistics.median(x) for x in stream_tiny)
        lines.append(
            f"A stream of {len(sets[0].ends)} records (one per partition, "
            f"Trigger.AvailableNow into noop) takes {ours:.2f} s (median), the floor "
            f"stream of as many rows {floor:.2f} s: the fixed cost of a streaming "
            "query (Spark's planner process for the source, offset and commit logs), "
            "included in both stream figures above."
        )
    if not args.sail_source:
        lines.append(
            "lakehq/sail's Kafka data source was not run: the latest pysail "
            "release has none (it is in an unmerged pull request); pass "
            "`--sail-source` (or `SAIL_KAFKA_SOURCE=`) with its `kafka.py` to add it."
        )
    if memory:
        lines += [
            "",
            "Memory: peak RSS of Spark's Python workers while reading into noop "
            "(sampled every 50 ms; workers are reused, so a later read starts from "
            "what an earlier one left):",
            "",
            "| Data | Records read | Seconds | Peak one worker MB | Peak all workers MB |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, records, seconds, peak, total in memory:
            lines.append(f"| {name} | {records:,} | {seconds:.1f} | {peak:.0f} | {total:.0f} |")
    if results.cpu:
        lines += [
            "",
            "Where the CPU goes: CPU seconds per million records by process "
            "(medians over the rounds; 2 cores give 2 CPU seconds per second; the "
            "peers run in the driver process):",
            "",
            "| Case | Data | Wall s | Spark JVM | Python workers | Broker | Driver |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for (case, name), samples in results.cpu.items():
            ds = next(d for d in sets if d.name == name)
            per_m = 1e6 / results.records[(case, name)]

            def med(kind):
                return statistics.median(c.get(kind, 0.0) for c in samples) * per_m

            wall = statistics.median(results.seconds[(case, name)]) * per_m
            lines.append(
                f"| {label(case, cores, args)} | {ds.name} | {wall:.2f} | "
                f"{med('jvm'):.2f} | {med('python workers'):.2f} | "
                f"{med('broker'):.2f} | {med('driver'):.2f} |"
            )
    if scale:
        lines += [
            "",
            "Scale: `spark.read` into noop (100-byte values, one header, read with "
            "the headers column) of 1, 4 and 16 partitions and of more and fewer "
            "records (medians over the rounds); the peak RSS of Spark's Python "
            "workers during each read (reused workers: a read starts from what "
            "earlier ones left); planning: the batch reader's planning "
            "(`partitions()`: a connection, the topic's metadata, ListOffsets "
            "earliest and latest, the ranges) timed in the driver process, median "
            "of 3:",
            "",
            "| Partitions | Records | Seconds | Records/s | Peak one worker MB | "
            "Peak all workers MB | Planning ms |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for (partitions, records), rows in scale["reads"].items():
            seconds = statistics.median(r[0] for r in rows)
            lines.append(
                f"| {partitions} | {records:,} | {seconds:.2f} | "
                f"{_fmt_rate(records / seconds)} | "
                f"{statistics.median(r[1] for r in rows):.0f} | "
                f"{statistics.median(r[2] for r in rows):.0f} | "
                f"{statistics.median(r[3] for r in rows) * 1000:.0f} |"
            )
        lines += [
            "",
            f"Planning a topic of {scale['wide']:,} partitions (one record each), "
            f"in the driver process, median of 5: batch read "
            f"{statistics.median(scale['batch_plan']) * 1000:.0f} ms (as above); "
            f"one micro-batch of a stream "
            f"{statistics.median(scale['stream_plan']) * 1000:.0f} ms "
            "(`latestOffset`: metadata and ListOffsets latest; `partitions`: the "
            "ranges).",
        ]
    lines += ["", "Goals (from the issue; reported, not asserted):", ""]
    lines += goals(results, memory, sets, scale)
    lines += notes
    lines += ["", "## Peer settings", ""]
    lines += peer_settings(info)
    lines.append("")
    return "\n".join(lines)


def peer_settings(info) -> list[str]:
    """Each peer's settings (peers.py) with the reason for each."""
    out = [
        "Each peer as its documentation and a user who measured would configure it for "
        "throughput (tests/bench/peers.py; the candidates tried and their figures: "
        "[peer_tuning.md](peer_tuning.md), written by `tests/bench/tune_peers.py`). "
        '"call" marks how the client is called rather than configured. Every read '
        "assigns the partitions (no group, no commits) and builds Arrow batches of "
        f"{peers.CHUNK:,} rows, one list comprehension per column, the headers from the "
        "(key, value) tuples the client returns; every write passes prebuilt Python "
        "lists (headers as a list of (key, value) tuples per row), no per-message "
        "callback, and waits for every acknowledgement.",
        "",
    ]
    for name, (consumer, producer) in peers.SETTINGS.items():
        version = info.get(name, "")
        out += [f"{name} {version}:", "", "| Side | Setting | Value | Why |", "|---|---|---|---|"]
        for side, settings in (("consumer", consumer), ("producer", producer)):
            for s in settings:
                setting = f"`{s.name}`" + (" (call)" if s.call else "")
                out.append(f"| {side} | {setting} | `{s.value!r}` | {s.why} |")
        out.append("")
    return out


def goals(results: Results, memory, sets, scale=None) -> list[str]:
    out = []
    ds0 = sets[0]

    def verdict(ok: bool) -> str:
        return "**met**" if ok else "**not met**"

    def cpu_per_m(case, ds, *processes):
        samples = results.cpu.get((case, ds.name))
        if not samples:
            return None
        per_m = 1e6 / results.records[(case, ds.name)]
        return statistics.median(sum(c.get(p, 0.0) for p in processes) for c in samples) * per_m

    def worker_cpu(case):
        return cpu_per_m(case, ds0, "python workers")

    def spark_cpu_note(ours, floor, ds_list):
        """How the Spark side's CPU compares with the floor's, and the broker's share: the
        broker runs on the same cores here, where the floor has none."""
        parts = []
        for ds in ds_list:
            mine = cpu_per_m(ours, ds, "jvm", "python workers")
            base = cpu_per_m(floor, ds, "jvm", "python workers")
            broker = cpu_per_m(ours, ds, "broker")
            if base and mine is not None and broker is not None:
                parts.append(f"{ds.name} {mine / base:.2f}x + broker {broker:.2f} s")
        if not parts:
            return ""
        return (
            "; CPU per record of Spark's JVM and Python workers against the floor's, "
            "and the CPU seconds per million records of the broker, which shares the "
            f"same {os.cpu_count()} cores: " + ", ".join(parts)
        )

    for what, case, goal in (
        ("read", "read:spark-pykafka", GOAL_READ_WORKER_CPU),
        ("write", "write:spark-pykafka:none", GOAL_WRITE_WORKER_CPU),
    ):
        figures = [
            (text, worker_cpu(case + sfx))
            for sfx, text in (
                ("", "no headers"),
                (":headers", "+ headers" if what == "read" else "+ header"),
            )
        ]
        figures = [(t, f) for t, f in figures if f is not None]
        if figures:
            out.append(
                f"- Python worker CPU of a Spark {what} <= {goal} s per million "
                f"records ({ds0.name}): {verdict(all(f <= goal for _, f in figures))} "
                f"({', '.join(f'{t} {f:.2f} s' for t, f in figures)})"
            )
    if results.has("decode:pykafka", ds0) or results.has("decode:pykafka:headers", ds0):
        figures, oks = [], []
        for sfx, text, goal in (
            ("", "no headers", GOAL_DECODE_PLAIN),
            (":headers", "one header", GOAL_DECODE_HEADERS),
        ):
            if results.has("decode:pykafka" + sfx, ds0):
                rate = results.median("decode:pykafka" + sfx, ds0)
                figures.append(f"{text} {_fmt_rate(rate)}/s (goal {_fmt_rate(goal)}/s)")
                oks.append(rate >= goal)
        out.append(
            f"- decode on one core ({ds0.name}), >= {GOAL_DECODE_PLAIN / 1e6:.0f} M "
            f"records/s without headers and >= {GOAL_DECODE_HEADERS / 1e6:.1f} M/s "
            f"with one: {verdict(all(oks))} ({', '.join(figures)})"
        )
    parts, oks = [], []
    for ds in sets:
        r = results.ratio("read:spark-pykafka:headers", "read:spark-floor:headers", ds)
        if r is not None:
            parts.append(f"{ds.name} {r:.2f}x")
            oks.append(r >= GOAL_READ_VS_FLOOR)
    if parts:
        note = spark_cpu_note("read:spark-pykafka:headers", "read:spark-floor:headers", sets)
        out.append(
            f"- spark.read (with headers) >= {GOAL_READ_VS_FLOOR}x Spark's read floor "
            f"(a Python source of ready Arrow batches with headers, no Kafka), "
            f"100-byte and 1 KB records, uncompressed, lz4, zstd: "
            f"{verdict(all(oks))} ({', '.join(parts)}{note})"
        )
    figures, oks = [], []
    for sfx, text in ((":headers", "+ header"), ("", "no headers")):
        r = results.ratio(f"write:spark-pykafka:none{sfx}", "write:spark-floor:headers", ds0)
        if r is not None:
            figures.append(f"{text} {r:.2f}x")
            oks.append(r >= GOAL_WRITE_VS_FLOOR)
    if figures:
        note = spark_cpu_note(
            "write:spark-pykafka:none:headers", "write:spark-floor:headers", [ds0]
        )
        out.append(
            f"- df.write >= {GOAL_WRITE_VS_FLOOR}x Spark's write floor (Python tasks "
            f"that drop the rows with headers), uncompressed: {verdict(all(oks))} "
            f"({', '.join(figures)}{note})"
        )
    r = results.ratio("stream:spark-pykafka:headers", "read:spark-pykafka:headers", ds0)
    if r is not None:
        floor = results.ratio("stream:spark-floor:headers", "read:spark-floor:headers", ds0)
        ours = results.ratio("stream:spark-pykafka:headers", "stream:spark-floor:headers", ds0)
        extra = (
            ""
            if floor is None
            else (
                f"; Spark's own floor streams at {floor:.2f}x its batch read, and our stream "
                f"runs at {ours:.2f}x the floor stream"
            )
        )
        tiny = [
            results.seconds.get((c, ds0.name))
            for c in ("stream:spark-pykafka-tiny", "stream:spark-floor-tiny")
        ]
        if all(tiny):
            extra += (
                f"; a stream of {len(ds0.ends)} records takes "
                f"{statistics.median(tiny[0]):.2f} s, the floor's "
                f"{statistics.median(tiny[1]):.2f} s"
            )
        out.append(
            f"- streaming (AvailableNow) >= {GOAL_STREAM_VS_BATCH}x the batch read "
            f"(the issue: close most of the gap from 0.5x): "
            f"{verdict(r >= GOAL_STREAM_VS_BATCH)} ({ds0.name} with headers "
            f"{r:.2f}x{extra})"
        )
    if scale:
        plan = statistics.median(scale["batch_plan"])
        stream_plan = statistics.median(scale["stream_plan"])
        out.append(
            f"- planning {scale['wide']:,} partitions well under a second "
            f"(< {GOAL_WIDE_PLANNING:.0f} s): "
            f"{verdict(max(plan, stream_plan) < GOAL_WIDE_PLANNING)} (batch read "
            f"{plan * 1000:.0f} ms, one micro-batch {stream_plan * 1000:.0f} ms)"
        )
    if len(memory) >= 2:
        small, large = memory[0], memory[1]
        growth = large[3] / small[3] if small[3] else float("inf")
        out.append(
            f"- worker memory flat as the read grows ({small[1]:,} -> {large[1]:,} "
            f"records): {verdict(growth <= GOAL_MEMORY_GROWTH)} (peak one worker "
            f"{small[3]:.0f} -> {large[3]:.0f} MB, x{growth:.2f})"
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
