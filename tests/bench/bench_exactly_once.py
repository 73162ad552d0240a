"""What exactlyOnce costs: ``df.write.format("pykafka")`` of the same cached rows with the
idempotent producer (the default) and with ``exactlyOnce=true``, alternating, on Tansu.

Each round writes both ways to fresh topics; the ratio is taken within each round and
the median of the rounds is printed. Issue 15's goal: exactlyOnce within 15% of the
idempotent write (ratio >= 0.85) for 1 M rows.

Run: ``python tests/bench/bench_exactly_once.py [--rows N] [--partitions P] [--rounds R]
[--bootstrap H:P]``. ``exactly_once_write`` is what ``make bench`` (run.py) calls for its
row. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def exactly_once_write(df, bootstrap: str, topic: str, codec: str = "none") -> float:
    """Seconds for one exactlyOnce ``df.write`` (batch: one transaction per task,
    committed by the driver)."""
    start = time.perf_counter()
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.compression.type", codec)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", f"bench-{uuid.uuid4().hex[:8]}")
        .save()
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource
    from kafka_testbed import TansuBroker
    from protocol.client.cluster import KafkaClient

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = TansuBroker()
        broker.start()
        bootstrap = broker.bootstrap

    def topic() -> str:
        name = f"bench-eos-{uuid.uuid4().hex[:8]}"
        with KafkaClient(bootstrap_servers=bootstrap) as client:
            client.create_topics({name: args.partitions})
            client.wait_for_topics([name])
        return name

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)
    try:
        df = (
            spark.range(args.rows, numPartitions=args.partitions)
            .selectExpr(
                "format_string('%010d', id) AS key",
                "CONCAT(format_string('%010d', id), repeat('x', 90)) AS value",
            )
            .cache()
        )
        df.count()

        def idempotent(t):
            start = time.perf_counter()
            (
                df.write.format("pykafka")
                .mode("append")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", t)
                .save()
            )
            return time.perf_counter() - start

        idempotent(topic())  # warm up workers and connections
        exactly_once_write(df.limit(1000), bootstrap, topic())
        ratios, rates = [], {"idempotent": [], "exactlyOnce": []}
        for _ in range(args.rounds):
            a = idempotent(topic())
            b = exactly_once_write(df, bootstrap, topic())
            rates["idempotent"].append(args.rows / a)
            rates["exactlyOnce"].append(args.rows / b)
            ratios.append(a / b)
        for name, r in rates.items():
            print(
                f"{name:12s} {statistics.median(r) / 1e3:8.0f} k rows/s "
                f"(rounds: {', '.join(f'{x / 1e3:.0f}k' for x in r)})"
            )
        print(
            f"exactlyOnce / idempotent: {statistics.median(ratios):.2f} "
            f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
        )
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
