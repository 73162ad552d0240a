"""Signing in to Apache Kafka itself: SASL PLAIN, SCRAM-SHA-256/512, OAUTHBEARER (the
broker's unsecured validator and its JWKS validator), over SASL_PLAINTEXT and SASL_SSL, and
KIP-368 re-authentication (TLS and its refusals: ``tests/test_kafka_tls.py``).

Every way of signing in is on one cluster of the newest pinned Kafka, shared with the other
sign-in tests (``signin_kafka``, ``tests/helpers/signin_cluster.py``): the listener ``SASL`` (PLAIN
and SCRAM for ``SASL_USERS``, OAUTHBEARER checked by the unsecured validator), ``OAUTH``
(OAUTHBEARER checked against the JWKS of the test OIDC issuer, ``tests/helpers/oidc_issuer.py``),
``SASL_SSL`` (the same over TLS), ``SSL`` (client certificates required), and
``connections.max.reauth.ms`` of 3 s on the SASL listeners, so every session ends 3 s after
it began unless the client signs in again. The oldest pinned version (3.9.2) and a middle
one (4.1.2) get the same cluster for the compatibility pass.

What was found on these brokers:

* The unsecured validator (``OAuthBearerUnsecuredValidatorCallbackHandler``, the default
  of an OAUTHBEARER listener) accepts only unsigned tokens: the connector's tokens from the
  ``unsecuredLogin*`` options of the JAAS line sign in; the issuer's RS256 token is refused
  with ``invalid_token``. The JWKS validator is the other way round.
* Kafka 4.4 does not start a JWKS validator that checks neither the audience nor the
  issuer; the testbed sets the issuer to expect (the test issuer's URL) and
  ``allow.unverified.audience`` (listener-prefixed, as 3.9.2, 4.1.2 and 4.4.0 honour).
  All three fetch the JWKS from the issuer's http endpoint once it is on the JVM's
  ``org.apache.kafka.sasl.oauthbearer.allowed.urls``.
* A busy producer's connection (requests always in flight) was never renewed: it was
  renewed by reconnecting only while idle, so the broker closed it at every session's end
  and the producer resent. ``protocol.client.connection`` now re-authenticates on the same
  connection (SaslHandshake + SaslAuthenticate, as KIP-368 and Java's client do); Kafka
  takes that even after the session's end, but an idle connection whose session ended is
  replaced instead (the tests' SASL fronts close on a late SaslHandshake).
* TLS 1.3: the broker refuses a missing or untrusted client certificate with an alert in
  place of the first answer, which surfaced as a broken connection (retried until the
  timeout); it is now an AuthenticationError naming ``kafka.ssl.certfile``
  (``tests/test_kafka_tls.py``).
* Kafka's OAUTHBEARER refusal text is its JSON status, which the error showed twice.
"""

from __future__ import annotations

import base64
import json
import time

import pyarrow as pa
import pytest

import protocol.client.sasl_signin as sasl_signin
from kafka_common.oauth.tokens import TOKEN_CACHE
from kafka_sink.options import parse_writer_options
from kafka_sink.validation import WritePlan
from kafka_sink.writer import write_task
from kafka_source.options import parse_reader_options
from kafka_testbed import OLDEST_KAFKA, SASL_USERS
from protocol.client.cluster import KafkaClient
from protocol.client.connection import BrokerConnection
from protocol.errors import AuthenticationError, KafkaConnectionError
from protocol.records.batch import Record, build_batch
from protocol.schemas import METADATA

from .helpers.signin_cluster import (
    CLIENT,
    CLIENT_SECRET,
    REAUTH_MS,
    client_for,
    round_trip,
    tls_options,
)
from .helpers.secrets import assert_no_secret
from .helpers.waiting import wait_until
from .helpers.trust_env import allow_urls, spark_worker_env
from .helpers.signin import (
    OAUTH_HANDLER,
    OAUTH_MODULE,
    PASSWORD,
    USER,
    issuer_token_options,
    oauth_options,
    sasl_options,
    sasl_ssl_options,
)

