"""The SparkSession of the child drivers the tests start and kill
(``tests/*_child.py``): each runs as its own process, with the pykafka source registered."""

from __future__ import annotations

import os
import sys


def child_spark(master: str, app_name: str, conf: dict[str, str] | None = None):
    """A quiet session (no UI, errors only) with a socket timeout long enough for a child
    that the test kills or fails on purpose, and the Spark settings ``conf``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.python.authenticate.socketTimeout", "120s")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaDataSource)
    return spark
