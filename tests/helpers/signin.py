"""Reader and writer options for the signed-in (SASL, OAUTHBEARER) listeners of the test
bed (tests/helpers/signin_cluster.py)."""

from __future__ import annotations

from kafka_testbed import SASL_USERS
from .signin_cluster import CLIENT, CLIENT_SECRET


USER = "alice"


PASSWORD = SASL_USERS[USER]


OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


OAUTH_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def sasl_options(cluster, mechanism: str, user: str = USER, password: str = PASSWORD) -> dict:
    return {
        "kafka.bootstrap.servers": cluster.listener("SASL"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.username": user,
        "kafka.sasl.password": password,
        "kafka.request.timeout.ms": "10000",
    }


def sasl_ssl_options(cluster, pki, mechanism: str) -> dict:
    """SASL over TLS (the SASL_SSL listener): the broker's CA, no client certificate."""
    return {
        **sasl_options(cluster, mechanism),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.bootstrap.servers": cluster.listener("SASL_SSL"),
        "kafka.ssl.cafile": str(pki / "ca.pem"),
    }


def oauth_options(bootstrap: str, **extra) -> dict:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.request.timeout.ms": "10000",
        **extra,
    }


def issuer_token_options(bootstrap: str, issuer) -> dict:
    """OIDC client credentials from the issuer's token endpoint (Kafka's handler's options)."""
    return oauth_options(
        bootstrap,
        **{
            "kafka.sasl.oauthbearer.token.endpoint.url": issuer.token_endpoint,
            "kafka.sasl.login.callback.handler.class": OAUTH_HANDLER,
            "kafka.sasl.jaas.config": (
                f"{OAUTH_MODULE} required clientId='{CLIENT}' "
                f"clientSecret='{CLIENT_SECRET}' scope='kafka';"
            ),
        },
    )
