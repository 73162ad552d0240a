"""A streaming driver for ``tests/test_dead_letter_faults.py`` to kill: topic to topic with
``exactlyOnce`` and ``deadLetterTopic``, ``Trigger.AvailableNow`` a few dozen records a
micro-batch, in a session of its own (``PYKAFKA_TEST_KILL_SESSION``) on master
``local-cluster[2,1,1024]``: a standalone master and two workers in the driver's JVM, each
starting one executor JVM with one core. The test's ``PYKAFKA_TEST_KILL_AT`` SIGKILLs the
driver with its JVM and executors at one point of one micro-batch,
``PYKAFKA_TEST_KILL_EXECUTOR_AT`` one executor JVM while its task's transaction is open, and
``PYKAFKA_TEST_FAIL_AT`` ends a Python worker at once (``tests/helpers/kill_points.py``).

Writes to stderr ``WORK_DIR <path>`` (where the standalone workers keep this application's
executor logs) once started, and ``EXECUTORS <ids>`` once the query has read everything
there was when it started and both executors are up again (a killed one replaced); then
exits 0.

With MODE ``reader`` the dead letters are the reader's instead: the source's values are
Avro records in Confluent's framing (``READER_SCHEMA``) or text that cannot be decoded,
and the reader copies the latter to DLT (``valueFormat``, ``deadLetterTopic`` and
``exactlyOnce`` on the reader, prefix ``PREFIX-r``); the writer writes the field ``v`` of
the others to TARGET with ``exactlyOnce``.

    python -m tests.helpers.dead_letter_kill_child BOOTSTRAP SOURCE TARGET DLT CHECKPOINT \
        PREFIX [MODE]
"""

from __future__ import annotations

import os
import sys
import time

from tests.helpers.child_session import child_spark
from tests.helpers.kill_points import SESSION_ENV

#: Source offsets per micro-batch (over all partitions).
PER_TRIGGER = 60
MASTER = "local-cluster[2,1,1024]"
EXECUTORS = 2
#: How long a new executor JVM may take to start and register on a loaded machine.
EXECUTOR_START_S = 180
#: The reader's schema of the source's values in MODE ``reader``.
READER_SCHEMA = '{"type": "record", "name": "R", "fields": [{"name": "v", "type": "string"}]}'


def main(
    bootstrap: str,
    source: str,
    target: str,
    dlt: str,
    checkpoint: str,
    prefix: str,
    mode: str = "writer",
):
    os.environ[SESSION_ENV] = str(os.getpid())  # the JVM and its workers inherit it
    conf = {"spark.executor.memory": "768m", "spark.ui.showConsoleProgress": "false"}
    spark = child_spark(MASTER, "pykafka-dead-letter-kill-child", conf)
    spark.sparkContext.setLogLevel("WARN")  # tasks lost on executors are logged as warnings
    work = os.path.join(spark.sparkContext._jvm.System.getenv("SPARK_HOME"), "work")
    print(f"WORK_DIR {os.path.join(work, spark.sparkContext.applicationId)}", file=sys.stderr)
    sys.stderr.flush()
    reader = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
        .option("minPartitions", "3")  # a task per source partition, not one for all
    )
    if mode == "reader":
        reader = (
            reader.option("valueFormat", "avro")
            .option("valueSchema", READER_SCHEMA)
            .option("deadLetterTopic", dlt)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", f"{prefix}-r")
        )
        rows = reader.load().selectExpr("key", "value.v AS value")
    else:
        rows = reader.load().selectExpr("key", "value")
    writer = rows.writeStream.format("pykafka")
    if mode != "reader":
        writer = writer.option("deadLetterTopic", dlt)
    query = (
        writer.option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", prefix)
        .option("kafka.linger.ms", "200")  # refused batches of several records
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    error = query.exception()
    print(f"EXECUTORS {' '.join(_executors_up(spark))}", file=sys.stderr)
    spark.stop()
    if error is not None:
        raise SystemExit(f"query failed: {error}")


def _executors_up(spark) -> list[str]:
    """The executor ids once ``EXECUTORS`` are registered (at most ``EXECUTOR_START_S``)."""
    deadline = time.monotonic() + EXECUTOR_START_S
    while True:
        seq = spark.sparkContext._jsc.sc().getExecutorIds()
        ids = sorted((seq.apply(i) for i in range(seq.size())), key=int)
        if len(ids) >= EXECUTORS or time.monotonic() > deadline:
            return ids
        time.sleep(0.2)  # waiting for the standalone worker's new executor


if __name__ == "__main__":
    main(*sys.argv[1:8])
