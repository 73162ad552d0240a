"""The Spark job of the ``pyfiles`` section of ``make bench`` (pyfiles_cases.py), run by
``spark-submit --master local[2]``: the connector either from the checkout on
``PYTHONPATH`` (as installed) or from the ``--py-files`` zip alone.

    spark-submit ... pyfiles_child.py <spec.json> <results.json>

``warmups`` untimed reads and writes (the session's first queries, the JVM's JIT, the
workers' imports and, from the zip, the extraction of the compiled extensions), then
``rounds`` times: ``spark.read`` of
the topic (with its headers column) into ``noop``, and ``df.write`` of the same rows, cached
beforehand, to a new topic. Each timed query records its wall seconds and the CPU seconds
of Spark's Python workers. Where the connector and its compiled record decoder and encoder
came from, on the driver and in the Python workers, goes into the results too. This file
imports nothing of the checkout: in the zip's run the connector must come from the zip.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid


def _ticks(pid: int, children: bool = False) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11 : 15 if children else 13])
    except (OSError, IndexError, ValueError):
        return 0


def worker_cpu() -> float:
    """CPU seconds so far of the Spark Python workers of this job (under spark-submit the
    JVM is this driver's parent, and the workers are the JVM's descendants): the daemon's
    own and its reaped children's, and each live forked worker's."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    ticks, stack = 0, list(tree.get(os.getppid(), []))
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "pyspark.daemon" in cmd or "pyspark/worker" in cmd or "pyspark.worker" in cmd:
            ticks += _ticks(pid, children=True)
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"pykafka-bench-pyfiles-{spec['mode']}").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import kafka_source
    from pyspark_pykafka import KafkaDataSource
    from protocol.client.cluster import KafkaClient
    from protocol.records import accel

    spark.dataSource.register(KafkaDataSource)
    bootstrap, topic, records = spec["bootstrap"], spec["topic"], spec["records"]
    out = {
        "mode": spec["mode"],
        "driver_import": kafka_source.__file__,
        "driver_accel": accel.origin(),
        "read": [],
        "write": [],
        "read_cpu": [],
        "write_cpu": [],
    }

    def read() -> None:
        (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .option("startingOffsets", "earliest")
            .load()
            .write.format("noop")
            .mode("overwrite")
            .save()
        )

    rows = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers")
        .cache()
    )
    if rows.count() != records:
        raise RuntimeError(f"{rows.count()} rows cached, {records} expected")

    def write() -> None:
        name = f"bench-pyfiles-out-{uuid.uuid4().hex[:8]}"
        with KafkaClient(bootstrap_servers=bootstrap) as client:
            client.create_topics({name: spec["partitions"]})
            client.wait_for_topics([name])
        (
            rows.write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", name)
            .save()
        )

    def timed(case: str, fn) -> None:
        cpu = worker_cpu()
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
        out[case].append(round(seconds, 4))
        out[case + "_cpu"].append(round(worker_cpu() - cpu, 3))
        print(
            f"[{time.strftime('%H:%M:%S')}]   {spec['mode']:<9} {case:<5} {seconds:6.2f} s "
            f"{records / seconds:11,.0f} records/s",
            flush=True,
        )

    for _ in range(spec["warmups"]):
        read()
        write()
    for _ in range(spec["rounds"]):
        timed("read", read)
        timed("write", write)

    def where(_):
        import protocol
        from protocol.records import accel as worker_accel

        yield protocol.__file__, worker_accel.origin()

    probes = spark.sparkContext.parallelize(range(4), 4).mapPartitions(where).collect()
    out["worker_imports"] = sorted({file for file, _ in probes})
    out["worker_accel"] = sorted({str(origin) for _, origin in probes})
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
    spark.stop()


if __name__ == "__main__":
    main()
