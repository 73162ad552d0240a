"""Run by ``tests/test_security.py`` in a subprocess: a SparkSession of its own with the
event log on (it must be set before the session starts), queries that carry SASL
passwords in their options and fail, and everything they print.

    python tests/helpers/secret_leak_check.py BOOTSTRAP USER PASSWORD WRONG_PASSWORD EVENT_LOG_DIR

Against ``tests.helpers.fake_sasl_broker`` (USER/PASSWORD valid, topic ``t`` with 2 partitions,
every Fetch and produce closes the connection) it runs, each caught and its error printed:

1. a batch read with the right password: explain("extended"), then collect (planning
   passes, the executor tasks fail reading);
2. a batch read with the wrong password (fails planning, on the driver);
3. the same through ``kafka.sasl.jaas.config``;
4. a batch write with the right password (the tasks fail producing);
5. a streaming read with the right password, ``Trigger.AvailableNow`` into ``noop``.

Python logging of ``pykafka`` runs at DEBUG on stderr. The session stops at the end, so
the event log is complete. The parent greps stdout, stderr and the event log files.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import time

T0 = time.monotonic()


def main(bootstrap: str, user: str, password: str, wrong: str, event_dir: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("pykafka").setLevel(logging.DEBUG)
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("pykafka-secrets")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", event_dir)
        .config("spark.task.maxFailures", "1")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("INFO")
    spark.dataSource.register(KafkaDataSource)
    common = {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.request.timeout.ms": "2000",
        "kafka.retry.backoff.ms": "50",
    }
    read = dict(
        common,
        subscribe="t",
        startingOffsets="earliest",
        **{
            "kafkaConsumer.pollTimeoutMs": "1500",
            "fetchOffset.numRetries": "1",
            "fetchOffset.retryIntervalMs": "100",
        },
    )
    creds = {"kafka.sasl.username": user, "kafka.sasl.password": password}

    def attempt(name: str, action) -> None:
        try:
            action()
            print(f"== {name}: no error ({time.monotonic() - T0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is printed
            print(f"== {name} ({time.monotonic() - T0:.1f} s): {type(e).__name__}: {e}", flush=True)

    df = spark.read.format("pykafka").options(**read, **creds).load()
    plan = io.StringIO()
    with contextlib.redirect_stdout(plan):
        df.explain("extended")
    print("== explain:\n" + plan.getvalue(), flush=True)
    attempt("read, right password", df.collect)
    attempt(
        "read, wrong password",
        lambda: (
            spark.read.format("pykafka")
            .options(**read, **{"kafka.sasl.username": user, "kafka.sasl.password": wrong})
            .load()
            .collect()
        ),
    )
    jaas = (
        f"org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{wrong}";'
    )
    attempt(
        "read, jaas config",
        lambda: (
            spark.read.format("pykafka")
            .options(**read, **{"kafka.sasl.jaas.config": jaas})
            .load()
            .collect()
        ),
    )
    rows = spark.createDataFrame([("k", "v")], "key STRING, value STRING")
    attempt(
        "write, right password",
        lambda: (
            rows.write.format("pykafka").options(**common, **creds, topic="t").mode("append").save()
        ),
    )

    def stream() -> None:
        q = (
            spark.readStream.format("pykafka")
            .options(**read, **creds)
            .load()
            .writeStream.format("noop")
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(60)
            print("== stream progress: " + str(q.recentProgress), flush=True)
        finally:
            q.stop()

    attempt("stream, right password", stream)
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(*sys.argv[1:6])
