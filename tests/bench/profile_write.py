"""Where a warm ``df.write`` spends its CPU, by process, beside Spark's floor for a Python
sink (issue 38): what ``docs/performance.md`` quotes for the write path.

    python tests/bench/profile_write.py [--rows 500000] [--rounds 6] [--py-spy] [--jfr]

One SparkSession ``local[2]`` (this checkout's connector, the ``.venv`` PySpark) on one
Apache Kafka node started here; rows of a 10-byte key and a 100-byte value cached first
(as the jvm section's write case); two warm-up writes of each, then ``--rounds`` rounds of
the floor (``floor_source.py``: tasks that drop Spark's Arrow batches) and ours to a new
4-partition topic each. For each: the median wall time and the CPU seconds per million rows
of Spark's JVM, its Python workers, the broker and this driver; the record batches the
topic holds (records and bytes per batch: with ``kafka.max.request.size`` equal to
``kafka.batch.size``, 1 MiB each by default, every Produce request of ours carries one).

``--py-spy``: a CPU profile of the Python workers over two more of our writes (py-spy, in
the dev extra), summarised as the functions of ours and Spark's that take the most
samples. ``--jfr``: a Java Flight Recorder profile of the broker and of Spark's JVM over
six more of our writes, then six of the floor's, summarised by top frame. The profilers'
outputs stay in a temporary folder whose path is printed. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _path in (ROOT, HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from jvm_child import cpu_between, cpu_snapshot  # noqa: E402


def _summarise_py_spy(raw_path: str, top: int = 18) -> list[str]:
    """The functions taking the most samples, counted where they sit on the stack
    (inclusive), ours and Spark's worker code only."""
    inclusive: collections.Counter = collections.Counter()
    total = 0
    with open(raw_path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            frames = stack.split(";")
            if not any("write_task" in fr or "_Writer.write" in fr for fr in frames):
                continue
            total += int(count)
            for fr in set(frames):
                name = fr.split(" (")[0]
                where = fr[fr.find("(") + 1 : fr.rfind(":")] if "(" in fr else ""
                if where.startswith(("kafka_", "protocol/", "serializers", "worker")):
                    inclusive[f"{name} ({where})"] += int(count)
    # the frames every sample holds (the task's entry, Spark's worker loop) say nothing
    return [
        f"{100 * n / max(total, 1):5.1f}%  {name}"
        for name, n in inclusive.most_common()
        if n < 0.99 * total
    ][:top]


def _summarise_jfr(path: str, top: int = 12) -> list[str]:
    """The top frames of a JFR recording's execution samples."""
    printed = subprocess.run(
        ["jfr", "print", "--events", "jdk.ExecutionSample", path],
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    frames = collections.Counter()
    samples = 0
    for event in printed.split("jdk.ExecutionSample")[1:]:
        found = re.findall(r"^\s+([\w$.<>]+)\(", event, re.M)
        if found:
            samples += 1
            frames[found[0]] += 1
    return [f"{samples} samples"] + [
        f"{100 * n / samples:5.1f}%  {name}" for name, n in frames.most_common(top)
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--py-spy", action="store_true")
    parser.add_argument("--jfr", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.chdir(ROOT)  # Spark's Python workers find this checkout first
    from pyspark.sql import SparkSession

    from floor_source import FloorDataSource
    from pyspark_pykafka import KafkaDataSource
    from kafka_testbed import NEWEST_KAFKA, KafkaCluster
    from protocol.client.cluster import KafkaClient
    from protocol.records.batch import iter_batches, parse_header

    work = tempfile.mkdtemp(prefix="profile-write-")
    with KafkaCluster(NEWEST_KAFKA, heap_mb=1024) as kafka:
        bootstrap = kafka.bootstrap
        broker_pids = [kafka.pid(n) for n in kafka.nodes]
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("profile-write")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        for name in ("floor_source.py", "bench_data.py"):  # the floor's module, on workers
            spark.sparkContext.addPyFile(os.path.join(HERE, name))
        spark.dataSource.register(KafkaDataSource)
        spark.dataSource.register(FloorDataSource)
        df = (
            spark.range(args.rows, numPartitions=4)
            .selectExpr(
                "CAST(lpad(CAST(id AS STRING), 10, '0') AS BINARY) AS key",
                "CAST(rpad(CAST(id AS STRING), 100, 'x') AS BINARY) AS value",
            )
            .cache()
        )
        df.count()
        topics: list[str] = []

        def write(fmt: str) -> float:
            if fmt == "floor":
                t = time.perf_counter()
                df.write.format("benchfloor").mode("append").save()
                return time.perf_counter() - t
            topic = f"profile-{uuid.uuid4().hex[:8]}"
            with KafkaClient(bootstrap_servers=bootstrap) as client:
                client.create_topics({topic: 4})
                client.wait_for_topics([topic])
            topics.append(topic)
            t = time.perf_counter()
            (
                df.write.format("pykafka")
                .mode("append")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", topic)
                .save()
            )
            return time.perf_counter() - t

        for _ in range(2):
            write("floor")
            write("pykafka")
        seconds = {"floor": [], "pykafka": []}
        cpu = {"floor": [], "pykafka": []}
        for r in range(args.rounds):
            for fmt in ("floor", "pykafka") if r % 2 == 0 else ("pykafka", "floor"):
                before = cpu_snapshot(broker_pids)
                seconds[fmt].append(write(fmt))
                cpu[fmt].append(cpu_between(before, cpu_snapshot(broker_pids)))
        print(
            f"\n{args.rows:,} rows (10 B keys, 100 B values), 4 partitions, local[2]; "
            f"medians of {args.rounds} rounds"
        )
        for fmt in ("floor", "pykafka"):
            m = statistics.median(seconds[fmt])
            kinds = sorted({k for c in cpu[fmt] for k in c} - {"other"})
            per_m = {
                k: round(statistics.median(c.get(k, 0.0) for c in cpu[fmt]) * 1e6 / args.rows, 2)
                for k in kinds
            }
            print(
                f"  {fmt:8s} {m:.3f} s  {args.rows / m / 1e3:,.0f} k rows/s  CPU s per M "
                f"rows: {json.dumps(per_m)}"
            )
        ratio = statistics.median(seconds["floor"]) / statistics.median(seconds["pykafka"])
        print(f"  ours / floor: {ratio:.2f}")

        with KafkaClient(bootstrap_servers=bootstrap) as client:  # the last topic's batches
            topic = topics[-1]
            counts, sizes = [], []
            for p in range(4):
                at = 0
                while True:
                    part = (
                        client.fetch(
                            {(topic, p): at}, max_wait_ms=100, partition_max_bytes=8 << 20
                        ).get((topic, p))
                        or {}
                    )
                    records = part.get("records") or b""
                    moved = False
                    for pos, _base, size, magic in iter_batches(records):
                        h = parse_header(records, pos)
                        next_offset = h.base_offset + h.last_offset_delta + 1
                        if magic != 2 or next_offset <= at:
                            continue
                        counts.append(next_offset - h.base_offset)
                        sizes.append(size)
                        at, moved = next_offset, True
                    if not moved:
                        break
        print(
            f"  record batches of one write: {len(counts)} ({len(counts) * 1e6 / args.rows:.0f}"
            f" per M rows), {statistics.median(counts):,.0f} records and "
            f"{statistics.median(sizes) / 1024:,.0f} KiB each (median): one a Produce "
            "request"
        )

        if args.py_spy:
            raw = os.path.join(work, "py-spy.txt")
            daemon = subprocess.run(
                ["pgrep", "-n", "-f", "pyspark.daemon pyspark.worker$"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            spy = subprocess.Popen(
                [
                    os.path.join(os.path.dirname(sys.executable), "py-spy"),
                    "record",
                    "--pid",
                    daemon,
                    "--subprocesses",
                    "--rate",
                    "250",
                    "--format",
                    "raw",
                    "--output",
                    raw,
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1)
            write("pykafka")
            write("pykafka")
            spy.send_signal(2)
            spy.wait(60)
            print("\nPython workers, our write (py-spy, inclusive share of the task's samples):")
            print("\n".join("  " + line for line in _summarise_py_spy(raw)))
        if args.jfr:
            spark_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
            for fmt in ("pykafka", "floor"):
                paths = {}
                for name, pid in (("broker", broker_pids[0]), ("spark", spark_pid)):
                    paths[name] = os.path.join(work, f"{name}-{fmt}.jfr")
                    subprocess.run(
                        [
                            "jcmd",
                            str(pid),
                            "JFR.start",
                            f"name={fmt}",
                            "settings=profile",
                            f"filename={paths[name]}",
                        ],
                        capture_output=True,
                        timeout=60,
                    )
                for _ in range(6):
                    write(fmt)
                for _name, pid in (("broker", broker_pids[0]), ("spark", spark_pid)):
                    subprocess.run(
                        ["jcmd", str(pid), "JFR.stop", f"name={fmt}"],
                        capture_output=True,
                        timeout=60,
                    )
                for name, path in paths.items():
                    if fmt == "floor" and name == "broker":
                        continue
                    print(f"\n{name} JVM during {fmt}'s writes (JFR, top frames):")
                    print("\n".join("  " + line for line in _summarise_jfr(path)))
        print(f"\n(profiles in {work})")
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
