"""TLS to Apache Kafka itself: mutual TLS, SASL over TLS, and every refusal a user meets.

All on the shared sign-in cluster (``tests/helpers/signin_cluster.py``: the newest pinned Kafka,
PEM keystores from trustme): ``SSL`` requires a client certificate from the test CA,
``SASL_SSL`` takes PLAIN, SCRAM and OIDC tokens (Kafka's JWKS validator) over TLS, and two
more TLS listeners carry a certificate for another host (``WRONG_HOST``) and one that has
expired (``EXPIRED``). These tests replace those that ran on Tansu behind a TLS front of
ours (``tests/test_tls_broker.py``): here Kafka's own TLS stack (Java's) is the other side.

Every refusal must come within ``REFUSED_WITHIN_S`` (not after retries until the request
timeout of 10 s), as an error that is not retried, with words naming what is wrong and the
option that mends it, and never a password. What was found on Kafka 4.4.0 (TLS 1.3):

* it refuses a client certificate that has expired with the same alert as one from an
  unknown CA (CERTIFICATE_UNKNOWN), in place of the first answer;
* a plaintext client gets a TLS alert record back, which the client read as a frame of
  352 MB ("frame size 352518912 exceeds the maximum response size"); it now says the
  listener wants TLS and names ``kafka.security.protocol``;
* a TLS client at a plaintext listener sees the connection closed in the handshake
  (``UNEXPECTED_EOF``); the error now says which option to check;
* a certificate naming another host, or expired, failed with OpenSSL's words only; the
  error now names ``kafka.ssl.endpoint.identification.algorithm``, or says the broker's
  certificate must be renewed, and a certificate from an unknown CA names the CA file.
"""

from __future__ import annotations

import time

import pytest

from kafka_sink.options import parse_writer_options
from kafka_source.options import parse_reader_options
from kafka_testbed import SASL_USERS
from protocol.client import pool
from protocol.errors import AuthenticationError, PyKafkaError

from .helpers.signin_cluster import client_for, round_trip, tls_options
from .helpers.signin import issuer_token_options, sasl_ssl_options
from .helpers.secrets import assert_no_secret
from .helpers.trust_env import allow_urls

REFUSED_WITHIN_S = 10.0  # at once, not after the 30 s request timeout: a loaded machine's margin
PASSWORD = SASL_USERS["alice"]


def refusal(options: dict) -> PyKafkaError:
    """The error of signing in with ``options``, which must come within the bound."""
    started = time.monotonic()
    with pytest.raises(PyKafkaError) as info:
        with client_for(options) as client:
            client.refresh_metadata([])
    took = time.monotonic() - started
    assert took < REFUSED_WITHIN_S, f"refused after {took:.1f} s: {info.value}"
    return info.value


# ---- what works ------------------------------------------------------------------------------


