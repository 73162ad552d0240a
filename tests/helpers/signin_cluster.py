"""The one Apache Kafka every sign-in test shares, with its certificates and its OIDC issuer.

``signin_pki`` (a directory, made once per session with trustme):

* ``ca.pem``: the CA everything below but the strangers' is signed by;
* ``server.pem``/``.key``: the broker's certificate, for 127.0.0.1 and localhost;
* ``client.pem``/``.key``: a client certificate the broker trusts (mutual TLS);
* ``expired-client.pem``/``.key``: one from the same CA whose validity ended yesterday;
* ``other-ca.pem``, ``stranger.pem``/``.key``: another CA and a client certificate from it;
* ``wrong-host.pem``/``.key``: a broker certificate naming only ``not-this-host.invalid``;
* ``expired.pem``/``.key``: a broker certificate for 127.0.0.1 that ended yesterday.

``signin_issuer`` is the test OIDC issuer (``tests/helpers/oidc_issuer.py``, RS256
client-credentials tokens for ``CLIENT``): the brokers' JWKS validators fetch its JWKS
from its endpoint (on the broker JVM's ``org.apache.kafka.sasl.oauthbearer.allowed.urls``)
and check the ``iss`` of each token against it.

``signin_cluster_options`` are the ``KafkaCluster`` options of the sign-in cluster, which
``kafka_clusters`` shares with every test asking for the same (``signin_kafka``: the newest
pinned Kafka; the compatibility tests ask for older versions with the same options):

========== ============== ===================================================================
listener   protocol       who gets in
========== ============== ===================================================================
SASL       SASL_PLAINTEXT PLAIN, SCRAM-SHA-256/512 (``SASL_USERS``), OAUTHBEARER (unsecured)
OAUTH      SASL_PLAINTEXT OAUTHBEARER checked against the issuer's JWKS
SSL        SSL            clients with a certificate from ``ca.pem`` (mutual TLS)
SASL_SSL   SASL_SSL       PLAIN, SCRAM, OAUTHBEARER (JWKS) over TLS; no client certificate
WRONG_HOST SSL            anyone; its certificate names another host
EXPIRED    SSL            anyone; its certificate has expired
========== ============== ===================================================================

``connections.max.reauth.ms`` is ``REAUTH_MS`` on the SASL listeners: every session ends
3 s after it began unless the client signs in again.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest

from kafka_source.options import parse_reader_options
from protocol.client.cluster import KafkaClient
from protocol.records.batch import Record, build_batch, iter_batches
from protocol.records.reference_decode import decode_batch

REAUTH_MS = 3000
CLIENT, CLIENT_SECRET = "spark-app", "Cl1ent-s3cret-for-kafka"


def _write(leaf, directory: Path, name: str) -> None:
    """``name.key`` and ``name.pem`` (the certificate, then its chain up to the CA)."""
    leaf.private_key_pem.write_to_path(str(directory / f"{name}.key"))
    (directory / f"{name}.pem").write_bytes(b"".join(c.bytes() for c in leaf.cert_chain_pems))


def make_pki(directory: Path) -> Path:
    """The files listed in the module's docstring, in ``directory``."""
    import trustme  # here, not above: conftest imports this module, and the suites run
    # under other Pythons (make test-pythons) have no trustme

    now = datetime.datetime.now(datetime.timezone.utc)
    ended = dict(
        not_before=now - datetime.timedelta(days=3), not_after=now - datetime.timedelta(days=1)
    )
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    _write(ca.issue_cert("127.0.0.1", "localhost"), directory, "server")
    _write(ca.issue_cert("pykafka-client"), directory, "client")
    _write(ca.issue_cert("pykafka-client", **ended), directory, "expired-client")
    _write(ca.issue_cert("not-this-host.invalid"), directory, "wrong-host")
    _write(ca.issue_cert("127.0.0.1", **ended), directory, "expired")
    other = trustme.CA()
    other.cert_pem.write_to_path(str(directory / "other-ca.pem"))
    _write(other.issue_cert("pykafka-client"), directory, "stranger")
    return directory


@pytest.fixture(scope="session")
def signin_pki(tmp_path_factory) -> Path:
    return make_pki(tmp_path_factory.mktemp("signin-pki"))


@pytest.fixture(scope="session")
def signin_issuer():
    """The test OIDC issuer for the whole session: the brokers fetch its JWKS."""
    from .oidc_issuer import OidcIssuer

    with OidcIssuer({CLIENT: {"secret": CLIENT_SECRET, "scopes": ["kafka"]}}) as running:
        yield running


@pytest.fixture(scope="session")
def signin_cluster_options(signin_pki, signin_issuer) -> dict:
    """Every listener at once; the same options (so the same files) for every version."""
    pki = signin_pki
    return dict(
        sasl=True,
        oauth_jwks=signin_issuer.jwks_endpoint,
        oauth_issuer=signin_issuer.issuer,
        ssl=(str(pki / "server.pem"), str(pki / "server.key")),
        ssl_client_ca=str(pki / "ca.pem"),
        sasl_ssl=True,
        ssl_listeners=(
            ("WRONG_HOST", (str(pki / "wrong-host.pem"), str(pki / "wrong-host.key"))),
            ("EXPIRED", (str(pki / "expired.pem"), str(pki / "expired.key"))),
        ),
        reauth_ms=REAUTH_MS,
    )


@pytest.fixture
def signin_kafka(kafka_clusters, signin_cluster_options):
    """The sign-in cluster on the newest pinned Kafka."""
    from kafka_testbed import NEWEST_KAFKA

    return kafka_clusters.get(version=NEWEST_KAFKA, **signin_cluster_options)


# ---- clients, as a Spark task builds them ----------------------------------------------------


def client_for(options: dict) -> KafkaClient:
    """A client built from reader options, as a Spark task builds it."""
    return KafkaClient(parse_reader_options({**options, "subscribe": "unused"}).client_config)


def tls_options(
    cluster,
    pki: Path,
    *,
    listener: str = "SSL",
    client_cert: str | None = "client",
    ca: str | None = "ca.pem",
) -> dict:
    """Options for ``listener`` (SSL): the CA file ``ca`` of ``pki`` (None: none given) and
    the client certificate ``client_cert`` (None: none)."""
    options = {
        "kafka.bootstrap.servers": cluster.listener(listener),
        "kafka.security.protocol": "SSL",
        "kafka.request.timeout.ms": "10000",
    }
    if ca:
        options["kafka.ssl.cafile"] = str(pki / ca)
    if client_cert:
        options.update(
            {
                "kafka.ssl.certfile": str(pki / f"{client_cert}.pem"),
                "kafka.ssl.keyfile": str(pki / f"{client_cert}.key"),
            }
        )
    return options


def round_trip(client: KafkaClient, topic: str, values: list[bytes]) -> list[bytes]:
    """Create ``topic``, produce ``values`` to it and fetch them back, all through
    ``client`` (so through its sign-in)."""
    client.create_topics({topic: 1})
    client.wait_for_topics([topic])
    now = int(time.time() * 1000)
    batch = build_batch([Record(i, now, None, v) for i, v in enumerate(values)])
    answer = client.produce(topic, 0, batch)
    assert answer["error_code"] == 0, answer
    records = client.fetch({(topic, 0): answer["base_offset"]})[(topic, 0)]["records"]
    return [r.value for pos, *_ in iter_batches(records) for r in decode_batch(records, pos)[1]]
