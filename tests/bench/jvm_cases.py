"""The ``jvm`` section of ``make bench`` (issues 30 and 38): Spark's own JVM Kafka connector
(``format("kafka")``) beside ours (``format("pykafka")``) and beside Spark's floors (Python
data sources that do no Kafka work: ``floor_source.py``), same Spark, same Apache Kafka,
same data, one run.

Maven serves the JVM connector up to Spark 4.2.0, so the cases run in a child driver
(jvm_child.py) under PySpark 4.2.0 in its own virtualenv (``tests.helpers.own_envs.own_env``, the
one the differential suite uses), with the connector's jars and spark-avro
(``kafka_testbed.maven_jars.spark_kafka_jars``) in ``spark.jars`` and ours imported from
the checkout. This process starts Apache Kafka (``NEWEST_KAFKA``, one node), produces the
topics, starts the Schema Registry, runs the child (fresh sessions' first writes timed
phase by phase, the cases, then the streaming latency in a session of its own whose Python
processes trace themselves) and renders the results.md block.

Cases (full scale; ``--scale`` multiplies the record counts): ``spark.read`` -> noop of 1 M
x 100 B, 500 k x 100 B lz4 and zstd, 250 k x 1 KB, and a small read of 1,000 x 100 B at
any scale (4 partitions each); ``df.write`` of
500 k x 100 B cached rows; readStream Trigger.AvailableNow of the 100 B topic; latency of
a readStream with the default trigger at ``--stream-rate`` records/s into foreachBatch,
beside Spark's floor for a Python streaming source, ``--jvm-latency-runs`` runs of
``--jvm-latency-seconds`` each, every micro-batch's phases kept (the slowest 1% against the
median);
registry Avro (1 M flat records) decoded by ours (``valueFormat=avro``) and by
``from_avro`` over the JVM connector's value minus its 5-byte header, and the same topic
read raw by both; the same rows as registry JSON Schema values decoded by ours
(``valueFormat=json``) and by ``from_json`` with the schema given, and as registry Protobuf
values decoded by ours beside the JVM connector's raw read (no ``from_protobuf`` jar here).
Nothing is asserted: the goals are reported met or not.

    .venv/bin/python tests/bench/jvm_cases.py --formats [--scale 0.3] [--rounds 3]

runs only the registry formats' cases, in a session of their own, and prints their table.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHILD = os.path.join(HERE, "jvm_child.py")
TRACE_DIR = os.path.join(HERE, "first_write_trace")
STREAM_TRACE_DIR = os.path.join(HERE, "stream_trace")
SPARK_VERSION = "4.2.0"  # the newest Spark whose Kafka connector Maven serves
FORMATS = ("kafka", "pykafka")
FLOOR = "benchfloor"  # floor_source.py's format: a Python sink that drops the rows
CLOCK = "benchclock"  # floor_source.py's streaming source of the clock: no Kafka
KINDS = ("jvm", "python workers", "broker", "driver")

# Goals (reported, never asserted)
GOAL_READ_100B = 3.5  # never below; 4x is the stretch
GOAL_READ_100B_STRETCH = 4.0
GOAL_READ_1KB = 2.0
GOAL_WRITE = 2.5  # a warm df.write
GOAL_WRITE_OF_CPU_BOUND = 0.95  # a warm write's rate / what its CPU per record allows
GOAL_WRITE_TASK_CPU = 0.15  # Python workers' CPU s per M rows beyond the write floor's
GOAL_FIRST_WRITE = 1.0  # a first write in a fresh session
GOAL_LATENCY = 1.0  # ours / the JVM connector's, p50 and p99, median of the runs
GOAL_LATENCY_P99_FLOOR = 1.25  # ours / Spark's floor, p99, in every run
GOAL_FIRST_WRITE_OWN_S = 0.5  # our imports + our steps beyond a warm write's, first write
GOAL_AVRO_VS_FROM_AVRO = 4.0
GOAL_AVRO_WORKERS_OVER_RAW = 0.08  # Python workers' CPU s per M values, decoded - raw
GOAL_AVRO_VS_RAW = 0.9
GOAL_JSON_VS_FROM_JSON = 2.0
GOAL_PROTOBUF_VS_FROM_PROTOBUF = 3.0
SMALL_READ_RECORDS = 1_000


def data_sets(scale: float, read_records: int, partitions: int):
    from bench_data import DataSet

    def n(records: int) -> int:
        return max(partitions * 2, int(records * scale))

    return [
        DataSet("100B", n(read_records), 100, "none", partitions),
        DataSet("1KB", n(read_records // 4), 1000, "none", partitions),
        DataSet("100B-lz4", n(read_records // 2), 100, "lz4", partitions),
        DataSet("100B-zstd", n(read_records // 2), 100, "zstd", partitions),
        # a small read (at any scale): one task of ours, a task per partition of theirs
        DataSet("100B-small", SMALL_READ_RECORDS, 100, "none", partitions),
    ]


def child_python() -> tuple[str, list[str]]:
    """PySpark 4.2.0's venv with the protobuf extra's packages (built on first use, 3-4 min;
    a name of its own, so the tests' PySpark 4.2.0 venv is not rebuilt) and the jars."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from kafka_testbed.maven_jars import spark_kafka_jars
    from tests.helpers.own_envs import own_env

    python = own_env(
        f"bench-pyspark-{SPARK_VERSION}",
        [f"pyspark=={SPARK_VERSION}", "protobuf>=5", "grpcio-tools>=1.76"],
    )
    return python, [str(p) for p in spark_kafka_jars(SPARK_VERSION)]


def run_child(python: str, spec: dict, workdir: str, timeout: float) -> dict:
    """The child with ``spec``; its log goes to this process's output. The first-write
    child runs with first_write_trace/ first on PYTHONPATH: every Python process of its
    session logs the sink's steps with timestamps (see its sitecustomize.py)."""
    from tests.helpers.envs import clean_env

    mode = spec.get("mode", "bench")
    name = "-".join(filter(None, (mode, spec.get("tag"))))
    spec_path = os.path.join(workdir, f"spec-{name}.json")
    results_path = os.path.join(workdir, f"results-{name}.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    env = clean_env(python, PYTHONPATH=os.pathsep.join([ROOT, HERE]), TZ="UTC")
    trace = None
    if mode == "first-write":
        env.update(
            PYTHONPATH=os.pathsep.join([TRACE_DIR, ROOT, HERE]),
            PYKAFKA_WRITE_TRACE=os.path.join(workdir, f"write-trace-{name}.jsonl"),
        )
    elif mode == "latency":
        trace = os.path.join(workdir, f"stream-trace-{name}.jsonl")
        env.update(
            PYTHONPATH=os.pathsep.join([STREAM_TRACE_DIR, ROOT, HERE]), PYKAFKA_STREAM_TRACE=trace
        )
    done = subprocess.run(
        [python, CHILD, spec_path, results_path], cwd=workdir, env=env, timeout=timeout
    )
    if not os.path.exists(results_path):
        raise RuntimeError(f"the JVM bench child ended with {done.returncode} and no results")
    with open(results_path) as f:
        out = json.load(f)
    out["_exit"] = done.returncode
    if trace is not None and os.path.exists(trace):
        with open(trace) as f:
            out["trace"] = [json.loads(line) for line in f if line.strip()]
    return out


def run_jvm(args, log) -> list[str]:
    """Everything of the section; returns its results.md lines."""
    from avro_cases import RECORD, produce_avro
    from bench_data import produce

    from kafka_testbed import NEWEST_KAFKA, KafkaCluster
    from kafka_testbed.schema_registry import RegistryServer

    began = time.monotonic()
    python, jars = child_python()
    log(f"jvm: PySpark {SPARK_VERSION} env and jars ready in {time.monotonic() - began:.0f} s")
    load_start = "%.2f %.2f %.2f" % os.getloadavg()
    partitions = args.partitions
    sets = data_sets(args.scale, args.jvm_read_records, partitions)
    write_records = max(partitions, int(args.jvm_write_records * args.scale))
    avro_records = max(1000, int(args.avro_records * args.scale))
    workdir = tempfile.mkdtemp(prefix="bench-jvm-")
    with KafkaCluster(NEWEST_KAFKA, heap_mb=1024) as kafka:
        bootstrap = kafka.bootstrap
        broker_pids = [kafka.pid(n) for n in kafka.nodes]
        log(f"jvm: Apache Kafka {NEWEST_KAFKA} at {bootstrap}")
        # Each connector's first write in a session of its own: ours first (traced per
        # Python process), then the JVM connector's in a second fresh session. The first
        # query of a session also pays Spark's own first-query costs, so each connector
        # goes first once. Both meet a broker that has handed out a producer id before.
        take_one_producer_id(bootstrap)
        first = {}
        # A third session starts with Spark's floor for a Python sink (a Python data
        # source whose tasks drop the rows): what any Python sink's first write costs.
        for fmt, order in (
            ("pykafka", ["pykafka", "pykafka", "kafka", "pykafka"]),
            ("kafka", ["kafka", "kafka", "pykafka", "kafka"]),
            (FLOOR, [FLOOR, FLOOR, "pykafka"]),
        ):
            first[fmt] = run_child(
                python,
                {
                    "mode": "first-write",
                    "bootstrap": bootstrap,
                    "jars": jars,
                    "cores": args.cores,
                    "records": write_records,
                    "partitions": partitions,
                    "order": order,
                    "tag": fmt,
                },
                workdir,
                900,
            )
        for ds in sets:
            ds.topic = f"bench-jvm-{ds.name.lower()}"
            t = time.perf_counter()
            produce(bootstrap, ds)
            log(f"jvm: produced {ds.describe()} in {time.perf_counter() - t:.1f} s")
        registry = RegistryServer().start()
        try:
            avro_topic = f"bench-jvm-avro-{avro_records}"
            t = time.perf_counter()
            produce_avro(bootstrap, registry.url, avro_topic, avro_records, partitions)
            log(f"jvm: produced {avro_records:,} Avro records in {time.perf_counter() - t:.1f} s")
            json_case, protobuf_case = (
                produce_format(bootstrap, registry.url, avro_records, partitions, fmt, log)
                for fmt in ("json", "protobuf")
            )
            latency_topic = "bench-jvm-latency"
            from protocol.client.cluster import KafkaClient

            with KafkaClient(bootstrap_servers=bootstrap) as client:
                client.create_topics({latency_topic: args.stream_partitions})
                client.wait_for_topics([latency_topic])
                client.latest_offsets(
                    [
                        (latency_topic, p)  # the leaders take records
                        for p in range(args.stream_partitions)
                    ]
                )
            spec = {
                "bootstrap": bootstrap,
                "jars": jars,
                "cores": args.cores,
                "broker_pids": broker_pids,
                "warmups": args.jvm_warmups,
                "rounds": args.rounds,
                "reads": [
                    {
                        "name": ds.name,
                        "topic": ds.topic,
                        "records": ds.records,
                        "value_size": ds.value_size,
                        "partitions": ds.partitions,
                        "floor": ds.codec == "none" and "small" not in ds.name,
                    }
                    for ds in sets
                ],
                "write": {"records": write_records, "partitions": partitions},
                "avro": {
                    "topic": avro_topic,
                    "records": avro_records,
                    "registry_url": registry.url,
                    "schema": json.dumps(RECORD),
                },
                "json": json_case,
                "protobuf": protobuf_case,
            }
            results = run_child(python, spec, workdir, 7200)
            if args.jvm_latency_runs:
                latency = run_child(
                    python,
                    {
                        "mode": "latency",
                        "bootstrap": bootstrap,
                        "jars": jars,
                        "cores": args.cores,
                        "broker_pids": broker_pids,
                        "latency": {
                            "topic": latency_topic,
                            "partitions": args.stream_partitions,
                            "rate": args.stream_rate,
                            "warmup": args.stream_warmup,
                            "seconds": args.jvm_latency_seconds,
                            "runs": args.jvm_latency_runs,
                        },
                    },
                    workdir,
                    7200,
                )
                results["latency"] = latency.get("latency")
                results["our_parts"] = latency.get("our_parts")
                results["latency_trace"] = latency.get("trace", [])
                results["latency_seconds"] = args.jvm_latency_seconds
        finally:
            registry.stop()
    results["first_write_profile"] = first["pykafka"]
    results["first_write_fresh"] = {
        fmt: dict(first[fmt]["phases"])[f"write 1 ({fmt})"] for fmt in (*FORMATS, FLOOR)
    }
    results["load_at_start"] = load_start
    os.makedirs(os.path.join(ROOT, ".cache"), exist_ok=True)
    with open(os.path.join(ROOT, ".cache", "bench-jvm-results.json"), "w") as f:  # raw figures
        json.dump(results, f, indent=1)
    return render(results, sets, args, time.monotonic() - began)


def take_one_producer_id(bootstrap: str) -> None:
    """One InitProducerId. The first a broker ever answers waits for a block of producer
    ids from its controller (0.1 s here); a cluster in use did that long ago, so no
    connector's first write should pay it for being first on a new broker."""
    from protocol.authorization import request_error
    from protocol.client.cluster import KafkaClient
    from protocol.client.transactions import MAX_INIT_PRODUCER_ID_VERSION
    from protocol.schemas import INIT_PRODUCER_ID

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        conn = client.connection(min(client.metadata().brokers))

        def attempt() -> None:
            answer = conn.request(
                INIT_PRODUCER_ID,
                {
                    "transactional_id": None,
                    "transaction_timeout_ms": 60_000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
                conn.version_for(INIT_PRODUCER_ID, MAX_INIT_PRODUCER_ID_VERSION),
            )
            if answer["error_code"]:  # a new broker's COORDINATOR_LOAD_IN_PROGRESS is retried
                raise request_error(answer["error_code"], "InitProducerId")

        client.retrying("InitProducerId", attempt, 60_000)


def produce_format(
    bootstrap: str, registry_url: str, records: int, partitions: int, fmt: str, log
) -> dict:
    """The Avro case's rows as registry JSON Schema (``fmt="json"``) or Protobuf values;
    the child's ``json`` or ``protobuf`` spec."""
    from avro_cases import JSON_DDL, produce_registry

    topic = f"bench-jvm-{fmt}-{records}"
    t = time.perf_counter()
    produce_registry(bootstrap, registry_url, topic, records, partitions, fmt)
    log(f"jvm: produced {records:,} {fmt} records in {time.perf_counter() - t:.1f} s")
    return {"topic": topic, "records": records, "registry_url": registry_url, "ddl": JSON_DDL}


def run_formats(args, log) -> list[str]:
    """Only the registry value formats' cases (Avro and JSON Schema beside ``from_avro``
    and ``from_json``), in a session of their own: a quick look at the decoders. Returns
    the lines ``render`` gives for them."""
    from avro_cases import RECORD, produce_avro

    from kafka_testbed import NEWEST_KAFKA, KafkaCluster
    from kafka_testbed.schema_registry import RegistryServer

    began = time.monotonic()
    python, jars = child_python()
    records = max(1000, int(args.avro_records * args.scale))
    workdir = tempfile.mkdtemp(prefix="bench-jvm-")
    load_start = "%.2f %.2f %.2f" % os.getloadavg()
    with KafkaCluster(NEWEST_KAFKA, heap_mb=1024) as kafka:
        registry = RegistryServer().start()
        try:
            avro_topic = f"bench-jvm-avro-{records}"
            produce_avro(kafka.bootstrap, registry.url, avro_topic, records, args.partitions)
            spec = {
                "mode": "formats",
                "bootstrap": kafka.bootstrap,
                "jars": jars,
                "cores": args.cores,
                "broker_pids": [kafka.pid(n) for n in kafka.nodes],
                "warmups": args.jvm_warmups,
                "rounds": args.rounds,
                "avro": {
                    "topic": avro_topic,
                    "records": records,
                    "registry_url": registry.url,
                    "schema": json.dumps(RECORD),
                },
                **{
                    fmt: produce_format(
                        kafka.bootstrap, registry.url, records, args.partitions, fmt, log
                    )
                    for fmt in ("json", "protobuf")
                },
            }
            results = run_child(python, spec, workdir, 3600)
        finally:
            registry.stop()
    results["load_at_start"] = load_start
    with open(os.path.join(workdir, "formats-results.json"), "w") as f:
        json.dump(results, f, indent=1)
    log(f"jvm formats: raw figures in {workdir}/formats-results.json")
    return render(results, [], args, time.monotonic() - began)


# ---- rendering -----------------------------------------------------------------------------


def _fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.0f} k"


def _rates(entry: dict) -> list[float]:
    return [entry["records"] / s for s in entry["seconds"]]


def ratio(case: dict, a: str = "pykafka", b: str = "kafka") -> float:
    """Median over rounds of a's rate / b's rate in the same round."""
    return statistics.median(x / y for x, y in zip(_rates(case[a]), _rates(case[b])))


def cpu_per_m(entry: dict, kind: str) -> float:
    return statistics.median(c.get(kind, 0.0) for c in entry["cpu"]) * 1e6 / entry["records"]


def cpu_ratio(case: dict, ours_name: str = "pykafka") -> float:
    """The JVM connector's CPU per record over ours (or Spark's floor's), every process
    counted: on a machine others share, steadier than the wall-clock ratio."""
    theirs, ours = (sum(cpu_per_m(case[f], k) for k in KINDS) for f in ("kafka", ours_name))
    return theirs / ours if ours else float("nan")


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


CASE_LABELS = {
    "read 100B": "spark.read -> noop, 100 B values",
    "read 1KB": "spark.read -> noop, 1 KB values",
    "read 100B-lz4": "spark.read -> noop, 100 B values, lz4",
    "read 100B-zstd": "spark.read -> noop, 100 B values, zstd",
    "read 100B-small": "spark.read -> noop, a small read (100 B values): one task of ours, "
    "a task per partition of the JVM's",
    "write": "df.write of cached rows (10 B keys, 100 B values) to a new topic, after warm-up",
    "write headers": "the same df.write with one header a row (6 B key, 8 B value)",
    "write lz4": "the same df.write, kafka.compression.type=lz4",
    "stream AvailableNow": "readStream AvailableNow -> noop, 100 B values",
    "avro decoded": "registry Avro -> value struct (JVM: from_avro)",
    "avro raw": "the Avro topic read raw (binary value)",
    "json decoded": "registry JSON Schema -> value struct (JVM: from_json, schema given)",
    "protobuf decoded": "registry Protobuf -> value struct (JVM: the raw read, no "
    "from_protobuf: its jar is not served here)",
}


def render(r: dict, sets, args, elapsed: float) -> list[str]:
    cases = r.get("cases", {})
    lines = [
        "## Spark's JVM connector beside ours",
        "",
        f"Spark {r.get('spark', SPARK_VERSION)} (the newest whose JVM Kafka connector Maven "
        f"serves), one SparkSession `local[{args.cores}]` holding both connectors: "
        '`format("kafka")` (spark-sql-kafka-0-10 with kafka-clients, its jars in '
        '`spark.jars`) and `format("pykafka")`; Apache Kafka (newest pinned version, one '
        f"node, on the same {os.cpu_count()} cores); default options on both. Each case runs "
        f"{args.jvm_warmups} warm-up rounds per connector (the JIT), then {args.rounds} "
        "rounds with the connectors interleaved (the order flips each round); medians; "
        '"ours / JVM" is the median of per-round ratios. CPU s per M records by process '
        "(medians): Spark's JVM, its Python workers, the broker, the driver (Python). "
        f"Load average at start {r.get('load_at_start', '?')}, at end "
        f"{r.get('load_at_end', '?')}. `--scale "
        f"{getattr(args, 'scale', 1.0):g}` (the Records column), {elapsed / 60:.1f} min.",
        "",
        "| Case | Records | JVM records/s | Spark's floor records/s | ours records/s | "
        "ours / JVM | ours / floor | JVM CPU: JVM / Py / broker / driver | ours CPU: JVM / "
        "Py / broker / driver | floor CPU: JVM / Py | CPU JVM / ours |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|",
    ]
    for name, label in CASE_LABELS.items():
        case = cases.get(name)
        if not case or not all(f in case for f in FORMATS):
            continue
        cpu = {f: " / ".join(f"{cpu_per_m(case[f], k):.2f}" for k in KINDS) for f in FORMATS}
        floor = case.get(FLOOR)
        lines.append(
            f"| {label} | {case['kafka']['records']:,} | "
            f"{_fmt_rate(statistics.median(_rates(case['kafka'])))} | "
            + (f"{_fmt_rate(statistics.median(_rates(floor)))}" if floor else "-")
            + f" | {_fmt_rate(statistics.median(_rates(case['pykafka'])))} | "
            f"{ratio(case):.2f}x | "
            + (f"{ratio(case, 'pykafka', FLOOR):.2f}" if floor else "-")
            + f" | {cpu['kafka']} | {cpu['pykafka']} | "
            + (" / ".join(f"{cpu_per_m(floor, k):.2f}" for k in KINDS[:2]) if floor else "-")
            + f" | {cpu_ratio(case):.2f}x |"
        )
    fw = r.get("first_write")
    if fw and "write" in cases:
        n = cases["write"]["kafka"]["records"]
        lines += [
            "",
            f"First `df.write` of each connector in the session (the session's "
            f"first query of either connector, once the rows were cached): JVM "
            f"{fw['kafka']:.2f} s ({_fmt_rate(n / fw['kafka'])}/s), ours "
            f"{fw['pykafka']:.2f} s ({_fmt_rate(n / fw['pykafka'])}/s), ours / JVM "
            f"{fw['kafka'] / fw['pykafka']:.2f}x.",
        ]
    fresh = r.get("first_write_fresh")
    if fresh and "write" in cases:
        n = cases["write"]["kafka"]["records"]
        floor = (
            f"; Spark's floor for a Python sink (a Python data source whose tasks drop "
            f"the rows, `floor_source.py`) {fresh[FLOOR]:.2f} s, floor / JVM "
            f"{fresh['kafka'] / fresh[FLOOR]:.2f}x: what Spark costs any Python sink's "
            "first write"
            if FLOOR in fresh
            else ""
        )
        lines += [
            "",
            f"Each connector's first `df.write` in a fresh session of its own (the "
            f"session's first query; ours first, on a broker that had handed out a "
            f"producer id before): JVM {fresh['kafka']:.2f} s, ours "
            f"{fresh['pykafka']:.2f} s, ours / JVM "
            f"{fresh['kafka'] / fresh['pykafka']:.2f}x ({n:,} rows){floor}.",
        ]
    write = cases.get("write", {})
    if FLOOR in write and "kafka" in write:
        lines += [
            "",
            f"The same warm `df.write` into Spark's floor for a Python sink (its "
            f"tasks drop the rows): {_fmt_rate(statistics.median(_rates(write[FLOOR])))}"
            f" records/s, {ratio(write, FLOOR, 'kafka'):.2f}x the JVM connector (the "
            f"most a Python sink can reach here), ours "
            f"{ratio(write, 'pykafka', FLOOR):.2f}x the floor.",
        ]
    lines += render_first_write_profile(r.get("first_write_profile"))
    lines += render_latency(r, args)
    lines += ["", "Goals (reported, not asserted):", ""]
    lines += goals(r)
    return lines


def render_first_write_profile(p: dict | None) -> list[str]:
    if not p or not p.get("phases"):
        return []
    parts = ", ".join(f"{what} {s:.2f} s" for what, s in p["phases"])
    lines = [
        "",
        "A fresh child session (on a broker that had handed out a producer id before), "
        "each step "
        f"timed in the driver (rows made by `spark.range`, cached first): {parts}.",
    ]
    return lines + render_trace(p.get("trace") or [])


def trace_window(trace: list, write: str) -> tuple[float, float, list] | None:
    """The events of the driver's ``write`` (e.g. "write 1 (pykafka)"), with its times."""
    begin = next((e[0] for e in trace if e[3] == f"driver: {write} begin"), None)
    end = next((e[0] for e in trace if e[3] == f"driver: {write} end"), None)
    if begin is None or end is None:
        return None
    return (
        begin,
        end,
        [
            e
            for e in trace
            if begin - 0.001 <= e[0] <= end + 0.001 and not e[3].startswith("driver:")
        ],
    )


def render_trace(trace: list) -> list[str]:
    """Per Python process of the first and the second write: when it started, its import
    of kafka_sink.writer and the sink's steps, in seconds from the write's start."""
    out = []
    for write in ("write 1 (pykafka)", "write 2 (pykafka)"):
        window = trace_window(trace, write)
        if window is None:
            continue
        begin, end, events = window
        steps: dict[int, list[str]] = {}
        kinds: dict[int, str] = {}
        opened: dict[tuple[int, str], float] = {}
        for at, pid, kind, event in events:
            kinds[pid] = kind.replace("pyspark.sql.worker.", "").replace("pyspark.", "")
            if event.endswith(" begin"):
                opened[(pid, event[:-6])] = at
            elif event.endswith(" end") and (pid, event[:-4]) in opened:
                start = opened.pop((pid, event[:-4]))
                steps.setdefault(pid, []).append(
                    f"{event[:-4]} +{start - begin:.2f} s for {at - start:.2f} s"
                )
            elif event.startswith("note: "):
                steps.setdefault(pid, []).append(f"({event[6:]})")
            else:
                steps.setdefault(pid, []).append(f"{event} +{at - begin:.2f} s")
        if not steps:
            continue
        out += [
            "",
            f"Inside the {write.split(' (')[0].replace('write', 'write no.')} of that "
            f"session ({end - begin:.2f} s; seconds from its start, per Python "
            "process Spark ran for it; first_write_trace/sitecustomize.py):",
            "",
            "| Process | Steps |",
            "|---|---|",
        ]
        for pid, what in steps.items():
            out.append(f"| {kinds[pid]} (pid {pid}) | {'; '.join(what)} |")
        out += critical_path(begin, end, events)
    return out


def path_parts(begin: float, events: list) -> tuple[float, float, float]:
    """A write's one path (planner, then the tasks, then the commit) split into Spark
    starting each Python process until our first import, our imports and our steps
    (create_writer, the slower worker's task writes, commit), in seconds."""
    by_kind: dict[str, list] = {}
    for e in events:
        by_kind.setdefault(e[2].rsplit(".", 1)[-1], []).append(e)
    spark_start = imports = ours = 0.0
    for kind in ("write_into_data_source", "worker", "commit_data_source_write"):
        evs = by_kind.get(kind)
        if not evs:
            continue
        if kind == "worker":  # the tasks run in parallel: the slowest worker is the path
            pids = {e[1] for e in evs}
            evs = max(([e for e in evs if e[1] == pid] for pid in pids), key=lambda x: x[-1][0])
        first_import = next((e[0] for e in evs if e[3].startswith("import ")), None)
        started = next((e[0] for e in evs if e[3] == "process started"), None)
        if first_import is not None and started is not None and started >= begin - 0.001:
            spark_start += first_import - started
        opened = {}
        for at, _, _, event in evs:
            if event.endswith(" begin"):
                opened[event[:-6]] = at
            elif event.endswith(" end") and event[:-4] in opened:
                took = at - opened.pop(event[:-4])
                if event.startswith("import kafka_sink"):
                    imports += took
                elif event[:-4] in ("create_writer", "task write", "commit"):
                    ours += took
    return spark_start, imports, ours


def critical_path(begin: float, end: float, events: list) -> list[str]:
    """The write's wall time split along its one path (``path_parts``), and what is
    left: Spark's own scheduling between them."""
    spark_start, imports, ours = path_parts(begin, events)
    total = end - begin
    if not (imports or ours):
        return []
    return [
        "",
        f"Along the write's path ({total:.2f} s): Python processes Spark started for it, "
        f"from their start to our first import, {spark_start:.2f} s; our imports "
        f"{imports:.2f} s; our steps (create_writer, the slower worker's tasks, "
        f"commit) {ours:.2f} s; the rest, {total - spark_start - imports - ours:.2f} s, "
        "is Spark's own: launching those processes when they are new (a Python daemon "
        "each for the planner, the tasks and the commit), planning, scheduling.",
    ]


def first_write_own_cost(trace: list) -> tuple[float, float] | None:
    """(our imports, our steps beyond the warm second write's) along the first write's
    path: what a fresh session's first write costs us beyond a warm write."""
    parts = []
    for write in ("write 1 (pykafka)", "write 2 (pykafka)"):
        window = trace_window(trace, write)
        if window is None:
            return None
        parts.append(path_parts(window[0], window[2]))
    return parts[0][1], parts[0][2] - parts[1][2]


LATENCY_NAMES = {
    "kafka": "JVM connector",
    "pykafka": "ours",
    CLOCK: "Spark's floor (a Python streaming source, no Kafka)",
}
PHASES = (
    "latestOffset",
    "queryPlanning",
    "getBatch",
    "walCommit",
    "addBatch",
    "commitOffsets",
    "triggerExecution",
)


def render_latency(r: dict, args) -> list[str]:
    lat = r.get("latency")
    if not lat or not all(lat.get(f) for f in FORMATS):
        return []
    sources = [f for f in (*FORMATS, CLOCK) if lat.get(f)]
    runs = len(lat["kafka"])
    seconds = getattr(args, "jvm_latency_seconds", args.stream_seconds)

    def med(fmt, key):
        return statistics.median(x[key] for x in lat[fmt])

    lines = [
        "",
        f"Streaming latency: {args.stream_rate:.0f} records/s (one per record "
        f"batch, round robin) into {args.stream_partitions} partitions; readStream "
        "with the default trigger into `foreachBatch`, each row timed once "
        "collected in the driver (send time to arrival); "
        f"{seconds:.0f} s measured after a {args.stream_warmup:.0f} s warm-up, "
        f"{runs} run(s) of each source, interleaved (the order turns each run), in a "
        "session of their own whose Python processes trace themselves "
        "(`tests/bench/stream_trace/`); medians of runs.",
        "",
        "| Source | p50 ms | p99 ms | max ms | micro-batches/s | rows per micro-batch | "
        "CPU cores busy: JVM / Py / broker / driver |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for fmt in sources:
        x = lat[fmt][0]
        cpu = " / ".join(f"{x['cpu'].get(k, 0.0) / seconds:.2f}" for k in KINDS)
        worst = (
            statistics.median(
                max((b["max_latency_ms"] or 0) for b in y["micro_batches"]) for y in lat[fmt]
            )
            if x.get("micro_batches")
            else 0
        )
        lines.append(
            f"| {LATENCY_NAMES[fmt]} | {med(fmt, 'p50') * 1000:.0f} | "
            f"{med(fmt, 'p99') * 1000:.0f} | {worst:.0f} | "
            f"{med(fmt, 'per_second'):.2f} | {med(fmt, 'rows_per_batch'):.0f} | {cpu} |"
        )
    lines += [
        "",
        "Each run (p50 / p99 ms; ours against the JVM connector and against the "
        "floor, in the same run):",
        "",
        "| Run | JVM connector | ours | floor | ours / JVM p50, p99 | ours / floor p50, p99 |",
        "|---:|---|---|---|---|---|",
    ]
    for i in range(runs):

        def pp(fmt):
            if len(lat.get(fmt) or []) <= i:
                return "-"
            return f"{lat[fmt][i]['p50'] * 1000:.0f} / {lat[fmt][i]['p99'] * 1000:.0f}"

        def rr(fmt):
            if len(lat.get(fmt) or []) <= i:
                return "-"
            a, b = lat["pykafka"][i], lat[fmt][i]
            return f"{a['p50'] / b['p50']:.2f}x, {a['p99'] / b['p99']:.2f}x"

        lines.append(
            f"| {i + 1} | {pp('kafka')} | {pp('pykafka')} | {pp(CLOCK)} | "
            f"{rr('kafka')} | {rr(CLOCK)} |"
        )
    phases = list(PHASES)
    lines += [
        "",
        "One micro-batch, phase by phase (median ms of Spark's `durationMs`: "
        "latestOffset = offsets, queryPlanning + getBatch = planning, walCommit + "
        "commitOffsets = commit, addBatch = task launch + fetch + decode + the "
        "sink's collect):",
        "",
        "| Source | " + " | ".join(phases) + " |",
        "|---|" + "---:|" * len(phases),
    ]
    for fmt in sources:
        lines.append(
            f"| {LATENCY_NAMES[fmt]} | "
            + " | ".join(
                f"{statistics.median(x['phases'].get(ph, 0) for x in lat[fmt]):.0f}"
                for ph in phases
            )
            + " |"
        )
    lines += slowest_micro_batches(lat, r.get("latency_trace") or [], sources)
    parts = r.get("our_parts")
    lines += issue_phases(lat, parts, args)
    if parts:
        lines += [
            "",
            f"Our source's own parts of one micro-batch, timed in the child driver "
            f"against the same producer (medians of 20): `latestOffset` "
            f"{parts['latest_ms']:.1f} ms and `partitions` "
            f"{parts['partitions_ms']:.1f} ms (the driver's offsets and planning); "
            f"one task's `read_range` of its ranges {parts['read_range_ms']:.1f} ms "
            f"(fetch + decode, its connections included; "
            f"{parts.get('tasks') or '?'} task(s) a micro-batch), of which bare "
            f"Fetches of the same offsets by a connected client take "
            f"{parts['fetch_ms']:.1f} ms (broker and network); the rest of addBatch "
            "is Spark's task launch, the Python worker's round trip and the sink.",
        ]
    return lines


def _trace_in(trace: list, begin: float, end: float) -> dict[str, float]:
    """Milliseconds of each traced event kind inside [begin, end] (overlap only), and the
    count of Python processes started in it (``processes started``)."""
    out: dict[str, float] = {}
    for t0, t1, _pid, event in trace:
        if event.startswith("process started"):
            if begin <= t0 <= end:
                out["processes started"] = out.get("processes started", 0) + 1
            continue
        kind = "gc" if event.startswith("gc") else event
        overlap = min(t1, end) - max(t0, begin)
        if overlap > 0 or (t0 == t1 and begin <= t0 <= end):
            out[kind] = out.get(kind, 0.0) + max(overlap, 0.0) * 1000
    return out


TRACED = ("latestOffset", "partitions", "read", "fetch", "commit", "gc", "processes started")


def slowest_micro_batches(lat: dict, trace: list, sources: list) -> list[str]:
    """What the slowest 1% of micro-batches (by Spark's triggerExecution, at least one a run)
    have against the median one: Spark's phases and what the Python processes traced in
    their time (our source's calls, the floor's, garbage collections, new Python
    processes), and the time the micro-batch waited to start after the one before ended."""
    if not all(x.get("micro_batches") for f in sources for x in lat[f]):
        return []
    header = ["Source", "micro-batches", *PHASES, "gap before", *TRACED]
    rows = []
    for fmt in sources:
        batches = []
        for x in lat[fmt]:
            mbs = sorted(x["micro_batches"], key=lambda b: b["start"])
            lo, hi = x.get("window") or (mbs[0]["start"], mbs[-1]["start"] + 1e9)
            for prev, b in zip([None] + mbs[:-1], mbs):
                if not lo <= b["start"] <= hi:
                    continue
                end = b["start"] + b["ms"]["triggerExecution"] / 1000
                gap = (
                    0.0
                    if prev is None
                    else max(
                        0.0, (b["start"] - prev["start"]) * 1000 - prev["ms"]["triggerExecution"]
                    )
                )
                batches.append(
                    (b, gap, _trace_in(trace, b["start"], end) if fmt != "kafka" else {})
                )
        if not batches:
            continue
        by_time = sorted(batches, key=lambda t: t[0]["ms"]["triggerExecution"])
        k = max(len(lat[fmt]), round(len(by_time) / 100))
        slow, median_set = by_time[-k:], by_time

        def cell(group, key, trace_key=False, gap=False):
            if fmt == "kafka" and trace_key:
                return "-"
            vals = [
                (t[1] if gap else t[2].get(key, 0.0) if trace_key else t[0]["ms"][key])
                for t in group
            ]
            return f"{(statistics.mean if group is slow else statistics.median)(vals):.0f}"

        for label, group in (
            (f"{LATENCY_NAMES[fmt]}: median", median_set),
            (f"{LATENCY_NAMES[fmt]}: slowest 1% ({len(slow)})", slow),
        ):
            rows.append(
                f"| {label} | {len(group)} | "
                + " | ".join(cell(group, ph) for ph in PHASES)
                + " | "
                + cell(group, None, gap=True)
                + " | "
                + " | ".join(cell(group, t, trace_key=True) for t in TRACED)
                + " |"
            )
    return [
        "",
        "The slowest micro-batches against the median one (ms; Spark's `durationMs` "
        "phases, the wait after the micro-batch before, and what the Python processes "
        "traced during the micro-batch: our source's or the floor's `latestOffset`, "
        "`partitions`, a task's `read` and `commit`, each Fetch round trip of ours, "
        "garbage collections of 1 ms or more in any Python process, and the count of "
        "Python processes started; medians for the median row, means for the "
        "slowest):",
        "",
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
        *rows,
    ]


def issue_phases(lat: dict, parts: dict | None, args) -> list[str]:
    """The issue's phases of one micro-batch (median ms): offsets, planning, task launch,
    fetch, decode, commit. Spark's durationMs gives offsets, planning and commit for both;
    addBatch holds the rest. For ours, fetch and decode come from our own timings of one
    task (``our_parts``), times the waves of tasks a micro-batch runs (its tasks / cores),
    and task launch (with the sink's collect) is what addBatch leaves."""

    def med(fmt, *phases):
        return statistics.median(sum(x["phases"].get(p, 0) for p in phases) for x in lat[fmt])

    tasks = (parts or {}).get("tasks") or args.stream_partitions
    waves = math.ceil(tasks / args.cores)
    rows = []
    for fmt, name in (("kafka", "JVM connector"), ("pykafka", "ours")):
        offsets, planning = med(fmt, "latestOffset"), med(fmt, "queryPlanning", "getBatch")
        commit, add = med(fmt, "walCommit", "commitOffsets"), med(fmt, "addBatch")
        whole = med(fmt, "triggerExecution")
        if fmt == "pykafka" and parts and parts.get("read_range_ms") is not None:
            fetch = parts["fetch_ms"] * waves
            decode = max(0.0, parts["read_range_ms"] - parts["fetch_ms"]) * waves
            cells = [f"{add - fetch - decode:.0f}", f"{fetch:.1f}", f"{decode:.1f}"]
        else:
            cells = [f"{add:.0f} (with fetch and decode)", "in task", "in task"]
        rows.append(
            f"| {name} | {offsets:.0f} | {planning:.0f} | {' | '.join(cells)} | "
            f"{commit:.0f} | {whole:.0f} |"
        )
    return [
        "",
        f"The same micro-batch in the issue's phases (ms; fetch and decode of ours: one "
        f"task's, times the {waves} wave(s) of its {tasks:g} task(s) on {args.cores} "
        "cores; task launch = addBatch minus them, with Spark's Python worker round "
        "trip and the foreachBatch collect):",
        "",
        "| Connector | offsets | planning | task launch + sink | fetch | decode | commit | "
        "micro-batch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]


def goals(r: dict) -> list[str]:
    cases, out = r.get("cases", {}), []
    for name, goal in (("read 100B", GOAL_READ_100B), ("read 1KB", GOAL_READ_1KB)):
        if name in cases:
            x = ratio(cases[name])
            floor = (
                f"; {ratio(cases[name], 'pykafka', FLOOR):.2f} of Spark's floor for a Python source"
                if FLOOR in cases[name]
                else ""
            )
            stretch = (
                f"; the stretch, {GOAL_READ_100B_STRETCH:g}x: "
                f"{verdict(x >= GOAL_READ_100B_STRETCH)}"
                if name == "read 100B"
                else ""
            )
            out.append(
                f"- {name.replace('read ', 'read, ')} >= {goal:g}x the JVM connector: "
                f"{verdict(x >= goal)} ({x:.2f}x; by CPU per record, all processes, "
                f"{cpu_ratio(cases[name]):.2f}x{floor}{stretch})"
            )
    for name in ("read 100B-lz4", "read 100B-zstd"):
        if name in cases:
            out.append(
                f"- (no goal) {name.replace('read ', 'read, ')}: {ratio(cases[name]):.2f}x "
                f"(by CPU {cpu_ratio(cases[name]):.2f}x)"
            )
    fw = r.get("first_write_fresh") or r.get("first_write")
    if "write" in cases:
        steady = ratio(cases["write"])
        first = fw["kafka"] / fw["pykafka"] if fw else float("nan")
        w = cases["write"]
        ceiling = ""
        if FLOOR in w and fw and FLOOR in fw:
            ceiling = (
                f"; Spark's floor for a Python sink, which drops the rows, reaches "
                f"{ratio(w, FLOOR, 'kafka'):.2f}x warm and "
                f"{fw['kafka'] / fw[FLOOR]:.2f}x on a first write"
            )
        of_floor = f"; {ratio(w, 'pykafka', FLOOR):.2f} of the floor" if FLOOR in w else ""
        out.append(
            f"- a warm write >= {GOAL_WRITE}x the JVM connector: "
            f"{verdict(steady >= GOAL_WRITE)} ({steady:.2f}x, by CPU "
            f"{cpu_ratio(cases['write']):.2f}x{of_floor}{ceiling})"
        )
        ours = w["pykafka"]
        cpu = sum(cpu_per_m(ours, k) for k in KINDS)  # CPU s per million rows, all processes
        bound = os.cpu_count() * 1e6 / cpu
        rate = statistics.median(_rates(ours))
        out.append(
            f"- a warm write at >= {GOAL_WRITE_OF_CPU_BOUND:g} of what its CPU per row allows "
            f"on {os.cpu_count()} cores: {verdict(rate >= GOAL_WRITE_OF_CPU_BOUND * bound)} "
            f"({rate / bound:.2f}: {_fmt_rate(rate)}/s against {_fmt_rate(bound)}/s, "
            f"{cpu:.2f} CPU s per million rows)"
        )
        if FLOOR in w:
            task = cpu_per_m(ours, "python workers") - cpu_per_m(w[FLOOR], "python workers")
            out.append(
                f"- a warm write's task, our Python workers' CPU beyond the write floor's, "
                f"<= {GOAL_WRITE_TASK_CPU:g} s per million rows: "
                f"{verdict(task <= GOAL_WRITE_TASK_CPU)} ({task:.2f} s)"
            )
        out.append(
            f"- a first write in a fresh session >= {GOAL_FIRST_WRITE:g}x the JVM "
            f"connector's: {verdict(first >= GOAL_FIRST_WRITE)} ({first:.2f}x)"
        )
        own = first_write_own_cost((r.get("first_write_profile") or {}).get("trace") or [])
        if own is not None:
            out.append(
                f"- a first write's own cost, our imports plus our steps beyond a warm "
                f"write's, <= {GOAL_FIRST_WRITE_OWN_S:g} s: "
                f"{verdict(sum(own) <= GOAL_FIRST_WRITE_OWN_S)} ({sum(own):.2f} s: imports "
                f"{own[0]:.2f} s, steps {own[1]:.2f} s)"
            )
        for name in ("write headers", "write lz4"):
            if name in cases and all(f in cases[name] for f in FORMATS):
                floor = (
                    f"; {ratio(cases[name], 'pykafka', FLOOR):.2f} of the floor"
                    if FLOOR in cases[name]
                    else ""
                )
                out.append(
                    f"- (beside it, no goal) {CASE_LABELS[name]}: "
                    f"{ratio(cases[name]):.2f}x (by CPU "
                    f"{cpu_ratio(cases[name]):.2f}x{floor})"
                )
    lat = r.get("latency")
    if lat and all(lat.get(f) for f in FORMATS):
        p50, p99 = (
            statistics.median(x[k] for x in lat["pykafka"])
            / statistics.median(x[k] for x in lat["kafka"])
            for k in ("p50", "p99")
        )
        out.append(
            f"- stream latency p50 and p99 <= {GOAL_LATENCY:g}x the JVM connector's "
            f"(median of the runs): {verdict(max(p50, p99) <= GOAL_LATENCY)} (p50 "
            f"{p50:.2f}x, p99 {p99:.2f}x)"
        )
        if lat.get(CLOCK):
            per_run = [a["p99"] / b["p99"] for a, b in zip(lat["pykafka"], lat[CLOCK])]
            long_enough = r.get("latency_seconds", 0) >= 120 and len(per_run) >= 3
            out.append(
                f"- stream latency p99 <= {GOAL_LATENCY_P99_FLOOR:g}x Spark's floor's "
                f"in every run (three runs of two minutes or more): "
                f"{verdict(long_enough and max(per_run) <= GOAL_LATENCY_P99_FLOOR)} ("
                + ", ".join(f"{x:.2f}x" for x in per_run)
                + ("" if long_enough else "; fewer or shorter runs than the goal asks")
                + ")"
            )
    if "avro decoded" in cases and "avro raw" in cases:
        vs_from = ratio(cases["avro decoded"])
        ours_raw = statistics.median(
            d / w
            for d, w in zip(
                _rates(cases["avro decoded"]["pykafka"]), _rates(cases["avro raw"]["pykafka"])
            )
        )
        jvm_raw = statistics.median(
            d / w
            for d, w in zip(
                _rates(cases["avro decoded"]["kafka"]), _rates(cases["avro raw"]["kafka"])
            )
        )
        by_cpu = cpu_ratio(cases["avro decoded"])
        floor_cpu = ""
        if FLOOR in cases["avro decoded"]:
            floor_cpu = (
                f"; Spark's floor, which reads the typed columns ready made, reaches "
                f"{cpu_ratio(cases['avro decoded'], FLOOR):.2f}x by CPU"
            )
        out.append(
            f"- registry Avro >= {GOAL_AVRO_VS_FROM_AVRO:.0f}x from_avro over the JVM "
            f"connector by CPU per record: {verdict(by_cpu >= GOAL_AVRO_VS_FROM_AVRO)} "
            f"({by_cpu:.2f}x{floor_cpu}; by rate {vs_from:.2f}x)"
        )
        floor = ""
        if FLOOR in cases["avro decoded"] and FLOOR in cases["avro raw"]:
            typed, binary = (
                statistics.median(_rates(cases[c][FLOOR])) for c in ("avro decoded", "avro raw")
            )
            floor = (
                f"; Spark's floor reads the five typed columns ready made at "
                f"{_fmt_rate(typed)}/s and one binary column at {_fmt_rate(binary)}/s: "
                f"decoded, ours keeps {ratio(cases['avro decoded'], 'pykafka', FLOOR):.2f}"
                f" of the typed floor; raw, {ratio(cases['avro raw'], 'pykafka', FLOOR):.2f}"
                " of the binary one"
            )
        out.append(
            f"- registry Avro >= {GOAL_AVRO_VS_RAW}x our raw-bytes read of the same "
            f"topic: {verdict(ours_raw >= GOAL_AVRO_VS_RAW)} ({ours_raw:.2f}x; the "
            f"JVM's from_avro keeps {jvm_raw:.2f}x of its raw read{floor})"
        )
        py = {
            (c, f): cpu_per_m(cases[c][f], "python workers")
            for c in ("avro decoded", "avro raw")
            for f in ("pykafka", FLOOR)
            if f in cases[c]
        }
        over = py["avro decoded", "pykafka"] - py["avro raw", "pykafka"]
        spark_own = ""
        if ("avro decoded", FLOOR) in py and ("avro raw", FLOOR) in py:
            spark_own = (
                f"; Spark's floor's Python workers: "
                f"{py['avro decoded', FLOOR] - py['avro raw', FLOOR]:+.2f} s for typed columns "
                "over one binary column"
            )
        out.append(
            f"- registry Avro: our Python workers' CPU per million values at most the raw "
            f"read's + {GOAL_AVRO_WORKERS_OVER_RAW:g} s: "
            f"{verdict(over <= GOAL_AVRO_WORKERS_OVER_RAW)} ({over:+.2f} s: "
            f"{py['avro decoded', 'pykafka']:.2f} s against {py['avro raw', 'pykafka']:.2f} s"
            f"{spark_own})"
        )
    if "json decoded" in cases:
        js = cases["json decoded"]
        x, by_cpu = ratio(js), cpu_ratio(js)
        out.append(
            f"- registry JSON Schema >= {GOAL_JSON_VS_FROM_JSON:.0f}x from_json (schema given) "
            f"over the JVM connector, by rate and by CPU: "
            f"{verdict(min(x, by_cpu) >= GOAL_JSON_VS_FROM_JSON)} ({x:.2f}x; by CPU "
            f"{by_cpu:.2f}x; our Python workers {cpu_per_m(js['pykafka'], 'python workers'):.2f}"
            " s per million values)"
        )
    if "protobuf decoded" in cases:
        pb = cases["protobuf decoded"]
        x, by_cpu = ratio(pb), cpu_ratio(pb)
        out.append(
            f"- registry Protobuf >= {GOAL_PROTOBUF_VS_FROM_PROTOBUF:.0f}x from_protobuf, by "
            "rate and by CPU: not measured (Maven does not serve the spark-protobuf jar here). "
            "Against the JVM connector's raw read of the same topic, which from_protobuf can "
            f"only be slower than: {x:.2f}x, by CPU {by_cpu:.2f}x, at least that against "
            "from_protobuf: "
            + (
                "**met** (shown by the lower bound)"
                if min(x, by_cpu) >= GOAL_PROTOBUF_VS_FROM_PROTOBUF
                else "**not shown** (the lower bound is below the goal)"
            )
            + " (our Python workers "
            f"{cpu_per_m(pb['pykafka'], 'python workers'):.2f} s per million values)"
        )
    return out


if __name__ == "__main__":
    import argparse
    import types

    sys.path.insert(0, HERE)
    ap = argparse.ArgumentParser(description="the jvm section's registry formats' cases")
    ap.add_argument("--formats", action="store_true", required=True)
    ap.add_argument("--scale", type=float, default=0.3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jvm-warmups", type=int, default=1)
    a = ap.parse_args()
    began = time.monotonic()
    settings = types.SimpleNamespace(
        avro_records=1_000_000, partitions=4, cores=2, **{k: v for k, v in vars(a).items()}
    )
    out = run_formats(settings, lambda m: print(f"[{time.monotonic() - began:6.1f}] {m}"))
    print("\n".join(out))
