"""A streaming driver for ``tests/test_sink_exactly_once_spark.py`` to crash: topic to
topic with ``exactlyOnce``, run as a child process in a session of its own with
``PYKAFKA_TEST_KILL_AT`` set (it sets ``PYKAFKA_TEST_KILL_SESSION`` itself), so that
``kafka_sink.kill_points`` SIGKILLs the driver and its JVM at one point of one
micro-batch.

    python -m tests.eos_stream_child BOOTSTRAP SOURCE TARGET CHECKPOINT PREFIX
"""

from __future__ import annotations

import os
import sys

from kafka_sink.kill_points import SESSION_ENV


def pipeline(spark, bootstrap: str, source: str, target: str, checkpoint: str, prefix: str):
    """The query of the crashed run and of the restart (not started)."""
    return (spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", target)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", prefix)
            .option("checkpointLocation", checkpoint))


def main(bootstrap: str, source: str, target: str, checkpoint: str, prefix: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ[SESSION_ENV] = str(os.getpid())  # the JVM and its workers inherit it
    from pyspark.sql import SparkSession

    from kafka_source import KafkaDataSource

    spark = (SparkSession.builder.master("local[2]").appName("pykafka-eos-child")
             .config("spark.ui.enabled", "false")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)
    query = pipeline(spark, bootstrap, source, target, checkpoint, prefix) \
        .trigger(processingTime="200 milliseconds").start()
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
