"""Child drivers of tests/test_kafka_faults.py, each a process of its own (so the test can
kill it, or read everything it and its Python workers wrote to stderr).

    python -m tests.helpers.kafka_faults_child eos BOOTSTRAP SOURCE TARGET CHECKPOINT PREFIX
    python -m tests.helpers.kafka_faults_child read BOOTSTRAP TOPIC CHECKPOINT OUT STOPFILE \
        REQUEST_MS

``eos``: topic to topic with ``exactlyOnce`` (``tests.helpers.eos_stream_child.pipeline``), a
micro-batch a second, in a session of its own with ``PYKAFKA_TEST_KILL_AT`` set by the
test, so that ``tests.helpers.kill_points`` SIGKILLs it at one point of one micro-batch.

``read``: ``readStream`` from the earliest offset with ``kafka.request.timeout.ms`` =
REQUEST_MS; each micro-batch's rows (partition, offset, value, the record's timestamp in
seconds and its type) and the wall time it reached the sink go to ``OUT/batch-<id>.json``
(a re-run batch overwrites its file). It stops when STOPFILE appears and prints
``query ended: <exception or None>``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tests.helpers.kill_points import SESSION_ENV
from tests.helpers.child_session import child_spark
from tests.helpers.eos_stream_child import pipeline


def run_eos(bootstrap: str, source: str, target: str, checkpoint: str, prefix: str) -> None:
    os.environ[SESSION_ENV] = str(os.getpid())  # the JVM and its workers inherit it
    spark = child_spark("local[2]", "pykafka-kafka-faults-eos")
    query = (
        pipeline(spark, bootstrap, source, target, checkpoint, prefix)
        .trigger(processingTime="1 second")
        .start()
    )
    query.awaitTermination()


def batch_writer(out: str):
    def write(df, batch_id: int) -> None:
        rows = [
            list(r)
            for r in df.selectExpr(
                "partition",
                "offset",
                "CAST(value AS STRING)",
                "CAST(timestamp AS DOUBLE)",
                "timestampType",
            ).collect()
        ]
        tmp = os.path.join(out, f".batch-{batch_id}.json")
        with open(tmp, "w") as f:
            json.dump({"batch": batch_id, "at": time.time(), "rows": rows}, f)
        os.replace(tmp, os.path.join(out, f"batch-{batch_id}.json"))

    return write


def run_read(
    bootstrap: str, topic: str, checkpoint: str, out: str, stopfile: str, request_ms: str
) -> None:
    spark = child_spark("local[2]", "pykafka-kafka-faults-read")
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.request.timeout.ms", request_ms)
        .load()
        .writeStream.foreachBatch(batch_writer(out))
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    while not os.path.exists(stopfile) and query.isActive:
        time.sleep(0.2)  # the child runs until the test asks it to stop (no deadline)
    error = query.exception()
    query.stop()
    print(f"query ended: {error}", flush=True)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {"eos": run_eos, "read": run_read}[mode](*args)
