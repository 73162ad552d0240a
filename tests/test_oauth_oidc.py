"""OAUTHBEARER with OIDC client credentials against a real token issuer.

The issuer is the npm package oauth2-mock-server (``tests/helpers/oidc_issuer.py``): RS256 tokens
for registered clients only, a JWKS to check them with. The sign-in runs on Apache Kafka
(the sign-in cluster's OAUTH listener, ``tests/helpers/signin_cluster.py``), whose own JWKS
validator checks the token the connector fetched; its refusals are in
``tests/test_kafka_signin.py``. The rest needs no broker (the token endpoint's answers, the
refresh, an https endpoint) but one: librdkafka (confluent-kafka with
``sasl.oauthbearer.method=oidc``) is the referee of our client initial response, byte for
byte, which only a broker that records what it receives can compare: the scripted broker
following Kafka's OAuthBearerSaslServer (``tests/helpers/fake_sasl_broker.py``) takes both.
"""

from __future__ import annotations

import logging
import re
import time

import pytest

from kafka_common.oauth.tokens import TOKEN_CACHE
from kafka_source.options import parse_reader_options
from protocol.client.cluster import KafkaClient
from protocol.client.connection import BrokerConnection
from protocol.errors import AuthenticationError

from .helpers.fake_sasl_broker import FakeSaslBroker
from .helpers.oidc_issuer import OidcIssuer
from .helpers.signin_cluster import CLIENT_SECRET as SIGNIN_SECRET
from .helpers.signin_cluster import REAUTH_MS
from .helpers.secrets import assert_no_secret
from .helpers.trust_env import allow_urls
from .helpers.oidc import CLIENT, SECRET, jvm_options


@pytest.fixture(scope="module")
def issuer():
    with OidcIssuer({CLIENT: {"secret": SECRET, "scopes": ["kafka", "other"]}}) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_cache(request, monkeypatch):
    """A clean token cache; the operator allows the module's issuer (tests that need it)."""
    if "issuer" in request.fixturenames:
        allow_urls(monkeypatch, request.getfixturevalue("issuer").token_endpoint)
    TOKEN_CACHE.clear()
    yield
    TOKEN_CACHE.clear()


def test_client_credentials_token_signs_in_at_apache_kafka(
    signin_kafka, signin_issuer, topic_name, monkeypatch, caplog
):
    """The options a JVM user copies (single quotes, extensions): the connector fetches a
    token from the sign-in issuer, Kafka's JWKS validator takes it (the extensions it
    accepts without checking) and grants a 3 s session; a second connection signs in with
    the same cached token. Neither the client secret nor the token is logged."""
    caplog.set_level(logging.DEBUG)
    allow_urls(monkeypatch, signin_issuer.token_endpoint)
    bootstrap = signin_kafka.listener("OAUTH")
    config = parse_reader_options(
        jvm_options(bootstrap, signin_issuer.token_endpoint, secret=SIGNIN_SECRET)
    ).client_config
    with KafkaClient(config) as client:
        client.create_topics({topic_name: 2})
        client.wait_for_topics([topic_name])
        assert client.partitions_for(topic_name) == [0, 1]
    factory = config.sasl_mechanism_factory
    first = TOKEN_CACHE.get(factory.source, factory.policy)
    host, port = bootstrap.split(":")
    with BrokerConnection(host, int(port), config) as conn:
        assert conn.session_lifetime_ms == REAUTH_MS
    assert TOKEN_CACHE.get(factory.source, factory.policy) is first
    assert SIGNIN_SECRET not in caplog.text and first.value.reveal() not in caplog.text


def test_wrong_client_secret_names_the_options_never_the_secret(issuer):
    options = jvm_options("127.0.0.1:1", issuer.token_endpoint, secret="Wr0ng-s3cret")
    config = parse_reader_options(options).client_config
    with pytest.raises(AuthenticationError) as info:
        config.sasl_mechanism_factory("127.0.0.1")
    message = str(info.value)
    assert "HTTP 401" in message and "invalid_client" in message and "clientSecret" in message
    assert_no_secret(info.value, secrets=["Wr0ng-s3cret", SECRET])


