"""The demo: pyspark-pykafka on an embedded Kafka broker, start to finish.

    make demo                              # embedded broker (librdkafka's mock cluster)
    make demo BOOTSTRAP=localhost:9092     # a real Kafka, e.g. from docker-compose.yml

1. the protocol client: create a topic, produce record batches encoded from Arrow,
   list offsets, fetch and decode them back into Arrow;
2. df.write.format("pykafka"): sample orders written by Spark with the idempotent producer;
3. spark.read.format("pykafka"): the orders read back as a DataFrame and aggregated;
4. spark.readStream.format("pykafka"): the orders as a stream, drained with AvailableNow.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time

import pyarrow as pa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run from a checkout without installing

from protocol.client.cluster import KafkaClient  # noqa: E402
from protocol.errors import KafkaConnectionError, KafkaTimeoutError  # noqa: E402
from protocol.records import decode_records, encode_batch  # noqa: E402

TOPIC = "pykafka-demo"
ORDERS = "pykafka-demo-orders"
ORDER_COUNT = 10_000
PARTITIONS = 3
RECORDS_PER_PARTITION = 2_000


@contextlib.contextmanager
def broker(bootstrap: str | None):
    if bootstrap:
        yield bootstrap, None
        return
    from kafka_testbed import MockCluster

    with MockCluster(brokers=3) as cluster:
        yield cluster.bootstrap, cluster


def step(text: str) -> None:
    print(f"\n== {text}")


def create_topics(bootstrap: str, cluster) -> None:
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        for topic in (TOPIC, ORDERS):
            if cluster is not None:  # the mock cluster has no CreateTopics API
                cluster.create_topic(topic, PARTITIONS, 3)
            else:
                client.create_topics({topic: PARTITIONS}, exist_ok=True)
        client.wait_for_topics([TOPIC, ORDERS])


def protocol_demo(bootstrap: str) -> None:
    step("protocol client")
    with KafkaClient(bootstrap_servers=bootstrap) as client:
        meta = client.topic(TOPIC)
        print(
            f"topic {TOPIC!r}: {len(meta.partitions)} partitions, leaders "
            f"{ {p: info.leader for p, info in sorted(meta.partitions.items())} }"
        )
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        before = client.latest_offsets(tps)
        started = time.perf_counter()
        for p in range(PARTITIONS):
            n = RECORDS_PER_PARTITION
            keys = pa.array([f"user-{i % 50}".encode() for i in range(n)], pa.binary())
            values = pa.array(
                [f'{{"partition": {p}, "n": {i}, "amount": {i % 97}}}'.encode() for i in range(n)],
                pa.binary(),
            )
            for start in range(0, n, 500):  # four record batches per partition
                batch = encode_batch(
                    keys[start : start + 500],
                    values[start : start + 500],
                    timestamps_ms=int(time.time() * 1000),
                    compression="lz4",
                )
                answer = client.produce(TOPIC, p, batch, acks=-1)
                assert answer["error_code"] == 0, answer
        print(
            f"produced {PARTITIONS * RECORDS_PER_PARTITION} records in "
            f"{time.perf_counter() - started:.2f}s (lz4 record batches encoded from Arrow)"
        )
        earliest = client.earliest_offsets(tps)
        latest = client.latest_offsets(tps)
        print(
            "offsets per partition (earliest..latest):",
            ", ".join(
                f"{p}: {earliest[(TOPIC, p)]}..{latest[(TOPIC, p)]}" for p in range(PARTITIONS)
            ),
        )
        tp = (TOPIC, 0)
        part = client.fetch({tp: before[tp]})[tp]
        batch, next_offset = decode_records(
            part["records"], topic=TOPIC, partition=0, start_offset=before[tp]
        )
        print(
            f"fetched partition 0 from offset {before[tp]}: {batch.num_rows} records "
            f"decoded into Arrow, next offset {next_offset}; first value "
            f"{batch.column('value')[0].as_py()!r}"
        )


def spark_demo(bootstrap: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession, functions as F

    from pyspark_pykafka import KafkaDataSource

    step("starting Spark (local[2])")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pykafka-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)  # automatic once installed; explicit here
    try:
        step('df.write.format("pykafka")')
        orders = spark.range(ORDER_COUNT).select(
            F.concat(F.lit("customer-"), (F.col("id") % 50).cast("string")).alias("key"),
            F.to_json(
                F.struct(F.col("id").alias("order"), (F.col("id") % 97).alias("amount"))
            ).alias("value"),
        )
        started = time.perf_counter()
        (
            orders.write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", ORDERS)
            .save()
        )
        print(
            f"wrote {ORDER_COUNT} orders to {ORDERS!r} in {time.perf_counter() - started:.1f}s "
            "(keyed by customer: Java's partitioner places them)"
        )

        step('spark.read.format("pykafka")')
        df = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ORDERS)
            .load()
        )
        parsed = df.select(
            F.col("partition"),
            F.get_json_object(F.col("value").cast("string"), "$.amount")
            .cast("int")
            .alias("amount"),
        )
        for row in (
            parsed.groupBy("partition")
            .agg(F.count("*").alias("records"), F.sum("amount").alias("total"))
            .orderBy("partition")
            .collect()
        ):
            print(f"partition {row.partition}: {row.records} records, amount total {row.total}")

        step('spark.readStream.format("pykafka") with Trigger.AvailableNow')
        with tempfile.TemporaryDirectory() as tmp:
            query = (
                spark.readStream.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", ORDERS)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "2500")
                .load()
                .writeStream.format("parquet")
                .option("path", f"{tmp}/out")
                .option("checkpointLocation", f"{tmp}/checkpoint")
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(300)
            sizes = [p["numInputRows"] for p in query.recentProgress]
            total = spark.read.parquet(f"{tmp}/out").count()
            print(
                f"{len(sizes)} micro-batches of {sizes} records (maxOffsetsPerTrigger "
                f"2500); {total} rows in the sink"
            )
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bootstrap-servers",
        help="a Kafka to use instead of the embedded broker, e.g. localhost:9092",
    )
    parser.add_argument("--no-spark", action="store_true", help="only the protocol part")
    args = parser.parse_args()
    with broker(args.bootstrap_servers) as (bootstrap, cluster):
        print(
            f"broker: {bootstrap}"
            + (" (embedded librdkafka mock cluster)" if cluster is not None else "")
        )
        try:
            with KafkaClient(bootstrap_servers=bootstrap) as client:
                client.refresh_metadata([])  # fails at once when nothing answers there
            create_topics(bootstrap, cluster)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            sys.exit(unreachable_hint(bootstrap, e))
        protocol_demo(bootstrap)
        if not args.no_spark:
            spark_demo(bootstrap)
    print("\ndone.")


def unreachable_hint(bootstrap: str, error: Exception) -> str:
    """What to print, instead of a traceback, when the broker given is not there."""
    return (
        f"\ncannot reach the Kafka broker at {bootstrap}: {error}\n"
        "Is the broker running? Start one with `docker compose up -d` (docker-compose.yml"
        ") and try again, or run `make demo` without BOOTSTRAP to use the embedded "
        "broker."
    )


if __name__ == "__main__":
    main()
