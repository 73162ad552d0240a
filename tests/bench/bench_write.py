"""Write throughput: ``df.write.format("pykafka")`` next to a confluent-kafka producer loop.

Every contender writes the same rows (10-byte keys, 100-byte values) to its own topic on a
Tansu broker started here (or the one given with ``--bootstrap``), with an idempotent
producer, acks=all and no compression:

- ``pykafka via Spark``: ``df.write.format("pykafka")`` of a cached DataFrame (so the rows
  are not generated inside the timed part), ``local[N]``;
- ``pykafka write_task``: the sink's task code alone, on Arrow batches already in memory
  (what one Spark task does, minus Spark);
- ``confluent-kafka loop``: ``Producer.produce`` per row over Python lists built before the
  clock starts, then ``flush`` (librdkafka, C, one process).

Run: ``python tests/bench/bench_write.py [--rows N] [--partitions P] [--bootstrap H:P]``.
Not collected by pytest (no test functions; ``tests/bench`` has no ``test_`` files).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KEY_SIZE = 10
VALUE_SIZE = 100


def make_topic(bootstrap: str, partitions: int) -> str:
    from protocol.client.cluster import KafkaClient

    name = f"bench-{uuid.uuid4().hex[:8]}"
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.create_topics({name: partitions})
    return name


def keys_values(n: int):
    keys = [b"%010d" % i for i in range(n)]
    values = [b"%010d" % i + b"x" * (VALUE_SIZE - 10) for i in range(n)]
    return keys, values


def bench_confluent(bootstrap: str, topic: str, n: int) -> float:
    import confluent_kafka

    keys, values = keys_values(n)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    start = time.perf_counter()
    for key, value in zip(keys, values):
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"confluent-kafka left {remaining} records undelivered")
    return elapsed


def bench_task(bootstrap: str, topic: str, n: int) -> float:
    import pyarrow as pa

    from kafka_sink.options import parse_writer_options
    from kafka_sink.validation import WritePlan
    from kafka_sink.writer import write_task

    keys, values = keys_values(n)
    key_arr, value_arr = pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    step = 10_000  # Spark's default spark.sql.execution.arrow.maxRecordsPerBatch
    batches = [
        pa.RecordBatch.from_arrays(
            [key_arr.slice(i, step), value_arr.slice(i, step)], names=["key", "value"]
        )
        for i in range(0, n, step)
    ]
    options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": topic})
    plan = WritePlan(topic, False, True, False, False, None)
    start = time.perf_counter()
    message = write_task(iter(batches), options, plan)
    elapsed = time.perf_counter() - start
    if message.records != n:
        raise RuntimeError(f"write_task wrote {message.records} of {n} records")
    return elapsed


def bench_spark(bootstrap: str, topic: str, n: int, cores: int) -> float:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("bench-write")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)
    try:
        df = (
            spark.range(0, n, 1, cores)
            .selectExpr(
                "cast(format_string('%010d', id) AS binary) AS key",
                f"cast(concat(format_string('%010d', id), repeat('x', {VALUE_SIZE - 10})) "
                "AS binary) AS value",
            )
            .cache()
        )
        df.count()
        # warm the Python workers with a tiny write to another topic
        warm = make_topic(bootstrap, 1)
        (
            df.limit(10)
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", warm)
            .save()
        )
        start = time.perf_counter()
        (
            df.write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .save()
        )
        return time.perf_counter() - start
    finally:
        spark.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N] and tasks")
    parser.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args(argv)

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from kafka_testbed import TansuBroker

        broker = TansuBroker()
        broker.start()
        bootstrap = broker.bootstrap
    try:
        n = args.rows
        results = []
        results.append(
            (
                "confluent-kafka loop",
                bench_confluent(bootstrap, make_topic(bootstrap, args.partitions), n),
            )
        )
        results.append(
            ("pykafka write_task", bench_task(bootstrap, make_topic(bootstrap, args.partitions), n))
        )
        if not args.skip_spark:
            results.append(
                (
                    f"pykafka via Spark local[{args.cores}]",
                    bench_spark(bootstrap, make_topic(bootstrap, args.partitions), n, args.cores),
                )
            )
    finally:
        if broker is not None:
            broker.stop()

    reference = results[0][1]
    mb = n * (KEY_SIZE + VALUE_SIZE) / 1e6
    print(
        f"\n{n:,} rows, {KEY_SIZE}-byte keys, {VALUE_SIZE}-byte values, "
        f"{args.partitions} partitions, acks=all, idempotent, no compression"
    )
    print(f"{'writer':<28} {'seconds':>8} {'rows/s':>12} {'MB/s':>8} {'vs confluent':>13}")
    for name, seconds in results:
        print(
            f"{name:<28} {seconds:8.2f} {n / seconds:12,.0f} {mb / seconds:8.1f} "
            f"{reference / seconds:12.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