MIDDLE_KAFKA = "4.1.2"
METADATA_BODY = {
    "topics": [],
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}
WRONG_PASSWORD = "Wr0ng-batt3ry-staple"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


# ---- the cluster (tests/helpers/signin_cluster.py) ---------------------------------------


@pytest.fixture(autouse=True)
def fresh_tokens(request, monkeypatch):
    """A clean token cache; the operator allows the issuer's token endpoint (tests that
    use it)."""
    if "signin_issuer" in request.fixturenames:
        allow_urls(monkeypatch, request.getfixturevalue("signin_issuer").token_endpoint)
    TOKEN_CACHE.clear()
    yield
    TOKEN_CACHE.clear()


# ---- options, as a user writes them ----------------------------------------------------------


def unsecured_token_options(bootstrap: str) -> dict:
    """Kafka's unsecured (unsigned) development token, built by the connector."""
    jaas = f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{USER}";'
    return oauth_options(bootstrap, **{"kafka.sasl.jaas.config": jaas})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def token_signed_by_another_key(signin_issuer) -> str:
    """A token like the issuer's -- its ``kid``, ``iss``, claims -- signed by a key that is
    not in the JWKS: only the signature is wrong."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": signin_issuer.jwks[0]["kid"]}
    claims = {
        "iss": signin_issuer.issuer,
        "sub": CLIENT,
        "scope": "kafka",
        "iat": now,
        "nbf": now,
        "exp": now + 600,
    }
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signature = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


# ---- 1. SASL PLAIN and SCRAM ---------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms_sign_in_and_carry_data(signin_kafka, topic_name, mechanism):
    """Each user of each mechanism signs in; the broker grants a 3 s session (so it did
    sign the user in on the SASL listener), and admin, Produce and Fetch work after it."""
    for user, password in SASL_USERS.items():
        with client_for(sasl_options(signin_kafka, mechanism, user, password)) as client:
            values = [f"{mechanism}-{user}-{i}".encode() for i in range(3)]
            assert round_trip(client, f"{topic_name}-{user}", values) == values
            conn = client.connection(client.leader_for(f"{topic_name}-{user}", 0))
            assert conn.session_lifetime_ms == REAUTH_MS


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_is_refused_naming_the_mechanism_never_the_password(signin_kafka, mechanism):
    with pytest.raises(AuthenticationError) as info:
        with client_for(sasl_options(signin_kafka, mechanism, password=WRONG_PASSWORD)) as client:
            client.refresh_metadata([])
    message = str(info.value)
    assert f"SASL {mechanism} authentication of user '{USER}' failed" in message
    assert signin_kafka.listener("SASL") in message
    assert message.endswith(  # the broker's own words
        "Authentication failed: Invalid username or password"
        if mechanism == "PLAIN"
        else "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )
    assert_no_secret(info.value, secrets=[WRONG_PASSWORD, PASSWORD])


def test_mechanism_the_listener_lacks_is_refused_with_what_it_offers(signin_kafka):
    """The OAUTH listener offers OAUTHBEARER only: SCRAM there is refused at the handshake."""
    options = {
        **sasl_options(signin_kafka, "SCRAM-SHA-512"),
        "kafka.bootstrap.servers": signin_kafka.listener("OAUTH"),
    }
    with pytest.raises(
        AuthenticationError,
        match=r"refused SASL mechanism SCRAM-SHA-512; "
        r"it offers \['OAUTHBEARER'\]",
    ) as info:
        with client_for(options) as client:
            client.refresh_metadata([])
    assert_no_secret(info.value, secrets=[PASSWORD])


# ---- 2. OAUTHBEARER --------------------------------------------------------------------------


def test_unsecured_token_signs_in_at_the_unsecured_validator(signin_kafka, topic_name):
    with client_for(unsecured_token_options(signin_kafka.listener("SASL"))) as client:
        assert round_trip(client, topic_name, [b"unsecured"]) == [b"unsecured"]


def test_issuer_token_signs_in_at_the_jwks_validator(signin_kafka, signin_issuer, topic_name):
    """The connector fetches a token from the issuer's endpoint, the broker checks its RS256
    signature against the issuer's JWKS; the session is limited to 3 s as configured."""
    with client_for(issuer_token_options(signin_kafka.listener("OAUTH"), signin_issuer)) as client:
        assert round_trip(client, topic_name, [b"jwks-1", b"jwks-2"]) == [b"jwks-1", b"jwks-2"]
        conn = client.connection(client.leader_for(topic_name, 0))
        assert conn.session_lifetime_ms == REAUTH_MS


