"""Our client over TLS to a real broker (Tansu behind a TLS front, certificates made by
trustme in the test): verification on by default, a wrong hostname or an unknown CA fails
before any Kafka request is sent, mutual TLS with a client certificate."""

import time

import pytest
import trustme

from kafka_testbed import TansuBroker
from protocol.cluster import KafkaClient
from protocol.errors import AuthenticationError


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    server = ca.issue_cert("localhost", "127.0.0.1")
    server.private_key_pem.write_to_path(str(d / "server.key"))
    server.cert_chain_pems[0].write_to_path(str(d / "server.pem"))
    for extra in server.cert_chain_pems[1:]:
        with open(d / "server.pem", "ab") as f:
            f.write(extra.bytes())
    client = ca.issue_cert("pykafka-client")
    client.private_key_pem.write_to_path(str(d / "client.key"))
    client.cert_chain_pems[0].write_to_path(str(d / "client.pem"))
    other = trustme.CA()
    other.cert_pem.write_to_path(str(d / "other-ca.pem"))
    wrong_name = ca.issue_cert("not-this-host.invalid")
    wrong_name.private_key_pem.write_to_path(str(d / "wrong.key"))
    wrong_name.cert_chain_pems[0].write_to_path(str(d / "wrong.pem"))
    return d


@pytest.fixture(scope="module")
def tls_broker(pki):
    with TansuBroker(tls=(str(pki / "server.pem"), str(pki / "server.key")),
                     tls_client_ca=str(pki / "ca.pem")) as broker:
        yield broker


def client_for(broker, pki, **overrides):
    settings = dict(bootstrap_servers=broker.bootstrap, security_protocol="SSL",
                    ssl_cafile=str(pki / "ca.pem"), ssl_certfile=str(pki / "client.pem"),
                    ssl_keyfile=str(pki / "client.key"), connect_timeout_ms=3000,
                    request_timeout_ms=3000)
    settings.update(overrides)
    return KafkaClient(**settings)


def test_mutual_tls_round_trip(tls_broker, pki, topic_name):
    with client_for(tls_broker, pki) as client:
        client.create_topics({topic_name: 2})
        assert client.partitions_for(topic_name) == [0, 1]
        assert client.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): 0}


def test_unknown_ca_fails_before_any_request(tls_broker, pki):
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="certificate verify failed"):
        client_for(tls_broker, pki, ssl_cafile=str(pki / "other-ca.pem")).refresh_metadata()
    assert time.monotonic() - started < 5


def test_wrong_hostname_fails_unless_hostname_checks_are_off(pki):
    with TansuBroker(tls=(str(pki / "wrong.pem"), str(pki / "wrong.key"))) as broker:
        with pytest.raises(AuthenticationError, match="hostname|IP address mismatch"):
            client_for(broker, pki).refresh_metadata()
        # kafka.ssl.endpoint.identification.algorithm="" keeps the CA check, skips the name
        with client_for(broker, pki, ssl_check_hostname=False) as client:
            assert client.refresh_metadata().brokers


def test_plaintext_client_to_a_tls_listener_fails_quickly(tls_broker):
    started = time.monotonic()
    with pytest.raises(Exception):
        KafkaClient(bootstrap_servers=tls_broker.bootstrap, connect_timeout_ms=2000,
                    request_timeout_ms=2000).refresh_metadata()
    assert time.monotonic() - started < 6


def test_verification_is_on_by_default(tls_broker, pki):
    """With no CA file the system's trust store is used, and it does not hold the test CA:
    refused. The options' defaults keep both checks on."""
    from kafka_sink.options import parse_writer_options
    from kafka_source.options import parse_reader_options
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="certificate verify failed"):
        client_for(tls_broker, pki, ssl_cafile=None).refresh_metadata()
    assert time.monotonic() - started < 5
    for config in (
            parse_reader_options({"kafka.bootstrap.servers": tls_broker.bootstrap,
                                  "subscribe": "t", "kafka.security.protocol": "SSL"})
            .client_config,
            parse_writer_options({"kafka.bootstrap.servers": tls_broker.bootstrap,
                                  "topic": "t", "kafka.security.protocol": "SSL"})
            .client_config):
        assert config.ssl_verify and config.ssl_check_hostname


def test_mutual_tls_without_a_client_certificate_is_refused(tls_broker, pki):
    from protocol.errors import KafkaConnectionError
    started = time.monotonic()
    with pytest.raises((AuthenticationError, KafkaConnectionError)):
        client_for(tls_broker, pki, ssl_certfile=None, ssl_keyfile=None).refresh_metadata()
    assert time.monotonic() - started < 6


def test_a_pooled_tls_client_keeps_its_connections_between_tasks(tls_broker, pki):
    """TLS 1.3 brokers send session tickets after the handshake: an idle TLS connection
    has bytes to read that are no data. The pool's check must not take them for a close
    (nor lose them): the connections stay, and serve the next checkout."""
    from protocol import pool
    from protocol.config import ClientConfig
    config = ClientConfig(bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                          ssl_cafile=str(pki / "ca.pem"), ssl_certfile=str(pki / "client.pem"),
                          ssl_keyfile=str(pki / "client.key"))
    p = pool.ClientPool()
    try:
        with p.borrow(config) as lease:
            lease.client.refresh_metadata()
            first = lease.client
            opened = first.open_connections
        time.sleep(0.3)
        for _ in range(3):
            with p.borrow(config) as lease:
                assert lease.client is first and lease.reused
                assert lease.client.open_connections == opened >= 1
                assert lease.client.refresh_metadata().brokers
        assert p.stats["replaced_connections"] == 0
    finally:
        p.close()
    assert first.open_connections == 0
