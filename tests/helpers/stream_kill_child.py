"""A streaming driver for ``tests/test_source_jvm_parity.py`` to kill: run as a child
process, it starts a query that writes each micro-batch with ``foreachBatch`` and, inside
batch 0 (after Spark logged the batch's offsets, before it commits the batch), writes a
marker file and waits there until the test kills the process.

    python -m tests.helpers.stream_kill_child BOOTSTRAP TOPIC CHECKPOINT OUT MARKER
"""

from __future__ import annotations

import os
import sys
import threading

from tests.helpers.child_session import child_spark


def write_batch(out: str):
    """The foreachBatch function of the killed run and of the restart: each batch's rows,
    overwritten by batch id, so a re-run batch replaces its first attempt."""

    def write(df, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(os.path.join(out, f"batch={batch_id}"))

    return write


def stream(spark, bootstrap: str, topic: str):
    return (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)  # startingOffsets: latest, the default
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
    )


def main(bootstrap: str, topic: str, checkpoint: str, out: str, marker: str) -> None:
    spark = child_spark("local[1]", "pykafka-kill-child")
    write = write_batch(out)

    def hooked(df, batch_id: int) -> None:
        write(df, batch_id)
        if batch_id == 0:
            with open(marker, "w") as f:
                f.write("in batch 0\n")
            threading.Event().wait()  # until killed

    query = (
        stream(spark, bootstrap, topic)
        .writeStream.foreachBatch(hooked)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