@pytest.mark.parametrize(
    "listener,token",
    [
        ("OAUTH", "signed-by-another-key"),
        ("OAUTH", "unsigned"),
        ("SASL", "issuer-signed"),  # the unsecured validator takes unsigned tokens only
    ],
)
def test_tokens_the_validator_does_not_trust_are_refused(
    signin_kafka, signin_issuer, tmp_path, listener, token, monkeypatch
):
    bootstrap = signin_kafka.listener(listener)
    if token == "signed-by-another-key":
        (tmp_path / "token.jwt").write_text(token_signed_by_another_key(signin_issuer))
        allow_urls(monkeypatch, (tmp_path / "token.jwt").as_uri())
        options = oauth_options(
            bootstrap,
            **{
                "kafka.sasl.oauthbearer.token.endpoint.url": (tmp_path / "token.jwt").as_uri(),
                "kafka.sasl.login.callback.handler.class": OAUTH_HANDLER,
                "kafka.sasl.jaas.config": f"{OAUTH_MODULE} required;",
            },
        )
    elif token == "unsigned":
        options = unsecured_token_options(bootstrap)
    else:
        options = issuer_token_options(bootstrap, signin_issuer)
    config = parse_reader_options({**options, "subscribe": "unused"}).client_config
    factory = config.sasl_mechanism_factory
    sent = TOKEN_CACHE.get(factory.source, factory.policy).value.reveal()  # what goes out
    with pytest.raises(AuthenticationError) as info:
        with KafkaClient(config) as client:
            client.refresh_metadata([])
    message = str(info.value)
    assert message.startswith(
        f"SASL OAUTHBEARER authentication at {bootstrap} failed; "
        'broker status {"status": "invalid_token"}; check '
    )
    assert message.count("invalid_token") == 1
    assert_no_secret(info.value, secrets=[sent, CLIENT_SECRET])


# ---- Spark, through the same options ---------------------------------------------------------


@pytest.mark.spark
def test_spark_writes_and_reads_over_tls_with_scram_and_an_oidc_token(
    spark, signin_kafka, signin_issuer, signin_pki, topic_name
):
    """Over the SASL_SSL listener: df.write signed in with SCRAM-SHA-512 (the JVM-style JAAS
    line), then spark.read of the same records with an OIDC token the broker checks against
    the issuer's JWKS: the options (the CA file too) reach the tasks, which sign in
    themselves."""
    tls = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.cafile": str(signin_pki / "ca.pem"),
        "kafka.bootstrap.servers": signin_kafka.listener("SASL_SSL"),
    }
    scram = {
        **sasl_options(signin_kafka, "SCRAM-SHA-512"),
        **tls,
        "kafka.sasl.jaas.config": (
            f'{SCRAM_MODULE} required username="{USER}" password="{PASSWORD}";'
        ),
    }
    del scram["kafka.sasl.username"], scram["kafka.sasl.password"]
    with client_for(scram) as client:
        client.create_topics({topic_name: 2})
    expected = [f"row-{i:02d}" for i in range(20)]
    (
        spark.createDataFrame(
            [(v, i % 2) for i, v in enumerate(expected)], "value string, partition int"
        )
        .write.format("pykafka")
        .mode("append")
        .options(**scram)
        .option("topic", topic_name)
        .save()
    )
    # the operator's allow-list reaches Spark's Python workers as spark.executorEnv does
    with spark_worker_env(spark, PYKAFKA_ALLOWED_URLS=signin_issuer.token_endpoint):
        rows = (
            spark.read.format("pykafka")
            .options(
                **{**issuer_token_options(signin_kafka.listener("SASL_SSL"), signin_issuer), **tls}
            )
            .option("subscribe", topic_name)
            .load()
            .selectExpr("CAST(value AS STRING) AS v", "partition")
            .collect()
        )
    assert sorted((r.v, r.partition) for r in rows) == [(v, i % 2) for i, v in enumerate(expected)]


