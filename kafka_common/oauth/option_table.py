"""The OAUTHBEARER options' names, defaults and meanings, for the option tables and the
checks of ``kafka_common.connection_options``: a module of its own, so that reading a
connection's options does not import the token sources (HTTP, JSON Web Tokens) that only
an OAUTHBEARER sign-in needs (``options.oauthbearer_factory`` imports them)."""

from __future__ import annotations

__all__ = ["OAUTH_OPTIONS", "HANDLER_OPTION", "ENDPOINT_OPTION"]

HANDLER_OPTION = "kafka.sasl.login.callback.handler.class"
ENDPOINT_OPTION = "kafka.sasl.oauthbearer.token.endpoint.url"


#: (name, default, meaning) of the OAUTHBEARER options, for the option tables.
OAUTH_OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        HANDLER_OPTION,
        "none",
        "OAUTHBEARER token source: Kafka's OAuthBearerLoginCallbackHandler (OIDC client "
        "credentials or token file; a kafkashaded. prefix is accepted), AWS's "
        "IAMOAuthBearerLoginCallbackHandler (MSK IAM), Google's GcpLoginCallbackHandler "
        "(needs google-auth), or a Python callable module:function "
        "with confluent-kafka's oauth_cb contract. None: Kafka's unsecured tokens "
        "(unsecuredLoginStringClaim_sub in kafka.sasl.jaas.config).",
    ),
    (
        "kafka.sasl.client.callback.handler.class",
        "none",
        "Accepted for AWS_MSK_IAM when it names AWS's IAMClientCallbackHandler (not needed).",
    ),
    (
        ENDPOINT_OPTION,
        "none",
        "OIDC token endpoint (https: verified TLS), or file:/path of a token file read again "
        "when it changes.",
    ),
    (
        "kafka.sasl.oauthbearer.jwt.retriever.class",
        "by the URL",
        "KIP-1139: ClientCredentialsJwtRetriever or FileJwtRetriever.",
    ),
    (
        "kafka.sasl.oauthbearer.client.credentials.client.id",
        "none",
        "KIP-1139 form of the JAAS clientId.",
    ),
    (
        "kafka.sasl.oauthbearer.client.credentials.client.secret",
        "none",
        "KIP-1139 form of the JAAS clientSecret; never logged.",
    ),
    ("kafka.sasl.oauthbearer.scope", "none", "KIP-1139 form of the JAAS scope."),
    ("kafka.sasl.oauthbearer.sub.claim.name", '"sub"', "Claim of the token naming the principal."),
    (
        "kafka.sasl.oauthbearer.scope.claim.name",
        '"scope"',
        "Claim of the token holding its scopes (checked by the broker).",
    ),
    (
        "kafka.sasl.oauthbearer.header.urlencode",
        "false",
        "URL-encode the client id and secret in the token request's Basic header.",
    ),
    (
        "kafka.sasl.oauthbearer.config",
        '""',
        "The string handed to a module:function token callback (librdkafka's name).",
    ),
    (
        "kafka.sasl.oauthbearer.ssl.cafile",
        "system CAs",
        "PEM file of the authorities to trust for an https token endpoint.",
    ),
    ("kafka.sasl.login.connect.timeout.ms", "10000", "Token endpoint connect timeout."),
    ("kafka.sasl.login.read.timeout.ms", "10000", "Token endpoint read timeout."),
    (
        "kafka.sasl.login.retry.backoff.ms",
        "100",
        "First wait between token endpoint attempts (doubled each time).",
    ),
    (
        "kafka.sasl.login.retry.backoff.max.ms",
        "10000",
        "Longest wait in all between token endpoint attempts.",
    ),
    (
        "kafka.sasl.login.refresh.window.factor",
        "0.8",
        "Fraction of a token's lifetime after which a new one is fetched.",
    ),
    (
        "kafka.sasl.login.refresh.window.jitter",
        "0.05",
        "Random fraction of the lifetime added to the window factor.",
    ),
    (
        "kafka.sasl.login.refresh.min.period.seconds",
        "60",
        "Fetch a new token no more often than this.",
    ),
    (
        "kafka.sasl.login.refresh.buffer.seconds",
        "300",
        "Fetch a new token at least this long before the old one expires (where the "
        "min period allows).",
    ),
)
