"""Setting up the test brokers: a topic on any kind, and a broker behind a fault proxy.

``create_topic`` makes a topic on Apache Kafka or Tansu (CreateTopics) or on librdkafka's
mock cluster, which has no CreateTopics: it is made through the mock's own API and waited
for in the metadata. ``kafka_behind_fault_proxy`` starts an Apache Kafka node whose
``PROXIED`` listener advertises the port of a ``FaultProxy`` in front of it, so every
connection a client that bootstraps through the proxy makes, those the metadata leads it
to as well, goes through the proxy (the broker's own traffic does not);
``tansu_behind_fault_proxy`` does the same with Tansu.
"""

from __future__ import annotations

from contextlib import contextmanager
from collections.abc import Iterator

from kafka_testbed import KafkaCluster, TansuBroker
from protocol.client.cluster import KafkaClient

from .fault_proxy import FaultProxy
from .waiting import wait_until


def create_topic(
    broker,
    name: str,
    partitions: int,
    replication_factor: int = 1,
    *,
    client: KafkaClient | None = None,
) -> None:
    """``name`` with ``partitions`` partitions on ``broker``, through ``client`` or a
    client of its own. ``replication_factor`` is for the mock cluster (of three brokers);
    Tansu, one node, ignores replication factors (CreateTopics asks for 1)."""
    if client is None:
        with KafkaClient(bootstrap_servers=broker.bootstrap) as own:
            create_topic(broker, name, partitions, replication_factor, client=own)
        return
    if hasattr(broker, "create_topic"):  # the mock cluster has no CreateTopics
        broker.create_topic(name, partitions, replication_factor)
        client.wait_for_topics([name])
    else:
        client.create_topics({name: partitions})


@contextmanager
def kafka_behind_fault_proxy(**options) -> Iterator[tuple[FaultProxy, KafkaCluster]]:
    """``(proxy, cluster)``: a 1-node Apache Kafka that clients reach through a fault proxy
    (``proxy.address``) or directly (``cluster.bootstrap``)."""
    proxy = FaultProxy()
    try:
        cluster = KafkaCluster(proxied={1: proxy.port}, **options).start()
    except BaseException:
        proxy.close()
        raise
    host, port = cluster.listener("PROXIED").split(":")
    proxy.set_target(host, int(port))
    try:
        yield proxy, cluster
    finally:
        proxy.close()
        cluster.stop()


@contextmanager
def tansu_behind_fault_proxy() -> Iterator[tuple[FaultProxy, TansuBroker]]:
    """``(proxy, broker)``: a Tansu broker reachable only through a fault proxy."""
    proxy = FaultProxy()
    broker = TansuBroker(advertised_port=proxy.port)
    broker.start()
    proxy.set_target("127.0.0.1", broker.backend_port)
    try:
        yield proxy, broker
    finally:
        proxy.close()
        broker.stop()


#: KRaft's controller refuses an operation of more than 10,000 metadata records
#: (POLICY_VIOLATION "Unable to perform excessively large batch operation"): a topic record
#: and one per partition. A wider topic is created in steps of at most this many partitions.
PARTITIONS_PER_STEP = 5_000


def create_wide_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    configs: dict[str, str] | None = None,
    timeout_s: float = 300,
) -> None:
    """``name`` with ``partitions`` partitions on Apache Kafka: created with at most
    ``PARTITIONS_PER_STEP`` and grown by that many at a time (CreatePartitions, through
    confluent-kafka's admin client), then waited for until every partition has a leader."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    first = min(partitions, PARTITIONS_PER_STEP)
    futures = admin.create_topics(
        [NewTopic(name, first, 1, config=dict(configs or {}))], operation_timeout=timeout_s
    )
    futures[name].result(timeout_s)
    total = first
    while total < partitions:
        total = min(partitions, total + PARTITIONS_PER_STEP)
        futures = admin.create_partitions([NewPartitions(name, total)], operation_timeout=timeout_s)
        futures[name].result(timeout_s)
    # The broker's metadata takes the added partitions after CreatePartitions answers:
    # wait for the count, not only for leaders of the partitions it lists so far.
    with KafkaClient(bootstrap_servers=bootstrap) as client:

        def all_listed() -> bool:
            client.wait_for_topics([name], timeout_ms=int(timeout_s * 1000))
            return len(client.refresh_metadata([name]).topics[name].partitions) == partitions

        wait_until(all_listed, timeout_s, f"topic {name} with {partitions} partitions", 0.2)
