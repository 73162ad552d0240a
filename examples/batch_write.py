"""Batch write: a DataFrame into a Kafka topic with df.write.format("pykafka").

    .venv/bin/python examples/batch_write.py                                  # embedded Kafka
    .venv/bin/python examples/batch_write.py --bootstrap-servers localhost:9092

The DataFrame needs a `value` column (string or binary); `key`, `headers`, `partition`,
`timestamp` and `topic` columns are optional. Rows are written by an idempotent producer:
a task's retries never duplicate or reorder records.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from _broker import arguments, create_topic, kafka, spark_session

ORDERS = 1_000
PARTITIONS = 3


def main() -> None:
    args = arguments(__doc__, topic="example-orders")
    with kafka(args.bootstrap_servers) as (bootstrap, cluster):
        create_topic(bootstrap, cluster, args.topic, PARTITIONS)  # the sink never creates
        spark = spark_session("pykafka-batch-write")
        try:
            # Some orders: the customer is the key (same key, same partition), the order a
            # JSON value, and a header says which system wrote it.
            orders = spark.range(ORDERS).selectExpr(
                "format_string('customer-%03d', id % 40) AS key",
                "to_json(named_struct('order', id, 'amount', (id * 37) % 500,"
                "                     'currency', 'EUR')) AS value",
                "array(named_struct('key', 'source',"
                "                   'value', cast('batch_write.py' AS binary))) AS headers",
            )

            (
                orders.write.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", args.topic)
                .option("kafka.compression.type", "zstd")  # none, gzip, snappy, lz4, zstd
                .mode("append")  # Spark's Kafka sinks append; the default mode is refused
                .save()
            )
            print(f"wrote {ORDERS} records to topic {args.topic!r}")

            # Read the topic back to see where the records went.
            written = (
                spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", args.topic)
                .option("includeHeaders", "true")
                .load()
            )
            per_partition = (
                written.groupBy("partition")
                .agg(F.count("*").alias("records"), F.count_distinct("key").alias("customers"))
                .orderBy("partition")
            )
            for row in per_partition.collect():
                print(
                    f"partition {row.partition}: {row.records} records, {row.customers} customers"
                )
            first = written.orderBy("partition", "offset").first()
            print(
                f"first record: key={first.key.decode()} value={first.value.decode()} "
                f"headers={[(h.key, h.value.decode()) for h in first.headers]}"
            )
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
