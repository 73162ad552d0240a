"""Shared fixtures: real Kafka-protocol brokers from :mod:`kafka_testbed`.

Fixtures are lazy: a broker starts only when a test asks for it, once per
session. A broker that cannot start is an error (the test fails with the
broker log), never a skip.
"""

from __future__ import annotations

import itertools
import os
import uuid

import pytest

_topic_seq = itertools.count()


@pytest.fixture(scope="session")
def tansu():
    """A running :class:`kafka_testbed.TansuBroker` (plaintext, memory storage)."""
    from kafka_testbed import TansuBroker

    broker = TansuBroker()
    broker.start()  # TansuStartError (with log tail) fails the requesting tests
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def mock_cluster():
    """A :class:`kafka_testbed.MockCluster` with 3 brokers (ids 1, 2, 3)."""
    from kafka_testbed import MockCluster

    cluster = MockCluster(brokers=3)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test (and to this process, for xdist/parallel runs)."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60].strip("-")
    return f"t-{base}-{os.getpid()}-{next(_topic_seq)}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test session (start-up costs seconds), with the
    pykafka data source registered by hand as well as by module name."""
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafka_source import KafkaDataSource

    session = (SparkSession.builder.master("local[2]")
               .appName("pyspark-pykafka-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               # Python workers start slowly on a loaded 2-core machine (15 s by default)
               .config("spark.python.authenticate.socketTimeout", "120s")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaDataSource)
    try:
        yield session
    finally:
        session.stop()
