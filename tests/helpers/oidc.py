"""The JVM options of the OAUTHBEARER/OIDC tests."""

from __future__ import annotations


CLIENT, SECRET = "spark-app", "Cl1ent-s3cret-\u00e9"


MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def jvm_options(bootstrap: str, endpoint: str, secret: str = SECRET, scope: str = "kafka"):
    """The options a JVM user of Confluent Cloud copies (single quotes and all), with the
    kafka. prefix."""
    return {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": "t",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.token.endpoint.url": endpoint,
        "kafka.sasl.login.callback.handler.class": HANDLER,
        "kafka.sasl.jaas.config": (
            f"{MODULE} required clientId='{CLIENT}' "
            f"clientSecret='{secret}' scope='{scope}' "
            "extension_logicalCluster='lkc-abc12' "
            "extension_identityPoolId='pool-Xy9';"
        ),
        "kafka.request.timeout.ms": "5000",
    }
