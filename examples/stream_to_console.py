"""Streaming read: a Kafka topic to the console with spark.readStream.format("pykafka").

    .venv/bin/python examples/stream_to_console.py                            # embedded Kafka
    .venv/bin/python examples/stream_to_console.py --bootstrap-servers localhost:9092

The query runs with Trigger.AvailableNow: it reads what the topic holds when it starts, in
micro-batches of at most maxOffsetsPerTrigger records, then stops on its own. Drop the
trigger (or use processingTime="10 seconds") to keep reading new records as they come.
"""

from __future__ import annotations

import tempfile

from _broker import arguments, create_topic, kafka, spark_session

RECORDS = 500
PARTITIONS = 2


def main() -> None:
    args = arguments(__doc__, topic="example-sensor-readings")
    with kafka(args.bootstrap_servers) as (bootstrap, cluster):
        create_topic(bootstrap, cluster, args.topic, PARTITIONS)
        spark = spark_session("pykafka-stream-to-console")
        try:
            readings = spark.range(RECORDS).selectExpr(
                "format_string('sensor-%d', id % 4) AS key",
                "cast(round(20 + (id % 50) / 10, 1) AS string) AS value",
            )
            (
                readings.write.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", args.topic)
                .mode("append")
                .save()
            )

            stream = (
                spark.readStream.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", args.topic)
                .option("startingOffsets", "earliest")  # streams start at latest
                .option("maxOffsetsPerTrigger", "200")  # records per micro-batch
                .load()
                .selectExpr(
                    "CAST(key AS STRING) AS sensor",
                    "CAST(value AS STRING) AS celsius",
                    "partition",
                    "offset",
                )
            )

            with tempfile.TemporaryDirectory() as checkpoint:
                query = (
                    stream.writeStream.format("console")
                    .option("numRows", "3")
                    .option("truncate", "false")
                    .option("checkpointLocation", checkpoint)  # where progress is kept
                    .trigger(availableNow=True)
                    .start()
                )
                if not query.awaitTermination(timeout=300):  # seconds; True once finished
                    query.stop()
                    raise SystemExit("the query did not finish in time")
                sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
                print(f"{len(sizes)} micro-batches of {sizes} records, {sum(sizes)} in all")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
