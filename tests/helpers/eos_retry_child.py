"""A batch-writing driver for ``tests/test_sink_exactly_once_spark.py`` whose Spark retries
a failed task once (master ``local[2,2]``; the test session's Spark allows no retry): it
writes 400 rows in two Spark partitions into TOPIC with ``exactlyOnce``. Run as a child
process with ``PYKAFKA_TEST_FAIL_AT`` set (``tests.helpers.kill_points.maybe_fail``) to make
chosen task attempts fail after their rows reached the broker. Exits 0 when the job
succeeded.

    python -m tests.helpers.eos_retry_child BOOTSTRAP TOPIC PREFIX
"""

from __future__ import annotations

import sys

from tests.helpers.child_session import child_spark

ROWS = 400


def main(bootstrap: str, topic: str, prefix: str) -> None:
    spark = child_spark("local[2,2]", "pykafka-eos-retry-child")
    (
        spark.range(0, ROWS, numPartitions=2)
        .selectExpr("CAST(id AS STRING) AS key", "CONCAT('v-', id) AS value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", prefix)
        .mode("append")
        .save()
    )
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