# ---- 3. KIP-368 re-authentication ------------------------------------------------------------


class SignIns:
    """Every SASL sign-in from now on: ``(connection, socket, requests were in flight)``."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def renewals(self, conn: BrokerConnection) -> list[bool]:
        """The re-authentications on ``conn``'s current socket (whether each had requests
        in flight); a new socket starts again from none."""
        sock = conn.wait_handle()
        return [busy for c, s, busy in self.seen if c is conn and s is sock][1:]


@pytest.fixture
def sign_ins(monkeypatch) -> SignIns:
    record = SignIns()
    original = BrokerConnection._authenticate

    def counting(self, *args):
        record.seen.append((self, self.wait_handle(), not self.idle))
        return original(self, *args)

    monkeypatch.setattr(BrokerConnection, "_authenticate", counting)
    return record


#: Long enough for two re-authentications (at 85 % of each 3 s session) on a loaded machine.
BUSY_FOR_AT_MOST_S = 30


def test_connection_kept_busy_signs_in_again_on_the_same_socket(signin_kafka, topic_name, sign_ins):
    """Produce requests one after the other until the connection signed in again twice
    (each time before its session's end): the broker never closed it (the same socket
    served them all) and every record landed."""
    with client_for(sasl_options(signin_kafka, "SCRAM-SHA-256")) as client:
        client.create_topics({topic_name: 1})
        client.wait_for_topics([topic_name])
        conn = client.connection(client.leader_for(topic_name, 0))
        sock = conn.wait_handle()
        sent = [0]

        def renewed_twice() -> bool:  # one record at a time, until two renewals
            batch = build_batch([Record(0, int(time.time() * 1000), None, b"%d" % sent[0])])
            assert client.produce(topic_name, 0, batch)["error_code"] == 0
            sent[0] += 1
            return len(sign_ins.renewals(conn)) >= 2

        wait_until(renewed_twice, BUSY_FOR_AT_MOST_S, "two renewals", interval=0.02)
        assert client.connection(client.leader_for(topic_name, 0)) is conn
        assert conn.wait_handle() is sock and len(sign_ins.renewals(conn)) == 2
        assert client.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): sent[0]}


def test_busy_producer_signs_in_again_with_requests_in_flight(signin_kafka, topic_name, sign_ins):
    """A task writes until its connection signed in again twice: it keeps Produce requests
    in flight all the time, so it signs in again with some in flight, and the broker never
    cuts the connection (then the producer would resend on a new one)."""
    options = parse_writer_options(
        {
            **sasl_options(signin_kafka, "SCRAM-SHA-512"),
            "topic": topic_name,
            "kafka.batch.size": "16384",
            # little waits at the end: the task flushes no backlog
            "kafka.buffer.memory": "1048576",
            "checkBeforeSendBytes": "65536",
        }
    )
    plan = WritePlan(
        topic_option=topic_name,
        topic_column=False,
        key_column=False,
        headers_column=False,
        partition_column=False,
        timestamp_kind=None,
    )
    written = [0]

    with KafkaClient(options.client_config) as client:
        client.create_topics({topic_name: 1})
        client.wait_for_topics([topic_name])
        conn = client.connection(client.leader_for(topic_name, 0))

        def batches():
            give_up = time.monotonic() + BUSY_FOR_AT_MOST_S
            while len(sign_ins.renewals(conn)) < 2 and time.monotonic() < give_up:
                start = written[0]
                written[0] += 1000
                yield pa.RecordBatch.from_arrays(
                    [pa.array([b"v%08d" % i for i in range(start, written[0])], pa.binary())],
                    names=["value"],
                )

        message = write_task(batches(), options, plan, client=client)
        assert client.connection(client.leader_for(topic_name, 0)) is conn
        renewals = sign_ins.renewals(conn)
        assert len(renewals) >= 2 and any(renewals)
        assert message.partitions[(topic_name, 0)][0] == written[0]
        assert client.latest_offsets([(topic_name, 0)]) == {(topic_name, 0): written[0]}


def test_broker_closes_a_connection_that_does_not_sign_in_again(signin_kafka, monkeypatch):
    """The control: with renewal put off past the session's end, the broker closes the
    connection at the first request after 3 s -- what the two tests above would meet."""
    monkeypatch.setattr(sasl_signin, "SESSION_RENEW_AT", 10.0)
    config = parse_reader_options(
        {**sasl_options(signin_kafka, "PLAIN"), "subscribe": "unused"}
    ).client_config
    host, port = signin_kafka.listener("SASL").split(":")
    with BrokerConnection(host, int(port), config) as conn:
        began = time.monotonic()

        def closed() -> bool:  # a request at a time, until one meets the broker's close
            conn.request(METADATA, METADATA_BODY)
            return False

        with pytest.raises(KafkaConnectionError, match="closed the connection|broke"):
            wait_until(closed, 2 * REAUTH_MS / 1000, "the broker closing it", interval=0.1)
        assert time.monotonic() - began >= 0.9 * REAUTH_MS / 1000


def test_connection_idle_past_its_session_end_is_replaced(signin_kafka):
    """Idle beyond the session's end (a driver's client between micro-batches): the next
    request goes out on a new connection, signed in afresh, instead of meeting the
    broker's close."""
    config = parse_reader_options(
        {**sasl_options(signin_kafka, "SCRAM-SHA-512"), "subscribe": "unused"}
    ).client_config
    host, port = signin_kafka.listener("SASL").split(":")
    with BrokerConnection(host, int(port), config) as conn:
        sock = conn.wait_handle()
        time.sleep(REAUTH_MS / 1000 + 0.3)  # idle past the session's end: the case under test
        assert conn.request(METADATA, METADATA_BODY)["brokers"]
        assert conn.wait_handle() is not sock and conn.session_lifetime_ms == REAUTH_MS


# ---- 4. the same sign-ins on older brokers ---------------------------------------------------


@pytest.mark.parametrize(
    "way", ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER-JWKS", "mTLS", "SASL_SSL-SCRAM-SHA-256"]
)
@pytest.mark.parametrize("version", [OLDEST_KAFKA, MIDDLE_KAFKA])
def test_sign_ins_on_older_kafka(
    kafka_clusters, signin_cluster_options, signin_pki, signin_issuer, topic_name, version, way
):
    older = kafka_clusters.get(version=version, **signin_cluster_options)
    if way == "OAUTHBEARER-JWKS":
        options = issuer_token_options(older.listener("OAUTH"), signin_issuer)
    elif way == "mTLS":
        options = tls_options(older, signin_pki)
    elif way.startswith("SASL_SSL-"):
        options = sasl_ssl_options(older, signin_pki, way.removeprefix("SASL_SSL-"))
    else:
        options = sasl_options(older, way)
    with client_for(options) as client:
        assert round_trip(client, topic_name, [version.encode(), way.encode()]) == [
            version.encode(),
            way.encode(),
        ]