def test_mutual_tls_carries_data(signin_kafka, signin_pki, topic_name):
    """The broker's certificate is verified against the CA (host name included), the broker
    verifies ours."""
    with client_for(tls_options(signin_kafka, signin_pki)) as client:
        assert round_trip(client, topic_name, [b"over-tls"]) == [b"over-tls"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_with_a_password_carries_data(signin_kafka, signin_pki, topic_name, mechanism):
    """SASL over TLS, the shape of most managed Kafkas: no client certificate, the user
    signs in inside the TLS connection."""
    with client_for(sasl_ssl_options(signin_kafka, signin_pki, mechanism)) as client:
        values = [mechanism.encode(), b"over-sasl-ssl"]
        assert round_trip(client, topic_name, values) == values


def test_sasl_ssl_with_an_oidc_token_carries_data(
    signin_kafka, signin_pki, signin_issuer, topic_name, monkeypatch
):
    """The client fetches a token from the issuer; Kafka's JWKS validator checks it, over
    TLS."""
    allow_urls(monkeypatch, signin_issuer.token_endpoint)
    options = {
        **issuer_token_options(signin_kafka.listener("SASL_SSL"), signin_issuer),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.cafile": str(signin_pki / "ca.pem"),
    }
    with client_for(options) as client:
        assert round_trip(client, topic_name, [b"oidc-over-tls"]) == [b"oidc-over-tls"]


def test_host_name_check_off_keeps_the_chain_check(signin_kafka, signin_pki, topic_name):
    """``kafka.ssl.endpoint.identification.algorithm=""`` takes the certificate that names
    another host, and still refuses one from an unknown CA."""
    options = {
        **tls_options(signin_kafka, signin_pki, listener="WRONG_HOST", client_cert=None),
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    with client_for(options) as client:
        assert round_trip(client, topic_name, [b"any-name"]) == [b"any-name"]
    error = refusal({**options, "kafka.ssl.cafile": str(signin_pki / "other-ca.pem")})
    assert "certificate verify failed: unable to get local issuer certificate" in str(error)


def test_verification_is_on_by_default(signin_kafka):
    """Neither check is off unless asked: the options' defaults keep both."""
    options = {
        "kafka.bootstrap.servers": signin_kafka.listener("SSL"),
        "kafka.security.protocol": "SSL",
    }
    for config in (
        parse_reader_options({**options, "subscribe": "t"}).client_config,
        parse_writer_options({**options, "topic": "t"}).client_config,
    ):
        assert config.ssl_verify and config.ssl_check_hostname


def test_a_pooled_tls_client_keeps_its_connections_between_tasks(signin_kafka, signin_pki):
    """TLS 1.3 brokers send session tickets after the handshake: an idle TLS connection
    has bytes to read that are no data. The pool's check must not take them for a close
    (nor lose them): the connections stay, and serve the next checkout."""
    config = parse_reader_options(
        {**tls_options(signin_kafka, signin_pki), "subscribe": "t"}
    ).client_config
    p = pool.ClientPool()
    try:
        with p.borrow(config) as lease:
            lease.client.refresh_metadata()
            first = lease.client
            opened = first.open_connections
        # time for session tickets the broker sends late to reach the idle sockets: whether
        # they come after the last answer is the broker's to choose, nothing to wait on
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


# ---- the client refuses the broker -----------------------------------------------------------


def test_a_broker_certificate_from_an_unknown_ca_is_refused_naming_the_ca_file(
    signin_kafka, signin_pki
):
    error = refusal(tls_options(signin_kafka, signin_pki, ca="other-ca.pem"))
    message = str(error)
    assert isinstance(error, AuthenticationError)
    assert f"TLS handshake with {signin_kafka.listener('SSL')} failed" in message
    assert "CERTIFICATE_VERIFY_FAILED" in message
    assert f"not signed by a CA of kafka.ssl.cafile '{signin_pki / 'other-ca.pem'}'" in message


def test_without_a_ca_file_the_error_says_which_option_takes_one(signin_kafka, signin_pki):
    """Only the system's CAs are trusted then; the error says which options take the
    broker's CA."""
    error = refusal(tls_options(signin_kafka, signin_pki, ca=None))
    assert isinstance(error, AuthenticationError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(error)
    assert "give the broker's CA with kafka.ssl.truststore.location" in str(error)
    assert "in PEM with kafka.ssl.cafile" in str(error)


def test_a_broker_certificate_for_another_host_is_refused_naming_the_option(
    signin_kafka, signin_pki
):
    error = refusal(tls_options(signin_kafka, signin_pki, listener="WRONG_HOST", client_cert=None))
    message = str(error)
    assert isinstance(error, AuthenticationError)
    assert "IP address mismatch" in message
    assert "the broker's certificate does not name '127.0.0.1'" in message
    assert "set kafka.ssl.endpoint.identification.algorithm to an empty string" in message


def test_an_expired_broker_certificate_is_refused(signin_kafka, signin_pki):
    error = refusal(tls_options(signin_kafka, signin_pki, listener="EXPIRED", client_cert=None))
    message = str(error)
    assert isinstance(error, AuthenticationError)
    assert "certificate verify failed: certificate has expired" in message
    assert "it must be renewed on the broker" in message


# ---- the broker refuses the client -----------------------------------------------------------


@pytest.mark.parametrize(
    "client_cert,alert",
    [
        (None, "SSLV3_ALERT_BAD_CERTIFICATE"),
        ("stranger", "SSLV3_ALERT_CERTIFICATE_UNKNOWN"),  # from a CA it does not trust
        ("expired-client", "SSLV3_ALERT_CERTIFICATE_UNKNOWN"),  # Kafka says no more than that
    ],
)
def test_a_client_certificate_the_broker_does_not_take_is_refused(
    signin_kafka, signin_pki, client_cert, alert
):
    """With TLS 1.3 the broker checks the client's certificate after the client's side of
    the handshake: the refusal is an alert in place of the first answer. It is an
    AuthenticationError naming the options, not a broken connection (which readers and
    writers retry until their timeouts)."""
    error = refusal(tls_options(signin_kafka, signin_pki, client_cert=client_cert))
    message = str(error)
    assert isinstance(error, AuthenticationError)
    assert f"TLS with {signin_kafka.listener('SSL')}: the broker ended the connection" in message
    assert f"with {alert};" in message
    assert "missing, untrusted or expired" in message and "kafka.ssl.certfile" in message


def test_a_wrong_password_over_tls_is_refused_never_shown(signin_kafka, signin_pki):
    wrong = "Wr0ng-over-tls"
    error = refusal(
        {
            **sasl_ssl_options(signin_kafka, signin_pki, "SCRAM-SHA-256"),
            "kafka.sasl.password": wrong,
        }
    )
    assert isinstance(error, AuthenticationError)
    assert "SASL SCRAM-SHA-256 authentication of user 'alice' failed" in str(error)
    assert_no_secret(error, secrets=[wrong, PASSWORD])


# ---- the wrong kafka.security.protocol -------------------------------------------------------


@pytest.mark.parametrize(
    "listener,protocol", [("SSL", "PLAINTEXT"), ("SASL_SSL", "SASL_PLAINTEXT")]
)
def test_a_client_without_tls_at_a_tls_listener_is_told_to_use_tls(
    signin_kafka, signin_pki, listener, protocol
):
    """Kafka answers the first request with a TLS alert record: not a frame of 352 MB."""
    options = {
        **sasl_ssl_options(signin_kafka, signin_pki, "SCRAM-SHA-512"),
        "kafka.bootstrap.servers": signin_kafka.listener(listener),
        "kafka.security.protocol": protocol,
    }
    if protocol == "PLAINTEXT":
        options = {k: v for k, v in options.items() if not k.startswith("kafka.sasl.")}
    del options["kafka.ssl.cafile"]
    error = refusal(options)
    message = str(error)
    assert message.startswith(
        f"{signin_kafka.listener(listener)}: the broker answered with a TLS "
        "alert record, not a Kafka frame"
    )
    assert "set kafka.security.protocol to SSL (or SASL_SSL)" in message
    assert_no_secret(error, secrets=[PASSWORD])


def test_a_tls_client_at_a_plaintext_listener_is_told_to_check_the_protocol(
    signin_kafka, signin_pki
):
    error = refusal(
        {
            **tls_options(signin_kafka, signin_pki, client_cert=None),
            "kafka.bootstrap.servers": signin_kafka.bootstrap,
        }
    )
    message = str(error)
    assert isinstance(error, AuthenticationError)
    assert f"TLS handshake with {signin_kafka.bootstrap} failed" in message
    assert "as a listener without TLS does: check that kafka.security.protocol" in message
