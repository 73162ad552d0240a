"""The Apache Kafka of the testbed (:class:`kafka_testbed.KafkaCluster`) is what it says:
records survive a SIGKILL and a restart on the same log directory, a SIGSTOPped node
answers nothing until SIGCONT, a SIGTERM is a clean shutdown, the transaction.version it was
formatted with is the one its controller finalized, Kafka's own tools run from its jars, a
node that cannot start fails loudly with its log, the jar cache is never fetched twice, a
fixed port is the broker's (a taken one named before anything starts), and
listener options that cannot work are refused before anything starts (the listeners
themselves are proven by the tests that sign in on them: test_kafka_signin, test_kafka_tls).

confluent-kafka (librdkafka) is the independent client.
"""

from __future__ import annotations

import re
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer

from kafka_testbed import KafkaCluster, KafkaStartError, maven_jars

from .helpers.waiting import wait_until


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, key=b"k%d" % i)
    assert p.flush(30) == 0


def _consume(bootstrap: str, topic: str, n: int, timeout_s: float = 30) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}-{time.time()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


@pytest.fixture(scope="module")
def own_cluster():
    """A one-node cluster of this module's own: the tests kill and pause it."""
    with KafkaCluster(transaction_version=1) as cluster:
        yield cluster


def test_records_survive_a_sigkill_and_a_restart_on_the_same_log(own_cluster, topic_name):
    _produce(own_cluster.bootstrap, topic_name, 50)
    pid = own_cluster.pid(1)
    own_cluster.kill(1)
    assert not own_cluster.running(1)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", own_cluster.nodes[1].ports["PLAINTEXT"]), 1)
    own_cluster.restart(1)
    assert own_cluster.pid(1) != pid
    assert _consume(own_cluster.bootstrap, topic_name, 50) == [b"v%d" % i for i in range(50)]


def test_a_node_that_dies_on_its_own_leaves_its_logs(own_cluster, tmp_path, monkeypatch):
    """A node whose process ends without the testbed ending it (a crash, an
    OutOfMemoryError) is named by ``dead_nodes``; its server.log and stdout.log are kept
    out of the cluster's directory (``stop`` deletes that), with a warning that says
    where, once. A node the testbed killed is not dead in that sense."""
    import os
    import signal

    own_cluster.kill(1)
    assert own_cluster.dead_nodes() == []
    own_cluster.restart(1)
    monkeypatch.setenv("PYKAFKA_DEAD_NODE_LOGS", str(tmp_path))
    os.kill(own_cluster.pid(1), signal.SIGKILL)  # from outside the testbed
    wait_until(lambda: not own_cluster.running(1), 30, "node 1 seen dead", interval=0.1)
    assert own_cluster.dead_nodes() == [1]
    with pytest.warns(UserWarning, match="node 1 died") as warned:
        (folder,) = own_cluster.keep_logs_of_dead_nodes()
    assert str(folder) in str(warned[0].message)
    assert folder.parent == tmp_path and "Kafka Server started" in (
        (folder / "server.log").read_text()
    )
    assert own_cluster.dead_nodes() == [] and own_cluster.keep_logs_of_dead_nodes() == []
    own_cluster.restart(1)


def test_a_paused_node_answers_nothing_until_it_is_resumed(own_cluster):
    from protocol.client.cluster import KafkaClient
    from protocol.errors import PyKafkaError

    own_cluster.pause(1)
    try:
        started = time.monotonic()
        with pytest.raises(PyKafkaError):
            with KafkaClient(
                bootstrap_servers=own_cluster.bootstrap,
                request_timeout_ms=1500,
                connect_timeout_ms=1500,
            ) as client:
                client.refresh_metadata([])
        assert time.monotonic() - started < 20
    finally:
        own_cluster.resume(1)
    with KafkaClient(bootstrap_servers=own_cluster.bootstrap) as client:
        assert set(client.refresh_metadata([]).brokers) == {1}


def test_sigterm_is_a_clean_shutdown(own_cluster):
    own_cluster.terminate(1)
    # the JVM ran its shutdown hooks (143 = killed by SIGTERM after them, no SIGKILL needed)
    assert own_cluster.nodes[1].process.returncode == 143
    assert "[BrokerServer id=1] shut down completed" in own_cluster.nodes[1].log_tail(400)
    own_cluster.restart(1)
    assert own_cluster.running(1)


def _finalized_transaction_version(cluster: KafkaCluster) -> int:
    out = cluster.tool(
        "org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", cluster.bootstrap, "describe"
    ).stdout
    match = re.search(r"Feature:\s*transaction\.version\s.*?FinalizedVersionLevel:\s*(\d+)", out)
    assert match, out
    return int(match.group(1))


def test_the_transaction_version_is_the_one_formatted(own_cluster, kafka):
    assert _finalized_transaction_version(own_cluster) == 1
    assert _finalized_transaction_version(kafka) == 2  # 4.x's default


def test_kafka_s_own_tools_are_referees(kafka, topic_name):
    _produce(kafka.bootstrap, topic_name, 7)
    out = kafka.tool(
        "org.apache.kafka.tools.GetOffsetShell",
        "--bootstrap-server",
        kafka.bootstrap,
        "--topic",
        topic_name,
    ).stdout
    assert out.strip() == f"{topic_name}:0:7"


def test_a_node_that_cannot_start_fails_with_its_log():
    cluster = KafkaCluster(
        broker_config={"num.network.threads": "not-a-number"}, start_timeout_s=60
    )
    with pytest.raises(KafkaStartError, match="num.network.threads"):
        cluster.start()
    assert not any(cluster.running(i) for i in cluster.nodes)


def test_the_jar_cache_is_not_fetched_again(kafka, monkeypatch):
    # the session's broker fetched its jars; asking again must not need Maven at all
    monkeypatch.setattr(maven_jars.shutil, "which", lambda name: None)
    folder = maven_jars.kafka_jar_dir(kafka.version)
    assert (folder / ".complete").exists()
    assert any(p.name == f"kafka_2.13-{kafka.version}.jar" for p in folder.glob("*.jar"))


def test_listener_options_are_checked_before_any_start(tmp_path):
    """SASL_SSL takes the SSL listener's certificate and the SASL listener's users; a
    further TLS listener may not take a name the testbed gives its own; the JWKS is read
    from the URL given or the file."""
    files = (str(tmp_path / "c.pem"), str(tmp_path / "k.pem"))
    with pytest.raises(ValueError, match="sasl_ssl=True needs ssl"):
        KafkaCluster(sasl=True, sasl_ssl=True)
    with pytest.raises(ValueError, match="sasl_ssl=True needs ssl"):
        KafkaCluster(ssl=files, sasl_ssl=True)
    with pytest.raises(ValueError, match=r"\['SASL'\] are names of the testbed's own"):
        KafkaCluster(ssl_listeners={"sasl": files})
    cluster = KafkaCluster(sasl=True, ssl=files, sasl_ssl=True, ssl_listeners=(("expired", files),))
    assert cluster.listeners == ["PLAINTEXT", "SASL", "SSL", "SASL_SSL", "EXPIRED"]
    # the JWKS: an issuer's endpoint as it is, a file as a file: URL
    assert KafkaCluster(oauth_jwks="http://127.0.0.1:1/jwks").jwks_url == "http://127.0.0.1:1/jwks"
    assert KafkaCluster(oauth_jwks=files[0]).jwks_url == (tmp_path / "c.pem").as_uri()


def test_a_fixed_port_is_the_broker_s_and_a_taken_one_is_named_at_once(topic_name):
    """``KafkaCluster(port=...)`` (``python -m kafka_testbed --kafka --port 9092``): a port
    another process holds fails before anything is fetched or started, naming it; a free
    one is where the broker listens and what Metadata advertises."""
    from kafka_testbed import PortTakenError
    from protocol.client.cluster import KafkaClient

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(PortTakenError) as info:
            KafkaCluster(port=port).start()
        assert time.monotonic() - started < 10  # before a JVM is started
    assert str(info.value) == (
        f"port {port} (127.0.0.1:{port}) is already in use, so Kafka node 1 cannot listen "
        "there: stop what holds it, or choose another port"
    )
    with KafkaCluster(port=port) as cluster:
        assert cluster.bootstrap == f"127.0.0.1:{port}"
        with KafkaClient(bootstrap_servers=f"localhost:{port}") as client:
            assert client.metadata(topics=[]).brokers == {1: ("127.0.0.1", port)}
            client.create_topics({topic_name: 1})
            client.wait_for_topics([topic_name])
        _produce(f"localhost:{port}", topic_name, 3)
        assert len(_consume(f"localhost:{port}", topic_name, 3)) == 3
