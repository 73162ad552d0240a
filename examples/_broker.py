"""What the examples share: a Kafka to run against, topics on it, a local SparkSession.

None of this is needed in an application of your own: there you have a Kafka cluster, its
topics exist, and Spark is configured by ``spark-submit``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import kafka_source  # noqa: F401  (installed: `make install` or `pip install .`)
except ImportError:  # a plain checkout: this process and Spark's Python workers use it
    sys.path.append(ROOT)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), ROOT) if p)


def arguments(doc: str, **topics: str) -> argparse.Namespace:
    """``--bootstrap-servers`` and one ``--<name>`` option per topic (with its default)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="a Kafka to use instead of the embedded broker",
    )
    for name, default in topics.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", default=default, help=f"(default: {default})"
        )
    return parser.parse_args()


@contextlib.contextmanager
def kafka(bootstrap_servers: str | None):
    """Yield ``(bootstrap servers, embedded cluster or None)``: the Kafka given, or
    librdkafka's mock cluster (inside the confluent-kafka wheel) started in this process
    and stopped on exit."""
    if bootstrap_servers:
        yield bootstrap_servers, None
        return
    from kafka_testbed import MockCluster

    with MockCluster(brokers=1) as cluster:
        print(f"embedded Kafka broker (librdkafka mock cluster) at {cluster.bootstrap}")
        yield cluster.bootstrap, cluster


def create_topic(bootstrap: str, cluster, name: str, partitions: int) -> None:
    """Create ``name`` unless it exists (the mock cluster has no CreateTopics API: on it
    the topic is created through librdkafka, or must exist already)."""
    from protocol.client.cluster import KafkaClient
    from protocol.errors import UnsupportedVersionError

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        if cluster is not None:
            cluster.create_topic(name, partitions, 1)
            client.wait_for_topics([name])
            return
        try:
            client.create_topics({name: partitions}, exist_ok=True)
        except UnsupportedVersionError:  # a broker without CreateTopics: it must exist
            client.wait_for_topics([name], timeout_ms=10_000)


def spark_session(app_name: str):
    """A local SparkSession with the pykafka source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this venv
    from pyspark.sql import SparkSession

    from pyspark_pykafka import KafkaDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # Python workers can be slow to start on a busy laptop (15 s by default)
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # Automatic once the package is installed (pyspark_pykafka.DefaultSource); registering
    # by hand as well is harmless, and needed with --py-files (see docs/loading.md).
    spark.dataSource.register(KafkaDataSource)
    return spark
