"""A Spark driver for ``tests/test_sasl_end_to_end.py``, run as a child process so that the
environment it is given (AWS credentials and region for MSK IAM) reaches its Python
workers: for each named set of connection options, a batch write, a batch read back, and a
stream with ``exactlyOnce`` from that topic to another, all signed in with those options
(OAUTHBEARER on Apache Kafka, AWS_MSK_IAM through a SASL front over Tansu).

    python -m tests.helpers.sasl_spark_child JSON

JSON: {"name": {"options": {...}, "source": topic, "target": topic,
"checkpoint": dir}, ...}. Prints one JSON line: name -> {"read": [values],
"streamed": [values]}.
"""

from __future__ import annotations

import json
import sys
import time

from tests.helpers.child_session import child_spark


def read_values(spark, options: dict, topic: str) -> list[str]:
    rows = (
        spark.read.format("pykafka")
        .options(**options)
        .option("subscribe", topic)
        .load()
        .selectExpr("cast(value AS string) AS v")
        .collect()
    )
    return sorted(r.v for r in rows)


def main(spec: dict) -> None:
    t0 = time.monotonic()
    spark = child_spark("local[2]", "pykafka-sasl-child")
    print(f"[child] session {time.monotonic() - t0:.1f}s", file=sys.stderr)
    results = {}
    for name, run in spec.items():
        options = run["options"]
        # 50 records, then one more in a batch of its own (Tansu's LATEST is the last
        # batch's base offset + 1)
        for frame in (spark.range(50), spark.range(50, 51)):
            (
                frame.selectExpr("format_string('%s-%03d', '" + name + "', id) AS value")
                .coalesce(1)
                .write.format("pykafka")
                .mode("append")
                .options(**options)
                .option("topic", run["source"])
                .save()
            )
        print(f"[child] {name} written {time.monotonic() - t0:.1f}s", file=sys.stderr)
        frame = (
            spark.read.format("pykafka")
            .options(**options)
            .option("subscribe", run["source"])
            .load()
        )
        frame.explain("extended")  # the plan strings go to stdout, which the test greps
        read = read_values(spark, options, run["source"])
        print(f"[child] {name} read {time.monotonic() - t0:.1f}s", file=sys.stderr)
        query = (
            spark.readStream.format("pykafka")
            .options(**options)
            .option("subscribe", run["source"])
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("value")
            .writeStream.format("pykafka")
            .options(**options)
            .option("topic", run["target"])
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", f"sasl-{name}")
            .option("checkpointLocation", run["checkpoint"])
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        error = query.exception()
        print(f"[child] {name} streamed {time.monotonic() - t0:.1f}s", file=sys.stderr)
        results[name] = {
            "read": read,
            "streamed": read_values(spark, options, run["target"]),
            "stream_error": str(error) if error else None,
        }
    spark.stop()
    print("\n" + json.dumps(results))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
