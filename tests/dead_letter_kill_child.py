"""A streaming driver for ``tests/test_dead_letter_faults.py`` to kill: topic to topic with
``exactlyOnce`` and ``deadLetterTopic``, ``Trigger.AvailableNow`` a few hundred records a
micro-batch, in a session of its own (``PYKAFKA_TEST_KILL_SESSION``) on master
``local[2,2]`` (a failed task is retried once), so that the test's
``PYKAFKA_TEST_KILL_AT`` SIGKILLs the driver and its JVM at one point of one micro-batch
and ``PYKAFKA_TEST_FAIL_AT`` ends a Python worker at once, as a lost executor ends.
Exits 0 once the query has read everything there was when it started.

    python -m tests.dead_letter_kill_child BOOTSTRAP SOURCE TARGET DLT CHECKPOINT PREFIX
"""

from __future__ import annotations

import os
import sys

from tests.child_session import child_spark
from tests.helpers.kill_points import SESSION_ENV

#: Source offsets per micro-batch (over all partitions).
PER_TRIGGER = 60


def main(bootstrap: str, source: str, target: str, dlt: str, checkpoint: str, prefix: str):
    os.environ[SESSION_ENV] = str(os.getpid())  # the JVM and its workers inherit it
    spark = child_spark("local[2,2]", "pykafka-dead-letter-kill-child")
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
        .option("minPartitions", "3")  # a task per source partition, not one for all
        .load()
        .selectExpr("key", "value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("deadLetterTopic", dlt)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", prefix)
        .option("kafka.linger.ms", "200")  # refused batches of several records
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    error = query.exception()
    spark.stop()
    if error is not None:
        raise SystemExit(f"query failed: {error}")


if __name__ == "__main__":
    main(*sys.argv[1:7])
