"""Batch read: a Kafka topic as a DataFrame with spark.read.format("pykafka").

    .venv/bin/python examples/batch_read.py                                   # embedded Kafka
    .venv/bin/python examples/batch_read.py --bootstrap-servers localhost:9092

Every row is one record: key and value (binary), topic, partition, offset, timestamp,
timestampType (and headers with includeHeaders=true). Parse the value with Spark's own
functions: here it is JSON.
"""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from _broker import arguments, create_topic, kafka, spark_session

EVENTS = 600
PARTITIONS = 3


def seed(spark, bootstrap: str, topic: str) -> None:
    """Write EVENTS page views (JSON) to the topic, 200 per partition."""
    views = spark.range(EVENTS).selectExpr(
        "format_string('user-%02d', id % 25) AS key",
        "to_json(named_struct('user', format_string('user-%02d', id % 25),"
        "                     'country', element_at(array('FR', 'DE', 'NL'), int(id % 3) + 1),"
        "                     'ms', id % 100)) AS value",
        f"int(id % {PARTITIONS}) AS partition",
    )
    (
        views.write.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )


def main() -> None:
    args = arguments(__doc__, topic="example-page-views")
    with kafka(args.bootstrap_servers) as (bootstrap, cluster):
        create_topic(bootstrap, cluster, args.topic, PARTITIONS)
        spark = spark_session("pykafka-batch-read")
        try:
            seed(spark, bootstrap, args.topic)

            # The whole topic: from the earliest to the latest offsets of the moment.
            df = (
                spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", args.topic)  # or subscribePattern, or assign
                .option("startingOffsets", "earliest")  # the default for batch reads
                .option("endingOffsets", "latest")  # the default too
                .load()
            )
            print(
                f"read {df.count()} records from {df.select('partition').distinct().count()}"
                f" partitions"
            )
            df.selectExpr(
                "CAST(key AS STRING) AS key",
                "CAST(value AS STRING) AS value",
                "partition",
                "offset",
            ).show(3, truncate=False)

            # Parse the JSON values and aggregate.
            schema = "user STRING, country STRING, ms INT"
            views = df.select(F.from_json(F.col("value").cast("string"), schema).alias("v"))
            for row in (
                views.groupBy("v.country")
                .agg(F.count("*").alias("views"), F.avg("v.ms").alias("avg_ms"))
                .orderBy("country")
                .collect()
            ):
                print(f"country {row.country}: {row.views} views, {row.avg_ms:.1f} ms on average")

            # An exact slice: offsets 10 to 19 of partition 0 (the end is exclusive).
            some = (
                spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("assign", json.dumps({args.topic: [0]}))
                .option("startingOffsets", json.dumps({args.topic: {"0": 10}}))
                .option("endingOffsets", json.dumps({args.topic: {"0": 20}}))
                .load()
            )
            offsets = [row.offset for row in some.select("offset").collect()]
            print(
                f"partition 0, offsets 10..19: {len(offsets)} records, offsets "
                f"{min(offsets)}..{max(offsets)}"
            )
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
