"""The operator's allow-lists (``kafka_common.trust``) as tests set them.

``allow_urls``/``allow_callbacks`` set ``PYKAFKA_ALLOWED_URLS``/``PYKAFKA_ALLOWED_CALLBACKS``
in this process's environment (through ``monkeypatch``, so they end with the test).
``spark_worker_env`` does what ``spark.executorEnv.*`` does for a session that is already
running: Spark gives a Python worker the environment of the data source's registration
(``SparkContext.environment`` at ``spark.dataSource.register``), so the connector is
registered again with the variables added, and once more without them afterwards.
"""

from __future__ import annotations

import contextlib
import os

from kafka_common.trust import CALLBACKS_ENV, URLS_ENV


def _add(monkeypatch, variable: str, values) -> None:
    current = [v for v in os.environ.get(variable, "").split(",") if v]
    monkeypatch.setenv(variable, ",".join(current + [str(v) for v in values]))


def allow_urls(monkeypatch, *urls: str) -> None:
    _add(monkeypatch, URLS_ENV, urls)


def allow_callbacks(monkeypatch, *names: str) -> None:
    _add(monkeypatch, CALLBACKS_ENV, names)


@contextlib.contextmanager
def spark_worker_env(spark, **variables: str):
    """Spark's Python workers (planning and tasks) see ``variables`` inside the block."""
    from pyspark_pykafka import KafkaDataSource

    environment = spark.sparkContext.environment
    saved = dict(environment)
    environment.update(variables)
    spark.dataSource.register(KafkaDataSource)
    try:
        yield
    finally:
        environment.clear()
        environment.update(saved)
        spark.dataSource.register(KafkaDataSource)
