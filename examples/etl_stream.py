"""Streaming ETL, topic to topic: JSON clicks in, clicks per user and minute out.

    .venv/bin/python examples/etl_stream.py                                   # embedded Kafka
    .venv/bin/python examples/etl_stream.py --bootstrap-servers localhost:9092

readStream.format("pykafka") reads the clicks, Spark parses the JSON values and counts
clicks per user in one-minute event-time windows (the records' Kafka timestamps), and
writeStream.format("pykafka") writes each finished window to the output topic as JSON,
keyed by user. Spark refuses the update output mode for Python data sources, so the
windows are closed by a watermark (append mode): a window is written once the watermark
(the latest event time seen, minus the allowed lateness) has passed its end.
"""

from __future__ import annotations

import tempfile

from pyspark.sql import functions as F

from _broker import arguments, create_topic, kafka, spark_session

CLICKS = 1_200
USERS = 6
MINUTES = 4  # the clicks fall into four one-minute windows
START_MS = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC


def seed(spark, bootstrap: str, topic: str) -> None:
    """CLICKS clicks spread over MINUTES minutes, then one click ten minutes later that
    moves the watermark past the end of every earlier window."""

    def write(clicks):
        (
            clicks.selectExpr(
                "user AS key",
                "to_json(named_struct('user', user, 'page', '/cart', 'at', timestamp)) AS value",
                "timestamp",
            )  # the record's Kafka timestamp
            .write.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .mode("append")
            .save()
        )

    # One Spark partition, so each Kafka partition receives its clicks in time order
    # (parallel tasks would interleave them, and the watermark would drop the stragglers).
    write(
        spark.range(0, CLICKS, 1, numPartitions=1).selectExpr(
            f"format_string('user-%d', id % {USERS}) AS user",
            f"timestamp_millis({START_MS} + id * {MINUTES * 60_000 // CLICKS}) AS timestamp",
        )
    )
    write(
        spark.range(1).selectExpr(
            "'user-0' AS user", f"timestamp_millis({START_MS + 10 * 60_000}) AS timestamp"
        )
    )


def main() -> None:
    args = arguments(
        __doc__, input_topic="example-clicks", output_topic="example-clicks-per-minute"
    )
    with kafka(args.bootstrap_servers) as (bootstrap, cluster):
        create_topic(bootstrap, cluster, args.input_topic, 2)
        create_topic(bootstrap, cluster, args.output_topic, 2)
        spark = spark_session("pykafka-etl-stream")
        try:
            seed(spark, bootstrap, args.input_topic)

            # Extract: the clicks as they arrive.
            clicks = (
                spark.readStream.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", args.input_topic)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "500")
                .load()
            )
            # Transform: parse, then count per user and minute of event time.
            parsed = clicks.select(
                F.from_json(
                    F.col("value").cast("string"), "user STRING, page STRING, at TIMESTAMP"
                ).alias("click"),
                "timestamp",
            )
            per_minute = (
                parsed.withWatermark("timestamp", "30 seconds")
                .groupBy(F.window("timestamp", "1 minute"), "click.user")
                .agg(F.count("*").alias("clicks"))
            )
            # Load: key = user, value = JSON; the record timestamp is the window's end.
            out = per_minute.select(
                F.col("user").alias("key"),
                F.to_json(
                    F.struct(F.col("user"), F.col("window.start").alias("minute"), "clicks")
                ).alias("value"),
                F.col("window.end").alias("timestamp"),
            )

            with tempfile.TemporaryDirectory() as checkpoint:
                query = (
                    out.writeStream.format("pykafka")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", args.output_topic)
                    .option("checkpointLocation", checkpoint)
                    .outputMode("append")
                    .trigger(availableNow=True)
                    .start()
                )
                if not query.awaitTermination(timeout=300):
                    query.stop()
                    raise SystemExit("the query did not finish in time")
                batches = [p["numInputRows"] for p in query.recentProgress]
                print(f"{len(batches)} micro-batches read {sum(batches)} clicks")

            # What the output topic holds now.
            windows = (
                spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", args.output_topic)
                .load()
                .select(
                    F.from_json(
                        F.col("value").cast("string"), "user STRING, minute TIMESTAMP, clicks LONG"
                    ).alias("w")
                )
                .select("w.*")
            )
            rows = windows.orderBy("minute", "user").collect()
            for row in rows[:USERS]:
                print(f"{row.minute:%H:%M} {row.user}: {row.clicks} clicks")
            print(
                f"{len(rows)} windows written to {args.output_topic!r}, "
                f"{sum(r.clicks for r in rows)} clicks in them"
            )
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
