"""Shared fixtures: real Kafka-protocol brokers from :mod:`kafka_testbed`.

Fixtures are lazy: a broker starts only when a test asks for it, once per
session. A broker that cannot start is an error (the test fails with the
broker log), never a skip.

``kafka`` is Apache Kafka (the newest pinned 4.x, one node): the broker of the broker-facing
tests. ``kafka_clusters`` hands out other Apache Kafka clusters (a version, 3 nodes, a
transaction.version, SASL/TLS listeners), shared by every test that asks for the same kind
and stopped when the session ends (at most a few kept running at once). A test that kills,
pauses or restarts nodes starts a ``KafkaCluster`` of its own. ``signin_kafka`` is the one
with every sign-in listener (SASL, OIDC, TLS, mutual TLS, SASL over TLS), with its
certificates (``signin_pki``) and OIDC issuer (``signin_issuer``):
``tests/helpers/signin_cluster.py``.
"""

from __future__ import annotations

import itertools
import os
import sys
import uuid

import pytest

# The sign-in cluster's fixtures, imported to be registered for every test module.
from .helpers.signin_cluster import (  # noqa: F401
    signin_cluster_options,  # noqa: F401
    signin_issuer,  # noqa: F401
    signin_kafka,  # noqa: F401
    signin_pki,  # noqa: F401
)

_topic_seq = itertools.count()

# Spark JVMs started by the tests (here or in child processes) read
# tests/spark-conf/spark-defaults.conf: the JIT's first tier only, the serial collector.
os.environ.setdefault("SPARK_CONF_DIR", os.path.join(os.path.dirname(__file__), "spark-conf"))
# Their Python workers (and those of the tests' child processes) use this Python: set before
# any test imports the connector, which otherwise warns that python3 on PATH lacks it.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


class KafkaClusters:
    """Apache Kafka clusters shared across the session, one per kind asked for: ``get(
    version=..., nodes=..., **KafkaCluster options)``. At most ``keep`` run at once; the one
    used least recently is stopped to make room (tests asking by version in turn reuse
    each). Options that are files (``ssl``, ``oauth_jwks``) are part of the kind."""

    def __init__(self, keep: int = 3):
        self.keep = keep
        self._running: dict[tuple, object] = {}

    def get(self, version: str | None = None, nodes: int = 1, **options):
        from kafka_testbed import NEWEST_KAFKA, KafkaCluster

        key = (version or NEWEST_KAFKA, nodes, tuple(sorted(options.items())))
        cluster = self._running.pop(key, None)
        if cluster is None:
            while len(self._running) >= self.keep:
                oldest = next(iter(self._running))
                self._running.pop(oldest).stop()
            cluster = KafkaCluster(key[0], nodes, **options).start()
        self._running[key] = cluster  # most recently used last
        return cluster

    def stop_all(self) -> None:
        while self._running:
            self._running.popitem()[1].stop()


@pytest.fixture(scope="session")
def kafka_clusters():
    clusters = KafkaClusters()
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture(scope="module")
def versioned_kafka(request, kafka_clusters):
    """The Apache Kafka of ``request.param`` = ``(version, transaction.version or None)``,
    given by a module's indirect parametrization and shared by that module's tests; the
    newest pinned version with its default transaction.version is the session's ``kafka``."""
    from kafka_testbed import NEWEST_KAFKA

    version, tv = request.param
    if (version, tv) == (NEWEST_KAFKA, None):
        return request.getfixturevalue("kafka")
    return kafka_clusters.get(
        version=version, **({} if tv is None else {"transaction_version": tv})
    )


@pytest.fixture(scope="session")
def proxied_kafka():
    """``(proxy, cluster)``: a 1-node Apache Kafka (the newest) that clients reach through
    a ``tests.helpers.fault_proxy.FaultProxy`` (``proxy.bootstrap``: every connection the metadata
    leads them to goes through it too) or directly (``cluster.bootstrap``), for the tests
    that cut, count or rewrite what goes over the wire. Each test resets the proxy."""
    from .helpers.broker_setup import kafka_behind_fault_proxy

    with kafka_behind_fault_proxy() as pair:
        yield pair


@pytest.fixture(scope="module")
def proxied(proxied_kafka):
    """``(proxy, kafka)``: ``proxied_kafka``, for a module's fixtures (the proxy is not
    reset: ``proxy`` does that)."""
    return proxied_kafka


@pytest.fixture
def proxy(proxied_kafka):
    """The fault proxy of ``proxied_kafka``, reset before and after the test."""
    p, _ = proxied_kafka
    p.reset()
    yield p
    p.reset()


@pytest.fixture(scope="session")
def kafka():
    """Apache Kafka, the newest pinned version, one node, PLAINTEXT (``.bootstrap``),
    formatted with its default transaction.version (2)."""
    from kafka_testbed import KafkaCluster

    cluster = KafkaCluster().start()  # KafkaStartError (with log tail) fails the tests
    try:
        yield cluster
    finally:
        cluster.stop()


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


# `PYKAFKA_TEST_BOOTSTRAP=host:port make test-kafka` runs the broker-facing selection
# (tests/test_kafka_broker.py) against that Kafka instead of the session's Apache Kafka.
BOOTSTRAP_ENV = "PYKAFKA_TEST_BOOTSTRAP"


class ExternalKafka:
    """A Kafka the tests did not start (``PYKAFKA_TEST_BOOTSTRAP``): Apache Kafka or one
    that behaves as it does (AbortedTransactions, ListOffsets by timestamp,
    DeleteRecords)."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def __repr__(self) -> str:
        return f"ExternalKafka({self.bootstrap})"


@pytest.fixture(scope="session")
def kafka_broker(request):
    """The broker of the broker-facing selection: the Kafka at ``PYKAFKA_TEST_BOOTSTRAP``
    when it is set, else the session's Apache Kafka (``kafka``)."""
    bootstrap = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if not bootstrap:
        return request.getfixturevalue("kafka")
    from protocol.client.cluster import KafkaClient
    from protocol.errors import PyKafkaError

    try:
        with KafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000) as client:
            client.metadata()
    except PyKafkaError as e:
        pytest.fail(f"{BOOTSTRAP_ENV}={bootstrap}: no Kafka answers there: {e}", pytrace=False)
    return ExternalKafka(bootstrap)


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

    from pyspark_pykafka import KafkaDataSource

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pyspark-pykafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Python workers start slowly on a loaded 2-core machine (15 s by default)
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KafkaDataSource)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def pyfiles_zip(tmp_path_factory) -> str:
    """The ``--py-files`` zip as ``make dist`` builds it: ``scripts/build_pyfiles_zip.py``
    run as a user runs it (the sources, and the compiled record codecs for this Python)."""
    import subprocess

    out = tmp_path_factory.mktemp("pyfiles")
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts")
    done = subprocess.run(
        [sys.executable, os.path.join(script, "build_pyfiles_zip.py"), "--out-dir", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.fixture
def registry():
    """A Schema Registry of the test's own (tests/helpers/schema_registry_server.py)."""
    from .helpers.schema_registry_server import RegistryServer

    server = RegistryServer().start()
    yield server
    server.stop()
