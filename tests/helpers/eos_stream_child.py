"""A streaming driver for ``tests/test_sink_exactly_once_spark.py`` to crash: topic to
topic with ``exactlyOnce``, run as a child process in a session of its own with
``PYKAFKA_TEST_KILL_AT`` set (it sets ``PYKAFKA_TEST_KILL_SESSION`` itself), so that
``tests.helpers.kill_points`` SIGKILLs the driver and its JVM at one point of one
micro-batch.

    python -m tests.helpers.eos_stream_child BOOTSTRAP SOURCE TARGET CHECKPOINT PREFIX
"""

from __future__ import annotations

import os
import sys

from tests.helpers.kill_points import SESSION_ENV
from tests.helpers.child_session import child_spark


def pipeline(
    spark,
    bootstrap: str,
    source: str,
    target: str,
    checkpoint: str,
    prefix: str,
    min_partitions: str | None = "2",
):
    """The query of the crashed run and of the restart (not started). By default a task per
    source partition: a micro-batch this small would be one task, and the kill between two
    tasks' commits needs two."""
    reader = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    if min_partitions is not None:
        reader = reader.option("minPartitions", min_partitions)
    return (
        reader.load()
        .selectExpr("key", "value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", prefix)
        .option("checkpointLocation", checkpoint)
    )


def main(bootstrap: str, source: str, target: str, checkpoint: str, prefix: str) -> None:
    os.environ[SESSION_ENV] = str(os.getpid())  # the JVM and its workers inherit it
    spark = child_spark("local[2]", "pykafka-eos-child")
    query = (
        pipeline(spark, bootstrap, source, target, checkpoint, prefix)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
