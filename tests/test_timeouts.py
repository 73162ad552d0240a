"""Timeouts against a peer that stops answering: Tansu behind ``tests.helpers.fault_proxy`` stalled
(connections accepted, nothing forwarded), and the scripted SASL broker silent in the
middle of an exchange.

Every blocking call must give up with a typed error within its own timeout plus a second:

- connect (ApiVersions), SASL, metadata, ListOffsets: ``request.timeout.ms``;
- ``read_range`` (the executor's Fetch loop): ``kafkaConsumer.pollTimeoutMs``, whatever
  ``request.timeout.ms`` is (before the fix a 3 s poll timeout took 60 s with the default
  30 s request timeout);
- the sink: metadata within ``max.block.ms``; delivery within ``delivery.timeout.ms``
  plus at most one ``request.timeout.ms``, the wait already under way when the deadline
  passes (as Kafka's producer checks it between requests);

and no thread may outlive the call (``threading.enumerate()`` before and after; the
client starts none). A stall shorter than the timeouts costs only time.
"""

from __future__ import annotations

import socket
import threading
import time

import pyarrow as pa
import pytest

from kafka_sink.producer import ProduceError, TaskProducer
from kafka_sink.writer import write_task
from kafka_source.fetcher import read_range
from kafka_source.offset_specs import OffsetRange
from protocol.client.cluster import KafkaClient
from protocol.config import ClientConfig
from protocol.client.connection import BrokerConnection
from protocol.errors import KafkaConnectionError, KafkaTimeoutError
from protocol.records import batch as rb

from .helpers.fake_sasl_broker import FakeSaslBroker
from .helpers.reliability_report import record
from .helpers.faults import produce_numbered, reader_options
from .helpers.sink import batches, options as writer_options, plan_for
from .helpers.waiting import wait_until

REQUEST_MS = 1000
SLACK_S = 1.0
TOPIC = "timeouts"


@pytest.fixture(scope="module")
def topic(proxied):  # noqa: F811
    p, broker = proxied
    p.reset()
    with KafkaClient(bootstrap_servers=broker.bootstrap) as client:
        client.create_topics({TOPIC: 2}, exist_ok=True)
    produce_numbered(broker.bootstrap, TOPIC, 2000, 2, batch=20)  # many small batches
    return TOPIC


def bounded(name: str, limit_s: float, errors, call, what: str):
    """``call()`` must raise one of ``errors`` within ``limit_s`` and leave no thread."""
    before = set(threading.enumerate())
    started = time.monotonic()
    with pytest.raises(errors) as info:
        call()
    elapsed = time.monotonic() - started

    def left() -> list[threading.Thread]:
        return [
            t
            for t in set(threading.enumerate()) - before
            if t.is_alive()
            and not t.name.startswith(("fault-proxy", "fake-sasl", "pykafka-pool-reaper"))
        ]

    try:  # a thread on its way out is given a moment (a loaded machine), not a leak
        wait_until(lambda: not left(), 2, "")
    except AssertionError:
        pass
    leftover = left()
    record(
        f"timeouts/{name}",
        section="timeouts",
        what=what,
        faults=1,
        seconds=elapsed,
        limit_s=limit_s,
        error=type(info.value).__name__,
        threads_left=len(leftover),
    )
    assert elapsed < limit_s, f"{name}: {elapsed:.2f} s, limit {limit_s} s"
    assert not leftover, f"threads outlived {name}: {leftover}"
    return info.value


def config(bootstrap: str, **kw) -> ClientConfig:
    return ClientConfig(bootstrap_servers=[bootstrap], request_timeout_ms=REQUEST_MS, **kw)


def test_connect_to_a_silent_broker(proxy):  # noqa: F811
    proxy.stall()
    conn = BrokerConnection("127.0.0.1", proxy.port, config(proxy.address))
    bounded(
        "connect",
        REQUEST_MS / 1000 + SLACK_S,
        KafkaTimeoutError,
        conn.connect,
        "connect (ApiVersions) to a stalled broker, request.timeout.ms=1000",
    )
    assert not conn.connected


