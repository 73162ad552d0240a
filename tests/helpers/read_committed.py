"""Reading a topic as a read_committed consumer through the connector."""

from __future__ import annotations


def our_read_committed(spark, bootstrap, topic):
    return [
        r.v
        for r in spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .collect()
    ]
