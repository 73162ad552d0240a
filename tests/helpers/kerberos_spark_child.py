"""A Spark driver for ``tests/test_kerberos.py``, run as a child process as a Spark user runs
a job: ``KRB5_CONFIG`` is in its environment before the session starts (so its Python
workers inherit it, and ``spark.executorEnv.KRB5_CONFIG`` says the same to executors), and
the options are those of a job written for Spark's connector (GSSAPI, a keytab's path in
``kafka.sasl.jaas.config``). It writes the rows with ``df.write``, prints the read's plan
(``explain("extended")``), reads the rows back with ``spark.read`` and with a
``readStream`` (``Trigger.AvailableNow`` into the memory sink).

    python -m tests.helpers.kerberos_spark_child JSON

JSON: {"options": {...}, "topic": topic, "rows": n, "checkpoint": dir}. Python logging of
``pykafka`` runs at DEBUG on stderr. Prints one JSON line last: {"read": [[key, value],
...], "streamed": [[key, value], ...]}.
"""

from __future__ import annotations

import json
import logging
import os
import sys

from tests.helpers.child_session import child_spark


def _rows(frame) -> list[list[str]]:
    rows = frame.selectExpr("cast(key AS string) AS k", "cast(value AS string) AS v").collect()
    return sorted([r.k, r.v] for r in rows)


def main(spec: dict) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("pykafka").setLevel(logging.DEBUG)
    # the executors' environment, as a cluster job sets it (local mode: the workers
    # inherit this process's, which holds KRB5_CONFIG already)
    executor_env = {"spark.executorEnv.KRB5_CONFIG": os.environ["KRB5_CONFIG"]}
    spark = child_spark("local[2]", "pykafka-kerberos-child", executor_env)
    options, topic = spec["options"], spec["topic"]
    (
        spark.range(spec["rows"])
        .selectExpr("format_string('k%03d', id) AS key", "format_string('v%03d', id) AS value")
        .repartition(2)
        .write.format("pykafka")
        .mode("append")
        .options(**options)
        .option("topic", topic)
        .save()
    )
    frame = spark.read.format("pykafka").options(**options).option("subscribe", topic).load()
    frame.explain("extended")  # the plan strings go to stdout, which the test greps
    read = _rows(frame)
    query = (
        spark.readStream.format("pykafka")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("kerberos_stream")
        .option("checkpointLocation", spec["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    if query.exception() is not None:
        raise RuntimeError(f"the stream failed: {query.exception()}")
    streamed = _rows(spark.table("kerberos_stream"))
    spark.stop()
    print("\n" + json.dumps({"read": read, "streamed": streamed}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