def test_sasl_exchange_with_a_broker_that_falls_silent():
    def silent(key, cid, frame):
        if key == 36:  # SaslAuthenticate: never answered
            time.sleep(REQUEST_MS / 1000 + 2)  # the broker falling silent under test
        return None

    with FakeSaslBroker({"u": "pw"}, reply=silent) as fake:
        cfg = config(
            fake.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username="u",
            sasl_password="pw",
        )
        conn = BrokerConnection("127.0.0.1", fake.port, cfg)
        bounded(
            "sasl",
            REQUEST_MS / 1000 + SLACK_S,
            KafkaTimeoutError,
            conn.connect,
            "SASL SCRAM with SaslAuthenticate never answered, request.timeout.ms=1000",
        )
        assert not conn.connected


def test_metadata_from_a_silent_broker(proxy, topic):  # noqa: F811
    proxy.stall()
    bounded(
        "metadata_new_connection",
        REQUEST_MS / 1000 + SLACK_S,
        (KafkaTimeoutError, KafkaConnectionError),
        lambda: KafkaClient(config(proxy.address)).refresh_metadata([topic]),
        "metadata, new connection to a stalled broker",
    )
    proxy.resume()
    client = KafkaClient(config(proxy.address))
    client.refresh_metadata([topic])
    proxy.stall()
    try:
        bounded(
            "metadata_open_connection",
            REQUEST_MS / 1000 + SLACK_S,
            KafkaTimeoutError,
            lambda: client.refresh_metadata([topic]),
            "metadata on an open connection, the broker falls silent",
        )
    finally:
        client.close()


def test_list_offsets_from_a_silent_broker(proxy, topic):  # noqa: F811
    client = KafkaClient(config(proxy.address))
    client.refresh_metadata([topic])
    client.connection(client.leader_for(topic, 0))
    proxy.stall()
    try:
        bounded(
            "list_offsets",
            REQUEST_MS / 1000 + SLACK_S,
            KafkaTimeoutError,
            lambda: client.list_offsets({(topic, 0): -1, (topic, 1): -2}),
            "ListOffsets, the broker falls silent",
        )
    finally:
        client.close()


@pytest.mark.parametrize("request_ms", [1000, 30_000])
def test_read_range_gives_up_within_the_poll_timeout(proxy, topic, request_ms):  # noqa: F811
    poll_ms = 2000
    opts = reader_options(
        proxy.address,
        **{"kafkaConsumer.pollTimeoutMs": poll_ms, "kafka.request.timeout.ms": request_ms},
    )
    proxy.stall()
    err = bounded(
        f"read_range_request_{request_ms}ms",
        poll_ms / 1000 + SLACK_S,
        (KafkaTimeoutError, KafkaConnectionError),
        lambda: list(read_range(opts, OffsetRange(topic, 0, 0, 100))),
        f"read_range from a stalled broker, pollTimeoutMs={poll_ms}, "
        f"request.timeout.ms={request_ms}",
    )
    assert "pollTimeoutMs" in str(err)


def test_read_range_with_two_silent_bootstrap_servers(proxy, topic):  # noqa: F811
    """Two bootstrap servers, both silent (the stalled proxy and a socket nobody reads): the
    second is not tried once the poll timeout is spent, so the read still gives up in time
    (before, each took its own timeout: 4 s for a 2 s poll timeout)."""
    poll_ms = 2000
    with socket.create_server(("127.0.0.1", 0)) as silent:
        second = f"127.0.0.1:{silent.getsockname()[1]}"
        opts = reader_options(
            f"{proxy.address},{second}", **{"kafkaConsumer.pollTimeoutMs": poll_ms}
        )
        proxy.stall()
        err = bounded(
            "read_range_two_silent_servers",
            poll_ms / 1000 + SLACK_S,
            (KafkaTimeoutError, KafkaConnectionError),
            lambda: list(read_range(opts, OffsetRange(topic, 0, 0, 100))),
            f"read_range, two silent bootstrap servers, pollTimeoutMs={poll_ms}",
        )
    assert "pollTimeoutMs" in str(err)


