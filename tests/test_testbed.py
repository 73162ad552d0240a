"""The test brokers in :mod:`kafka_testbed` really speak Kafka over TCP.

confluent-kafka (librdkafka) is the independent client here.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

import confluent_kafka  # noqa: E402, F401  (a dev dependency: missing means a broken install)
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafka_testbed import MockCluster, PortTakenError, TansuBroker  # noqa: E402

N = 100
PRODUCE = 0  # Kafka API keys
METADATA = 3
NOT_LEADER_OR_FOLLOWER = 6


# -- helpers -------------------------------------------------------------------


def produce(conf: dict, topic: str, n: int = N, partitions: int = 2, start: int = 0) -> None:
    """Produce ``n`` keyed records with headers, record i to partition i % partitions."""
    errors: list = []
    p = Producer({**conf, "linger.ms": 5, "message.timeout.ms": 15000})
    for i in range(start, start + n):
        p.produce(
            topic,
            value=f"value-{i}".encode(),
            key=f"key-{i}".encode(),
            partition=i % partitions,
            headers=[("idx", str(i).encode()), ("h2", b"\x00\xff")],
            on_delivery=lambda err, msg: err and errors.append(err),
        )
    assert p.flush(15) == 0, "undelivered messages"
    assert errors == []


def consume(conf: dict, topic: str, n: int, partitions: int = 2, timeout: float = 15.0) -> list:
    c = Consumer({**conf, "group.id": "kafka-testbed-reader", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(num_messages=n, timeout=0.2):
                assert m.error() is None, m.error()
                got.append(m)
        return got
    finally:
        c.close()


def check_roundtrip(msgs: list, n: int = N, partitions: int = 2) -> None:
    assert len(msgs) == n
    by_part: dict[int, list] = {}
    for m in msgs:
        by_part.setdefault(m.partition(), []).append(m)
    assert sorted(by_part) == list(range(partitions))
    for part, ms in by_part.items():
        assert [m.offset() for m in ms] == list(range(len(ms)))  # gap-free from 0, in order
        for m in ms:
            i = int(m.key().decode().split("-")[1])
            assert i % partitions == part
            assert m.value() == f"value-{i}".encode()
            assert m.headers() == [("idx", str(i).encode()), ("h2", b"\x00\xff")]
            assert m.offset() == i // partitions


def leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    md = admin.list_topics(topic, timeout=10)
    return {p: pm.leader for p, pm in md.topics[topic].partitions.items()}


def wait_for_error(conf: dict, timeout: float = 10.0) -> KafkaError:
    """Connect an AdminClient and return the first client error it reports."""
    seen: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": seen.append})
    deadline = time.monotonic() + timeout
    while not seen and time.monotonic() < deadline:
        admin.poll(0.1)
    assert seen, "no client error reported"
    return seen[0]


# -- Tansu -----------------------------------------------------------------------


def test_tansu_roundtrip(tansu: TansuBroker, topic_name: str) -> None:
    conf = {"bootstrap.servers": tansu.bootstrap}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    produce(conf, topic_name)
    check_roundtrip(consume(conf, topic_name, N))
    md = admin.list_topics(timeout=10)
    assert [b.port for b in md.brokers.values()] == [tansu.port]
    assert md.cluster_id == tansu.cluster_id


def test_tansu_list_offsets_quirks(tansu: TansuBroker, topic_name: str) -> None:
    """Pins the documented quirks, so a fixed Tansu makes this fail (update the docs)."""
    conf = {"bootstrap.servers": tansu.bootstrap}
    admin = AdminClient(conf)  # keep a reference until the future resolves
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    p = Producer({**conf, "linger.ms": 200})
    for i in range(10):  # one 10-record batch at offsets 0..9
        p.produce(topic_name, b"v", partition=0, timestamp=1_700_000_000_000 + i)
    assert p.flush(10) == 0
    c = Consumer({**conf, "group.id": "quirks"})
    try:
        tp = TopicPartition(topic_name, 0)
        assert c.get_watermark_offsets(tp, timeout=10) == (0, 1)  # last batch base + 1
        (res,) = c.offsets_for_times([TopicPartition(topic_name, 0, 1_700_000_000_005)], timeout=10)
        assert res.offset == 0  # earliest, whatever the timestamp
    finally:
        c.close()


def test_tansu_tls(tmp_path, topic_name: str) -> None:
    import trustme

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.example")
    ca_pem, chain, key = tmp_path / "ca.pem", tmp_path / "chain.pem", tmp_path / "key.pem"
    cchain, ckey = tmp_path / "client.pem", tmp_path / "client-key.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    chain.write_bytes(b"".join(b.bytes() for b in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(key))
    cchain.write_bytes(b"".join(b.bytes() for b in client.cert_chain_pems))
    client.private_key_pem.write_to_path(str(ckey))

    with TansuBroker(tls=(str(chain), str(key)), tls_client_ca=str(ca_pem)) as broker:
        assert broker.security_protocol == "SSL"
        conf = {
            "bootstrap.servers": broker.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca_pem),
            "ssl.certificate.location": str(cchain),
            "ssl.key.location": str(ckey),
        }
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
        produce(conf, topic_name)
        check_roundtrip(consume(conf, topic_name, N))
        assert [b.port for b in admin.list_topics(timeout=10).brokers.values()] == [broker.port]

        # No client certificate: the TLS front refuses the handshake.
        no_cert = {
            k: v for k, v in conf.items() if not k.startswith("ssl.c") and k != "ssl.key.location"
        }
        no_cert["ssl.ca.location"] = str(ca_pem)
        err = wait_for_error(no_cert)
        assert err.code() in (KafkaError._TRANSPORT, KafkaError._SSL, KafkaError._ALL_BROKERS_DOWN)


def test_tansu_sasl_scram_is_negotiated_but_rejects_every_user() -> None:
    """Documents what --authentication does in this build (see kafka_testbed.tansu)."""
    with TansuBroker(authentication=True) as broker:
        assert broker.security_protocol == "SASL_PLAINTEXT"
        err = wait_for_error(
            {
                "bootstrap.servers": broker.bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": "secret",
            }
        )
        assert err.code() == KafkaError._AUTHENTICATION
        assert "unknown-user" in err.str()


def test_tansu_start_failure_is_loud() -> None:
    from kafka_testbed import TansuStartError

    broker = TansuBroker(extra_args=["--no-such-flag"], startup_timeout=5)
    with pytest.raises(TansuStartError, match="no-such-flag"):
        broker.start()
    broker.stop()


# -- librdkafka mock cluster -----------------------------------------------------


def test_mock_roundtrip(mock_cluster: MockCluster, topic_name: str) -> None:
    assert all(hp.startswith("127.0.0.1:") for hp in mock_cluster.bootstrap.split(","))
    assert len(mock_cluster.bootstrap.split(",")) == 3
    mock_cluster.create_topic(topic_name, 2, 3)
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    produce(conf, topic_name)
    check_roundtrip(consume(conf, topic_name, N))
    md = AdminClient(conf).list_topics(topic_name, timeout=10)
    assert sorted(md.brokers) == [1, 2, 3]
    assert all(sorted(p.replicas) == [1, 2, 3] for p in md.topics[topic_name].partitions.values())


def test_mock_leader_move(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1, 3)
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    admin = AdminClient(conf)
    produce(conf, topic_name, n=10, partitions=1)
    old = leaders(admin, topic_name)[0]
    new = old % 3 + 1
    mock_cluster.partition_set_leader(topic_name, 0, new)
    assert leaders(admin, topic_name) == {0: new}
    produce(conf, topic_name, n=10, partitions=1, start=10)
    msgs = consume(conf, topic_name, 20, partitions=1)
    assert [m.offset() for m in msgs] == list(range(20))
    assert [m.key() for m in msgs] == [f"key-{i}".encode() for i in range(20)]


def test_mock_injected_produce_errors_are_survived(
    mock_cluster: MockCluster, topic_name: str
) -> None:
    mock_cluster.create_topic(topic_name, 1, 3)
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    mock_cluster.start_request_tracking()
    try:
        mock_cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER] * 3)
        produce({**conf, "retry.backoff.ms": 10}, topic_name, n=10, partitions=1)
        produce_requests = [r for r in mock_cluster.get_requests() if r.api_key == PRODUCE]
        assert len(produce_requests) >= 4  # 3 rejected + at least one accepted
        # a metadata refresh after NOT_LEADER
        assert any(r.api_key == METADATA for r in mock_cluster.get_requests())
    finally:
        mock_cluster.clear_request_errors(PRODUCE)
        mock_cluster.stop_request_tracking()
    msgs = consume(conf, topic_name, 10, partitions=1)
    assert [m.offset() for m in msgs] == list(range(10))  # no duplicates, no gaps


def test_mock_broker_error_rtts(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1, 3)
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    leader = leaders(AdminClient(conf), topic_name)[0]
    mock_cluster.broker_push_request_error_rtts(
        leader, PRODUCE, [(NOT_LEADER_OR_FOLLOWER, 50), (0, 200)]
    )
    assert mock_cluster.broker_error_stack_count(leader, PRODUCE) == 2
    t0 = time.monotonic()
    produce({**conf, "retry.backoff.ms": 10}, topic_name, n=1, partitions=1)
    assert time.monotonic() - t0 >= 0.2
    assert mock_cluster.broker_error_stack_count(leader, PRODUCE) == 0


def test_mock_broker_down_and_up(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1, 3)
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    leader = leaders(AdminClient(conf), topic_name)[0]
    p = Producer({**conf, "message.timeout.ms": 30000, "reconnect.backoff.max.ms": 200})
    p.produce(topic_name, b"before", partition=0)
    assert p.flush(10) == 0
    mock_cluster.broker_set_down(leader)
    try:
        p.produce(topic_name, b"while-down", partition=0)
        assert p.flush(0.5) == 1  # the partition leader is unreachable
    finally:
        mock_cluster.broker_set_up(leader)
    assert p.flush(15) == 0
    msgs = consume(conf, topic_name, 2, partitions=1)
    assert [m.value() for m in msgs] == [b"before", b"while-down"]


def _send_twice(bootstrap: str, topic: str) -> tuple[list[int], list[bytes]]:
    """One idempotent (not transactional) batch, producer id, epoch and base sequence 0,
    sent twice as a producer re-sends a batch whose answer it never got: the two
    Produce error codes and the values the partition then holds."""
    from protocol.client.cluster import KafkaClient
    from protocol.records.batch import Record, build_batch
    from protocol.schemas import INIT_PRODUCER_ID

    from .helpers.txn_referee import log_of

    with KafkaClient(bootstrap_servers=bootstrap) as client:
        client.wait_for_topics([topic])
        conn = client.connection(client.leader_for(topic, 0))
        answer = conn.request(
            INIT_PRODUCER_ID,
            {
                "transactional_id": None,
                "transaction_timeout_ms": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
            conn.version_for(INIT_PRODUCER_ID, 4),
        )
        batch = build_batch(
            [Record(0, 1, None, b"a"), Record(1, 1, None, b"b")],
            producer_id=answer["producer_id"],
            producer_epoch=answer["producer_epoch"],
            base_sequence=0,
        )
        codes = [client.produce(topic, 0, batch)["error_code"] for _ in range(2)]
    return codes, [r.value for _, _, records in log_of(bootstrap, topic, 1) for r in records]


def test_mock_appends_a_resent_idempotent_batch_again(
    mock_cluster: MockCluster, tansu: TansuBroker, topic_name: str
) -> None:
    """librdkafka's mock checks producer ids and sequences only for transactional
    producers: an idempotent producer's re-sent batch is appended a second time (a Kafka
    broker, and Tansu, answer DUPLICATE_SEQUENCE_NUMBER and keep one copy). So a
    producer re-sending after a lost answer (a broker taken down, a leader moved) writes
    its values twice into the mock: the stream soak judges by source offsets for this
    reason (tests/test_soak_stream.py)."""
    from .helpers.broker_setup import create_topic

    mock_cluster.create_topic(topic_name, 1, 1)
    assert _send_twice(mock_cluster.bootstrap, topic_name) == ([0, 0], [b"a", b"b"] * 2)
    create_topic(tansu, topic_name, 1)
    assert _send_twice(tansu.bootstrap, topic_name) == ([0, 46], [b"a", b"b"])


def test_mock_delete_records_and_apiversion(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1, 1)
    conf = {"bootstrap.servers": mock_cluster.bootstrap}
    produce(conf, topic_name, n=10, partitions=1)
    mock_cluster.partition_delete_records(topic_name, 0, 4)
    c = Consumer({**conf, "group.id": "wm"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (4, 10)
    finally:
        c.close()
    # Unknown broker ids surface as RuntimeError with librdkafka's error name.
    with pytest.raises(RuntimeError, match="broker_set_rtt"):
        mock_cluster.broker_set_rtt(99, 10)


def test_mock_cluster_lifecycle() -> None:
    with MockCluster(brokers=1) as mc:
        assert len(mc.bootstrap.split(",")) == 1
        mc.set_apiversion(PRODUCE, 3, 9)
        mc.broker_set_rtt(1, 0)
    with pytest.raises(RuntimeError, match="closed"):
        mc.create_topic("x")
    mc.close()  # idempotent


# -- both, from another process (as Spark executors would connect) ------------------


def test_other_process_can_connect(tansu: TansuBroker, mock_cluster: MockCluster) -> None:
    code = (
        "import json, sys\n"
        "from confluent_kafka.admin import AdminClient\n"
        "out = {}\n"
        "for bs in sys.argv[1:]:\n"
        "    md = AdminClient({'bootstrap.servers': bs}).list_topics(timeout=10)\n"
        "    out[bs] = sorted(md.brokers)\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, tansu.bootstrap, mock_cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out[tansu.bootstrap] == [111]
    assert out[mock_cluster.bootstrap] == [1, 2, 3]


# -- a fixed port (python -m kafka_testbed --port 9092) -----------------------------------


def _free_ports(n: int) -> int:
    """A port free on 127.0.0.1 with the ``n - 1`` after it free too."""
    for _ in range(50):
        with socket.create_server(("127.0.0.1", 0)) as first:
            port = first.getsockname()[1]
            try:
                others = [socket.create_server(("127.0.0.1", port + i)) for i in range(1, n)]
            except OSError:
                continue
            for s in others:
                s.close()
            return port
    raise AssertionError(f"no {n} free ports in a row")


def test_mock_cluster_on_a_fixed_port(topic_name: str) -> None:
    """Broker n listens on port + n - 1 and Metadata advertises it, so a client given the
    first port alone reaches every broker there."""
    port = _free_ports(2)
    with MockCluster(brokers=2, port=port) as mc:
        assert mc.bootstrap == f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        mc.create_topic(topic_name, 2, 2)
        conf = {"bootstrap.servers": f"localhost:{port}"}
        md = AdminClient(conf).list_topics(topic_name, timeout=10)
        assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
            1: ("127.0.0.1", port),
            2: ("127.0.0.1", port + 1),
        }
        produce(conf, topic_name)
        check_roundtrip(consume(conf, topic_name, N))
    with pytest.raises(ConnectionRefusedError):  # closed with the cluster
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_mock_cluster_on_a_taken_port_names_it_at_once() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(PortTakenError) as info:
            MockCluster(brokers=1, port=port)
        assert time.monotonic() - started < 10
    assert str(info.value) == (
        f"port {port} (127.0.0.1:{port}) is already in use, so the mock cluster's broker 1 "
        "cannot listen there: stop what holds it, or choose another port"
    )


def _testbed(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kafka_testbed", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_python_m_kafka_testbed_port() -> None:
    """``--port 9092`` is what the getting-started page runs its code against."""
    port = _free_ports(1)
    proc = _testbed("--port", str(port), "--no-registry", "--topic", "orders:2")
    try:
        lines = []
        while not lines or not lines[-1].startswith("Running"):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
        assert f'.option("kafka.bootstrap.servers", "127.0.0.1:{port}")' in "".join(lines)
        md = AdminClient({"bootstrap.servers": f"localhost:{port}"}).list_topics(timeout=10)
        assert len(md.topics["orders"].partitions) == 2
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        proc = _testbed("--port", str(port))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert err.strip() == (
        f"port {port} (127.0.0.1:{port}) is already in use, so the mock cluster's broker 1 "
        "cannot listen there: stop what holds it, or choose another port"
    )
