"""Exactly-once, topic to topic: every order is in the output topic once, even when the
query runs again from its checkpoint.

    .venv/bin/python examples/exactly_once.py                                 # embedded Kafka
    .venv/bin/python examples/exactly_once.py --bootstrap-servers localhost:9092

writeStream.format("pykafka") with exactlyOnce=true writes each micro-batch in Kafka
transactions that the driver commits once Spark commits the batch, together with a marker
of the batch id, so a batch re-run after a crash is recognised and not written twice.
Readers see the result with kafka.isolation.level=read_committed (Kafka consumers:
isolation.level=read_committed). The embedded broker (librdkafka's mock cluster) accepts
transactions but does not enforce them; against a real Kafka they are what they say.
"""

from __future__ import annotations

import tempfile

from _broker import arguments, create_topic, kafka, spark_session

ORDERS = 1_000


def pipeline(spark, bootstrap: str, source: str, target: str, checkpoint: str):
    orders = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "300")
        .load()
    )
    paid = orders.selectExpr("key", "CONCAT('paid:', CAST(value AS STRING)) AS value")
    return (
        paid.writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        # one prefix per query: the transactional ids and batch markers derive from it
        .option("transactionalIdPrefix", f"example-{target}")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )


def read_committed(spark, bootstrap: str, topic: str, embedded: bool):
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
    )
    if embedded:  # the mock cluster writes its commit markers with a zero CRC
        reader = reader.option("kafka.check.crcs", "false")
    return reader.load()


def main() -> None:
    args = arguments(__doc__, input_topic="example-orders-in", output_topic="example-orders-paid")
    with kafka(args.bootstrap_servers) as (bootstrap, cluster):
        create_topic(bootstrap, cluster, args.input_topic, 2)
        create_topic(bootstrap, cluster, args.output_topic, 2)
        spark = spark_session("pykafka-exactly-once")
        try:
            (
                spark.range(ORDERS)
                .selectExpr(
                    "CAST(id % 50 AS STRING) AS key", "format_string('order-%04d', id) AS value"
                )
                .write.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", args.input_topic)
                .mode("append")
                .save()
            )
            with tempfile.TemporaryDirectory() as checkpoint:
                for run in ("first run", "second run, same checkpoint"):
                    query = pipeline(
                        spark, bootstrap, args.input_topic, args.output_topic, checkpoint
                    ).start()
                    query.awaitTermination()
                    out = read_committed(
                        spark, bootstrap, args.output_topic, embedded=cluster is not None
                    )
                    print(
                        f"{run}: {len(query.recentProgress)} micro-batches, "
                        f"{out.count()} records in '{args.output_topic}', "
                        f"{out.select('value').distinct().count()} distinct"
                    )
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