def test_read_range_mid_read_stall(proxy, topic):  # noqa: F811
    """The broker falls silent after the first batches: the read fails within the poll
    timeout of its last progress."""
    poll_ms = 2000
    opts = reader_options(
        proxy.address,
        **{
            "kafkaConsumer.pollTimeoutMs": poll_ms,
            "kafka.max.partition.fetch.bytes": 2048,
            "kafka.fetch.max.bytes": 2048,
        },
    )
    rows = read_range(opts, OffsetRange(topic, 0, 0, 1000))
    next(rows)
    proxy.stall()
    bounded(
        "read_range_mid_read",
        poll_ms / 1000 + SLACK_S,
        (KafkaTimeoutError, KafkaConnectionError),
        lambda: list(rows),
        f"read_range, the broker falls silent mid-read, pollTimeoutMs={poll_ms}",
    )


def test_a_short_stall_costs_only_time(proxy, topic):  # noqa: F811
    """A 1.5 s stall in the middle of a read with a 5 s poll timeout: every row, once."""
    opts = reader_options(
        proxy.address,
        **{
            "kafkaConsumer.pollTimeoutMs": 5000,
            "kafka.request.timeout.ms": 1000,
            "kafka.max.partition.fetch.bytes": 2048,
            "kafka.fetch.max.bytes": 2048,
        },
    )
    rows = read_range(opts, OffsetRange(topic, 0, 0, 1000))
    first = next(rows)
    proxy.stall()
    timer = threading.Timer(1.5, proxy.resume)
    timer.start()
    started = time.monotonic()
    try:
        table = pa.Table.from_batches([first, *rows])
    finally:
        timer.join()
    assert time.monotonic() - started >= 1.4  # it did wait for the broker
    assert table["offset"].to_pylist() == list(range(1000))


def test_write_to_a_broker_silent_from_the_start(proxy, topic):  # noqa: F811
    data = batches(500, 250)
    opts = writer_options(
        _Bootstrap(proxy.address),
        topic,
        **{"request.timeout.ms": REQUEST_MS, "delivery.timeout.ms": 2000, "max.block.ms": 1000},
    )
    proxy.stall()
    bounded(
        "write_metadata",
        1.0 + SLACK_S,
        (KafkaTimeoutError, KafkaConnectionError),
        lambda: write_task(iter(data), opts, plan_for(data[0], topic)),
        "write_task, broker silent from the start, max.block.ms=1000",
    )


def test_write_to_a_broker_that_falls_silent(proxy, topic):  # noqa: F811
    data = batches(4000, 500)
    opts = writer_options(
        _Bootstrap(proxy.address),
        topic,
        **{
            "request.timeout.ms": REQUEST_MS,
            "delivery.timeout.ms": 2000,
            "linger.ms": 0,
            "batch.size": 2000,
            "buffer.memory": 4000,
        },
    )

    def stream():
        for i, batch in enumerate(data):
            if i == 2:
                proxy.stall()
            yield batch

    err = bounded(
        "write_delivery",
        2.0 + REQUEST_MS / 1000 + SLACK_S,
        ProduceError,
        lambda: write_task(stream(), opts, plan_for(data[0], topic)),
        "write_task, the broker falls silent mid-write, delivery.timeout.ms=2000, "
        "request.timeout.ms=1000",
    )
    assert "kafka.delivery.timeout.ms" in str(err)


def test_producer_flush_with_no_leader_reachable(proxy, topic):  # noqa: F811
    opts = writer_options(
        _Bootstrap(proxy.address),
        topic,
        **{"request.timeout.ms": REQUEST_MS, "delivery.timeout.ms": 2000, "linger.ms": 0},
    )
    producer = TaskProducer(opts)
    try:
        producer.partition_counts([topic])
        producer.producer_identity()
        proxy.stall()
        producer.append(
            topic,
            0,
            1,
            lambda pid, epoch, seq: rb.build_batch(
                [(0, 1000, b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq
            ),
        )
        err = bounded(
            "producer_flush",
            2.0 + REQUEST_MS / 1000 + SLACK_S,
            ProduceError,
            producer.flush,
            "TaskProducer.flush, the broker falls silent before "
            "the first Produce, delivery.timeout.ms=2000",
        )
    finally:
        producer.close()
    assert "metadata refresh failed" in str(err)


class _Bootstrap:
    """What ``tests.test_sink_producer.options`` wants of a broker: its bootstrap."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