def test_librdkafka_sends_the_same_framing_and_extensions(issuer):
    """The referee: confluent-kafka's OIDC method against the same issuer and broker."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    def framing(message: bytes) -> bytes:
        return re.sub(rb"auth=Bearer [-_.a-zA-Z0-9]+", b"auth=Bearer <token>", message)

    with FakeSaslBroker(
        {}, mechanisms=("OAUTHBEARER",), topics={"t": 1}, check_token=issuer.check
    ) as fake:
        admin = AdminClient(
            {
                "bootstrap.servers": fake.bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": CLIENT,
                "sasl.oauthbearer.client.secret": SECRET,
                "sasl.oauthbearer.token.endpoint.url": issuer.token_endpoint,
                "sasl.oauthbearer.scope": "kafka",
                "sasl.oauthbearer.extensions": "logicalCluster=lkc-abc12,identityPoolId=pool-Xy9",
            }
        )
        try:  # signing in is all that is compared (this broker answers little after it)
            admin.list_topics(timeout=10)
        except confluent_kafka.KafkaException:
            pass
        assert fake.authenticated.wait(10)
        theirs = [t for t in fake.received if t.startswith(b"n,")][0]
        config = parse_reader_options(
            jvm_options(fake.bootstrap, issuer.token_endpoint)
        ).client_config
        with BrokerConnection("127.0.0.1", fake.port, config):
            pass
        ours = [t for t in fake.received if t.startswith(b"n,")][-1]
    assert framing(ours) == framing(theirs)
    assert (
        fake.bearer[0][1]
        == fake.bearer[-1][1]
        == {"logicalCluster": "lkc-abc12", "identityPoolId": "pool-Xy9"}
    )
    assert all(issuer.check(token) is None for token, _ in fake.bearer)


def test_token_lifetime_drives_the_refresh(issuer, monkeypatch):
    """A 100 s token: Kafka's rules (80% + jitter, 300 s buffer, 60 s minimum period)
    refresh it after 60 s; before that the cached one is reused."""
    from kafka_common.oauth.tokens import TokenCache

    now = [time.time()]
    cache = TokenCache(clock=lambda: now[0])
    with OidcIssuer({CLIENT: {"secret": SECRET, "scopes": ["kafka"]}}, token_ttl_s=100) as short:
        allow_urls(monkeypatch, short.token_endpoint)
        config = parse_reader_options(
            jvm_options("127.0.0.1:1", short.token_endpoint)
        ).client_config
        factory = config.sasl_mechanism_factory
        first = cache.get(factory.source, factory.policy)
        assert 99 <= first.expires_at - first.issued_at <= 100
        now[0] += 59
        assert cache.get(factory.source, factory.policy) is first
        now[0] += 2
        time.sleep(1.1)  # the issuer's clock (whole seconds) must move for a different token
        assert cache.get(factory.source, factory.policy).value != first.value


def test_https_token_endpoint_is_verified(issuer, tmp_path, monkeypatch):
    """The issuer behind a TLS front (a certificate for 127.0.0.1 from a test CA): trusted
    through kafka.sasl.oauthbearer.ssl.cafile it answers; without it the system CAs refuse
    the certificate and the error says TLS failed, naming the endpoint."""
    import socket
    import ssl

    import trustme

    from kafka_testbed.tansu import _TlsFront

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    front = _TlsFront(listener, ("127.0.0.1", int(issuer.base.rsplit(":", 1)[1])), context)
    cafile = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(cafile))
    endpoint = f"https://127.0.0.1:{port}/token"
    allow_urls(monkeypatch, endpoint)
    try:
        trusted = parse_reader_options(
            {
                **jvm_options("127.0.0.1:1", endpoint),
                **{"kafka.sasl.oauthbearer.ssl.cafile": str(cafile)},
            }
        ).client_config
        mech = trusted.sasl_mechanism_factory("127.0.0.1")
        assert mech.initial_response().startswith(b"n,,\x01auth=Bearer ey")
        TOKEN_CACHE.clear()
        untrusted = parse_reader_options(jvm_options("127.0.0.1:1", endpoint)).client_config
        with pytest.raises(AuthenticationError, match="TLS to the token endpoint") as info:
            untrusted.sasl_mechanism_factory("127.0.0.1")
        assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    finally:
        front.close()
